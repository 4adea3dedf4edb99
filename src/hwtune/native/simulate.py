"""Binding for hwtune/simulate.h: one run of a graph under an engine
configuration, replayed in virtual time by the engine's own schedulers
(engine/exec/simulate.c) from given op times. No threads, no tensors: a
simulation of a 256-core configuration runs on any machine. The C graph is
lowered by the caller: hwtune.engine.simulator.Simulator opens one for a
validated model."""

import ctypes
from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence, Tuple

import numpy as np

from hwtune.native import sched
from hwtune.native._lib import lib, sig, status_error
from hwtune.native.abi import mirror
from hwtune.native.engine import Event, make_config
from hwtune.native.handle import Handle

_dp = ctypes.POINTER(ctypes.c_double)


SimCosts = mirror("hwt_sim_costs")


_vp = ctypes.c_void_p
sig("hwt_sim_create", ctypes.c_int, _vp, ctypes.POINTER(_vp), ctypes.c_char_p, ctypes.c_size_t)
sig("hwt_sim_destroy", None, _vp)
sig("hwt_sim_error", ctypes.c_char_p, _vp)
sig("hwt_sim_run", ctypes.c_int, _vp, _vp, ctypes.POINTER(SimCosts), _dp,
    ctypes.POINTER(Event), ctypes.c_int)


@dataclass(frozen=True)
class Overheads:
    """Seconds the simulation adds (hwtune/simulate.h): an op an executor
    goes on with (inline), one handed to a waiting executor (dispatch), one
    decision in the scheduler's serial section, and a run's own start;
    a waiter idle for longer than park_s has parked, and runs again wake_s
    after it is woken (wake_s 0: off)."""
    inline_s: float = 0.0
    dispatch_s: float = 0.0
    section_s: float = 0.0
    run_s: float = 0.0
    park_s: float = 0.0
    wake_s: float = 0.0


@dataclass(frozen=True)
class Transfer:
    """Data another core touched last (hwtune/simulate.h): each input
    tensor whose bytes a part pulls from other cores costs latency_s plus
    those bytes over bytes_per_s. Both 0: off."""
    latency_s: float = 0.0
    bytes_per_s: float = 0.0


@dataclass(frozen=True)
class SimEvent:
    op: str
    executor: int
    threads: int
    start_s: float
    end_s: float


def _array(a, rows: int, cols: int, what: str):
    arr = np.ascontiguousarray(a, dtype=np.float64)
    if arr.shape != (rows, cols):
        raise ValueError(f"{what}: shape {arr.shape}, expected ({rows}, {cols})")
    return arr


class SimulatorHandle(Handle):
    """A virtual engine for one lowered C graph (plan and folding once),
    which it owns and closes; op_names: the graph's ops in op-id order.
    run() as often as needed, each with its own config and op times."""

    _destroy, _error, _what = "hwt_sim_destroy", "hwt_sim_error", "simulator"

    def __init__(self, ng, op_names: Sequence[str]):
        self._ng, self._op_names = ng, list(op_names)
        err = ctypes.create_string_buffer(512)
        h = _vp()
        status = lib.hwt_sim_create(self._ng.handle, ctypes.byref(h), err, len(err))
        if status < 0:
            self._ng.close()
            raise status_error(status, err.value.decode(errors="replace"), what="simulator")
        self._adopt(h.value)

    def run(self, *, executors: int, threads: int, scheduler: str, seconds,
            op_threads: Optional[Mapping[str, int]] = None,
            op_cost: Optional[Mapping[str, float]] = None,
            op_candidates: Optional[Mapping[str, Sequence[Sequence[float]]]] = None,
            mem_frac=None, mem_bps=None, bw_cap: Optional[Sequence[float]] = None,
            overheads: Overheads = Overheads(), transfer: Transfer = Transfer(),
            events: bool = False
            ) -> Tuple[float, Optional[List[SimEvent]]]:
        """(makespan seconds, events or None). op_threads, op_cost: by op name,
        or numpy arrays in graph.ops order. seconds, mem_frac, mem_bps:
        [n_ops, max_threads] arrays in graph.ops order (column t-1: the op
        on t threads); bw_cap[c]: bytes/s served with c busy cores."""
        n = len(self._op_names)
        sec = np.asarray(seconds, dtype=np.float64)
        cols = sec.shape[1] if sec.ndim == 2 else 0
        sec = _array(sec, n, cols, "seconds")
        name = sched.lookup(scheduler).name
        cfg, keep = make_config(self._op_names, executors=executors, threads=threads, scheduler=name,
                                op_threads=op_threads, op_cost=op_cost,
                                op_candidates=op_candidates)
        c = SimCosts(max_threads=cols, seconds=sec.ctypes.data_as(_dp),
                     inline_s=overheads.inline_s, dispatch_s=overheads.dispatch_s,
                     section_s=overheads.section_s, run_s=overheads.run_s,
                     park_s=overheads.park_s, wake_s=overheads.wake_s,
                     xfer_s=transfer.latency_s, xfer_bps=transfer.bytes_per_s)
        held = [sec]
        if mem_frac is not None and mem_bps is not None and bw_cap is not None:
            mf, mb = _array(mem_frac, n, cols, "mem_frac"), _array(mem_bps, n, cols, "mem_bps")
            cap = np.ascontiguousarray(bw_cap, dtype=np.float64)
            held += [mf, mb, cap]
            c.mem_frac, c.mem_bps = mf.ctypes.data_as(_dp), mb.ctypes.data_as(_dp)
            c.bw_cap, c.cores = cap.ctypes.data_as(_dp), len(cap) - 1
        makespan = ctypes.c_double()
        buf = (Event * max(n, 1))() if events else None
        got = self._check(lib.hwt_sim_run(self.handle, ctypes.byref(cfg), ctypes.byref(c),
                                          ctypes.byref(makespan), buf, n if events else 0))
        del keep, held
        if not events:
            return makespan.value, None
        ops = self._op_names
        return makespan.value, [SimEvent(ops[e.op], e.executor, e.threads, e.start_s,
                                         e.end_s) for e in buf[:got]]

    def close(self) -> None:
        super().close()
        self._ng.close()
