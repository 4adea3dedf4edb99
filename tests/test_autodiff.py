"""Reverse-mode differentiation: every gradient rule against central finite
differences in float64, on one-op models whose operands are all trainable.

The numpy reference computes in float64 and rounds each op's result to
float32; the check runs it with float32 swapped for float64 in the op and
reference modules, so the loss, its finite differences and the analytic
gradients (the training graph's own backward ops, run by the same
reference) are all float64."""

import numpy as np
import pytest

from hwtune.graph import load_model
from hwtune.graph.autodiff import RULES, TrainSpec, training_graph
from hwtune.graph.errors import GraphError
from hwtune.graph.reference import init_inputs, run_reference

F64_MODULES = ["hwtune.graph.reference"] + [
    f"hwtune.graph.ops.{m}" for m in ("eltwise", "linear", "conv", "pool", "norm", "movement",
                                      "layout", "train", "rnn")]


class _Numpy64:
    """numpy, with float32 meaning float64."""

    def __getattr__(self, name):
        return np.float64 if name == "float32" else getattr(np, name)


@pytest.fixture
def float64(monkeypatch):
    import importlib
    for name in F64_MODULES:
        monkeypatch.setattr(importlib.import_module(name), "np", _Numpy64())


POS = {"low": 0.5, "high": 2.0}  # divisors and variances
CASES = [  # (op, operand shapes, attrs, per-operand init overrides)
    ("matmul", [(3, 4), (4, 5), (5,)], {}, {}),
    ("matmul", [(4, 3), (4, 5)], {"transpose_a": True}, {}),
    ("matmul", [(3, 4), (5, 4)], {"transpose_b": True}, {}),
    ("matmul", [(4, 3), (5, 4), (5,)], {"transpose_a": True, "transpose_b": True}, {}),
    ("add", [(3, 4), (4,)], {}, {}),
    ("add", [(2, 1, 4), (3, 1)], {}, {}),
    ("sub", [(3, 4), (3, 1)], {}, {}),
    ("mul", [(2, 3, 4), (1, 3, 1)], {}, {}),
    ("div", [(3, 4), (4,)], {}, {1: POS}),
    ("sum", [(3, 4), (4,), (3, 4)], {}, {}),
    # minimum, maximum, mod and abs have kinks (a == b; a / b an integer;
    # x == 0) where finite differences are meaningless: their points are
    # uniform draws of a fixed seed, none within the step (1e-6) of a kink
    # (the chance of one is about 1e-6 per element).
    ("minimum", [(3, 4), (4,)], {}, {}),
    ("maximum", [(2, 1, 4), (3, 1)], {}, {}),
    ("mod", [(3, 4), (4,)], {}, {0: {"low": -5.0, "high": 9.0}, 1: {"low": 1.0, "high": 3.0}}),
    ("mod", [(3, 4), (3, 4)], {}, {1: {"low": -2.0, "high": -0.5}}),
    ("abs", [(3, 5)], {}, {}),
    ("affine", [(3, 4)], {"scale": -1.5, "shift": 0.25}, {}),
    ("sigmoid", [(3, 5)], {}, {}),
    ("tanh", [(3, 5)], {}, {}),
    ("relu", [(3, 5)], {}, {}),
    ("leaky_relu", [(3, 5)], {"alpha": 0.1}, {}),
    ("softmax", [(3, 5)], {}, {}),
    ("softmax", [(2, 4, 3)], {"axis": 1}, {}),
    ("conv2d", [(2, 3, 5, 5), (4, 3, 3, 3), (4,)], {"padding": 1}, {}),
    ("conv2d", [(1, 2, 7, 6), (3, 2, 3, 2)], {"stride": 2}, {}),
    ("conv2d", [(1, 2, 6, 6), (2, 2, 1, 3)], {"stride": [2, 1], "padding": [0, 1]}, {}),
    ("pool2d", [(2, 2, 6, 6)], {"mode": "max", "kernel": 3, "stride": 2, "padding": 1}, {}),
    ("pool2d", [(1, 2, 5, 5)], {"mode": "max", "kernel": 2, "ceil_mode": True}, {}),
    ("pool2d", [(1, 2, 6, 5)], {"mode": "avg", "kernel": 3, "stride": 2, "padding": 1}, {}),
    ("pool2d", [(1, 2, 7, 7)], {"mode": "avg", "kernel": 3, "stride": 2, "padding": 1,
                                "ceil_mode": True, "count_include_pad": True}, {}),
    ("global_pool2d", [(2, 3, 3, 4)], {"mode": "avg"}, {}),
    ("global_pool2d", [(2, 3, 3, 4)], {"mode": "max"}, {}),
    ("batch_norm", [(2, 3, 2, 2), (3,), (3,), (3,), (3,)], {}, {4: POS}),
    ("batch_norm", [(4, 3), (3,), (3,), (3,), (3,)], {"epsilon": 0.1}, {4: POS}),
    ("concat", [(2, 3), (2, 2), (2, 1)], {"axis": 1}, {}),
    ("split", [(2, 6, 2)], {"axis": 1, "sizes": [1, 3, 2]}, {}),
    ("slice", [(3, 7)], {"axis": 1, "begin": 2, "end": -1}, {}),
    ("slice", [(5, 2)], {"axis": 0, "begin": -3}, {}),
    ("reshape", [(2, 3, 4)], {"shape": [4, -1]}, {}),
    ("flatten", [(2, 3, 2, 2)], {}, {}),
    ("lstm_cell", [(3, 8), (3, 2)], {}, {}),
    ("lstm_cell", [(2, 12), (2, 3), (5, 12), (12,)], {"x_row": 2}, {}),
]


def one_op(op, shapes, attrs, inits, n_out=1):
    params = []
    for i, s in enumerate(shapes):
        t = {"name": f"p{i}", "shape": list(s)}
        t.update(inits.get(i, {"low": -1.0, "high": 1.0}))
        params.append(t)
    outs = [f"y{i}" for i in range(n_out)]
    o = {"name": "op", "op": op, "inputs": [p["name"] for p in params], "outputs": outs}
    if attrs:
        o["attrs"] = attrs
    return load_model({"format_version": 1, "name": f"one_{op}", "seed": 5, "inputs": [],
                       "params": params, "ops": [o], "outputs": outs})


def _id(case):
    return f"{case[0]}-{'-'.join('x'.join(map(str, s)) for s in case[1])}-{case[2]}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_rule_matches_finite_differences(case, float64):
    op, shapes, attrs, inits = case
    n_out = len(attrs.get("sizes", ())) or (2 if op == "lstm_cell" else 1)
    check_finite_differences(one_op(op, shapes, attrs, inits, n_out))


BN_RUNNING = [c for c in CASES if c[0] == "batch_norm"]


@pytest.mark.parametrize("case", BN_RUNNING, ids=_id)
def test_batch_norm_with_running_statistics_matches_finite_differences(case, float64):
    """The CASES check batch_norm in training mode (batch statistics, the
    default); here the form that keeps the stored mean and var."""
    op, shapes, attrs, inits = case
    g = one_op(op, shapes, attrs, inits)
    check_finite_differences(g, batch_norm="running")


def check_finite_differences(g, **spec):
    t = training_graph(g, TrainSpec(loss="mse", optimizer="none", **spec))
    values = init_inputs(t)  # weights (inputs of the step) and zero targets
    rng = np.random.default_rng(1)
    for name in values:  # targets away from the outputs: a generic dloss/dy
        if name.startswith("target"):
            values[name] = rng.uniform(-1, 1, values[name].shape)
    out = run_reference(t, inputs=values)
    grads = {n[:-len(".grad")]: out[n] for n in t.outputs if n.endswith(".grad")}
    assert grads, "no gradient computed"
    eps = 1e-6
    for name, grad in grads.items():
        assert grad.dtype == np.float64
        fd = np.zeros(grad.shape)
        base = values[name]
        for k in range(base.size):
            losses = []
            for sign in (1, -1):
                v = base.copy()
                v.flat[k] += sign * eps
                losses.append(run_reference(t, inputs={**values, name: v})["loss"][0])
            fd.flat[k] = (losses[0] - losses[1]) / (2 * eps)
        err = np.linalg.norm(grad - fd) / max(np.linalg.norm(fd), 1e-12)
        assert err <= 1e-3, f"{name}: relative error {err:.2e}"


def test_every_rule_has_a_case():
    # batch_norm_train: the training form the batch_norm cases differentiate
    assert {c[0] for c in CASES} | {"batch_norm_train"} == set(RULES) - {"layout_transform"}


def test_op_without_rule_is_a_clear_error():
    g = one_op("pow", [(3, 4), (3, 4)], {}, {})
    with pytest.raises(GraphError, match='op "op": pow has no gradient rule'):
        training_graph(g, TrainSpec(loss="mse"))


# Ops in the blocked NCHW[x]c layout: the NCHW rule between layout
# transforms (hwtune.graph.autodiff.blocked). Operands in their blocked
# shapes: x [N, C/x, H, W, x], conv weights [O/o, I/i, KH, KW, i, o].
BLOCKED = [
    ("conv2d", [(2, 2, 5, 5, 2), (2, 2, 3, 3, 2, 3), (6,)], {"layout": "NCHWc", "padding": 1},
     {}),
    ("conv2d", [(1, 1, 7, 6, 3), (1, 1, 3, 2, 3, 2)], {"layout": "NCHWc", "stride": 2}, {}),
    ("pool2d", [(2, 2, 6, 6, 2)], {"layout": "NCHWc", "mode": "max", "kernel": 3, "stride": 2,
                                   "padding": 1}, {}),
    ("pool2d", [(1, 1, 6, 5, 3)], {"layout": "NCHWc", "mode": "avg", "kernel": 3, "stride": 2,
                                   "padding": 1}, {}),
    ("global_pool2d", [(2, 3, 3, 4, 2)], {"layout": "NCHWc", "mode": "avg"}, {}),
    ("batch_norm", [(2, 2, 2, 2, 3), (6,), (6,), (6,), (6,)], {"layout": "NCHWc"}, {4: POS}),
]


@pytest.mark.parametrize("case", BLOCKED, ids=_id)
def test_blocked_rule_matches_finite_differences(case, float64):
    check_finite_differences(one_op(*case))


def test_blocked_batch_norm_with_running_statistics_matches_finite_differences(float64):
    check_finite_differences(one_op(*BLOCKED[-1]), batch_norm="running")


def test_blocked_gradients_keep_their_operands_blocks():
    """A blocked operand's gradient comes back in its own blocks (weights
    [O/o, I/i, KH, KW, i, o] included), through the NCHW backward ops."""
    g = one_op(*BLOCKED[0])
    t = training_graph(g, TrainSpec(loss="mse", optimizer="none"))
    assert {n: t.shapes[n] for n in t.outputs if n.endswith(".grad")} == {
        "p0.grad": (2, 2, 5, 5, 2), "p1.grad": (2, 2, 3, 3, 2, 3), "p2.grad": (6,)}
    assert {"conv2d_grad_data", "conv2d_grad_weight"} <= {o.op for o in t.ops}


def test_batch_norm_running_statistics_stay_constant():
    g = one_op("batch_norm", [(2, 3, 2, 2), (3,), (3,), (3,), (3,)], {}, {4: POS})
    t = training_graph(g, TrainSpec(loss="mse", optimizer="sgd", batch_norm="running"))
    assert {p.name for p in t.params} == {"p3", "p4"}
    assert [o for o in t.outputs if o.endswith(".new") and "momentum" not in o] == [
        "p0.new", "p1.new", "p2.new"]


def test_batch_norm_trains_on_batch_statistics_by_default():
    g = one_op("batch_norm", [(2, 3, 2, 2), (3,), (3,), (3,), (3,)], {}, {4: POS})
    t = training_graph(g, TrainSpec(loss="mse", optimizer="sgd"))
    assert [o.op for o in t.ops if o.op.startswith("batch_norm")] == [
        "batch_norm_train", "batch_norm_train_grad", "batch_norm_stats_update"]
    # the running mean and var are state of the step, updated as PyTorch does
    assert not t.params and {"p3", "p4"} <= {i.name for i in t.inputs}
    assert {"p3.new", "p4.new"} <= set(t.outputs)
    # the output is normalised by the batch: per channel mean 0, variance ~1
    x = np.random.default_rng(0).uniform(-2, 5, (2, 3, 2, 2)).astype(np.float32)
    y = run_reference(t, inputs={**init_inputs(t), "p0": x,
                                 "p1": np.ones(3, np.float32), "p2": np.zeros(3, np.float32)})
    assert y["loss"][0] == pytest.approx(1.0, rel=1e-4)  # mse against zero targets
    m = 2 * 2 * 2  # elements per channel
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3)) * m / (m - 1)
    values = init_inputs(t)
    np.testing.assert_allclose(y["p3.new"], 0.9 * values["p3"] + 0.1 * mean, rtol=1e-5)
    np.testing.assert_allclose(y["p4.new"], 0.9 * values["p4"] + 0.1 * var, rtol=1e-4)


def test_batch_statistics_of_one_value_are_a_clear_error():
    g = one_op("batch_norm", [(1, 3, 1, 1), (3,), (3,), (3,), (3,)], {}, {4: POS})
    with pytest.raises(GraphError, match="one value per channel"):
        training_graph(g, TrainSpec(loss="mse"))
    training_graph(g, TrainSpec(loss="mse", batch_norm="running"))


def test_unknown_batch_norm_mode_is_a_clear_error():
    g = one_op("batch_norm", [(2, 3, 2, 2), (3,), (3,), (3,), (3,)], {}, {4: POS})
    with pytest.raises(GraphError, match='unknown batch_norm mode "frozen"'):
        training_graph(g, TrainSpec(loss="mse", batch_norm="frozen"))


def test_training_graph_is_an_ordinary_model(tmp_path):
    g = one_op("matmul", [(3, 4), (4, 5), (5,)], {}, {})
    t = training_graph(g, TrainSpec(loss="mse", optimizer="adam"))
    again = load_model(t.to_json())
    assert [o.op for o in again.ops] == [o.op for o in t.ops]
    assert "adam.step" in {i.name for i in again.inputs}
    assert again.outputs[0] == "loss"
