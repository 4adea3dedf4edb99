"""conv3d (NCDHW, the video classifiers' Conv3d): the numpy reference
against a float64 loop over the definition, and the engine (each output
frame as one 2-D CONV of its stacked input frames, engine/ops/conv3d.c)
against the reference on every ISA variant this CPU supports at 1, 2 and 3
threads: odd sizes, stride 2 in time and space, padding in time that puts
whole frames in the zeros (left out: each range of taps inside the input
its own plan), an output frame with no tap inside the input, asymmetric
padding, dilation, a bias-free conv and the fused ReLU, the residual
epilogue, output-channel slices (fewer frames than threads)."""

import itertools

import numpy as np
import pytest

from hwtune.engine.ops_harness import run_ops
from hwtune.graph import load_model
from hwtune.graph.errors import GraphError
from hwtune.graph.reference import init_params, run_reference
from hwtune.native.isa import supported_isas

from test_conv_group import ATOL, RTOL, reference_matches_loops  # tests/ is on sys.path


def _model(x, w, attrs, bias=True, residual=None):
    tensors = [("x", x, False), ("w", w, True)] + ([("b", (w[0],), True)] if bias else [])
    if residual is not None:
        tensors.append(("r", residual, False))
    return load_model({
        "format_version": 1, "name": "c3d", "seed": 5,
        "inputs": [{"name": n, "shape": list(s)} for n, s, p in tensors if not p],
        "params": [{"name": n, "shape": list(s)} for n, s, p in tensors if p],
        "ops": [{"name": "conv", "op": "conv3d", "inputs": [n for n, _, _ in tensors],
                 "outputs": ["y"], "attrs": attrs}],
        "outputs": ["y"]})


# (x, w, attrs): r3d_18's stem (3x7x7, spatial stride 2), its 3x3x3 blocks
# and the stride-2 downsampling ones, r2plus1d's 1x3x3 / 3x1x1 factors,
# a 1x1x1 stride-2 shortcut, odd sizes, asymmetric padding, dilation.
CASES = [
    ((1, 3, 4, 13, 11), (8, 3, 3, 7, 7), {"stride": [1, 2, 2], "padding": [1, 3, 3]}),
    ((1, 5, 5, 9, 7), (6, 5, 3, 3, 3), {"padding": [1, 1, 1]}),
    ((2, 4, 5, 9, 10), (32, 4, 3, 3, 3), {"stride": [2, 2, 2], "padding": [1, 1, 1]}),
    ((1, 6, 3, 8, 8), (7, 6, 1, 3, 3), {"padding": [0, 1, 1], "stride": [1, 2, 2]}),
    # time-only kernels (R(2+1)D's 3x1x1): per frame a 1x1 conv over 3C channels
    ((1, 6, 5, 6, 5), (4, 6, 3, 1, 1), {"padding": [1, 0, 0], "stride": [2, 1, 1]}),
    ((2, 5, 6, 3, 4), (7, 5, 3, 1, 1), {"padding": [2, 0, 0], "padding_end": [0, 0, 0],
                                        "dilation": [2, 1, 1]}),
    ((1, 8, 3, 7, 9), (16, 8, 1, 1, 1), {"stride": [2, 2, 2]}),
    ((1, 3, 7, 8, 9), (5, 3, 2, 3, 2), {"padding": [1, 0, 1], "padding_end": [0, 2, 0],
                                        "dilation": [2, 1, 2]}),
    ((1, 2, 6, 5, 5), (3, 2, 3, 3, 3), {"dilation": [2, 2, 1], "padding": [2, 2, 1],
                                        "stride": [3, 1, 1]}),
    ((1, 4, 2, 4, 4), (32, 4, 3, 3, 3), {"padding": [1, 1, 1], "stride": [2, 1, 1]}),  # OD 1
    # the second output frame's taps both fall in the padding: the bias alone
    ((1, 3, 2, 5, 5), (4, 3, 2, 3, 3), {"dilation": [3, 1, 1], "padding": [2, 1, 1],
                                        "padding_end": [1, 1, 1]}),
]


def _id(case):
    x, w, a = case
    return f"{'x'.join(map(str, x))}-w{'x'.join(map(str, w))}"


def _triple(attrs, key, default):
    return tuple(attrs.get(key, [default] * 3))


def _loop_reference(x, w, b, attrs):
    """The definition, one output element at a time in float64."""
    s, d = _triple(attrs, "stride", 1), _triple(attrs, "dilation", 1)
    p = _triple(attrs, "padding", 0)
    pe = tuple(attrs.get("padding_end", p))
    n, c, size = x.shape[0], x.shape[1], x.shape[2:]
    k = w.shape[2:]
    out = [(size[a] + p[a] + pe[a] - (k[a] - 1) * d[a] - 1) // s[a] + 1 for a in range(3)]
    y = np.zeros((n, w.shape[0], *out))
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    for o in itertools.product(*(range(v) for v in out)):
        acc = np.zeros((n, w.shape[0]))
        for t in itertools.product(*(range(v) for v in k)):
            pos = [o[a] * s[a] + t[a] * d[a] - p[a] for a in range(3)]
            if all(0 <= pos[a] < size[a] for a in range(3)):
                acc += x64[:, :, pos[0], pos[1], pos[2]] @ w64[:, :, t[0], t[1], t[2]].T
        y[:, :, o[0], o[1], o[2]] = acc + (0 if b is None else b)
    return y


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_reference_is_the_definition(case):
    reference_matches_loops(_model, _loop_reference, case)


# Float accumulation of up to C*KD*KH*KW = 147 products of |x| <= 2 against
# the float64 reference: test_conv_group's bounds (RTOL, ATOL) hold here too.


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_engine_matches_reference(case, isa):
    x_shape, w_shape, attrs = case
    for bias, relu in ((True, False), (False, True)):
        g = _model(x_shape, w_shape, dict(attrs, relu=relu), bias=bias)
        inputs = {"x": np.random.default_rng(3).uniform(-2, 2, x_shape).astype(np.float32)}
        want = run_reference(g, inputs=inputs)["y"]
        if relu:
            assert (want == 0).any() and (want > 0).any()
        for nth in (1, 2, 3):
            got = run_ops(g, nth=nth, isa=isa, inputs=inputs)["y"]
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL,
                                       err_msg=f"nth={nth} bias={bias} relu={relu}")


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("case", [CASES[1], CASES[2], CASES[4], CASES[5], CASES[9],
                                  CASES[10]], ids=_id)
def test_engine_residual_epilogue(case, isa):
    """The residual added in the copy to the output, then the ReLU (what the
    fusion pass makes of conv3d -> add -> relu; it gives a bias-free conv a
    zero bias, the residual being the 4th input)."""
    x_shape, w_shape, attrs = case
    y_shape = tuple(_model(x_shape, w_shape, attrs).shapes["y"])
    for relu in (True, False):
        g = _model(x_shape, w_shape, dict(attrs, relu=relu), residual=y_shape)
        rng = np.random.default_rng(3)
        inputs = {"x": rng.uniform(-2, 2, x_shape).astype(np.float32),
                  "r": rng.uniform(-4, 4, y_shape).astype(np.float32)}
        want = run_reference(g, inputs=inputs)["y"]
        plain = run_reference(_model(x_shape, w_shape, attrs),
                              inputs={"x": inputs["x"]},
                              params=init_params(g))["y"]
        expect = plain.astype(np.float64) + inputs["r"]
        np.testing.assert_allclose(want, np.maximum(expect, 0) if relu else expect,
                                   rtol=1e-6, atol=1e-6)
        for nth in (1, 2, 3):
            got = run_ops(g, nth=nth, isa=isa, inputs=inputs)["y"]
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL,
                                       err_msg=f"nth={nth} relu={relu}")


def test_fusion_pass_takes_the_residual_and_relu():
    """conv3d -> add -> relu (r3d_18's block end) becomes one conv3d whose
    engine output is the unfused graph's."""
    from hwtune.engine.instance import NativeEngine
    from hwtune.graph.passes.fuse import fuse_conv, fused_ops
    x, w = (1, 4, 3, 6, 5), (4, 4, 3, 3, 3)
    g = load_model({
        "format_version": 1, "name": "block", "seed": 5,
        "inputs": [{"name": "x", "shape": list(x)}],
        "params": [{"name": "w", "shape": list(w)}],
        "ops": [{"name": "conv", "op": "conv3d", "inputs": ["x", "w"], "outputs": ["c"],
                 "attrs": {"padding": [1, 1, 1]}},
                {"name": "add", "op": "add", "inputs": ["c", "x"], "outputs": ["a"]},
                {"name": "relu", "op": "relu", "inputs": ["a"], "outputs": ["y"]}],
        "outputs": ["y"]})
    fused = fuse_conv(g)
    assert [op.op for op in fused.ops] == ["conv3d"]
    assert fused_ops(fused) == {"add": "conv", "relu": "conv"}
    inputs = {"x": np.random.default_rng(2).standard_normal(x).astype(np.float32)}
    want = run_reference(g, inputs)["y"]
    assert (want == 0).any() and (want > 0).any()
    with NativeEngine(g, threads=2) as eng:
        eng.set_input("x", inputs["x"])
        eng.run()
        got = eng.outputs()["y"]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("x, w, attrs, what", [
    ((1, 3, 4, 8, 8), (4, 2, 3, 3, 3), {}, "input channels"),
    ((1, 3, 4, 8, 8), (4, 3, 3, 3), {}, "weights must be"),
    ((1, 3, 2, 8, 8), (4, 3, 3, 3, 3), {}, "does not fit"),
    ((1, 3, 4, 8, 8), (4, 3, 3, 3, 3), {"stride": [1, 2]}, "3 values"),
    ((1, 3, 4, 8, 8), (4, 3, 3, 3, 3), {"padding": [3, 1, 1]}, "smaller than"),
])
def test_bad_shapes_are_one_clear_error(x, w, attrs, what):
    with pytest.raises(GraphError, match=what):
        _model(x, w, attrs)
