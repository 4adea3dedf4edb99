"""Training ops: the backward ops that reverse-mode differentiation emits
(hwtune.graph.autodiff), the fused losses and the optimizer updates.

They are ordinary graph ops (a numpy reference here, a C implementation in
engine/ops/grad_*.c), so a training step is an ordinary model.json graph
that validates, plans, runs and tunes like a forward one. Gradients of ops
whose backward is another forward op (matmul, reshape, concat, ...) reuse
that op instead of adding one here.
"""

import numpy as np

from hwtune.graph.ops import (REGISTRY, Attr, OpError, OpSpec, expect_rank, normalize_axis, numel,
                              register, show_shape)
from hwtune.graph.ops.eltwise import broadcast
from hwtune.graph.ops.pool import _out_len, _stride, pool2d_nchw


def _same(in_shapes, what=("x", "dy")):
    if tuple(in_shapes[0]) != tuple(in_shapes[1]):
        raise OpError(f"{what[1]} {show_shape(in_shapes[1])} must have the shape of "
                      f"{what[0]} {show_shape(in_shapes[0])}", "inputs[1]")
    return [tuple(in_shapes[0])]


def _f64(*arrays):
    return [np.asarray(a, np.float64) for a in arrays]


def _eltwise_grad(name, fn, first, doc, attrs=()):
    register(OpSpec(
        name, (first, "dy"), 2, 2, lambda s, a, n: _same(s, (first, "dy")),
        lambda arrs, a, n: [fn(*_f64(*arrs), a).astype(np.float32)],
        lambda ins, outs, a: 2 * numel(outs[0]), attrs=list(attrs), doc=doc))


_eltwise_grad("relu_grad", lambda x, dy, a: np.where(x > 0, dy, a["alpha"] * dy), "x",
              "dx = dy where x > 0, else alpha * dy (relu: alpha 0; leaky_relu)",
              [Attr("alpha", "float", 0.0, doc="slope below zero")])
_eltwise_grad("sigmoid_grad", lambda y, dy, a: dy * y * (1.0 - y), "y",
              "dx = dy * y * (1 - y), y the sigmoid's output")
_eltwise_grad("tanh_grad", lambda y, dy, a: dy * (1.0 - y * y), "y",
              "dx = dy * (1 - y^2), y the tanh's output")

_eltwise_grad("abs_grad", lambda x, dy, a: dy * np.sign(x), "x",
              "dx = dy * sign(x) (0 at x = 0, as PyTorch)")


def _minmax_grad_infer(in_shapes, attrs, n_out):
    shape = broadcast([tuple(in_shapes[0]), tuple(in_shapes[1])])
    if tuple(in_shapes[2]) != shape:
        raise OpError(f"dy must have the broadcast shape {show_shape(shape)}, got "
                      f"{show_shape(in_shapes[2])}", "inputs[2]")
    return [shape, shape]


def _minmax_grad_ref(larger):
    def ref(arrays, attrs, n_out):
        a, b, dy = _f64(*arrays)
        a, b = np.broadcast_to(a, dy.shape), np.broadcast_to(b, dy.shape)
        a_wins, b_wins = (a > b, b > a) if larger else (a < b, b < a)
        half = np.where(a == b, 0.5 * dy, dy)
        return [np.where(b_wins, 0.0, half).astype(np.float32),
                np.where(a_wins, 0.0, half).astype(np.float32)]
    return ref


for _name, _larger in (("maximum_grad", True), ("minimum_grad", False)):
    register(OpSpec(
        _name, ("a", "b", "dy"), 3, 3, _minmax_grad_infer, _minmax_grad_ref(_larger),
        lambda ins, outs, attrs: 2 * numel(outs[0]), n_outputs=2,
        doc=f"gradients of {_name[:-5]}(a, b) in the broadcast shape (numpy broadcasting of a "
            f"and b): the {'larger' if _larger else 'smaller'} operand takes dy, a tie gives "
            "each dy / 2 (PyTorch's rule), a NaN operand passes dy to both"))


# ---- reductions -------------------------------------------------------------

def _axes(shape, attrs):
    rank = len(shape)
    axes = attrs["axes"] if attrs["axes"] else tuple(range(rank))
    out = sorted({normalize_axis(a, rank, "attrs.axes") for a in axes})
    return tuple(out)


def _reduce_infer(in_shapes, attrs, n_out):
    shape = tuple(in_shapes[0])
    axes = _axes(shape, attrs)
    if attrs["keepdims"]:
        return [tuple(1 if i in axes else d for i, d in enumerate(shape))]
    kept = tuple(d for i, d in enumerate(shape) if i not in axes)
    return [kept or (1,)]


def _reduce_ref(arrays, attrs, n_out):
    x = np.asarray(arrays[0], np.float64)
    out_shape = _reduce_infer([x.shape], attrs, 1)[0]
    return [x.sum(axis=_axes(x.shape, attrs)).reshape(out_shape).astype(np.float32)]


register(OpSpec(
    "reduce_sum", ("x",), 1, 1, _reduce_infer, _reduce_ref,
    lambda ins, outs, attrs: numel(ins[0]),
    attrs=[Attr("axes", "ints", (), doc="axes summed over (empty: all)"),
           Attr("keepdims", "bool", True, doc="keep summed axes as size 1 (else drop them; "
                                              "all dropped gives [1])")],
    doc="sum over axes (bias and broadcast gradients)"))


def _softmax_grad_ref(arrays, attrs, n_out):
    y, dy = _f64(*arrays)
    axis = attrs["axis"]
    return [(y * (dy - (dy * y).sum(axis=axis, keepdims=True))).astype(np.float32)]


def _softmax_grad_infer(in_shapes, attrs, n_out):
    normalize_axis(attrs["axis"], len(in_shapes[0]))
    return _same(in_shapes, ("y", "dy"))


register(OpSpec(
    "softmax_grad", ("y", "dy"), 2, 2, _softmax_grad_infer, _softmax_grad_ref,
    lambda ins, outs, attrs: 4 * numel(outs[0]),
    attrs=[Attr("axis", "int", -1, doc="the softmax's axis")],
    doc="dx = y * (dy - sum(dy * y, axis)), y the softmax's output"))


# ---- convolution and pooling --------------------------------------------------

def _conv_geometry(x_shape, w_shape, stride, padding):
    n, ic, h, wd = x_shape
    oc, ic2, kh, kw = w_shape
    (sh, sw), (ph, pw) = stride, padding
    return n, ic, h, wd, oc, kh, kw, (h + 2 * ph - kh) // sh + 1, (wd + 2 * pw - kw) // sw + 1


def _check_4d(in_shapes, *names):
    """The first inputs, called names in messages, must be 4-D (NCHW)."""
    for i, what in enumerate(names):
        expect_rank(in_shapes[i], 4, f"{what} must be 4-D (NCHW)", f"inputs[{i}]")


def _grad_data_infer(in_shapes, attrs, n_out):
    dy, w = in_shapes
    _check_4d(in_shapes, "dy", "w")
    h, wd = attrs["input_size"]
    x_shape = (dy[0], w[1], h, wd)
    *_, oc, kh, kw, oh, ow = _conv_geometry(x_shape, w, attrs["stride"], attrs["padding"])
    if (dy[1], dy[2], dy[3]) != (oc, oh, ow) or oh < 1 or ow < 1:
        raise OpError(f"dy {show_shape(dy)} is not the output of a conv with weights "
                      f"{show_shape(w)} on {h}x{wd}", "inputs[0]")
    _check_grad_data_knobs(in_shapes, attrs)
    return [x_shape]


# The NCHW[x]c template's knobs, which a stride-1 data gradient (run as a
# forward CONV of dy) takes as conv2d does; declared by the C template
# (hwt_conv_knobs), read through conv2d_knobs.
GRAD_DATA_KNOBS = ("ic_bn", "oc_bn", "reg_n", "unroll_ker", "reg_h", "winograd")


def grad_data_forward_conv(in_shapes, attrs):
    """The forward CONV a conv2d_grad_data runs as (engine/ops/grad_conv.c
    fwd_prepare): (x shape, w shape, padding) -- dy as x, the weights'
    channels swapped and turned ([IC, OC, KH, KW]), padding k - 1 - p --
    or None when it runs as an im2col GEMM (a stride other than 1, or
    padding of the kernel's size or more)."""
    dy, w = (tuple(s) for s in in_shapes[:2])
    (sh, sw), (ph, pw) = attrs["stride"], attrs["padding"]
    oc, ic, kh, kw = w
    if (sh, sw) != (1, 1) or ph >= kh or pw >= kw:
        return None
    return dy, (ic, oc, kh, kw), (kh - 1 - ph, kw - 1 - pw)


def grad_data_knobs(in_shapes, attrs):
    """Legal values of each knob of a conv2d_grad_data (its forward CONV's),
    or None when it has none (grad_data_forward_conv)."""
    fwd = grad_data_forward_conv(in_shapes, attrs)
    if fwd is None:
        return None
    from hwtune.graph.ops.conv import conv2d_knobs
    x, w, pad = fwd
    return conv2d_knobs([x, w], {"layout": "NCHW", "stride": (1, 1), "padding": pad,
                                 "padding_end": None, "dilation": (1, 1),
                                 "ic_bn": None, "oc_bn": None})


# The im2col data gradient's own knobs (hwtune/grad_conv.h, as the weight
# gradient's below), for one that is not a forward CONV.
GRAD_DATA_IM2COL_KNOBS = ("units", "tile_cols")


def grad_data_conv(in_shapes, attrs):
    """(x shape, w shape, stride, padding) of the conv whose data gradient
    this is."""
    dy, w = (tuple(s) for s in in_shapes[:2])
    h, wd = attrs["input_size"]
    return (dy[0], w[1], h, wd), w, tuple(attrs["stride"]), tuple(attrs["padding"])


def grad_data_im2col_knobs(in_shapes, attrs):
    """Legal values of the im2col knobs of a data gradient that is not a
    forward CONV, or None (grad_data_forward_conv)."""
    if grad_data_forward_conv(in_shapes, attrs) is not None:
        return None
    from hwtune.native import grad_conv  # loads the C library on first use
    x, w, stride, pad = grad_data_conv(in_shapes, attrs)
    return grad_conv.knobs(x, w, stride=stride, pad=pad, op="conv2d_grad_data")


def _check_grad_data_knobs(in_shapes, attrs):
    im2col = [k for k in GRAD_DATA_IM2COL_KNOBS if attrs.get(k) is not None]
    if im2col:
        legal = grad_data_im2col_knobs(in_shapes, attrs)
        if legal is None:
            raise OpError("im2col knobs apply to a data gradient that is not a forward CONV "
                          "(this one is: it takes the CONV template's knobs)",
                          f"attrs.{im2col[0]}")
        for key in im2col:
            if attrs[key] not in legal[key]:
                raise OpError(f"{attrs[key]} is not legal here (legal: "
                              f"{', '.join(map(str, legal[key]))})", f"attrs.{key}")
    given = [k for k in GRAD_DATA_KNOBS if attrs.get(k) is not None]
    if not given:
        return
    legal = grad_data_knobs(in_shapes, attrs)
    if legal is None:
        raise OpError("CONV template knobs apply to a stride-1 data gradient with padding "
                      "smaller than the kernel only (this one runs as an im2col GEMM)",
                      f"attrs.{given[0]}")
    for key in given:
        if attrs[key] not in legal[key]:
            raise OpError(f"{attrs[key]} is not legal here (legal: "
                          f"{', '.join(map(str, legal[key]))})", f"attrs.{key}")


def conv2d_grad_data_nchw(dy, w, stride, padding, size):
    """dx = the transposed convolution of dy: scatter each output's
    w-weighted contribution back over its window, in float64."""
    (sh, sw), (ph, pw) = stride, padding
    n, oc, oh, ow = dy.shape
    _, ic, kh, kw = w.shape
    h, wd = size
    hp, wp = max(h + 2 * ph, (oh - 1) * sh + kh), max(wd + 2 * pw, (ow - 1) * sw + kw)
    dxp = np.zeros((n, ic, hp, wp))
    # cols[n, ic, kh, kw, oh, ow] = sum_oc w[oc, ic, kh, kw] dy[n, oc, oh, ow]
    cols = np.tensordot(np.asarray(dy, np.float64), np.asarray(w, np.float64),
                        axes=([1], [0])).transpose(0, 3, 4, 5, 1, 2)
    for i in range(kh):
        for j in range(kw):
            dxp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw] += cols[:, :, i, j]
    return dxp[:, :, ph:ph + h, pw:pw + wd].astype(np.float32)


def _grad_weight_infer(in_shapes, attrs, n_out):
    x, dy = in_shapes
    _check_4d(in_shapes, "x", "dy")
    kh, kw = attrs["kernel"]
    w_shape = (dy[1], x[1], kh, kw)
    *_, oh, ow = _conv_geometry(x, w_shape, attrs["stride"], attrs["padding"])
    if (dy[0], dy[2], dy[3]) != (x[0], oh, ow) or oh < 1 or ow < 1:
        raise OpError(f"dy {show_shape(dy)} is not the output of a {kh}x{kw} conv of "
                      f"x {show_shape(x)}", "inputs[1]")
    _check_grad_weight_knobs(in_shapes, attrs)
    return [w_shape]


# The weight gradient's tunables, declared by the C op (hwtune/grad_conv.h:
# names, legal values, default); tests/test_train_conv_tuning.py checks that
# these attribute names are the C declaration's.
GRAD_WEIGHT_KNOBS = ("winograd", "units", "tile_cols", "chunk_tiles")


def grad_weight_conv(in_shapes, attrs):
    """(x shape, w shape, stride, padding) of the forward conv whose weight
    gradient this is."""
    x, dy = (tuple(s) for s in in_shapes[:2])
    kh, kw = attrs["kernel"]
    return x, (dy[1], x[1], kh, kw), tuple(attrs["stride"]), tuple(attrs["padding"])


def grad_weight_knobs(in_shapes, attrs):
    """Legal values of each weight gradient knob for this op (C's declaration)."""
    from hwtune.native import grad_conv  # loads the C library on first use
    x, w, stride, pad = grad_weight_conv(in_shapes, attrs)
    return grad_conv.knobs(x, w, stride=stride, pad=pad)


def _check_grad_weight_knobs(in_shapes, attrs):
    given = [k for k in GRAD_WEIGHT_KNOBS if attrs.get(k) is not None]
    if not given:
        return
    legal = grad_weight_knobs(in_shapes, attrs)
    for key in given:
        if attrs[key] not in legal[key]:
            raise OpError(f"{attrs[key]} is not legal here (legal: "
                          f"{', '.join(map(str, legal[key]))})", f"attrs.{key}")


def conv2d_grad_weight_nchw(x, dy, stride, padding, kernel):
    """dw[oc, ic, i, j] = sum over n, oh, ow of dy * the input under tap (i, j)."""
    (sh, sw), (ph, pw) = stride, padding
    kh, kw = kernel
    n, ic, h, wd = x.shape
    _, oc, oh, ow = dy.shape
    xp = np.zeros((n, ic, max(h + 2 * ph, (oh - 1) * sh + kh),
                   max(wd + 2 * pw, (ow - 1) * sw + kw)))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    dw = np.empty((oc, ic, kh, kw))
    dy64 = np.asarray(dy, np.float64)
    for i in range(kh):
        for j in range(kw):
            tap = xp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
            dw[:, :, i, j] = np.tensordot(dy64, tap, axes=([0, 2, 3], [0, 2, 3]))
    return dw.astype(np.float32)


_CONV_ATTRS = [Attr("stride", "pair", (1, 1), minimum=1, doc="the conv's stride"),
               Attr("padding", "pair", (0, 0), minimum=0, doc="the conv's padding")]

register(OpSpec(
    "conv2d_grad_data", ("dy", "w"), 2, 2, _grad_data_infer,
    lambda a, at, n: [conv2d_grad_data_nchw(a[0], a[1], at["stride"], at["padding"],
                                            at["input_size"])],
    lambda ins, outs, at: 2 * numel(ins[0]) * ins[1][1] * ins[1][2] * ins[1][3],
    attrs=_CONV_ATTRS + [Attr("input_size", "pair", minimum=1, doc="the conv input's [H, W]"),
                         Attr("ic_bn", "int", None, minimum=1,
                              doc="CONV template knob of the stride-1 data gradient's forward "
                                  "CONV (dy as x, weights [IC, OC, KH, KW]): its input-channel "
                                  "block (divides OC)"),
                         Attr("oc_bn", "int", None, minimum=1,
                              doc="its output-channel block (divides IC)"),
                         Attr("reg_n", "int", None, minimum=1,
                              doc="its output columns per register block"),
                         Attr("unroll_ker", "bool", None, doc="unroll its kernel-width loop"),
                         Attr("reg_h", "int", None, minimum=1,
                              doc="its output rows per register block (1 or 2)"),
                         Attr("winograd", "int", None, minimum=0,
                              doc="0: the direct template; 2: Winograd F(2x2, 3x3), whatever "
                                  "the per-run size rule would pick"),
                         Attr("units", "int", None, minimum=1,
                              doc="im2col data gradient (any other): channel blocks per "
                                  "thread (1, 2 or 4)"),
                         Attr("tile_cols", "int", None, minimum=1,
                              doc="im2col data gradient: at most this many output columns per "
                                  "tile (whole rows; 64 to 1024)")],
    doc="NCHW conv2d data gradient: dx [N, IC, H, W] from dy and w [OC, IC, KH, KW]; at "
        "stride 1 it runs as the forward CONV of dy (the CONV template's knobs as conv2d's), "
        "else as an im2col GEMM with col2im (its own knobs, hwtune/grad_conv.h)"))

register(OpSpec(
    "conv2d_grad_weight", ("x", "dy"), 2, 2, _grad_weight_infer,
    lambda a, at, n: [conv2d_grad_weight_nchw(a[0], a[1], at["stride"], at["padding"],
                                              at["kernel"])],
    lambda ins, outs, at: 2 * numel(ins[1]) * ins[0][1] * at["kernel"][0] * at["kernel"][1],
    attrs=_CONV_ATTRS + [Attr("kernel", "pair", minimum=1, doc="the weights' [KH, KW]"),
                         Attr("winograd", "int", None, minimum=0,
                              doc="0: an im2col GEMM; 2: Winograd F(2x2, 3x3) (3x3, stride 1)"),
                         Attr("units", "int", None, minimum=1,
                              doc="channel blocks per thread (1, 2 or 4)"),
                         Attr("tile_cols", "int", None, minimum=1,
                              doc="at most this many output columns per im2col tile (whole "
                                  "rows; 64 to 1024)"),
                         Attr("chunk_tiles", "int", None, minimum=1,
                              doc="at least this many 2x2 tiles per Winograd GEMM chunk "
                                  "(whole images; 32 to 512)")],
    doc="NCHW conv2d weight gradient: dw [OC, IC, KH, KW] from x and dy; its knobs "
        "(legal values declared by the C op, hwtune/grad_conv.h) tuned by tune-graph --train"))


def _pool_grad_infer(in_shapes, attrs, n_out):
    x, dy = in_shapes
    _check_4d(in_shapes, "x")
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel"], _stride(attrs), attrs["padding"]
    oh = _out_len(x[2], kh, sh, ph, attrs["ceil_mode"])
    ow = _out_len(x[3], kw, sw, pw, attrs["ceil_mode"])
    if tuple(dy) != (x[0], x[1], oh, ow):
        raise OpError(f"dy must be {show_shape((x[0], x[1], oh, ow))}, got {show_shape(dy)}",
                      "inputs[1]")
    return [tuple(x)]


def pool2d_grad_nchw(x, dy, mode, kernel, stride, padding, ceil_mode, count_include_pad):
    """max: each window's dy goes to its first maximum (row-major, as the
    forward's scan keeps the first); avg: dy / the window's divisor to every
    position it averaged."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    n, c, h, w = x.shape
    oh, ow = dy.shape[2], dy.shape[3]
    hp, wp = max(h + 2 * ph, (oh - 1) * sh + kh), max(w + 2 * pw, (ow - 1) * sw + kw)
    dxp = np.zeros((n, c, hp, wp))
    dy = np.asarray(dy, np.float64)
    if mode == "max":
        xp = np.full((n, c, hp, wp), -np.inf)
        xp[:, :, ph:ph + h, pw:pw + w] = x
        y = pool2d_nchw(x, "max", kernel, stride, padding, ceil_mode, False).astype(np.float64)
        taken = np.zeros((n, c, oh, ow), bool)
        for i in range(kh):
            for j in range(kw):
                rows = slice(i, i + sh * (oh - 1) + 1, sh)
                cols = slice(j, j + sw * (ow - 1) + 1, sw)
                hit = (xp[:, :, rows, cols] == y) & ~taken
                dxp[:, :, rows, cols] += np.where(hit, dy, 0.0)
                taken |= hit
    else:
        inside = np.zeros((hp, wp))
        if count_include_pad:
            inside[:h + 2 * ph, :w + 2 * pw] = 1
        else:
            inside[ph:ph + h, pw:pw + w] = 1
        count = np.zeros((oh, ow))
        for i in range(kh):
            for j in range(kw):
                count += inside[i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
        share = dy / count
        for i in range(kh):
            for j in range(kw):
                dxp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw] += share
        dxp *= inside
    return dxp[:, :, ph:ph + h, pw:pw + w].astype(np.float32)


register(OpSpec(
    "pool2d_grad", ("x", "dy"), 2, 2, _pool_grad_infer,
    lambda a, at, n: [pool2d_grad_nchw(a[0], a[1], at["mode"], at["kernel"], _stride(at),
                                       at["padding"], at["ceil_mode"],
                                       at["count_include_pad"])],
    lambda ins, outs, at: numel(ins[1]) * at["kernel"][0] * at["kernel"][1],
    # Symmetric padding only: autodiff refuses a pool2d with padding_end.
    attrs=[a for a in REGISTRY["pool2d"].attrs if a.name not in ("layout", "padding_end")],
    doc="NCHW pool2d (and global_pool2d, as a whole-plane window) gradient"))


# ---- normalisation ------------------------------------------------------------

def _bn_infer(in_shapes, attrs, n_out):
    x = in_shapes[0]
    if len(x) < 2:
        raise OpError(f"x needs a channel axis, got {show_shape(x)}", "inputs[0]")
    _same(in_shapes[:2])
    for i in (2, 3, 4):
        if tuple(in_shapes[i]) != (x[1],):
            raise OpError(f"must have shape [{x[1]}], got {show_shape(in_shapes[i])}",
                          f"inputs[{i}]")
    return [tuple(x), (x[1],), (x[1],)]


def _bn_ref(arrays, attrs, n_out):
    x, dy, gamma, mean, var = _f64(*arrays)
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    inv = 1.0 / np.sqrt(var + attrs["epsilon"])
    axes = (0,) + tuple(range(2, x.ndim))
    xhat = (x - mean.reshape(shape)) * inv.reshape(shape)
    dx = dy * (gamma * inv).reshape(shape)
    return [dx.astype(np.float32), (dy * xhat).sum(axis=axes).astype(np.float32),
            dy.sum(axis=axes).astype(np.float32)]


register(OpSpec(
    "batch_norm_grad", ("x", "dy", "gamma", "mean", "var"), 5, 5, _bn_infer, _bn_ref,
    lambda ins, outs, attrs: 5 * numel(ins[0]),
    attrs=[Attr("epsilon", "float", 1e-5, minimum=0.0, doc="the batch_norm's epsilon")],
    n_outputs=3,
    doc="gradients of an NCHW (or [N, C]) batch_norm with fixed statistics: dx, dgamma, "
        "dbeta"))


def _bn_train_infer(in_shapes, attrs, n_out):
    x = in_shapes[0]
    if len(x) < 2:
        raise OpError(f"x needs a channel axis, got {show_shape(x)}", "inputs[0]")
    for i in (1, 2):
        if tuple(in_shapes[i]) != (x[1],):
            raise OpError(f"must have shape [{x[1]}], got {show_shape(in_shapes[i])}",
                          f"inputs[{i}]")
    return [tuple(x), (x[1],), (x[1],)]


def _bn_train_ref(arrays, attrs, n_out):
    x, gamma, beta = _f64(*arrays)
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    axes = (0,) + tuple(range(2, x.ndim))
    mean = x.mean(axis=axes)
    inv = 1.0 / np.sqrt(((x - mean.reshape(shape)) ** 2).mean(axis=axes) + attrs["epsilon"])
    y = (x - mean.reshape(shape)) * (gamma * inv).reshape(shape) + beta.reshape(shape)
    return [y.astype(np.float32), mean.astype(np.float32), inv.astype(np.float32)]


register(OpSpec(
    "batch_norm_train", ("x", "gamma", "beta"), 3, 3, _bn_train_infer, _bn_train_ref,
    lambda ins, outs, attrs: 6 * numel(ins[0]),
    attrs=[Attr("epsilon", "float", 1e-5, minimum=0.0, doc="added to the variance")],
    n_outputs=3,
    doc="batch_norm in training mode (PyTorch's model.train()): normalise an NCHW (or [N, C]) "
        "x by its batch's mean and biased variance over N, H, W; outputs y, mean and "
        "invstd = 1 / sqrt(var + epsilon) (kept for the backward pass)"))


def _bn_train_grad_infer(in_shapes, attrs, n_out):
    x = in_shapes[0]
    _same(in_shapes[:2])
    _bn_train_infer([x, in_shapes[2], in_shapes[3]], attrs, n_out)
    if tuple(in_shapes[4]) != (x[1],):
        raise OpError(f"must have shape [{x[1]}], got {show_shape(in_shapes[4])}", "inputs[4]")
    return [tuple(x), (x[1],), (x[1],)]


def _bn_train_grad_ref(arrays, attrs, n_out):
    x, dy, gamma, mean, inv = _f64(*arrays)
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    axes = (0,) + tuple(range(2, x.ndim))
    m = x.size / x.shape[1]
    xhat = (x - mean.reshape(shape)) * inv.reshape(shape)
    db, dg = dy.sum(axis=axes), (dy * xhat).sum(axis=axes)
    dx = (gamma * inv).reshape(shape) * (dy - (db / m).reshape(shape)
                                         - xhat * (dg / m).reshape(shape))
    return [dx.astype(np.float32), dg.astype(np.float32), db.astype(np.float32)]


register(OpSpec(
    "batch_norm_train_grad", ("x", "dy", "gamma", "mean", "invstd"), 5, 5,
    _bn_train_grad_infer, _bn_train_grad_ref,
    lambda ins, outs, attrs: 8 * numel(ins[0]), n_outputs=3,
    doc="gradients of batch_norm_train from its saved mean and invstd: dx (through the batch "
        "statistics), dgamma, dbeta"))


def _bn_stats_infer(in_shapes, attrs, n_out):
    c = tuple(in_shapes[0])
    for i in (1, 2, 3):
        if tuple(in_shapes[i]) != c:
            raise OpError(f"must have the running mean's shape {show_shape(c)}, got "
                          f"{show_shape(in_shapes[i])}", f"inputs[{i}]")
    return [c, c]


def _bn_stats_ref(arrays, attrs, n_out):
    mean, var, bmean, inv = _f64(*arrays)
    m, n = attrs["momentum"], attrs["count"]
    bvar = (1.0 / (inv * inv) - attrs["epsilon"]) * (n / (n - 1) if n > 1 else 1.0)
    return [((1 - m) * mean + m * bmean).astype(np.float32),
            ((1 - m) * var + m * bvar).astype(np.float32)]


register(OpSpec(
    "batch_norm_stats_update", ("mean", "var", "batch_mean", "batch_invstd"), 4, 4,
    _bn_stats_infer, _bn_stats_ref, lambda ins, outs, attrs: 8 * numel(ins[0]), n_outputs=2,
    attrs=[Attr("momentum", "float", 0.1, minimum=0.0, doc="weight of the batch's statistics"),
           Attr("epsilon", "float", 1e-5, minimum=0.0, doc="the batch_norm's epsilon"),
           Attr("count", "int", 2, minimum=1, doc="elements per channel in the batch (N H W)")],
    doc="running statistics after a batch_norm_train step (PyTorch's): mean' = (1 - m) mean "
        "+ m batch_mean; var' = (1 - m) var + m batch_var count / (count - 1), batch_var "
        "= 1 / invstd^2 - epsilon"))


# ---- movement -------------------------------------------------------------------

def _slice_grad_infer(in_shapes, attrs, n_out):
    dy = in_shapes[0]
    axis = normalize_axis(attrs["axis"], len(dy))
    if attrs["begin"] < 0 or attrs["begin"] + dy[axis] > attrs["size"]:
        raise OpError(f"a slice of {dy[axis]} at {attrs['begin']} does not fit in "
                      f"{attrs['size']}", "attrs.begin")
    shape = list(dy)
    shape[axis] = attrs["size"]
    return [tuple(shape)]


def _slice_grad_ref(arrays, attrs, n_out):
    dy = arrays[0]
    axis = normalize_axis(attrs["axis"], dy.ndim)
    shape = list(dy.shape)
    shape[axis] = attrs["size"]
    out = np.zeros(shape, np.float32)
    index = [slice(None)] * dy.ndim
    index[axis] = slice(attrs["begin"], attrs["begin"] + dy.shape[axis])
    out[tuple(index)] = dy
    return [out]


register(OpSpec(
    "slice_grad", ("dy",), 1, 1, _slice_grad_infer, _slice_grad_ref,
    lambda ins, outs, attrs: 0,
    attrs=[Attr("axis", "int", doc="the slice's axis"),
           Attr("begin", "int", minimum=0, doc="first position of dy along the axis"),
           Attr("size", "int", minimum=1, doc="the sliced input's length along the axis")],
    doc="dx: zeros with dy placed where the slice took it"))


# ---- losses ------------------------------------------------------------------------

def _loss_infer(in_shapes, attrs, n_out, what):
    _same(in_shapes, what)
    if what[0] == "logits" and len(in_shapes[0]) != 2:
        raise OpError(f"logits must be [N, C], got {show_shape(in_shapes[0])}", "inputs[0]")
    return [(1,), tuple(in_shapes[0])]


def _xent_ref(arrays, attrs, n_out):
    z, t = _f64(*arrays)
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    n = z.shape[0]
    loss = -(t * logp).sum() / n
    grad = (np.exp(logp) * t.sum(axis=1, keepdims=True) - t) / n
    return [np.array([loss], np.float32), grad.astype(np.float32)]


register(OpSpec(
    "softmax_cross_entropy", ("logits", "labels"), 2, 2,
    lambda s, a, n: _loss_infer(s, a, n, ("logits", "labels")), _xent_ref,
    lambda ins, outs, attrs: 6 * numel(ins[0]), n_outputs=2,
    doc="softmax over the last axis + cross-entropy against [N, C] label distributions "
        "(one-hot for classes), mean over N: outputs loss [1] and dlogits"))


def _mse_ref(arrays, attrs, n_out):
    y, t = _f64(*arrays)
    d = y - t
    return [np.array([(d * d).mean()], np.float32), (2.0 * d / d.size).astype(np.float32)]


register(OpSpec(
    "mse_loss", ("y", "target"), 2, 2,
    lambda s, a, n: _loss_infer(s, a, n, ("y", "target")), _mse_ref,
    lambda ins, outs, attrs: 4 * numel(ins[0]), n_outputs=2,
    doc="mean squared error: outputs loss [1] and dy = 2 (y - target) / numel"))


# ---- optimizer updates ------------------------------------------------------------

def _update_infer(in_shapes, attrs, n_out, n_state):
    p = tuple(in_shapes[0])
    for i in range(1, 2 + n_state):
        if tuple(in_shapes[i]) != p:
            raise OpError(f"must have the parameter's shape {show_shape(p)}, got "
                          f"{show_shape(in_shapes[i])}", f"inputs[{i}]")
    if len(in_shapes) > 2 + n_state and tuple(in_shapes[2 + n_state]) != (1,):
        raise OpError("step must have shape [1]", f"inputs[{2 + n_state}]")
    return [p] * (1 + n_state)


def _sgd_ref(arrays, attrs, n_out):
    p, g, m = _f64(*arrays)
    g = g + attrs["weight_decay"] * p
    m = attrs["momentum"] * m + g
    return [(p - attrs["lr"] * m).astype(np.float32), m.astype(np.float32)]


register(OpSpec(
    "sgd_update", ("param", "grad", "momentum"), 3, 3,
    lambda s, a, n: _update_infer(s, a, n, 1), _sgd_ref,
    lambda ins, outs, attrs: 4 * numel(ins[0]), n_outputs=2,
    attrs=[Attr("lr", "float", 0.01, minimum=0.0, doc="learning rate"),
           Attr("momentum", "float", 0.9, minimum=0.0, doc="momentum factor"),
           Attr("weight_decay", "float", 0.0, minimum=0.0, doc="L2 penalty")],
    doc="SGD with momentum (PyTorch's): m' = momentum m + g; p' = p - lr m'"))


def _adam_ref(arrays, attrs, n_out):
    p, g, m, v, step = _f64(*arrays)
    b1, b2, t = attrs["beta1"], attrs["beta2"], step[0]
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    mhat, vhat = m / (1 - b1 ** t), v / (1 - b2 ** t)
    p = p - attrs["lr"] * mhat / (np.sqrt(vhat) + attrs["epsilon"])
    return [p.astype(np.float32), m.astype(np.float32), v.astype(np.float32)]


register(OpSpec(
    "adam_update", ("param", "grad", "m", "v", "step"), 5, 5,
    lambda s, a, n: _update_infer(s, a, n, 2), _adam_ref,
    lambda ins, outs, attrs: 10 * numel(ins[0]), n_outputs=3,
    attrs=[Attr("lr", "float", 0.001, minimum=0.0, doc="learning rate"),
           Attr("beta1", "float", 0.9, minimum=0.0, doc="first-moment decay"),
           Attr("beta2", "float", 0.999, minimum=0.0, doc="second-moment decay"),
           Attr("epsilon", "float", 1e-8, minimum=0.0, doc="added to sqrt(v hat)")],
    doc="Adam (PyTorch's): moments, bias correction by step t (>= 1, a [1] tensor), "
        "p' = p - lr m^ / (sqrt(v^) + eps)"))
