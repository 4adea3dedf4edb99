"""The C engine against the numpy reference: matmul / conv2d /
layout_transform graphs and the bundled models, under every scheduler and
every executors x threads configuration that fits the machine; repeated runs
and different schedulers must give bit-identical outputs."""

import os
from pathlib import Path

import numpy as np
import pytest

from hwtune.engine.instance import NativeEngine
from hwtune.native.sched import schedulers
from hwtune.errors import UsageError
from hwtune.graph.model import load_model
from hwtune.graph.reference import run_reference

ROOT = Path(__file__).resolve().parent.parent
CPUS = len(os.sched_getaffinity(0))
# (scheduler, executors, threads) for every row of the scheduler table; a
# single-team scheduler uses one executor.
CONFIGS = [(s.name, e, t) for s in schedulers().values()
           for e in ((1,) if s.single_team else (1, 2)) for t in (1, 2)
           if e * t <= (CPUS if s.single_team else max(CPUS, 2))]
# float32 kernels (blocked FMA accumulation) against a float64-accumulating
# reference: relative error grows like sqrt(K) * 2^-24 per layer; 1e-4 of
# the output's scale leaves room for a few chained layers of K ~ 500.
RTOL = 1e-4


def _model(ops, inputs, params, outputs, name="t"):
    return load_model({"format_version": 1, "name": name, "seed": 3, "inputs": inputs,
                       "params": params, "ops": ops, "outputs": outputs})


def _close(got, want, what):
    scale = max(float(np.max(np.abs(want))), 1e-6)
    err = float(np.max(np.abs(got.astype(np.float64) - want))) / scale
    assert err <= RTOL, f"{what}: max error {err:.3g} of the output scale (> {RTOL})"


def _run_all(graph, configs=CONFIGS, runs=2):
    want = run_reference(graph)
    first = None
    for sched, ex, th in configs:
        what = f"{graph.name} {sched} {ex}x{th}"
        with NativeEngine(graph, executors=ex, threads=th, scheduler=sched) as eng:
            for _ in range(runs):
                eng.run()
                got = eng.outputs()
                for name in graph.outputs:
                    _close(got[name], want[name], f"{what} {name}")
                if first is None:
                    first = got
                for name in graph.outputs:
                    assert np.array_equal(got[name], first[name]), \
                        f"{what}: {name} differs from the first configuration's"


MATMULS = [(1, 64, 32, False, False, True), (5, 33, 70, True, False, False),
           (7, 64, 48, False, True, True), (40, 17, 129, True, True, True)]


@pytest.mark.parametrize("m,k,n,ta,tb,bias", MATMULS)
def test_matmul_graph(m, k, n, ta, tb, bias):
    a = [k, m] if ta else [m, k]
    b = [n, k] if tb else [k, n]
    params = [{"name": "w", "shape": b}] + ([{"name": "b", "shape": [n]}] if bias else [])
    g = _model([{"name": "y", "op": "matmul", "inputs": ["x", "w"] + (["b"] if bias else []),
                 "attrs": {"transpose_a": ta, "transpose_b": tb}},
                {"name": "z", "op": "matmul", "inputs": ["y", "y2w"]}],
               [{"name": "x", "shape": a}], params + [{"name": "y2w", "shape": [n, 9]}],
               ["z", "y"])
    _run_all(g)


def test_matmul_activation_b():
    """B produced by another op: not prepacked, packed per run."""
    g = _model([{"name": "p", "op": "matmul", "inputs": ["x", "w1"]},
                {"name": "q", "op": "matmul", "inputs": ["x", "p"], "attrs": {"transpose_a": True}}],
               [{"name": "x", "shape": [24, 24]}], [{"name": "w1", "shape": [24, 24]}], ["q"])
    _run_all(g)


def _conv_graph(blocked, stride=1, pad=1):
    ops = [{"name": "c1", "op": "conv2d", "inputs": ["x", "w1", "b1"],
            "attrs": {"stride": stride, "padding": pad}},
           {"name": "c2", "op": "conv2d", "inputs": ["x", "w2"], "attrs": {"padding": 0}}]
    if blocked:
        ops = [{"name": "xb", "op": "layout_transform", "inputs": ["x"],
                "attrs": {"src": "NCHW", "dst": "NCHW8c"}},
               {"name": "w1b", "op": "layout_transform", "inputs": ["w1"],
                "attrs": {"src": "OIHW", "dst": "OIHW8i16o"}},
               {"name": "w1c", "op": "layout_transform", "inputs": ["w1b"],
                "attrs": {"src": "OIHW8i16o", "dst": "OIHW4i8o"}},
               {"name": "w1d", "op": "layout_transform", "inputs": ["w1c"],
                "attrs": {"src": "OIHW4i8o", "dst": "OIHW8i16o"}},
               {"name": "c1b", "op": "conv2d", "inputs": ["xb", "w1d", "b1"],
                "attrs": {"stride": stride, "padding": pad, "layout": "NCHWc", "reg_n": 2,
                          "unroll_ker": True}},
               {"name": "c1", "op": "layout_transform", "inputs": ["c1b"],
                "attrs": {"src": "NCHW16c", "dst": "NCHW"}},
               {"name": "w2b", "op": "layout_transform", "inputs": ["w2"],
                "attrs": {"src": "OIHW", "dst": "OIHW8i8o"}},
               {"name": "c2b", "op": "conv2d", "inputs": ["xb", "w2b"],
                "attrs": {"layout": "NCHWc"}},
               {"name": "c2r", "op": "layout_transform", "inputs": ["c2b"],
                "attrs": {"src": "NCHW8c", "dst": "NCHW4c"}},
               {"name": "c2", "op": "layout_transform", "inputs": ["c2r"],
                "attrs": {"src": "NCHW4c", "dst": "NCHW"}}]
    return _model(ops, [{"name": "x", "shape": [2, 16, 10, 12]}],
                  [{"name": "w1", "shape": [32, 16, 3, 3]}, {"name": "b1", "shape": [32]},
                   {"name": "w2", "shape": [8, 16, 1, 1]}], ["c1", "c2"],
                  name="conv-blocked" if blocked else "conv-nchw")


@pytest.mark.parametrize("blocked", [False, True], ids=["NCHW", "NCHWc"])
@pytest.mark.parametrize("stride", [1, 2])
def test_conv_graph(blocked, stride):
    _run_all(_conv_graph(blocked, stride))


def test_unimplemented_op_is_one_line():
    g = _model([{"name": "y", "op": "matmul", "inputs": ["x", "w"]}],
               [{"name": "x", "shape": [2, 3]}], [{"name": "w", "shape": [3, 4]}], ["y"])
    with pytest.raises(UsageError, match="scheduler"):
        NativeEngine(g, scheduler="fastest")
    # One spelling: the old underscore form is refused, naming the right one.
    with pytest.raises(UsageError, match="did you mean 'critical-path'"):
        NativeEngine(g, scheduler="critical_path")
    eng = NativeEngine(g, scheduler="critical-path", executors=2)
    eng.run(profile=True)
    ev = eng.events()
    assert len(ev) == 1 and ev[0].op == 0 and ev[0].end_s >= ev[0].start_s
    eng.close()


# Bundled models, shrunk where the full size would make the suite slow.
BUNDLED = [("lstm_small.json", {"seq": 3}), ("phased_lstm_small.json", {"seq": 3}),
           ("pathnet_small.json", {}), ("inception_small.json", {"batch": 1, "image": 64}),
           ("resnet18.json", {"image": 64, "classes": 10}),
           ("deepcpu_lstm_i64_h64.json", {"seq": 4})]


@pytest.mark.parametrize("path,overrides", BUNDLED, ids=[b[0] for b in BUNDLED])
def test_bundled_model(path, overrides):
    g = load_model(ROOT / "configs" / "models" / path, overrides=overrides)
    try:
        NativeEngine(g).close()
    except UsageError as exc:
        if "is not implemented" in str(exc):
            pytest.skip(f"{path}: {exc}")
        raise
    _run_all(g, runs=1)


@pytest.mark.parametrize("sched", ["critical-path", "corun"])
def test_a_chain_on_two_executors_stays_on_the_executor_that_made_each_op_ready(sched):
    """With no slack (a chain: its path is all its work) a master keeps the
    successor it made ready when nothing waiting is more critical, instead
    of the dispatch handing it to the other, idle executor: a chain of 12
    heavy matmuls on 2x1 runs on one executor, in the engine and in its
    simulation (they share the decision). Before, the two took turns op by
    op, each op's input in the other core's cache."""
    from hwtune.engine.simulator import Simulator
    ops, prev = [], "x"
    for i in range(12):
        ops.append({"name": f"m{i}", "op": "matmul", "inputs": [prev, "w"]})
        prev = f"m{i}"
    g = _model(ops, [{"name": "x", "shape": [16, 64]}], [{"name": "w", "shape": [64, 64]}],
               [prev], name="chain12")
    cost = {op.name: 1e-3 for op in g.ops}  # heavy: never run inline as a tiny op
    with NativeEngine(g, executors=2, threads=1, scheduler=sched, op_cost=cost) as eng:
        for _ in range(3):
            eng.run(profile=True)
            assert len({ev.executor for ev in eng.events()}) == 1
    sim = Simulator(g)
    try:
        _, events = sim.run(executors=2, threads=1, scheduler=sched,
                            seconds=np.tile([1e-3, 2e-3], (len(g.ops), 1)), op_cost=cost,
                            events=True)  # corun may give an op both workers: 1 is faster
    finally:
        sim.close()
    assert len(events) == 12 and len({ev.executor for ev in events}) == 1


@pytest.mark.parametrize("sched", ["critical-path", "corun"])
def test_a_master_does_not_keep_its_successor_while_an_op_more_critical_by_more_waits(sched):
    """PathNet's shape: per layer six heavy ops (2 ms), each followed by a
    lighter one (0.5 ms), joined by a sum; two layers on 4 executors. When
    the first four heavy ops end, the two heavy ops still waiting are more
    critical than each master's light successor by a heavy op's time: they
    start then, on two of the four executors, instead of after the light
    ops (the graph's slack, 3.3 ms, would have let every master keep its
    own). The engine's decision, in its simulation."""
    from hwtune.engine.simulator import Simulator
    ops, prev = [], "x"
    for layer in range(2):
        outs = []
        for m in range(6):
            ops.append({"name": f"L{layer}c{m}", "op": "matmul", "inputs": [prev, "w"]})
            ops.append({"name": f"L{layer}r{m}", "op": "relu", "inputs": [f"L{layer}c{m}"]})
            outs.append(f"L{layer}r{m}")
        ops.append({"name": f"L{layer}sum", "op": "sum", "inputs": outs})
        prev = f"L{layer}sum"
    g = _model(ops, [{"name": "x", "shape": [16, 64]}], [{"name": "w", "shape": [64, 64]}],
               [prev], name="layers")
    cost = {op.name: 2e-3 if "c" in op.name[2:] else 5e-4 if "r" in op.name[2:] else 1e-4
            for op in g.ops}
    secs = np.array([[cost[op.name]] * 4 for op in g.ops])  # no faster on more threads
    sim = Simulator(g)
    try:
        _, events = sim.run(executors=4, threads=1, scheduler=sched, seconds=secs,
                            op_cost=cost, events=True)
    finally:
        sim.close()
    start = {g.ops[ev.op].name if isinstance(ev.op, int) else ev.op: ev.start_s for ev in events}
    first_light = min(start[f"L0r{m}"] for m in range(6))
    late = sorted(start[f"L0c{m}"] for m in range(6))[4:]
    assert all(t <= first_light + 1e-5 for t in late), (late, first_light)
