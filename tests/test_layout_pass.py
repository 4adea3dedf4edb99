"""The layout rewrite pass: same outputs in numpy and on the C engine for
every bundled CNN under random legal CONV params, transforms only where a
consumer needs another layout, and one-line errors for bad params."""

import numpy as np
import pytest

from hwtune.engine.instance import NativeEngine
from hwtune.errors import UsageError
from hwtune.graph import load_model, run_reference
from hwtune.graph.ops.conv import conv2d_knobs
from hwtune.graph.passes.layout import apply_op_params, inserted_transforms
from hwtune.native import conv as native_conv

MODELS = "configs/models"
# Shrunk so the numpy reference and the engine run in about a second each;
# every CONV, join and pooling kind of the full models is still there.
SHRUNK = {
    "resnet18": ({"image": 32, "classes": 10}, ["logits", "B5b", "B3a"]),
    "inception_small": ({"image": 32, "batch": 1, "classes": 10}, ["logits", "I4a", "I5b"]),
    "pathnet_small": ({"batch": 2}, ["logits", "P1.sum", "P3.sum"]),
}


def _model(name):
    overrides, extra = SHRUNK[name]
    doc = load_model(f"{MODELS}/{name}.json", overrides).to_json()
    # Softmax of small logits hides errors: compare logits and block
    # outputs too (each also tests a blocked tensor leaving as an output).
    doc["outputs"] = doc["outputs"] + extra
    return load_model(doc)


def _random_params(graph, rng):
    """Legal for both the graph (Python knob table) and the C template."""
    out = {}
    for op in graph.ops:
        if op.op != "conv2d":
            continue
        x, w = graph.shapes[op.inputs[0]], graph.shapes[op.inputs[1]]
        a = op.resolved
        py = conv2d_knobs([x, w], a)
        c = native_conv.knobs(x, w, stride=a["stride"], pad=a["padding"])
        legal = {k: [v for v in py[k] if v in c[k]] for k in py}
        pick = {k: v[int(rng.integers(len(v)))] for k, v in legal.items()}
        pick["unroll_ker"] = bool(pick["unroll_ker"])
        layout = "NCHW" if rng.random() < 0.2 else "NCHWc"
        if layout == "NCHW":
            pick = {"reg_n": pick["reg_n"]}
        out[op.name] = {"layout": layout, **pick}
    return out


def _close(a, b, rtol, atol):
    for name in a:
        assert a[name].shape == b[name].shape, name
        np.testing.assert_allclose(b[name], a[name], rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("model", sorted(SHRUNK))
@pytest.mark.parametrize("seed", [0, 1])
def test_bundled_models_same_outputs(model, seed):
    g = _model(model)
    params = _random_params(g, np.random.default_rng(seed))
    new = apply_op_params(g, params)
    assert new.outputs == g.outputs
    for name in g.outputs:
        assert new.shapes[name] == g.shapes[name]
    names = {op.name for op in new.ops}
    assert {op.name for op in g.ops} <= names  # original op names stay
    blocked = [n for n, p in params.items() if p["layout"] == "NCHWc"]
    for op in new.ops:
        if op.name in blocked:
            assert op.resolved["layout"] == "NCHWc"
            assert len(new.shapes[op.outputs[0]]) == 5
    want = run_reference(g)
    _close(want, run_reference(new), 1e-5, 1e-6)
    with NativeEngine(new, threads=2, scheduler="critical-path") as eng:
        eng.run()
        got = eng.outputs()
    _close(want, got, 2e-3, 2e-4)


def _chain(oc_bns=(16, 16, 16)):
    """x -> c1 -> relu -> c2 -> batch_norm -> c3 (all 16 channels)."""
    doc = {
        "name": "chain", "seed": 3,
        "inputs": [{"name": "x", "shape": [1, 16, 6, 6]}],
        "params": [{"name": f"w{i}", "shape": [16, 16, 3, 3]} for i in (1, 2, 3)]
        + [{"name": f"bn.{k}", "shape": [16], "low": 0.5, "high": 1.5}
           for k in ("gamma", "beta", "mean", "var")],
        "ops": [
            {"name": "c1", "op": "conv2d", "inputs": ["x", "w1"], "attrs": {"padding": 1}},
            {"name": "r1", "op": "relu", "inputs": ["c1"]},
            {"name": "c2", "op": "conv2d", "inputs": ["r1", "w2"], "attrs": {"padding": 1}},
            {"name": "b2", "op": "batch_norm",
             "inputs": ["c2", "bn.gamma", "bn.beta", "bn.mean", "bn.var"]},
            {"name": "c3", "op": "conv2d", "inputs": ["b2", "w3"], "attrs": {"padding": 1}},
        ],
        "outputs": ["c3"],
    }
    g = load_model(doc)
    params = {f"c{i + 1}": {"layout": "NCHWc", "ic_bn": 16, "oc_bn": ob}
              for i, ob in enumerate(oc_bns)}
    for i in range(1, 3):  # each conv reads what the previous one wrote
        params[f"c{i + 1}"]["ic_bn"] = oc_bns[i - 1]
    params["c1"]["ic_bn"] = 16
    return g, params


def _engine_matches(g, new):
    want = run_reference(g)
    with NativeEngine(new, threads=2) as eng:
        eng.run()
        _close(want, eng.outputs(), 1e-3, 1e-4)


def test_same_block_chain_needs_no_transform_between_convs():
    g, params = _chain()
    new = apply_op_params(g, params)
    names = [op.name for op in inserted_transforms(new)]
    # Into the first conv and out of the graph: nothing between the convs.
    assert names == ["x@nchw16c", "c3@nchw"]
    by = {op.name: op for op in new.ops}
    assert by["c3"].outputs == ["c3@nchw16c"] and by["c3@nchw"].outputs == ["c3"]
    assert by["b2"].resolved["layout"] == "NCHWc" and by["r1"].inputs == ["c1"]
    assert by["c1"].inputs[1] == "w1@oihw16i16o"
    _engine_matches(g, new)


def test_block_change_between_convs_is_one_transform():
    g, params = _chain(oc_bns=(16, 8, 16))
    params["c3"]["ic_bn"] = 16  # c2 writes 8c, c3 reads 16c
    new = apply_op_params(g, params)
    tr = {op.name: op for op in inserted_transforms(new)}
    assert sorted(tr) == ["b2@nchw16c", "c3@nchw", "x@nchw16c"]
    assert tr["b2@nchw16c"].attrs == {"src": "NCHW8c", "dst": "NCHW16c"}
    # batch_norm ran in c2's block: the transform is after it, not before.
    assert {op.name: op for op in new.ops}["b2"].inputs[0] == "c2"
    _engine_matches(g, new)


def _fork():
    """x feeds c1 and c2 (same ic_bn: one shared copy); a residual add joins
    c1 and x; a concat joins c2 and the add."""
    doc = {
        "name": "fork", "seed": 5,
        "inputs": [{"name": "x", "shape": [1, 16, 5, 5]}],
        "params": [{"name": "w1", "shape": [16, 16, 1, 1]}, {"name": "w2", "shape": [8, 16, 3, 3]},
                   {"name": "w3", "shape": [16, 24, 1, 1]}],
        "ops": [
            {"name": "c1", "op": "conv2d", "inputs": ["x", "w1"]},
            {"name": "c2", "op": "conv2d", "inputs": ["x", "w2"], "attrs": {"padding": 1}},
            {"name": "add", "op": "add", "inputs": ["c1", "x"]},
            {"name": "cat", "op": "concat", "inputs": ["add", "c2"], "attrs": {"axis": -3}},
            {"name": "pool", "op": "pool2d", "inputs": ["cat"],
             "attrs": {"mode": "avg", "kernel": 3, "stride": 1, "padding": 1}},
            {"name": "c3", "op": "conv2d", "inputs": ["pool", "w3"]},
            {"name": "gap", "op": "global_pool2d", "inputs": ["c3"], "attrs": {"mode": "max"}},
            {"name": "flat", "op": "flatten", "inputs": ["gap"]},
        ],
        "outputs": ["flat"],
    }
    return load_model(doc)


def test_joins_share_copies_and_force_one_layout():
    g = _fork()
    params = {"c1": {"ic_bn": 8, "oc_bn": 8}, "c2": {"ic_bn": 8, "oc_bn": 8},
              "c3": {"ic_bn": 8, "oc_bn": 4}}
    new = apply_op_params(g, params)
    by = {op.name: op for op in new.ops}
    # x is copied to 8c once; c2 and the add (join in c1's block) share it.
    assert by["c2"].inputs[0] == "x@nchw8c" and by["add"].inputs == ["c1", "x@nchw8c"]
    assert by["cat"].resolved["axis"] == 1 and by["pool"].resolved["layout"] == "NCHWc"
    assert by["c3"].inputs[0] == "pool"  # pool already in 8c
    # gap runs blocked on the tiny tensor; the copy back comes before flatten.
    assert by["flat"].inputs == ["gap@nchw"]
    assert [op.name for op in inserted_transforms(new)] == ["x@nchw8c", "gap@nchw"]
    _engine_matches(g, new)


def test_join_of_mismatched_blocks_transforms_one_side():
    g = _fork()
    params = {"c1": {"ic_bn": 16, "oc_bn": 4}, "c2": {"ic_bn": 8, "oc_bn": 8},
              "c3": {"layout": "NCHW"}}
    new = apply_op_params(g, params)
    by = {op.name: op for op in new.ops}
    # add(c1 in 4c, x in NCHW): equal sizes, so c1's block (first input) wins.
    assert by["add"].inputs == ["c1", "x@nchw4c"]
    # concat(add 16 ch in 4c, c2 8 ch in 8c): 4c holds more elements.
    assert by["cat"].inputs == ["add", "c2@nchw4c"]
    assert by["c3"].inputs[0] == "pool@nchw" and by["c3"].resolved["layout"] == "NCHW"
    _engine_matches(g, new)


def test_deterministic_and_original_untouched():
    g, params = _chain(oc_bns=(16, 8, 16))
    params["c3"]["ic_bn"] = 16
    before = g.to_json()
    a, b = apply_op_params(g, params), apply_op_params(g, params)
    assert a.to_json() == b.to_json()
    assert g.to_json() == before


def test_nchw_params_only_set_knobs():
    g, _ = _chain()
    new = apply_op_params(g, {"c2": {"layout": "NCHW", "reg_n": 2, "unroll_ker": 1}})
    c2 = {op.name: op for op in new.ops}["c2"]
    assert c2.resolved["layout"] == "NCHW" and c2.resolved["reg_n"] == 2
    assert c2.resolved["unroll_ker"] is True
    assert inserted_transforms(new) == []


@pytest.mark.parametrize("params, words", [
    ({"nope": {"ic_bn": 16, "oc_bn": 16}}, 'no op named "nope"'),
    ({"r1": {"ic_bn": 16, "oc_bn": 16}}, "is a relu"),
    ({"c1": {"ic_bn": 5, "oc_bn": 16}}, "ic_bn=5 is not legal"),
    ({"c1": {"ic_bn": 16, "oc_bn": "16"}}, "oc_bn='16' is not legal"),
    ({"c1": {"ic_bn": 16}}, "needs ic_bn and oc_bn"),
    ({"c1": {"ic_bn": 16, "oc_bn": 16, "tile": 2}}, 'unknown key "tile"'),
    ({"c1": {"layout": "NHWC"}}, "layout must be"),
    ({"c1": {"ic_bn": 16, "oc_bn": 16, "reg_n": 5}}, "reg_n=5 is not legal"),
    ({"c1": [16, 16]}, "must be a dict"),
])
def test_bad_params_are_one_line_usage_errors(params, words):
    g, _ = _chain()
    with pytest.raises(UsageError) as exc:
        apply_op_params(g, params)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_output_copy_is_shared_with_nchw_consumers():
    g, params = _chain()
    doc = g.to_json()
    doc["outputs"] = ["c3", "b2"]
    g = load_model(doc)
    params["c3"] = {"layout": "NCHW"}
    new = apply_op_params(g, params)
    by = {op.name: op for op in new.ops}
    # b2 leaves the graph in NCHW under its own name; c3 reads that copy.
    assert by["b2"].outputs == ["b2@nchw16c"] and by["b2@nchw"].outputs == ["b2"]
    assert by["c3"].inputs[0] == "b2"
    assert [op.name for op in inserted_transforms(new)] == ["x@nchw16c", "b2@nchw"]
    _engine_matches(g, new)
