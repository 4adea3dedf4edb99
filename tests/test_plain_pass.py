"""The plain form of a blocked graph (graph/passes/plain.py): a model that is
NCHW[x]c already (the layout pass's output, or written so by hand) computes
the same outputs in NCHW, takes new CONV layouts from op_params, and can be
tuned and run like any model."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from hwtune.graph import load_model, run_reference
from hwtune.graph.passes.layout import apply_op_params
from hwtune.graph.passes.plain import is_plain, to_plain
from hwtune.graph.reference import init_inputs

from conftest import run_engine
from test_layout_pass import SHRUNK, _model, _random_params


def _engine(graph, values):
    return run_engine(graph, values, threads=2)


@pytest.mark.parametrize("model", sorted(SHRUNK))
def test_a_blocked_model_has_its_plain_form(model):
    g = _model(model)
    blocked = apply_op_params(g, _random_params(g, np.random.default_rng(3)))
    assert not is_plain(blocked)
    plain = to_plain(blocked)
    assert is_plain(plain)
    # the same ops as the model the layout pass started from, names kept
    assert sorted((o.name, o.op) for o in plain.ops) == sorted((o.name, o.op) for o in g.ops)
    values = init_inputs(g)
    want, got = run_reference(g, inputs=values), run_reference(plain, inputs=values)
    for name in g.outputs:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("model", sorted(SHRUNK))
def test_a_blocked_model_takes_new_layouts(model):
    """op_params applied to a blocked model re-block it from its plain form:
    the engine gives the model's outputs."""
    g = _model(model)
    blocked = apply_op_params(g, _random_params(g, np.random.default_rng(4)))
    again = apply_op_params(blocked, _random_params(g, np.random.default_rng(5)))
    values = init_inputs(g)
    want, got = run_reference(g, inputs=values), _engine(again, values)
    for name in g.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-3, atol=1e-4, err_msg=name)


def hand_blocked():
    """Written blocked by hand: a blocked graph input and 6-D param weights,
    a blocked conv, a ReLU and an add of equal shapes (kept blocked), an add
    of a blocked 5-D bias (a block nothing declares: run blocked), a
    re-blocking transform, a blocked max pool, a flatten of a blocked tensor
    (element order of the blocks: run blocked) and a blocked graph output."""
    return load_model({
        "format_version": 1, "name": "hand_blocked", "seed": 3,
        "inputs": [{"name": "x", "shape": [2, 2, 6, 6, 4]}],
        "params": [{"name": "w", "shape": [3, 2, 3, 3, 4, 4]},
                   {"name": "b", "shape": [12]},
                   {"name": "w2", "shape": [2, 3, 1, 1, 4, 6]},
                   {"name": "bias5", "shape": [1, 3, 1, 1, 4]},
                   {"name": "fc", "shape": [108, 5]}],
        "ops": [
            {"name": "c1", "op": "conv2d", "inputs": ["x", "w", "b"], "outputs": ["y1"],
             "attrs": {"layout": "NCHWc", "padding": 1}},
            {"name": "r1", "op": "relu", "inputs": ["y1"], "outputs": ["a1"]},
            {"name": "s1", "op": "add", "inputs": ["a1", "y1"], "outputs": ["s"]},
            {"name": "bb", "op": "add", "inputs": ["s", "bias5"], "outputs": ["sb"]},
            {"name": "rb", "op": "layout_transform", "inputs": ["sb"], "outputs": ["sb2"],
             "attrs": {"src": "NCHW4c", "dst": "NCHW2c"}},
            {"name": "back", "op": "layout_transform", "inputs": ["sb2"], "outputs": ["sbp"],
             "attrs": {"src": "NCHW2c", "dst": "NCHW4c"}},
            {"name": "c2", "op": "conv2d", "inputs": ["sbp", "w2"], "outputs": ["y2"],
             "attrs": {"layout": "NCHWc", "stride": 2}},
            {"name": "p", "op": "pool2d", "inputs": ["y2"], "outputs": ["py"],
             "attrs": {"layout": "NCHWc", "mode": "max", "kernel": 1}},
            {"name": "f", "op": "flatten", "inputs": ["py"], "outputs": ["fl"]},
            {"name": "m", "op": "matmul", "inputs": ["fl", "fc"], "outputs": ["logits"]}],
        "outputs": ["logits", "y2", "sb2"]})


def test_a_hand_blocked_model_has_its_plain_form():
    g = hand_blocked()
    plain = to_plain(g)
    kinds = {o.name: o for o in plain.ops}
    for name in ("c1", "c2", "p"):  # blocked ops run in NCHW
        assert kinds[name].attrs.get("layout", "NCHW") == "NCHW", name
        assert len(plain.shapes[kinds[name].outputs[0]]) == 4, name
    assert "back" not in kinds  # a transform is dropped, but for a graph output's
    assert kinds["rb"].outputs == ["sb2"]
    assert plain.outputs == g.outputs
    assert all(plain.shapes[n] == g.shapes[n] for n in g.outputs)
    values = init_inputs(g)
    want = run_reference(g, inputs=values)
    for got in (run_reference(plain, inputs=values), _engine(plain, values)):
        for name in g.outputs:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5,
                                       err_msg=name)


def test_a_plain_model_is_its_own_plain_form():
    g = _model("pathnet_small")
    assert to_plain(g) is g


def test_tune_graph_and_run_take_a_blocked_model(tmp_path):
    """The layout search rewrites a blocked model from its plain form, and
    the stored config runs it (it failed with 'already uses a blocked
    layout' after the whole CONV search)."""
    from hwtune.cli.main import cli
    g = apply_op_params(_model("pathnet_small"),
                        _random_params(_model("pathnet_small"), np.random.default_rng(6)))
    model = tmp_path / "blocked.json"
    model.write_text(json.dumps(g.to_json()))
    db = str(tmp_path / "r.db")
    runner = CliRunner()
    res = runner.invoke(cli, ["tune-graph", str(model), "--budget", "6", "--db", db])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["run", str(model), "--db", db, "--iterations", "3", "--check"])
    assert res.exit_code == 0, res.output
    assert "tuned" in res.output and "stale" not in res.output.lower(), res.output
