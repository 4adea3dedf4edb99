"""Every op's numpy reference against an independent computation (explicit
Python loops on tiny shapes), plus shape inference, attributes and FLOPs."""

import itertools
import math

import numpy as np
import pytest

from hwtune.graph import ops as oplib
from hwtune.graph.ops import OpError
from hwtune.graph.ops.conv import conv2d_knobs
from hwtune.graph.ops.layout import to_nchwc, to_oihwio
from hwtune.native import conv as native_conv

RNG = np.random.default_rng(1234)


def rand(*shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape).astype(np.float32)


def run(op, arrays, n_out=1, **attrs):
    """Infer shapes, run the reference, check they agree; returns outputs."""
    spec = oplib.get(op)
    resolved = spec.normalize_attrs(attrs)
    shapes = spec.infer([a.shape for a in arrays], resolved, n_out)
    outs = spec.ref(arrays, resolved, n_out)
    assert [tuple(o.shape) for o in outs] == [tuple(s) for s in shapes]
    assert all(o.dtype == np.float32 for o in outs)
    return outs


def elementwise(fn, *arrays):
    """Apply a scalar Python function with numpy broadcasting of indices."""
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    out = np.empty(shape, np.float64)
    views = [np.broadcast_to(a, shape) for a in arrays]
    for idx in np.ndindex(*shape):
        out[idx] = fn(*(float(v[idx]) for v in views))
    return out


def conv_loops(x, w, b, stride, pad, dil=(1, 1), end=None):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    end = pad if end is None else end
    oh = (h + pad[0] + end[0] - (kh - 1) * dil[0] - 1) // stride[0] + 1
    ow = (wd + pad[1] + end[1] - (kw - 1) * dil[1] - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    for ni, oi, y, xx in itertools.product(range(n), range(o), range(oh), range(ow)):
        acc = float(b[oi]) if b is not None else 0.0
        for ci, i, j in itertools.product(range(c), range(kh), range(kw)):
            r = y * stride[0] + i * dil[0] - pad[0]
            s = xx * stride[1] + j * dil[1] - pad[1]
            if 0 <= r < h and 0 <= s < wd:
                acc += float(x[ni, ci, r, s]) * float(w[oi, ci, i, j])
        out[ni, oi, y, xx] = acc
    return out


def conv_transpose_loops(x, w, b, stride, pad, dil, end, out_pad):
    """Scatter each input value over its window, then crop: the definition."""
    n, c, h, wd = x.shape
    _, o, kh, kw = w.shape
    oh = (h - 1) * stride[0] + (kh - 1) * dil[0] + 1 - pad[0] - end[0] + out_pad[0]
    ow = (wd - 1) * stride[1] + (kw - 1) * dil[1] + 1 - pad[1] - end[1] + out_pad[1]
    out = np.zeros((n, o, oh, ow))
    for ni, ci, y, xx, oi, i, j in itertools.product(range(n), range(c), range(h), range(wd),
                                                     range(o), range(kh), range(kw)):
        r = y * stride[0] + i * dil[0] - pad[0]
        q = xx * stride[1] + j * dil[1] - pad[1]
        if 0 <= r < oh and 0 <= q < ow:
            out[ni, oi, r, q] += float(x[ni, ci, y, xx]) * float(w[ci, oi, i, j])
    if b is not None:
        out += np.asarray(b, np.float64).reshape(1, o, 1, 1)
    return out


def pool_loops(x, mode, k, s, p, ceil_mode=False, include_pad=False, end=None):
    n, c, h, w = x.shape
    end = p if end is None else end

    def out_len(size, kk, ss, pp, ee):
        span = size + pp + ee - kk
        o = (math.ceil(span / ss) if ceil_mode else span // ss) + 1
        if ceil_mode and (o - 1) * ss >= size + pp:
            o -= 1
        return o

    oh, ow = out_len(h, k[0], s[0], p[0], end[0]), out_len(w, k[1], s[1], p[1], end[1])
    out = np.zeros((n, c, oh, ow))
    for ni, ci, y, xx in itertools.product(range(n), range(c), range(oh), range(ow)):
        r0, c0 = y * s[0] - p[0], xx * s[1] - p[1]
        vals, count = [], 0
        for i, j in itertools.product(range(k[0]), range(k[1])):
            r, q = r0 + i, c0 + j
            if 0 <= r < h and 0 <= q < w:
                vals.append(float(x[ni, ci, r, q]))
                count += 1
            elif include_pad and r < h + end[0] and q < w + end[1]:
                count += 1
        out[ni, ci, y, xx] = max(vals) if mode == "max" else sum(vals) / count
    return out


# ---- element-wise --------------------------------------------------------

# op -> (scalar oracle taking the attributes as keywords, attributes to test
# besides the defaults).
UNARY_ORACLES = {
    "sigmoid": (lambda v: 1.0 / (1.0 + math.exp(-v)), None),
    "tanh": (math.tanh, None),
    # NaN and -0 kept, as ONNX Runtime's Relu and LeakyRelu
    "relu": (lambda v: 0.0 if v < 0 else v, None),
    "abs": (abs, None),
    "leaky_relu": (lambda v, alpha=0.01: alpha * v if v < 0 else v,
                   {"alpha": 0.2}),
    "clip": (lambda v, min=-math.inf, max=math.inf: v if v != v else  # noqa: A002
             (min if v < min else max if v > max else v), {"min": -0.5, "max": 2.0}),
    "sqrt": (lambda v: math.sqrt(v) if v >= 0 else math.nan, None),
    "exp": (math.exp, None),
    "erf": (math.erf, None),
    "gelu": (lambda v: 0.5 * v * math.erfc(-v / math.sqrt(2.0)), None),
    # floor/ceil keep the sign of a zero result: floor(-0) = -0, ceil(-0.5) = -0
    "floor": (lambda v: v if not math.isfinite(v) else math.copysign(math.floor(v), v), None),
    "ceil": (lambda v: v if not math.isfinite(v) else math.copysign(math.ceil(v), v), None),
    "trunc": (lambda v: v if not math.isfinite(v) else math.copysign(math.trunc(v), v), None),
    # bool as 1.0 / 0.0: NaN is nonzero, so true
    "logical_not": (lambda v: 1.0 if v == 0 else 0.0, None),
}


def _pow(a, b):
    try:
        return math.pow(a, b)
    except ValueError:  # a negative base to a fractional power
        return math.nan

BINARY_ORACLES = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "minimum": min,
    "maximum": max,
    "mod": lambda a, b: a % b,  # Python's float % is floored, like numpy's
    "pow": _pow,
    "equal": lambda a, b: float(a == b),
    "not_equal": lambda a, b: float(a != b),
    "less": lambda a, b: float(a < b),
    "less_equal": lambda a, b: float(a <= b),
    "greater": lambda a, b: float(a > b),
    "greater_equal": lambda a, b: float(a >= b),
    "logical_and": lambda a, b: float(a != 0 and b != 0),
    "logical_or": lambda a, b: float(a != 0 or b != 0),
    "logical_xor": lambda a, b: float((a != 0) != (b != 0)),
}


@pytest.mark.parametrize("op", sorted(UNARY_ORACLES))
def test_unary(op):
    x = rand(3, 5, low=-6, high=6)
    fn, attrs = UNARY_ORACLES[op]
    for kw in [{}] + ([attrs] if attrs else []):
        (y,) = run(op, [x], **kw)
        np.testing.assert_allclose(y, elementwise(lambda v: fn(v, **kw), x), rtol=1e-6,
                                   atol=1e-6, err_msg=str(kw))


@pytest.mark.parametrize("op", sorted(UNARY_ORACLES))
def test_unary_special_values(op):
    """Infinities, NaN and signed zeros: the documented behaviour, which the
    kernels must then match bit for bit (tests/test_eltwise.py)."""
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)
    (y,) = run(op, [x])
    want = np.array([UNARY_ORACLES[op][0](float(v)) for v in x])
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(y[ok], want[ok])
    np.testing.assert_array_equal(np.signbit(y[ok]), np.signbit(want[ok]))


def test_sigmoid_extremes_do_not_overflow():
    (y,) = run("sigmoid", [np.array([-1e4, -50.0, 0.0, 50.0, 1e4], np.float32)])
    np.testing.assert_allclose(y, [0.0, 0.0, 0.5, 1.0, 1.0], atol=1e-7)


@pytest.mark.parametrize("op", sorted(BINARY_ORACLES))
def test_binary_with_broadcasting(op):
    a = rand(4, 1, 3, low=-5, high=5)
    b = rand(2, 3, low=0.5, high=3)  # positive divisor for div and mod
    (y,) = run(op, [a, b])
    assert y.shape == (4, 2, 3)
    np.testing.assert_allclose(y, elementwise(BINARY_ORACLES[op], a, b), rtol=1e-5, atol=1e-6)


def test_mod_sign_follows_divisor():
    (y,) = run("mod", [np.array([-7.0, 7.0, -0.5], np.float32), np.array([3.0], np.float32)])
    np.testing.assert_allclose(y, [2.0, 1.0, 2.5])


def test_sum_is_n_ary():
    xs = [rand(2, 3) for _ in range(5)]
    (y,) = run("sum", xs)
    want = elementwise(lambda *v: math.fsum(v), *xs)
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_affine():
    x = rand(7)
    (y,) = run("affine", [x], scale=-2.0, shift=2)
    np.testing.assert_allclose(y, elementwise(lambda v: -2 * v + 2, x), rtol=1e-6)
    (same,) = run("affine", [x])
    np.testing.assert_array_equal(same, x)


def test_broadcast_mismatch_names_the_input():
    spec = oplib.get("add")
    with pytest.raises(OpError) as err:
        spec.infer([(2, 3), (4, 3)], {}, 1)
    assert err.value.where == "inputs[1]"
    assert str(err.value) == "shape [4, 3] does not broadcast with [2, 3]"


# ---- matmul --------------------------------------------------------------

@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_transposes_and_bias(ta, tb):
    m, n, k = 3, 4, 5
    a = rand(*((k, m) if ta else (m, k)))
    b = rand(*((n, k) if tb else (k, n)))
    bias = rand(n)
    (y,) = run("matmul", [a, b, bias], transpose_a=ta, transpose_b=tb)
    want = np.zeros((m, n))
    for i, j in itertools.product(range(m), range(n)):
        want[i, j] = bias[j] + sum((a[p, i] if ta else a[i, p]) * (b[j, p] if tb else b[p, j])
                                   for p in range(k))
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_matmul_shape_errors():
    spec = oplib.get("matmul")
    attrs = spec.normalize_attrs({})
    with pytest.raises(OpError, match=r"inner dimensions differ: A \[3, 5\] gives K=5, "
                                      r"B \[4, 6\] gives K=4"):
        spec.infer([(3, 5), (4, 6)], attrs, 1)
    with pytest.raises(OpError, match=r"bias must have shape \[6\]"):
        spec.infer([(3, 4), (4, 6), (5,)], attrs, 1)
    assert spec.flops([(3, 4), (4, 6), (6,)], [(3, 6)], attrs) == 2 * 3 * 6 * 4 + 18


# ---- conv2d --------------------------------------------------------------

@pytest.mark.parametrize("k,stride,pad,bias", [
    (1, 1, 0, True), (3, 1, 1, True), (3, 2, 1, False), (5, 1, 2, True), (3, (2, 1), (0, 1), True),
])
def test_conv2d_nchw_against_loops(k, stride, pad, bias):
    x, w = rand(2, 3, 7, 6), rand(4, 3, k, k)
    b = rand(4) if bias else None
    arrays = [x, w] + ([b] if bias else [])
    (y,) = run("conv2d", arrays, stride=stride if isinstance(stride, int) else list(stride),
               padding=pad if isinstance(pad, int) else list(pad))
    s = (stride, stride) if isinstance(stride, int) else stride
    p = (pad, pad) if isinstance(pad, int) else pad
    np.testing.assert_allclose(y, conv_loops(x, w, b, s, p), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k,stride,pad,dil,end", [
    ((3, 3), (1, 1), (2, 2), (2, 2), None),          # dilated "same"
    ((3, 2), (2, 1), (1, 0), (2, 3), (0, 2)),        # dilated, strided, asymmetric
    ((2, 2), (1, 1), (0, 0), (1, 1), (1, 1)),        # TF "same", even kernel
    ((3, 3), (2, 2), (0, 0), (1, 1), (1, 1)),        # TF "same", strided, even input
    ((3, 3), (1, 1), (0, 0), (3, 1), None),          # dilated, unpadded
])
def test_conv2d_dilated_and_asymmetric_against_loops(k, stride, pad, dil, end):
    x, w, b = rand(2, 3, 8, 9), rand(4, 3, *k), rand(4)
    attrs = {"stride": list(stride), "padding": list(pad), "dilation": list(dil)}
    if end is not None:
        attrs["padding_end"] = list(end)
    (y,) = run("conv2d", [x, w, b], **attrs)
    np.testing.assert_allclose(y, conv_loops(x, w, b, stride, pad, dil, end), rtol=1e-5,
                               atol=1e-5)
    # The C reference agrees on the same geometry.
    c = native_conv.conv2d_ref(x, w, b, stride=stride, pad=pad, dilation=dil, pad_end=end)
    np.testing.assert_allclose(y, c, rtol=1e-5, atol=1e-5)


def test_conv2d_dilation_and_padding_end_are_checked():
    spec = oplib.get("conv2d")
    shapes = [(1, 2, 5, 5), (3, 2, 3, 3)]
    with pytest.raises(OpError, match=r"kernel 3x3 dilated 3,3 does not fit input 5x5") as e:
        spec.infer(shapes, spec.normalize_attrs({"dilation": 3}), 1)
    assert e.value.where == "inputs[1]"
    with pytest.raises(OpError, match=r"padding_end 3,0 must be smaller than the kernel 3x3"):
        spec.infer(shapes, spec.normalize_attrs({"padding_end": [3, 0]}), 1)
    with pytest.raises(OpError, match="must be >= 1"):
        spec.normalize_attrs({"dilation": 0})
    with pytest.raises(OpError, match=r"the padded input \[2, 5, 2147483653\] has more"):
        huge = {"dilation": [1, 2 ** 30], "padding": [0, 2 ** 30]}
        spec.infer(shapes, spec.normalize_attrs(huge), 1)
    # A dilated kernel's extent bounds the padding, not its tap count.
    (_, _, oh, ow), = spec.infer(shapes, spec.normalize_attrs({"dilation": 2, "padding": 4}), 1)
    assert (oh, ow) == (9, 9)


@pytest.mark.parametrize("k,stride,pad,dil,end,out_pad,bias", [
    ((3, 3), (2, 2), (1, 1), (1, 1), (1, 1), (1, 1), True),   # DCGAN-style upsampling
    ((4, 4), (2, 2), (1, 1), (1, 1), (1, 1), (0, 0), False),
    ((3, 2), (2, 3), (1, 0), (2, 1), (0, 2), (1, 0), True),   # asymmetric, dilated
    ((1, 1), (1, 1), (0, 0), (1, 1), (0, 0), (0, 0), True),
    ((2, 3), (1, 2), (0, 1), (3, 1), (1, 0), (2, 1), False),  # output_padding < dilation
])
def test_conv_transpose2d_against_loops(k, stride, pad, dil, end, out_pad, bias):
    x, w = rand(2, 3, 4, 5), rand(3, 2, *k)
    b = rand(2) if bias else None
    attrs = {"stride": list(stride), "padding": list(pad), "dilation": list(dil),
             "padding_end": list(end), "output_padding": list(out_pad)}
    (y,) = run("conv_transpose2d", [x, w] + ([b] if bias else []), **attrs)
    np.testing.assert_allclose(y, conv_transpose_loops(x, w, b, stride, pad, dil, end,
                                                       out_pad), rtol=1e-5, atol=1e-5)
    if out_pad[0] < stride[0] and out_pad[1] < stride[1]:  # else no adjoint conv exists
        c = native_conv.conv_transpose2d_ref(x, w, b, out_hw=y.shape[2:], stride=stride,
                                             pad=pad, dilation=dil)
        np.testing.assert_allclose(y, c, rtol=1e-5, atol=1e-5)


def test_conv_transpose2d_is_checked():
    spec = oplib.get("conv_transpose2d")
    attrs = spec.normalize_attrs({"stride": 2, "output_padding": 1})
    assert spec.infer([(1, 4, 5, 5), (4, 6, 3, 3)], attrs, 1) == [(1, 6, 12, 12)]
    with pytest.raises(OpError, match=r"output_padding 2,2 must be smaller than the stride"):
        spec.infer([(1, 4, 5, 5), (4, 6, 3, 3)],
                   spec.normalize_attrs({"stride": 2, "output_padding": 2}), 1)
    with pytest.raises(OpError, match="expect 3 input channels, input has 4"):
        spec.infer([(1, 4, 5, 5), (3, 6, 3, 3)], spec.normalize_attrs({}), 1)
    with pytest.raises(OpError, match=r"bias must have shape \[6\]"):
        spec.infer([(1, 4, 5, 5), (4, 6, 3, 3), (4,)], spec.normalize_attrs({}), 1)
    with pytest.raises(OpError, match="crops the whole"):
        spec.infer([(1, 4, 1, 1), (4, 6, 1, 1)], spec.normalize_attrs({"padding": 1}), 1)
    assert spec.flops([(1, 4, 5, 5), (4, 6, 3, 3)], [(1, 6, 11, 11)], spec.normalize_attrs(
        {"stride": 2})) == 2 * 4 * 25 * 6 * 9


def test_conv2d_nchwc_matches_loops_through_index_mapping():
    ic_bn, oc_bn = 2, 4
    x, w, b = rand(1, 4, 5, 5), rand(8, 4, 3, 3), rand(8)
    xb = np.zeros((1, 4 // ic_bn, 5, 5, ic_bn), np.float32)
    for c, h, ww in itertools.product(range(4), range(5), range(5)):
        xb[0, c // ic_bn, h, ww, c % ic_bn] = x[0, c, h, ww]
    wb = np.zeros((8 // oc_bn, 4 // ic_bn, 3, 3, ic_bn, oc_bn), np.float32)
    for o, c, i, j in itertools.product(range(8), range(4), range(3), range(3)):
        wb[o // oc_bn, c // ic_bn, i, j, c % ic_bn, o % oc_bn] = w[o, c, i, j]
    (y,) = run("conv2d", [xb, wb, b], padding=1, layout="NCHWc", ic_bn=2, oc_bn=4)
    want = conv_loops(x, w, b, (1, 1), (1, 1))
    for o, h, ww in itertools.product(range(8), range(5), range(5)):
        assert y[0, o // oc_bn, h, ww, o % oc_bn] == pytest.approx(want[0, o, h, ww], abs=1e-5)


def test_conv2d_knobs_and_their_checks():
    spec = oplib.get("conv2d")
    attrs = spec.normalize_attrs({"padding": 1})
    knobs = conv2d_knobs([(1, 12, 14, 14), (16, 12, 3, 3)], attrs)
    # The C template's declaration (hwt_conv_knobs): reg_n divides OW or is
    # a power of two, up to 32; reg_h is 1 or 2 output rows.
    assert knobs == {"ic_bn": [1, 2, 3, 4, 6, 12], "oc_bn": [1, 2, 4, 8, 16],
                     "reg_n": [1, 2, 4, 7, 8, 14], "unroll_ker": [False, True],
                     "reg_h": [1, 2], "winograd": [0, 2]}
    bad = spec.normalize_attrs({"padding": 1, "reg_n": 13})
    with pytest.raises(OpError, match=r"13 is not legal here \(legal: 1, 2, 4, 7, 8, 14\)") \
            as err:
        spec.infer([(1, 12, 14, 14), (16, 12, 3, 3)], bad, 1)
    assert err.value.where == "attrs.reg_n"
    blocked = spec.normalize_attrs({"layout": "NCHWc", "ic_bn": 8})
    with pytest.raises(OpError, match="8 disagrees with the tensor's block size 4"):
        spec.infer([(1, 3, 14, 14, 4), (4, 3, 3, 3, 4, 4)], blocked, 1)
    with pytest.raises(OpError, match="weights expect 6 input channels, input has 12"):
        spec.infer([(1, 12, 14, 14), (16, 6, 3, 3)], attrs, 1)
    assert spec.flops([(2, 3, 8, 8), (4, 3, 3, 3)], [(2, 4, 8, 8)], attrs) == \
        2 * 2 * 4 * 8 * 8 * 3 * 9


# ---- pooling -------------------------------------------------------------

@pytest.mark.parametrize("mode,k,s,p,ceil,inc", [
    ("max", 2, None, 0, False, False), ("max", 3, 2, 1, False, False),
    ("avg", 3, 2, 1, False, False), ("avg", 3, 2, 1, False, True),
    ("max", 3, 2, 0, True, False), ("avg", 3, 2, 1, True, False), ("avg", 2, 1, 0, False, False),
])
def test_pool2d_against_loops(mode, k, s, p, ceil, inc):
    x = rand(2, 3, 7, 8)
    (y,) = run("pool2d", [x], mode=mode, kernel=k, stride=s, padding=p, ceil_mode=ceil,
               count_include_pad=inc)
    want = pool_loops(x, mode, (k, k), (s or k, s or k), (p, p), ceil, inc)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode,k,s,p,end,ceil,inc", [
    ("max", 2, 1, 0, 1, False, False),              # TF "same" 2x2 stride 1
    ("max", 3, 2, 0, 1, False, False),              # TF "same" 3x3 stride 2, even input
    ("avg", 3, 2, 0, 1, False, False), ("avg", 3, 2, 0, 1, False, True),
    ("avg", 3, 2, 1, 0, True, True), ("max", 3, 2, 1, 0, True, False),
])
def test_pool2d_asymmetric_against_loops(mode, k, s, p, end, ceil, inc):
    x = rand(2, 3, 8, 7)
    (y,) = run("pool2d", [x], mode=mode, kernel=k, stride=s, padding=p, padding_end=end,
               ceil_mode=ceil, count_include_pad=inc)
    want = pool_loops(x, mode, (k, k), (s, s), (p, p), ceil, inc, (end, end))
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


def test_pool2d_nchwc_is_blockwise_nchw():
    x = rand(1, 8, 6, 6)
    (y,) = run("pool2d", [to_nchwc(x, 4)], mode="max", kernel=2, layout="NCHWc")
    np.testing.assert_allclose(y, to_nchwc(pool_loops(x, "max", (2, 2), (2, 2), (0, 0)), 4))


@pytest.mark.parametrize("mode", ["max", "avg"])
def test_global_pool2d(mode):
    x = rand(2, 3, 4, 5)
    (y,) = run("global_pool2d", [x], mode=mode)
    for n, c in itertools.product(range(2), range(3)):
        vals = [float(v) for v in x[n, c].ravel()]
        want = max(vals) if mode == "max" else math.fsum(vals) / len(vals)
        assert y[n, c, 0, 0] == pytest.approx(want, abs=1e-6)


# ---- normalisation -------------------------------------------------------

@pytest.mark.parametrize("layout", ["NCHW", "NCHWc"])
def test_batch_norm(layout):
    x = rand(2, 8, 3, 3)
    gamma, beta, mean = rand(8), rand(8), rand(8)
    var = rand(8, low=0.5, high=2.0)
    xin = x if layout == "NCHW" else to_nchwc(x, 4)
    (y,) = run("batch_norm", [xin, gamma, beta, mean, var], epsilon=1e-3, layout=layout)
    want = np.zeros_like(x, np.float64)
    for n, c, h, w in np.ndindex(*x.shape):
        want[n, c, h, w] = (gamma[c] * (float(x[n, c, h, w]) - mean[c])
                            / math.sqrt(var[c] + 1e-3) + beta[c])
    np.testing.assert_allclose(y, want if layout == "NCHW" else to_nchwc(want, 4),
                               rtol=1e-5, atol=1e-5)


def test_softmax():
    x = rand(3, 6, low=-30, high=30)
    (y,) = run("softmax", [x])
    for row in range(3):
        vals = [math.exp(float(v)) for v in x[row] - x[row].max()]
        np.testing.assert_allclose(y[row], [v / math.fsum(vals) for v in vals], rtol=1e-5)
    (y0,) = run("softmax", [x], axis=0)
    np.testing.assert_allclose(y0.sum(axis=0), np.ones(6), rtol=1e-6)


# ---- data movement -------------------------------------------------------

def test_concat_split_slice_roundtrip():
    a, b = rand(2, 3, 2), rand(2, 1, 2)
    (y,) = run("concat", [a, b], axis=-2)
    assert y.tolist() == [ra + rb for ra, rb in zip(a.tolist(), b.tolist())]
    parts = run("split", [y], n_out=2, axis=1, sizes=[3, 1])
    np.testing.assert_array_equal(parts[0], a)
    np.testing.assert_array_equal(parts[1], b)
    quarters = run("split", [rand(2, 8)], n_out=4, axis=1)
    assert [q.shape for q in quarters] == [(2, 2)] * 4
    (s,) = run("slice", [y], axis=1, begin=1, end=-1)
    assert s.tolist() == [row[1:3] for row in y.tolist()]


def test_reshape_and_flatten_keep_row_major_order():
    x = rand(2, 3, 4)
    flat = x.ravel().tolist()
    (r,) = run("reshape", [x], shape=[4, -1])
    assert r.shape == (4, 6) and r.ravel().tolist() == flat
    (f,) = run("flatten", [x])
    assert f.shape == (2, 12) and f.ravel().tolist() == flat
    (f0,) = run("flatten", [x], axis=0)
    assert f0.shape == (1, 24)
    spec = oplib.get("reshape")
    with pytest.raises(OpError, match=r"cannot reshape \[2, 3, 4\] \(24 elements\) into \[5, -1\]"):
        spec.infer([(2, 3, 4)], spec.normalize_attrs({"shape": [5, -1]}), 1)


def test_split_errors():
    spec = oplib.get("split")
    with pytest.raises(OpError, match="axis 1 of size 7 does not split into 2 equal parts"):
        spec.infer([(2, 7)], spec.normalize_attrs({"axis": 1}), 2)
    with pytest.raises(OpError, match=r"sizes \[3, 3\] must be >= 1 and add up to 7"):
        spec.infer([(2, 7)], spec.normalize_attrs({"axis": 1, "sizes": [3, 3]}), 2)


def test_layout_transform_index_mapping():
    x = rand(2, 8, 3, 3)
    (y,) = run("layout_transform", [x], src="NCHW", dst="NCHW4c")
    for n, c, h, w in np.ndindex(*x.shape):
        assert y[n, c // 4, h, w, c % 4] == x[n, c, h, w]
    (z,) = run("layout_transform", [y], src="NCHW4c", dst="NCHW2c")
    np.testing.assert_array_equal(z, to_nchwc(x, 2))
    (back,) = run("layout_transform", [z], src="NCHW2c", dst="NCHW")
    np.testing.assert_array_equal(back, x)
    w = rand(8, 4, 3, 3)
    (wb,) = run("layout_transform", [w], src="OIHW", dst="OIHW2i4o")
    for o, i, kh, kw in np.ndindex(*w.shape):
        assert wb[o // 4, i // 2, kh, kw, i % 2, o % 4] == w[o, i, kh, kw]
    np.testing.assert_array_equal(wb, to_oihwio(w, 2, 4))
    (wback,) = run("layout_transform", [wb], src="OIHW2i4o", dst="OIHW")
    np.testing.assert_array_equal(wback, w)


def test_layout_transform_errors():
    spec = oplib.get("layout_transform")
    with pytest.raises(OpError, match='cannot transform data layout "NCHW" into weight'):
        spec.infer([(1, 4, 2, 2)], {"src": "NCHW", "dst": "OIHW"}, 1)
    with pytest.raises(OpError, match="block 3 does not divide 4 channels"):
        spec.infer([(1, 4, 2, 2)], {"src": "NCHW", "dst": "NCHW3c"}, 1)
    with pytest.raises(OpError, match='unknown layout "NHWC"'):
        spec.infer([(1, 4, 2, 2)], {"src": "NHWC", "dst": "NCHW"}, 1)


# ---- lstm_cell ------------------------------------------------------------

def lstm_cell_loops(z, c_prev):
    """One LSTM cell by explicit loops: z [B, 4H] holds i, f, g, o."""
    b, h = c_prev.shape
    sig = lambda v: 1.0 / (1.0 + math.exp(-v))  # noqa: E731
    hh, cc = np.empty((b, h)), np.empty((b, h))
    for r in range(b):
        for u in range(h):
            zi, zf, zg, zo = (float(z[r, k * h + u]) for k in range(4))
            cc[r, u] = sig(zf) * float(c_prev[r, u]) + sig(zi) * math.tanh(zg)
            hh[r, u] = sig(zo) * math.tanh(cc[r, u])
    return hh, cc


def test_lstm_cell():
    g, c0, xg, bias = rand(3, 20, low=-4, high=4), rand(3, 5), rand(7, 20), rand(20)
    h, c = run("lstm_cell", [g, c0], n_out=2)
    want_h, want_c = lstm_cell_loops(g.astype(np.float64), c0)
    np.testing.assert_allclose(h, want_h, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(c, want_c, rtol=1e-6, atol=1e-7)
    # x_gates rows x_row.. and the bias are added to the gates first.
    h, c = run("lstm_cell", [g, c0, xg, bias], n_out=2, x_row=2)
    z = g.astype(np.float64) + xg[2:5] + bias
    want_h, want_c = lstm_cell_loops(z, c0)
    np.testing.assert_allclose(h, want_h, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(c, want_c, rtol=1e-6, atol=1e-7)
    spec = oplib.get("lstm_cell")
    attrs = spec.normalize_attrs({})
    assert spec.flops([(3, 20), (3, 5)], [(3, 5), (3, 5)], attrs) == 3 * 5 * 9
    assert spec.flops([(3, 20), (3, 5), (7, 20), (20,)], [(3, 5)] * 2, attrs) == 3 * 5 * 17


@pytest.mark.parametrize("shapes,attrs,message", [
    ([(3, 18), (3, 4)], {}, r"gates must be \[B, 4H\]"),
    ([(3, 20), (3, 4)], {}, r"c_prev must have shape \[3, 5\]"),
    ([(3, 20), (3, 5), (7, 16)], {}, r"x_gates must be \[R, 20\]"),
    ([(3, 20), (3, 5), (7, 20)], {"x_row": 5}, "rows 5..7 are past the 7 rows"),
    ([(3, 20), (3, 5)], {"x_row": 1}, "x_row needs an x_gates input"),
    ([(3, 20), (3, 5), (3, 20), (5,)], {}, r"bias must have shape \[20\]"),
])
def test_lstm_cell_errors(shapes, attrs, message):
    spec = oplib.get("lstm_cell")
    with pytest.raises(OpError, match=message):
        spec.infer(shapes, spec.normalize_attrs(attrs), 2)


# ---- transformer ops -----------------------------------------------------

@pytest.mark.parametrize("shape,perm", [((2, 3, 4), None), ((2, 3, 4, 5), [0, 2, 1, 3]),
                                        ((1, 6, 1), [2, 0, 1]), ((4,), [0])])
def test_transpose(shape, perm):
    x = rand(*shape)
    (y,) = run("transpose", [x], **({} if perm is None else {"perm": perm}))
    p = perm if perm is not None else list(range(len(shape)))[::-1]
    assert y.shape == tuple(shape[i] for i in p)
    for idx in itertools.product(*(range(d) for d in y.shape)):
        src = [0] * len(shape)
        for i, v in enumerate(idx):
            src[p[i]] = v
        assert y[idx] == x[tuple(src)]


@pytest.mark.parametrize("shape,pads,value", [
    ((2, 3, 5), [0, 1, 2, 1, 0, 3], 0.0), ((4,), [3, 0], -2.5), ((1, 2, 1, 3), [1] * 8, 7.0)])
def test_pad(shape, pads, value):
    x = rand(*shape)
    (y,) = run("pad", [x], pads=pads, value=value)
    rank = len(shape)
    assert y.shape == tuple(d + pads[i] + pads[i + rank] for i, d in enumerate(shape))
    for idx in itertools.product(*(range(d) for d in y.shape)):
        src = tuple(v - pads[i] for i, v in enumerate(idx))
        inside = all(0 <= v < shape[i] for i, v in enumerate(src))
        assert y[idx] == (x[src] if inside else np.float32(value))


@pytest.mark.parametrize("pads,message", [
    ([1, 1, 1], r"3 pads for a rank-2 tensor \[2, 3\]"), ([0, -1, 0, 0], "must be >= 0")])
def test_pad_errors(pads, message):
    spec = oplib.get("pad")
    with pytest.raises(OpError, match=message):
        spec.infer([(2, 3)], spec.normalize_attrs({"pads": pads}), 1)


@pytest.mark.parametrize("shape,axis,indices", [
    ((3, 5, 2), 1, [4, 0, 4, -1]), ((6,), 0, [5]), ((2, 3, 7), -1, [6, 2, 0])])
def test_gather(shape, axis, indices):
    x = rand(*shape)
    (y,) = run("gather", [x], axis=axis, indices=indices)
    a = axis % len(shape)
    for idx in itertools.product(*(range(d) for d in y.shape)):
        src = list(idx)
        src[a] = indices[idx[a]] % shape[a]
        assert y[idx] == x[tuple(src)]


def test_gather_errors():
    spec = oplib.get("gather")
    with pytest.raises(OpError, match=r"indices \[3, -4\] are out of range for axis 1"):
        spec.infer([(2, 3)], spec.normalize_attrs({"axis": 1, "indices": [0, 3, -4]}), 1)
    with pytest.raises(OpError, match="at least one index"):
        spec.infer([(2, 3)], spec.normalize_attrs({"indices": []}), 1)


def test_transpose_rejects_a_non_permutation():
    with pytest.raises(OpError, match=r"perm \[0, 0, 1\] is not a permutation"):
        oplib.get("transpose").infer([(2, 3, 4)], {"perm": (0, 0, 1)}, 1)


@pytest.mark.parametrize("shape,axis,bias", [((2, 3, 8), -1, True), ((3, 4, 5), 1, False),
                                             ((5, 1), 1, True)])
def test_layer_norm(shape, axis, bias):
    x = rand(*shape, low=-3, high=5)
    norm = shape[axis % len(shape):]
    scale, b = rand(*norm), rand(*norm)
    (y,) = run("layer_norm", [x, scale] + ([b] if bias else []), axis=axis, epsilon=1e-3)
    rows = x.reshape(-1, int(np.prod(norm)))
    for r, row in enumerate(rows):
        vals = [float(v) for v in row]
        mean = math.fsum(vals) / len(vals)
        var = math.fsum((v - mean) ** 2 for v in vals) / len(vals)
        for j, v in enumerate(vals):
            want = (v - mean) / math.sqrt(var + 1e-3) * float(scale.reshape(-1)[j]) + (
                float(b.reshape(-1)[j]) if bias else 0.0)
            assert y.reshape(rows.shape)[r, j] == pytest.approx(want, rel=1e-5, abs=1e-5)


def test_layer_norm_needs_the_normalised_shape():
    with pytest.raises(OpError, match=r"must have the normalised shape \[4, 5\], got \[5\]"):
        oplib.get("layer_norm").infer([(3, 4, 5), (5,)], {"axis": 1, "epsilon": 1e-5}, 1)


@pytest.mark.parametrize("sa,sb,out", [((2, 3, 4), (2, 4, 5), (2, 3, 5)),
                                       ((2, 1, 3, 4), (3, 4, 2), (2, 3, 3, 2)),
                                       ((3, 4), (2, 4, 1), (2, 3, 1))])
def test_batch_matmul_broadcasts_batches(sa, sb, out):
    a, b = rand(*sa), rand(*sb)
    (y,) = run("batch_matmul", [a, b])
    assert y.shape == out
    for idx in itertools.product(*(range(d) for d in out)):
        batch, i, j = idx[:-2], idx[-2], idx[-1]

        def pick(t, shape):  # t's matrix for this batch index (size-1 dims broadcast)
            lead = shape[:-2]
            sel = tuple(0 if d == 1 else batch[len(batch) - len(lead) + k]
                        for k, d in enumerate(lead))
            return t[sel]
        am, bm = pick(a, sa), pick(b, sb)
        want = math.fsum(float(am[i, k]) * float(bm[k, j]) for k in range(sa[-1]))
        assert y[idx] == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_batch_matmul_shape_errors():
    spec = oplib.get("batch_matmul")
    with pytest.raises(OpError, match="inner dimensions differ"):
        spec.infer([(2, 3, 4), (2, 5, 4)], {}, 1)
    with pytest.raises(OpError, match="do not broadcast"):
        spec.infer([(2, 3, 4), (3, 4, 4)], {}, 1)


# ---- the registry itself -------------------------------------------------

TESTED = set(UNARY_ORACLES) | set(BINARY_ORACLES) | {
    "sum", "affine", "matmul", "conv2d", "pool2d", "global_pool2d", "batch_norm", "softmax",
    "concat", "split", "slice", "reshape", "flatten", "layout_transform", "lstm_cell",
    "transpose", "layer_norm", "batch_matmul", "conv_transpose2d", "pad", "gather"} | {
    # run-time indices and masks: oracle tests in tests/test_onnx_transformers.py
    "take", "gather_elements", "cumsum", "expand", "where", "attention"} | {
    # training ops: their references are checked by gradient checks
    # (tests/test_autodiff.py) and oracle-tested in C (tests/test_train_ops.py)
    "relu_grad", "sigmoid_grad", "tanh_grad", "abs_grad", "minimum_grad", "maximum_grad",
    "batch_norm_train", "batch_norm_train_grad", "batch_norm_stats_update", "reduce_sum", "softmax_grad",
    "conv2d_grad_data", "conv2d_grad_weight", "pool2d_grad", "batch_norm_grad", "slice_grad",
    "softmax_cross_entropy", "mse_loss", "sgd_update", "adam_update"} | {
    # issue #41's activations: scalar oracles, engine and ONNX Runtime in
    # tests/test_onnx_ops_more.py (the kernels in tests/test_eltwise.py)
    "hard_sigmoid", "hard_swish", "silu", "mish", "gelu_tanh", "softplus", "softsign", "elu",
    "selu", "celu", "thresholded_relu", "prelu", "reciprocal", "neg", "sign", "log", "sin",
    "cos",
    # the rest of ONNX's unary math: scalar oracles in and out of their
    # domains, the kernels bit for bit and ONNX Runtime in tests/test_onnx_composed.py
    "acos", "asin", "atan", "tan", "sinh", "cosh", "asinh", "acosh", "atanh", "round",
    # resize, argmax: against ONNX Runtime, and the engine bit for bit, in the same file
    "resize", "argmax",
    # quantized ops (issue #43): references checked against ONNX Runtime's
    # QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
    # QLinearMatMul and QLinearConv in tests/test_onnx_quant.py
    "quantize_u8", "quantize_s8", "dequantize", "dynamic_quantize", "qmatmul", "qconv2d",
    # the QDQ residual add: against ONNX Runtime in tests/test_onnx_quant.py,
    # the engine against its reference and the three ops it replaces in
    # tests/test_ops_quant.py
    "qadd"} | {
    # 3-D convolution: reference against a float64 loop over the definition,
    # the engine against it, in tests/test_conv3d.py; ONNX Runtime in
    # tests/test_onnx_conv3d.py
    "conv3d"}


def test_every_registered_op_has_an_oracle_test():
    assert set(oplib.REGISTRY) == TESTED


def test_attribute_errors_name_the_attribute():
    spec = oplib.get("pool2d")
    with pytest.raises(OpError, match='pool2d needs attribute "mode"'):
        spec.normalize_attrs({"kernel": 2})
    with pytest.raises(OpError, match=r'"min" is not one of "max", "avg"') as err:
        spec.normalize_attrs({"kernel": 2, "mode": "min"})
    assert err.value.where == "attrs.mode"
    with pytest.raises(OpError, match=r"must be an integer or \[h, w\], got 'x'"):
        spec.normalize_attrs({"kernel": "x", "mode": "max"})
    with pytest.raises(OpError, match=r"must be >= 1, got \[0, 0\]"):
        spec.normalize_attrs({"kernel": 0, "mode": "max"})
    with pytest.raises(OpError, match='unknown attribute "strides" for pool2d'):
        spec.normalize_attrs({"kernel": 2, "mode": "max", "strides": 2})


def test_every_op_is_documented():
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "docs", "model-format.md")
    with open(path) as fh:
        doc = fh.read()
    missing = [name for name in oplib.REGISTRY if f"`{name}`" not in doc]
    assert not missing, f"document these ops in docs/model-format.md: {missing}"
