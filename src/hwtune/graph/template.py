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
import operator
import re
from typing import Any, Dict, List, Optional, Tuple

from hwtune.graph.errors import fail

# One `${...}` (no nesting: expressions never contain braces).
_SUBST = re.compile(r"\$\{([^{}]*)\}")

# Expansion refuses to produce more than this many array items in total: a
# typo such as range [0, 3000000] must fail fast instead of eating memory.
# The largest bundled model (LSTM large, 40 steps x 4 layers) expands to
# ~3,000 items, so one million leaves room for any realistic workload.
MAX_EXPANDED_ITEMS = 1_000_000

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


def _eval_node(node, env):
    if isinstance(node, ast.Expression):
        return _eval_node(node.body, env)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise _ExprError(f'unknown variable "{node.id}"')
        return env[node.id]
    if isinstance(node, ast.Attribute):
        record = _eval_node(node.value, env)
        if not isinstance(record, dict) or node.attr not in record:
            raise _ExprError(f'no field "{node.attr}"')
        return record[node.attr]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval_node(node.left, env), _eval_node(node.right, env)
        if isinstance(left, str) or isinstance(right, str):
            if isinstance(node.op, ast.Add):
                return f"{left}{right}"
            raise _ExprError("arithmetic on a string")
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
        value = _eval_node(node.operand, env)
        if isinstance(node.op, ast.USub):
            return -value
        if isinstance(node.op, ast.UAdd):
            return +value
        if isinstance(node.op, ast.Not):
            return not value
    if isinstance(node, ast.Compare):
        left = _eval_node(node.left, env)
        for op, comp in zip(node.ops, node.comparators):
            if type(op) not in _CMPOPS:
                break
            right = _eval_node(comp, env)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        else:
            return True
    if isinstance(node, ast.BoolOp):
        values = [_eval_node(v, env) for v in node.values]
        if isinstance(node.op, ast.And):
            return all(values)
        return any(values)
    if isinstance(node, ast.IfExp):
        test = _eval_node(node.test, env)
        return _eval_node(node.body if test else node.orelse, env)
    raise _ExprError("unsupported syntax")


@functools.lru_cache(maxsize=4096)
def _parse(text: str):
    # Templates evaluate the same few expressions thousands of times.
    try:
        return ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return None


def eval_expr(text: str, env: Dict[str, Any], where: str):
    """Evaluate one `${...}` body; errors name the location and the text."""
    tree = _parse(text)
    if tree is None:
        fail(where, f'bad expression "${{{text}}}"')
    try:
        value = _eval_node(tree, env)
    except (_ExprError, TypeError, OverflowError) as exc:
        fail(where, f'cannot evaluate "${{{text}}}": {exc}')
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # "${hidden / 2}" is a valid shape entry
    return value


def substitute(text: str, env: Dict[str, Any], where: str):
    """Substitute every `${...}` in a string.

    A string that is exactly one `${...}` keeps the value's type (so a shape
    entry "${hidden}" becomes the integer 512); otherwise values are spliced
    into the text.
    """
    whole = _SUBST.fullmatch(text)
    if whole:
        return eval_expr(whole.group(1), env, where)
    if "${" not in text:
        return text
    out = _SUBST.sub(lambda m: str(eval_expr(m.group(1), env, where)), text)
    if "${" in out:
        fail(where, f'unterminated or nested "${{" in "{text}"')
    return out


class _Counter:
    def __init__(self, limit):
        self.count = 0
        self.limit = limit

    def add(self, n, where):
        self.count += n
        if self.count > self.limit:
            fail(where, f"expansion produces more than {self.limit} items "
                        "(check the repeat ranges)")


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


def _iter_values(spec, env, where) -> Tuple[str, List[Any]]:
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
        values = expand_value(spec["in"], env, f"{where}.in", new_counter())
        if not isinstance(values, list):
            fail(f"{where}.in", "must be an array")
        return var, values
    bounds = expand_value(spec["range"], env, f"{where}.range", new_counter())
    if (not isinstance(bounds, list) or len(bounds) not in (2, 3)
            or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)):
        fail(f"{where}.range", f"must be [start, stop] or [start, stop, step] "
                               f"integers, got {bounds!r}")
    if len(bounds) == 3 and bounds[2] == 0:
        fail(f"{where}.range", "step must not be 0")
    rng = range(*bounds)
    if len(rng) > MAX_EXPANDED_ITEMS:
        fail(f"{where}.range", f"{len(rng)} iterations is more than "
                               f"{MAX_EXPANDED_ITEMS}")
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
                cond = substitute(cond, env, f"{path}.if")
            if cond:
                out.extend(expand_list(body, env, f"{path}.body", counter,
                                       (src + ".body", outer), scale))
            continue
        var, values = _iter_values(item["repeat"], env, f"{path}.repeat")
        # Estimate the whole nest (this level times the enclosing trip
        # counts) so a runaway nest fails before expanding anything.
        if len(values) * len(body) * scale > counter.limit:
            fail(path, f"expansion produces more than {counter.limit} items "
                       "(check the repeat ranges)")
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
        return substitute(value, env, where)
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


def resolve_vars(declared: Dict[str, Any], overrides: Dict[str, Any]) -> Dict[str, Any]:
    """Evaluate `vars` in order (later ones may use earlier ones).

    Overrides replace a declared value before anything depending on it is
    evaluated; overriding an undeclared variable is an error because it is
    almost always a typo (`--set hiden=512`).
    """
    unknown = sorted(set(overrides) - set(declared))
    if unknown:
        names = ", ".join(declared) or "none"
        fail(f"vars.{unknown[0]}",
             f'unknown variable "{unknown[0]}" (the model declares: {names})')
    env: Dict[str, Any] = {}
    for name, raw in declared.items():
        if not isinstance(name, str) or not name.isidentifier():
            fail(f"vars.{name}", f'"{name}" is not a valid variable name')
        value = overrides.get(name, raw)
        env[name] = expand_value(value, env, f"vars.{name}", new_counter())
    return env


def new_counter():
    return _Counter(MAX_EXPANDED_ITEMS)
