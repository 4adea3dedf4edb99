"""Binding for hwtune/grad_conv.h: the weight gradient's (conv2d_grad_weight)
tunables, as the C op declares them next to its code: names, legal values,
the untuned default and the canonical form of a point (knobs its algorithm
does not read set to the default)."""

import ctypes
from typing import Dict, Tuple

from hwtune.errors import UsageError
from hwtune.native._lib import check, lib, sig
from hwtune.native.conv import _Desc, _desc, _Knob

_ci = ctypes.c_int
_Dp = ctypes.POINTER(_Desc)
sig("hwt_grad_weight_knob_name", ctypes.c_char_p, _ci)
sig("hwt_grad_weight_knobs", _ci, _Dp, ctypes.POINTER(_Knob))
sig("hwt_grad_weight_default", _ci, _Dp, ctypes.POINTER(_ci))
sig("hwt_grad_weight_canonical", _ci, _Dp, ctypes.POINTER(_ci))


def knob_names() -> Tuple[str, ...]:
    """The knobs in the C declaration's order (the op's attribute names)."""
    out, i = [], 0
    while True:
        name = lib.hwt_grad_weight_knob_name(i)
        if name is None:
            return tuple(out)
        out.append(name.decode())
        i += 1


def _d(x_shape, w_shape, stride, pad):
    return _desc(x_shape, w_shape, stride, pad)


def knobs(x_shape, w_shape, *, stride=1, pad=0) -> Dict[str, list]:
    """knob name -> legal values, for the weight gradient of the conv of x
    [N, C, H, W] by w [K, C, R, S]."""
    names = knob_names()
    d = _d(x_shape, w_shape, stride, pad)
    k = (_Knob * len(names))()
    check(lib.hwt_grad_weight_knobs(ctypes.byref(d), k), "weight gradient knobs")
    return {name: list(k[i].v[:k[i].n]) for i, name in enumerate(names)}


def default_params(x_shape, w_shape, *, stride=1, pad=0) -> Dict[str, int]:
    """The untuned choice (the op's rules when no knob is set)."""
    names = knob_names()
    d = _d(x_shape, w_shape, stride, pad)
    v = (_ci * len(names))()
    check(lib.hwt_grad_weight_default(ctypes.byref(d), v), "weight gradient default")
    return dict(zip(names, v))


def canonical(params, x_shape, w_shape, *, stride=1, pad=0) -> Dict[str, int]:
    """params (every knob) with the knobs their algorithm does not read set
    to the default; UsageError if a value is not legal."""
    names = knob_names()
    missing = [n for n in names if n not in params]
    if missing:
        raise UsageError(f"weight gradient params lack {', '.join(missing)}")
    d = _d(x_shape, w_shape, stride, pad)
    v = (_ci * len(names))(*(int(params[n]) for n in names))
    if lib.hwt_grad_weight_canonical(ctypes.byref(d), v) != 0:
        raise UsageError(f"weight gradient params {dict(params)} are not legal here "
                         f"(legal: {knobs(x_shape, w_shape, stride=stride, pad=pad)})")
    return dict(zip(names, v))
