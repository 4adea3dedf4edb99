"""SiLU and HardSwish in the conv2d epilogue (`act`): every conv path (the
NCHW[x]c template on NCHW and blocked tensors, the 1x1 GEMM path, the
direct kernel, Winograd, the depthwise kernel's row and blocked paths in
NCHW and NCHW[x]c, grouped convs, bf16) on every ISA this CPU runs against
the float64 numpy reference and, where the kernel runs the element-wise
op's own code, bit for bit against the conv followed by that op; the
fusion pass taking conv2d [-> add] -> silu / hard_swish (and leaving it
when the intermediate has another reader or is a graph output); export
back to ONNX as separate ops."""

import itertools

import numpy as np
import pytest

from hwtune.engine.ops_harness import run_ops
from hwtune.graph import load_model
from hwtune.graph.errors import GraphError
from hwtune.graph.ops.eltwise import REFERENCES
from hwtune.graph.passes.fuse import fuse_conv, fused_ops
from hwtune.graph.reference import run_reference
from hwtune.native import conv
from hwtune.native.eltwise import eltwise
from hwtune.native.isa import supported_isas

from test_conv import kernel_paths, make, ref_conv, tolerance

ISAS = supported_isas()
ACTS = ("silu", "hard_swish")

# (N, C, H, W, K, R, S, stride, pad): 1x1 on the GEMM path and on the
# template (small images, 1x1 image), 3x3 / 5x5 on the template with an oc
# tail, odd sizes, EfficientNet's stem (3 channels, 3x3 stride 2), and a
# Winograd-eligible 3x3.
CASES = [
    (1, 24, 15, 17, 40, 1, 1, 1, 0),  # NCHW-gemm
    (2, 16, 15, 15, 64, 1, 1, 1, 0),  # NCHW-gemm, batch 2
    (1, 24, 7, 9, 40, 1, 1, 1, 0),    # the template on AVX-512 (small image)
    (2, 16, 6, 6, 64, 1, 1, 1, 0),    # flattened rows on AVX-512
    (1, 72, 1, 1, 48, 1, 1, 1, 0),    # a 1x1 image
    (1, 8, 9, 10, 20, 3, 3, 1, 1),    # template, an oc tail
    (1, 6, 12, 9, 10, 5, 5, 2, 2),    # template, stride 2
    (1, 3, 17, 19, 16, 3, 3, 2, 1),   # the stem: 3 channels, stride 2, odd sizes
    (1, 16, 10, 10, 24, 3, 3, 1, 1),  # Winograd-eligible
]


def _act(y, act):
    """The element-wise op's reference in float64 (the exact value)."""
    return REFERENCES[act].fn(np.asarray(y, np.float64))


def _make(case):
    # Inputs in [-2, 2] so that the outputs cover sigmoid's curve and both
    # of HardSwish's bends (-3, 3).
    return make(case, x_range=2.0, b_range=0.5)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:8])))
def test_every_kernel_path_applies_the_activation(act, isa, case):
    x, w, b, stride, pad = _make(case)
    lin = ref_conv(x, w, b, stride, pad, False)
    want = _act(lin, act)
    if act == "hard_swish":  # both bends and the middle are reached
        assert (lin < -3).any() and (lin > 3).any() and (abs(lin) < 3).any()
    # The activation's slope is at most 1.1 (SiLU) / 1.5 (HardSwish) in
    # magnitude, plus the element-wise kernel's own error (<= 1.6e-7 of
    # max(1, |y|)).
    tol = 1.5 * tolerance(case[1], case[5], case[6]) + 2e-7 * max(1.0, np.abs(want).max())
    for (layout, params), nth in itertools.product(kernel_paths(case, isa), (1, 2, 3)):
        got = conv.conv2d(x, w, b, stride=stride, pad=pad, act=act, layout=layout,
                          params=params, isa=isa, nth=nth)
        err = np.abs(got - want).max()
        assert err <= tol, (layout, params, nth, err, tol)
        if params is None or not params.get("winograd"):
            # Every path but Winograd's tile epilogue runs the element-wise
            # kernel itself on the conv's output: the separate op's floats.
            plain = conv.conv2d(x, w, b, stride=stride, pad=pad, layout=layout,
                                params=params, isa=isa, nth=nth)
            np.testing.assert_array_equal(got, eltwise(act, plain, isa=isa))
    ref = conv.conv2d_ref(x, w, b, stride=stride, pad=pad, act=act)
    assert np.abs(ref - want).max() <= 1e-5 * max(1.0, np.abs(want).max())


def test_act_is_validated_by_the_binding_and_the_kernel():
    x, w, b, stride, pad = _make(CASES[2])
    with pytest.raises(Exception, match="act"):
        conv.conv2d(x, w, b, stride=stride, pad=pad, act="gelu")
    with pytest.raises(Exception, match="act"):
        conv.conv2d(x, w, b, stride=stride, pad=pad, act="silu", relu=True)


def _t(name, shape, init="uniform", **kw):
    kw = kw or {"low": -1, "high": 1}
    return {"name": name, "shape": list(shape), "init": init, **kw}


def _model(x, w, attrs, residual=False, tail=None, extra_outputs=(), w_param=True):
    """conv2d(x, w, b [, r]) with attrs [-> tail op], as a model."""
    oc = w[0]
    probe = load_model({
        "format_version": 1, "name": "probe", "seed": 1, "inputs": [_t("x", x)],
        "params": [_t("w", w)], "outputs": ["y"],
        "ops": [{"name": "y", "op": "conv2d", "inputs": ["x", "w"],
                 "attrs": {k: v for k, v in attrs.items() if k != "act"}}]})
    y_shape = probe.shapes["y"]
    inputs = [_t("x", x, low=-3, high=3)] + ([] if w_param else [_t("w", w)])
    conv_in = ["x", "w", "b"]
    if residual:
        inputs.append(_t("r", y_shape))
        conv_in.append("r")
    ops = [{"name": "conv", "op": "conv2d", "inputs": conv_in,
            "outputs": ["c" if tail else "y"], "attrs": attrs}]
    if tail:
        ops.append({"name": "y", "op": tail, "inputs": ["c"]})
    params = ([_t("w", w)] if w_param else []) + [_t("b", (oc,), low=-0.5, high=0.5)]
    return load_model({"format_version": 1, "name": "act", "seed": 7, "inputs": inputs,
                       "params": params, "ops": ops,
                       "outputs": ["y", *extra_outputs]})


# (x, w, attrs) of every conv2d form EfficientNet-B0 and MobileNetV3 use,
# and the other paths: the 1x1 GEMM path, a 1x1 on the template, 3x3,
# the stem, Winograd, depthwise 3x3 / 5x5 / stride 2 (the blocked path on
# vector ISAs, rows on the portable one), a depthwise multiplier (the row
# path), grouped convs (lane permutes; the dense template per group).
GRAPH_CASES = [
    ((1, 16, 14, 15), (40, 16, 1, 1), {}),
    ((1, 24, 7, 7), (48, 24, 1, 1), {}),
    ((1, 8, 9, 9), (16, 8, 3, 3), {"padding": 1}),
    ((1, 3, 15, 17), (16, 3, 3, 3), {"padding": 1, "stride": 2}),
    ((1, 16, 10, 10), (32, 16, 3, 3), {"padding": 1, "winograd": 2}),
    ((1, 24, 11, 13), (24, 1, 3, 3), {"group": 24, "padding": 1}),
    ((1, 40, 9, 9), (40, 1, 5, 5), {"group": 40, "padding": 2}),
    ((2, 20, 13, 12), (20, 1, 5, 5), {"group": 20, "padding": 2, "stride": 2}),
    ((1, 4, 8, 9), (12, 1, 3, 3), {"group": 4, "padding": 1}),
    ((1, 32, 9, 9), (32, 4, 3, 3), {"group": 8, "padding": 1}),
    ((1, 32, 8, 8), (32, 16, 3, 3), {"group": 2, "padding": 1}),
]


def _gid(case):
    x, w, a = case
    return f"{'x'.join(map(str, x))}-w{'x'.join(map(str, w))}-g{a.get('group', 1)}"


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", GRAPH_CASES, ids=_gid)
def test_engine_conv_with_act_matches_the_reference(act, isa, case):
    x, w, attrs = case
    for residual in (False, True):
        g = _model(x, w, dict(attrs, act=act), residual=residual)
        want = run_reference(g)["y"]
        # The reference is the unfused chain: conv [+ r], then the op.
        unfused = run_reference(_model(x, w, attrs, residual=residual, tail=act))["y"]
        np.testing.assert_allclose(want, unfused, rtol=1e-6, atol=1e-6)
        scale = max(1.0, float(np.abs(want).max()))
        for nth in (1, 2, 3):
            got = run_ops(g, nth=nth, isa=isa)["y"]
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * scale,
                                       err_msg=f"residual={residual} nth={nth}")


@pytest.mark.parametrize("isa", ISAS)
def test_depthwise_with_act_and_weights_as_an_input(isa):
    g = _model((1, 24, 11, 13), (24, 1, 3, 3), {"group": 24, "padding": 1, "act": "silu"},
               w_param=False)
    want = run_reference(g)["y"]
    np.testing.assert_allclose(run_ops(g, nth=2, isa=isa)["y"], want, rtol=0, atol=1e-5)


def _mobile_block(act="silu"):
    """1x1 expand -> act -> depthwise 3x3 -> act -> 1x1 project (+ skip),
    EfficientNet's MBConv without the squeeze-excitation."""
    c, k = 16, 32
    p = [_t("w1", (k, c, 1, 1)), _t("b1", (k,)), _t("wd", (k, 1, 3, 3)), _t("bd", (k,)),
         _t("w2", (c, k, 1, 1))]
    ops = [
        {"name": "c1", "op": "conv2d", "inputs": ["x", "w1", "b1"]},
        {"name": "a1", "op": act, "inputs": ["c1"]},
        {"name": "dw", "op": "conv2d", "inputs": ["a1", "wd", "bd"],
         "attrs": {"group": k, "padding": 1}},
        {"name": "a2", "op": act, "inputs": ["dw"]},
        {"name": "c2", "op": "conv2d", "inputs": ["a2", "w2"]},
        {"name": "y", "op": "add", "inputs": ["c2", "x"]},
    ]
    return load_model({"format_version": 1, "name": "mbconv", "seed": 3,
                       "inputs": [_t("x", (1, c, 9, 9), low=-3, high=3)], "params": p,
                       "ops": ops, "outputs": ["y"]})


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("isa", ISAS)
def test_fuse_pass_takes_the_activation_after_a_conv(act, isa):
    from hwtune.engine.instance import NativeEngine
    from hwtune.native.isa import isa_index
    g = _mobile_block(act)
    fused = fuse_conv(g)
    assert fused_ops(fused) == {"a1": "c1", "a2": "dw", "y": "c2"}
    by_name = {op.name: op for op in fused.ops}
    assert by_name["c1"].resolved["act"] == by_name["dw"].resolved["act"] == act
    assert by_name["c2"].resolved["act"] is None and len(by_name["c2"].inputs) == 4
    assert not any(op.op == act for op in fused.ops)
    want = run_reference(g)["y"]
    np.testing.assert_allclose(run_reference(fused)["y"], want, rtol=1e-5, atol=1e-5)
    with NativeEngine(fused, threads=2, isa=isa_index(isa)) as eng:
        eng.run()
        got = eng.outputs()["y"].copy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("act", ACTS)
def test_fuse_pass_takes_residual_then_activation(act):
    # conv -> add(r) -> act, written out as separate ops
    m = load_model({
        "format_version": 1, "name": "res_act", "seed": 2,
        "inputs": [_t("x", (1, 8, 9, 9), low=-3, high=3), _t("r", (1, 8, 9, 9))],
        "params": [_t("w", (8, 8, 3, 3)), _t("b", (8,))],
        "ops": [{"name": "conv", "op": "conv2d", "inputs": ["x", "w", "b"],
                 "attrs": {"padding": 1}},
                {"name": "sum", "op": "add", "inputs": ["r", "conv"]},
                {"name": "y", "op": act, "inputs": ["sum"]}],
        "outputs": ["y"]})
    fused = fuse_conv(m)
    assert fused_ops(fused) == {"sum": "conv", "y": "conv"}
    (op,) = fused.ops
    assert op.resolved["act"] == act and op.inputs[3] == "r"
    np.testing.assert_allclose(run_ops(fused, nth=2)["y"], run_reference(m)["y"],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("act", ACTS)
def test_fuse_pass_leaves_an_activation_whose_input_is_read_elsewhere(act):
    # The conv's output is a graph output: the act stays its own op.
    g = _model((1, 8, 9, 9), (16, 8, 3, 3), {"padding": 1}, tail=act, extra_outputs=("c",))
    assert fuse_conv(g) is g
    # The conv's output has a second reader.
    m = _mobile_block(act)
    ops = [dict(name=o.name, op=o.op, inputs=list(o.inputs), outputs=list(o.outputs),
                attrs=dict(o.attrs)) for o in m.ops]
    ops.append({"name": "z", "op": "add", "inputs": ["c1", "c1"], "outputs": ["z"]})
    m2 = load_model({"format_version": 1, "name": "two_readers", "seed": 3,
                     "inputs": [_t("x", (1, 16, 9, 9))],
                     "params": [{"name": t.name, "shape": list(t.shape),
                                 "init": "uniform", "low": -1, "high": 1} for t in m.params],
                     "ops": ops, "outputs": ["y", "z"]})
    fused = fuse_conv(m2)
    assert "a1" not in fused_ops(fused) and fused_ops(fused)["a2"] == "dw"
    assert any(op.name == "a1" and op.op == act for op in fused.ops)
    # A conv that already ends in a ReLU takes no activation after it.
    r = _model((1, 8, 9, 9), (16, 8, 3, 3), {"padding": 1, "relu": True}, tail=act)
    assert fuse_conv(r).ops[-1].op == act


def test_act_and_relu_are_exclusive():
    with pytest.raises(GraphError, match="act"):
        _model((1, 8, 9, 9), (16, 8, 3, 3), {"padding": 1, "relu": True, "act": "silu"})
    with pytest.raises(GraphError, match="act"):
        _model((1, 8, 9, 9), (16, 8, 3, 3), {"padding": 1, "act": "gelu"})


@pytest.mark.parametrize("act", ACTS)
def test_bf16_conv_applies_the_activation(act):
    g = _model((1, 8, 9, 9), (16, 8, 3, 3), {"padding": 1, "act": act, "precision": "bf16"},
               residual=True)
    want = run_reference(g)["y"]
    got = run_ops(g, nth=2)["y"]
    # bf16 inputs: the reference rounds x and w the same way; fp32 sums differ
    # by their roundings only (as test_conv_bf16's bound).
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("act", ACTS)
def test_layout_pass_blocked_convs_with_act(act):
    """Dense convs in NCHW[x]c around a depthwise one (what the layout pass
    picks between blocked convs), each with the activation fused."""
    from hwtune.graph.passes.layout import apply_op_params
    fused = fuse_conv(_mobile_block(act))
    new = apply_op_params(fused, {"c1": {"layout": "NCHWc", "ic_bn": 16, "oc_bn": 16},
                                  "c2": {"layout": "NCHWc", "ic_bn": 16, "oc_bn": 8}})
    dw = next(op for op in new.ops if op.name == "dw")
    assert dw.resolved["layout"] == "NCHWc" and dw.resolved["act"] == act
    want = run_reference(_mobile_block(act))["y"]
    np.testing.assert_allclose(run_reference(new)["y"], want, rtol=1e-5, atol=1e-5)
    for isa in ISAS:
        np.testing.assert_allclose(run_ops(new, nth=2, isa=isa)["y"], want, rtol=1e-4,
                                   atol=1e-4)


def test_export_writes_the_activation_as_its_onnx_ops(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    import onnx
    from hwtune.onnx.export import export_onnx
    for act, kinds in (("silu", {"Sigmoid", "Mul"}), ("hard_swish", {"HardSwish"})):
        fused = fuse_conv(_mobile_block(act))
        path = tmp_path / f"{act}.onnx"
        export_onnx(fused, path)
        assert kinds <= {n.op_type for n in onnx.load(str(path)).graph.node}
        x = np.random.default_rng(2).uniform(-3, 3, (1, 16, 9, 9)).astype(np.float32)
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        got = sess.run(None, {"x": x})[0]
        want = run_reference(fused, inputs={"x": x})["y"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_torch_peer_graph_applies_the_activation():
    pytest.importorskip("torch")
    from hwtune.compare.torch_graph import TorchGraph
    from hwtune.graph.reference import init_inputs, init_params
    for act in ACTS:
        fused = fuse_conv(_mobile_block(act))
        tg = TorchGraph(fused, init_params(fused), init_inputs(fused), threads=1)
        tg.run()
        want = run_reference(fused)["y"]
        np.testing.assert_allclose(tg.outputs()["y"], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("act", ACTS)
def test_int8_rewrite_keeps_the_activation_as_its_own_op(act):
    """qconv2d's epilogue has no SiLU / HardSwish: an int8 conv with act is
    followed by the op (after its residual add)."""
    from hwtune.graph.passes.op_precision import apply_precision
    from hwtune.precision import calibrate as cal
    fused = fuse_conv(_mobile_block(act))
    names = ["c1", "c2"]  # act, and residual without act
    xs = {op.name: op.inputs[0] for op in fused.ops}
    ref = cal.run_samples(fused, cal.seeded_samples(fused, 2), 1, extra={xs[n] for n in names})
    acts = cal.activation_params(ref, {xs[n] for n in names})
    q = apply_precision(fused, {n: {"precision": "int8", "a_scale": acts[xs[n]][0],
                                    "a_zero": acts[xs[n]][1]} for n in names})
    kinds = {op.name: op for op in q.ops}
    assert kinds["c1"].op == "qconv2d" and kinds[f"c1@{act}"].op == act
    assert kinds[f"c1@{act}"].outputs == ["a1"]
    assert kinds["c2@res"].op == "add" and f"c2@{act}" not in kinds
    want = run_reference(fused)["y"]
    got = run_reference(q)["y"]
    err = np.abs(got - want).max() / np.abs(want).max()
    assert 1e-5 < err < 5e-2, err
    sample = cal.seeded_samples(q, 1)
    np.testing.assert_allclose(cal.run_samples(q, sample, 2)[0]["y"],
                               run_reference(q, inputs=sample[0])["y"], rtol=1e-4, atol=1e-4)
