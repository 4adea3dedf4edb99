"""Op forms of real CNN / RNN / speech exports (issue #41): the activations
of the element-wise table, each through its numpy reference, the engine and
an ONNX file run by ONNX Runtime; SiLU's Sigmoid -> Mul fusion; the
`model export` and PyTorch peer rows."""

import json
import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from hwtune.graph import load_model, run_reference  # noqa: E402
from hwtune.graph.ops.eltwise import REFERENCES  # noqa: E402
from hwtune.native import eltwise as ew  # noqa: E402
from hwtune.native.isa import supported_isas  # noqa: E402
from hwtune.onnx.importer import import_onnx  # noqa: E402

from conftest import run_engine  # noqa: E402
from onnx_models import fin, import_and_compare, op_types, save  # noqa: E402 (tests/ is on sys.path)

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.usefixtures("scratch_cache")]

TOL = 1e-4
RNG = np.random.default_rng(41)


def engine_outputs(graph, feeds):
    return run_engine(graph, feeds, threads=2)


# -- the activations: numpy references against scalar math --------------------

def _elu(v, alpha=1.0):
    return v if v > 0 else alpha * math.expm1(v)


ORACLES = {
    "hard_sigmoid": (lambda v, alpha=0.2, beta=0.5: min(max(alpha * v + beta, 0.0), 1.0),
                     {"alpha": 1 / 6, "beta": 0.5}),
    "hard_swish": (lambda v: v * min(max(v / 6 + 0.5, 0.0), 1.0), None),
    "silu": (lambda v: v / (1 + math.exp(-v)), None),
    "mish": (lambda v: v * math.tanh(math.log1p(math.exp(v))), None),
    "gelu_tanh": (lambda v: 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi)
                                                      * (v + 0.044715 * v ** 3))), None),
    "softplus": (lambda v: math.log1p(math.exp(v)), None),
    "softsign": (lambda v: v / (1 + abs(v)), None),
    "elu": (_elu, {"alpha": 0.7}),
    "selu": (lambda v, alpha=1.6732632423543772, gamma=1.0507009873554805:
             gamma * _elu(v, alpha), None),
    "celu": (lambda v, alpha=1.0: max(0.0, v) + min(0.0, alpha * math.expm1(v / alpha)),
             {"alpha": 1.3}),
    "thresholded_relu": (lambda v, alpha=1.0: v if v > alpha else 0.0, {"alpha": 0.5}),
    "reciprocal": (lambda v: 1 / v, None),
    "neg": (lambda v: -v, None),
    "sign": (lambda v: float((v > 0) - (v < 0)), None),
    "log": (math.log, None),
    "sin": (math.sin, None),
    "cos": (math.cos, None),
}


@pytest.mark.parametrize("op", sorted(ORACLES))
def test_activation_references_match_scalar_math(op):
    x = RNG.uniform(-6, 6, 64).astype(np.float32)
    if op == "log":
        x = np.abs(x) + np.float32(0.01)
    fn, attrs = ORACLES[op]
    for kw in [{}] + ([attrs] if attrs else []):
        full = dict(ew.TABLE[op].attrs, **kw)
        y = REFERENCES[op].fn(x, **full)
        want = np.array([fn(float(v), **kw) for v in x])
        assert y.dtype == np.float32
        np.testing.assert_allclose(y, want, rtol=2e-6, atol=2e-6, err_msg=str(kw))


def test_prelu_reference_broadcasts_a_channel_slope():
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    s = np.array([0.1, -0.5, 2.0], np.float32).reshape(3, 1, 1)
    y = REFERENCES["prelu"].fn(x, s)
    np.testing.assert_array_equal(y, np.where(x > 0, x, x * s))


APPROXIMATED = [op for op in ("silu", "mish", "gelu_tanh", "elu", "selu", "celu")]


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("op", APPROXIMATED)
def test_dense_sweep_stays_within_the_documented_bound(op, isa):
    """Every 16th float with 0.5 <= |x| < 4 (where these errors peak), both
    signs, against the double reference: the table's error measure."""
    lo, hi = np.float32(0.5).view(np.uint32), np.float32(4.0).view(np.uint32)
    u = np.arange(lo, hi, 16, dtype=np.uint32).view(np.float32)
    x = np.concatenate([u, -u])
    attrs = dict(ew.TABLE[op].attrs)
    exact = REFERENCES[op].fn(x.astype(np.float64), **attrs)
    got = ew.eltwise(op, x, isa=isa, attrs=attrs)
    err = np.where(exact.astype(np.float32) == got, 0.0,
                   np.abs(got - exact) / np.maximum(1.0, np.abs(exact)))
    bound = ew.max_abs_error(op, isa)
    assert 0 < bound < 2e-7
    assert err.max() <= bound, (op, isa, float(err.max()), float(x[np.argmax(err)]))


# -- ONNX import against ONNX Runtime ------------------------------------------

# ONNX op, attributes, opset, input transform (the op's domain)
ACTIVATIONS = [
    ("HardSigmoid", {"alpha": 1 / 6, "beta": 0.5}, 17, None),
    ("HardSigmoid", {}, 17, None),
    ("HardSwish", {}, 17, None),
    ("Mish", {}, 18, None),
    ("Softplus", {}, 17, None),
    ("Softsign", {}, 17, None),
    ("Elu", {"alpha": 0.7}, 17, None),
    ("Selu", {}, 17, None),
    ("Celu", {"alpha": 1.3}, 17, None),
    ("ThresholdedRelu", {"alpha": 0.5}, 17, None),
    ("Reciprocal", {}, 17, "away_from_zero"),
    ("Neg", {}, 17, None),
    ("Sign", {}, 17, None),
    ("Log", {}, 17, "positive"),
    ("Sin", {}, 17, None),
    ("Cos", {}, 17, None),
    ("Gelu", {"approximate": "tanh"}, 20, None),
    ("Gelu", {}, 20, None),
]


@pytest.mark.parametrize("onnx_op, attrs, opset, domain", ACTIVATIONS,
                         ids=[f"{a[0]}{'-' + '-'.join(a[1]) if a[1] else ''}"
                              for a in ACTIVATIONS])
def test_activation_imports_and_matches_onnxruntime(onnx_op, attrs, opset, domain, tmp_path):
    x = RNG.uniform(-5, 5, (2, 3, 5, 7)).astype(np.float32)
    if domain == "positive":
        x = np.abs(x) + np.float32(0.05)
    elif domain == "away_from_zero":
        x = np.where(np.abs(x) < 0.1, np.float32(0.5), x).astype(np.float32)
    path = save([helper.make_node(onnx_op, ["x"], ["y"], name="act", **attrs)],
                [fin("x", list(x.shape))], [fin("y", list(x.shape))], {},
                tmp_path / "a.onnx", opset)
    g = import_and_compare(path, tmp_path, {"x": x})
    assert "act" not in op_types(g) and len(g.ops) == 1


@pytest.mark.parametrize("slope_shape", [(3, 1, 1), (1,), (7,)])
def test_prelu_imports_per_channel_and_scalar_slopes(slope_shape, tmp_path):
    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    s = RNG.uniform(-0.5, 0.5, slope_shape).astype(np.float32)
    path = save([helper.make_node("PRelu", ["x", "s"], ["y"], name="pr")],
                [fin("x", [2, 3, 5, 7])], [fin("y", [2, 3, 5, 7])], {"s": s},
                tmp_path / "p.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert op_types(g) == (["leaky_relu"] if s.size == 1 else ["prelu"])


def test_silu_pair_is_fused_and_a_shared_sigmoid_is_not(tmp_path):
    x = RNG.standard_normal((2, 16)).astype(np.float32)
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"], name="sig"),
             helper.make_node("Mul", ["s", "x"], ["y"], name="swish")]
    path = save(nodes, [fin("x", [2, 16])], [fin("y", [2, 16])], {}, tmp_path / "s.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert [(op.name, op.op) for op in g.ops] == [("y", "silu")]
    # the sigmoid also read elsewhere: both ops stay
    nodes.append(helper.make_node("Add", ["s", "y"], ["z"], name="other"))
    path = save(nodes, [fin("x", [2, 16])], [fin("z", [2, 16])], {}, tmp_path / "t.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert sorted(op_types(g)) == ["add", "mul", "sigmoid"]


def test_torch_activations_export_import_and_match(tmp_path):
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch.manual_seed(0)

    class Acts(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.prelu = nn.PReLU(8)
            self.acts = nn.ModuleList([nn.Hardswish(), nn.Hardsigmoid(), nn.SiLU(), nn.Mish(),
                                       nn.ELU(0.5), nn.SELU(), nn.CELU(1.5), nn.Softplus(),
                                       nn.Softsign(), nn.GELU(approximate="tanh")])

        def forward(self, x):
            y = self.prelu(self.conv(x))
            return torch.cat([a(y) for a in self.acts], 1)

    m = Acts().eval()
    x = torch.randn(1, 3, 8, 8)
    path = tmp_path / "acts.onnx"
    with torch.no_grad():
        torch.onnx.export(m, (x,), str(path), input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False)
    g = import_and_compare(path, tmp_path, {"x": x.numpy()})
    ops = set(op_types(g))
    # (PyTorch writes Softsign as Abs, Add and Div; Mish as Softplus, Tanh, Mul)
    assert {"prelu", "hard_swish", "hard_sigmoid", "silu", "mish", "elu", "selu", "celu",
            "softplus", "gelu_tanh"} <= ops
    with torch.no_grad():
        want = m(x).numpy()
    ref = run_reference(g, {"x": x.numpy()})["y"]
    assert np.abs(ref - want).max() <= TOL * np.abs(want).max()


# -- model export and the PyTorch peer -------------------------------------------

def test_activations_export_to_onnx_and_run_in_torch(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from hwtune.graph.reference import init_inputs, init_params
    from hwtune.onnx.export import to_onnx
    chain = [("hard_sigmoid", {"alpha": 0.25}), ("hard_swish", {}), ("silu", {}), ("mish", {}),
             ("gelu_tanh", {}), ("softplus", {}), ("softsign", {}), ("elu", {"alpha": 0.5}),
             ("selu", {}), ("celu", {"alpha": 2.0}), ("thresholded_relu", {"alpha": 0.1}),
             ("neg", {}), ("sign", {}), ("sin", {}), ("cos", {})]
    ops, prev = [], "x"
    for k, (op, attrs) in enumerate(chain):
        # each activation of the input, summed: no op sees only another's range
        ops.append({"name": f"a{k}", "op": op, "inputs": ["x"],
                    **({"attrs": attrs} if attrs else {})})
        ops.append({"name": f"s{k}", "op": "add", "inputs": [prev, f"a{k}"]})
        prev = f"s{k}"
    ops += [{"name": "p", "op": "prelu", "inputs": [prev, "slope"]},
            {"name": "ab", "op": "abs", "inputs": ["p"]},
            {"name": "sh", "op": "affine", "inputs": ["ab"], "attrs": {"shift": 0.5}},
            {"name": "lg", "op": "log", "inputs": ["sh"]},
            {"name": "y", "op": "reciprocal", "inputs": ["sh"]},
            {"name": "z", "op": "add", "inputs": ["y", "lg"]}]
    doc = {"name": "acts41", "seed": 5, "inputs": [{"name": "x", "shape": [2, 4, 3, 5]}],
           "params": [{"name": "slope", "shape": [4, 1, 1]}], "ops": ops, "outputs": ["z"]}
    src = tmp_path / "acts41.json"
    src.write_text(json.dumps(doc))
    graph = load_model(str(src))
    ref = run_reference(graph)["z"]
    feeds = {k: np.asarray(v, np.float32) for k, v in init_inputs(graph).items()}
    params = init_params(graph)
    model = to_onnx(graph, params)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, feeds)[0]
    assert np.abs(got - ref).max() <= TOL * np.abs(ref).max()
    pytest.importorskip("torch")
    from hwtune.compare.torch_graph import TorchGraph
    tg = TorchGraph(graph, params, feeds, threads=1)
    tg.run()
    assert np.abs(tg.outputs()["z"] - ref).max() <= TOL * np.abs(ref).max()
    eng = engine_outputs(graph, feeds)["z"]
    assert np.abs(eng - ref).max() <= TOL * np.abs(ref).max()


# -- recurrent layers: directions, sequence lengths, initial states ------------

def _rnn_model(kind, direction, tmp_path, seq=5, batch=3, inp=4, hidden=6, lens=None,
               init=False, outputs=("Y", "Y_h", "Y_c"), const_init=False):
    """One ONNX LSTM / GRU node, seeded weights; returns (path, feeds)."""
    ndir = 2 if direction == "bidirectional" else 1
    g = 4 if kind == "LSTM" else 3
    rng = np.random.default_rng(7)
    inits = {"W": rng.uniform(-0.5, 0.5, (ndir, g * hidden, inp)).astype(np.float32),
             "R": rng.uniform(-0.5, 0.5, (ndir, g * hidden, hidden)).astype(np.float32),
             "B": rng.uniform(-0.5, 0.5, (ndir, 2 * g * hidden)).astype(np.float32)}
    ins = ["x", "W", "R", "B", ""]
    feeds = {"x": rng.standard_normal((seq, batch, inp)).astype(np.float32)}
    graph_inputs = [fin("x", [seq, batch, inp])]
    if lens is not None:
        inits["L"] = np.asarray(lens, np.int32)
        ins[4] = "L"
    states = ["h0"] + (["c0"] if kind == "LSTM" else [])
    if init:
        for s in states:
            v = rng.standard_normal((ndir, batch, hidden)).astype(np.float32)
            if const_init:
                inits[s] = v
            else:
                feeds[s], _ = v, graph_inputs.append(fin(s, [ndir, batch, hidden]))
            ins.append(s)
    outs = [o for o in outputs if kind == "LSTM" or o != "Y_c"]
    shapes = {"Y": [seq, ndir, batch, hidden], "Y_h": [ndir, batch, hidden],
              "Y_c": [ndir, batch, hidden]}
    attrs = {"hidden_size": hidden, "direction": direction}
    if kind == "GRU":
        attrs["linear_before_reset"] = 1
    node = helper.make_node(kind, ins, [o if o in outs else "" for o in ("Y", "Y_h", "Y_c")
                                        ][:3 if kind == "LSTM" else 2], name="rnn", **attrs)
    path = save([node], graph_inputs, [fin(o, shapes[o]) for o in outs], inits,
                tmp_path / f"{kind}.onnx")
    return path, feeds


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("lens", [None, [5, 2, 0]], ids=["full", "lens"])
def test_recurrent_directions_and_lengths_match_onnxruntime(kind, direction, lens, tmp_path):
    path, feeds = _rnn_model(kind, direction, tmp_path, lens=lens, init=True)
    import_and_compare(path, tmp_path, feeds)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_recurrent_constant_initial_state_and_y_h_only(kind, tmp_path):
    path, feeds = _rnn_model(kind, "bidirectional", tmp_path, lens=[3, 5, 1], init=True,
                             const_init=True, outputs=("Y_h",))
    import_and_compare(path, tmp_path, feeds)


def test_sequence_lens_semantics_in_the_reference(tmp_path):
    """Past a row's length Y is zero; Y_h is the state at its length
    (forward) or after step 0 (reverse, which starts at length - 1)."""
    path, feeds = _rnn_model("GRU", "bidirectional", tmp_path, lens=[5, 2, 0], init=True,
                             const_init=True)
    out = tmp_path / "g.json"
    import_onnx(path, str(out))
    g = load_model(str(out))
    ref = run_reference(g, feeds)
    y, yh = ref["Y"], ref["Y_h"]
    assert np.all(y[2:, :, 1] == 0) and np.all(y[:, :, 2] == 0)
    np.testing.assert_array_equal(yh[0, 1], y[1, 0, 1])   # forward: state at step 1
    np.testing.assert_array_equal(yh[1, 1], y[0, 1, 1])   # reverse: state after step 0
    assert np.all(yh[:, 2] == 0)  # length 0: zero (as ONNX Runtime)


def test_long_sequences_concat_in_rounds(tmp_path):
    path, feeds = _rnn_model("GRU", "forward", tmp_path, seq=70, batch=1, hidden=4)
    g = import_and_compare(path, tmp_path, feeds)
    assert max(len(op.inputs) for op in g.ops) <= 64


def _zoo():
    pytest.importorskip("torch")
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import zoo_models as Z
    return Z


@pytest.mark.parametrize("name", ["bilstm", "bigru"])
def test_zoo_bidirectional_stacks_match_onnxruntime(name, tmp_path):
    Z = _zoo()
    built = Z.BY_NAME[name].build(True)
    path = Z.export(built, tmp_path / f"{name}.onnx")
    g = import_and_compare(path, tmp_path, dict(built.inputs))
    assert "reshape" in op_types(g)


@pytest.mark.parametrize("name", ["mobilenet_v3_small", "mobilenet_v3_large"])
def test_zoo_mobilenet_v3_matches_onnxruntime(name, tmp_path):
    """HardSwish, HardSigmoid (squeeze-excitation) and depthwise convs."""
    from hwtune.onnx.errors import OnnxImportError
    Z = _zoo()
    built = Z.BY_NAME[name].build(True)
    path = Z.export(built, tmp_path / f"{name}.onnx")
    try:
        g = import_and_compare(path, tmp_path, dict(built.inputs))
    except OnnxImportError as exc:
        # A depthwise Conv of more than 64 groups is one grouped conv2d on
        # the depthwise-conv branch; this branch still splits per group.
        if "more than 64 groups" not in str(exc):
            raise
        pytest.skip(f"needs grouped conv2d of more than 64 groups: {exc}")
    assert {"hard_swish", "hard_sigmoid"} <= set(op_types(g))


# -- Resize / Upsample -------------------------------------------------------------

def _resize_node(tmp_path, x_shape, opset, mode, scales=None, sizes=None, name="r.onnx",
                 **attrs):
    inits, ins = {}, ["x"]
    if opset >= 11:
        ins += ["", "scales" if scales is not None else "", "sizes" if sizes is not None else ""]
    else:
        ins += ["scales"]
    if scales is not None:
        inits["scales"] = np.asarray(scales, np.float32)
    if sizes is not None:
        inits["sizes"] = np.asarray(sizes, np.int64)
    out = list(sizes) if sizes is not None else \
        [int(np.floor(np.float32(d) * np.float32(s))) for d, s in zip(x_shape, scales)]
    while ins and ins[-1] == "":
        ins.pop()
    node = helper.make_node("Resize", ins, ["y"], name="rs", mode=mode, **attrs)
    return save([node], [fin("x", list(x_shape))], [fin("y", out)], inits, tmp_path / name,
                opset)


RESIZE_CASES = [
    # mode, transform, nearest_mode, scales, sizes
    ("nearest", "asymmetric", "floor", [1, 1, 2, 2], None),
    ("nearest", "half_pixel", "round_prefer_floor", [1, 1, 0.5, 0.5], None),
    ("nearest", "half_pixel", "round_prefer_ceil", [1, 1, 0.5, 0.5], None),
    ("nearest", "align_corners", "round_prefer_floor", None, [2, 3, 11, 6]),
    ("nearest", "pytorch_half_pixel", "ceil", [1, 1, 1.5, 2.5], None),
    ("nearest", "asymmetric", "round_prefer_ceil", [1, 1, 3, 1.7], None),
    ("linear", "half_pixel", None, [1, 1, 2, 2], None),
    ("linear", "pytorch_half_pixel", None, None, [2, 3, 1, 9]),
    ("linear", "align_corners", None, None, [2, 3, 13, 17]),
    ("linear", "asymmetric", None, [1, 1, 1.5, 0.6], None),
    ("linear", "half_pixel", None, [1, 1, 0.5, 0.75], None),
]


@pytest.mark.parametrize("opset", [13, 19])
@pytest.mark.parametrize("mode, transform, nearest, scales, sizes", RESIZE_CASES)
def test_resize_matches_onnxruntime(mode, transform, nearest, scales, sizes, opset, tmp_path):
    x = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)
    attrs = {"coordinate_transformation_mode": transform}
    if nearest:
        attrs["nearest_mode"] = nearest
    path = _resize_node(tmp_path, x.shape, opset, mode, scales, sizes, **attrs)
    g = import_and_compare(path, tmp_path, {"x": x})
    assert op_types(g) == ["resize"]
    # the engine's op computes the reference's tables and roundings: same bits
    ref = run_reference(g, {"x": x})["y"]
    np.testing.assert_array_equal(engine_outputs(g, {"x": x})["y"], ref)


def test_upsample_and_old_resize_match_onnxruntime(tmp_path):
    x = RNG.standard_normal((1, 2, 5, 4)).astype(np.float32)
    up = helper.make_node("Upsample", ["x", "scales"], ["y"], name="up", mode="nearest")
    path = save([up], [fin("x", [1, 2, 5, 4])], [fin("y", [1, 2, 10, 12])],
                {"scales": np.array([1, 1, 2, 3], np.float32)}, tmp_path / "u.onnx", 9)
    import_and_compare(path, tmp_path, {"x": x})
    path = _resize_node(tmp_path, x.shape, 10, "linear", [1, 1, 2, 2], name="r10.onnx")
    import_and_compare(path, tmp_path, {"x": x})


def test_resize_of_a_sequence_and_refusals(tmp_path):
    x = RNG.standard_normal((2, 3, 9)).astype(np.float32)
    path = _resize_node(tmp_path, x.shape, 13, "linear", [1, 1, 2.5],
                        coordinate_transformation_mode="half_pixel")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert "resize" in op_types(g)
    from hwtune.onnx.errors import OnnxImportError
    x4 = (1, 2, 4, 4)
    for kw, what in ((dict(mode="cubic"), "mode"), (dict(mode="nearest", scales=[2, 1, 1, 1]),
                                                     "N or C")):
        mode = kw.pop("mode")
        p = _resize_node(tmp_path, x4, 13, mode, kw.pop("scales", [1, 1, 2, 2]), name="bad.onnx")
        with pytest.raises(OnnxImportError, match=what):
            import_onnx(p, str(tmp_path / "bad.json"))


def test_fpn_and_unet_style_interpolations_import_and_match(tmp_path):
    torch = pytest.importorskip("torch")
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(1)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.down = nn.Conv2d(4, 8, 3, stride=2, padding=1)
            self.lat = nn.Conv2d(4, 8, 1)
            self.out = nn.Conv2d(8, 4, 3, padding=1)

        def forward(self, x):
            c = self.down(x)                                   # FPN: top-down nearest x2
            p = self.lat(x) + F.interpolate(c, scale_factor=2, mode="nearest")
            u1 = F.interpolate(p, scale_factor=2, mode="bilinear", align_corners=False)
            u2 = F.interpolate(p, size=(13, 11), mode="bilinear", align_corners=True)
            u3 = F.interpolate(p, size=(5, 7), mode="nearest")
            return (self.out(u1).mean((2, 3)) + self.out(u2).mean((2, 3))
                    + self.out(u3).mean((2, 3)))

    m = Decoder().eval()
    x = torch.randn(2, 4, 10, 12)
    path = tmp_path / "fpn.onnx"
    with torch.no_grad():
        torch.onnx.export(m, (x,), str(path), input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False)
        want = m(x).numpy()
    g = import_and_compare(path, tmp_path, {"x": x.numpy()})
    assert op_types(g).count("resize") == 4
    ref = run_reference(g, {"x": x.numpy()})["y"]
    assert np.abs(ref - want).max() <= TOL * np.abs(want).max()


def test_resize_exports_and_runs_in_torch(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from hwtune.graph.reference import init_inputs, init_params
    from hwtune.onnx.export import to_onnx
    ops = [{"name": "a", "op": "resize", "inputs": ["x"],
            "attrs": {"mode": "linear", "size": [9, 14],
                      "coordinate_transformation_mode": "align_corners"}},
           {"name": "b", "op": "resize", "inputs": ["x"],
            "attrs": {"mode": "nearest", "size": [7, 10], "scale_h": 1.5, "scale_w": 2.0,
                      "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}},
           {"name": "c", "op": "resize", "inputs": ["x"],
            "attrs": {"mode": "linear", "size": [7, 10], "scale_h": 1.5, "scale_w": 2.0}}]
    doc = {"name": "rs", "seed": 2, "inputs": [{"name": "x", "shape": [1, 3, 5, 5]}],
           "params": [], "ops": ops, "outputs": ["a", "b", "c"]}
    src = tmp_path / "rs.json"
    src.write_text(json.dumps(doc))
    graph = load_model(str(src))
    ref = run_reference(graph)
    feeds = {k: np.asarray(v, np.float32) for k, v in init_inputs(graph).items()}
    sess = ort.InferenceSession(to_onnx(graph, init_params(graph)).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    got = dict(zip(["a", "b", "c"], sess.run(None, feeds)))
    pytest.importorskip("torch")
    from hwtune.compare.torch_graph import TorchGraph
    tg = TorchGraph(graph, init_params(graph), feeds, threads=1)
    tg.run()
    eng = engine_outputs(graph, feeds)
    for o in ("a", "b", "c"):
        scale = np.abs(ref[o]).max()
        assert np.abs(got[o] - ref[o]).max() <= TOL * scale, o
        assert np.abs(tg.outputs()[o] - ref[o]).max() <= TOL * scale, o
        np.testing.assert_array_equal(eng[o], ref[o])


# -- 1-D convolution and pooling (speech encoders) ---------------------------------

def test_one_d_conv_and_pool_forms_match_onnxruntime(tmp_path):
    x = RNG.standard_normal((2, 4, 30)).astype(np.float32)
    w1 = RNG.standard_normal((8, 4, 5)).astype(np.float32) * 0.3
    b1 = RNG.standard_normal(8).astype(np.float32)
    w2 = RNG.standard_normal((8, 2, 3)).astype(np.float32) * 0.3   # group 4
    wt = RNG.standard_normal((8, 4, 4)).astype(np.float32) * 0.3   # ConvTranspose [C, OC, K]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="c1", pads=[2, 1],
                         strides=[2], dilations=[1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="r1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="c2", group=4, pads=[2, 2],
                         dilations=[2]),
        helper.make_node("MaxPool", ["c2"], ["p1"], name="p1", kernel_shape=[3], strides=[2],
                         pads=[1, 1]),
        helper.make_node("AveragePool", ["p1"], ["p2"], name="p2", kernel_shape=[2],
                         auto_pad="SAME_UPPER"),
        helper.make_node("ConvTranspose", ["p2", "wt"], ["ct"], name="ct", strides=[2]),
        helper.make_node("GlobalAveragePool", ["ct"], ["g"], name="g"),
        helper.make_node("Conv", ["x", "w1"], ["same"], name="same", auto_pad="SAME_UPPER"),
    ]
    c1 = (30 + 3 - 5) // 2 + 1
    c2 = c1 + 4 - 4
    p1 = (c2 + 2 - 3) // 2 + 1
    path = save(nodes, [fin("x", [2, 4, 30])],
                [fin("g", [2, 4, 1]), fin("same", [2, 8, 30])],
                {"w1": w1, "b1": b1, "w2": w2, "wt": wt}, tmp_path / "speech.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    ops = op_types(g)
    assert "conv2d" in ops and "pool2d" in ops and "conv_transpose2d" in ops and p1 > 0


def test_torch_conv1d_encoder_imports_and_matches(tmp_path):
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch.manual_seed(2)
    m = nn.Sequential(nn.Conv1d(6, 16, 5, padding=2), nn.BatchNorm1d(16), nn.GELU(),
                      nn.Conv1d(16, 16, 3, groups=4, padding=1), nn.SiLU(),
                      nn.MaxPool1d(2), nn.Conv1d(16, 8, 3, stride=2), nn.AvgPool1d(2),
                      nn.AdaptiveAvgPool1d(1)).eval()
    x = torch.randn(2, 6, 40)
    path = tmp_path / "enc.onnx"
    with torch.no_grad():
        torch.onnx.export(m, (x,), str(path), input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False)
    import_and_compare(path, tmp_path, {"x": x.numpy()})


# -- normalisations, reductions, Expand, Einsum --------------------------------------

def _single(tmp_path, op, ins, x_shapes, out_shape, inits=None, opset=17, **attrs):
    node = helper.make_node(op, ins, ["y"], name="n", **attrs)
    graph_in = [fin(n, s) for n, s in x_shapes.items()]
    return save([node], graph_in, [fin("y", out_shape)], inits or {}, tmp_path / f"{op}.onnx",
                opset)


def test_instance_and_group_normalization_match_onnxruntime(tmp_path):
    x = (RNG.standard_normal((2, 6, 5, 4)) * 3 + 1).astype(np.float32)
    s, b = RNG.standard_normal(6).astype(np.float32), RNG.standard_normal(6).astype(np.float32)
    p = _single(tmp_path, "InstanceNormalization", ["x", "s", "b"], {"x": [2, 6, 5, 4]},
                [2, 6, 5, 4], {"s": s, "b": b}, epsilon=1e-3)
    import_and_compare(p, tmp_path, {"x": x})
    x3 = x.reshape(2, 6, 20)
    p = _single(tmp_path, "InstanceNormalization", ["x", "s", "b"], {"x": [2, 6, 20]},
                [2, 6, 20], {"s": s, "b": b})
    import_and_compare(p, tmp_path, {"x": x3})
    # opset 21: scale and bias per channel
    p = _single(tmp_path, "GroupNormalization", ["x", "s", "b"], {"x": [2, 6, 5, 4]},
                [2, 6, 5, 4], {"s": s, "b": b}, opset=21, num_groups=3, epsilon=1e-4)
    import_and_compare(p, tmp_path, {"x": x})


def test_torch_group_and_instance_norm_exports_import(tmp_path):
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch.manual_seed(3)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(4, 8), nn.SiLU(),
                      nn.Conv2d(8, 8, 3, padding=1), nn.InstanceNorm2d(8, affine=True)).eval()
    with torch.no_grad():
        m[4].weight.uniform_(0.5, 1.5), m[4].bias.uniform_(-0.5, 0.5)
        m[1].weight.uniform_(0.5, 1.5), m[1].bias.uniform_(-0.5, 0.5)
    x = torch.randn(2, 3, 8, 8)
    path = tmp_path / "gn.onnx"
    with torch.no_grad():
        torch.onnx.export(m, (x,), str(path), input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False)
    g = import_and_compare(path, tmp_path, {"x": x.numpy()})
    assert op_types(g).count("layer_norm") == 2


@pytest.mark.parametrize("op, attrs, out", [
    ("LpNormalization", {"axis": 1, "p": 2}, [2, 5, 3]),
    ("LpNormalization", {"axis": -1, "p": 1}, [2, 5, 3]),
    ("ReduceL2", {"axes": [1], "keepdims": 1}, [2, 1, 3]),
    ("ReduceL1", {"axes": [0, 2], "keepdims": 0}, [5]),
    ("ReduceSumSquare", {"axes": [2], "keepdims": 0}, [2, 5]),
    ("ReduceMax", {"axes": [1], "keepdims": 0}, [2, 3]),
    ("ReduceMax", {"axes": [0, 2], "keepdims": 1}, [1, 5, 1]),
    ("ReduceMin", {"axes": [1], "keepdims": 1}, [2, 1, 3]),
    ("ReduceMin", {"keepdims": 0}, []),
])
def test_norms_and_reductions_match_onnxruntime(op, attrs, out, tmp_path):
    x = RNG.standard_normal((2, 5, 3)).astype(np.float32)
    p = _single(tmp_path, op, ["x"], {"x": [2, 5, 3]}, out, opset=13, **attrs)
    if op == "ReduceMin" and not out:  # hwtune keeps [1] for a full reduction
        ort = pytest.importorskip("onnxruntime")
        import_onnx(p, str(tmp_path / "m.json"))
        g = load_model(str(tmp_path / "m.json"))
        want = ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        assert engine_outputs(g, {"x": x})["y"].reshape(()) == want
        return
    import_and_compare(p, tmp_path, {"x": x})


def test_reduce_max_axes_as_an_input_at_opset_18(tmp_path):
    x = RNG.standard_normal((2, 5, 3, 4)).astype(np.float32)
    p = _single(tmp_path, "ReduceMax", ["x", "axes"], {"x": [2, 5, 3, 4]}, [2, 3],
                {"axes": np.array([1, 3], np.int64)}, opset=18, keepdims=0)
    import_and_compare(p, tmp_path, {"x": x})


def test_torch_normalize_and_expand(tmp_path):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional

    class Head(torch.nn.Module):
        def forward(self, x):
            n = F.normalize(x, dim=-1)
            return n + x.amax(1, keepdim=True).expand(-1, 4, -1) * x.amin(1, keepdim=True)

    x = torch.randn(2, 4, 6)
    path = tmp_path / "nrm.onnx"
    with torch.no_grad():
        torch.onnx.export(Head(), (x,), str(path), input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False)
    import_and_compare(path, tmp_path, {"x": x.numpy()})


@pytest.mark.parametrize("eq, a, b", [
    ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
    ("bhid,bhjd->bhij", (2, 3, 4, 5), (2, 3, 6, 5)),
    ("ij,kj->ik", (3, 4), (5, 4)),
    ("bid,d->bi", (2, 3, 4), (4,)),
    ("ik,bkj->bji", (3, 4), (2, 4, 5)),
])
def test_einsum_matmul_forms_match_onnxruntime(eq, a, b, tmp_path):
    xa = RNG.standard_normal(a).astype(np.float32)
    xb = RNG.standard_normal(b).astype(np.float32)
    want = np.einsum(eq, xa, xb)
    p = _single(tmp_path, "Einsum", ["a", "b"], {"a": list(a), "b": list(b)}, list(want.shape),
                opset=13, equation=eq)
    g = import_and_compare(p, tmp_path, {"a": xa, "b": xb})
    assert "batch_matmul" in op_types(g)


def test_einsum_refuses_what_is_not_a_product(tmp_path):
    from hwtune.onnx.errors import OnnxImportError
    p = _single(tmp_path, "Einsum", ["a", "b"], {"a": [3, 3], "b": [3]}, [3], opset=13,
                equation="ii,i->i")
    with pytest.raises(OnnxImportError, match="repeated index"):
        import_onnx(p, str(tmp_path / "e.json"))


@pytest.mark.parametrize("attrs, out", [
    ({"axis": 1, "keepdims": 1}, [2, 1, 4]),
    ({"axis": -1, "keepdims": 0}, [2, 6]),
    ({"axis": 0, "keepdims": 0, "select_last_index": 1}, [6, 4]),
])
def test_argmax_matches_onnxruntime(attrs, out, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    x = RNG.integers(0, 3, (2, 6, 4)).astype(np.float32)  # ties: the index rule matters
    node = helper.make_node("ArgMax", ["x"], ["y"], name="am", **attrs)
    y = helper.make_tensor_value_info("y", TensorProto.INT64, out)
    p = str(tmp_path / "am.onnx")
    m = helper.make_model(helper.make_graph([node], "g", [fin("x", [2, 6, 4])], [y]),
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, p)
    import_onnx(p, str(tmp_path / "am.json"))
    g = load_model(str(tmp_path / "am.json"))
    want = ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    ref = run_reference(g, {"x": x})["y"]
    np.testing.assert_array_equal(ref, want.astype(np.float32))
    np.testing.assert_array_equal(engine_outputs(g, {"x": x})["y"], ref)


def test_argmax_and_nan_in_reference_engine_export_and_torch(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from hwtune.graph.reference import init_params
    from hwtune.onnx.export import to_onnx
    doc = {"name": "am", "seed": 1, "inputs": [{"name": "x", "shape": [3, 5]}], "params": [],
           "ops": [{"name": "a", "op": "argmax", "inputs": ["x"], "attrs": {"axis": 1}},
                   {"name": "b", "op": "argmax", "inputs": ["x"],
                    "attrs": {"axis": 0, "keepdims": False, "select_last_index": True}}],
           "outputs": ["a", "b"]}
    src = tmp_path / "am.json"
    src.write_text(json.dumps(doc))
    graph = load_model(str(src))
    x = np.array([[1, 3, 3, 0, 2], [np.nan, 1, np.nan, 5, 5], [2, 2, 2, 2, 2]], np.float32)
    ref = run_reference(graph, {"x": x})
    np.testing.assert_array_equal(ref["a"].ravel(), [1, 0, 0])   # first largest; first NaN
    np.testing.assert_array_equal(ref["b"], [1, 0, 1, 1, 1])   # last largest (column 0: NaN)
    eng = engine_outputs(graph, {"x": x})
    for o in ("a", "b"):
        np.testing.assert_array_equal(eng[o], ref[o])
    xf = np.nan_to_num(x, nan=-1.0)
    ref = run_reference(graph, {"x": xf})
    sess = ort.InferenceSession(to_onnx(graph, init_params(graph)).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    got = dict(zip(["a", "b"], sess.run(None, {"x": xf})))
    pytest.importorskip("torch")
    from hwtune.compare.torch_graph import TorchGraph
    tg = TorchGraph(graph, {}, {"x": xf}, threads=1)
    tg.run()
    for o in ("a", "b"):
        np.testing.assert_array_equal(got[o], ref[o])
        np.testing.assert_array_equal(tg.outputs()[o], ref[o])


def test_tanh_gelu_written_out_imports_without_pow(tmp_path):
    """PyTorch's dynamo exporter (and GPT-2's gelu_new) write the tanh GELU
    out with Pow(x, 3): two muls, not libm's pow per element."""
    x = RNG.uniform(-4, 4, (3, 8)).astype(np.float32)
    c = lambda v: np.array(v, np.float32)  # noqa: E731
    nodes = [helper.make_node("Pow", ["x", "three"], ["p"], name="pow"),
             helper.make_node("Mul", ["p", "k"], ["m"], name="m"),
             helper.make_node("Add", ["x", "m"], ["s"], name="s"),
             helper.make_node("Mul", ["s", "r"], ["u"], name="u"),
             helper.make_node("Tanh", ["u"], ["t"], name="t"),
             helper.make_node("Add", ["t", "one"], ["a"], name="a"),
             helper.make_node("Mul", ["x", "half"], ["h"], name="h"),
             helper.make_node("Mul", ["h", "a"], ["y"], name="y")]
    path = save(nodes, [fin("x", [3, 8])], [fin("y", [3, 8])],
                {"three": c(3.0), "k": c(0.044715), "r": c(math.sqrt(2 / math.pi)),
                 "one": c(1.0), "half": c(0.5)}, tmp_path / "g.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert op_types(g) == ["gelu_tanh"]
    # read twice (the half product also a graph output): nothing is fused
    nodes[-1] = helper.make_node("Mul", ["h", "a"], ["y"], name="y")
    path = save(nodes, [fin("x", [3, 8])], [fin("y", [3, 8]), fin("t", [3, 8])],
                {"three": c(3.0), "k": c(0.044715), "r": c(math.sqrt(2 / math.pi)),
                 "one": c(1.0), "half": c(0.5)}, tmp_path / "g2.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert "gelu_tanh" not in op_types(g) and "pow" not in op_types(g)


@pytest.mark.parametrize("exporter", ["legacy", "dynamo"])
def test_torch_tanh_gelu_exports_fuse(exporter, tmp_path):
    torch = pytest.importorskip("torch")
    if exporter == "dynamo":
        pytest.importorskip("onnxscript")
    torch.manual_seed(5)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(approximate="tanh"),
                            torch.nn.Linear(16, 4)).eval()
    x = torch.randn(3, 8)
    path = tmp_path / "gt.onnx"
    with torch.no_grad():
        torch.onnx.export(m, (x,), str(path), input_names=["x"], output_names=["y"],
                          opset_version=17 if exporter == "legacy" else 18,
                          dynamo=exporter == "dynamo")
    g = import_and_compare(path, tmp_path, {"x": x.numpy()})
    assert "gelu_tanh" in op_types(g) and "tanh" not in op_types(g)


@pytest.mark.parametrize("order", ["x_then_half", "half_of_x", "half_times"])
def test_erf_gelu_written_out_fuses_into_gelu(order, tmp_path):
    """PyTorch's opset-17 export of the exact GELU (BERT's activation) is
    Div(x, sqrt 2) -> Erf -> Add 1 -> the product with x/2 in one of three
    orders: one gelu op, matching ONNX Runtime; read twice, nothing fuses."""
    x = RNG.uniform(-5, 5, (4, 16)).astype(np.float32)
    c = lambda v: np.array(v, np.float32)  # noqa: E731
    head = [helper.make_node("Div", ["x", "r2"], ["d"], name="d"),
            helper.make_node("Erf", ["d"], ["e"], name="e"),
            helper.make_node("Add", ["e", "one"], ["a"], name="a")]
    tails = {"x_then_half": [helper.make_node("Mul", ["x", "a"], ["m"], name="m"),
                             helper.make_node("Mul", ["m", "half"], ["y"], name="y")],
             "half_of_x": [helper.make_node("Mul", ["x", "half"], ["h"], name="h"),
                           helper.make_node("Mul", ["h", "a"], ["y"], name="y")],
             "half_times": [helper.make_node("Mul", ["a", "half"], ["h"], name="h"),
                            helper.make_node("Mul", ["x", "h"], ["y"], name="y")]}
    inits = {"r2": c(math.sqrt(2.0)), "one": c(1.0), "half": c(0.5)}
    path = save(head + tails[order], [fin("x", [4, 16])], [fin("y", [4, 16])], inits,
                tmp_path / "g.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert op_types(g) == ["gelu"]
    path = save(head + tails[order], [fin("x", [4, 16])], [fin("y", [4, 16]), fin("e", [4, 16])],
                inits, tmp_path / "g2.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert "gelu" not in op_types(g) and "erf" in op_types(g)
