"""Seeded mutation fuzzer over the bundled models: every mutant goes through
what `hwtune model validate` and `hwtune run` do with a model, and nothing
may end in anything but a clean refusal or a clean run.

Seeds are the bundled models (configs/models/, `extends` resolved, sizes
shrunk so a run takes milliseconds), both compact (vars, repeat, ${...})
and expanded. A mutant changes one to three things: a value replaced by an
awkward one (0, -1, 2**31, 1e30, 1e400, "", a lone surrogate, a NUL,
${...} expressions, null, containers), a key or item dropped or
duplicated, two names swapped, an op type changed, or the file's bytes
(a flipped or inserted byte, truncation, another encoding, NaN) so the
reader's own checks are exercised too.

Each mutant is then: loaded and validated (load_model: the one validator);
if it validates, stored as `hwtune run` stores it (graph and lowered form
in a results.db), run once on the C engine, and for small graphs run by the
numpy reference. The verdicts:

  refused     a typed hwtune error (HwtuneError) at load or validation
  ran         validated, stored, ran
  resource    validated, then the machine ran out of memory (NativeError)
  INTERNAL    any other exception: a bug
  ACCEPTED    validated, then `run` refused it with a typed error: validate
              must refuse everything run refuses
  CRASH       the worker process died (a C fault)
  HANG        a mutant took longer than --timeout seconds

Mutants run in worker processes (one per CPU), each made by its worker
from (seed, index); a worker that crashes or hangs is pinned on its
mutant and replaced. The test suite runs 200
(tests/test_fuzz_models.py); this script runs as many as asked:

    python benchmarks/fuzz_models.py --count 5000 --seed 0
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import fuzz_pool
from fuzz_pool import WorkerProcess

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "configs" / "models"
FAILURES = ("INTERNAL", "ACCEPTED", "CRASH", "HANG")

# Sizes a seed is shrunk to (its vars), so a valid mutant runs in ms.
SMALL = {"batch": 2, "seq": 2, "hidden": 8, "layers": 1, "image": 32, "channels": 4,
         "classes": 10, "width": 1, "input": 8, "modules": 2}
# Mutants may grow: a validated one runs on the engine only below this much
# work, and on the numpy reference only below the second figure (the
# reference's float64 im2col conv is ~100x slower than the engine).
MAX_RUN_FLOPS = 2e9
MAX_REFERENCE_FLOPS = 2e7
# Limits the workers validate with: a mutant may legally ask for a 1 GiB
# tensor, which is not what a fuzzer on a shared machine should allocate.
WORKER_ENV = {"HWTUNE_MAX_TENSOR_BYTES": str(64 << 20), "HWTUNE_MAX_TOTAL_BYTES": str(256 << 20)}

AWKWARD = [0, -1, 1, 2, 3, 7, 64, 2 ** 31 - 1, 2 ** 31, -(2 ** 31) - 1, 2 ** 63, 10 ** 30,
           -10 ** 30, 0.5, -0.0, 1e-300, 1e30, 1e39, 1e308, float("inf"), float("nan"), True,
           False, None, "", "x", "\u0000", "\ud800", "a\u00b5\u00d7", "\u202e" * 3, "x" * 300,
           "${", "${}", "${1/0}", "${2 ** 1000}", "${(-8) ** 0.5}", "${nope}", "${'a' + 1}",
           "${seq + seq}", "${hidden * 10 ** 6}", "${-1}", "${0}", "${1e400}",
           "${" + "(" * 300 + "1" + ")" * 300 + "}", "${" + "+".join(["1"] * 3000) + "}",
           [], [0], [-1, -1], [1, 2, 3, 4, 5], [[1]], {}, {"a": 1},
           {"repeat": {"var": "t", "range": [0, 10 ** 7]}, "body": [1]},
           {"repeat": {"var": "t", "range": [0, 3]}, "body": []},
           {"if": "${nope}", "body": [1]}]
OPS = ["relu", "add", "matmul", "conv2d", "pool2d", "concat", "split", "slice", "reshape",
       "softmax", "batch_norm", "layout_transform", "global_pool2d", "sum", "flatten",
       "gelu", "Relu", "", "conv", "x" * 40]


# -- seeds -------------------------------------------------------------------
def seeds() -> List[Tuple[str, Any]]:
    """(name, document) pairs: each bundled model, extends resolved and its
    size vars shrunk, compact and expanded; duplicates dropped."""
    from hwtune.graph.limits import Limits
    from hwtune.graph.model import _read_json, _resolve_extends, load_model

    out, seen = [], set()
    limits = Limits()
    for path in sorted(MODELS.glob("*.json")) + sorted((MODELS / "templates").glob("*.json")):
        doc, _ = _resolve_extends(_read_json(str(path), limits), str(path), limits)
        doc = dict(doc)
        doc.pop("extends", None)
        v = dict(doc.get("vars", {}))
        for k in v:
            if k in SMALL and isinstance(v[k], int) and not isinstance(v[k], bool):
                v[k] = SMALL[k]
        doc["vars"] = v
        for name, d in ((path.stem, doc), (path.stem + "/expanded", None)):
            if d is None:
                try:
                    d = load_model(doc).to_json()
                except Exception:
                    continue
            key = json.dumps(d, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append((name, d))
    return out


# -- mutation ----------------------------------------------------------------
def _paths(doc) -> List[Tuple]:
    """Every (container, key) in doc, iteratively."""
    out, stack = [], [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) \
            if isinstance(node, list) else ()
        for k, v in items:
            out.append((node, k))
            if isinstance(v, (dict, list)):
                stack.append(v)
    return out


def _strings(doc) -> List[str]:
    return [c[k] for c, k in _paths(doc) if isinstance(c[k], str)]


def mutate_doc(doc, rng: random.Random) -> Tuple[Any, str]:
    doc = copy.deepcopy(doc)
    paths = _paths(doc)
    if not paths:
        return doc, "empty"
    container, key = rng.choice(paths)
    kind = rng.choice(["value", "value", "drop", "dup", "swap", "name", "op", "key", "grow",
                       "attr", "attr", "shape", "data", "init"])
    ops = [c for c, k in paths if k == "op" and isinstance(c, dict)]
    tensors = [c for c, k in paths if k == "shape" and isinstance(c, dict)]
    if kind == "attr" and ops:
        _mutate_attr(rng.choice(ops), rng)
    elif kind in ("shape", "data", "init") and tensors:
        _mutate_tensor(rng.choice(tensors), kind, rng)
    elif kind == "value":
        container[key] = copy.deepcopy(rng.choice(AWKWARD))
    elif kind == "drop":
        del container[key]
    elif kind == "dup" and isinstance(container, list):
        container.insert(key, copy.deepcopy(container[key]))
    elif kind == "swap":
        other, okey = rng.choice(paths)
        try:
            container[key], other[okey] = other[okey], container[key]
        except (KeyError, IndexError):
            pass
    elif kind == "name":
        names = _strings(doc) or ["x"]
        container[key] = rng.choice(names)
    elif kind == "op":
        ops = [c for c, k in paths if k == "op" and isinstance(c, dict)]
        if ops:
            rng.choice(ops)["op"] = rng.choice(OPS)
    elif kind == "key" and isinstance(container, dict):
        container[rng.choice(["attrs", "data", "init", "shape", "outputs", "repeat", "body",
                              "extends", "vars", "zz"])] = copy.deepcopy(rng.choice(AWKWARD))
    elif kind == "grow" and isinstance(container[key], int) and not isinstance(
            container[key], bool):
        container[key] = container[key] * rng.choice([2, 10, 1000, -1])
    return doc, kind


def _mutate_attr(op: Dict[str, Any], rng: random.Random) -> None:
    """An attribute of the op's own kind set to an awkward value."""
    from hwtune.graph import ops as oplib
    spec = oplib.get(op.get("op")) if isinstance(op.get("op"), str) else None
    names = [a.name for a in spec.attrs] if spec else []
    attrs = op.get("attrs") if isinstance(op.get("attrs"), dict) else {}
    name = rng.choice(names + ["bogus"]) if names else "axis"
    value = rng.choice([rng.choice(AWKWARD), rng.randint(-3, 9), [rng.randint(-1, 40)] * 2,
                        [rng.randint(0, 9) for _ in range(rng.randint(0, 5))], "NCHW8c",
                        "NCHW", "OIHW8i8o", "max", "avg"])
    attrs[name] = copy.deepcopy(value)
    op["attrs"] = attrs


def _mutate_tensor(t: Dict[str, Any], kind: str, rng: random.Random) -> None:
    shape = t.get("shape") if isinstance(t.get("shape"), list) else [1]
    if kind == "shape":
        dims = list(shape)
        if dims and rng.random() < 0.7:
            dims[rng.randrange(len(dims))] = rng.choice([0, -1, 1, 3, 2 ** 31, 10 ** 12, "${seq}"])
        else:
            dims = [rng.randint(1, 9) for _ in range(rng.randint(0, 8))]
        t["shape"] = dims
        return
    if kind == "data":
        n = 1
        for d in shape:
            n *= d if isinstance(d, int) and not isinstance(d, bool) and 0 < d < 10 ** 4 else 1
        n = min(n, 4096) + rng.choice([0, 0, 0, -1, 1])
        values = [rng.uniform(-2, 2) for _ in range(max(n, 0))]
        if values and rng.random() < 0.5:
            values[rng.randrange(len(values))] = rng.choice(
                [float("nan"), float("inf"), 1e39, -1e39, "1", None, True, [1.0], 3])
        t.pop("init", None)
        t["data"] = values if rng.random() < 0.8 else [values]
        return
    t["init"] = rng.choice(["uniform", "normal", "zeros", "ones", "constant", "bogus", 3])
    for key in rng.sample(["scale", "low", "high", "value"], rng.randint(0, 3)):
        t[key] = rng.choice([0.1, -1.0, 1e38, 1e39, float("inf"), float("nan"), "x", 10 ** 40])


def mutate_text(text: str, rng: random.Random) -> Tuple[bytes, str]:
    data = text.encode("utf-8")
    kind = rng.choice(["flip", "insert", "truncate", "utf16", "nan", "deep", "bom"])
    edited = fuzz_pool.edit_bytes(data, kind, rng)
    if edited is not None:
        data = edited
    elif kind == "utf16":
        data = text.encode("utf-16")
    elif kind == "nan":
        data = data.replace(b"1", b"NaN", 1) if rng.random() < 0.5 else \
            data.replace(b"2", b"Infinity", 1)
    elif kind == "deep":
        n = rng.choice([65, 1000, 100000])
        data = data.replace(b"[", b"[" * n, 1).replace(b"]", b"]" * n, 1)
    elif kind == "bom":
        data = b"\xef\xbb\xbf" + data
    return data, kind


def make_mutant(seed_docs, index: int, base_seed: int) -> Dict[str, Any]:
    """Mutant `index` of the run seeded base_seed (reproducible alone)."""
    rng = random.Random(base_seed * 1_000_003 + index)
    name, doc = seed_docs[rng.randrange(len(seed_docs))]
    desc = [name]
    if rng.random() < 0.15:
        data, kind = mutate_text(json.dumps(doc), rng)
        return {"index": index, "what": f"{name}: text {kind}", "bytes": data}
    for _ in range(rng.choice([1, 1, 2, 3])):
        doc, kind = mutate_doc(doc, rng)
        desc.append(kind)
    overrides = {}
    vars_ = doc.get("vars") if isinstance(doc, dict) else None
    if isinstance(vars_, dict) and vars_ and rng.random() < 0.2:
        k = rng.choice(list(vars_))
        overrides[k] = copy.deepcopy(rng.choice(AWKWARD))
        desc.append(f"--set {k}")
    return {"index": index, "what": " ".join(desc), "doc": doc, "overrides": overrides}


# -- the oracle --------------------------------------------------------------
_db = None


def _worker_init():
    os.environ.update(WORKER_ENV)


def check_mutant(m: Dict[str, Any]) -> Tuple[str, str]:
    """(verdict, detail) for one mutant, as model validate + run treat it."""
    global _db
    from hwtune.errors import HwtuneError, NativeError
    from hwtune.graph import load_model

    tmp = None
    try:
        if "bytes" in m:
            fd, tmp = tempfile.mkstemp(suffix=".json")
            with os.fdopen(fd, "wb") as fh:
                fh.write(m["bytes"])
            source, overrides = tmp, {}
        else:
            source, overrides = m["doc"], m["overrides"]
        try:
            graph = load_model(source, overrides)
        except HwtuneError as exc:
            return "refused", str(exc)[:200]
        return _run(graph, NativeError, HwtuneError)
    except RecursionError as exc:
        return "INTERNAL", f"RecursionError: {exc}"[:300]
    except Exception as exc:  # noqa: BLE001 - every other exception is the finding
        return "INTERNAL", f"{type(exc).__name__}: {exc}"[:300]
    finally:
        if tmp:
            os.unlink(tmp)


def _run(graph, NativeError, HwtuneError) -> Tuple[str, str]:
    """What `hwtune run` does after validation: store, run, reference."""
    global _db
    from hwtune.db import ResultsDB
    from hwtune.engine.config import EngineConfig
    from hwtune.engine.lowered import lowered_doc
    from hwtune.engine.runner import open_engine
    from hwtune.graph import run_reference
    from hwtune.graph.info import graph_info

    try:
        if _db is None:
            _db = ResultsDB.open(":memory:")
        key = _db.put_graph(graph.to_json())
        _db.put_lowered(key, lowered_doc(graph))
        flops = graph_info(graph).flops
        if flops > MAX_RUN_FLOPS:
            return "ran", f"stored; {flops / 1e9:.1f} GFLOP: not run"
        engine = open_engine(graph, EngineConfig(executors=1, threads=1))
        try:
            engine.run()
            engine.outputs()
        finally:
            engine.close()
        if flops <= MAX_REFERENCE_FLOPS:
            import numpy as np
            with np.errstate(all="ignore"):  # inf/nan from the model's own values
                run_reference(graph)
    except NativeError as exc:
        if "out of memory" in str(exc):
            return "resource", str(exc)[:200]
        return "ACCEPTED", f"NativeError after validation: {exc}"[:300]
    except HwtuneError as exc:
        return "ACCEPTED", f"{type(exc).__name__} after validation: {exc}"[:300]
    return "ran", ""


# -- the driver ----------------------------------------------------------------
def _worker_loop(seed: int) -> None:
    """A worker process: reads mutant indices on stdin, makes each mutant
    itself (they are reproducible from (seed, index)), answers one JSON line
    per mutant on stdout."""
    _worker_init()
    import warnings
    warnings.simplefilter("ignore")  # numpy overflow in the reference is not a finding
    seed_docs = seeds()
    out = sys.stdout
    for line in sys.stdin:
        index = int(line)
        verdict, detail = check_mutant(make_mutant(seed_docs, index, seed))
        out.write(json.dumps({"i": index, "v": verdict, "d": detail}) + "\n")
        out.flush()


class _Worker(WorkerProcess):
    def __init__(self, seed: int):
        super().__init__([sys.executable, os.path.abspath(__file__), "--worker", "--seed",
                          str(seed)], {**os.environ, **WORKER_ENV})

    def ask(self, index: int, timeout: float) -> Tuple[str, str]:
        import select
        gone = self.send(index)
        if gone:
            return gone
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            self.kill()
            return "HANG", f"no answer in {timeout:.0f} s"
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            return "CRASH", f"worker died (exit {code})"
        doc = json.loads(line)
        return doc["v"], doc["d"]


def run_fuzz(count: int, seed: int = 0, workers: Optional[int] = None,
             timeout: float = 60.0, progress=None) -> Dict[str, Any]:
    """Run `count` mutants; returns {verdict: n} counts, the failures (each
    with its mutant's description) and the time taken. A worker that
    crashes or hangs is replaced and the rest of its mutants go on."""
    workers = workers or max(1, len(os.sched_getaffinity(0)))
    t0 = time.monotonic()
    verdicts = fuzz_pool.drive(list(range(count)), lambda: _Worker(seed), timeout, workers,
                               progress)
    counts = Counter(v for v, _ in verdicts.values())
    failures = []
    if any(v in FAILURES for v, _ in verdicts.values()):
        seed_docs = seeds()
        failures = [{"index": i, "verdict": v, "detail": d,
                     "mutant": make_mutant(seed_docs, i, seed)["what"]}
                    for i, (v, d) in sorted(verdicts.items()) if v in FAILURES]
    return {"count": count, "seed": seed, "workers": workers, "seeds": len(seeds()),
            "verdicts": dict(counts), "failures": failures,
            "seconds": round(time.monotonic() - t0, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per mutant")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _worker_loop(args.seed)
        return 0

    def progress(done, total):
        if not args.json and sys.stderr.isatty():
            print(f"\r{done}/{total}", end="", file=sys.stderr, flush=True)

    out = run_fuzz(args.count, args.seed, args.workers, timeout=args.timeout,
                   progress=progress)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        fuzz_pool.print_summary(out, out["failures"][:50], 9)
    return 1 if out["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
