"""The quantized op family (issue #43) in C (engine/ops/quant.c: qmatmul,
qconv2d, dynamic_quantize) and the quantize/dequantize element-wise rows
against their numpy references (src/hwtune/graph/ops/quant.py, eltwise.py),
on every ISA variant this CPU runs, 1/2/3 thread shares: u8 and s8
activations, per-tensor and per-channel scales, weight zero points,
every output form, ReLU, padding, strides, groups."""

import numpy as np
import pytest

from hwtune.engine.ops_harness import run_ops
from hwtune.graph import load_model
from hwtune.graph.reference import run_reference
from hwtune.native.isa import supported_isas


def _model(op, inputs, params, attrs, outputs=("y",)):
    node = {"name": outputs[0], "op": op, "inputs": [t["name"] for t in inputs + params],
            "attrs": attrs}
    if len(outputs) > 1:
        node["outputs"] = list(outputs)
    return load_model({"format_version": 1, "name": "one_" + op, "seed": 3,
                       "inputs": inputs, "params": params, "ops": [node],
                       "outputs": list(outputs)})


def _ints(rng, shape, signed):
    lo, hi = (-128, 127) if signed else (0, 255)
    return rng.integers(lo, hi + 1, shape).astype(np.float32)


def _check(g, inputs, params, out, isa):
    want = run_reference(g, inputs=inputs, params=params)
    for nth in (1, 2, 3):
        got = run_ops(g, nth=nth, isa=isa, inputs=inputs, params=params)
        for name in g.outputs:
            if out in ("u8", "s8", "acc"):
                # integers: equal (the kernel's float ops are the reference's)
                np.testing.assert_array_equal(got[name], want[name], err_msg=f"nth={nth}")
            else:
                np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6,
                                           err_msg=f"nth={nth}")


MM_CASES = [  # (a shape, N, a_signed, per_channel, zb, out, relu)
    ((1, 5), 3, False, False, False, "f32", False),
    ((7, 33), 40, False, True, False, "u8", True),
    ((2, 9, 64), 70, True, True, True, "s8", False),
    ((13, 130), 17, False, False, True, "acc", False),
    ((20, 48), 96, True, False, False, "f32", True),
]


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("case", MM_CASES, ids=lambda c: f"{c[0]}x{c[1]}-{c[5]}")
def test_qmatmul_matches_reference(case, isa):
    a_shape, n, a_signed, per_channel, zb, out, relu = case
    k = a_shape[-1]
    rng = np.random.default_rng(k * n)
    nc = n if per_channel else 1
    params = {"b": _ints(rng, (k, n), True),
              "ws": rng.uniform(0.001, 0.02, nc).astype(np.float32),
              "wz": (rng.integers(-5, 6, nc) if zb else np.zeros(nc)).astype(np.float32),
              "bias": rng.uniform(-2, 2, n).astype(np.float32)}
    specs = [{"name": p, "shape": list(v.shape)} for p, v in params.items()]
    if out == "acc":  # the MatMulInteger form: no bias
        specs, params = specs[:3], {p: params[p] for p in ("b", "ws", "wz")}
    attrs = {"a_scale": 0.05, "a_zero": -3 if a_signed else 131, "a_signed": a_signed,
             "out": out, "y_scale": 0.25, "y_zero": 7 if out == "s8" else 120, "relu": relu}
    g = _model("qmatmul", [{"name": "a", "shape": list(a_shape)}], specs, attrs)
    _check(g, {"a": _ints(rng, a_shape, a_signed)}, params, out, isa)


@pytest.mark.parametrize("isa", supported_isas())
def test_qmatmul_dynamic_zero_point(isa):
    """a_zero_t: the zero point read at run time (DynamicQuantizeLinear's)."""
    rng = np.random.default_rng(1)
    g = load_model({"format_version": 1, "name": "dyn", "seed": 1,
                    "inputs": [{"name": "x", "shape": [6, 24]}],
                    "params": [{"name": "b", "shape": [24, 10]}, {"name": "ws", "shape": [1]},
                               {"name": "wz", "shape": [1]}, {"name": "bias", "shape": [10]}],
                    "ops": [{"name": "dq", "op": "dynamic_quantize", "inputs": ["x"],
                             "outputs": ["xq", "xs", "xz"]},
                            {"name": "mm", "op": "qmatmul",
                             "inputs": ["xq", "b", "ws", "wz", "bias", "xz"],
                             "attrs": {"out": "acc"}}],
                    "outputs": ["mm", "xs", "xz"]})
    params = {"b": _ints(rng, (24, 10), True), "ws": np.ones(1, np.float32),
              "wz": np.zeros(1, np.float32), "bias": np.zeros(10, np.float32)}
    x = rng.normal(0.3, 2.0, (6, 24)).astype(np.float32)
    _check(g, {"x": x}, params, "acc", isa)



@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("per_column", [False, True])
def test_qmatmul_run_time_scale(isa, per_column):
    """scale_t: the run-time a_scale * w_scale of quantize_dynamic's Mul (here
    the dynamic scale times per-column weight scales, or one value), a bias,
    output f32; N spans several column tiles."""
    rng = np.random.default_rng(2)
    n = 70
    ns = n if per_column else 1
    g = load_model({"format_version": 1, "name": "dyn_scale", "seed": 1,
                    "inputs": [{"name": "x", "shape": [2, 9, 40]}],
                    "params": [{"name": "b", "shape": [40, n]}, {"name": "ws", "shape": [1]},
                               {"name": "wz", "shape": [1]}, {"name": "bias", "shape": [n]},
                               {"name": "wsc", "shape": [ns]}],
                    "ops": [{"name": "dq", "op": "dynamic_quantize", "inputs": ["x"],
                             "outputs": ["xq", "xs", "xz"]},
                            {"name": "sc", "op": "mul", "inputs": ["xs", "wsc"]},
                            {"name": "mm", "op": "qmatmul",
                             "inputs": ["xq", "b", "ws", "wz", "bias", "xz", "sc"],
                             "attrs": {"out": "f32"}}],
                    "outputs": ["mm"]})
    params = {"b": _ints(rng, (40, n), True), "ws": np.ones(1, np.float32),
              "wz": np.zeros(1, np.float32),
              "bias": rng.normal(0, 1, n).astype(np.float32),
              "wsc": rng.uniform(0.001, 0.01, ns).astype(np.float32)}
    x = rng.normal(0.3, 2.0, (2, 9, 40)).astype(np.float32)
    _check(g, {"x": x}, params, "f32", isa)


def test_qmatmul_run_time_scale_needs_f32_output():
    with pytest.raises(Exception, match="scale_t"):
        load_model({"format_version": 1, "name": "bad", "seed": 1,
                    "inputs": [{"name": "x", "shape": [2, 4]}, {"name": "z", "shape": [1]},
                               {"name": "s", "shape": [1]}],
                    "params": [{"name": "b", "shape": [4, 3]}, {"name": "ws", "shape": [1]},
                               {"name": "wz", "shape": [1]}, {"name": "bias", "shape": [3]}],
                    "ops": [{"name": "mm", "op": "qmatmul",
                             "inputs": ["x", "b", "ws", "wz", "bias", "z", "s"],
                             "attrs": {"out": "u8", "y_scale": 0.1}}],
                    "outputs": ["mm"]})

def _dw(x_shape, k, stride, out, relu, zb=False, per_channel=True):
    """A CONV_CASES row of a depthwise conv with u8 activations: one filter
    per channel, "same" padding."""
    c = x_shape[1]
    return (x_shape, c, k, stride, k // 2, c, False, per_channel, zb, out, relu)


CONV_CASES = [  # (x shape, oc, k, stride, pad, groups, a_signed, per_channel, zb, out, relu)
    ((1, 3, 9, 9), 8, 3, 1, 1, 1, False, True, False, "u8", True),
    ((2, 4, 7, 6), 6, 3, 2, 1, 2, True, False, True, "f32", False),
    ((1, 16, 5, 5), 40, 1, 1, 0, 1, False, True, False, "s8", False),
    ((1, 8, 6, 6), 8, 3, 1, 1, 8, False, True, False, "u8", True),  # depthwise
    ((2, 12, 7, 9), 20, 1, 2, 0, 1, True, True, True, "u8", False),  # 1x1 strided
    # 1x1, stride 1, no padding: the GEMM reads x's channel planes (no im2col)
    ((2, 12, 7, 9), 20, 1, 1, 0, 2, True, False, True, "f32", True),
    ((1, 64, 20, 20), 72, 1, 1, 0, 1, False, True, True, "u8", False),
    # ungrouped, symmetric weights: the direct int8 conv (kernels/qconv),
    # channels-last u8 rows per work unit; the stem's 3 channels pad to 4
    ((2, 20, 9, 11), 40, 3, 2, 1, 1, True, True, False, "f32", True),
    ((1, 3, 15, 13), 16, 7, 2, 3, 1, False, True, False, "u8", True),
    ((1, 64, 20, 20), 72, 1, 1, 0, 1, False, False, False, "u8", False),
    ((2, 36, 8, 8), 70, 1, 2, 0, 1, False, True, False, "s8", True),
    # depthwise with u8 activations and a u8 / float output: the depthwise
    # int8 kernel (kernels/qdw): 3x3 and 5x5, stride 1 and 2, channel counts
    # that fill AVX-512's 16 lanes, AVX2's 8 only, or neither (the portable
    # row), weight zero points, images narrower than a register block
    _dw((1, 32, 9, 11), 3, 1, "u8", True),
    _dw((2, 48, 12, 12), 3, 2, "u8", False, zb=True),
    _dw((1, 24, 14, 13), 5, 2, "f32", True),
    _dw((1, 20, 7, 7), 5, 1, "u8", True, zb=True, per_channel=False),
    _dw((3, 16, 3, 4), 3, 1, "f32", False),
    _dw((1, 64, 28, 30), 3, 1, "u8", False),
    # channels that are not whole 4-byte groups: float rows to bytes by the
    # scalar loop instead of the int8 conv's converter
    _dw((1, 6, 8, 9), 3, 2, "u8", True, zb=True),
]


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}-oc{c[1]}-g{c[5]}-{c[9]}")
def test_qconv2d_matches_reference(case, isa):
    x_shape, oc, k, stride, pad, groups, a_signed, per_channel, zb, out, relu = case
    ic = x_shape[1]
    rng = np.random.default_rng(oc * k)
    nc = oc if per_channel else 1
    params = {"w": _ints(rng, (oc, ic // groups, k, k), True),
              "ws": rng.uniform(0.001, 0.02, nc).astype(np.float32),
              "wz": (rng.integers(-5, 6, nc) if zb else np.zeros(nc)).astype(np.float32),
              "bias": rng.uniform(-2, 2, oc).astype(np.float32)}
    specs = [{"name": p, "shape": list(v.shape)} for p, v in params.items()]
    attrs = {"stride": stride, "padding": pad, "groups": groups, "a_scale": 0.05,
             "a_zero": -3 if a_signed else 131, "a_signed": a_signed, "out": out,
             "y_scale": 0.5, "y_zero": 7 if out == "s8" else 120, "relu": relu}
    g = _model("qconv2d", [{"name": "x", "shape": list(x_shape)}], specs, attrs)
    _check(g, {"x": _ints(rng, x_shape, a_signed)}, params, out, isa)


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("dilation", [[2, 1], [1, 2]])
def test_qconv2d_dilated_matches_reference(dilation, isa):
    """3x3 windows with a row or column dilation (im2col's 3x3 copy takes
    row dilations, the general loop column ones), padded borders."""
    rng = np.random.default_rng(8)
    params = {"w": _ints(rng, (10, 6, 3, 3), True), "ws": np.full(1, 0.01, np.float32),
              "wz": np.zeros(1, np.float32), "bias": rng.uniform(-2, 2, 10).astype(np.float32)}
    specs = [{"name": p, "shape": list(v.shape)} for p, v in params.items()]
    attrs = {"padding": 1, "dilation": dilation, "a_scale": 0.05, "a_zero": 131, "out": "u8",
             "y_scale": 0.5, "y_zero": 120}
    g = _model("qconv2d", [{"name": "x", "shape": [1, 6, 11, 12]}], specs, attrs)
    _check(g, {"x": _ints(rng, (1, 6, 11, 12), False)}, params, "u8", isa)


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("op", ["quantize_u8", "quantize_s8", "dequantize"])
def test_quantize_rows_match_reference(op, isa):
    rng = np.random.default_rng(2)
    x = rng.normal(0, 40, (3, 67)).astype(np.float32)
    x[0, :4] = [0.5, 1.5, -2.5, np.nan]  # ties go to even; NaN to the low end
    if op == "dequantize":
        x = np.rint(np.clip(x, 0, 255))
        x[0, 3] = 0
    g = _model(op, [{"name": "x", "shape": [3, 67]}], [],
               {"scale": 0.5 if op != "dequantize" else 0.037, "zero_point": 3.0})
    want = run_reference(g, inputs={"x": x})["y"]
    for nth in (1, 2):
        got = run_ops(g, nth=nth, isa=isa, inputs={"x": x})["y"]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("out", ["u8", "s8"])
def test_qadd_matches_reference_and_the_three_rows(out, isa):
    """qadd: the reference, and the same values as dequantize, add, quantize
    (the element-wise rows it replaces), bit for bit."""
    rng = np.random.default_rng(4)
    shape = [2, 5, 7, 9]
    a, b = _ints(rng, shape, False), _ints(rng, shape, True)
    a[0, 0, 0, :3] = [0, 255, 128]
    attrs = {"a_scale": 0.031, "a_zero": 120, "b_scale": 0.05, "b_zero": -4,
             "y_scale": 0.043 if out == "u8" else 0.061, "y_zero": 7, "out": out}
    g = _model("qadd", [{"name": "a", "shape": shape}, {"name": "b", "shape": shape}], [],
               attrs)
    inputs = {"a": a, "b": b}
    want = run_reference(g, inputs=inputs)["y"]
    three = load_model({
        "format_version": 1, "name": "three", "seed": 3,
        "inputs": [{"name": "a", "shape": shape}, {"name": "b", "shape": shape}],
        "params": [],
        "ops": [{"name": "da", "op": "dequantize", "inputs": ["a"],
                 "attrs": {"scale": 0.031, "zero_point": 120.0}},
                {"name": "db", "op": "dequantize", "inputs": ["b"],
                 "attrs": {"scale": 0.05, "zero_point": -4.0}},
                {"name": "s", "op": "add", "inputs": ["da", "db"]},
                {"name": "y", "op": f"quantize_{out}", "inputs": ["s"],
                 "attrs": {"scale": attrs["y_scale"], "zero_point": 7.0}}],
        "outputs": ["y"]})
    np.testing.assert_array_equal(run_reference(three, inputs=inputs)["y"], want)
    assert want.min() < want.max()  # not one saturated value
    for nth in (1, 2, 3):
        got = run_ops(g, nth=nth, isa=isa, inputs=inputs)["y"]
        np.testing.assert_array_equal(got, want, err_msg=f"nth={nth}")


def test_qadd_refuses_different_shapes():
    with pytest.raises(Exception, match="one shape"):
        _model("qadd", [{"name": "a", "shape": [2, 3]}, {"name": "b", "shape": [3]}], [], {})


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("n", [7, 16, 101])
def test_dynamic_quantize_matches_reference(n, isa):
    """The range scan's 16 lanes and its tail: the extremes placed in the
    tail (or a lane), a -0.0 among them; all positive (min 0)."""
    rng = np.random.default_rng(n)
    for case in range(3):
        x = rng.normal(0.5, 2.0, n).astype(np.float32)
        if case == 0:
            x[-1], x[0] = -9.5, 7.25  # min in the tail (or a lane when n = 16)
            x[n // 2] = -0.0
        elif case == 1:
            x = np.abs(x) + 0.1  # min(x, 0) = 0
        g = _model("dynamic_quantize", [{"name": "x", "shape": [n]}], [], {},
                   outputs=("y", "s", "z"))
        want = run_reference(g, inputs={"x": x})
        for nth in (1, 2, 3):
            got = run_ops(g, nth=nth, isa=isa, inputs={"x": x})
            for k in ("y", "s", "z"):
                np.testing.assert_array_equal(got[k], want[k], err_msg=f"{k} case {case}")


def _chain(wz_b, residual=False, width=8, batch=2, pool=False):
    """x -> qconv a (3x3, pad 1, u8) -> qconv b (1x1, u8) -> qconv c (3x3,
    stride 2, f32): a's and b's outputs are read by int8 convs alone, so the
    lowered graph carries them as u8 channels-last bytes
    (hwtune.engine.qlayout). wz_b: b's weight zero point (nonzero: b runs
    the GEMM path, which expands its byte input back to float32).
    residual: c reads qadd(b, a) instead of b (a bottleneck's shape).
    width 40, batch 1: several column panels of one image, which the convs
    reading bytes split by channels across threads.
    pool: b reads a 3x3 stride-2 max pool2d "p" of a (ResNet's stem pool)."""
    rng = np.random.default_rng(11)
    params, ops = {}, []
    wb = width if residual else width + 4
    chans = {"a": (6, width, 3, 1, 1), "b": (width, wb, 1, 1, 0), "c": (wb, 5, 3, 2, 1)}
    src = "x"
    for name, (ic, oc, k, stride, pad) in chans.items():
        if name == "c" and residual:
            ops.append({"name": "r", "op": "qadd", "inputs": ["b", "a"],
                        "attrs": {"a_scale": 0.5, "a_zero": 120, "b_scale": 0.5,
                                  "b_zero": 120, "y_scale": 0.7, "y_zero": 100}})
            src = "r"
        if name == "b" and pool:
            ops.append({"name": "p", "op": "pool2d", "inputs": ["a"],
                        "attrs": {"mode": "max", "kernel": 3, "stride": 2, "padding": 1}})
            src = "p"
        params[f"{name}_w"] = _ints(rng, (oc, ic, k, k), True)
        params[f"{name}_ws"] = rng.uniform(0.001, 0.02, oc).astype(np.float32)
        params[f"{name}_wz"] = np.full(oc, wz_b if name == "b" else 0, np.float32)
        params[f"{name}_bias"] = rng.uniform(-2, 2, oc).astype(np.float32)
        out = "f32" if name == "c" else "u8"
        ops.append({"name": name, "op": "qconv2d",
                    "inputs": [src] + [f"{name}_{p}" for p in ("w", "ws", "wz", "bias")],
                    "attrs": {"stride": stride, "padding": pad, "a_scale": 0.05,
                              "a_zero": 131 if name == "a" else 120, "out": out,
                              "y_scale": 0.5, "y_zero": 120, "relu": name == "b"}})
        src = name
    g = load_model({"format_version": 1, "name": "qchain", "seed": 3,
                    "inputs": [{"name": "x", "shape": [batch, 6, 9, 11]}],
                    "params": [{"name": p, "shape": list(v.shape)} for p, v in params.items()],
                    "ops": ops, "outputs": ["c"]})
    return g, params, {"x": _ints(rng, (batch, 6, 9, 11), False)}


def test_qconv_links_carry_bytes_only_between_int8_convs():
    from hwtune.engine.qlayout import hwc_links
    g, _, _ = _chain(0)
    assert hwc_links(g) == {"a": {"y_hwc": 1}, "b": {"x_hwc": 1, "y_hwc": 1},
                            "c": {"x_hwc": 1}}
    # c's float output and a graph output are never bytes; nor is a tensor
    # another kind of op reads
    g.outputs.append("b")
    assert hwc_links(g) == {"a": {"y_hwc": 1}, "b": {"x_hwc": 1}}
    both = {"x_hwc": 1, "y_hwc": 1}
    g, _, _ = _chain(0, residual=True)
    assert hwc_links(g) == {"a": {"y_hwc": 1}, "b": both, "r": both, "c": {"x_hwc": 1}}
    # a qadd's inputs and output are bytes together or not at all: its
    # output as a graph output takes a's and b's outputs back to float32
    g.outputs.append("r")
    assert hwc_links(g) == {}


def test_max_pool_carries_bytes_only_between_byte_links():
    from hwtune.engine.qlayout import hwc_links
    both = {"x_hwc": 1, "y_hwc": 1}
    g, _, _ = _chain(0, pool=True)
    assert hwc_links(g) == {"a": {"y_hwc": 1}, "p": both, "b": both, "c": {"x_hwc": 1}}
    # the pool's input and output are bytes together: its output as a
    # graph output takes a's output back to float32 too
    g.outputs.append("p")
    assert hwc_links(g) == {"b": {"y_hwc": 1}, "c": {"x_hwc": 1}}
    # a pool of a float tensor (the graph input) writes floats
    g, _, _ = _chain(0, pool=True)
    g.ops[1].inputs[0] = "x"
    assert hwc_links(g) == {"b": {"y_hwc": 1}, "c": {"x_hwc": 1}}


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("wz_b,residual,width,batch,pool", [
    (0, False, 8, 2, False), (3, False, 8, 2, False), (0, True, 8, 2, False),
    (3, True, 8, 2, False), (0, True, 40, 1, False), (0, False, 8, 2, True),
    (0, False, 40, 3, True)])
def test_qconv_chain_through_bytes_matches_reference(wz_b, residual, width, batch, pool, isa):
    g, params, inputs = _chain(wz_b, residual, width, batch, pool)
    want = run_reference(g, inputs=inputs, params=params)["c"]
    for nth in (1, 2, 3):
        got = run_ops(g, nth=nth, isa=isa, inputs=inputs, params=params)["c"]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=f"nth={nth}")


def test_byte_links_reach_the_stand_alone_runners_document():
    """lowered_doc (what hwtune-run rebuilds its C graph from) carries the
    same engine-only attributes as lower_graph: writer and readers agree."""
    from hwtune.engine.lower import lower_graph
    from hwtune.engine.lowered import lowered_doc
    g, _, _ = _chain(0, residual=True)
    doc = lowered_doc(g)
    with lower_graph(g) as ng:
        for i, (op, d) in enumerate(zip(g.ops, doc["ops"])):
            for key in ("x_hwc", "y_hwc"):
                assert d["ints"].get(key) == ng.get_attr(i, key), (op.name, key)
    assert doc["ops"][0]["ints"]["y_hwc"] == [1]
