"""Binding for hwtune/plan.h: a graph's execution plan (order, levels,
arena offsets), as a Python snapshot."""

import ctypes
from typing import List, Optional

from hwtune.errors import PlanError
from hwtune.native._lib import enum_names, lib, message_status, sig, status_error
from hwtune.native.abi import mirror
from hwtune.native.graph import NativeGraph
from hwtune.native.handle import Handle

REUSE_POLICIES = enum_names("hwt_reuse")  # "none", "sequential", "parallel_safe"

_c_int_p = ctypes.POINTER(ctypes.c_int)
_c_i64_p = ctypes.POINTER(ctypes.c_int64)
_c_dbl_p = ctypes.POINTER(ctypes.c_double)


_Options = mirror("hwt_plan_options")


_vp, _ci, _cs, _sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t
sig("hwt_plan_options_init", None, ctypes.POINTER(_Options))
sig("hwt_plan_build", _vp, _vp, ctypes.POINTER(_Options), _cs, _sz)
sig("hwt_plan_destroy", None, _vp)
for _name in ("n_ops", "n_tensors", "reuse", "reach_exact", "n_roots"):
    sig(f"hwt_plan_{_name}", _ci, _vp)
for _name in ("order", "position", "pred_count", "succ_offsets", "succ", "roots"):
    sig(f"hwt_plan_{_name}", _c_int_p, _vp)
for _name in ("cost", "level"):
    sig(f"hwt_plan_{_name}", _c_dbl_p, _vp)
sig("hwt_plan_offsets", _c_i64_p, _vp)
for _name in ("arena_bytes", "arena_bytes_no_reuse", "peak_live_bytes"):
    sig(f"hwt_plan_{_name}", ctypes.c_int64, _vp)
sig("hwt_plan_check_aliasing", _ci, _vp, _vp, _cs, _sz)


class Plan(Handle):
    """An execution plan of a NativeGraph (a snapshot: it does not follow
    later changes to the graph)."""

    _destroy, _what, _usage = "hwt_plan_destroy", "plan", PlanError

    def __init__(self, graph: NativeGraph, reuse: str = "parallel_safe",
                 reach_max_ops: int = 0, flops_per_s: Optional[float] = None,
                 bytes_per_s: Optional[float] = None, default_cost: Optional[float] = None):
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
            # hwt_plan_build reports by message only; its one failure that is
            # not the caller's is running out of memory.
            msg = err.value.decode(errors="replace")
            raise status_error(message_status(msg), msg, usage=PlanError)
        self._adopt(h)
        self._graph = graph
        self._needs(graph)
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
        err = ctypes.create_string_buffer(512)
        status = lib.hwt_plan_check_aliasing(self.handle, self._graph.handle, err, len(err))
        if status < 0:
            raise status_error(status, err.value.decode(errors="replace"), usage=PlanError)
