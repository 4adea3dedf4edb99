"""Binding for hwtune/grad_conv.h: the tunables of the CONV gradients' own
kernels, as the C ops declare them next to their code -- conv2d_grad_weight
(im2col GEMM or Winograd) and conv2d_grad_data where it is an im2col GEMM --:
names, legal values, the untuned default and the canonical form of a point
(knobs its algorithm does not read set to the default). The conv is given as
the forward one: x [N, C, H, W], w [K, C, R, S], stride, padding."""

import ctypes
from typing import Dict, Tuple

from hwtune.errors import UsageError
from hwtune.native._lib import check, lib, sig
from hwtune.native.conv import _Desc, _desc, _Knob

OPS = {"conv2d_grad_weight": "hwt_grad_weight", "conv2d_grad_data": "hwt_grad_data"}

_ci = ctypes.c_int
_Dp = ctypes.POINTER(_Desc)
for _p in OPS.values():
    sig(f"{_p}_knob_name", ctypes.c_char_p, _ci)
    sig(f"{_p}_knobs", _ci, _Dp, ctypes.POINTER(_Knob))
    sig(f"{_p}_default", _ci, _Dp, ctypes.POINTER(_ci))
    sig(f"{_p}_canonical", _ci, _Dp, ctypes.POINTER(_ci))


def _fn(op, what):
    if op not in OPS:
        raise UsageError(f"no gradient knobs for {op!r} (known: {', '.join(OPS)})")
    return getattr(lib, f"{OPS[op]}_{what}")


def knob_names(op: str = "conv2d_grad_weight") -> Tuple[str, ...]:
    """The op's knobs in the C declaration's order (its attribute names)."""
    out, name_of = [], _fn(op, "knob_name")
    while True:
        name = name_of(len(out))
        if name is None:
            return tuple(out)
        out.append(name.decode())


def knobs(x_shape, w_shape, *, stride=1, pad=0, op: str = "conv2d_grad_weight"
          ) -> Dict[str, list]:
    """knob name -> legal values for the gradient of the conv of x by w;
    UsageError when the op has no such knobs for this conv (a stride-1 data
    gradient runs as a forward CONV, with the CONV template's knobs)."""
    names = knob_names(op)
    d = _desc(x_shape, w_shape, stride, pad)
    k = (_Knob * len(names))()
    if _fn(op, "knobs")(ctypes.byref(d), k) != 0:
        raise UsageError(f"{op} of this conv (x {tuple(x_shape)}, w {tuple(w_shape)}, stride "
                         f"{stride}, padding {pad}) has no im2col knobs")
    return {name: list(k[i].v[:k[i].n]) for i, name in enumerate(names)}


def default_params(x_shape, w_shape, *, stride=1, pad=0, op: str = "conv2d_grad_weight"
                   ) -> Dict[str, int]:
    """The untuned choice (the op's rules when no knob is set)."""
    names = knob_names(op)
    d = _desc(x_shape, w_shape, stride, pad)
    v = (_ci * len(names))()
    check(_fn(op, "default")(ctypes.byref(d), v), f"{op} default knobs")
    return dict(zip(names, v))


def canonical(params, x_shape, w_shape, *, stride=1, pad=0, op: str = "conv2d_grad_weight"
              ) -> Dict[str, int]:
    """params (every knob) with the knobs their algorithm does not read set
    to the default; UsageError if a value is not legal."""
    names = knob_names(op)
    missing = [n for n in names if n not in params]
    if missing:
        raise UsageError(f"{op} params lack {', '.join(missing)}")
    d = _desc(x_shape, w_shape, stride, pad)
    v = (_ci * len(names))(*(int(params[n]) for n in names))
    if _fn(op, "canonical")(ctypes.byref(d), v) != 0:
        raise UsageError(f"{op} params {dict(params)} are not legal here")
    return dict(zip(names, v))
