"""How much a model may make hwtune read, parse, expand and allocate.

A model file comes from outside: a wrong or hostile one (a 10 GB file,
`/dev/zero`, JSON nested 100,000 deep, `${s + s}` doubled 40 times, a repeat
of a million steps) must be refused with a message naming the limit and how
to raise it, before it costs memory or a Python recursion error. Every limit
has an environment variable (so `hwtune run`, `tune-graph`, `check` and
`model validate` agree); the two size limits also have `model` flags.
"""

import os
import re
from dataclasses import dataclass, fields, replace
from hwtune.errors import UsageError

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Limits:
    """Limits on a model; Limits.from_env() applies HWTUNE_MAX_* variables.

    max_file_bytes: the largest bundled model file is 5.5 KiB (templates/
      inception.json) and the largest expanded one 0.35 MB (phased_lstm_large),
      so 64 MiB leaves room for models carrying `data` arrays while refusing
      a runaway file (or /dev/zero) at once.
    max_depth: JSON nesting (objects, arrays) of a file; the bundled
      templates nest at most 15 deep (repeat in repeat in an op's inputs).
      Python's own parser fails near 1,000.
    max_string_chars: any one string a model holds or an expression builds;
      names are tens of characters, a million is only reached by a mistake.
    max_expanded_items / max_expanded_chars: what expansion may produce in
      total (array items; characters of strings): phased_lstm_large expands
      to ~4,700 items and ~350,000 characters.
    max_tensor_bytes / max_total_bytes: one tensor above 1 GiB in a
      benchmark graph is almost always a wrong dimension (the largest
      bundled tensor, inception_large's first conv output, is 512 MiB); 8
      GiB for all tensors together (no buffer reuse assumed) stays well
      inside this 24 GiB machine shared by several users.
    """

    max_file_bytes: int = 64 * MiB
    max_depth: int = 64
    max_string_chars: int = 1_000_000
    max_expanded_items: int = 1_000_000
    max_expanded_chars: int = 256_000_000
    max_tensor_bytes: int = 1 * GiB
    max_total_bytes: int = 8 * GiB

    @classmethod
    def from_env(cls, environ=None, **given) -> "Limits":
        """Defaults, replaced by HWTUNE_MAX_* variables, replaced by the
        keyword arguments that are not None (command-line flags)."""
        environ = os.environ if environ is None else environ
        values = {}
        for f in fields(cls):
            var = ENV[f.name]
            raw = environ.get(var)
            if raw:
                values[f.name] = parse_size(raw, var)
        values.update({k: v for k, v in given.items() if v is not None})
        return replace(cls(), **values)


# Every limit's environment variable (and flag, where it has one): the text
# each refusal ends with.
ENV = {
    "max_file_bytes": "HWTUNE_MAX_MODEL_BYTES",
    "max_depth": "HWTUNE_MAX_JSON_DEPTH",
    "max_string_chars": "HWTUNE_MAX_STRING_CHARS",
    "max_expanded_items": "HWTUNE_MAX_EXPANDED_ITEMS",
    "max_expanded_chars": "HWTUNE_MAX_EXPANDED_CHARS",
    "max_tensor_bytes": "HWTUNE_MAX_TENSOR_BYTES",
    "max_total_bytes": "HWTUNE_MAX_TOTAL_BYTES",
}
FLAGS = {"max_tensor_bytes": "--max-tensor-bytes", "max_total_bytes": "--max-total-bytes"}


def how_to_raise(name: str) -> str:
    """'raise it with --max-tensor-bytes or HWTUNE_MAX_TENSOR_BYTES'."""
    flag = FLAGS.get(name)
    unit = "SIZE" if name.endswith("_bytes") else "N"
    return f"raise it with {flag + ' or ' if flag else ''}{ENV[name]}={unit}"


_UNITS = {"": 1, "b": 1, "k": KiB, "kib": KiB, "m": MiB, "mib": MiB, "g": GiB, "gib": GiB,
          "t": 1 << 40, "tib": 1 << 40}


def parse_size(text: str, what: str) -> int:
    """'512MiB', '1g', '1000000' -> bytes (or a plain count)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    unit = m.group(2).lower() if m else None
    if not m or unit not in _UNITS:
        raise UsageError(f'invalid {what} "{text}": expected a size such as 1GiB, 512MiB '
                         "or 1000000")
    value = int(float(m.group(1)) * _UNITS[unit])
    if value < 1:
        raise UsageError(f'invalid {what} "{text}": must be at least 1')
    return value


def human_bytes(n: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
