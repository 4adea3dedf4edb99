"""The bundled paper workloads: they load, validate, run in the numpy
reference, match their generators and the JSON Schema; the LSTM and
PhasedLSTM graphs compute what hand-written numpy cells compute."""

import glob
import json
import os

import numpy as np
import pytest

from hwtune.graph import load_model, run_reference
from hwtune.graph.generators import FAMILIES, lstm, phased_lstm
from hwtune.graph.info import graph_info
from hwtune.graph.schema import schema_text

ROOT = os.path.join(os.path.dirname(__file__), "..")
MODELS = os.path.join(ROOT, "configs", "models")
BUNDLED = sorted(glob.glob(os.path.join(MODELS, "*.json")))
TEMPLATES = sorted(glob.glob(os.path.join(MODELS, "templates", "*.json")))
# Sizes small enough for a numpy run in well under a second each.
QUICK = {"lstm": {"batch": 2, "seq": 3}, "phased_lstm": {"batch": 2, "seq": 3},
         "deepcpu_lstm": {"seq": 2}, "pathnet": {"batch": 1},
         "inception": {"batch": 1, "image": 64}, "resnet18": {"image": 32}}


def family_of(path):
    base = os.path.basename(path)
    for prefix in sorted(QUICK, key=len, reverse=True):
        if base.startswith(prefix):
            return prefix
    raise AssertionError(f"no family for {base}")


def bundled_vars(path):
    with open(path) as fh:
        return json.load(fh)["vars"]


def test_the_paper_workloads_are_all_bundled():
    names = {os.path.basename(p)[:-5] for p in BUNDLED}
    for fam in ("lstm", "phased_lstm", "pathnet", "inception"):
        assert {f"{fam}_small", f"{fam}_medium", f"{fam}_large"} <= names
    assert "resnet18" in names
    assert len([n for n in names if n.startswith("deepcpu_lstm_")]) == 7


@pytest.mark.parametrize("path", BUNDLED, ids=os.path.basename)
def test_bundled_model_validates_at_its_own_size(path):
    g = load_model(path)
    assert g.ops and g.outputs and len(g.order) == len(g.ops)


# Medium and large variants differ from small only in sizes: validating them
# is enough, running them would only slow the suite down.
@pytest.mark.parametrize("path", [p for p in BUNDLED if "medium" not in p and "large" not in p],
                         ids=os.path.basename)
def test_bundled_model_runs_in_the_reference(path):
    g = load_model(path, overrides=QUICK[family_of(path)])
    outs = run_reference(g)
    for name, arr in outs.items():
        assert arr.shape == g.shapes[name]
        assert np.all(np.isfinite(arr)), name
    if "prob" in outs:
        np.testing.assert_allclose(outs["prob"].sum(axis=1), 1.0, rtol=1e-5)


def _norm(g):
    def num(init):
        return {k: float(v) if isinstance(v, (int, float)) else v for k, v in init.items()}
    return ([(t.name, t.shape, num(t.init)) for t in g.inputs],
            [(t.name, t.shape, num(t.init)) for t in g.params],
            [(o.name, o.op, o.inputs, o.outputs, o.resolved) for o in g.ops],
            g.outputs, g.seed)


_GENERATOR = {"lstm": "lstm", "deepcpu_lstm": "lstm", "phased_lstm": "phased_lstm",
              "pathnet": "pathnet", "inception": "inception", "resnet18": "resnet18"}


@pytest.mark.parametrize("path", BUNDLED, ids=os.path.basename)
def test_generator_builds_the_same_graph_as_the_bundled_file(path):
    fam = family_of(path)
    sizes = dict(bundled_vars(path))
    if "lstm" in fam:  # recurrence length does not change the structure tested here
        sizes["seq"] = 2
    generate, _ = FAMILIES[_GENERATOR[fam]]
    assert _norm(generate(**sizes)) == _norm(load_model(path, overrides=sizes))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_generator_defaults_equal_template_defaults(family):
    generate, template = FAMILIES[family]
    assert _norm(generate()) == _norm(load_model(os.path.join(MODELS, "templates", template)))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_numpy(xs, params, layers, hidden):
    """Textbook LSTM with one fused weight on [x, h] (i, f, g, o order)."""
    batch = xs[0].shape[0]
    seq_in = [x.astype(np.float64) for x in xs]
    for layer in range(1, layers + 1):
        w = np.concatenate([params[f"W{layer}"], params[f"U{layer}"]]).astype(np.float64)
        h = np.zeros((batch, hidden))
        c = np.zeros((batch, hidden))
        out = []
        for x in seq_in:
            z = np.concatenate([x, h], axis=1) @ w + params[f"b{layer}"]
            i, f, g, o = np.split(z, 4, axis=1)
            c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
            h = sigmoid(o) * np.tanh(c)
            out.append(h)
        seq_in = out
    return seq_in


def test_lstm_graph_matches_a_hand_written_cell():
    g = lstm.generate(batch=3, seq=4, hidden=5, input=6, layers=2, seed=7)
    everything = run_reference(g, keep_all=True)
    want = lstm_numpy([everything[f"h0.{t}"] for t in range(1, 5)], everything, 2, 5)
    for t in range(1, 5):
        np.testing.assert_allclose(everything[f"h2.{t}"], want[t - 1], rtol=1e-5, atol=1e-6)


def phased_numpy(xs, times, params, hidden, leak, r_on):
    """PhasedLSTM as the paper writes k_t (three explicit cases)."""
    batch = xs[0].shape[0]
    w = np.concatenate([params["W1"], params["U1"]]).astype(np.float64)
    tau, s = params["tau1"].astype(np.float64), params["s1"].astype(np.float64)
    h = np.zeros((batch, hidden))
    c = np.zeros((batch, hidden))
    out = []
    for x, t in zip(xs, times):
        z = np.concatenate([x, h], axis=1) @ w + params["b1"]
        i, f, g, o = np.split(z, 4, axis=1)
        c_new = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h_new = sigmoid(o) * np.tanh(c_new)
        phi = np.mod(t - s, tau) / tau
        k = np.where(phi < r_on / 2, 2 * phi / r_on,
                     np.where(phi < r_on, 2 - 2 * phi / r_on, leak * phi))
        c = k * c_new + (1 - k) * c
        h = k * h_new + (1 - k) * h
        out.append(h)
    return out


def test_phased_lstm_graph_matches_the_paper_time_gate():
    # r_on = 0.5 keeps many neurons in the open phase so the gate matters.
    g = phased_lstm.generate(batch=4, seq=5, hidden=6, input=3, layers=1, r_on=0.5, seed=3)
    v = run_reference(g, keep_all=True)
    want = phased_numpy([v[f"h0.{t}"] for t in range(1, 6)],
                        [v[f"time.{t}"].astype(np.float64) for t in range(1, 6)],
                        v, 6, 0.001, 0.5)
    ks = np.concatenate([v[f"L1.{t}.k"] for t in range(1, 6)])
    assert (ks > 0.01).mean() > 0.2 and (ks < 0.01).mean() > 0.2  # both phases occur
    for t in range(1, 6):
        np.testing.assert_allclose(v[f"h1.{t}"], want[t - 1], rtol=1e-4, atol=1e-5)


def test_reference_is_deterministic_and_seeded():
    g = load_model(os.path.join(MODELS, "pathnet_small.json"), overrides={"batch": 1})
    a, b = run_reference(g)["prob"], run_reference(g)["prob"]
    np.testing.assert_array_equal(a, b)
    g2 = load_model(os.path.join(MODELS, "pathnet_small.json"), overrides={"batch": 1})
    g2.seed = 1
    assert not np.array_equal(a, run_reference(g2)["prob"])


def test_info_counts_flops_and_parallelism():
    info = graph_info(load_model(os.path.join(MODELS, "resnet18.json")))
    # ResNet-18 at 224x224 is 1.82 GMACs; 3.6 GFLOPs with BN, adds, pools.
    assert 3.5e9 < info.flops < 3.8e9
    assert info.op_counts["conv2d"] == 20 and info.op_counts["batch_norm"] == 20
    assert info.width == 2  # main path and projection shortcut
    lstm_info = graph_info(load_model(os.path.join(MODELS, "lstm_small.json")))
    assert lstm_info.ops == 4 * 20 * 3  # per layer-step: 2 matmuls and the lstm_cell
    assert lstm_info.op_counts["lstm_cell"] == 80
    # per layer-step: 2 matmuls of 2*64*128*512 plus the bias add
    assert lstm_info.op_counts["matmul"] == 160
    assert lstm_info.depth < lstm_info.ops / 4 and lstm_info.parallelism > 4


def test_schema_file_is_generated_from_the_registry():
    with open(os.path.join(ROOT, "configs", "model.schema.json")) as fh:
        assert fh.read() == schema_text(), "regenerate: python -c 'from hwtune.graph.schema " \
            "import schema_text; print(schema_text(), end=\"\")' > configs/model.schema.json"


@pytest.fixture(scope="module")
def schema_validator():
    jsonschema = pytest.importorskip("jsonschema")
    with open(os.path.join(ROOT, "configs", "model.schema.json")) as fh:
        schema = json.load(fh)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", BUNDLED + TEMPLATES, ids=os.path.basename)
def test_json_schema_accepts_bundled_models(path, schema_validator):
    with open(path) as fh:
        schema_validator.validate(json.load(fh))


def test_json_schema_accepts_expanded_and_rejects_bad_attrs(schema_validator):
    doc = load_model(os.path.join(MODELS, "resnet18.json")).to_json()
    schema_validator.validate(doc)
    doc["ops"][0]["attrs"]["strides"] = 2
    assert not schema_validator.is_valid(doc)
    doc["ops"][0]["attrs"].pop("strides")
    doc["ops"][0]["op"] = "conv3d"
    assert not schema_validator.is_valid(doc)


def _conv_block(layout):
    """conv3x3 -> BN -> ReLU -> max pool, in NCHW or through NCHW8c with
    explicit layout transforms (the NeoCPU way); weights given as data."""
    rng = np.random.default_rng(5)
    w = rng.uniform(-0.3, 0.3, (16, 8, 3, 3)).astype(np.float32)
    blocked = layout == "NCHWc"
    if blocked:
        from hwtune.graph.ops.layout import to_oihwio
        w_param = {"name": "w", "shape": [2, 1, 3, 3, 8, 8], "data": to_oihwio(w, 8, 8).tolist()}
    else:
        w_param = {"name": "w", "shape": [16, 8, 3, 3], "data": w.tolist()}
    bn = [{"name": n, "shape": [16], "low": 0.5, "high": 1.5} for n in ("g", "b", "m", "v")]
    x = "xb" if blocked else "x"
    ops = ([{"name": "xb", "op": "layout_transform", "inputs": ["x"],
             "attrs": {"src": "NCHW", "dst": "NCHW8c"}}] if blocked else []) + [
        {"name": "conv", "op": "conv2d", "inputs": [x, "w"],
         "attrs": {"padding": 1, "layout": layout, "reg_n": 6, "unroll_ker": True}},
        {"name": "bn", "op": "batch_norm", "inputs": ["conv", "g", "b", "m", "v"],
         "attrs": {"layout": layout}},
        {"name": "relu", "op": "relu", "inputs": ["bn"]},
        {"name": "pool", "op": "pool2d", "inputs": ["relu"],
         "attrs": {"mode": "max", "kernel": 2, "layout": layout}},
    ] + ([{"name": "out", "op": "layout_transform", "inputs": ["pool"],
           "attrs": {"src": "NCHW8c", "dst": "NCHW"}}] if blocked else
         [{"name": "out", "op": "relu", "inputs": ["pool"]}])
    return {"name": f"block-{layout}", "inputs": [{"name": "x", "shape": [2, 8, 6, 6]}],
            "params": [w_param] + bn, "ops": ops, "outputs": ["out"]}


def test_blocked_layout_graph_equals_the_nchw_graph():
    plain = run_reference(load_model(_conv_block("NCHW")))["out"]
    blocked = run_reference(load_model(_conv_block("NCHWc")))["out"]
    assert plain.shape == blocked.shape == (2, 16, 3, 3)
    np.testing.assert_allclose(blocked, plain, rtol=1e-5, atol=1e-6)
