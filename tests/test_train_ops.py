"""The training ops in C (engine/ops/grad_*.c) against their numpy
reference (hwtune.graph.ops.train): one-op models through ops_harness with
nth in {1, 2, 3} shares, on every ISA variant this CPU supports."""

import numpy as np
import pytest

from hwtune.engine.ops_harness import run_ops
from hwtune.graph import load_model
from hwtune.graph.reference import run_reference
from hwtune.native.isa import supported_isas

POS = (0.5, 2.0)
# (op, input shapes, attrs, outputs, per-input value range)
CASES = [
    ("relu_grad", [(3, 333), (3, 333)], {}, 1, {}),
    ("relu_grad", [(5, 7), (5, 7)], {"alpha": 0.2}, 1, {}),
    ("sigmoid_grad", [(3, 333), (3, 333)], {}, 1, {}),
    ("tanh_grad", [(1000,), (1000,)], {}, 1, {}),
    ("abs_grad", [(3, 333), (3, 333)], {}, 1, {}),
    ("maximum_grad", [(37, 45), (37, 45), (37, 45)], {}, 2, {}),
    ("minimum_grad", [(5, 1, 7), (3, 1), (5, 3, 7)], {}, 2, {}),
    ("minimum_grad", [(64, 128), (128,), (64, 128)], {}, 2, {}),
    ("maximum_grad", [(4, 33), (1,), (4, 33)], {}, 2, {0: (1.0, 1.0), 1: (1.0, 1.0)}),  # ties
    ("reduce_sum", [(37, 45)], {"axes": [0], "keepdims": False}, 1, {}),
    ("reduce_sum", [(4, 6, 5, 3)], {"axes": [0, 2, 3], "keepdims": False}, 1, {}),
    ("reduce_sum", [(4, 6, 5)], {"axes": [0, 2]}, 1, {}),
    ("reduce_sum", [(3, 7)], {}, 1, {}),
    # what ONNX ReduceSum/ReduceMean import to: the last axis (odd size), a
    # middle one, negative axes, a size-1 axis, rank 5
    ("reduce_sum", [(5, 3, 37)], {"axes": [-1], "keepdims": True}, 1, {}),
    ("reduce_sum", [(2, 7, 3, 5)], {"axes": [1], "keepdims": False}, 1, {}),
    ("reduce_sum", [(3, 1, 9, 11)], {"axes": [-3, -1]}, 1, {}),
    ("reduce_sum", [(2, 3, 1, 4, 5)], {"axes": [0, 2, 4], "keepdims": False}, 1, {}),
    ("softmax_grad", [(4, 37), (4, 37)], {}, 1, {}),
    ("softmax_grad", [(3, 5, 7), (3, 5, 7)], {"axis": 1}, 1, {}),
    ("softmax_cross_entropy", [(9, 13), (9, 13)], {}, 2, {1: (0.0, 1.0)}),
    ("mse_loss", [(7, 45), (7, 45)], {}, 2, {}),
    ("batch_norm_grad", [(3, 6, 5, 5), (3, 6, 5, 5), (6,), (6,), (6,)], {"epsilon": 1e-3}, 3,
     {4: POS}),
    ("batch_norm_grad", [(5, 6), (5, 6), (6,), (6,), (6,)], {}, 3, {4: POS}),
    ("batch_norm_train", [(4, 6, 5, 7), (6,), (6,)], {"epsilon": 1e-3}, 3, {0: (2.0, 9.0)}),
    ("batch_norm_train", [(9, 5), (5,), (5,)], {}, 3, {}),
    ("batch_norm_train", [(1, 3, 1, 1), (3,), (3,)], {"epsilon": 0.5}, 3, {}),
    ("batch_norm_train_grad", [(3, 6, 5, 5), (3, 6, 5, 5), (6,), (6,), (6,)], {}, 3,
     {4: POS}),
    ("batch_norm_train_grad", [(7, 4), (7, 4), (4,), (4,), (4,)], {}, 3, {4: POS}),
    ("batch_norm_stats_update", [(37,), (37,), (37,), (37,)], {"count": 50}, 2,
     {1: POS, 3: POS}),
    ("batch_norm_stats_update", [(5,), (5,), (5,), (5,)],
     {"count": 1, "momentum": 0.5, "epsilon": 0.01}, 2, {3: POS}),
    ("slice_grad", [(4, 3, 5)], {"axis": 1, "begin": 2, "size": 9}, 1, {}),
    ("slice_grad", [(2, 40)], {"axis": -1, "begin": 0, "size": 41}, 1, {}),
    ("pool2d_grad", [(2, 3, 9, 11), (2, 3, 4, 5)], {"mode": "max", "kernel": 3, "stride": 2},
     1, {}),
    ("pool2d_grad", [(2, 3, 9, 11), (2, 3, 5, 6)],
     {"mode": "max", "kernel": 3, "stride": 2, "padding": 1}, 1, {}),
    ("pool2d_grad", [(2, 3, 8, 8), (2, 3, 4, 9)],
     {"mode": "avg", "kernel": [3, 2], "stride": [2, 1], "padding": [1, 1]}, 1, {}),
    ("pool2d_grad", [(1, 4, 7, 7), (1, 4, 4, 4)],
     {"mode": "avg", "kernel": 3, "stride": 2, "padding": 1, "ceil_mode": True,
      "count_include_pad": True}, 1, {}),
    ("pool2d_grad", [(2, 5, 7, 7), (2, 5, 1, 1)], {"mode": "avg", "kernel": 7}, 1, {}),
    # windows that tile the input (stride = kernel, no padding): the one-pass
    # path, 2x2 and any size, with rows and columns past the last window
    ("pool2d_grad", [(2, 3, 9, 11), (2, 3, 4, 5)], {"mode": "max", "kernel": 2}, 1, {}),
    ("pool2d_grad", [(1, 2, 8, 40), (1, 2, 4, 20)], {"mode": "max", "kernel": 2}, 1, {}),
    ("pool2d_grad", [(2, 3, 10, 11), (2, 3, 3, 3)], {"mode": "max", "kernel": 3}, 1, {}),
    ("pool2d_grad", [(2, 3, 8, 9), (2, 3, 4, 3)], {"mode": "max", "kernel": [2, 3]}, 1, {}),
    # ceil_mode's partial last window: the general loop
    ("pool2d_grad", [(1, 2, 5, 5), (1, 2, 3, 3)], {"mode": "max", "kernel": 2,
                                                   "ceil_mode": True}, 1, {}),
    ("conv2d_grad_weight", [(2, 5, 9, 9), (2, 7, 9, 9)], {"padding": 1, "kernel": 3}, 1, {}),
    ("conv2d_grad_weight", [(3, 3, 23, 20), (3, 8, 10, 7)], {"stride": [2, 3], "kernel": [7, 2],
                                                           "padding": [1, 0]}, 1, {}),
    ("conv2d_grad_weight", [(1, 64, 14, 14), (1, 32, 14, 14)], {"kernel": 1}, 1, {}),
    # padding past the kernel's reach (whole zero rows and columns in im2col)
    ("conv2d_grad_weight", [(2, 3, 6, 5), (2, 4, 8, 7)], {"kernel": 1, "padding": 1}, 1, {}),
    ("conv2d_grad_weight", [(2, 3, 6, 5), (2, 4, 6, 5)], {"kernel": 5, "padding": 2}, 1, {}),
    # few input channels: units split the output channels (uneven blocks)
    ("conv2d_grad_weight", [(2, 3, 9, 8), (2, 37, 9, 8)], {"kernel": 3, "padding": 1}, 1, {}),
    ("conv2d_grad_weight", [(3, 2, 12, 11), (3, 70, 6, 6)], {"kernel": [3, 2], "stride": 2,
                                                            "padding": 1}, 1, {}),
    ("conv2d_grad_data", [(2, 7, 9, 9), (7, 5, 3, 3)], {"padding": 1, "input_size": 9}, 1, {}),
    ("conv2d_grad_data", [(3, 8, 10, 7), (8, 3, 7, 2)], {"stride": [2, 3], "padding": [1, 0],
                                                       "input_size": [23, 20]}, 1, {}),
    ("conv2d_grad_data", [(2, 16, 8, 8), (16, 3, 3, 3)], {"stride": 2, "padding": 1,
                                                         "input_size": 16}, 1, {}),
    # stride 1 runs as the forward CONV of dy with the turned weights: a
    # non-square kernel with no padding across, a 1x1 (the GEMM layout),
    # and padding past the kernel's reach (the im2col path again)
    ("conv2d_grad_data", [(3, 6, 11, 8), (6, 4, 5, 3)], {"padding": [2, 0],
                                                        "input_size": [11, 10]}, 1, {}),
    ("conv2d_grad_data", [(2, 40, 6, 5), (40, 36, 1, 1)], {"input_size": [6, 5]}, 1, {}),
    ("conv2d_grad_data", [(2, 4, 8, 7), (4, 3, 1, 1)], {"padding": 1, "input_size": [6, 5]},
     1, {}),
    ("sgd_update", [(1000,), (1000,), (1000,)], {"lr": 0.1, "momentum": 0.9}, 2, {}),
    ("sgd_update", [(3, 7), (3, 7), (3, 7)], {"weight_decay": 0.01}, 2, {}),
    ("adam_update", [(1000,), (1000,), (1000,), (1000,), (1,)], {}, 3, {3: (0.0, 1.0),
                                                                        4: (3.0, 3.0)}),
]


def model(op, shapes, attrs, n_out):
    outs = [f"y{i}" for i in range(n_out)]
    o = {"name": "op", "op": op, "inputs": [f"x{i}" for i in range(len(shapes))],
         "outputs": outs}
    if attrs:
        o["attrs"] = attrs
    return load_model({"format_version": 1, "name": f"one_{op}", "seed": 3,
                       "inputs": [{"name": f"x{i}", "shape": list(s)}
                                  for i, s in enumerate(shapes)],
                       "params": [], "ops": [o], "outputs": outs})


def _id(case):
    return f"{case[0]}-{'-'.join('x'.join(map(str, s)) for s in case[1])}-{case[2]}"


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_train_op_matches_reference(case, isa):
    op, shapes, attrs, n_out, ranges = case
    g = model(op, shapes, attrs, n_out)
    rng = np.random.default_rng(11)
    inputs = {f"x{i}": rng.uniform(*ranges.get(i, (-3, 3)), s).astype(np.float32)
              for i, s in enumerate(shapes)}
    want = run_reference(g, inputs=inputs)
    for nth in (1, 2, 3):
        got = run_ops(g, nth=nth, isa=isa, inputs=inputs)
        for name in g.outputs:
            scale = max(float(np.abs(want[name]).max()), 1e-6)
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=2e-6 * scale,
                                       err_msg=f"{name}, nth={nth}")


@pytest.mark.parametrize("isa", supported_isas())
def test_overlapping_max_pool_grad_ties_go_to_the_first_maximum(isa):
    """The general loop (3x3 windows, stride 2, padding 1: ResNet's pool1):
    ties in most windows, and windows overlapping, so an input that wins
    two windows collects both dys."""
    g = model("pool2d_grad", [(2, 3, 9, 8), (2, 3, 5, 4)],
              {"mode": "max", "kernel": 3, "stride": 2, "padding": 1}, 1)
    rng = np.random.default_rng(6)
    inputs = {"x0": rng.integers(0, 3, (2, 3, 9, 8)).astype(np.float32),
              "x1": rng.uniform(-3, 3, (2, 3, 5, 4)).astype(np.float32)}
    want = run_reference(g, inputs=inputs)["y0"]
    for nth in (1, 2, 3):
        np.testing.assert_allclose(run_ops(g, nth=nth, isa=isa, inputs=inputs)["y0"], want,
                                   rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("kernel", [2, 3])
def test_max_pool_grad_ties_go_to_the_first_maximum(kernel, isa):
    """Inputs from {0, 1, 2}: most windows hold ties, and each tie's dy goes to
    the first maximum in row-major order, as the reference gives it."""
    g = model("pool2d_grad", [(2, 3, 7, 9), (2, 3, 7 // kernel, 9 // kernel)],
              {"mode": "max", "kernel": kernel}, 1)
    rng = np.random.default_rng(5)
    inputs = {"x0": rng.integers(0, 3, (2, 3, 7, 9)).astype(np.float32),
              "x1": rng.uniform(-3, 3, (2, 3, 7 // kernel, 9 // kernel)).astype(np.float32)}
    want = run_reference(g, inputs=inputs)["y0"]
    for nth in (1, 2):
        np.testing.assert_array_equal(run_ops(g, nth=nth, isa=isa, inputs=inputs)["y0"], want)


@pytest.mark.parametrize("isa", supported_isas())
def test_stride1_data_gradient_through_winograd(isa):
    """A stride-1 3x3 data gradient with the output pixels (2 x 40 x 40 =
    3200, >= 1568 a thread for 1 and 2 threads) and channels (>= 32) for
    Winograd with per-run weights; 3 threads take the direct template. Odd
    input channels (33), every share count. Winograd's error bound (the
    forward tests' 1e-5 of the scale), not the direct sum's."""
    g = model("conv2d_grad_data", [(2, 32, 40, 40), (32, 33, 3, 3)],
              {"padding": 1, "input_size": 40}, 1)
    rng = np.random.default_rng(12)
    inputs = {"x0": rng.uniform(-1, 1, (2, 32, 40, 40)).astype(np.float32),
              "x1": rng.uniform(-1, 1, (32, 33, 3, 3)).astype(np.float32)}
    want = run_reference(g, inputs=inputs)["y0"]
    scale = float(np.abs(want).max())
    for nth in (1, 2, 3):
        got = run_ops(g, nth=nth, isa=isa, inputs=inputs)["y0"]
        assert float(np.abs(got - want).max()) / scale <= 1e-5, nth


# (x, dy, padding): odd output sizes (partial 2x2 tiles), padding 0 to 2,
# a batch split into chunks with a shorter last one (9 images of 20 tiles:
# chunks of 7 and 2), channel counts that are not a multiple of the vector
WINO_WEIGHT_CASES = [
    ((2, 33, 9, 7), (2, 40, 9, 7), 1),
    ((9, 32, 9, 7), (9, 35, 9, 7), 1),
    ((3, 34, 8, 9), (3, 32, 6, 7), 0),
    ((1, 48, 5, 5), (1, 32, 7, 7), 2),
]


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("case", WINO_WEIGHT_CASES, ids=str)
def test_weight_gradient_through_winograd(case, isa):
    """3x3 stride-1 weight gradients with >= 32 channels each side run
    Winograd F(2x2, 3x3) (transformed x and dy tiles, 16 GEMMs over the
    tiles, the output transform into dW); every share count, one input
    channel block a share. Winograd's error bound, 1e-5 of the scale."""
    xs, ys, pad = case
    g = model("conv2d_grad_weight", [xs, ys], {"padding": pad, "kernel": 3}, 1)
    rng = np.random.default_rng(13)
    inputs = {"x0": rng.uniform(-1, 1, xs).astype(np.float32),
              "x1": rng.uniform(-1, 1, ys).astype(np.float32)}
    want = run_reference(g, inputs=inputs)["y0"]
    scale = float(np.abs(want).max())
    for nth in (1, 2, 3):
        got = run_ops(g, nth=nth, isa=isa, inputs=inputs)["y0"]
        assert float(np.abs(got - want).max()) / scale <= 1e-5, nth


# The stride-1 data gradient's CONV template knobs (conv2d's, for its
# forward CONV: dy [2, 8, 20, 19] as x, weights [6, 8, 3, 3], padding 1;
# few channels, so the staged input, not the turned weights, sizes the
# workspace).
GRAD_DATA_KNOBS = [
    {},
    {"ic_bn": 4, "oc_bn": 3, "reg_n": 2, "unroll_ker": True, "reg_h": 1, "winograd": 0},
    {"ic_bn": 4, "oc_bn": 3, "reg_n": 2, "unroll_ker": True, "reg_h": 2, "winograd": 0},
    {"ic_bn": 8, "oc_bn": 1, "reg_n": 19},
    {"winograd": 2},  # 760 pixels: the per-run rule alone would take the direct template
    {"winograd": 0},
]


def _grad_data(attrs):
    return model("conv2d_grad_data", [(2, 8, 20, 19), (8, 6, 3, 3)],
                 dict({"padding": 1, "input_size": [20, 19]}, **attrs), 1)


@pytest.mark.parametrize("isa", supported_isas())
def test_data_gradient_knobs_shape_the_plan_and_keep_the_result(isa):
    rng = np.random.default_rng(13)
    inputs = {"x0": rng.uniform(-1, 1, (2, 8, 20, 19)).astype(np.float32),
              "x1": rng.uniform(-1, 1, (8, 6, 3, 3)).astype(np.float32)}
    want = run_reference(_grad_data({}), inputs=inputs)["y0"]
    scale = float(np.abs(want).max())
    plans = []
    for attrs in GRAD_DATA_KNOBS:
        for nth in (1, 2):
            ws = {}
            got = run_ops(_grad_data(attrs), nth=nth, isa=isa, inputs=inputs, workspace=ws)["y0"]
            assert float(np.abs(got - want).max()) / scale <= 1e-5, (attrs, nth)
        plans.append(ws["op"])
    # reg_h sizes the staged output rows, winograd the whole workspace
    assert plans[1] != plans[2]
    assert plans[4] != plans[5]
    assert plans[4] != plans[0]  # the knob, not the per-run rule, decides


@pytest.mark.parametrize("attrs, message", [
    ({"ic_bn": 3}, "attrs.ic_bn: 3 is not legal here"),
    ({"reg_h": 3}, "attrs.reg_h: 3 is not legal here"),
])
def test_bad_data_gradient_knobs_are_refused_at_validation(attrs, message):
    with pytest.raises(Exception, match=message):
        _grad_data(attrs)


def test_data_gradient_knobs_need_a_stride_1_data_gradient():
    with pytest.raises(Exception, match="stride-1 data gradient"):
        model("conv2d_grad_data", [(2, 16, 8, 8), (16, 3, 3, 3)],
              {"stride": 2, "padding": 1, "input_size": 16, "reg_n": 2}, 1)


def test_bad_data_gradient_knobs_are_a_clear_error_at_prepare():
    """Knobs the template refuses (past validation, as a stale lowered graph
    could carry them) fail prepare with the values named."""
    g = _grad_data({"ic_bn": 4})
    g.ops[0].resolved["ic_bn"] = 3
    with pytest.raises(Exception, match="refuses the knobs ic_bn=3"):
        run_ops(g, nth=1)


@pytest.mark.parametrize("isa", supported_isas())
def test_a_set_winograd_knob_overrides_the_per_run_rule_on_a_forward_conv(isa):
    """A training step's conv2d (weights an input, packed per run) with
    winograd set: the knob, measured by the CONV search with per-run weights,
    decides over the pixel-count rule (760 pixels here: the rule alone takes
    the direct template), as for the data gradient above."""
    rng = np.random.default_rng(14)
    inputs = {"x0": rng.uniform(-1, 1, (2, 8, 20, 19)).astype(np.float32),
              "x1": rng.uniform(-1, 1, (6, 8, 3, 3)).astype(np.float32)}
    plans = {}
    for wino in (0, 2):
        g = model("conv2d", [(2, 8, 20, 19), (6, 8, 3, 3)], {"padding": 1, "winograd": wino}, 1)
        want = run_reference(g, inputs=inputs)["y0"]
        ws = {}
        got = run_ops(g, nth=2, isa=isa, inputs=inputs, workspace=ws)["y0"]
        assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())
        plans[wino] = ws["op"]
    assert plans[0] != plans[2]


# The weight gradient's knobs (hwtune/grad_conv.h): x [3, 33, 9, 7], dy
# [3, 40, 9, 7], 3x3, padding 1 (Winograd legal; 9 images' tiles chunked
# with a shorter last chunk at chunk_tiles 32), and a strided 7x2 one (im2col
# only).
GW_CASES = [
    ([(3, 33, 9, 7), (3, 40, 9, 7)], {"padding": 1, "kernel": 3}),
    ([(3, 3, 23, 20), (3, 8, 10, 7)], {"stride": [2, 3], "kernel": [7, 2], "padding": [1, 0]}),
]
GW_KNOBS = [
    {},
    {"winograd": 0, "units": 1, "tile_cols": 64},
    {"winograd": 0, "units": 4, "tile_cols": 1024},
    {"winograd": 2, "units": 1, "chunk_tiles": 32},
    {"winograd": 2, "units": 4, "chunk_tiles": 512},
]


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("case", GW_CASES, ids=["3x3", "7x2-strided"])
def test_weight_gradient_knobs_shape_the_plan_and_keep_the_result(case, isa):
    shapes, geo = case
    rng = np.random.default_rng(15)
    inputs = {f"x{i}": rng.uniform(-1, 1, s).astype(np.float32) for i, s in enumerate(shapes)}
    want = run_reference(model("conv2d_grad_weight", shapes, geo, 1), inputs=inputs)["y0"]
    scale = float(np.abs(want).max())
    plans = {}
    for i, knobs in enumerate(GW_KNOBS):
        if knobs.get("winograd") and "stride" in geo:
            continue
        g = model("conv2d_grad_weight", shapes, dict(geo, **knobs), 1)
        for nth in (1, 2, 3):
            ws = {}
            got = run_ops(g, nth=nth, isa=isa, inputs=inputs, workspace=ws)["y0"]
            assert float(np.abs(got - want).max()) / scale <= 1e-5, (knobs, nth)
        plans[i] = ws["op"]
    # units and tile sizes size the per-share buffers
    assert plans[1] != plans[2]
    if "stride" not in geo:
        assert len({plans[0], plans[1], plans[3], plans[4]}) == 4


def test_bad_weight_gradient_knobs_are_refused():
    shapes, geo = GW_CASES[1]
    with pytest.raises(Exception, match="attrs.winograd: 2 is not legal here"):
        model("conv2d_grad_weight", shapes, dict(geo, winograd=2), 1)
    with pytest.raises(Exception, match="attrs.tile_cols: 100 is not legal here"):
        model("conv2d_grad_weight", shapes, dict(geo, tile_cols=100), 1)
    g = model("conv2d_grad_weight", shapes, dict(geo, units=2), 1)
    g.ops[0].resolved["units"] = 3  # past validation, as a stale lowered graph could be
    with pytest.raises(Exception, match="weight gradient knob units=3 is not legal"):
        run_ops(g, nth=1)


@pytest.mark.parametrize("isa", supported_isas())
def test_im2col_data_gradient_knobs_shape_the_plan_and_keep_the_result(isa):
    """A stride-2 data gradient (the im2col GEMM and col2im): its units
    and tile_cols knobs."""
    shapes, geo = [(2, 16, 16, 16), (16, 12, 3, 3)], {"stride": 2, "padding": 1,
                                                      "input_size": 32}
    rng = np.random.default_rng(16)
    inputs = {f"x{i}": rng.uniform(-1, 1, s).astype(np.float32) for i, s in enumerate(shapes)}
    want = run_reference(model("conv2d_grad_data", shapes, geo, 1), inputs=inputs)["y0"]
    scale = float(np.abs(want).max())
    plans = []
    for knobs in ({}, {"units": 1, "tile_cols": 64}, {"units": 4, "tile_cols": 1024}):
        g = model("conv2d_grad_data", shapes, dict(geo, **knobs), 1)
        for nth in (1, 2, 3):
            ws = {}
            got = run_ops(g, nth=nth, isa=isa, inputs=inputs, workspace=ws)["y0"]
            assert float(np.abs(got - want).max()) / scale <= 1e-5, (knobs, nth)
        plans.append(ws["op"])
    assert len(set(plans)) == 3


def test_im2col_knobs_need_an_im2col_data_gradient():
    with pytest.raises(Exception, match="im2col knobs apply to a data gradient"):
        _grad_data({"units": 2})
    g = model("conv2d_grad_data", [(2, 16, 8, 8), (16, 3, 3, 3)],
              {"stride": 2, "padding": 1, "input_size": 16, "tile_cols": 128}, 1)
    g.ops[0].resolved["tile_cols"] = 100
    with pytest.raises(Exception, match="data gradient knob tile_cols=100 is not legal"):
        run_ops(g, nth=1)
