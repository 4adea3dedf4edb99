"""Expansion of the compact model.json constructs into an ordinary graph.

A model may declare `vars`, use `${expr}` in any string, and put two kinds of
directive objects in any JSON array:

    {"repeat": {"var": "t", "range": [0, "${seq}"]}, "body": [...]}
    {"repeat": {"var": "m", "in": [{...}, {...}]}, "body": [...]}
    {"if": "${expr}", "body": [...]}

Expansion replaces each directive by its body, once per value (nestable), with
`${...}` substituted; the result holds no directive and no `${`.  Expressions
are a safe subset of Python syntax evaluated here, never by eval(): integers,
floats, strings, variables, record fields (`m.c1`), + - * / // % **,
comparisons, and/or/not and `a if c else b`.
"""

import ast
import functools
import math
import operator
import re
from typing import Any, Dict, List, Optional, Tuple

from hwtune.graph.errors import fail
from hwtune.graph.limits import Limits, how_to_raise

# One `${...}` (no nesting: expressions never contain braces).
_SUBST = re.compile(r"\$\{([^{}]*)\}")

# Expansion refuses to produce more than Limits.max_expanded_items array
# items in total: a typo such as range [0, 3000000] must fail fast instead of
# eating memory (kept as a name for callers and tests).
MAX_EXPANDED_ITEMS = Limits.max_expanded_items

_MAX_INT = 2 ** 64

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_CMPOPS = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
    ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
}


class _ExprError(Exception):
    pass


def _eval_node(node, env, max_chars=Limits.max_string_chars):
    value = _eval(node, env, max_chars)
    if isinstance(value, float) and not math.isfinite(value):
        raise _ExprError("the result is not a finite number")
    if isinstance(value, complex):  # (-8) ** 0.5
        raise _ExprError("the result is not a real number")
    return value


def _eval(node, env, max_chars):
    if isinstance(node, ast.Expression):
        return _eval_node(node.body, env, max_chars)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise _ExprError(f'unknown variable "{node.id}"')
        return env[node.id]
    if isinstance(node, ast.Attribute):
        record = _eval_node(node.value, env, max_chars)
        if not isinstance(record, dict) or node.attr not in record:
            raise _ExprError(f'no field "{node.attr}"')
        return record[node.attr]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left = _eval_node(node.left, env, max_chars)
        right = _eval_node(node.right, env, max_chars)
        if isinstance(left, str) or isinstance(right, str):
            if not isinstance(node.op, ast.Add):
                raise _ExprError("arithmetic on a string")
            if not all(isinstance(v, (str, int, float, bool)) for v in (left, right)):
                raise _ExprError("a string joins only strings and numbers")
            # Checked before joining: 40 chained "${s + s}" would build a
            # string of 2**40 characters.
            if len(str(left)) + len(str(right)) > max_chars:
                raise _ExprError(f"the string would be longer than {max_chars} characters "
                                 f"({how_to_raise('max_string_chars')})")
            return f"{left}{right}"
        if not all(isinstance(v, (int, float)) for v in (left, right)):
            raise _ExprError("arithmetic needs numbers")
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise _ExprError("exponent too large")
        try:
            value = _BINOPS[type(node.op)](left, right)
        except ZeroDivisionError:
            raise _ExprError("division by zero") from None
        # No graph dimension comes near 2**64; bigger numbers are mistakes,
        # and unbounded ones ("${(10 ** 64) ** 64}") would eat time.
        if isinstance(value, int) and abs(value) > _MAX_INT:
            raise _ExprError("number too large")
        return value
    if isinstance(node, ast.UnaryOp):
        value = _eval_node(node.operand, env, max_chars)
        if isinstance(node.op, (ast.USub, ast.UAdd)) and (
                isinstance(value, bool) or not isinstance(value, (int, float))):
            raise _ExprError("a sign needs a number")
        if isinstance(node.op, ast.USub):
            return -value
        if isinstance(node.op, ast.UAdd):
            return +value
        if isinstance(node.op, ast.Not):
            return not value
    if isinstance(node, ast.Compare):
        left = _eval_node(node.left, env, max_chars)
        for op, comp in zip(node.ops, node.comparators):
            if type(op) not in _CMPOPS:
                break
            right = _eval_node(comp, env, max_chars)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        else:
            return True
    if isinstance(node, ast.BoolOp):
        values = [_eval_node(v, env, max_chars) for v in node.values]
        if isinstance(node.op, ast.And):
            return all(values)
        return any(values)
    if isinstance(node, ast.IfExp):
        test = _eval_node(node.test, env, max_chars)
        return _eval_node(node.body if test else node.orelse, env, max_chars)
    raise _ExprError("unsupported syntax")


@functools.lru_cache(maxsize=4096)
def _parse(text: str):
    # Templates evaluate the same few expressions thousands of times.
    try:
        return ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # ValueError: a NUL byte; RecursionError / MemoryError: the parser's
        # own stack on "((((..." or "1+1+...+1" thousands long.
        return None


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[:n] + "..."


def eval_expr(text: str, env: Dict[str, Any], where: str, budget=None):
    """Evaluate one `${...}` body; errors name the location and the text."""
    tree = _parse(text)
    if tree is None:
        fail(where, f'bad expression "${{{_short(text)}}}"')
    max_chars = budget.limits.max_string_chars if budget else Limits.max_string_chars
    try:
        value = _eval_node(tree, env, max_chars)
    except (_ExprError, TypeError, OverflowError, ValueError) as exc:
        fail(where, f'cannot evaluate "${{{_short(text)}}}": {exc}')
    except RecursionError:
        fail(where, f'cannot evaluate "${{{_short(text)}}}": nested too deeply')
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # "${hidden / 2}" is a valid shape entry
    return value


def substitute(text: str, env: Dict[str, Any], where: str, budget=None):
    """Substitute every `${...}` in a string.

    A string that is exactly one `${...}` keeps the value's type (so a shape
    entry "${hidden}" becomes the integer 512); otherwise values are spliced
    into the text.
    """
    whole = _SUBST.fullmatch(text)
    if whole:
        return eval_expr(whole.group(1), env, where, budget)
    if "${" not in text:
        return text
    out = _SUBST.sub(lambda m: str(eval_expr(m.group(1), env, where, budget)), text)
    if "${" in out:
        fail(where, f'unterminated or nested "${{" in "{_short(text)}"')
    limit = budget.limits.max_string_chars if budget else Limits.max_string_chars
    if len(out) > limit:
        fail(where, f"the string would be longer than {limit} characters "
                    f"({how_to_raise('max_string_chars')})")
    return out


class Budget:
    """What one expansion may still produce (Limits.max_expanded_items array
    items and max_expanded_chars characters of strings in total)."""

    def __init__(self, limits: Optional[Limits] = None):
        self.limits = limits or Limits()
        self.count = 0
        self.limit = self.limits.max_expanded_items
        self.chars = 0

    def add(self, n, where):
        self.count += n
        if self.count > self.limit:
            fail(where, f"expansion produces more than {self.limit} items (check the repeat "
                        f"ranges, or {how_to_raise('max_expanded_items')})")

    def add_chars(self, n, where):
        self.chars += n
        if self.chars > self.limits.max_expanded_chars:
            fail(where, f"expansion produces more than {self.limits.max_expanded_chars} "
                        f"characters of strings ({how_to_raise('max_expanded_chars')})")


def _is_directive(item) -> bool:
    return isinstance(item, dict) and ("repeat" in item or "if" in item) \
        and "body" in item


def _binding_text(bindings):
    parts = []
    for key, value in bindings:
        if isinstance(value, dict):
            label = value.get("name", "{...}")
            parts.append(f"{key}={label}")
        else:
            parts.append(f"{key}={value}")
    return ", ".join(parts)


def _iter_values(spec, env, where, budget) -> Tuple[str, List[Any]]:
    """The loop variable and the values it takes."""
    if not isinstance(spec, dict) or "var" not in spec:
        fail(where, 'repeat needs {"var": NAME, "range": [...]} or '
                    '{"var": NAME, "in": [...]}')
    var = spec["var"]
    if not isinstance(var, str) or not var.isidentifier():
        fail(f"{where}.var", f'"{var}" is not a valid variable name')
    if ("range" in spec) == ("in" in spec):
        fail(where, 'repeat needs exactly one of "range" or "in"')
    if "in" in spec:
        values = expand_value(spec["in"], env, f"{where}.in", budget)
        if not isinstance(values, list):
            fail(f"{where}.in", "must be an array")
        return var, values
    bounds = expand_value(spec["range"], env, f"{where}.range", budget)
    if (not isinstance(bounds, list) or len(bounds) not in (2, 3)
            or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)):
        fail(f"{where}.range", f"must be [start, stop] or [start, stop, step] "
                               f"integers, got {bounds!r}")
    if len(bounds) == 3 and bounds[2] == 0:
        fail(f"{where}.range", "step must not be 0")
    try:
        rng = range(*bounds)
        n = len(rng)
    except OverflowError:  # more iterations than a machine word counts
        n = None
    if n is None or n > budget.limit:
        fail(f"{where}.range", f"{'so many' if n is None else n} iterations is more than "
                               f"{budget.limit} ({how_to_raise('max_expanded_items')})")
    return var, list(rng)


def expand_list(items, env, where, counter, origin=None,
                scale=1) -> List[Tuple[Any, Optional[str]]]:
    """Expand an array; returns (value, origin) pairs.

    origin is None for items written literally at top level, else
    (template path, [(var, value), ...]) naming the item that produced it, so a
    problem in op 1234 of an expanded LSTM points back to the line to fix.
    """
    out = []
    for i, item in enumerate(items):
        path = f"{where}[{i}]"
        if not _is_directive(item):
            if isinstance(item, dict) and ("repeat" in item or "if" in item):
                fail(path, '"repeat"/"if" directive needs a "body" array')
            value = expand_value(item, env, path, counter)
            out.append((value, origin and (origin[0] + path[len(where):], origin[1])))
            continue
        body = item["body"]
        if not isinstance(body, list):
            fail(f"{path}.body", "must be an array")
        extra = set(item) - {"repeat", "if", "body", "comment"}
        if extra:
            fail(path, f'unknown key "{sorted(extra)[0]}" in directive')
        src = origin[0] + path[len(where):] if origin else path
        outer = origin[1] if origin else []
        if "if" in item:
            cond = item["if"]
            if isinstance(cond, str):
                cond = substitute(cond, env, f"{path}.if", counter)
            if cond:
                out.extend(expand_list(body, env, f"{path}.body", counter,
                                       (src + ".body", outer), scale))
            continue
        var, values = _iter_values(item["repeat"], env, f"{path}.repeat", counter)
        # Estimate the whole nest (this level times the enclosing trip
        # counts) so a runaway nest fails before expanding anything.
        if len(values) * len(body) * scale > counter.limit:
            fail(path, f"expansion produces more than {counter.limit} items (check the repeat "
                       f"ranges, or {how_to_raise('max_expanded_items')})")
        counter.add(len(values) * len(body), path)
        for value in values:
            inner = dict(env)
            inner[var] = value
            out.extend(expand_list(body, inner, f"{path}.body", counter,
                                   (src + ".body", outer + [(var, value)]),
                                   scale * len(values)))
    return out


def expand_value(value, env, where, counter):
    """Expand any JSON value (strings substituted, arrays expanded)."""
    if isinstance(value, str):
        out = substitute(value, env, where, counter)
        if isinstance(out, str):
            counter.add_chars(len(out), where)
        return out
    if isinstance(value, list):
        return [v for v, _ in expand_list(value, env, where, counter)]
    if isinstance(value, dict):
        return {k: expand_value(v, env, f"{where}.{k}", counter)
                for k, v in value.items()}
    return value


def origin_text(origin) -> Optional[str]:
    if origin is None:
        return None
    path, bindings = origin
    return f"{path}, {_binding_text(bindings)}" if bindings else path


def resolve_vars(declared: Dict[str, Any], overrides: Dict[str, Any], budget=None,
                 first: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Evaluate `vars` in order (later ones may use earlier ones).

    Overrides replace a declared value before anything depending on it is
    evaluated; overriding an undeclared variable is an error because it is
    almost always a typo (`--set hiden=512`), and so is an override of
    another kind than the value the model declares (see override_kind).
    first: each var's value where the extends chain first declares it (the
    template's own default), else its value in declared.
    """
    budget = budget or new_counter()
    unknown = sorted(set(overrides) - set(declared))
    if unknown:
        names = ", ".join(declared) or "none"
        fail(f"vars.{unknown[0]}",
             f'unknown variable "{unknown[0]}" (the model declares: {names})')
    env: Dict[str, Any] = {}
    for name, raw in declared.items():
        if not isinstance(name, str) or not name.isidentifier():
            fail(f"vars.{name}", f'"{name}" is not a valid variable name')
        where = f"vars.{name}"
        if name in overrides:
            base = (first or {}).get(name, raw)
            value = override_kind(name, overrides[name],
                                  _default_value(base, env, where, budget), where,
                                  shown=_default_value(raw, env, where, budget))
        else:
            value = raw
        env[name] = expand_value(value, env, where, budget)
    return env


def _default_value(raw, env, where, budget):
    """The declared default of an overridden var, or None when it cannot be
    evaluated without the override (then any kind is accepted)."""
    from hwtune.graph.errors import GraphError
    try:
        return expand_value(raw, env, where, budget)
    except GraphError:
        return None


def _kind(value) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _json_text(value) -> str:
    import json
    try:
        return _short(json.dumps(value))
    except (TypeError, ValueError):
        return _short(repr(value))


def override_kind(name: str, value, default, where: str, shown=None):
    """An override keeps the kind of the declared default: a flag stays true
    or false, a count declared >= 1 (a size: batch, seq, hidden, layers)
    stays >= 1, one declared >= 0 stays >= 0, a string stays a string (a
    number given for it becomes its text). `--set seq=0` is refused here
    instead of expanding to a model with no steps and no outputs."""
    if default is None or (isinstance(value, str) and "${" in value):
        return value  # an expression: checked where it is used
    declared = f"{name} = {_json_text(default if shown is None else shown)}"
    shown = f"{name}={value}" if isinstance(value, str) else f"{name}={_json_text(value)}"
    want = _kind(default)
    if isinstance(default, str):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        ok = isinstance(value, str)
    elif isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, (int, float)):
        if isinstance(value, float) and isinstance(default, int) and value.is_integer():
            value = int(value)
        num = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = num and (isinstance(value, int) or isinstance(default, float))
        ok = ok and math.isfinite(value)
        if ok and default >= 1 and value < 1:
            fail(where, f"override {shown}: must be {want} >= 1 (the model declares "
                        f"{declared}, a count or size)")
        if ok and default >= 0 and value < 0:
            fail(where, f"override {shown}: must be {want} >= 0 (the model declares "
                        f"{declared})")
    else:
        ok = type(value) is type(default)
    if not ok:
        fail(where, f"override {shown}: must be {want} like the declared {declared}")
    return value


def new_counter(limits: Optional[Limits] = None):
    return Budget(limits)
