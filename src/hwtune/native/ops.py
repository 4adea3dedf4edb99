"""Binding for hwtune/op.h: an op type's C implementation (prepare, run,
release) driven directly, without the engine: the harness behind
hwtune.engine.ops_harness and tests of single ops."""

import ctypes
from typing import List, Sequence

import numpy as np

from hwtune.errors import EngineGraphError
from hwtune.native._lib import check, sig
from hwtune.native.abi import mirror

MAX_IO = 64  # HWT_OP_MAX_IO
_ERRLEN = 512
_fp = ctypes.POINTER(ctypes.c_float)


# g and shared point to structs Python never reads: plain addresses.
OpCtx = mirror("hwt_op_ctx", g=ctypes.c_void_p, in_=_fp * MAX_IO, out=_fp * MAX_IO,
               shared=ctypes.c_void_p)

_PREPARE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(OpCtx), ctypes.c_char_p,
                            ctypes.c_size_t)
_RUN = ctypes.CFUNCTYPE(None, ctypes.POINTER(OpCtx), _fp, ctypes.c_int, ctypes.c_int)
_RELEASE = ctypes.CFUNCTYPE(None, ctypes.POINTER(OpCtx))

# release may be NULL: kept an address, called through _RELEASE when set.
OpImpl = mirror("hwt_op_impl", prepare=_PREPARE, run=_RUN, release=ctypes.c_void_p)


_find = sig("hwt_ops_find", ctypes.POINTER(OpImpl), ctypes.c_char_p)


def find_impl(op_type: str) -> OpImpl:
    """The C implementation of an op type; EngineGraphError if none."""
    p = _find(op_type.encode())
    if not p:
        raise EngineGraphError(f'no C implementation of op type "{op_type}"')
    return p.contents


def aligned_empty(shape, align: int = 64) -> np.ndarray:
    """A float32 array whose data starts on an `align`-byte boundary, as the
    engine's arena guarantees (ops split work on cache-line boundaries)."""
    n = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(n + align // 4, np.float32)
    skip = (-raw.ctypes.data % align) // 4
    return raw[skip:skip + n].reshape(shape)


def aligned_copy(values, align: int = 64) -> np.ndarray:
    """values as a contiguous float32 array starting on an `align`-byte
    boundary (a copy unless it already is one). The engines read bound
    params in place, and the GEMV path streams B unpacked: a numpy array is
    only 16-byte aligned, and an LSTM whose 64 KiB recurrent weights sat 16
    or 48 bytes off a line ran 138-148 us against 116 us aligned, every
    AVX-512 load of them split over two lines (deepcpu_lstm_i64_h64, one
    thread, ten engines; AMD EPYC Zen 4, avx512)."""
    arr = np.asarray(values, dtype=np.float32)
    if arr.flags.c_contiguous and arr.ctypes.data % align == 0:
        return arr
    out = aligned_empty(arr.shape, align)
    out[...] = arr
    return out


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(_fp)


def run_op(graph_handle: int, op_id: int, op_type: str, ins: Sequence[np.ndarray],
           outs: List[np.ndarray], nth: int, isa: int, repeat: int = 1) -> int:
    """Op op_id of a C graph through its implementation: prepare on the
    given buffers (contiguous float32), run(tid) for tid in 0..nth-1 one
    after another (the shares are disjoint, so order cannot matter),
    `repeat` times, then release. Returns the workspace floats a share
    needed (prepare's plan, which tests compare across attributes)."""
    impl = find_impl(op_type)
    ctx = OpCtx()
    ctx.g, ctx.op, ctx.n_in, ctx.n_out = graph_handle, op_id, len(ins), len(outs)
    for k, a in enumerate(ins):
        ctx.in_[k] = _ptr(a)
    for k, a in enumerate(outs):
        ctx.out[k] = _ptr(a)
    ctx.isa, ctx.max_threads = isa, nth
    err = ctypes.create_string_buffer(_ERRLEN)
    check(impl.prepare(ctypes.byref(ctx), err, _ERRLEN), f"prepare {op_type}",
          err.value.decode(errors="replace"))
    try:
        ws = [aligned_empty((max(int(ctx.ws_floats), 1),)) for _ in range(nth)]
        for _ in range(repeat):
            for tid in range(nth):
                impl.run(ctypes.byref(ctx), _ptr(ws[tid]), tid, nth)
    finally:
        if impl.release:
            _RELEASE(impl.release)(ctypes.byref(ctx))
    return int(ctx.ws_floats)
