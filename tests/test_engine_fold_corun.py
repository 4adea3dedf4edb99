"""Constant folding (weight layout transforms run once, at prepare) and the
corun scheduler with thread-count candidates, through the Python binding;
EngineConfig's corun fields."""

import numpy as np
import pytest

from hwtune.engine.config import EngineConfig
from hwtune.engine.instance import NativeEngine
from hwtune.errors import UsageError
from hwtune.graph.model import load_model
from hwtune.graph.reference import run_reference

RTOL = 1e-4


def _conv_chain():
    """param w -> layout_transform -> layout_transform -> conv2d (NCHWc),
    plus an activation transform that must keep running."""
    ops = [{"name": "xb", "op": "layout_transform", "inputs": ["x"],
            "attrs": {"src": "NCHW", "dst": "NCHW8c"}},
           {"name": "wb", "op": "layout_transform", "inputs": ["w"],
            "attrs": {"src": "OIHW", "dst": "OIHW4i8o"}},
           {"name": "wc", "op": "layout_transform", "inputs": ["wb"],
            "attrs": {"src": "OIHW4i8o", "dst": "OIHW8i16o"}},
           {"name": "yb", "op": "conv2d", "inputs": ["xb", "wc", "b"],
            "attrs": {"padding": 1, "layout": "NCHWc"}},
           {"name": "y", "op": "layout_transform", "inputs": ["yb"],
            "attrs": {"src": "NCHW16c", "dst": "NCHW"}}]
    return load_model({"format_version": 1, "name": "fold", "seed": 5,
                       "inputs": [{"name": "x", "shape": [1, 16, 9, 9]}],
                       "params": [{"name": "w", "shape": [32, 16, 3, 3]},
                                  {"name": "b", "shape": [32]}],
                       "ops": ops, "outputs": ["y"]})


@pytest.mark.parametrize("sched,ex,th", [("sequential", 1, 1), ("sequential", 1, 2),
                                         ("critical-path", 2, 1), ("corun", 1, 2),
                                         ("corun", 2, 1), ("shared-queue", 2, 1)])
def test_weight_transforms_fold(sched, ex, th):
    g = _conv_chain()
    want = run_reference(g)["y"]
    with NativeEngine(g, executors=ex, threads=th, scheduler=sched) as eng:
        assert eng.folded() == ["wb", "wc"]
        for _ in range(3):
            eng.run(profile=True)
            got = eng.output("y")
            err = float(np.max(np.abs(got - want))) / float(np.max(np.abs(want)))
            assert err <= RTOL
            ran = sorted(g.ops[ev.op].name for ev in eng.events())
            assert ran == ["xb", "y", "yb"], f"folded ops ran: {ran}"


def test_corun_candidates_match_sequential():
    g = _conv_chain()
    with NativeEngine(g, scheduler="sequential") as eng:
        eng.run()
        want = eng.output("y")
    cands = {"yb": [[2, 1e-4], [1, 1.5e-4]], "xb": [[1, 1e-6]], "y": [[2, 2e-6], [1, 3e-6]]}
    with NativeEngine(g, executors=2, threads=1, scheduler="corun",
                      op_candidates=cands) as eng:
        for _ in range(3):
            eng.run(profile=True)
            assert np.array_equal(eng.output("y"), want)
            ev = {g.ops[e.op].name: e for e in eng.events()}
            assert ev["yb"].threads in (1, 2) and ev["xb"].threads == 1
    with pytest.raises(UsageError, match="unknown op"):
        NativeEngine(g, scheduler="corun", op_candidates={"nope": [[1, 1.0]]})


def test_engine_config_corun_fields():
    cfg = EngineConfig(executors=2, threads=1, scheduler="corun",
                       op_candidates={"yb": [[2, 1e-4], [1, 2e-4]]}, op_cost={"yb": 1e-4})
    assert cfg.pinned
    cfg.validate([0, 1], ["yb"])
    back = EngineConfig.from_db_row(cfg.db_fields())
    assert back.op_candidates == cfg.op_candidates and back.op_cost == cfg.op_cost
    assert (back.scheduler, back.executors, back.threads, back.pinned) == ("corun", 2, 1, True)
    with pytest.raises(UsageError, match="op_candidates"):
        EngineConfig(executors=2, threads=1, scheduler="corun",
                     op_candidates={"yb": [[3, 1e-4]]}).validate([0, 1], ["yb"])
    with pytest.raises(UsageError, match="op_candidates"):
        EngineConfig(scheduler="corun", op_candidates={"yb": []}).validate([0, 1], ["yb"])
    with pytest.raises(UsageError, match="op_cost"):
        EngineConfig(op_cost={"yb": -1}).validate([0, 1], ["yb"])
    # corun's op_threads may use every worker, not one executor's threads
    EngineConfig(executors=2, threads=1, scheduler="corun",
                 op_threads={"yb": 2}).validate([0, 1], ["yb"])


@pytest.mark.parametrize("sched,ex,th", [("sequential", 1, 1), ("shared-queue", 2, 1),
                                         ("critical-path", 2, 1), ("corun", 2, 1),
                                         ("corun", 1, 2)])
def test_a_graph_of_constants_runs_nothing(sched, ex, th):
    g = load_model({"format_version": 1, "name": "all-folded", "seed": 1, "inputs": [],
                    "params": [{"name": "w", "shape": [4, 8]}],
                    "ops": [{"name": "r", "op": "relu", "inputs": ["w"]},
                            {"name": "y", "op": "tanh", "inputs": ["r"]}],
                    "outputs": ["y"]})
    want = run_reference(g)["y"]
    with NativeEngine(g, executors=ex, threads=th, scheduler=sched) as eng:
        for _ in range(2):
            eng.run(profile=True)
            assert eng.folded() == ["r", "y"] and eng.events() == []
            assert np.allclose(eng.output("y"), want, atol=1e-6)
