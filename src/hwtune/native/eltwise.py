"""Binding for hwtune/eltwise.h (element-wise FP32 ops) and hwtune/probe.h.

`eltwise()` runs every share of the thread split one after another in this
thread: that exercises the partition exactly as a pool would (shares are
disjoint, line-aligned and need no synchronisation); the parallel pool lives
in hwtune.native.threads.
"""

import ctypes
from typing import Dict, NamedTuple, Optional, Tuple

import numpy as np

from hwtune.errors import UsageError
from hwtune.native._lib import check, lib, sig
from hwtune.native.abi import mirror
from hwtune.native.isa import resolve_isa

# Partition contract: run_part is exercised up to this many shares.
MAX_THREADS = 1024

_c_float_p = ctypes.POINTER(ctypes.c_float)
_i, _s = ctypes.c_int, ctypes.c_char_p

# The op table's accessors (hwtune/eltwise.h).
for _name, _args, _res in (
        ("hwt_eltwise_count", [], _i), ("hwt_eltwise_name", [_i], _s),
        ("hwt_eltwise_kind_name", [_i], _s), ("hwt_eltwise_operands", [_i], _i),
        ("hwt_eltwise_is_graph_op", [_i], _i), ("hwt_eltwise_flops", [_i], _i),
        ("hwt_eltwise_attr_count", [_i], _i), ("hwt_eltwise_attr_name", [_i, _i], _s),
        ("hwt_eltwise_attr_default", [_i, _i], ctypes.c_double)):
    sig(_name, _res, *_args)

MAX_ATTRS = 2  # HWT_EW_MAX_ATTRS; EltwiseDesc's layout is checked against C by tests/test_native_abi.py


class OpInfo(NamedTuple):
    """One row of the C op table (hwtune/eltwise_ops.def)."""

    name: str
    kind: str            # "unary", "binary" (broadcasting), "nary", "ternary"
    operands: int        # arrays one kernel call reads: a[, b[, c]]
    graph_op: bool       # usable in model.json (False: a kernel only, e.g. fma)
    flops: int           # per output element (nary: per input after the first)
    attrs: Tuple[Tuple[str, float], ...]  # (name, default), in table order


def _table() -> Dict[str, OpInfo]:
    ops = {}
    for i in range(lib.hwt_eltwise_count()):
        attrs = tuple((lib.hwt_eltwise_attr_name(i, k).decode(), lib.hwt_eltwise_attr_default(i, k))
                      for k in range(lib.hwt_eltwise_attr_count(i)))
        ops[lib.hwt_eltwise_name(i).decode()] = OpInfo(
            lib.hwt_eltwise_name(i).decode(), lib.hwt_eltwise_kind_name(i).decode(),
            lib.hwt_eltwise_operands(i), bool(lib.hwt_eltwise_is_graph_op(i)),
            lib.hwt_eltwise_flops(i), attrs)
    return ops


# The C table, read once: op name -> OpInfo, in C's order (ids are positions).
TABLE = _table()
OPS = tuple(TABLE)


EltwiseDesc = mirror("hwt_eltwise_desc", attr=ctypes.c_float * MAX_ATTRS)


sig("hwt_eltwise_check", ctypes.c_int, ctypes.POINTER(EltwiseDesc))
sig("hwt_eltwise_run_part", None, ctypes.POINTER(EltwiseDesc), _c_float_p, _c_float_p,
    _c_float_p, _c_float_p, ctypes.c_int, ctypes.c_int)
sig("hwt_eltwise_max_abs_error", ctypes.c_double, ctypes.c_int, ctypes.c_int)
sig("hwt_probe_fma_thread", ctypes.c_double, ctypes.c_int, ctypes.c_long)
sig("hwt_probe_triad_part", None, ctypes.c_int, _c_float_p, _c_float_p, _c_float_p,
    ctypes.c_float, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int)


def _op_index(op: str) -> int:
    if op not in TABLE:
        raise UsageError(f"unknown element-wise op {op!r}: choose one of {', '.join(OPS)}")
    return OPS.index(op)


def _attr_values(op: str, attrs: Optional[dict]) -> list:
    """The op's attribute values in table order: given ones, else defaults."""
    known = dict(TABLE[op].attrs)
    attrs = dict(attrs or {})
    for key, value in attrs.items():
        if key not in known:
            names = ", ".join(known) or "none"
            raise UsageError(f"op {op!r} has no attribute {key!r} (known: {names})")
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
            raise UsageError(f"op {op!r}: attribute {key!r} must be a number, got {value!r}")
    vals = [float(attrs.get(name, default)) for name, default in TABLE[op].attrs]
    return vals + [0.0] * (MAX_ATTRS - len(vals))


def _check_nth(nth) -> None:
    if isinstance(nth, bool) or not isinstance(nth, (int, np.integer)) or not 1 <= nth <= MAX_THREADS:
        raise UsageError(f"nth must be an integer in 1..{MAX_THREADS}, got {nth!r}")


def _as_f32(name: str, x) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiub":
        raise UsageError(f"input {name} must hold real numbers, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.float32)


def _ptr(arr: Optional[np.ndarray]):
    return None if arr is None else arr.ctypes.data_as(_c_float_p)


def eltwise(op: str, a, b=None, c=None, *, attrs: Optional[dict] = None,
            isa: Optional[str] = None, nth: int = 1, nt_stores: bool = False) -> np.ndarray:
    """out = op(a[, b[, c]]) in float32, shape of `a`, no broadcasting.

    Inputs are converted to contiguous float32; `attrs` sets the op's
    attributes (the table's defaults otherwise). All `nth` shares run here,
    one after another; `nt_stores` writes the output with streaming stores.
    """
    idx = _op_index(op)
    _check_nth(nth)
    values = _attr_values(op, attrs)
    given = [x is not None for x in (b, c)]
    want = TABLE[op].operands
    if given != [want >= 2, want >= 3]:
        names = ("a", "a, b", "a, b, c")[want - 1]
        raise UsageError(f"op {op!r} takes {want} input(s) ({names}); got "
                         f"{1 + sum(given)} ({', '.join(n for n, g in zip('abc', [True] + given) if g)})")
    arrs = [_as_f32("a", a)]
    for name, x in (("b", b), ("c", c)):
        if x is not None:
            arr = _as_f32(name, x)
            if arr.shape != arrs[0].shape:
                raise UsageError(f"op {op!r}: input {name} has shape {arr.shape}, "
                                 f"expected {arrs[0].shape} like a (no broadcasting)")
            arrs.append(arr)
    arrs += [None] * (3 - len(arrs))
    out = np.empty(arrs[0].shape, dtype=np.float32)
    desc = EltwiseDesc(idx, resolve_isa(isa), out.size, int(bool(nt_stores)),
                       (ctypes.c_float * MAX_ATTRS)(*values))
    check(lib.hwt_eltwise_check(ctypes.byref(desc)), f"eltwise {op}")
    if out.size == 0:
        return out
    pa, pb, pc, po = (_ptr(x) for x in (*arrs, out))
    for tid in range(nth):
        lib.hwt_eltwise_run_part(ctypes.byref(desc), pa, pb, pc, po, tid, nth)
    return out


def max_abs_error(op: str, isa: Optional[str] = None) -> float:
    """Documented max |error| of this variant vs libm (0 for exact ops)."""
    return lib.hwt_eltwise_max_abs_error(_op_index(op), resolve_isa(isa))


def fma_thread(isa: Optional[str], iters: int) -> float:
    """Runs `iters` rounds of the peak-FMA body on this thread; returns flops."""
    if isinstance(iters, bool) or not isinstance(iters, (int, np.integer)) or iters < 0:
        raise UsageError(f"iters must be an integer >= 0, got {iters!r}")
    flops = lib.hwt_probe_fma_thread(resolve_isa(isa), int(iters))
    if flops < 0:
        check(int(flops), "fma probe")
    return flops


def triad(b, c, s: float, *, isa: Optional[str] = None, nth: int = 1,
          nt_stores: bool = False) -> np.ndarray:
    """STREAM triad a = b + s*c (float32) through every share of the probe body."""
    _check_nth(nth)
    bb, cc = _as_f32("b", b), _as_f32("c", c)
    if bb.shape != cc.shape:
        raise UsageError(f"triad: b has shape {bb.shape} but c has shape {cc.shape}")
    idx = resolve_isa(isa)
    a = np.empty(bb.shape, dtype=np.float32)
    if a.size:
        for tid in range(nth):
            lib.hwt_probe_triad_part(idx, _ptr(a), _ptr(bb), _ptr(cc), float(s), a.size,
                                     int(bool(nt_stores)), tid, nth)
    return a
