"""The CONV fusion pass (graph/passes/fuse.py) and the conv2d epilogue it
relies on: fused and unfused graphs give the same outputs in numpy and on
the C engine under every ISA this CPU runs, NCHW and NCHWc; nothing fuses
whose intermediate another op or the user reads."""

from collections import Counter

import numpy as np
import pytest

from hwtune.engine.config import EngineConfig
from hwtune.engine.effective import effective_graph
from hwtune.errors import UsageError
from hwtune.graph import load_model, run_reference
from hwtune.graph.errors import GraphError
from hwtune.graph.passes.fuse import fuse_conv, fused_ops
from hwtune.graph.passes.layout import apply_op_params
from hwtune.engine.instance import NativeEngine
from hwtune.native.isa import isa_index, supported_isas

ISAS = supported_isas()
MODELS = "configs/models"


def _t(name, shape, init="normal", **kw):
    return {"name": name, "shape": list(shape), "init": init, **kw}


def _block(k=12, stride=2, c=5, hw=11, eps=1e-3, extra_outputs=()):
    """x -> conv(stride, K not a multiple of 8) -> bn -> relu -> conv -> bn
    -> add(., skip) -> relu, skip = 1x1 conv (no bias) of x."""
    p = [_t("w1", (k, c, 3, 3), scale=0.3), _t("b1", (k,)),
         _t("w2", (k, k, 3, 3), scale=0.2), _t("ws", (k, c, 1, 1), scale=0.3)]
    for i in (1, 2):
        p += [_t(f"g{i}", (k,), "uniform", low=0.5, high=1.5), _t(f"be{i}", (k,)),
              _t(f"m{i}", (k,), scale=0.2), _t(f"v{i}", (k,), "uniform", low=0.1, high=2.0)]
    ops = [
        {"name": "c1", "op": "conv2d", "inputs": ["x", "w1", "b1"],
         "attrs": {"stride": stride, "padding": 1}},
        {"name": "bn1", "op": "batch_norm", "inputs": ["c1", "g1", "be1", "m1", "v1"],
         "attrs": {"epsilon": eps}},
        {"name": "r1", "op": "relu", "inputs": ["bn1"]},
        {"name": "c2", "op": "conv2d", "inputs": ["r1", "w2"], "attrs": {"padding": 1}},
        {"name": "bn2", "op": "batch_norm", "inputs": ["c2", "g2", "be2", "m2", "v2"],
         "attrs": {"epsilon": eps}},
        {"name": "skip", "op": "conv2d", "inputs": ["x", "ws"], "attrs": {"stride": stride}},
        {"name": "sum", "op": "add", "inputs": ["skip", "bn2"]},
        {"name": "y", "op": "relu", "inputs": ["sum"]},
    ]
    return load_model({"format_version": 1, "name": "block", "seed": 7,
                       "inputs": [_t("x", (2, c, hw, hw))], "params": p, "ops": ops,
                       "outputs": ["y", *extra_outputs]})


def _engine_outputs(graph, isa, threads=2):
    with NativeEngine(graph, threads=threads, isa=isa_index(isa)) as eng:
        eng.run()
        return {k: v.copy() for k, v in eng.outputs().items()}


def _same(a, b, tol=2e-4):
    assert a.keys() == b.keys()
    for name in a:
        scale = max(float(np.abs(a[name]).max()), 1e-6)
        np.testing.assert_allclose(b[name], a[name], rtol=0, atol=tol * scale, err_msg=name)


def _nchwc(graph):
    """Every CONV blocked by the layout pass (oc_bn 4 for K=12: a channel
    tail on every ISA's vectors)."""
    params = {}
    for op in graph.ops:
        if op.op == "conv2d":
            c = graph.shapes[op.inputs[0]][1]
            k = graph.shapes[op.inputs[1]][0]
            params[op.name] = {"layout": "NCHWc", "ic_bn": c if c < 8 else 4,
                               "oc_bn": 4 if k % 4 == 0 else k}
    return params


def test_block_fuses_everything_it_can():
    g = _block()
    f = fuse_conv(g)
    kinds = Counter(op.op for op in f.ops)
    assert kinds["relu"] == 0 and kinds["add"] == 0
    assert sum(op.op == "batch_norm" and op.inputs[0] in ("c1", "c2") for op in f.ops) == 0
    convs = {op.name: op for op in f.ops if op.op == "conv2d"}
    assert convs["c1"].attrs["relu"] is True and convs["c1"].outputs == ["r1"]
    # The add is claimed by the first conv in plan order that feeds it
    # alone; the other operand becomes its residual.
    (fused,) = [c for c in convs.values() if len(c.inputs) == 4]
    other = {"c2": "bn2", "skip": "skip"}
    assert fused.attrs["relu"] is True and fused.outputs == ["y"]
    assert fused.inputs[3] == other["skip" if fused.name == "c2" else "c2"]
    want = {"bn1": "c1", "r1": "c1", "bn2": "c2", "sum": fused.name, "y": fused.name}
    assert fused_ops(f) == want
    # The user's graph is untouched.
    assert Counter(op.op for op in g.ops)["batch_norm"] == 2


@pytest.mark.parametrize("layout", ["NCHW", "NCHWc"])
@pytest.mark.parametrize("isa", ISAS)
def test_fused_block_matches_unfused(isa, layout):
    g = _block()
    ref = run_reference(g, {})
    f = fuse_conv(g)
    _same(ref, run_reference(f, {}), tol=1e-5)
    if layout == "NCHWc":
        g, f = apply_op_params(g, _nchwc(g)), apply_op_params(f, _nchwc(f))
    _same(ref, _engine_outputs(g, isa))
    _same(ref, _engine_outputs(f, isa))


@pytest.mark.parametrize("isa", ISAS)
def test_single_thread_and_stride_one(isa):
    g = _block(k=9, stride=1, c=3, hw=7, eps=0.0 + 1e-5)
    _same(run_reference(g, {}), _engine_outputs(fuse_conv(g), isa, threads=1))


def test_shared_intermediates_do_not_fuse():
    # bn1 also a graph output: c1 folds its BN (c1's own output has one
    # reader) but not the relu; r1 read by the user too: nothing after it.
    g = _block(extra_outputs=("bn1", "c2"))
    f = fuse_conv(g)
    convs = {op.name: op for op in f.ops if op.op == "conv2d"}
    assert not convs["c1"].attrs.get("relu") and convs["c1"].outputs == ["bn1"]
    assert any(op.op == "relu" and op.inputs == ["bn1"] for op in f.ops)
    # c2 is a graph output: its BN stays a batch_norm reading it.
    assert convs["c2"].outputs == ["c2"] and len(convs["c2"].inputs) == 2
    assert any(op.op == "batch_norm" and op.inputs[0] == "c2" for op in f.ops)
    _same(run_reference(g, {}), _engine_outputs(f, ISAS[0]))


def test_conv_feeding_two_ops_does_not_fuse():
    doc = _block().to_json()
    # c1's output also feeds a second relu: neither its BN nor a relu fuse.
    doc["ops"].append({"name": "side", "op": "relu", "inputs": ["c1"]})
    doc["outputs"].append("side")
    g = load_model(doc)
    f = fuse_conv(g)
    c1 = next(op for op in f.ops if op.name == "c1")
    assert c1.outputs == ["c1"] and len(c1.inputs) == 3 and not c1.attrs.get("relu")
    _same(run_reference(g, {}), _engine_outputs(f, ISAS[0]))


def test_nothing_to_fuse_returns_the_graph():
    doc = _block().to_json()
    doc["ops"] = doc["ops"][:1]
    doc["outputs"] = ["c1"]
    g = load_model(doc)
    assert fuse_conv(g) is g


def test_resnet18_keeps_no_fusable_op():
    g = load_model(f"{MODELS}/resnet18.json", {"image": 32, "classes": 10})
    f = effective_graph(g, EngineConfig())
    kinds = Counter(op.op for op in f.ops)
    # Every batch_norm left is a fold op on params (its x is a reshape of a
    # param), every relu and add gone into a CONV epilogue.
    assert kinds["relu"] == 0 and kinds["add"] == 0
    assert all(op.inputs[0].endswith("flat") for op in f.ops if op.op == "batch_norm")
    assert sum(1 for op in f.ops if op.op == "conv2d" and op.attrs.get("relu")) == 17
    assert sum(1 for op in f.ops if op.op == "conv2d" and len(op.inputs) == 4) == 8
    doc = g.to_json()
    doc["outputs"] = doc["outputs"] + ["logits"]
    g = load_model(doc)
    _same(run_reference(g, {}), _engine_outputs(fuse_conv(g), ISAS[-1]))


def test_fused_conv_is_a_model_op_with_errors():
    doc = {"format_version": 1, "name": "m", "inputs": [_t("x", (1, 3, 6, 6))],
           "params": [_t("w", (4, 3, 3, 3)), _t("b", (4,)), _t("r", (1, 4, 4, 4))],
           "ops": [{"name": "y", "op": "conv2d", "inputs": ["x", "w", "b", "r"],
                    "attrs": {"relu": True}}],
           "outputs": ["y"]}
    g = load_model(doc)
    ref = run_reference(g, {})["y"]
    assert (ref >= 0).all() and (ref == 0).any()
    _same({"y": ref}, _engine_outputs(g, ISAS[0]))
    doc["params"][2]["shape"] = [1, 4, 3, 3]
    with pytest.raises(GraphError, match="residual must have the output's shape"):
        load_model(doc)
    doc["params"][2]["shape"] = [1, 4, 4, 4]
    doc["ops"][0]["attrs"]["relu"] = 2
    with pytest.raises(GraphError, match="relu"):
        load_model(doc)


def test_autodiff_refuses_a_fused_conv():
    from hwtune.graph.autodiff.rules import RULES, NoRule
    g = fuse_conv(_block())
    conv = next(op for op in g.ops if op.op == "conv2d" and op.attrs.get("relu"))
    with pytest.raises(NoRule, match="fused epilogue"):
        RULES["conv2d"](None, conv, [None], [True, True, True])


def test_stale_layout_params_still_raise():
    with pytest.raises(UsageError):
        apply_op_params(fuse_conv(_block()), {"c1": {"layout": "NCHWc", "ic_bn": 7}})


@pytest.mark.parametrize("isa", ISAS)
def test_residual_epilogue_on_the_direct_kernel(isa):
    # A kernel 65 wide is past the template's limit: the NCHW-direct kernel
    # runs it, with the same epilogue.
    doc = {"format_version": 1, "name": "m", "inputs": [_t("x", (1, 3, 3, 70))],
           "params": [_t("w", (5, 3, 2, 65), scale=0.2), _t("b", (5,)),
                      _t("r", (1, 5, 2, 6))],
           "ops": [{"name": "y", "op": "conv2d", "inputs": ["x", "w", "b", "r"],
                    "attrs": {"relu": True}}],
           "outputs": ["y"]}
    g = load_model(doc)
    ref = run_reference(g, {})
    assert (ref["y"] == 0).any() and (ref["y"] > 0).any()
    _same(ref, _engine_outputs(g, isa, threads=2))


def test_fused_conv_exports_to_onnx(tmp_path):
    # The fused form is a model.json op: `model export` writes it as ONNX's
    # Conv, Add and Relu, and ONNX Runtime computes the same outputs.
    pytest.importorskip("onnx")
    from test_onnx_files import export_round_trip
    doc = fuse_conv(_block()).to_json()
    assert any(op["op"] == "conv2d" and len(op["inputs"]) == 4 for op in doc["ops"])
    graph, ref, feeds, got, again = export_round_trip(doc, tmp_path)
    _same(ref, {k: got[k] for k in ref})
    _same(ref, again)
