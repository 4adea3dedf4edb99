"""Binding for hwt_bench_op (hwtune/bench.h): one op of a C graph, prepared
on caller arrays and timed on team 0 of a Pool as the engine runs it.

The measurement layer (hwtune.measure) is the only caller: a tuner keeps
one Pool for many trials and prepares one OpBench per trial."""

import ctypes
from typing import Sequence

import numpy as np

from hwtune.errors import NativeError, UsageError
from hwtune.native._lib import check, lib, sig
from hwtune.native.handle import Handle
from hwtune.native.threads import Pool

_F = ctypes.POINTER(ctypes.c_float)
_dp = ctypes.POINTER(ctypes.c_double)

sig("hwt_bench_op_create", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
    ctypes.c_int, ctypes.c_int, ctypes.POINTER(_F), ctypes.POINTER(_F), ctypes.c_char_p,
    ctypes.c_size_t)
sig("hwt_bench_op_run", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
    _dp)
sig("hwt_bench_op_destroy", None, ctypes.c_void_p)


def _buffers(arrays: Sequence[np.ndarray], what: str):
    for a in arrays:
        if not (isinstance(a, np.ndarray) and a.dtype == np.float32 and a.flags.c_contiguous):
            raise UsageError(f"{what} must be C-contiguous float32 arrays")
    return (_F * max(1, len(arrays)))(*[a.ctypes.data_as(_F) for a in arrays])


class OpBench(Handle):
    """Op `op` of `graph` (a NativeGraph, kept alive here) prepared for
    `threads` threads of `pool` on `inputs`/`outputs` (float32 arrays in the
    op's input and output order, read and written in place). isa: the C
    hwt_isa value, -1 for the selected one."""

    _destroy, _what = "hwt_bench_op_destroy", "op bench"

    def __init__(self, pool: Pool, threads: int, graph, op: int, inputs: Sequence[np.ndarray],
                 outputs: Sequence[np.ndarray], isa: int = -1):
        self._pool, self._keep = pool, (graph, list(inputs), list(outputs))
        ins, outs = _buffers(inputs, "inputs"), _buffers(outputs, "outputs")
        err = ctypes.create_string_buffer(256)
        h = lib.hwt_bench_op_create(pool.handle, int(threads), graph.handle, int(op), int(isa),
                                    ins, outs, err, len(err))
        if not h:
            msg = err.value.decode(errors="replace") or "cannot prepare the op"
            raise (NativeError if msg.startswith("out of memory") else UsageError)(msg)
        self._adopt(h)
        self._needs(pool, graph)

    def run(self, warmup: int, reps: int, inner: int) -> np.ndarray:
        """`reps` samples of seconds per run, each over `inner` runs, after
        `warmup` untimed samples."""
        if self._h is None:
            raise UsageError("the op bench is closed")
        out = np.empty(max(1, reps), np.float64)
        with self._pool._lock:
            st = lib.hwt_bench_op_run(self._h, int(warmup), int(reps), int(inner),
                                      out.ctypes.data_as(_dp))
        check(st, "op bench run")
        return out[:reps]
