"""Reshape and flatten as views (engine/plan/views.c): an arena tensor's
reshape takes its input's bytes instead of copying them. The plan gives the
chain one offset and keeps it live until the last reader of any member; a
reshape of a graph input keeps bytes of its own; outputs that are views
survive the run. Every graph runs on the engine against the numpy reference,
under each scheduler's reuse policy and each ISA variant this CPU has."""

import numpy as np
import pytest

from hwtune.engine import lower_graph
from hwtune.graph.model import load_model
from hwtune.graph.reference import run_reference
from hwtune.engine.instance import NativeEngine
from hwtune.native.isa import resolve_isa, supported_isas
from hwtune.native.plan import Plan

ISAS = [i for i in ("avx512", "avx2", "generic") if i in supported_isas()]
# sequential plans with SEQUENTIAL reuse, critical-path with PARALLEL_SAFE.
SCHEDULERS = [("sequential", 1, 1), ("sequential", 1, 2), ("critical-path", 2, 1)]


def _model(ops, inputs, outputs, params=()):
    return load_model({"format_version": 1, "name": "views", "seed": 5, "inputs": inputs,
                       "params": list(params), "ops": ops, "outputs": outputs})


def _op(name, op, inputs, **attrs):
    return {"name": name, "op": op, "inputs": inputs, "attrs": attrs}


def _offsets(graph, reuse):
    with lower_graph(graph) as ng, Plan(ng, reuse=reuse) as plan:
        plan.check_aliasing()
        return {name: plan.offsets[i] for name, i in ng.tensor_ids.items()}


def _run(graph, isa):
    want = run_reference(graph)
    for sched, ex, th in SCHEDULERS:
        with NativeEngine(graph, executors=ex, threads=th, scheduler=sched,
                          isa=resolve_isa(isa)) as eng:
            for _ in range(2):  # a second run reads what the first left behind
                eng.run()
                got = eng.outputs()
                for name in graph.outputs:
                    # Views and adds are exact; sigmoid/tanh within their
                    # kernels' bounds (a few ulps).
                    np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6,
                                               err_msg=f"{sched} {ex}x{th} {isa} {name}")


# x -> a=relu -> b=reshape -> c=flatten -> d=reshape -> e=tanh; then f=sigmoid(x)
# is born after the chain's root was last read directly: without the chain's
# lifetime it would take a's bytes while d is still to be read by e and g.
CHAIN = _model([_op("a", "relu", ["x"]),
                _op("b", "reshape", ["a"], shape=[6, 4, 5]),
                _op("c", "flatten", ["b"], axis=1),
                _op("d", "reshape", ["c"], shape=[120]),
                _op("f", "sigmoid", ["x"]),
                _op("e", "tanh", ["d"]),
                _op("g", "add", ["d", "f"])],
               [{"name": "x", "shape": [120]}], ["e", "g"])


@pytest.mark.parametrize("reuse", ["sequential", "parallel_safe"])
def test_a_reshape_chain_is_one_buffer(reuse):
    off = _offsets(CHAIN, reuse)
    assert off["a"] == off["b"] == off["c"] == off["d"] >= 0
    # f is born while the chain is live: its own bytes.
    assert off["f"] != off["a"]


def test_without_reuse_every_tensor_keeps_its_bytes():
    off = _offsets(CHAIN, "none")
    produced = [off[n] for n in "abcdefg"]
    assert len(set(produced)) == len(produced)


@pytest.mark.parametrize("isa", ISAS)
def test_reshape_chain_matches_the_reference(isa):
    _run(CHAIN, isa)


# A reshape of a graph input and a graph output that is a reshape of an
# activation which an add still reads afterwards.
IO = _model([_op("r", "reshape", ["x"], shape=[4, 6]),
             _op("s", "sigmoid", ["r"]),
             _op("y", "reshape", ["s"], shape=[24]),
             _op("t", "tanh", ["s"]),
             _op("z", "add", ["s", "t"])],
            [{"name": "x", "shape": [2, 12]}], ["y", "z"])


def test_inputs_are_not_viewed_and_output_views_survive():
    for reuse in ("sequential", "parallel_safe"):
        off = _offsets(IO, reuse)
        assert off["x"] == -1 and off["r"] >= 0  # the input's reshape copies
        assert off["y"] == off["s"]
        # The output chain lives for ever: nothing born later shares it.
        assert off["t"] != off["s"] and off["z"] != off["s"]


@pytest.mark.parametrize("isa", ISAS)
def test_input_and_output_reshapes_match_the_reference(isa):
    _run(IO, isa)


# The reshape's input is read after it by a binary op whose other operand is
# the view itself (a residual add over two shapes of one buffer), and a
# later op of the same size could have been written over the buffer.
RESIDUAL = _model([_op("h", "matmul", ["x", "w"]),
                   _op("v", "reshape", ["h"], shape=[8, 2, 8]),
                   _op("u", "reshape", ["v"], shape=[8, 16]),
                   _op("r", "add", ["h", "u"]),
                   _op("q", "relu", ["r"]),
                   _op("o", "mul", ["q", "v2"]),
                   _op("v2", "reshape", ["u"], shape=[8, 16])],
                  [{"name": "x", "shape": [8, 12]}], ["o"],
                  params=[{"name": "w", "shape": [12, 16]}])


@pytest.mark.parametrize("isa", ISAS)
def test_view_read_after_by_a_residual_add(isa):
    for reuse in ("sequential", "parallel_safe"):
        off = _offsets(RESIDUAL, reuse)
        assert off["h"] == off["v"] == off["u"] == off["v2"]
        assert off["r"] != off["h"] and off["q"] != off["h"]
    _run(RESIDUAL, isa)


def test_a_reshape_of_a_param_copies():
    g = _model([_op("p", "reshape", ["w"], shape=[6, 2]),
                _op("y", "add", ["x", "p"])],
               [{"name": "x", "shape": [6, 2]}], ["y", "p"],
               params=[{"name": "w", "shape": [12]}])
    off = _offsets(g, "sequential")
    assert off["w"] == -1 and off["p"] >= 0
    _run(g, ISAS[-1])
