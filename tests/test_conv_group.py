"""Grouped and depthwise conv2d (`group` > 1): the numpy reference against
a per-group float64 loop, and the engine (the depthwise kernel, or the dense
template once per group) against the reference, on every ISA variant this
CPU supports at 1, 2 and 3 threads, with weights as params (packed once)
and as inputs (read or packed per run)."""

import numpy as np
import pytest

from hwtune.engine.ops_harness import run_ops
from hwtune.graph import load_model
from hwtune.graph.errors import GraphError
from hwtune.graph.ops.conv import conv2d_nchw
from hwtune.graph.reference import run_reference
from hwtune.native.isa import supported_isas


def _model(x, w, attrs, bias=True, residual=None, w_param=True):
    c, oc = x[1], w[0]
    tensors = [("x", x), ("w", w)] + ([("b", (oc,))] if bias else [])
    if residual is not None:
        tensors.append(("r", residual))
    params = {"w", "b"} if w_param else {"b"}
    return load_model({
        "format_version": 1, "name": "grouped", "seed": 5,
        "inputs": [{"name": n, "shape": list(s)} for n, s in tensors if n not in params],
        "params": [{"name": n, "shape": list(s)} for n, s in tensors if n in params],
        "ops": [{"name": "conv", "op": "conv2d", "inputs": [n for n, _ in tensors],
                 "outputs": ["y"], "attrs": attrs}],
        "outputs": ["y"]})


# (x, w, attrs): depthwise (group = C) at 3x3 / 5x5 / 7x7, stride 1 and 2,
# dilation, asymmetric padding, odd sizes, a multiplier, more than 64
# groups; grouped convs of 2..8-channel groups (ResNeXt, RegNet widths),
# a 1x1 grouped (ShuffleNet v1's), and a 1-channel-per-group conv with 2
# outputs per group that is also depthwise.
CASES = [
    ((1, 5, 9, 11), (5, 1, 3, 3), {"group": 5, "padding": 1}),
    ((2, 7, 13, 17), (7, 1, 3, 3), {"group": 7, "padding": 1, "stride": 2}),
    ((1, 96, 14, 14), (96, 1, 3, 3), {"group": 96, "padding": 1}),
    ((1, 72, 15, 15), (72, 1, 5, 5), {"group": 72, "padding": 2, "stride": 2}),
    ((1, 20, 10, 37), (20, 1, 7, 7), {"group": 20, "padding": 3}),
    ((1, 6, 12, 12), (6, 1, 3, 3), {"group": 6, "padding": [1, 2], "padding_end": [0, 1],
                                    "dilation": [2, 3]}),
    ((1, 4, 8, 9), (12, 1, 3, 3), {"group": 4, "padding": 1}),           # multiplier 3
    ((1, 3, 11, 11), (6, 1, 2, 4), {"group": 3, "stride": [2, 3], "padding": [0, 1]}),
    ((1, 64, 17, 19), (64, 8, 3, 3), {"group": 8, "padding": 1}),        # 8 groups of 8
    ((2, 32, 9, 9), (64, 4, 3, 3), {"group": 8, "padding": 1, "stride": 2}),
    ((1, 24, 7, 7), (48, 3, 1, 1), {"group": 8}),                        # 1x1 grouped
    ((1, 130, 6, 6), (130, 2, 3, 3), {"group": 65, "padding": 1}),       # 65 groups of 2
    # Groups of 2, 4 and 8 channels in and out run blocked with lane
    # permutes on vector ISAs (hwt_gconv_plan_make; groups of 8 on AVX2 only
    # at stride 2, "8 groups of 8" above takes the template there): stride
    # 2, dilation, asymmetric padding, a channel tail, 5x5; 16-channel
    # groups run the dense template per group.
    ((1, 32, 11, 13), (32, 4, 3, 3), {"group": 8, "padding": 1, "stride": 2}),
    ((2, 24, 9, 10), (24, 4, 3, 3), {"group": 6, "dilation": 2, "padding": [2, 1],
                                     "padding_end": [1, 2]}),
    ((1, 16, 8, 8), (16, 2, 5, 5), {"group": 8, "padding": 2}),
    ((1, 32, 8, 8), (32, 16, 3, 3), {"group": 2, "padding": 1}),
]


def _id(case):
    x, w, a = case
    return f"{'x'.join(map(str, x))}-w{'x'.join(map(str, w))}-g{a['group']}"


def _inputs(g, seed=3):
    rng = np.random.default_rng(seed)
    return {t.name: rng.uniform(-2, 2, g.shapes[t.name]).astype(np.float32) for t in g.inputs}


def _loop_reference(x, w, b, attrs):
    """One float64 dense conv per group: the definition of `group`."""
    group = attrs["group"]
    cg, kg = x.shape[1] // group, w.shape[0] // group
    geo = dict(stride=_pair(attrs.get("stride", 1)), padding=_pair(attrs.get("padding", 0)),
               dilation=_pair(attrs.get("dilation", 1)),
               padding_end=attrs.get("padding_end"))
    parts = [conv2d_nchw(x[:, gi * cg:(gi + 1) * cg].astype(np.float64),
                         w[gi * kg:(gi + 1) * kg], b[gi * kg:(gi + 1) * kg], **geo)
             for gi in range(group)]
    return np.concatenate(parts, axis=1)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def reference_matches_loops(model, loop_reference, case):
    """The numpy reference of the one-conv graph model(x_shape, w_shape,
    attrs) (x, w, b -> y) against loop_reference(x, w, b, attrs), float64
    loops that spell the definition out, on seeded inputs."""
    x_shape, w_shape, attrs = case
    g = model(x_shape, w_shape, attrs)
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, x_shape).astype(np.float32)
    w = rng.uniform(-1, 1, w_shape).astype(np.float32)
    b = rng.uniform(-1, 1, (w_shape[0],)).astype(np.float32)
    got = run_reference(g, inputs={"x": x}, params={"w": w, "b": b})["y"]
    want = loop_reference(x, w, b, attrs)
    assert got.shape == want.shape == tuple(g.shapes["y"])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_reference_is_one_conv_per_group(case):
    reference_matches_loops(_model, _loop_reference, case)


# Float accumulation of C/group*KH*KW (<= 49 here) products of |x| <= 2
# against the float64 reference, as tests/test_ops_families.py's CONV.
RTOL, ATOL = 1e-5, 1e-4


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_engine_matches_reference(case, isa):
    x_shape, w_shape, attrs = case
    for w_param in (True, False):
        g = _model(x_shape, w_shape, attrs, w_param=w_param)
        inputs = _inputs(g)
        want = run_reference(g, inputs=inputs)["y"]
        for nth in (1, 2, 3):
            got = run_ops(g, nth=nth, isa=isa, inputs=inputs)["y"]
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL,
                                       err_msg=f"nth={nth} w_param={w_param}")


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("case", [CASES[1], CASES[6], CASES[9], CASES[12], CASES[13]],
                         ids=_id)
def test_epilogue_residual_and_relu(case, isa):
    """Residual add and ReLU in the kernel's epilogue (what the fuse pass
    folds into a grouped conv), and a bias-free ReLU."""
    x_shape, w_shape, attrs = case
    y_shape = _model(x_shape, w_shape, attrs).shapes["y"]
    for bias in (True, False):
        g = _model(x_shape, w_shape, dict(attrs, relu=True), bias=bias,
                   residual=y_shape if bias else None)
        inputs = _inputs(g, seed=9)
        want = run_reference(g, inputs=inputs)["y"]
        assert (want == 0).any() and (want > 0).any()
        for nth in (1, 3):
            got = run_ops(g, nth=nth, isa=isa, inputs=inputs)["y"]
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("x, w, attrs, what", [
    ((1, 6, 8, 8), (6, 1, 3, 3), {"group": 4}, "group 4 must divide"),
    ((1, 6, 8, 8), (6, 2, 3, 3), {"group": 6}, "C/group=1"),
    ((1, 6, 8, 8), (6, 1, 3, 3), {"group": 6, "reg_n": 4}, "takes no template knobs"),
    ((1, 2, 8, 8, 4), (8, 2, 3, 3), {"group": 4, "layout": "NCHWc"}, "one filter per"),
    ((1, 2, 8, 8, 4), (16, 1, 3, 3), {"group": 8, "layout": "NCHWc"}, "one filter per"),
])
def test_bad_groups_are_one_clear_error(x, w, attrs, what):
    with pytest.raises(GraphError, match=what):
        _model(x, w, attrs)


def _t(name, shape, init="normal", **kw):
    return {"name": name, "shape": list(shape), "init": init, **kw}


def _mobile_block(c=16, hw=9):
    """x -> dense 1x1 (c -> 2c) -> relu -> depthwise 3x3 -> batch_norm ->
    add(., skip) -> relu -> dense 1x1 (2c -> c), skip a second input:
    MobileNet's inverted residual with ResNet's epilogue on the depthwise
    conv."""
    k = 2 * c
    p = [_t("w1", (k, c, 1, 1), scale=0.3), _t("wd", (k, 1, 3, 3), scale=0.3),
         _t("bd", (k,)), _t("w3", (c, k, 1, 1), scale=0.3),
         _t("g", (k,), "uniform", low=0.5, high=1.5), _t("be", (k,)), _t("m", (k,), scale=0.2),
         _t("v", (k,), "uniform", low=0.1, high=2.0)]
    ops = [
        {"name": "c1", "op": "conv2d", "inputs": ["x", "w1"]},
        {"name": "r1", "op": "relu", "inputs": ["c1"]},
        {"name": "dw", "op": "conv2d", "inputs": ["r1", "wd", "bd"],
         "attrs": {"group": k, "padding": 1}},
        {"name": "bn", "op": "batch_norm", "inputs": ["dw", "g", "be", "m", "v"]},
        {"name": "sum", "op": "add", "inputs": ["bn", "skip"]},
        {"name": "r2", "op": "relu", "inputs": ["sum"]},
        {"name": "y", "op": "conv2d", "inputs": ["r2", "w3"]},
    ]
    return load_model({"format_version": 1, "name": "mobile", "seed": 3,
                       "inputs": [_t("x", (1, c, hw, hw)), _t("skip", (1, k, hw, hw))],
                       "params": p, "ops": ops,
                       "outputs": ["y"]})


def _engine(graph, isa, threads=2):
    from hwtune.engine.instance import NativeEngine
    from hwtune.native.isa import isa_index
    with NativeEngine(graph, threads=threads, isa=isa_index(isa)) as eng:
        eng.run()
        return {k: v.copy() for k, v in eng.outputs().items()}


@pytest.mark.parametrize("isa", supported_isas())
def test_fuse_pass_folds_bn_add_relu_into_a_depthwise_conv(isa):
    from hwtune.graph.passes.fuse import fuse_conv, fused_ops
    g = _mobile_block()
    fused = fuse_conv(g)
    assert fused_ops(fused)["bn"] == fused_ops(fused)["sum"] == fused_ops(fused)["r2"] == "dw"
    dw = next(op for op in fused.ops if op.name == "dw")
    assert dw.resolved["group"] == 32 and dw.resolved["relu"] and len(dw.inputs) == 4
    want = run_reference(g)["y"]
    np.testing.assert_allclose(run_reference(fused)["y"], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(_engine(fused, isa)["y"], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("block", [16, 8])
def test_layout_pass_runs_a_depthwise_conv_in_its_input_block(isa, block):
    """Dense convs in NCHW[block]c around a depthwise one: the depthwise
    conv runs in the block its input has (weights as given), so no
    transform sits between the convs; op_params for it are a one-line usage
    error (it has no template knobs); the result matches, and to_plain
    gives the plain graph back."""
    from hwtune.errors import UsageError
    from hwtune.graph.passes.layout import apply_op_params, inserted_transforms
    from hwtune.graph.passes.plain import to_plain
    g = _mobile_block()
    params = {"c1": {"layout": "NCHWc", "ic_bn": 16, "oc_bn": block},
              "y": {"layout": "NCHWc", "ic_bn": block, "oc_bn": 16}}
    new = apply_op_params(g, params)
    dw = next(op for op in new.ops if op.name == "dw")
    assert dw.resolved["layout"] == "NCHWc" and new.shapes[dw.inputs[0]][4] == block
    assert new.shapes[dw.inputs[1]] == (32, 1, 3, 3)
    assert [op.name for op in inserted_transforms(new)] == ["x@nchw16c", "skip@nchw%dc" % block,
                                                           "y@nchw"]
    want = run_reference(g)["y"]
    np.testing.assert_allclose(run_reference(new)["y"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_engine(new, isa)["y"], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(run_reference(to_plain(new))["y"], want, rtol=1e-5, atol=1e-5)
    with pytest.raises(UsageError, match="grouped conv2d"):
        apply_op_params(g, {"dw": {"layout": "NCHWc", "ic_bn": 16, "oc_bn": 16}})


def _blocked_dw(c, hw, block, attrs, residual=False):
    x = (1, c // block, hw, hw, block)
    probe = _model((1, c, hw, hw), (c, 1, 3, 3), attrs)
    oh, ow = probe.shapes["y"][2:]
    tensors = [("x", x), ("w", (c, 1, 3, 3)), ("b", (c,))]
    if residual:
        tensors.append(("r", (1, c // block, oh, ow, block)))
    return load_model({
        "format_version": 1, "name": "dw_nchwc", "seed": 5,
        "inputs": [{"name": n, "shape": list(s)} for n, s in tensors if n in ("x", "r")],
        "params": [{"name": n, "shape": list(s)} for n, s in tensors if n in ("w", "b")],
        "ops": [{"name": "conv", "op": "conv2d", "inputs": [n for n, _ in tensors],
                 "outputs": ["y"], "attrs": dict(attrs, layout="NCHWc")}],
        "outputs": ["y"]})


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("c, hw, block, attrs, residual", [
    (32, 9, 16, {"group": 32, "padding": 1}, False),
    (48, 11, 8, {"group": 48, "padding": 1, "stride": 2}, True),
    (64, 7, 32, {"group": 64, "padding": 1, "relu": True, "relu_max": 1.0}, True),
    (12, 8, 4, {"group": 12, "padding": [1, 0], "padding_end": [0, 1], "dilation": 2}, False),
])
def test_nchwc_depthwise_matches_reference(isa, c, hw, block, attrs, residual):
    g = _blocked_dw(c, hw, block, attrs, residual)
    inputs = _inputs(g, seed=6)
    want = run_reference(g, inputs=inputs)["y"]
    for nth in (1, 3):
        got = run_ops(g, nth=nth, isa=isa, inputs=inputs)["y"]
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_conv_search_skips_grouped_convs():
    from hwtune.tuners.conv_local import tuned_op
    from hwtune.tuners.pipeline import conv_ops
    g = _mobile_block()
    assert conv_ops(g) == ["c1", "y"]
    assert [op.name for op in g.ops if tuned_op(g, op)] == ["c1", "y"]


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[6]], ids=_id)
def test_relu6_clamp_in_the_depthwise_epilogue(case, isa):
    """relu_max (ReLU6) on the blocked path and on the row path (multiplier
    3), with and without a residual; outputs on both sides of the clamp."""
    x_shape, w_shape, attrs = case
    y_shape = _model(x_shape, w_shape, attrs).shapes["y"]
    for residual in (None, y_shape):
        g = _model(x_shape, w_shape, dict(attrs, relu=True, relu_max=1.5), residual=residual)
        inputs = _inputs(g, seed=4)
        want = run_reference(g, inputs=inputs)["y"]
        assert (want == 0).any() and (want == np.float32(1.5)).any() and (
            (want > 0) & (want < 1.5)).any()
        for nth in (1, 2):
            got = run_ops(g, nth=nth, isa=isa, inputs=inputs)["y"]
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


# A dense conv (group 1) clamps too since its epilogue does
# (tests/test_conv_relu6.py); other grouped convs do not.
@pytest.mark.parametrize("attrs, what", [
    ({"group": 2, "relu": True, "relu_max": 6.0}, "relu_max"),
    ({"group": 8, "relu_max": 6.0}, "needs relu"),
    ({"group": 8, "relu": True, "relu_max": 0.0}, "positive"),
])
def test_relu_max_only_on_dense_or_depthwise_convs(attrs, what):
    w = (8, 8 // attrs["group"], 3, 3)
    with pytest.raises(GraphError, match=what):
        _model((1, 8, 6, 6), w, attrs)


def _relu6_block(dw_group=32, lo=0.0, hi=6.0):
    c, k = 16, 32
    p = [_t("w1", (k, c, 1, 1), scale=0.5), _t("wd", (k, k // dw_group, 3, 3), scale=0.8)]
    ops = [
        {"name": "c1", "op": "conv2d", "inputs": ["x", "w1"]},
        {"name": "dw", "op": "conv2d", "inputs": ["c1", "wd"],
         "attrs": {"group": dw_group, "padding": 1}},
        {"name": "y", "op": "clip", "inputs": ["dw"], "attrs": {"min": lo, "max": hi}},
    ]
    return load_model({"format_version": 1, "name": "relu6", "seed": 3,
                       "inputs": [_t("x", (1, c, 7, 7), scale=3.0)], "params": p, "ops": ops,
                       "outputs": ["y"]})


@pytest.mark.parametrize("isa", supported_isas())
def test_fuse_pass_folds_relu6_into_a_depthwise_conv(isa):
    from hwtune.graph.passes.fuse import fuse_conv, fused_ops
    g = _relu6_block(hi=1.0)
    fused = fuse_conv(g)
    assert fused_ops(fused) == {"y": "dw"}
    dw = next(op for op in fused.ops if op.name == "dw")
    assert dw.resolved["relu"] and dw.resolved["relu_max"] == 1.0
    want = run_reference(g)["y"]
    assert (want == 1.0).any() and (want == 0).any()
    np.testing.assert_allclose(_engine(fused, isa)["y"], want, rtol=1e-4, atol=1e-4)
    # Not ReLU6 (a negative floor), or grouped but not depthwise: left alone.
    assert fuse_conv(_relu6_block(lo=-1.0)).ops[-1].op == "clip"
    assert fuse_conv(_relu6_block(dw_group=8)).ops[-1].op == "clip"


def test_export_writes_relu6_as_clip(tmp_path):
    """A fused depthwise conv exports as Conv -> Clip(0, relu_max) and runs
    the same in ONNX Runtime."""
    ort = pytest.importorskip("onnxruntime")
    from hwtune.graph.passes.fuse import fuse_conv
    from hwtune.onnx.export import export_onnx
    fused = fuse_conv(_relu6_block(hi=1.0))
    path = tmp_path / "m.onnx"
    export_onnx(fused, path)
    x = np.random.default_rng(2).standard_normal((1, 16, 7, 7)).astype(np.float32) * 3
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert "Clip" in [n.op_type for n in __import__("onnx").load(str(path)).graph.node]
    got = sess.run(None, {"x": x})[0]
    want = run_reference(fused, inputs={"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
