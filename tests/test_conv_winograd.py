"""The Winograd F(2x2, 3x3) template (kernels/conv/winograd.c), at stride 1
and 2: the knob's
legality, numerics against the plain-C reference in both tensor layouts on
every ISA this CPU runs (odd sizes, channel counts that are not a multiple
of the vector, batch > 1, asymmetric padding, any thread count), and the
engine op: NCHWc weights made by a folded layout_transform, and weights
that change between runs (the direct template then runs)."""
import numpy as np
import pytest

from hwtune.errors import UsageError
from hwtune.native import conv
from hwtune.native.isa import supported_isas

ISAS = supported_isas()

# (n, c, h, w, k, pad, pad_end)
CASES = [
    (1, 64, 56, 56, 64, 1, None),     # ResNet-18 conv2_x
    (2, 5, 7, 9, 3, 1, None),         # batch 2, 5 channels: masked lanes everywhere
    (1, 17, 13, 11, 19, (0, 2), None),
    (1, 33, 6, 5, 40, 1, (0, 1)),     # asymmetric padding, odd output
    (1, 3, 1, 1, 5, 1, None),         # one pixel
    (1, 40, 4, 30, 24, 0, None),      # no padding, wide rows
    (3, 24, 9, 2, 50, 1, None),
    # odd outputs over several tile blocks (a tail block, blocks ending
    # mid tile row): edge tiles skip the GEMM rows of the elements only
    # their missing output row/column reads
    (1, 48, 27, 25, 40, 1, None),
]


def make(case, seed):
    n, c, h, w, k, pad, pad_end = case
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, c, h, w)).astype(np.float32)
    wt = rng.uniform(-1, 1, (k, c, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, k).astype(np.float32)
    return x, wt, b, pad, pad_end


def scale(ref):
    return max(1.0, float(np.abs(ref).max()))


def blocks(c, k):
    """Channel blocks that exercise partial vectors: the largest divisor of
    c up to 12 and of k up to 20."""
    ib = max(d for d in range(1, 13) if c % d == 0)
    ob = max(d for d in range(1, 21) if k % d == 0)
    return ib, ob


def test_knob_is_declared_only_where_the_template_applies():
    assert conv.knobs((1, 8, 9, 9), (8, 8, 3, 3), pad=1)["winograd"] == [0, 2]
    assert conv.knobs((1, 8, 9, 9), (8, 8, 3, 3), stride=2, pad=1)["winograd"] == [0, 2]
    for kw in (dict(stride=3), dict(dilation=2)):
        assert conv.knobs((1, 8, 9, 9), (8, 8, 3, 3), pad=1, **kw)["winograd"] == [0]
    assert conv.knobs((1, 8, 9, 9), (8, 8, 5, 5), pad=2)["winograd"] == [0]
    with pytest.raises(UsageError):
        conv.Conv2dPlan((1, 8, 9, 9), np.zeros((8, 8, 3, 3), np.float32), stride=3, pad=1,
                        params=dict(conv.default_params((1, 8, 9, 9), (8, 8, 3, 3), stride=3,
                                                        pad=1), winograd=2))


def test_default_uses_winograd_only_with_enough_channels():
    assert conv.default_params((1, 64, 56, 56), (64, 64, 3, 3), pad=1)["winograd"] == 2
    assert conv.default_params((1, 3, 224, 224), (64, 3, 3, 3), pad=1)["winograd"] == 0
    assert conv.default_params((1, 64, 56, 56), (128, 64, 3, 3), stride=2, pad=1)["winograd"] == 2
    assert conv.default_params((1, 16, 56, 56), (32, 16, 3, 3), stride=2, pad=1)["winograd"] == 0


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("layout", ["NCHW", "NCHWc"])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("case", CASES)
def test_matches_reference(isa, layout, stride, case):
    x, w, b, pad, pad_end = make(case, seed=CASES.index(case))
    relu = case[1] % 2 == 1
    ref = conv.conv2d_ref(x, w, b, stride=stride, pad=pad, relu=relu, pad_end=pad_end)
    ib, ob = blocks(x.shape[1], w.shape[0])
    params = dict(conv.default_params(x.shape, w.shape, stride=stride, pad=pad,
                                      pad_end=pad_end, isa=isa),
                  winograd=2, ic_bn=ib, oc_bn=ob)
    for nth in (1, 2, 3):
        plan = conv.Conv2dPlan(x.shape, w, b, stride=stride, pad=pad, relu=relu, layout=layout,
                               params=params, isa=isa, nth=nth, pad_end=pad_end)
        assert plan.params["winograd"] == 2
        xi = x if layout == "NCHW" else conv.to_nchwc(x, ib)
        y = plan.run(xi)
        y = y if layout == "NCHW" else conv.from_nchwc(y)
        # The transforms use only 0, +-1 and +-1/2: the error
        # stays at the direct sum's (the issue allows 1e-4 of the scale).
        err = float(np.abs(y - ref).max()) / scale(ref)
        assert err <= 1e-5, (nth, err)


@pytest.mark.parametrize("isa", ISAS)
def test_every_thread_count_writes_every_output(isa):
    """Shares are disjoint and cover the output: a NaN-filled output is
    fully overwritten whatever the thread count (units may be fewer than
    threads)."""
    x, w, b, pad, _ = make((1, 32, 3, 3, 48, 1, None), seed=3)
    ref = conv.conv2d_ref(x, w, b, pad=pad)
    for nth in (1, 2, 4, 7, 16):
        plan = conv.Conv2dPlan(x.shape, w, b, pad=pad, isa=isa, nth=nth,
                               params=dict(conv.default_params(x.shape, w.shape, pad=pad,
                                                               isa=isa), winograd=2))
        y = np.full(plan.out_shape, np.nan, np.float32)
        plan.run(x, y)
        assert np.isfinite(y).all()
        assert float(np.abs(y - ref).max()) / scale(ref) <= 1e-5


@pytest.mark.parametrize("isa", ISAS)
def test_resnet18_conv5_1_nchw_at_every_thread_count(isa):
    """ResNet-18's conv5_1 (256x14x14 -> 512, stride 2) on NCHW tensors:
    one tile block, split over output channels between the threads; input
    rows of 14 columns staged by 8x8 transposes (the last block overlapping
    the one before) and output rows of 7 pixels transposed back by masked
    stores. A NaN-filled output is fully overwritten at every thread count."""
    x, w, b, pad, _ = make((1, 256, 14, 14, 512, 1, None), seed=7)
    ref = conv.conv2d_ref(x, w, b, stride=2, pad=pad, relu=True)
    params = dict(conv.default_params(x.shape, w.shape, stride=2, pad=pad, isa=isa), winograd=2)
    for nth in (1, 2, 3):
        plan = conv.Conv2dPlan(x.shape, w, b, stride=2, pad=pad, relu=True, isa=isa, nth=nth,
                               params=params)
        y = np.full(plan.out_shape, np.nan, np.float32)
        plan.run(x, y)
        assert np.isfinite(y).all(), nth
        err = float(np.abs(y - ref).max()) / scale(ref)
        assert err <= 1e-5, (nth, err)


# ---------------------------------------------------------------- the engine op

def _graph(weights_as_input: bool, stride: int = 1):
    from hwtune.graph.generators.builder import Builder
    b = Builder("wino", seed=4)
    b.input("x", (1, 24, 10, 9))
    (b.input if weights_as_input else b.param)("w", (40, 24, 3, 3))
    b.param("b", (40,))
    b.op("y", "conv2d", ["x", "w", "b"], padding=1, stride=stride)
    b.op("z", "relu", ["y"])
    b.output("z")
    return b.build()


@pytest.mark.parametrize("op_params", [
    {"y": {"layout": "NCHW", "winograd": 2}},
    {"y": {"layout": "NCHWc", "ic_bn": 8, "oc_bn": 20, "winograd": 2}},
    {"y": {"layout": "NCHWc", "ic_bn": 3, "oc_bn": 8, "winograd": 2}},
])
@pytest.mark.parametrize("weights_as_input", [False, True])
@pytest.mark.parametrize("stride", [1, 2])
def test_engine_runs_winograd_in_both_layouts(op_params, weights_as_input, stride):
    """NCHWc weights reach the op through a layout_transform folded at
    prepare (constant: transformed once); weights fed as an input change
    between runs, and this CONV has too few output pixels to transform them
    every run, so the op keeps the direct template for them."""
    from dataclasses import replace
    from hwtune.engine.config import default_config
    from hwtune.engine.effective import effective_graph
    from hwtune.engine.runner import open_engine
    from hwtune.graph.reference import run_reference

    g = _graph(weights_as_input, stride)
    ref = run_reference(g)["z"]
    cfg = replace(default_config(2), op_params=op_params)
    eng = open_engine(effective_graph(g, cfg), cfg)
    for _ in range(2):
        eng.run()
        out = eng.outputs()["z"]
        assert float(np.abs(out - ref).max()) / scale(ref) <= 1e-5


@pytest.mark.parametrize("layout", ["NCHW", "NCHWc"])
@pytest.mark.parametrize("stride", [1, 2])
def test_engine_fuses_residual_and_relu_into_winograd(layout, stride):
    """conv -> add(r) -> relu fused by the pass runs the residual and the
    ReLU in the Winograd output transform (NCHW: after its transpose)."""
    from dataclasses import replace
    from hwtune.engine.config import default_config
    from hwtune.engine.effective import effective_graph
    from hwtune.engine.runner import open_engine
    from hwtune.graph.generators.builder import Builder
    from hwtune.graph.reference import run_reference

    b = Builder("wino-res", seed=5)
    b.input("x", (1, 40, 11, 13))
    b.input("r", (1, 48, 11, 13) if stride == 1 else (1, 48, 6, 7))
    b.param("w", (48, 40, 3, 3))
    b.op("y", "conv2d", ["x", "w"], padding=1, stride=stride)
    b.op("s", "add", ["y", "r"])
    b.op("z", "relu", ["s"])
    b.output("z")
    g = b.build()
    ref = run_reference(g)["z"]
    params = {"layout": layout, "winograd": 2}
    if layout == "NCHWc":
        params.update(ic_bn=8, oc_bn=16)
    cfg = replace(default_config(2), op_params={"y": params})
    run_graph = effective_graph(g, cfg)
    conv = next(op for op in run_graph.ops if op.op == "conv2d")
    assert len(conv.inputs) == 4 and conv.attrs.get("relu"), "the pass fused add and relu"
    eng = open_engine(run_graph, cfg)
    eng.run()
    out = eng.outputs()["z"]
    assert (out >= 0).all()
    assert float(np.abs(out - ref).max()) / scale(ref) <= 1e-5


@pytest.mark.parametrize("stride", [1, 2])
def test_engine_transforms_changing_weights_every_run(stride):
    """NCHW weights fed as an input (a training step's) on a CONV with
    enough output pixels run Winograd with the weights transformed per run:
    new weights between runs give the new reference outputs."""
    from dataclasses import replace
    from hwtune.engine.config import default_config
    from hwtune.engine.effective import effective_graph
    from hwtune.engine.runner import open_engine
    from hwtune.graph.generators.builder import Builder

    b = Builder("wino-train", seed=6)
    b.input("x", (2, 8, 80, 80) if stride == 2 else (2, 8, 40, 40))  # 3200 output pixels
    b.input("w", (16, 8, 3, 3))
    b.op("y", "conv2d", ["x", "w"], padding=1, stride=stride)
    b.output("y")
    g = b.build()
    cfg = replace(default_config(2), op_params={"y": {"layout": "NCHW", "winograd": 2}})
    eng = open_engine(effective_graph(g, cfg), cfg)
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, g.shapes["x"]).astype(np.float32)
    eng.set_input("x", x)
    for _ in range(2):
        w = rng.uniform(-1, 1, g.shapes["w"]).astype(np.float32)
        eng.set_input("w", w)
        eng.run()
        ref = conv.conv2d_ref(x, w, None, stride=stride, pad=1)
        assert float(np.abs(eng.outputs()["y"] - ref).max()) / scale(ref) <= 1e-5
