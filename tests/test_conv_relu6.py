"""ReLU6 / clip(0, max) in the dense conv2d epilogue (relu_max): every
kernel path (the NCHW[x]c template on NCHW and blocked tensors, the 1x1
GEMM path, the direct kernel, Winograd) on every supported ISA against a
float64 numpy reference, the residual epilogue, and the fusion pass
folding clip(0, max) into dense convs (MobileNetV2's 1x1 expansions)."""

import itertools

import numpy as np
import pytest

from hwtune.graph import load_model
from hwtune.graph.reference import run_reference
from hwtune.native import conv
from hwtune.native.isa import supported_isas

from test_conv import kernel_paths, make, ref_conv, tolerance

ISAS = supported_isas()
HI = 0.75

# (N, C, H, W, K, R, S, stride, pad) and the kernel each is meant to reach
# with default params: 1x1 with K >= 32 is the GEMM path (but for small
# images), 3x3 the template, 3x3 with enough channels Winograd (also forced
# below through params).
CASES = [
    (1, 24, 15, 17, 40, 1, 1, 1, 0),  # NCHW-gemm
    (2, 16, 15, 15, 64, 1, 1, 1, 0),  # NCHW-gemm, batch 2
    (1, 24, 7, 9, 40, 1, 1, 1, 0),    # the template on AVX-512 (small image), else NCHW-gemm
    (2, 16, 6, 6, 64, 1, 1, 1, 0),    # the same, batch 2 (flattened rows on AVX-512)
    (1, 72, 1, 1, 48, 1, 1, 1, 0),    # a 1x1 image: the template on every ISA
    (1, 8, 9, 10, 20, 3, 3, 1, 1),    # template, an oc tail
    (1, 6, 12, 9, 10, 5, 5, 2, 2),    # template, stride 2
    (1, 16, 10, 10, 24, 3, 3, 1, 1),  # Winograd-eligible
]


def _make(case):
    return make(case, b_range=0.5)


def _clamped(x, w, b, stride, pad, res=None):
    y = ref_conv(x, w, b, stride, pad, False)
    if res is not None:
        y = y + res
    return np.clip(y, 0.0, HI)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:7])))
def test_every_kernel_path_clamps(isa, case):
    x, w, b, stride, pad = _make(case)
    want = _clamped(x, w, b, stride, pad)
    # Outputs below 0, inside (0, HI) and above HI: the clamp is exercised.
    assert (want == 0).any() and (want == HI).any() and ((want > 0) & (want < HI)).any()
    tol = tolerance(case[1], case[5], case[6])
    paths = set()
    for (layout, params), nth in itertools.product(kernel_paths(case, isa), (1, 2, 3)):
        got = conv.conv2d(x, w, b, stride=stride, pad=pad, relu=True, relu_max=HI,
                          layout=layout, params=params, isa=isa, nth=nth)
        err = np.abs(got - want).max()
        assert err <= tol, (layout, params, nth, err, tol)
        if params is None and layout == "NCHW":
            paths.add(conv.nchw_kernel(x.shape, w.shape, stride=stride, pad=pad, isa=isa))
    ref = conv.conv2d_ref(x, w, b, stride=stride, pad=pad, relu=True, relu_max=HI)
    assert np.abs(ref - want).max() <= 1e-6
    if case[5] == 1:
        # The variants' pw_max_hw (kernels/conv/nchwc_body.c): the pixel
        # count up to which a 1x1 CONV stays on the template.
        small = case[2] * case[3] <= (196 if isa == "avx512" else 1)
        assert paths == {"NCHW" if small else "NCHW-gemm"}


def test_relu_max_needs_relu_and_a_positive_bound():
    x, w, b, stride, pad = _make(CASES[2])
    for kw in (dict(relu=False, relu_max=6.0), dict(relu=True, relu_max=0.0)):
        with pytest.raises(Exception, match="relu_max"):
            conv.conv2d(x, w, b, stride=stride, pad=pad, **kw)


def _graph(x_shape, w_shape, attrs, residual, clip=None):
    """conv2d [+ residual] (attrs) [-> clip(clip)] as a model."""
    oc = w_shape[0]
    inputs = [{"name": "x", "shape": list(x_shape), "init": "uniform", "low": -1, "high": 1}]
    conv_in = ["x", "w", "b"]
    if residual is not None:
        inputs.append({"name": "r", "shape": list(residual), "init": "normal"})
        conv_in.append("r")
    ops = [{"name": "conv", "op": "conv2d", "inputs": conv_in,
            "outputs": ["c" if clip else "y"], "attrs": attrs}]
    if clip:
        ops.append({"name": "y", "op": "clip", "inputs": ["c"],
                    "attrs": {"min": clip[0], "max": clip[1]}})
    return load_model({
        "format_version": 1, "name": "relu6", "seed": 7, "inputs": inputs,
        "params": [{"name": "w", "shape": list(w_shape), "init": "uniform", "low": -1,
                    "high": 1},
                   {"name": "b", "shape": [oc], "init": "uniform", "low": -0.5, "high": 0.5}],
        "ops": ops, "outputs": ["y"]})


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((1, 24, 7, 7), (48, 24, 1, 1), {}),                                     # GEMM
    ((1, 8, 9, 9), (16, 8, 3, 3), {"padding": 1}),                           # template
    ((1, 16, 10, 10), (32, 16, 3, 3), {"padding": 1, "winograd": 2}),        # Winograd
    ((1, 8, 9, 9), (16, 8, 3, 3), {"padding": 1, "layout": "NCHW"}),
])
def test_engine_dense_conv_clamps_with_and_without_residual(isa, x_shape, w_shape, attrs):
    from hwtune.engine.ops_harness import run_ops
    y_shape = _graph(x_shape, w_shape, attrs, None).shapes["y"]
    for residual in (None, y_shape):
        g = _graph(x_shape, w_shape, dict(attrs, relu=True, relu_max=HI), residual)
        want = run_reference(g)["y"]
        assert (want == 0).any() and (want == np.float32(HI)).any()
        for nth in (1, 2):
            got = run_ops(g, nth=nth, isa=isa)["y"]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("isa", ISAS)
def test_fuse_pass_folds_clip_into_a_dense_conv(isa):
    from hwtune.graph.passes.fuse import fuse_conv, fused_ops
    from hwtune.engine.instance import NativeEngine
    from hwtune.native.isa import isa_index
    x_shape, w_shape = (1, 24, 7, 7), (48, 24, 1, 1)
    g = _graph(x_shape, w_shape, {}, None, clip=(0.0, HI))
    fused = fuse_conv(g)
    assert fused_ops(fused) == {"y": "conv"}
    op = fused.ops[-1]
    assert op.op == "conv2d" and op.resolved["relu"] and op.resolved["relu_max"] == HI
    want = run_reference(g)["y"]
    assert (want == 0).any() and (want == np.float32(HI)).any()
    with NativeEngine(fused, threads=2, isa=isa_index(isa)) as eng:
        eng.run()
        got = eng.outputs()["y"].copy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # A negative floor is not a ReLU6: left alone.
    assert fuse_conv(_graph(x_shape, w_shape, {}, None, clip=(-1.0, HI))).ops[-1].op == "clip"
