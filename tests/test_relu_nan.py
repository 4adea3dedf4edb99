"""ReLU keeps a NaN: relu(NaN) = NaN, relu(inf) = inf, relu(-inf) = 0 and
relu(-0) = -0, as ONNX Runtime and PyTorch return them. A NaN a model's
weights or inputs produce must reach its outputs, not turn into 0 in one
kernel and stay NaN in another (benchmarks/fuzz_onnx.py's WRONG verdicts:
NaN / infinite BatchNormalization weights feeding a Relu).

Checked on every ISA variant this CPU runs (and the engine's own pick, which
HWTUNE_ISA=generic sets to the portable one): the element-wise rows relu,
leaky_relu, prelu and clip; every dense conv kernel path's fused epilogue
(ReLU and ReLU6) with NaN and infinite biases; the int8 ops' float outputs
with a fused ReLU; and small ONNX models (one Relu, LeakyRelu, PRelu, Clip;
Conv+Relu, Conv+BatchNormalization+Relu, Conv+Add+Relu, a depthwise
Conv+Clip, Gemm+Relu) imported and run by the engine and the numpy
reference against ONNX Runtime, NaN positions included."""

import numpy as np
import pytest

from hwtune.native import conv
from hwtune.native import eltwise as ew
from hwtune.native.isa import supported_isas

from test_conv import kernel_paths, make, tolerance

ISAS = supported_isas()
NAN, INF = np.float32(np.nan), np.float32(np.inf)
SPECIAL = np.array([np.nan, -1.0, -0.0, 0.0, 1.0, np.inf, -np.inf, 7.0], np.float32)
# SPECIAL repeated past a few vectors with a tail, so the vector bodies and
# the masked tails of every variant see each value.
LONG = np.tile(SPECIAL, 13)[:101]


def assert_same(got, want, tol=0.0, what=""):
    """NaN where want has NaN, the same infinities, finite values within tol
    of want's scale (0: bit for bit but NaN payloads, -0 included)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN positions")
    np.testing.assert_array_equal(np.isinf(got) * np.sign(got), np.isinf(want) * np.sign(want),
                                  err_msg=f"{what}: infinities")
    fin = np.isfinite(want)
    if tol == 0.0:
        np.testing.assert_array_equal(got[fin], want[fin], err_msg=what)
        np.testing.assert_array_equal(np.signbit(got[fin]), np.signbit(want[fin]),
                                      err_msg=f"{what}: signs of zeros")
    elif fin.any():
        scale = max(float(np.abs(want[fin]).max()), 1e-30)
        err = float(np.abs(got[fin].astype(np.float64) - want[fin]).max())
        assert err <= tol * scale, (what, err, tol * scale)


# -- the element-wise rows -------------------------------------------------------

# What ONNX Runtime 1.x returns for SPECIAL (test_onnx_nodes_match_ort checks
# these against it): NaN kept, -0 kept, -inf to 0.
ORT_SPECIAL = {
    "relu": [NAN, 0.0, -0.0, 0.0, 1.0, INF, 0.0, 7.0],
    "leaky_relu": [NAN, -0.01, -0.0, 0.0, 1.0, INF, -INF, 7.0],
    "prelu": [NAN, -0.25, -0.0, 0.0, 1.0, INF, -INF, 7.0],
    "clip": [NAN, 0.0, -0.0, 0.0, 1.0, 6.0, 0.0, 6.0],
}


def _eltwise(op, x, isa):
    if op == "prelu":
        return ew.eltwise(op, x, np.full_like(x, 0.25), isa=isa, nth=2)
    attrs = {"min": 0.0, "max": 6.0} if op == "clip" else None
    return ew.eltwise(op, x, attrs=attrs, isa=isa, nth=2)


def test_the_table_is_what_ort_returns(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from onnx import helper
    from onnx_models import fin, save
    forms = {"relu": ("Relu", [], {}), "leaky_relu": ("LeakyRelu", [], {"alpha": 0.01}),
             "prelu": ("PRelu", ["slope"], {}), "clip": ("Clip", ["lo", "hi"], {})}
    inits = {"slope": np.array([0.25], np.float32), "lo": np.array(0.0, np.float32),
             "hi": np.array(6.0, np.float32)}
    for op, (onnx_op, extra, attrs) in forms.items():
        path = save([helper.make_node(onnx_op, ["x"] + extra, ["y"], **attrs)],
                    [fin("x", [8])], [fin("y", [8])], {k: inits[k] for k in extra},
                    tmp_path / f"{op}.onnx")
        got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
            None, {"x": SPECIAL})[0]
        assert_same(got, np.array(ORT_SPECIAL[op], np.float32), what=op)


@pytest.mark.parametrize("op", sorted(ORT_SPECIAL))
@pytest.mark.parametrize("isa", ISAS)
def test_eltwise_rows_keep_nan(isa, op):
    want = np.tile(np.array(ORT_SPECIAL[op], np.float32), 13)[:101]
    assert_same(_eltwise(op, LONG, isa), want, what=f"{isa}/{op}")


# -- the dense conv epilogues ---------------------------------------------------------

# (N, C, H, W, K, R, S, stride, pad): the GEMM path, the template (also on a
# 1x1 image and with an oc tail), stride 2, Winograd; every path of each by
# kernel_paths (tests/test_conv.py), forced where the defaults skip it.
CONV_CASES = [
    (1, 24, 15, 17, 40, 1, 1, 1, 0),
    (1, 72, 1, 1, 48, 1, 1, 1, 0),
    (1, 8, 9, 10, 20, 3, 3, 1, 1),
    (1, 6, 12, 9, 10, 5, 5, 2, 2),
    (1, 16, 10, 10, 24, 3, 3, 1, 1),
    (2, 3, 9, 11, 16, 3, 3, 2, 1),
]


@pytest.mark.parametrize("relu_max", [None, 0.75], ids=["relu", "relu6"])
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "x".join(map(str, c[:7])))
def test_conv_epilogues_keep_nan(case, isa, relu_max):
    """Output channels 0, 1, 2 take a NaN, +inf and -inf bias: NaN, inf (or
    the ReLU6 bound) and 0 on every kernel path, as the C reference and ONNX
    Runtime give them."""
    x, w, b, stride, pad = make(case, b_range=0.5)
    b[:3] = [NAN, INF, -INF]
    kw = dict(stride=stride, pad=pad, relu=True, relu_max=relu_max)
    want = conv.conv2d_ref(x, w, b, **kw)
    assert np.isnan(want[:, 0]).all() and not np.isnan(want[:, 1:]).any()
    assert (want[:, 1] == (INF if relu_max is None else np.float32(relu_max))).all()
    assert (want[:, 2] == 0).all()
    tol = tolerance(case[1], case[5], case[6])
    for layout, params in kernel_paths(case, isa):
        for nth in (1, 3):
            got = conv.conv2d(x, w, b, layout=layout, params=params, isa=isa, nth=nth, **kw)
            assert_same(got, want, tol, f"{layout} {params} nth={nth}")


# -- the int8 ops' float outputs ------------------------------------------------------

def _quant_model(op, x_shape, params, attrs):
    from hwtune.graph import load_model
    return load_model({"format_version": 1, "name": "nan_" + op, "seed": 3,
                       "inputs": [{"name": "x", "shape": list(x_shape)}],
                       "params": [{"name": p, "shape": list(v.shape)} for p, v in params.items()],
                       "ops": [{"name": "y", "op": op, "inputs": ["x"] + list(params),
                                "attrs": attrs}],
                       "outputs": ["y"]})


# (op, x shape, weight shape, groups): the int8 GEMM, the im2col and direct
# int8 convs, the depthwise int8 kernel
QUANT_CASES = [
    ("qmatmul", (20, 48), (48, 24), 1),
    ("qconv2d", (2, 12, 7, 9), (20, 6, 1, 1), 2),
    ("qconv2d", (2, 20, 9, 11), (40, 20, 3, 3), 1),
    ("qconv2d", (1, 24, 14, 13), (24, 1, 5, 5), 24),
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", QUANT_CASES, ids=lambda c: f"{c[0]}-{c[1]}-g{c[3]}")
def test_int8_float_outputs_keep_nan(case, isa):
    """A float (dequantized) output with relu: channels 0, 1, 2 take a NaN,
    +inf and -inf bias, as the float ops do."""
    from hwtune.engine.ops_harness import run_ops
    from hwtune.graph.reference import run_reference
    op, x_shape, w_shape, groups = case
    rng = np.random.default_rng(7)
    n = w_shape[1] if op == "qmatmul" else w_shape[0]
    params = {"w": rng.integers(-128, 128, w_shape).astype(np.float32),
              "ws": rng.uniform(0.001, 0.02, n).astype(np.float32),
              "wz": np.zeros(n, np.float32),
              "bias": rng.uniform(-2, 2, n).astype(np.float32)}
    params["bias"][:3] = [NAN, INF, -INF]
    attrs = {"a_scale": 0.05, "a_zero": 131, "out": "f32", "relu": True}
    if op == "qconv2d":
        attrs.update(stride=1, padding=w_shape[2] // 2, groups=groups)
    g = _quant_model(op, x_shape, params, attrs)
    inputs = {"x": rng.integers(0, 256, x_shape).astype(np.float32)}
    want = run_reference(g, inputs=inputs, params=params)["y"]
    axis = -1 if op == "qmatmul" else 1
    ch = np.moveaxis(want, axis, 0)
    assert np.isnan(ch[0]).all() and (ch[1] == INF).all() and (ch[2] == 0).all()
    for nth in (1, 3):
        got = run_ops(g, nth=nth, isa=isa, inputs=inputs, params=params)["y"]
        assert_same(got, want, 1e-6, f"nth={nth}")


# -- ONNX models against ONNX Runtime --------------------------------------------------

def _onnx_case(kind):
    """(nodes, inputs, outputs, initializers, feeds) of one small model."""
    from onnx import helper
    from onnx_models import fin
    rng = np.random.default_rng(11)
    f32 = np.float32
    if kind in ("Relu", "LeakyRelu", "PRelu", "Clip"):
        x = np.tile(SPECIAL, 6).reshape(1, 3, 4, 4)
        ins, inits = ["x"], {}
        attrs = {"alpha": 0.1} if kind == "LeakyRelu" else {}
        if kind == "PRelu":  # a per-channel slope: the binary prelu row
            inits["slope"] = np.array([0.25, 0.5, 2.0], f32).reshape(3, 1, 1)
            ins.append("slope")
        if kind == "Clip":
            inits.update(lo=np.array(0.0, f32), hi=np.array(6.0, f32))
            ins += ["lo", "hi"]
        nodes = [helper.make_node(kind, ins, ["y"], **attrs)]
        return nodes, [fin("x", [1, 3, 4, 4])], [fin("y", [1, 3, 4, 4])], inits, {"x": x}
    x = rng.uniform(-1, 1, (1, 8, 9, 9)).astype(f32)
    x[0, 3, 4, 4] = NAN  # a NaN input spreads through one window of every channel
    w = rng.uniform(-0.5, 0.5, (16, 8, 3, 3)).astype(f32)
    b = rng.uniform(-0.5, 0.5, 16).astype(f32)
    b[:3] = [NAN, INF, -INF]
    conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])
    inits = {"w": w, "b": b}
    ins, feeds, y = [fin("x", [1, 8, 9, 9])], {"x": x}, [1, 16, 9, 9]
    if kind == "Conv+Relu":
        nodes = [conv, helper.make_node("Relu", ["c"], ["y"])]
    elif kind == "Conv+BatchNormalization+Relu":
        # the fuzzer's WRONG verdicts: NaN / infinite / negative-variance
        # batch norm weights, folded into the conv's weights and bias
        scale, shift = rng.uniform(0.5, 1.5, 16).astype(f32), rng.uniform(-1, 1, 16).astype(f32)
        mean, var = rng.uniform(-1, 1, 16).astype(f32), rng.uniform(0.5, 2, 16).astype(f32)
        scale[5], shift[6], mean[7], var[8], var[9] = NAN, INF, -INF, -1.0, NAN
        inits.update(s=scale, t=shift, m=mean, v=var)
        nodes = [conv, helper.make_node("BatchNormalization", ["c", "s", "t", "m", "v"], ["n"]),
                 helper.make_node("Relu", ["n"], ["y"])]
    elif kind == "Conv+Add+Relu":  # the residual epilogue
        r = rng.uniform(-1, 1, (1, 16, 9, 9)).astype(f32)
        r[0, 5, 0, 0], r[0, 6, 2, 3], r[0, 7, 8, 8] = NAN, INF, -INF
        ins.append(fin("r", [1, 16, 9, 9]))
        feeds["r"] = r
        nodes = [conv, helper.make_node("Add", ["c", "r"], ["a"]),
                 helper.make_node("Relu", ["a"], ["y"])]
    elif kind == "depthwise Conv+Clip":  # ReLU6 in the depthwise kernel
        inits = {"w": rng.uniform(-0.5, 0.5, (8, 1, 3, 3)).astype(f32), "b": b[:8],
                 "lo": np.array(0.0, f32), "hi": np.array(6.0, f32)}
        y = [1, 8, 9, 9]
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], group=8),
                 helper.make_node("Clip", ["c", "lo", "hi"], ["y"])]
    else:  # Gemm+Relu
        a = rng.uniform(-1, 1, (4, 32)).astype(f32)
        a[2, 5] = NAN
        ins, feeds, y = [fin("a", [4, 32])], {"a": a}, [4, 16]
        inits = {"w": rng.uniform(-0.5, 0.5, (32, 16)).astype(f32), "b": b}
        nodes = [helper.make_node("Gemm", ["a", "w", "b"], ["g"]),
                 helper.make_node("Relu", ["g"], ["y"])]
    return nodes, ins, [fin("y", y)], inits, feeds


ONNX_CASES = ["Relu", "LeakyRelu", "PRelu", "Clip", "Conv+Relu", "Conv+BatchNormalization+Relu",
              "Conv+Add+Relu", "depthwise Conv+Clip", "Gemm+Relu"]


@pytest.mark.usefixtures("scratch_cache")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # sqrt of a negative variance
@pytest.mark.parametrize("kind", ONNX_CASES)
def test_onnx_models_match_ort_with_nan(kind, tmp_path):
    """The engine (the conv epilogues fused, as `hwtune run` fuses them) and
    the numpy reference give ONNX Runtime's NaNs, infinities and values."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from conftest import run_engine
    from hwtune.graph import load_model, run_reference
    from hwtune.graph.passes.fuse import fuse_conv
    from hwtune.onnx.importer import import_onnx
    from onnx_models import save
    nodes, ins, outs, inits, feeds = _onnx_case(kind)
    path = save(nodes, ins, outs, inits, tmp_path / "m.onnx")
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    assert np.isnan(want).any()
    import_onnx(path, str(tmp_path / "m.json"))
    g = load_model(str(tmp_path / "m.json"))
    fused = fuse_conv(g)
    if "Conv" in kind:
        assert any(op.op == "conv2d" and op.resolved.get("relu") for op in fused.ops), kind
    tol = 0.0 if "Conv" not in kind and "Gemm" not in kind else 1e-4
    y = g.outputs[0]
    assert_same(run_reference(g, feeds)[y], want, tol, "numpy reference")
    assert_same(run_engine(fused, feeds, threads=2)[y], want, tol, "engine")
