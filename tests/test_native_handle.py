"""The native seam's shared parts: one mapping from C status codes to typed
errors, and one life cycle (close once, context manager, closed-handle
errors) for every C object Python owns."""

import gc

import pytest

from hwtune.errors import EngineGraphError, NativeError, PlanError, UsageError
from hwtune.graph import load_model
from hwtune.native import _lib
from hwtune.engine.instance import NativeEngine
from hwtune.native.graph import NativeGraph
from hwtune.native.plan import Plan
from hwtune.native.threads import Pool

DOC = {"format_version": 1, "name": "tiny", "seed": 0,
       "inputs": [{"name": "x", "shape": [4]}], "params": [],
       "ops": [{"name": "y", "op": "relu", "inputs": ["x"]}], "outputs": ["y"]}


@pytest.mark.parametrize("status,cls,text", [
    (-1, UsageError, "invalid argument"),
    (-2, NativeError, "out of memory"),
    (-3, UsageError, "ISA variant not supported on this CPU"),
    (-4, NativeError, "system call failed"),
    (-99, NativeError, "error -99"),
])
def test_one_status_mapping(status, cls, text):
    err = _lib.status_error(status, what="gemm plan")
    assert type(err) is cls and str(err) == f"gemm plan: {text}"
    # A component's own usage error class; the machine's failures stay NativeError.
    err = _lib.status_error(status, "bad thing", usage=PlanError)
    assert type(err) is (PlanError if cls is UsageError else NativeError)
    assert str(err) == "bad thing"
    assert _lib.check(3, "x") == 3
    with pytest.raises(cls):
        _lib.check(status, "x")


def _objects():
    g = load_model(DOC)
    ng = NativeGraph()
    ng.add_tensor("a", [2], "input")
    return [ng, Plan(NativeGraph()), NativeEngine(g), Pool(1, 1, pin=False)]


@pytest.mark.parametrize("i", range(4), ids=["graph", "plan", "engine", "thread-pool"])
def test_close_once_and_closed_errors(i):
    obj = _objects()[i]
    with obj as same:
        assert same is obj and not obj.closed and obj.handle
    assert obj.closed
    obj.close()  # again: nothing happens
    with pytest.raises(UsageError, match="is closed"):
        obj.handle
    gc.collect()


def test_component_errors_keep_their_class_and_c_message():
    with NativeGraph() as ng:
        ng.add_tensor("a", [2], "input")
        with pytest.raises(EngineGraphError, match='tensor "b": dimension 0 is 0'):
            ng.add_tensor("b", [0], "input")
    with NativeGraph() as ng:
        ng.add_tensor("a", [2], "input")
        ng.add_tensor("b", [2], "output")  # never produced: the plan refuses
        with pytest.raises(PlanError):
            Plan(ng)
    with pytest.raises(UsageError, match="unknown scheduler 'fifo'"):
        NativeEngine(load_model(DOC), scheduler="fifo")
    with pytest.raises(UsageError, match="executors must be 1..64"):
        NativeEngine(load_model(DOC), executors=65, scheduler="critical-path")


def test_engine_runs_under_every_scheduler_name_the_c_table_has():
    from hwtune.native.sched import names
    for name in names():
        with NativeEngine(load_model(DOC), executors=1, threads=1, scheduler=name) as eng:
            eng.run()
            assert eng.scheduler == name
    assert NativeEngine(load_model(DOC)).scheduler == "sequential"


def test_engines_in_a_shared_lowering_share_one_graph_and_its_scope_closes_them():
    """measure_engines' fresh sides open an engine per chunk of samples:
    inside shared_lowering() they lower each graph once, and the scope, not
    the engine, closes that graph (with any engine still open on it)."""
    import numpy as np
    from hwtune.graph.reference import run_reference
    from hwtune.native.engine import shared_lowering
    g = load_model("configs/models/lstm_small.json")
    alone = NativeEngine(g)
    alone.run()
    want = alone.outputs()
    alone.close()
    assert alone._ng.closed  # its own graph goes with it
    with shared_lowering():
        a = NativeEngine(g, threads=2)
        a.run()
        a.close()
        assert not a._ng.closed  # the scope's graph outlives the engine
        b = NativeEngine(g, scheduler="critical-path")
        c = NativeEngine(g, executors=2, scheduler="critical-path")
        assert a._ng is b._ng is c._ng
        with shared_lowering():  # nested: the outer scope's graphs
            assert NativeEngine(g)._ng is a._ng
        b.run()
        for name, value in b.outputs().items():
            np.testing.assert_allclose(value, want[name], rtol=1e-5, atol=1e-6)
    assert a._ng.closed and b.closed and c.closed
    other = NativeEngine(g)
    assert other._ng is not a._ng and not other._ng.closed
    other.close()
    assert set(want) == set(run_reference(g))
