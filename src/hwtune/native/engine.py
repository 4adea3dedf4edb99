"""Binding for hwtune/engine.h: run a lowered C graph on the C engine.

An EngineHandle takes a C graph lowered by the caller (hwtune.engine.lower)
and the param and input values it is to hold, creates the engine (plan,
arena, pool), binds every param, prepares, and then runs as often as asked.
hwtune.engine.instance.NativeEngine opens one for a validated model."""

import ctypes
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from hwtune.errors import UsageError
from hwtune.native import sched
from hwtune.native._lib import lib, sig, status_error
from hwtune.native.abi import mirror
from hwtune.native.handle import Handle
from hwtune.native.ops import aligned_copy

_c_int_p = ctypes.POINTER(ctypes.c_int)
_c_dbl_p = ctypes.POINTER(ctypes.c_double)
_f_p = ctypes.POINTER(ctypes.c_float)


_Config = mirror("hwt_engine_config")
Event = mirror("hwt_op_event")


_vp, _ci = ctypes.c_void_p, ctypes.c_int
sig("hwt_engine_config_init", None, ctypes.POINTER(_Config))
sig("hwt_engine_create", _ci, _vp, ctypes.POINTER(_Config), ctypes.POINTER(_vp),
    ctypes.c_char_p, ctypes.c_size_t)
sig("hwt_engine_destroy", None, _vp)
sig("hwt_engine_error", ctypes.c_char_p, _vp)
sig("hwt_engine_bind", _ci, _vp, _ci, _f_p)
sig("hwt_engine_prepare", _ci, _vp)
sig("hwt_engine_tensor", _f_p, _vp, _ci)
sig("hwt_engine_run", _ci, _vp)
sig("hwt_engine_profile", _ci, _vp, _ci)
sig("hwt_engine_events", _ci, _vp, ctypes.POINTER(Event), _ci)
sig("hwt_engine_n_folded", _ci, _vp)
sig("hwt_engine_arena_bytes", ctypes.c_int64, _vp)
sig("hwt_engine_arena_bytes_no_reuse", ctypes.c_int64, _vp)
sig("hwt_engine_op_folded", _ci, _vp, _ci)


def _op_names(names: Sequence[str], given: Mapping, what: str) -> List[str]:
    """The graph's op names in op-id order; UsageError when `given` (the
    setting `what`) names an op the graph does not have."""
    names = list(names)
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise UsageError(f'{what} names unknown op "{unknown[0]}"')
    return names


def _per_op(op_names: Sequence[str], values, ctype, what: str):
    """op name -> value mapping as a C array in op-id order (lowering adds ops
    in graph.ops order), or None. A numpy array is taken as already in op
    order (the simulator's callers pass thousands of configs)."""
    if isinstance(values, np.ndarray):
        if values.shape != (len(op_names),):
            raise UsageError(f"{what}: {values.shape} values for {len(op_names)} ops")
        dtype = np.int32 if ctype is ctypes.c_int else np.float64
        arr = np.ascontiguousarray(values, dtype=dtype)
        out = (ctype * len(arr)).from_buffer(arr)
        out._keep = arr  # the buffer must outlive the C array
        return out
    if not values:
        return None
    names = _op_names(op_names, values, what)
    default = 0 if ctype is ctypes.c_int else -1.0
    return (ctype * len(names))(*[values.get(n, default) for n in names])


def _candidates(op_names: Sequence[str],
                cands: Optional[Mapping[str, Sequence[Sequence[float]]]]):
    """op -> [[threads, seconds], ...] as the C arrays (threads, seconds, n)
    in op-id order, or None. Ops without candidates get none (count 0)."""
    if not cands:
        return None
    names = _op_names(op_names, cands, "op_candidates")
    width = max(len(v) for v in cands.values())
    threads = (ctypes.c_int * (len(names) * width))()
    seconds = (ctypes.c_double * (len(names) * width))(*([-1.0] * (len(names) * width)))
    for i, name in enumerate(names):
        for k, pair in enumerate(cands.get(name, ())):
            t, sec = pair
            if isinstance(t, bool) or not isinstance(t, int) or t < 1:
                raise UsageError(f"op_candidates[{name!r}]: thread count {t!r} must be >= 1")
            threads[i * width + k] = t
            seconds[i * width + k] = float(sec)
    return threads, seconds, width


def make_config(op_names: Sequence[str], *, executors: int, threads: int, scheduler: str,
                pin: bool = True, isa: int = -1,
                op_threads: Optional[Mapping[str, int]] = None,
                op_cost: Optional[Mapping[str, float]] = None,
                op_priority: Optional[Mapping[str, float]] = None,
                op_candidates: Optional[Mapping[str, Sequence[Sequence[float]]]] = None):
    """The hwt_engine_config of a graph (its op names in op-id order) under
    these settings (an engine's or a simulation's), and the arrays it points
    to: keep both alive until the C call that reads them returns (it copies
    what it keeps)."""
    cfg = _Config()
    lib.hwt_engine_config_init(ctypes.byref(cfg))
    cfg.executors, cfg.threads_per_executor = int(executors), int(threads)
    name = scheduler.encode()
    cfg.scheduler, cfg.pin, cfg.isa = name, int(bool(pin)), int(isa)
    arrays = (_per_op(op_names, op_threads, ctypes.c_int, "op_threads"),
              _per_op(op_names, op_cost, ctypes.c_double, "op_cost"),
              _per_op(op_names, op_priority, ctypes.c_double, "op_priority"))
    for field, arr in zip(("op_threads", "op_cost", "op_priority"), arrays):
        if arr is not None:
            setattr(cfg, field, ctypes.cast(arr, type(getattr(cfg, field))))
    cands = _candidates(op_names, op_candidates)
    if cands is not None:
        cfg.op_cand_threads = ctypes.cast(cands[0], _c_int_p)
        cfg.op_cand_seconds = ctypes.cast(cands[1], _c_dbl_p)
        cfg.op_cand_n = cands[2]
    return cfg, (name, arrays, cands)


class _Lowered:
    """The lowered C graphs and seeded inputs of the graphs engines were
    opened for inside shared_lowering(), by graph object (each kept alive,
    so its id is not reused while the scope lasts)."""

    def __init__(self):
        self.graphs: Dict[int, Tuple[object, object, Dict[str, np.ndarray]]] = {}

    def get(self, graph, lower: Callable[[], Tuple[object, Dict[str, np.ndarray]]]):
        got = self.graphs.get(id(graph))
        if got is None:
            got = self.graphs[id(graph)] = (graph, *lower())
        return got[1], got[2]

    def close(self) -> None:
        for _, ng, _ in self.graphs.values():
            ng.close()  # closes any engine still using it first
        self.graphs.clear()


_SHARED: List[_Lowered] = []


class shared_lowering:
    """A scope in which engines opened for the same Graph object share one
    lowered C graph and one set of seeded inputs (the engine only reads
    both: hwt_engine_create takes a const graph, set_input copies). A
    measurement that opens an engine for every chunk of samples (fresh
    sides) spent most of its time lowering: `hwtune plan --validate` of
    deepcpu_lstm_i64_h64 opened 716 engines at 0.185 s each, 132 s of its
    184 s (cProfile, 2-core Zen 1 at load ~6), running them 27 s. Params
    are bound per engine, as before (a training step updates its own).
    Nested scopes share the outermost one."""

    def __enter__(self):
        self._own = not _SHARED
        if self._own:
            _SHARED.append(_Lowered())
        return self

    def __exit__(self, *exc):
        if self._own:
            _SHARED.pop().close()
        return False


def shared(graph, lower: Callable[[], Tuple[object, Dict[str, np.ndarray]]]):
    """(C graph, inputs) of graph in the open shared_lowering() scope, made
    by lower() the first time it is asked for; None outside any scope (the
    caller then lowers, and closes, its own)."""
    return _SHARED[0].get(graph, lower) if _SHARED else None


class EngineHandle(Handle):
    """A prepared engine for one lowered C graph and one configuration.

    ng: the NativeGraph (closed with the engine when own_graph, else by its
    owner: a shared_lowering() scope); op_names: the graph's ops in op-id
    order; shapes: tensor name -> shape; outputs: the output names; params
    and inputs: called once the engine is created (a refused config seeds
    nothing), name -> values bound at prepare and set before the first run.
    scheduler is a name of the scheduler table (hwtune.native.sched;
    None: the default)."""

    _destroy, _error, _what = "hwt_engine_destroy", "hwt_engine_error", "engine"

    def __init__(self, ng, op_names: Sequence[str], shapes: Mapping[str, Sequence[int]],
                 outputs: Sequence[str], params: Callable[[], Dict[str, np.ndarray]],
                 inputs: Callable[[], Mapping[str, np.ndarray]], *, own_graph: bool,
                 executors: int = 1, threads: int = 1,
                 scheduler: Optional[str] = None, pin: bool = True, isa: int = -1,
                 op_threads: Optional[Mapping[str, int]] = None,
                 op_cost: Optional[Mapping[str, float]] = None,
                 op_priority: Optional[Mapping[str, float]] = None,
                 op_candidates: Optional[Mapping[str, Sequence[Sequence[float]]]] = None):
        self.scheduler = (sched.default() if scheduler is None
                          else sched.lookup(scheduler)).name
        self._ng, self._own_ng = ng, own_graph
        self._op_names, self._shapes, self._outputs = list(op_names), shapes, list(outputs)
        # The engine reads the name at create and copies the arrays; `keep`
        # holds them until then.
        cfg, keep = make_config(self._op_names, executors=executors, threads=threads,
                                scheduler=self.scheduler, pin=pin, isa=isa,
                                op_threads=op_threads, op_cost=op_cost, op_priority=op_priority,
                                op_candidates=op_candidates)
        err = ctypes.create_string_buffer(512)
        h = _vp()
        status = lib.hwt_engine_create(self._ng.handle, ctypes.byref(cfg), ctypes.byref(h), err,
                                       len(err))
        if status < 0:
            if self._own_ng:
                self._ng.close()
            raise status_error(status, err.value.decode(errors="replace"))
        self._adopt(h.value)
        self._needs(self._ng)
        h = h.value
        self._ids = self._ng.tensor_ids
        self._params = {}
        params = params()
        for name in list(params):
            # popped: an original a copy replaced is freed before the next
            # one is made, so binding holds at most one param twice
            arr = aligned_copy(params.pop(name))
            self._params[name] = arr  # the engine reads it in place: keep it alive
            self._check(lib.hwt_engine_bind(h, self._ids[name], arr.ctypes.data_as(_f_p)))
        self._check(lib.hwt_engine_prepare(h))
        for name, arr in inputs().items():
            self.set_input(name, arr)

    def _view(self, name: str) -> np.ndarray:
        h = self.handle
        if name not in self._ids:
            raise UsageError(f'no tensor named "{name}" in the model')
        shape = tuple(self._shapes[name])
        ptr = lib.hwt_engine_tensor(h, self._ids[name])
        if not ptr:
            raise UsageError(f'tensor "{name}" has no storage (an unbound param?)')
        return np.ctypeslib.as_array(ptr, shape=shape if shape else (1,))

    def set_input(self, name: str, value) -> None:
        view = self._view(name)
        value = np.asarray(value, dtype=np.float32)
        if value.size != view.size:
            raise UsageError(f'input "{name}": {value.size} values for {view.size} elements')
        view[...] = value.reshape(view.shape)

    def run(self, profile: bool = False) -> None:
        h = self.handle
        lib.hwt_engine_profile(h, int(bool(profile)))
        self._check(lib.hwt_engine_run(h))

    def output(self, name: str) -> np.ndarray:
        return self._view(name).copy().reshape(tuple(self._shapes[name]))

    def outputs(self) -> Dict[str, np.ndarray]:
        return {name: self.output(name) for name in self._outputs}

    def arena_bytes(self) -> Tuple[int, int]:
        """(with the scheduler's reuse, without reuse): the activation arena
        the engine's plan sized."""
        return (int(lib.hwt_engine_arena_bytes(self.handle)),
                int(lib.hwt_engine_arena_bytes_no_reuse(self.handle)))

    def folded(self) -> List[str]:
        """Names of the ops folded at prepare (constant: they never run)."""
        return [name for i, name in enumerate(self._op_names)
                if lib.hwt_engine_op_folded(self.handle, i) == 1]

    def events(self) -> List[Event]:
        """Per-op events of the last profiled run, in op-id order (folded ops
        have none: match them by .op)."""
        n = len(self._op_names)
        buf = (Event * max(n, 1))()
        got = lib.hwt_engine_events(self.handle, buf, n)
        return list(buf[:got])

    def close(self) -> None:
        super().close()
        if self._own_ng:
            self._ng.close()
