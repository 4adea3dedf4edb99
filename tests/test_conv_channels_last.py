"""1x1 CONVs held in one block of channels (NCHWc with ic_bn = C and
oc_bn = K: channels-last tensors) run as one GEMM per image
(kernels/conv/nhwc_gemm.c), and a MobileNetV2-style block of them with the
depthwise CONV between them runs channels-last end to end: the engine's
outputs equal the numpy reference of the plain graph, on every ISA this
CPU has, at 1 to 3 threads. The tuner measures that point first for every
such workload."""

import numpy as np
import pytest
from conftest import run_engine
from onnx import helper
from onnx_models import fin, save

from hwtune.graph import load_model, run_reference
from hwtune.engine.config import EngineConfig
from hwtune.engine.effective import effective_graph
from hwtune.onnx.importer import import_onnx


def _block(tmp_path, c=8, e=48, hw=(9, 11), k_dw=3, stride=1):
    """x -> 1x1 (c -> e) + ReLU6 -> depthwise k_dw x k_dw + ReLU6 -> 1x1
    (e -> c) + x: an inverted residual block (the residual when stride 1)."""
    rng = np.random.default_rng(7)
    inits = {"w1": rng.standard_normal((e, c, 1, 1), np.float32) * 0.3,
             "b1": rng.standard_normal(e).astype(np.float32),
             "w2": rng.standard_normal((e, 1, k_dw, k_dw), np.float32) * 0.3,
             "b2": rng.standard_normal(e).astype(np.float32),
             "w3": rng.standard_normal((c, e, 1, 1), np.float32) * 0.2,
             "b3": rng.standard_normal(c).astype(np.float32),
             "lo": np.float32(0.0), "hi": np.float32(6.0)}
    p = k_dw // 2
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]),
             helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], group=e,
                              pads=[p] * 4, strides=[stride] * 2),
             helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"])]
    oh, ow = ((hw[0] - 1) // stride + 1, (hw[1] - 1) // stride + 1)
    out = "c3"
    if stride == 1:
        nodes.append(helper.make_node("Add", ["c3", "x"], ["y"]))
        out = "y"
    path = save(nodes, [fin("x", [1, c, *hw])], [fin(out, [1, c, oh, ow])], inits,
                tmp_path / "block.onnx")
    import_onnx(path, str(tmp_path / "block.json"))
    return load_model(str(tmp_path / "block.json"))


def _channels_last(graph):
    """op_params holding every 1x1 stride-1 unpadded conv2d channels-last."""
    out = {}
    for op in graph.ops:
        if op.op != "conv2d" or int(op.resolved.get("group") or 1) != 1:
            continue
        x, w = graph.shapes[op.inputs[0]], graph.shapes[op.inputs[1]]
        if tuple(w[2:]) == (1, 1):
            out[op.name] = {"layout": "NCHWc", "ic_bn": int(x[1]), "oc_bn": int(w[0])}
    return out


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("shape", [dict(), dict(c=16, e=96, hw=(14, 14)),
                                   dict(c=24, e=144, hw=(7, 9), k_dw=5),
                                   dict(c=8, e=40, hw=(12, 10), stride=2)],
                         ids=["8-48", "16-96", "24-144-5x5", "8-40-s2"])
def test_block_channels_last_matches_the_reference(tmp_path, shape, threads):
    g = _block(tmp_path, **shape)
    params = _channels_last(g)
    assert len(params) == 2
    # As `hwtune run` lowers it: ReLU6 and the residual fused into the
    # CONVs (their epilogue), then the layout pass.
    blocked = effective_graph(g, EngineConfig(executors=1, threads=threads,
                                              scheduler="sequential", op_params=params))
    convs = [op for op in blocked.ops if op.op == "conv2d"]
    assert len(convs) == 3 and all(op.attrs.get("relu_max") == 6.0 for op in convs[:2])
    assert len(convs[2].inputs) == 4 if shape.get("stride", 1) == 1 else 3
    # Both 1x1 CONVs and the depthwise one between them run blocked, and
    # the only activation layout ops are x's copy (shared by the first CONV
    # and the residual) and the output's: nothing around the depthwise
    # CONV. (The weights' transforms are folded at prepare.)
    assert all(op.attrs.get("layout") == "NCHWc" for op in convs)
    moves = [op.name for op in blocked.ops
             if op.op == "layout_transform" and op.attrs["src"].startswith("NCHW")]
    assert len(moves) == 2, moves
    x = np.random.default_rng(1).standard_normal(g.shapes["x"], np.float32)
    want = run_reference(g, {"x": x})
    got = run_engine(blocked, {"x": x}, threads=threads)
    for name in g.outputs:
        scale = max(float(np.abs(want[name]).max()), 1e-30)
        assert np.abs(got[name] - want[name]).max() <= 1e-5 * scale


def test_the_tuner_measures_the_channels_last_point_first():
    from hwtune.engine.workloads import ConvWorkload
    from hwtune.tuners.conv_local import channels_last_point
    from hwtune.tuners.search import Space
    isa = "generic"
    pw = ConvWorkload((1, 24, 14, 14), (144, 24, 1, 1), True, (1, 1), (0, 0))
    default = pw.default_params(isa)
    point = channels_last_point(pw, default, Space(pw.knobs(isa)))
    assert point == dict(default, ic_bn=24, oc_bn=144, winograd=0)
    # Not for a 3x3, a strided or a padded 1x1 CONV.
    for wl in (ConvWorkload((1, 24, 14, 14), (144, 24, 3, 3), True, (1, 1), (1, 1)),
               ConvWorkload((1, 24, 14, 14), (144, 24, 1, 1), True, (2, 2), (0, 0)),
               ConvWorkload((1, 24, 14, 14), (144, 24, 1, 1), True, (1, 1), (1, 1))):
        assert channels_last_point(wl, wl.default_params(isa), Space(wl.knobs(isa))) is None


def _se_block(tmp_path, c=16, e=64, s=8, hw=(10, 9)):
    """x -> 1x1 (c -> e) + SiLU -> depthwise 3x3 + SiLU -> squeeze-excitation
    (global average pool, 1x1 e -> s + SiLU, 1x1 s -> e, sigmoid, scale)
    -> 1x1 (e -> c): EfficientNet's MBConv."""
    rng = np.random.default_rng(11)
    inits = {"w1": rng.standard_normal((e, c, 1, 1), np.float32) * 0.3,
             "w2": rng.standard_normal((e, 1, 3, 3), np.float32) * 0.3,
             "f1": rng.standard_normal((s, e, 1, 1), np.float32) * 0.3,
             "g1": rng.standard_normal(s).astype(np.float32),
             "f2": rng.standard_normal((e, s, 1, 1), np.float32) * 0.3,
             "g2": rng.standard_normal(e).astype(np.float32),
             "w3": rng.standard_normal((c, e, 1, 1), np.float32) * 0.2}
    silu = lambda a, b: [helper.make_node("Sigmoid", [a], [a + "_s"]),  # noqa: E731
                         helper.make_node("Mul", [a, a + "_s"], [b])]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"]), *silu("c1", "a1"),
             helper.make_node("Conv", ["a1", "w2"], ["c2"], group=e, pads=[1] * 4),
             *silu("c2", "a2"),
             helper.make_node("GlobalAveragePool", ["a2"], ["p"]),
             helper.make_node("Conv", ["p", "f1", "g1"], ["q1"]), *silu("q1", "r1"),
             helper.make_node("Conv", ["r1", "f2", "g2"], ["q2"]),
             helper.make_node("Sigmoid", ["q2"], ["sc"]),
             helper.make_node("Mul", ["a2", "sc"], ["se"]),
             helper.make_node("Conv", ["se", "w3"], ["y"])]
    path = save(nodes, [fin("x", [1, c, *hw])], [fin("y", [1, c, *hw])], inits,
                tmp_path / "se.onnx")
    import_onnx(path, str(tmp_path / "se.json"))
    return load_model(str(tmp_path / "se.json"))


@pytest.mark.parametrize("threads", [1, 2])
def test_squeeze_excitation_stays_channels_last(tmp_path, threads):
    """The scale [N, C, 1, 1] joins [N, C, H, W] in its block (layout_rules):
    the whole block runs channels-last with layout ops only at its ends."""
    g = _se_block(tmp_path)
    params = _channels_last(g)
    assert len(params) == 4  # expand, the two squeeze-excitation FCs, project
    blocked = effective_graph(g, EngineConfig(executors=1, threads=threads,
                                              scheduler="sequential", op_params=params))
    moves = [op.name for op in blocked.ops
             if op.op == "layout_transform" and op.attrs["src"].startswith("NCHW")]
    assert len(moves) == 2, moves
    pool = next(op for op in blocked.ops if op.op == "global_pool2d")
    assert blocked.shapes[pool.outputs[0]] == (1, 1, 1, 1, 64)
    x = np.random.default_rng(2).standard_normal(g.shapes["x"], np.float32)
    want = run_reference(g, {"x": x})["y"]
    got = run_engine(blocked, {"x": x}, threads=threads)["y"]
    assert np.abs(got - want).max() <= 1e-5 * max(float(np.abs(want).max()), 1e-30)


def test_only_a_per_channel_operand_joins_blocked():
    from hwtune.graph.passes.layout_rules import op_layout
    full, scale = (1, 32, 7, 7), (1, 32, 1, 1)
    assert op_layout("mul", {}, (16, 16), (full, scale)).out == 16
    # The block most elements hold wins: the scale is copied into it.
    assert op_layout("mul", {}, (0, 16), (scale, full)).need == (16, 16)
    assert op_layout("mul", {}, (16, 0), (scale, full)).out == 0
    # A bias of another rank, a per-row or per-image operand: NCHW.
    for other in ((32, 1, 1), (1, 32, 7, 1), (1, 1, 1, 1), (2, 32, 1, 1)):
        assert op_layout("mul", {}, (16, 0), (full, other)).out == 0, other


def test_a_channels_last_squeeze_excitation_turns_plain_again(tmp_path):
    """to_plain (a blocked model brought back to NCHW, as effective_graph
    does before applying other knobs) leaves no layout op."""
    from hwtune.graph.passes.plain import to_plain
    g = _se_block(tmp_path)
    blocked = effective_graph(g, EngineConfig(executors=1, threads=1, scheduler="sequential",
                                              op_params=_channels_last(g)))
    plain = to_plain(blocked)
    assert not [op.name for op in plain.ops if op.op == "layout_transform"]
    x = np.random.default_rng(3).standard_normal(g.shapes["x"], np.float32)
    assert np.array_equal(run_reference(plain, {"x": x})["y"], run_reference(g, {"x": x})["y"])
