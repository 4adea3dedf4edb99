"""Run single ops of a lowered graph through their C implementations
(hwtune/op.h) without the engine: a test and benchmark harness.

The caller's numpy arrays are the buffers: each op context gets pointers to
contiguous float32 arrays for its inputs and freshly allocated (64-byte
aligned, NaN-filled) outputs, then prepare, run(tid) for tid in 0..nth-1 (sequentially:
the shares are disjoint, so the order cannot matter), and release.
"""

import ctypes
from typing import Dict, List, Mapping, Optional

import numpy as np

from hwtune.engine.errors import EngineGraphError
from hwtune.engine.lower import lower_graph
from hwtune.graph.model import Graph
from hwtune.graph.reference import init_inputs, init_params
from hwtune.native._lib import check, lib
from hwtune.native.isa import resolve_isa

MAX_IO = 64  # HWT_OP_MAX_IO
_ERRLEN = 512
_fp = ctypes.POINTER(ctypes.c_float)


class OpCtx(ctypes.Structure):
    _fields_ = [
        ("g", ctypes.c_void_p),
        ("op", ctypes.c_int),
        ("n_in", ctypes.c_int),
        ("n_out", ctypes.c_int),
        ("in_", _fp * MAX_IO),
        ("out", _fp * MAX_IO),
        ("isa", ctypes.c_int),
        ("max_threads", ctypes.c_int),
        ("state", ctypes.c_void_p),
        ("ws_floats", ctypes.c_size_t),
        ("flops", ctypes.c_double),
    ]


_PREPARE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(OpCtx), ctypes.c_char_p,
                            ctypes.c_size_t)
_RUN = ctypes.CFUNCTYPE(None, ctypes.POINTER(OpCtx), _fp, ctypes.c_int, ctypes.c_int)
_RELEASE = ctypes.CFUNCTYPE(None, ctypes.POINTER(OpCtx))


class OpImpl(ctypes.Structure):
    _fields_ = [("type", ctypes.c_char_p), ("prepare", _PREPARE), ("run", _RUN),
                ("release", ctypes.c_void_p)]


lib.hwt_ops_find.restype = ctypes.POINTER(OpImpl)
lib.hwt_ops_find.argtypes = [ctypes.c_char_p]


def find_impl(op_type: str) -> OpImpl:
    """The C implementation of an op type; EngineGraphError if none."""
    p = lib.hwt_ops_find(op_type.encode())
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


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(_fp)


def run_ops(graph: Graph, nth: int = 1, isa: Optional[str] = None,
            inputs: Optional[Mapping[str, np.ndarray]] = None,
            params: Optional[Mapping[str, np.ndarray]] = None,
            repeat: int = 1) -> Dict[str, np.ndarray]:
    """Execute a validated graph op by op in topological order, each op
    through its C implementation split into nth shares; returns the graph
    outputs. Inputs and params default to the reference's initialisation,
    so the result compares directly with run_reference(graph)."""
    if nth < 1:
        raise EngineGraphError(f"nth must be >= 1, got {nth}")
    values: Dict[str, np.ndarray] = {}
    for src in (init_inputs(graph), init_params(graph), inputs or {}, params or {}):
        for name, arr in src.items():
            a = aligned_empty(graph.shapes[name])
            a[...] = np.asarray(arr, np.float32).reshape(graph.shapes[name])
            values[name] = a
    isa_idx = resolve_isa(isa)
    with lower_graph(graph) as ng:
        for i in graph.order:
            op = graph.ops[i]
            outs = [aligned_empty(graph.shapes[n]) for n in op.outputs]
            for o in outs:  # poison: an element no share writes stays NaN
                o.fill(np.nan)
            _run_one(ng.handle, i, op.op, [values[n] for n in op.inputs], outs, nth,
                     isa_idx, repeat)
            values.update(zip(op.outputs, outs))
    return {name: values[name] for name in graph.outputs}


def _run_one(g, op_id: int, op_type: str, ins: List[np.ndarray], outs: List[np.ndarray],
             nth: int, isa_idx: int, repeat: int) -> None:
    impl = find_impl(op_type)
    ctx = OpCtx()
    ctx.g, ctx.op, ctx.n_in, ctx.n_out = g, op_id, len(ins), len(outs)
    for k, a in enumerate(ins):
        ctx.in_[k] = _ptr(a)
    for k, a in enumerate(outs):
        ctx.out[k] = _ptr(a)
    ctx.isa, ctx.max_threads = isa_idx, nth
    err = ctypes.create_string_buffer(_ERRLEN)
    status = impl.prepare(ctypes.byref(ctx), err, _ERRLEN)
    if status < 0:
        check(status, f"prepare {op_type}: {err.value.decode(errors='replace')}")
    try:
        ws = [aligned_empty((max(int(ctx.ws_floats), 1),)) for _ in range(nth)]
        for _ in range(repeat):
            for tid in range(nth):
                impl.run(ctypes.byref(ctx), _ptr(ws[tid]), tid, nth)
    finally:
        if impl.release:
            _RELEASE(impl.release)(ctypes.byref(ctx))
