"""Element-wise ops: unary activations, affine, binary with numpy-style
broadcasting, and the n-ary sum.

Which ops exist, their kind (unary, binary with broadcasting, n-ary), their
attributes and defaults, and their FLOPs per element are the kernel
library's op table (kernels/include/hwtune/eltwise_ops.def, read through
hwtune.native.eltwise), which the C engine serves from the same rows. This
module adds what only Python has: each op's numpy reference (the semantic
contract the C kernels and engine are tested against) and its
documentation. A model op in the C table without an entry in REFERENCES
stops the import with a message naming it.

FLOPs count one per output element per arithmetic step; transcendental
functions (sigmoid, tanh) count as one too, so FLOP totals compare graphs,
not instruction counts.
"""

import functools
import math
from typing import Callable, Dict, NamedTuple

import numpy as np

from hwtune.graph.ops import Attr, OpError, OpSpec, numel, register, show_shape
from hwtune.native.eltwise import TABLE


def broadcast(shapes):
    """numpy broadcasting of several shapes; raises OpError at the input
    that does not fit."""
    out = tuple(shapes[0])
    for i, s in enumerate(shapes[1:], start=1):
        rank = max(len(out), len(s))
        a = (1,) * (rank - len(out)) + tuple(out)
        b = (1,) * (rank - len(s)) + tuple(s)
        merged = []
        for x, y in zip(a, b):
            if x != y and 1 not in (x, y):
                raise OpError(f"shape {show_shape(s)} does not broadcast with "
                              f"{show_shape(out)}", f"inputs[{i}]")
            merged.append(max(x, y))
        out = tuple(merged)
    return out


class Reference(NamedTuple):
    """fn(arrays..., **attrs) in the inputs' dtype (float32 in models; the
    tests also pass float64 to get the exact value of an approximated op);
    doc: the formula; attr_docs: attribute name -> description."""

    fn: Callable
    doc: str
    attr_docs: Dict[str, str] = {}


def _sigmoid(x):
    # tanh form: exact identity, never overflows for large |x|.
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _libm(fn):
    """A scalar math function over an array, in float64, back in x's dtype
    (numpy has no erf)."""
    vec = np.frompyfunc(lambda v: fn(float(v)), 1, 1)
    return lambda x: vec(np.asarray(x, np.float64)).astype(np.float64).astype(x.dtype)


_erfc = _libm(math.erfc)


def _gelu(x):
    # erfc form: 1 + erf(z) = erfc(-z) without cancellation for negative x.
    x64 = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore"):
        return (0.5 * x64 * _erfc(-x64 * math.sqrt(0.5))).astype(x.dtype)


def _clip(x, min, max):  # noqa: A002 - the ONNX attribute names
    t = x.dtype.type
    lo, hi = (t(v) if math.isfinite(v) else t(math.copysign(math.inf, v)) for v in (min, max))
    y = np.where(x < lo, lo, x)
    return np.where(y > hi, hi, y)


def _pow(a, b):
    with np.errstate(all="ignore"):
        return np.power(np.asarray(a, np.float64), np.asarray(b, np.float64)).astype(
            np.result_type(a, b))


# -- activations of issue #41 -------------------------------------------------
# Exact ops repeat the kernels' float32 roundings; approximated ones (silu,
# mish, gelu_tanh, elu, selu, celu) compute in the inputs' dtype (float64
# in the error tests); softplus, log, sin and cos are libm in double rounded
# once, as the kernels compute them lane by lane.

def _hard_sigmoid(x, alpha, beta):
    t = x * x.dtype.type(alpha) + x.dtype.type(beta)
    t = np.where(t < 0, x.dtype.type(0), t)
    return np.where(t > 1, x.dtype.type(1), t)


def _hard_swish(x):
    return x * _hard_sigmoid(x, np.float32(1.0) / np.float32(6.0), 0.5)


def _exp(x):
    with np.errstate(over="ignore"):
        return np.exp(x)


def _silu(x):
    with np.errstate(over="ignore", invalid="ignore"):
        return x / (1 + _exp(-x))


def _mish(x):
    with np.errstate(over="ignore", invalid="ignore"):
        return x * np.tanh(np.log1p(_exp(x)))


def _gelu_tanh(x):
    u2 = 2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
    with np.errstate(over="ignore", invalid="ignore"):
        return x / (1 + _exp(-u2))


def _elu(x, alpha):
    with np.errstate(invalid="ignore"):
        return np.where(x > 0, x, x.dtype.type(alpha) * np.expm1(np.minimum(x, 0)))


def _celu(x, alpha):
    # x / alpha is rounded to float32 (the kernels' contract), e^z overflows
    # as a float32 would.
    z = (x.astype(np.float32) / np.float32(alpha)).astype(x.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.expm1(z)
        e = np.where(e > np.finfo(np.float32).max, np.inf, e)
        neg = x.dtype.type(alpha) * e
        y = np.where(x > 0, x, 0) + np.where(neg < 0, neg, 0)
    return np.where(np.isnan(x), x, y).astype(x.dtype)


def _prelu(a, b):
    zero = np.result_type(a, b).type(0)
    return np.where(a < 0, zero, a) + b * np.where(a > 0, zero, a)


def _softplus_scalar(v):
    return max(v, 0.0) + math.log1p(math.exp(-abs(v)))


def _log_scalar(v):
    if v > 0 and v != math.inf:
        return math.log(v)
    return v if v == math.inf or v != v else (-math.inf if v == 0 else math.nan)


def _domain(fn, inf=None):
    """fn(v) where math defines it; NaN outside its domain (sin(inf),
    acos(2)) and for NaN; inf(v) where C's libm returns an infinity that
    Python's math refuses (sinh / cosh overflow, atanh(+-1))."""
    def f(v):
        try:
            return fn(v)
        except (ValueError, OverflowError):
            r = inf(v) if inf is not None else None
            return math.nan if r is None else r
    return f


def _libm_f32(fn):
    """fn in double, each result rounded once to float32 (what the kernels'
    lane-by-lane ops compute)."""
    f = _libm(fn)
    return lambda x: f(np.asarray(x, np.float64)).astype(np.float32).astype(x.dtype)
def _quantize(x, scale, zero_point, qmin, qmax):
    t = x.dtype.type
    v = x / t(scale)
    lo, hi = t(qmin - zero_point), t(qmax - zero_point)
    v = np.where(v > lo, v, lo)  # NaN gives the low end, as the kernels
    v = np.where(v < hi, v, hi)
    return np.rint(v) + t(zero_point)


_Q_DOCS = {"scale": "quantization step (per tensor)",
           "zero_point": "the integer that represents 0.0"}


REFERENCES = {
    "add": Reference(np.add, "a + b"),
    "sub": Reference(np.subtract, "a - b"),
    "mul": Reference(np.multiply, "a * b"),
    "div": Reference(np.divide, "a / b"),
    # NaN from either side propagates, as numpy's minimum/maximum do.
    "minimum": Reference(np.minimum, "min(a, b)"),
    "maximum": Reference(np.maximum, "max(a, b)"),
    # floored modulo (result has the sign of b), as numpy and Python define
    # it; PhasedLSTM's phase needs a non-negative result for negative times.
    "mod": Reference(np.mod, "a - b * floor(a / b)"),
    "sum": Reference(np.add, "x0 + x1 + ... (two or more inputs, numpy broadcasting)"),
    "affine": Reference(
        lambda x, scale, shift: x * x.dtype.type(scale) + x.dtype.type(shift),
        "scale * x + shift (scalar constants: 1 - x is scale -1, shift 1)",
        {"scale": "multiplier", "shift": "added after scaling"}),
    "sigmoid": Reference(_sigmoid, "1 / (1 + exp(-x))"),
    "tanh": Reference(np.tanh, "tanh(x)"),
    # NaN and -0 kept, as ONNX Runtime's and PyTorch's Relu (and the kernels)
    "relu": Reference(lambda x: np.where(x < 0, x.dtype.type(0), x),
                      "x < 0 ? 0 : x (NaN and -0 kept, as ONNX Runtime's Relu)"),
    "abs": Reference(np.abs, "|x|"),
    "leaky_relu": Reference(
        lambda x, alpha: (np.where(x < 0, x.dtype.type(0), x)
                          + x.dtype.type(alpha) * np.where(x > 0, x.dtype.type(0), x)),
        "x > 0 ? x : alpha * x (ONNX LeakyRelu; NaN kept, as relu)",
        {"alpha": "slope for x < 0"}),
    "clip": Reference(_clip, "min(max(x, min), max), NaN kept (ONNX Clip; ReLU6 is clip(0, 6))",
                      {"min": "lower bound (default -inf: none)",
                       "max": "upper bound (default +inf: none)"}),
    "sqrt": Reference(np.sqrt, "sqrt(x)"),
    "exp": Reference(np.exp, "e^x (0 below e^-87.34, the smallest normal float)"),
    "erf": Reference(_libm(math.erf), "erf(x)"),
    "gelu": Reference(_gelu, "x / 2 * (1 + erf(x / sqrt(2))) (exact GELU, ONNX Gelu)"),
    # activations of issue #41
    "hard_sigmoid": Reference(_hard_sigmoid, "clamp(alpha * x + beta, 0, 1) (ONNX HardSigmoid)",
                              {"alpha": "slope", "beta": "offset"}),
    "hard_swish": Reference(_hard_swish, "x * clamp(x / 6 + 1/2, 0, 1) (ONNX HardSwish)"),
    "silu": Reference(_silu, "x * sigmoid(x) (SiLU / swish; ONNX Sigmoid -> Mul, fused)"),
    "mish": Reference(_mish, "x * tanh(log(1 + e^x)) (ONNX Mish)"),
    "gelu_tanh": Reference(_gelu_tanh, "x / 2 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) "
                           '(ONNX Gelu approximate="tanh")'),
    "softplus": Reference(_libm_f32(_softplus_scalar), "log(1 + e^x) (ONNX Softplus)"),
    "softsign": Reference(lambda x: x / (x.dtype.type(1) + np.abs(x)),
                          "x / (1 + |x|) (ONNX Softsign)"),
    "elu": Reference(_elu, "x > 0 ? x : alpha * (e^x - 1) (ONNX Elu)",
                     {"alpha": "scale of the negative part"}),
    "selu": Reference(lambda x, alpha, gamma: x.dtype.type(gamma) * _elu(x, alpha),
                      "gamma * (x > 0 ? x : alpha * (e^x - 1)) (ONNX Selu)",
                      {"alpha": "scale of the negative part", "gamma": "overall scale"}),
    "celu": Reference(_celu, "max(0, x) + min(0, alpha * (e^(x / alpha) - 1)) (ONNX Celu)",
                      {"alpha": "scale (not 0)"}),
    "thresholded_relu": Reference(lambda x, alpha: np.where(x > x.dtype.type(alpha), x,
                                                            x.dtype.type(0)),
                                  "x > alpha ? x : 0 (ONNX ThresholdedRelu)",
                                  {"alpha": "threshold"}),
    "prelu": Reference(_prelu, "a > 0 ? a : b * a, b the slope (ONNX PRelu; NaN kept, as "
                       "leaky_relu)"),
    "reciprocal": Reference(lambda x: x.dtype.type(1) / x, "1 / x"),
    "neg": Reference(lambda x: x * x.dtype.type(-1), "-x"),
    "sign": Reference(lambda x: np.where(x > 0, x.dtype.type(1),
                                         np.where(x < 0, x.dtype.type(-1), x)),
                      "1 for x > 0, -1 for x < 0, x itself for +-0 and NaN"),
    "log": Reference(_libm_f32(_log_scalar), "ln(x)"),
    "sin": Reference(_libm_f32(_domain(math.sin)), "sin(x)"),
    "cos": Reference(_libm_f32(_domain(math.cos)), "cos(x)"),
    "acos": Reference(_libm_f32(_domain(math.acos)), "arccos(x) (NaN outside [-1, 1])"),
    "asin": Reference(_libm_f32(_domain(math.asin)), "arcsin(x) (NaN outside [-1, 1])"),
    "atan": Reference(_libm_f32(_domain(math.atan)), "arctan(x)"),
    "tan": Reference(_libm_f32(_domain(math.tan)), "tan(x)"),
    "sinh": Reference(_libm_f32(_domain(math.sinh, lambda v: math.copysign(math.inf, v))),
                      "sinh(x)"),
    "cosh": Reference(_libm_f32(_domain(math.cosh, lambda v: math.inf)), "cosh(x)"),
    "asinh": Reference(_libm_f32(_domain(math.asinh)), "arsinh(x)"),
    "acosh": Reference(_libm_f32(_domain(math.acosh)), "arcosh(x) (NaN below 1)"),
    "atanh": Reference(_libm_f32(_domain(math.atanh, lambda v: math.copysign(math.inf, v)
                                         if abs(v) == 1 else None)),
                       "artanh(x) (+-inf at +-1, NaN beyond)"),
    "round": Reference(np.round, "x rounded to the nearest integer, halves to even (ONNX Round)"),
    "floor": Reference(np.floor, "floor(x)"),
    "ceil": Reference(np.ceil, "ceil(x)"),
    "pow": Reference(_pow, "a ^ b (libm pow in double, rounded to float)"),
    # comparisons and logic: 1.0 (true) or 0.0; an operand is true when
    # nonzero (NaN too, as numpy's astype(bool)); NaN compares false.
    "equal": Reference(lambda a, b: np.equal(a, b).astype(a.dtype), "a == b ? 1 : 0"),
    "not_equal": Reference(lambda a, b: np.not_equal(a, b).astype(a.dtype), "a != b ? 1 : 0"),
    "less": Reference(lambda a, b: np.less(a, b).astype(a.dtype), "a < b ? 1 : 0"),
    "less_equal": Reference(lambda a, b: np.less_equal(a, b).astype(a.dtype), "a <= b ? 1 : 0"),
    "greater": Reference(lambda a, b: np.greater(a, b).astype(a.dtype), "a > b ? 1 : 0"),
    "greater_equal": Reference(lambda a, b: np.greater_equal(a, b).astype(a.dtype),
                               "a >= b ? 1 : 0"),
    "logical_and": Reference(lambda a, b: np.logical_and(a, b).astype(a.dtype),
                             "(a != 0 and b != 0) ? 1 : 0"),
    "logical_or": Reference(lambda a, b: np.logical_or(a, b).astype(a.dtype),
                            "(a != 0 or b != 0) ? 1 : 0"),
    "logical_xor": Reference(lambda a, b: np.logical_xor(a, b).astype(a.dtype),
                             "((a != 0) != (b != 0)) ? 1 : 0"),
    "logical_not": Reference(lambda x: np.logical_not(x).astype(x.dtype), "x == 0 ? 1 : 0"),
    "trunc": Reference(np.trunc, "x rounded toward zero (ONNX Cast of a float to an integer)"),
    # quantized activations (issue #43): integer values carried in float32
    "quantize_u8": Reference(
        lambda x, scale, zero_point: _quantize(x, scale, zero_point, 0, 255),
        "clamp(round(x / scale) + zero_point, 0, 255), ties to even (ONNX QuantizeLinear, "
        "uint8; the integer carried in a float32)", _Q_DOCS),
    "quantize_s8": Reference(
        lambda x, scale, zero_point: _quantize(x, scale, zero_point, -128, 127),
        "clamp(round(x / scale) + zero_point, -128, 127), ties to even (ONNX QuantizeLinear, "
        "int8; the integer carried in a float32)", _Q_DOCS),
    "dequantize": Reference(
        lambda x, scale, zero_point: (x - x.dtype.type(zero_point)) * x.dtype.type(scale),
        "(x - zero_point) * scale (ONNX DequantizeLinear of integers carried in float32)",
        _Q_DOCS),
}


def _same_shape(in_shapes, attrs, n_out):
    return [tuple(in_shapes[0])]


def _broadcast_shape(in_shapes, attrs, n_out):
    return [broadcast(in_shapes)]


def _flops(k, nary):
    if nary:
        return lambda ins, outs, attrs: k * (len(ins) - 1) * numel(outs[0])
    return lambda ins, outs, attrs: k * numel(outs[0])


def _graph_ref(fn, nary):
    """The reference as the graph layer calls it: float32 arrays in and out;
    an n-ary op folds its inputs left to right, as the engine does."""
    def ref(arrays, attrs, n_out):
        out = functools.reduce(fn, arrays) if nary else fn(*arrays, **attrs)
        return [np.asarray(out, np.float32)]
    return ref


def _spec(info, ref):
    nary, unary = info.kind == "nary", info.kind == "unary"
    if unary:
        inputs, lo, hi, infer, suffix, layout = ("x",), 1, 1, _same_shape, "", "elementwise"
    elif nary:
        inputs, lo, hi, infer, suffix, layout = ("x0", "x1", "..."), 2, None, _broadcast_shape, \
            "", "join"
    else:
        inputs = ("a", "b", "c")[:info.operands]
        lo = hi = info.operands
        infer, suffix, layout = _broadcast_shape, " (numpy broadcasting)", "join"
    attrs = [Attr(name, "float", default, doc=ref.attr_docs.get(name, ""))
             for name, default in info.attrs]
    return OpSpec(info.name, inputs, lo, hi, infer, _graph_ref(ref.fn, nary),
                  _flops(info.flops, nary), attrs=attrs, doc=f"y = {ref.doc}{suffix}",
                  layout=layout)


_missing = [op.name for op in TABLE.values() if op.graph_op and op.name not in REFERENCES]
if _missing:
    raise RuntimeError(f"element-wise ops {_missing} are in the C table "
                       f"(eltwise_ops.def) but have no numpy reference in {__name__}")

for _info in TABLE.values():
    if _info.graph_op:
        register(_spec(_info, REFERENCES[_info.name]))
