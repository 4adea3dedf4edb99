"""Binding for hwtune/conv.h: 2-D convolution (the NeoCPU NCHW[x]c template
on NCHW or NCHW[x]c tensors, and the portable direct NCHW kernel), its knob
declaration, and the layout transforms.

Layouts: "NCHW" (NCHW in and out, run by the template: input rows staged and
output rows transposed inside the kernel), "NCHWc" (blocked in and out) and
"NCHW-direct" (the portable direct kernel, the fallback for shapes the
template refuses)."""

import ctypes

import numpy as np

from hwtune.errors import UsageError
from hwtune.native._lib import check, enum_names, lib, sig
from hwtune.native.abi import mirror
from hwtune.native.isa import resolve_isa

# "NCHW", "NCHWc", "NCHW-direct", "NCHW-gemm", "NCHW-stem"; index = value
LAYOUTS = tuple(enum_names("hwt_conv_layout"))
ACTS = enum_names("hwt_conv_activation")  # "none", "silu", "hard_swish" -> value
KNOBS = ("ic_bn", "oc_bn", "reg_n", "unroll_ker", "reg_h", "winograd")  # hwt_conv_params order
_KNOB_MAX = 128


_Desc = mirror("hwt_conv_desc")
_Params = mirror("hwt_conv_params")
_Knob = mirror("hwt_conv_knob", v=ctypes.c_int * _KNOB_MAX)
_Knobs = mirror("hwt_conv_knobs_t", **{n: _Knob for n in KNOBS})
_Plan = mirror("hwt_conv_plan", d=_Desc, p=_Params)


_F = ctypes.POINTER(ctypes.c_float)
_ci = ctypes.c_int
_Dp, _Pp = ctypes.POINTER(_Desc), ctypes.POINTER(_Plan)
sig("hwt_conv_out_dims", _ci, _Dp, ctypes.POINTER(_ci), ctypes.POINTER(_ci))
sig("hwt_conv_knobs", _ci, _Dp, _ci, ctypes.POINTER(_Knobs))
sig("hwt_conv_default_params", _ci, _Dp, _ci, ctypes.POINTER(_Params))
sig("hwt_conv_plan_make", _ci, _Dp, _ci, ctypes.POINTER(_Params), _ci, _ci, _Pp)
sig("hwt_conv_pack_weights", _ci, _Pp, _F, _F)
sig("hwt_conv_run_part", None, _Pp, _F, _F, _F, _F, _F, _ci, _ci)
sig("hwt_conv_ref", _ci, _Dp, _F, _F, _F, _F)
sig("hwt_conv_transpose_ref", _ci, _Dp, _F, _F, _F, _F)
sig("hwt_layout_check", _ci, _ci, _ci, ctypes.c_long, _ci, _ci)
sig("hwt_layout_run_part", None, _ci, _ci, ctypes.c_long, _ci, _ci, _F, _F, _ci, _ci, _ci)
for _name in ("hwt_layout_oihw_to_blocked", "hwt_layout_blocked_to_oihw"):
    sig(_name, _ci, *[_ci] * 6, _F, _F)


def _ptr(a):
    return None if a is None else a.ctypes.data_as(_F)


def _f32(a, what):
    a = np.ascontiguousarray(a, dtype=np.float32)
    if a.ndim == 0:
        raise UsageError(f"{what} must be an array, got a scalar")
    return a


def _pair(v, name):
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise UsageError(f"{name} must be an int or a pair, got {v!r}")
        return int(v[0]), int(v[1])
    return int(v), int(v)


def _desc(x_shape, w_shape, stride, pad, relu=False, dilation=1, pad_end=None, relu_max=None,
          act=None):
    """pad: [top, left] zeros (or one int); pad_end: [bottom, right], None
    for the same as pad (symmetric); relu_max: with relu, the clamp's upper
    bound (ReLU6's 6), None for none; act: "silu" / "hard_swish" after the
    bias (not with relu), None for none."""
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise UsageError(f"conv2d wants x [N,C,H,W] and w [K,C,R,S], got {tuple(x_shape)} "
                         f"and {tuple(w_shape)}")
    n, c, h, w = (int(v) for v in x_shape)
    k, c2, r, s = (int(v) for v in w_shape)
    if c != c2:
        raise UsageError(f"input has {c} channels but the weights expect {c2}")
    sh, sw = _pair(stride, "stride")
    ph, pw = _pair(pad, "pad")
    eh, ew = (ph, pw) if pad_end is None else _pair(pad_end, "pad_end")
    dh, dw = _pair(dilation, "dilation")
    if relu_max is not None and not (relu and relu_max > 0):
        raise UsageError(f"relu_max needs relu and must be positive, got {relu_max!r}")
    if act is not None and (act not in ACTS or act == "none" or relu):
        raise UsageError(f"act must be one of {', '.join(a for a in ACTS if a != 'none')} "
                         f"and is not given with relu, got {act!r}")
    d = _Desc(n, c, h, w, k, r, s, sh, sw, ph, pw, int(bool(relu)), dh, dw, eh, ew,
              0.0 if relu_max is None else float(relu_max), ACTS[act] if act else 0)
    if lib.hwt_conv_out_dims(ctypes.byref(d), None, None) != 0:
        raise UsageError(
            f"invalid conv2d shape: x {tuple(x_shape)}, w {tuple(w_shape)}, stride {stride}, "
            f"pad {pad}, pad_end {pad_end}, dilation {dilation} (sizes, strides and "
            "dilations must be >= 1, pads >= 0, output non-empty)")
    return d


def out_shape(x_shape, w_shape, *, stride=1, pad=0, dilation=1, pad_end=None) -> tuple:
    d = _desc(x_shape, w_shape, stride, pad, dilation=dilation, pad_end=pad_end)
    oh, ow = ctypes.c_int(), ctypes.c_int()
    lib.hwt_conv_out_dims(ctypes.byref(d), ctypes.byref(oh), ctypes.byref(ow))
    return (d.N, d.K, oh.value, ow.value)


def knobs(x_shape, w_shape, *, stride=1, pad=0, isa=None, dilation=1, pad_end=None) -> dict:
    """The NCHW[x]c template's search space: knob name -> legal values.

    Declared by the C template itself (hwt_conv_knobs); any combination of
    listed values is accepted by conv2d(layout="NCHWc").
    """
    d = _desc(x_shape, w_shape, stride, pad, dilation=dilation, pad_end=pad_end)
    k = _Knobs()
    check(lib.hwt_conv_knobs(ctypes.byref(d), resolve_isa(isa),
                             ctypes.byref(k)), "conv knobs")
    return {name: list(getattr(k, name).v[:getattr(k, name).n]) for name in KNOBS}


def nchw_kernel(x_shape, w_shape, *, stride=1, pad=0, isa=None, dilation=1,
                pad_end=None) -> str:
    """The kernel an NCHW conv with default params runs (the plan's layout:
    "NCHW" for the template, "NCHW-direct", "NCHW-gemm", "NCHW-stem"), planned only."""
    d = _desc(x_shape, w_shape, stride, pad, False, dilation, pad_end)
    plan = _Plan()
    check(lib.hwt_conv_plan_make(ctypes.byref(d), LAYOUTS.index("NCHW"), None,
                                 resolve_isa(isa), 1, ctypes.byref(plan)), "conv2d plan (NCHW)")
    return LAYOUTS[plan.layout]


def default_params(x_shape, w_shape, *, stride=1, pad=0, isa=None, dilation=1,
                   pad_end=None) -> dict:
    """Untuned fallback derived from the SIMD width of `isa`."""
    d = _desc(x_shape, w_shape, stride, pad, dilation=dilation, pad_end=pad_end)
    p = _Params()
    check(lib.hwt_conv_default_params(ctypes.byref(d), resolve_isa(isa),
                                      ctypes.byref(p)), "conv default params")
    return {name: getattr(p, name) for name in KNOBS}


def _params(params, d, isa_i):
    if params is None:
        return None
    unknown = set(params) - set(KNOBS)
    if unknown:
        raise UsageError(f"unknown conv2d params {sorted(unknown)}: use {', '.join(KNOBS)}")
    p = _Params()
    lib.hwt_conv_default_params(ctypes.byref(d), isa_i, ctypes.byref(p))
    for name, v in params.items():
        setattr(p, name, int(v))
    return p


def conv2d(x, w, bias=None, *, stride=1, pad=0, relu=False, layout="NCHW", params=None,
           isa=None, nth=1, dilation=1, pad_end=None, relu_max=None, act=None) -> np.ndarray:
    """y = conv2d(x, w) + bias (then ReLU if relu, clamped to relu_max if
    given; or the activation act, "silu" / "hard_swish"), NCHW in and out.

    layout="NCHW" runs the template on the NCHW tensors; "NCHWc" transforms
    x to NCHW[ic_bn]c first and y back from NCHW[oc_bn]c; "NCHW-direct" runs
    the direct kernel (params ignored). All `nth` shares run sequentially in
    this process, which exercises the partition without a thread pool.
    """
    if layout not in LAYOUTS:
        raise UsageError(f"unknown layout {layout!r}: choose one of {', '.join(LAYOUTS)}")
    if int(nth) < 1:
        raise UsageError(f"nth must be >= 1, got {nth}")
    x = _f32(x, "input")
    w = _f32(w, "weights")
    d = _desc(x.shape, w.shape, stride, pad, relu, dilation, pad_end, relu_max, act)
    if bias is not None:
        bias = _f32(bias, "bias")
        if bias.shape != (d.K,):
            raise UsageError(f"bias must have shape ({d.K},), got {bias.shape}")
    isa_i = resolve_isa(isa)
    p = _params(params, d, isa_i)
    lay = LAYOUTS.index(layout)
    plan = _Plan()
    check(lib.hwt_conv_plan_make(ctypes.byref(d), lay, None if p is None else ctypes.byref(p),
                                 isa_i, int(nth), ctypes.byref(plan)),
          f"conv2d plan ({layout}, params {params})")
    wp = np.empty(plan.w_floats, np.float32)
    check(lib.hwt_conv_pack_weights(ctypes.byref(plan), _ptr(w), _ptr(wp)), "conv2d weights")
    ic_bn, oc_bn = plan.p.ic_bn, plan.p.oc_bn
    xin = to_nchwc(x, ic_bn) if lay == 1 else x
    y = np.empty(plan.y_floats, np.float32)
    # 64-byte aligned workspace per share, reused: shares run one after another.
    ws_raw = np.empty(plan.ws_floats + 16, np.float32)
    off = (-ws_raw.ctypes.data % 64) // 4
    ws = ws_raw[off:off + plan.ws_floats]
    for tid in range(int(nth)):
        lib.hwt_conv_run_part(ctypes.byref(plan), _ptr(xin), _ptr(wp), _ptr(bias), _ptr(y),
                              _ptr(ws), tid, int(nth))
    if lay == 1:
        y = y.reshape(d.N, d.K // oc_bn, plan.OH, plan.OW, oc_bn)
        return from_nchwc(y)
    return y.reshape(d.N, d.K, plan.OH, plan.OW)


class Conv2dPlan:
    """A planned convolution in its own layout, for repeated runs (timing,
    the engine): weights packed once, one workspace reused by every share.

    run() takes x and returns y in the plan's layout: NCHW, or NCHW[ic_bn]c
    in and NCHW[oc_bn]c out for "NCHWc". `layout` afterwards names the
    kernel that runs ("NCHW" may become "NCHW-direct"), `params` the
    template's parameters (None for the direct kernel).
    """

    def __init__(self, x_shape, w, bias=None, *, stride=1, pad=0, relu=False, layout="NCHW",
                 params=None, isa=None, nth=1, dilation=1, pad_end=None, act=None):
        if layout not in LAYOUTS:
            raise UsageError(f"unknown layout {layout!r}: choose one of {', '.join(LAYOUTS)}")
        if int(nth) < 1:
            raise UsageError(f"nth must be >= 1, got {nth}")
        w = _f32(w, "weights")
        self._d = _desc(x_shape, w.shape, stride, pad, relu, dilation, pad_end, act=act)
        isa_i = resolve_isa(isa)
        p = _params(params, self._d, isa_i)
        self.layout, self.nth = layout, int(nth)
        self._plan = _Plan()
        check(lib.hwt_conv_plan_make(ctypes.byref(self._d), LAYOUTS.index(layout),
                                     None if p is None else ctypes.byref(p), isa_i, self.nth,
                                     ctypes.byref(self._plan)),
              f"conv2d plan ({layout}, params {params})")
        self._w = np.empty(self._plan.w_floats, np.float32)
        check(lib.hwt_conv_pack_weights(ctypes.byref(self._plan), _ptr(w), _ptr(self._w)),
              "conv2d weights")
        d = self._d
        if bias is not None:
            bias = _f32(bias, "bias")
            if bias.shape != (d.K,):
                raise UsageError(f"bias must have shape ({d.K},), got {bias.shape}")
        self._bias = bias
        raw = np.empty(self._plan.ws_floats + 16, np.float32)
        off = (-raw.ctypes.data % 64) // 4
        self._ws = raw[off:off + self._plan.ws_floats]
        # The plan's layout is the kernel that runs: NCHW falls back to
        # NCHW-direct for shapes the template refuses.
        self.layout = LAYOUTS[self._plan.layout]
        self.params = ({name: getattr(self._plan.p, name) for name in KNOBS}
                       if self.layout not in ("NCHW-direct", "NCHW-gemm", "NCHW-stem") else None)
        oh, ow = self._plan.OH, self._plan.OW
        if layout == "NCHWc":
            ib, ob = self._plan.p.ic_bn, self._plan.p.oc_bn
            self.in_shape = (d.N, d.C // ib, d.H, d.W, ib)
            self.out_shape = (d.N, d.K // ob, oh, ow, ob)
        else:
            self.in_shape = (d.N, d.C, d.H, d.W)
            self.out_shape = (d.N, d.K, oh, ow)
        self.flops = 2.0 * d.N * d.K * oh * ow * d.C * d.R * d.S

    def run(self, x, out=None) -> np.ndarray:
        x = _f32(x, "input")
        if x.shape != self.in_shape:
            raise UsageError(f"input shape {x.shape} does not match the plan's {self.in_shape}")
        if out is None:
            out = np.empty(self.out_shape, np.float32)
        elif out.shape != self.out_shape or out.dtype != np.float32 or \
                not out.flags.c_contiguous:
            raise UsageError(f"out must be a contiguous float32 array of shape {self.out_shape}")
        for tid in range(self.nth):
            lib.hwt_conv_run_part(ctypes.byref(self._plan), _ptr(x), _ptr(self._w),
                                  _ptr(self._bias), _ptr(out), _ptr(self._ws), tid, self.nth)
        return out


def conv2d_ref(x, w, bias=None, *, stride=1, pad=0, relu=False, dilation=1,
               pad_end=None, relu_max=None, act=None) -> np.ndarray:
    """The C reference (double accumulation), NCHW/OIHW."""
    x = _f32(x, "input")
    w = _f32(w, "weights")
    d = _desc(x.shape, w.shape, stride, pad, relu, dilation, pad_end, relu_max, act)
    if bias is not None:
        bias = _f32(bias, "bias")
    y = np.empty(out_shape(x.shape, w.shape, stride=stride, pad=pad, dilation=dilation,
                           pad_end=pad_end), np.float32)
    check(lib.hwt_conv_ref(ctypes.byref(d), _ptr(x), _ptr(w), _ptr(bias), _ptr(y)), "conv ref")
    return y


def conv_transpose2d_ref(x, w, bias=None, *, out_hw, stride=1, pad=0,
                         dilation=1) -> np.ndarray:
    """ConvTranspose by the C reference: x [N, K, H, W], w [K, C, R, S] (the
    ONNX/PyTorch layout), y [N, C, out_hw]; pad: the [top, left] rows and
    columns cropped from the full output. The C side describes it as the
    adjoint of the conv from y's shape to x's, whose end padding follows
    from out_hw (output_padding is an out_hw the windows do not reach)."""
    x = _f32(x, "input")
    w = _f32(w, "weights")
    if x.ndim != 4 or w.ndim != 4 or x.shape[1] != w.shape[0]:
        raise UsageError(f"conv_transpose2d wants x [N,K,H,W] and w [K,C,R,S], got "
                         f"{x.shape} and {w.shape}")
    (sh, sw), (ph, pw), (dh, dw) = (_pair(stride, "stride"), _pair(pad, "pad"),
                                    _pair(dilation, "dilation"))
    oh, ow = (int(v) for v in out_hw)
    n, k, h, wd = x.shape
    _, c, r, s = w.shape
    ends = [max(0, (h - 1) * sh + (r - 1) * dh + 1 - oh - ph),
            max(0, (wd - 1) * sw + (s - 1) * dw + 1 - ow - pw)]
    d = _desc((n, c, oh, ow), (k, c, r, s), (sh, sw), (ph, pw), dilation=(dh, dw),
              pad_end=ends)
    if out_shape((n, c, oh, ow), (k, c, r, s), stride=(sh, sw), pad=(ph, pw),
                 dilation=(dh, dw), pad_end=ends)[2:] != (h, wd):
        raise UsageError(f"no convolution maps {out_hw} to {x.shape[2:]} with stride {stride}, "
                         f"padding {pad}, dilation {dilation}")
    if bias is not None:
        bias = _f32(bias, "bias")
    y = np.empty((n, c, oh, ow), np.float32)
    check(lib.hwt_conv_transpose_ref(ctypes.byref(d), _ptr(x), _ptr(w), _ptr(bias), _ptr(y)),
          "conv transpose ref")
    return y


def _transform(src, n, c, hw, src_bn, dst_bn, nth, isa=None):
    check(lib.hwt_layout_check(n, c, hw, src_bn, dst_bn),
          f"layout transform of {c} channels (block {src_bn} -> {dst_bn}: blocks must divide "
          f"the channel count)")
    dst = np.empty(n * c * hw, np.float32)
    isa_i = resolve_isa(isa)
    for tid in range(nth):
        lib.hwt_layout_run_part(n, c, hw, src_bn, dst_bn, _ptr(src), _ptr(dst), tid, nth, isa_i)
    return dst


def to_nchwc(x, c_bn, *, nth=1, isa=None) -> np.ndarray:
    """NCHW [N,C,H,W] -> NCHW[c_bn]c [N, C/c_bn, H, W, c_bn]."""
    x = _f32(x, "input")
    if x.ndim != 4:
        raise UsageError(f"to_nchwc wants a 4-D NCHW array, got shape {x.shape}")
    n, c, h, w = x.shape
    y = _transform(x, n, c, h * w, 0, int(c_bn), int(nth), isa)
    return y.reshape(n, c // int(c_bn), h, w, int(c_bn))


def from_nchwc(x, *, nth=1, isa=None) -> np.ndarray:
    """NCHW[x]c [N, C/x, H, W, x] -> NCHW [N,C,H,W]."""
    x = _f32(x, "input")
    if x.ndim != 5:
        raise UsageError(f"from_nchwc wants a 5-D NCHW[x]c array, got shape {x.shape}")
    n, cb, h, w, bn = x.shape
    y = _transform(x, n, cb * bn, h * w, bn, 0, int(nth), isa)
    return y.reshape(n, cb * bn, h, w)


def rechunk_nchwc(x, c_bn, *, nth=1, isa=None) -> np.ndarray:
    """NCHW[x]c -> NCHW[c_bn]c (the LayoutTransform between two CONVs)."""
    x = _f32(x, "input")
    if x.ndim != 5:
        raise UsageError(f"rechunk_nchwc wants a 5-D NCHW[x]c array, got shape {x.shape}")
    n, cb, h, w, bn = x.shape
    y = _transform(x, n, cb * bn, h * w, bn, int(c_bn), int(nth), isa)
    return y.reshape(n, cb * bn // int(c_bn), h, w, int(c_bn))


def to_blocked_weights(w, ic_bn, oc_bn) -> np.ndarray:
    """OIHW [K,C,R,S] -> OIHW[ic_bn]i[oc_bn]o [K/oc_bn, C/ic_bn, R, S, ic_bn, oc_bn]."""
    w = _f32(w, "weights")
    if w.ndim != 4:
        raise UsageError(f"to_blocked_weights wants 4-D OIHW weights, got shape {w.shape}")
    k, c, r, s = w.shape
    out = np.empty(w.size, np.float32)
    check(lib.hwt_layout_oihw_to_blocked(k, c, r, s, int(ic_bn), int(oc_bn), _ptr(w),
                                         _ptr(out)),
          f"weight blocking {ic_bn}i{oc_bn}o of {w.shape}")
    return out.reshape(k // int(oc_bn), c // int(ic_bn), r, s, int(ic_bn), int(oc_bn))


def from_blocked_weights(wb) -> np.ndarray:
    """OIHW[x]i[y]o [K/y, C/x, R, S, x, y] -> OIHW [K,C,R,S]."""
    wb = _f32(wb, "weights")
    if wb.ndim != 6:
        raise UsageError(f"from_blocked_weights wants 6-D blocked weights, got {wb.shape}")
    kb, cb, r, s, ib, ob = wb.shape
    out = np.empty(wb.size, np.float32)
    check(lib.hwt_layout_blocked_to_oihw(kb * ob, cb * ib, r, s, ib, ob, _ptr(wb), _ptr(out)),
          "weight unblocking")
    return out.reshape(kb * ob, cb * ib, r, s)
