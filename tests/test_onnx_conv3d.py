"""3-D convolution from ONNX (torchvision's video classifiers): Conv on
NCDHW and GlobalAveragePool on 5-D import as conv3d / a 2-D global pool;
the imported graph's reference, the engine and the PyTorch peer match ONNX
Runtime within 1e-4 of the output's scale, `model export` writes conv3d
back as a Conv ORT runs, a grouped Conv on NCDHW (MViT-V2's depthwise
pooling convs) imports as a grouped conv2d over stacked frames, and a
group count that does not fit the channels is one error line.
r3d_18 and r2plus1d_18 (benchmarks/heldout_models.py, [1, 3, 4, 32, 32]
clips, seeded weights) and a two-block MViT-V2 (dynamo export) import and
match end to end."""

import os
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from hwtune.graph import load_model, run_reference  # noqa: E402

from conftest import invoke, one_line_error  # noqa: E402
from onnx_models import fin, save  # noqa: E402 (tests/ is on sys.path)

TOL = 1e-4


pytestmark = pytest.mark.usefixtures("scratch_cache")


def _forms(path):
    """Conv 3x5x5 stride (1, 2, 2) with bias; asymmetric pads, dilation, no
    bias; auto_pad SAME_UPPER with stride 2 in time; 5-D BatchNormalization,
    Relu and a residual Add; GlobalAveragePool on 5-D, Flatten, Gemm."""
    rng = np.random.default_rng(4)
    inits = {
        "w1": rng.standard_normal((8, 3, 3, 5, 5)).astype(np.float32) * 0.2,
        "b1": rng.standard_normal(8).astype(np.float32),
        "w2": rng.standard_normal((8, 8, 2, 3, 3)).astype(np.float32) * 0.1,
        "w3": rng.standard_normal((6, 8, 3, 3, 1)).astype(np.float32) * 0.1,
        "sc": rng.uniform(0.5, 1.5, 8).astype(np.float32),
        "bi": rng.standard_normal(8).astype(np.float32),
        "mu": rng.standard_normal(8).astype(np.float32) * 0.1,
        "va": rng.uniform(0.5, 2, 8).astype(np.float32),
        "fw": rng.standard_normal((4, 6)).astype(np.float32),
        "fb": rng.standard_normal(4).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="c1", kernel_shape=[3, 5, 5],
                         strides=[1, 2, 2], pads=[1, 2, 2, 1, 2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"], name="r1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="c2", pads=[1, 1, 0, 1, 3, 2],
                         dilations=[2, 2, 1]),
        helper.make_node("BatchNormalization", ["c2", "sc", "bi", "mu", "va"], ["n2"],
                         name="bn", epsilon=1e-5),
        helper.make_node("Add", ["n2", "r1"], ["a2"], name="add"),
        helper.make_node("Relu", ["a2"], ["r2"], name="r2"),
        helper.make_node("Conv", ["r2", "w3"], ["c3"], name="c3", auto_pad="SAME_UPPER",
                         strides=[2, 1, 2]),
        helper.make_node("GlobalAveragePool", ["c3"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flat", axis=1),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1),
    ]
    return save(nodes, [fin("x", [2, 3, 5, 11, 9])], [fin("y", [2, 4])], inits, path)


def test_conv3d_forms_match_onnxruntime(tmp_path):
    path = _forms(str(tmp_path / "forms.onnx"))
    res = invoke("import", path, "-o", tmp_path / "m.json")
    assert res.exit_code == 0, res.output
    g = load_model(str(tmp_path / "m.json"))
    assert sum(op.op == "conv3d" for op in g.ops) == 3
    x = np.random.default_rng(2).standard_normal((2, 3, 5, 11, 9)).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    scale = float(np.abs(want).max())
    ref = run_reference(g, {"x": x})["y"]
    assert np.abs(ref - want).max() <= TOL * scale
    from hwtune.engine.instance import NativeEngine
    with NativeEngine(g, threads=2) as eng:
        eng.set_input("x", x)
        eng.run()
        got = eng.outputs()["y"]
    assert np.abs(got - want).max() <= TOL * scale
    pytest.importorskip("torch")
    from hwtune.compare.torch_graph import TorchGraph
    from hwtune.graph.reference import init_params
    tg = TorchGraph(g, init_params(g), {"x": x}, threads=1)
    tg.run()
    assert np.abs(tg.outputs()["y"] - want).max() <= TOL * scale


def test_conv3d_exports_back_as_a_conv(tmp_path):
    doc = {"format_version": 1, "name": "c3", "seed": 3,
           "inputs": [{"name": "x", "shape": [1, 3, 4, 7, 6]},
                      {"name": "r", "shape": [1, 5, 2, 7, 3]}],
           "params": [{"name": "w", "shape": [5, 3, 2, 3, 3]}, {"name": "b", "shape": [5]}],
           "ops": [{"name": "conv", "op": "conv3d", "inputs": ["x", "w", "b", "r"],
                    "outputs": ["y"], "attrs": {"stride": [2, 1, 2], "padding": [1, 0, 1],
                                                "padding_end": [0, 2, 1], "relu": True}}],
           "outputs": ["y"]}
    src, out = tmp_path / "c3.json", tmp_path / "c3.onnx"
    import json
    src.write_text(json.dumps(doc))
    res = invoke("model", "export", src, "-o", out)
    assert res.exit_code == 0, res.output
    from hwtune.graph.reference import init_inputs
    from hwtune.sources import load_any
    graph = load_any(str(src))[0]
    ref = run_reference(graph)["y"]
    feeds = {k: np.asarray(v, np.float32) for k, v in init_inputs(graph).items()}
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert (ref == 0).any() and (ref > 0).any()
    assert np.abs(got - ref).max() <= TOL * np.abs(ref).max()
    again = load_any(str(out))[0]
    assert [op.op for op in again.ops] == ["conv3d", "add", "relu"]
    np.testing.assert_allclose(run_reference(again, feeds)["y"], ref, rtol=1e-6, atol=1e-6)


# (C, OC, group, kernel, strides, pads, dilations, bias, input D x H x W)
GROUPED = [
    (8, 8, 8, [3, 3, 3], [1, 2, 2], [1, 1, 1, 1, 1, 1], [1, 1, 1], False, (4, 9, 10)),  # MViT-V2
    (8, 8, 8, [3, 3, 3], [1, 4, 4], [1, 1, 1, 1, 1, 1], [1, 1, 1], False, (4, 9, 9)),
    (4, 6, 2, [3, 3, 2], [2, 1, 1], [1, 0, 1, 2, 1, 0], [2, 1, 1], True, (6, 5, 7)),
    (3, 6, 3, [1, 3, 3], [1, 1, 1], [0, 1, 1, 0, 1, 1], [1, 1, 1], True, (3, 6, 6)),  # KD 1
    (6, 4, 2, [3, 2, 2], [1, 1, 1], [0, 0, 0, 0, 0, 0], [1, 1, 1], True, (3, 5, 5)),  # OD 1
]


@pytest.mark.parametrize("c, oc, group, kernel, strides, pads, dil, bias, dhw", GROUPED)
def test_grouped_conv3d_matches_onnxruntime(c, oc, group, kernel, strides, pads, dil, bias, dhw,
                                            tmp_path):
    """Depthwise (MViT-V2's pooling convs: 3x3x3, stride 1x2x2 or 1x4x4,
    no bias), grouped with dilation in time, asymmetric pads and a stride
    in time, a channel multiplier with a 1-frame kernel, one output frame:
    a grouped conv2d over stacked frames, matching ONNX Runtime."""
    from onnx_models import import_and_compare, op_types
    rng = np.random.default_rng(7)
    inits = {"w": rng.standard_normal([oc, c // group] + kernel).astype(np.float32)}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rng.standard_normal(oc).astype(np.float32)
        ins.append("b")
    x = rng.standard_normal((2, c) + dhw).astype(np.float32)
    out = [(dhw[i] + pads[i] + pads[i + 3] - dil[i] * (kernel[i] - 1) - 1) // strides[i] + 1
           for i in range(3)]
    node = helper.make_node("Conv", ins, ["y"], name="gconv", group=group, kernel_shape=kernel,
                            strides=strides, pads=pads, dilations=dil)
    path = save([node], [fin("x", list(x.shape))], [fin("y", [2, oc] + out)], inits,
                str(tmp_path / "g.onnx"))
    g = import_and_compare(path, tmp_path, {"x": x})
    assert "conv2d" in op_types(g) and "conv3d" not in op_types(g)


def test_grouped_conv3d_from_pytorch_matches_onnxruntime(tmp_path):
    torch = pytest.importorskip("torch")
    from onnx_models import export, import_and_compare
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv3d(4, 8, 3, padding=1, groups=4),
                              torch.nn.ReLU(),
                              torch.nn.Conv3d(8, 8, (3, 3, 3), stride=(1, 2, 2), padding=1,
                                              groups=8, bias=False),
                              torch.nn.Conv3d(8, 4, (1, 3, 3), groups=2))
    x = torch.randn(1, 4, 5, 12, 10)
    path = export(net.eval(), x, str(tmp_path / "g3.onnx"))
    import_and_compare(path, tmp_path, {"x": x.numpy()})


def test_a_small_mvit_v2_from_torchvision_matches_onnxruntime(tmp_path):
    """torchvision's MViT-V2 code (relative positions, residual pooling,
    depthwise 3x3x3 pooling convs with strides 1x2x2) at two blocks of 16
    and 32 channels on a 4x32x32 clip, exported by the dynamo exporter (the
    TorchScript one writes its pooling as Loop / If)."""
    torch = pytest.importorskip("torch")
    from onnx_models import export, exporters, import_and_compare
    if "dynamo" not in exporters():
        pytest.skip("onnxscript (torch's dynamo exporter) is not installed")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    import zoo_models as Z
    try:
        Z.torchvision_models()
    except ImportError:
        pytest.skip("torchvision is not installed")
    from torchvision.models.video.mvit import MSBlockConfig, MViT
    torch.manual_seed(0)
    blocks = [MSBlockConfig(num_heads=1, input_channels=16, output_channels=16,
                            kernel_q=[3, 3, 3], kernel_kv=[3, 3, 3], stride_q=[1, 1, 1],
                            stride_kv=[1, 2, 2]),
              MSBlockConfig(num_heads=2, input_channels=16, output_channels=32,
                            kernel_q=[3, 3, 3], kernel_kv=[3, 3, 3], stride_q=[1, 2, 2],
                            stride_kv=[1, 1, 1])]
    net = MViT(spatial_size=(32, 32), temporal_size=4, block_setting=blocks, residual_pool=True,
               residual_with_cls_embed=False, rel_pos_embed=True, proj_after_attn=True,
               num_classes=10, stochastic_depth_prob=0.0)
    x = torch.randn(1, 3, 4, 32, 32)
    path = export(Z._liven(net).eval(), x, str(tmp_path / "mvit.onnx"), exporter="dynamo")
    import_and_compare(path, tmp_path, {"x": x.numpy()})


def test_grouped_conv3d_that_does_not_fit_the_channels_is_one_error_line(tmp_path):
    w = np.zeros((4, 2, 3, 3, 3), np.float32)
    path = save([helper.make_node("Conv", ["x", "w"], ["y"], name="gconv", group=3,
                                  pads=[1] * 6)],
                [fin("x", [1, 4, 4, 6, 6])], [fin("y", [1, 4, 4, 6, 6])], {"w": w},
                str(tmp_path / "g.onnx"))
    one_line_error(invoke("import", path), 'node "gconv"', "group=3 does not fit")


@pytest.mark.parametrize("name", ["r3d_18", "r2plus1d_18"])
def test_video_classifiers_match_onnxruntime(name, tmp_path):
    pytest.importorskip("torch")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    import heldout_models as H
    try:
        H.Z.torchvision_models()
    except ImportError:
        pytest.skip("torchvision is not installed")
    from onnx_models import run_matches_ort
    built = H.BY_NAME[name].build(True)
    src = H.Z.export(built, tmp_path / f"{name}.onnx")
    run_matches_ort(built, src, tmp_path, TOL)


# (op, attributes): the global pools on 5-D; S3D's stem pools (1x3x3 stride 1,2,2; 3x3x3 stride 2),
# a time-only pool, averages with and without the padding counted, ceil
# mode's partial windows, asymmetric pads.
POOLS = [
    ("MaxPool", dict(kernel_shape=[1, 3, 3], strides=[1, 2, 2], pads=[0, 1, 1, 0, 1, 1])),
    ("MaxPool", dict(kernel_shape=[3, 3, 3], strides=[2, 2, 2], pads=[1, 1, 1, 1, 1, 1])),
    ("MaxPool", dict(kernel_shape=[2, 3, 2], strides=[2, 2, 1], ceil_mode=1)),
    ("MaxPool", dict(kernel_shape=[3, 1, 1], strides=[2, 1, 1], pads=[1, 0, 0, 0, 0, 0])),
    ("AveragePool", dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2])),
    ("AveragePool", dict(kernel_shape=[3, 3, 3], strides=[2, 2, 2], pads=[1, 1, 1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[3, 3, 3], strides=[2, 2, 2], pads=[1, 1, 1, 1, 1, 1],
                         count_include_pad=1)),
    ("AveragePool", dict(kernel_shape=[2, 3, 3], strides=[2, 2, 2], pads=[0, 1, 0, 1, 0, 1],
                         ceil_mode=1)),
    ("AveragePool", dict(kernel_shape=[3, 2, 3], strides=[1, 2, 2], pads=[1, 0, 1, 1, 1, 1],
                         count_include_pad=1, ceil_mode=1)),
    ("GlobalMaxPool", {}),
    ("GlobalAveragePool", {}),
]


@pytest.mark.parametrize("op, attrs", POOLS, ids=lambda v: v if isinstance(v, str) else
                         "-".join(f"{k}{''.join(map(str, x)) if isinstance(x, list) else x}"
                                  for k, x in v.items()))
def test_3d_pooling_matches_onnxruntime(op, attrs, tmp_path):
    shape = [2, 3, 7, 9, 8]
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    probe = save([helper.make_node(op, ["x"], ["y"], name="pool", **attrs)], [fin("x", shape)],
                 [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], {},
                 str(tmp_path / "p.onnx"))
    want = ort.InferenceSession(probe, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    path = save([helper.make_node(op, ["x"], ["y"], name="pool", **attrs)], [fin("x", shape)],
                [fin("y", list(want.shape))], {}, str(tmp_path / "pool.onnx"))
    res = invoke("import", path, "-o", tmp_path / "m.json")
    assert res.exit_code == 0, res.output
    g = load_model(str(tmp_path / "m.json"))
    assert tuple(g.shapes["y"]) == want.shape
    ref = run_reference(g, {"x": x})["y"]
    from hwtune.engine.instance import NativeEngine
    with NativeEngine(g, threads=2) as eng:
        eng.set_input("x", x)
        eng.run()
        got = eng.outputs()["y"]
    scale = float(np.abs(want).max())
    assert np.abs(ref - want).max() <= TOL * scale
    assert np.abs(got - want).max() <= TOL * scale


def test_dilated_3d_pooling_is_one_error_line(tmp_path):
    path = save([helper.make_node("MaxPool", ["x"], ["y"], name="dpool", kernel_shape=[2, 2, 2],
                                  dilations=[1, 2, 2])],
                [fin("x", [1, 2, 4, 6, 6])], [fin("y", [1, 2, 3, 4, 4])], {},
                str(tmp_path / "d.onnx"))
    one_line_error(invoke("import", path), 'node "dpool"', "dilated pooling")
