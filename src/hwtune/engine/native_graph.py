"""Binding for hwtune/graph.h and hwtune/plan.h: the engine's graph IR and
its execution plan."""

import ctypes
from typing import Dict, List, Optional, Sequence

from hwtune.engine.errors import EngineGraphError, PlanError
from hwtune.errors import NativeError
from hwtune.native._lib import lib

TENSOR_KINDS = {"input": 0, "param": 1, "activation": 2, "output": 3}
REUSE_POLICIES = {"none": 0, "sequential": 1, "parallel_safe": 2}
MAX_DIMS = 8
_ATTR_NONE, _ATTR_INTS, _ATTR_FLOATS = 0, 1, 2
_ENOMEM = -2

_c_int_p = ctypes.POINTER(ctypes.c_int)
_c_i64_p = ctypes.POINTER(ctypes.c_int64)
_c_dbl_p = ctypes.POINTER(ctypes.c_double)


class _Options(ctypes.Structure):
    _fields_ = [
        ("reuse", ctypes.c_int),
        ("reach_max_ops", ctypes.c_int),
        ("flops_per_s", ctypes.c_double),
        ("bytes_per_s", ctypes.c_double),
        ("default_cost", ctypes.c_double),
    ]


def _sig(name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)


_vp, _ci, _cs, _sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t
_sig("hwt_graph_create", _vp)
_sig("hwt_graph_destroy", None, _vp)
_sig("hwt_graph_add_tensor", _ci, _vp, _cs, _ci, _c_i64_p, _ci)
_sig("hwt_graph_add_op", _ci, _vp, _cs, _cs, _ci, _c_int_p, _ci, _c_int_p)
_sig("hwt_graph_op_set_ints", _ci, _vp, _ci, _cs, _ci, _c_i64_p)
_sig("hwt_graph_op_set_floats", _ci, _vp, _ci, _cs, _ci, _c_dbl_p)
_sig("hwt_graph_op_attr_kind", _ci, _vp, _ci, _cs)
_sig("hwt_graph_op_get_ints", _ci, _vp, _ci, _cs, _c_i64_p, _ci)
_sig("hwt_graph_op_get_floats", _ci, _vp, _ci, _cs, _c_dbl_p, _ci)
_sig("hwt_graph_op_set_cost", _ci, _vp, _ci, ctypes.c_double)
_sig("hwt_graph_op_set_work", _ci, _vp, _ci, ctypes.c_double, ctypes.c_double)
_sig("hwt_graph_validate", _ci, _vp, _cs, _sz)
_sig("hwt_graph_error", _cs, _vp)
_sig("hwt_graph_n_ops", _ci, _vp)
_sig("hwt_graph_n_tensors", _ci, _vp)
_sig("hwt_plan_options_init", None, ctypes.POINTER(_Options))
_sig("hwt_plan_build", _vp, _vp, ctypes.POINTER(_Options), _cs, _sz)
_sig("hwt_plan_destroy", None, _vp)
for _name in ("n_ops", "n_tensors", "reuse", "reach_exact", "n_roots"):
    _sig(f"hwt_plan_{_name}", _ci, _vp)
for _name in ("order", "position", "pred_count", "succ_offsets", "succ", "roots"):
    _sig(f"hwt_plan_{_name}", _c_int_p, _vp)
for _name in ("cost", "level"):
    _sig(f"hwt_plan_{_name}", _c_dbl_p, _vp)
_sig("hwt_plan_offsets", _c_i64_p, _vp)
for _name in ("arena_bytes", "arena_bytes_no_reuse", "peak_live_bytes"):
    _sig(f"hwt_plan_{_name}", ctypes.c_int64, _vp)
_sig("hwt_plan_check_aliasing", _ci, _vp, _vp, _cs, _sz)


def _ids(values: Sequence[int]):
    return (ctypes.c_int * max(len(values), 1))(*values)


class NativeGraph:
    """A C graph under construction. Ids are assigned in call order."""

    def __init__(self):
        self._h = lib.hwt_graph_create()
        if not self._h:
            raise NativeError("cannot create a graph: out of memory")
        self.tensor_ids: Dict[str, int] = {}
        self.op_ids: Dict[str, int] = {}

    @property
    def handle(self) -> int:
        if self._h is None:
            raise EngineGraphError("the graph is closed")
        return self._h

    def _check(self, status: int) -> int:
        if status >= 0:
            return status
        msg = (lib.hwt_graph_error(self.handle) or b"").decode(errors="replace")
        if status == _ENOMEM:
            raise NativeError(msg or "out of memory")
        raise EngineGraphError(msg or f"graph call failed ({status})")

    def add_tensor(self, name: str, shape: Sequence[int], kind: str) -> int:
        if kind not in TENSOR_KINDS:
            raise EngineGraphError(f'tensor "{name}": unknown kind "{kind}" '
                                   f"(one of: {', '.join(TENSOR_KINDS)})")
        dims = (ctypes.c_int64 * max(len(shape), 1))(*[int(d) for d in shape])
        tid = self._check(lib.hwt_graph_add_tensor(self.handle, name.encode(), len(shape),
                                                   dims, TENSOR_KINDS[kind]))
        self.tensor_ids[name] = tid
        return tid

    def add_op(self, name: str, op_type: str, inputs: Sequence[int],
               outputs: Sequence[int]) -> int:
        oid = self._check(lib.hwt_graph_add_op(self.handle, name.encode(), op_type.encode(),
                                               len(inputs), _ids(inputs), len(outputs),
                                               _ids(outputs)))
        self.op_ids[name] = oid
        return oid

    def set_ints(self, op: int, key: str, values: Sequence[int]) -> None:
        arr = (ctypes.c_int64 * max(len(values), 1))(*[int(v) for v in values])
        self._check(lib.hwt_graph_op_set_ints(self.handle, op, key.encode(), len(values), arr))

    def set_floats(self, op: int, key: str, values: Sequence[float]) -> None:
        arr = (ctypes.c_double * max(len(values), 1))(*[float(v) for v in values])
        self._check(lib.hwt_graph_op_set_floats(self.handle, op, key.encode(), len(values), arr))

    def get_attr(self, op: int, key: str):
        """The attribute's values as a list of int or float; None if absent."""
        kind = lib.hwt_graph_op_attr_kind(self.handle, op, key.encode())
        if kind == _ATTR_NONE:
            return None
        get, ctype = ((lib.hwt_graph_op_get_ints, ctypes.c_int64) if kind == _ATTR_INTS
                      else (lib.hwt_graph_op_get_floats, ctypes.c_double))
        n = self._check(get(self.handle, op, key.encode(), None, 0))
        buf = (ctype * max(n, 1))()
        get(self.handle, op, key.encode(), buf, n)
        return list(buf[:n])

    def set_cost(self, op: int, seconds: float) -> None:
        self._check(lib.hwt_graph_op_set_cost(self.handle, op, float(seconds)))

    def set_work(self, op: int, flops: float, nbytes: float) -> None:
        self._check(lib.hwt_graph_op_set_work(self.handle, op, float(flops), float(nbytes)))

    @property
    def n_ops(self) -> int:
        return lib.hwt_graph_n_ops(self.handle)

    @property
    def n_tensors(self) -> int:
        return lib.hwt_graph_n_tensors(self.handle)

    def validate(self) -> None:
        err = ctypes.create_string_buffer(512)
        if lib.hwt_graph_validate(self.handle, err, len(err)) != 0:
            raise EngineGraphError(err.value.decode(errors="replace"))

    def close(self) -> None:
        if self._h is not None:
            lib.hwt_graph_destroy(self._h)
            self._h = None

    def __enter__(self) -> "NativeGraph":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        if getattr(self, "_h", None) is not None and lib is not None:
            lib.hwt_graph_destroy(self._h)
            self._h = None


class Plan:
    """An execution plan of a NativeGraph (a snapshot: it does not follow
    later changes to the graph)."""

    def __init__(self, graph: NativeGraph, reuse: str = "parallel_safe",
                 reach_max_ops: int = 0, flops_per_s: Optional[float] = None,
                 bytes_per_s: Optional[float] = None, default_cost: Optional[float] = None):
        self._h = None
        if reuse not in REUSE_POLICIES:
            raise PlanError(f'unknown reuse policy "{reuse}" '
                            f"(one of: {', '.join(REUSE_POLICIES)})")
        if isinstance(reach_max_ops, bool) or not isinstance(reach_max_ops, int) \
                or not 0 <= reach_max_ops < 2 ** 31:
            raise PlanError(f"reach_max_ops={reach_max_ops!r}: must be an integer >= 0 "
                            "(0: the default)")
        opts = _Options()
        lib.hwt_plan_options_init(ctypes.byref(opts))
        opts.reuse = REUSE_POLICIES[reuse]
        opts.reach_max_ops = reach_max_ops
        for field, value in (("flops_per_s", flops_per_s), ("bytes_per_s", bytes_per_s),
                             ("default_cost", default_cost)):
            if value is not None:
                setattr(opts, field, float(value))
        err = ctypes.create_string_buffer(512)
        h = lib.hwt_plan_build(graph.handle, ctypes.byref(opts), err, len(err))
        if not h:
            msg = err.value.decode(errors="replace")
            if msg.startswith("out of memory"):
                raise NativeError(msg)
            raise PlanError(msg)
        self._h = h
        self._graph = graph
        self.reuse = reuse
        self.n_ops = lib.hwt_plan_n_ops(h)
        self.n_tensors = lib.hwt_plan_n_tensors(h)
        # Copies, so that the Python view stays valid after close().
        self.order: List[int] = lib.hwt_plan_order(h)[: self.n_ops]
        self.position: List[int] = lib.hwt_plan_position(h)[: self.n_ops]
        self.cost: List[float] = lib.hwt_plan_cost(h)[: self.n_ops]
        self.level: List[float] = lib.hwt_plan_level(h)[: self.n_ops]
        self.pred_count: List[int] = lib.hwt_plan_pred_count(h)[: self.n_ops]
        offs = lib.hwt_plan_succ_offsets(h)[: self.n_ops + 1]
        flat = lib.hwt_plan_succ(h)[: offs[-1]] if self.n_ops else []
        self.successors: List[List[int]] = [flat[offs[i]:offs[i + 1]]
                                            for i in range(self.n_ops)]
        self.roots: List[int] = lib.hwt_plan_roots(h)[: lib.hwt_plan_n_roots(h)]
        self.offsets: List[int] = lib.hwt_plan_offsets(h)[: self.n_tensors]
        self.arena_bytes = lib.hwt_plan_arena_bytes(h)
        self.arena_bytes_no_reuse = lib.hwt_plan_arena_bytes_no_reuse(h)
        self.peak_live_bytes = lib.hwt_plan_peak_live_bytes(h)
        self.reach_exact = bool(lib.hwt_plan_reach_exact(h))

    def check_aliasing(self) -> None:
        """Brute-force proof that no two tensors that can be live together
        share bytes; raises PlanError naming the first pair otherwise."""
        if self._h is None:
            raise PlanError("the plan is closed")
        err = ctypes.create_string_buffer(512)
        status = lib.hwt_plan_check_aliasing(self._h, self._graph.handle, err, len(err))
        if status == _ENOMEM:
            raise NativeError(err.value.decode(errors="replace"))
        if status != 0:
            raise PlanError(err.value.decode(errors="replace"))

    def close(self) -> None:
        if self._h is not None:
            lib.hwt_plan_destroy(self._h)
            self._h = None

    def __enter__(self) -> "Plan":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        if getattr(self, "_h", None) is not None and lib is not None:
            lib.hwt_plan_destroy(self._h)
            self._h = None
