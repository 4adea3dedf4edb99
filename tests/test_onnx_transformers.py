"""Transformers through ONNX (issue #41): the ops on run-time indices and
masks (numpy reference against loop oracles, the engine against the
reference), their ONNX rows against ONNX Runtime, int64 / bool inputs end
to end, and the zoo's BERT, DistilBERT, GPT-2, RoBERTa and Swin-T (small
sizes) imported, run and matched with ONNX Runtime."""

import itertools
import os
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from hwtune.graph import load_model, ops as oplib, run_reference  # noqa: E402

from conftest import invoke, one_line_error  # noqa: E402
from onnx_models import save  # noqa: E402 (tests/ is on sys.path)

TOL = 1e-4
RNG = np.random.default_rng(41)
ZOO_DIR = os.path.join(os.path.dirname(__file__), "..", "benchmarks")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HWTUNE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HWTUNE_DB", str(tmp_path / "r.db"))


def ref(op, arrays, **attrs):
    spec = oplib.get(op)
    resolved = spec.normalize_attrs(attrs)
    shapes = spec.infer([a.shape for a in arrays], resolved, 1)
    (out,) = spec.ref([np.asarray(a, np.float32) for a in arrays], resolved, 1)
    assert out.shape == tuple(shapes[0]) and out.dtype == np.float32
    return out


# -- numpy references against loop oracles --------------------------------------

def test_take_reference():
    data = RNG.standard_normal((5, 3)).astype(np.float32)
    idx = np.array([[4, 0, -1], [2, 7, 1]], np.float32)  # 7: out of range
    y = ref("take", [data, idx])
    assert y.shape == (2, 3, 3)
    for i, j in itertools.product(range(2), range(3)):
        k = int(idx[i, j])
        if -5 <= k < 5:
            np.testing.assert_array_equal(y[i, j], data[k % 5])
        else:
            assert np.isnan(y[i, j]).all()
    y1 = ref("take", [data, np.array([2, 0], np.float32)], axis=1)
    np.testing.assert_array_equal(y1, data[:, [2, 0]])


def test_gather_elements_cumsum_expand_where_references():
    data = RNG.standard_normal((2, 6)).astype(np.float32)
    idx = np.array([[5, 0, -2], [1, 1, 6]], np.float32)
    y = ref("gather_elements", [data, idx], axis=1)
    for i, j in itertools.product(range(2), range(3)):
        k = int(idx[i, j])
        assert (np.isnan(y[i, j]) if k >= 6 else y[i, j] == data[i, k % 6])
    x = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.float32)
    for excl, rev in itertools.product((False, True), repeat=2):
        want = np.zeros_like(x)
        for i, j in itertools.product(range(2), range(4)):
            js = [k for k in range(4) if (k > j if rev else k < j) or (k == j and not excl)]
            want[i, j] = sum(x[i, k] for k in js)
        np.testing.assert_array_equal(ref("cumsum", [x], axis=1, exclusive=excl, reverse=rev),
                                      want)
    e = ref("expand", [np.array([[1], [2]], np.float32)], shape=[3, 1, 4])
    assert e.shape == (3, 2, 4) and (e[:, 1, :] == 2).all()
    c = np.array([[1], [0]], np.float32)
    w = ref("where", [c, np.float32([7, 8, 9]), np.float32([-1])])
    np.testing.assert_array_equal(w, [[7, 8, 9], [-1, -1, -1]])


# -- the engine against the reference ----------------------------------------------

def _one_op_graph(tmp_path, op, inputs, attrs, low_high=None):
    """A model.json of one op; inputs: name -> (shape, low, high) int-valued
    (dtype int64) or float (low None)."""
    import json
    ins = []
    for name, (shape, lo, hi) in inputs.items():
        item = {"name": name, "shape": list(shape)}
        if lo is not None:
            item.update(dtype="int64", low=lo, high=hi)
        ins.append(item)
    doc = {"format_version": 1, "name": op, "seed": 3, "inputs": ins, "params": [],
           "ops": [{"name": "y", "op": op, "inputs": list(inputs), "attrs": attrs}],
           "outputs": ["y"]}
    path = tmp_path / f"{op}.json"
    path.write_text(json.dumps(doc))
    return load_model(str(path))


@pytest.mark.parametrize("op,inputs,attrs", [
    ("take", {"t": ((9, 5), None, None), "i": ((2, 7), -9, 9)}, {"axis": 0}),
    ("take", {"t": ((3, 9, 2), None, None), "i": ((4,), 0, 9)}, {"axis": 1}),
    ("gather_elements", {"t": ((3, 8), None, None), "i": ((2, 5), -8, 8)}, {"axis": 1}),
    ("cumsum", {"x": ((3, 5, 2), -3, 4)}, {"axis": 1, "reverse": True}),
    ("cumsum", {"x": ((2, 37), None, None)}, {"axis": 1, "exclusive": True}),
    ("expand", {"x": ((3, 1), None, None)}, {"shape": [2, 1, 5]}),
    ("where", {"c": ((2, 1, 4), 0, 2), "a": ((3, 4), None, None), "b": ((1,), None, None)},
     {}),
])
@pytest.mark.parametrize("nth", [1, 3])
def test_engine_matches_reference(tmp_path, op, inputs, attrs, nth):
    from hwtune.engine.ops_harness import run_ops
    g = _one_op_graph(tmp_path, op, inputs, attrs)
    want = run_reference(g)["y"]
    got = run_ops(g, nth=nth)["y"]
    np.testing.assert_array_equal(got, want)


def test_attention_reference_is_the_unfused_ops():
    q, kt, v = (RNG.standard_normal(s).astype(np.float32)
                for s in ((2, 3, 4, 5), (2, 3, 5, 6), (2, 3, 6, 7)))
    mask = np.where(RNG.random((2, 1, 1, 6)) < 0.3, np.float32(-3.4e38), np.float32(0))
    s = ref("affine", [ref("batch_matmul", [q, kt])], scale=0.125)
    want = ref("batch_matmul", [ref("softmax", [ref("add", [s, mask])], axis=3), v])
    np.testing.assert_array_equal(ref("attention", [q, kt, v, mask], scale=0.125), want)


@pytest.mark.parametrize("nth", [1, 3])
@pytest.mark.parametrize("s,mask", [(4, None), (4, (2, 1, 1, 6)), (4, (4, 6)),
                                    (70, (2, 3, 70, 6))])  # 70: a full and a short block
def test_attention_engine_matches_reference(tmp_path, nth, s, mask):
    from hwtune.engine.ops_harness import run_ops
    ins = {"q": ((2, 3, s, 5), None, None), "kt": ((2, 3, 5, 6), None, None),
           "v": ((2, 3, 6, 7), None, None)}
    if mask:
        ins["m"] = (mask, -4, 1)
    g = _one_op_graph(tmp_path, "attention", ins, {"scale": 0.3})
    want = run_reference(g)["y"]
    got = run_ops(g, nth=nth)["y"]
    # float32 sums in another order than the reference's float64 products
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("nth", [1, 2])
@pytest.mark.parametrize("s,t,mask", [(5, 37, None), (5, 37, (1, 37)), (197, 197, None),
                                      (128, 131, (1, 1, 1, 131))])
def test_attention_engine_long_rows(tmp_path, nth, s, t, mask):
    """Score rows of T >= 8 (the row max and sum run over 8 lanes and a
    tail) and the query blocks of ViT's 197 and BERT's 128 tokens."""
    from hwtune.engine.ops_harness import run_ops
    ins = {"q": ((1, 2, s, 16), None, None), "kt": ((1, 2, 16, t), None, None),
           "v": ((1, 2, t, 24), None, None)}
    if mask:
        ins["m"] = (mask, -4, 1)
    g = _one_op_graph(tmp_path, "attention", ins, {"scale": 0.25})
    want = run_reference(g)["y"]
    got = run_ops(g, nth=nth)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_engine_out_of_range_index_is_nan_not_a_crash(tmp_path):
    from hwtune.engine.instance import NativeEngine
    g = _one_op_graph(tmp_path, "take", {"t": ((4, 3), None, None), "i": ((3,), 0, 4)},
                      {"axis": 0})
    with NativeEngine(g, threads=2) as eng:
        eng.set_input("i", np.array([1, 1e9, -5], np.float32))
        eng.run()
        y = eng.outputs()["y"]
    assert np.isfinite(y[0]).all() and np.isnan(y[1:]).all()


# -- ONNX rows against ONNX Runtime ----------------------------------------------

def _vi(name, kind, shape):
    return helper.make_tensor_value_info(name, kind, shape)


def _match_ort(path, tmp_path, feeds):
    """Import, run the reference and the engine on feeds, compare with ORT."""
    ort = pytest.importorskip("onnxruntime")
    out = tmp_path / "m.json"
    res = invoke("import", path, "-o", out)
    assert res.exit_code == 0, res.output
    g = load_model(str(out))
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    from hwtune.engine.instance import NativeEngine
    fl = {k: np.asarray(v, np.float32) for k, v in feeds.items()}
    with NativeEngine(g, threads=2) as eng:
        for k, v in fl.items():
            eng.set_input(k, v)
        eng.run()
        got = eng.outputs()
    r = run_reference(g, fl)
    for o, w in zip(g.outputs, want):
        w = np.asarray(w, np.float64)
        scale = max(np.abs(w).max(), 1e-30)
        assert np.abs(r[o] - w).max() <= TOL * scale, o
        assert np.abs(got[o] - w).max() <= TOL * scale, o
    return g


def _peers_agree(model_json):
    """`compare` of a model.json: its ONNX export in ORT and the PyTorch
    peer graph (every op's export row and torch form) agree with hwtune."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("torch")
    res = invoke("compare", model_json, "--with", "ort,torch", "--reps", "1")
    assert res.exit_code == 0, res.output
    assert res.output.count("ok (max rel. diff") == 2, res.output


def test_comparisons_logic_where_cast_import_and_match_ort(tmp_path):
    mk = helper.make_node
    nodes = [mk("Equal", ["ids", "k"], ["eq"]), mk("Not", ["eq"], ["ne"]),
             mk("Less", ["x", "z"], ["lt"]), mk("LessOrEqual", ["x", "z"], ["le"]),
             mk("Greater", ["x", "z"], ["gt"]), mk("GreaterOrEqual", ["x", "z"], ["ge"]),
             mk("Or", ["lt", "eq"], ["o"]), mk("Xor", ["le", "ge"], ["xo"]),
             mk("And", ["o", "ne"], ["a"]), mk("Cast", ["m"], ["mb"], to=TensorProto.BOOL),
             mk("And", ["a", "mb"], ["ab0"]),
             mk("Sub", ["x", "z"], ["xh"]),
             mk("Cast", ["xh"], ["xb"], to=TensorProto.BOOL),  # x - 0.5 != 0: not_equal
             mk("And", ["ab0", "xb"], ["ab"]),
             mk("Where", ["ab", "x", "big"], ["w"]),
             mk("Cast", ["xo"], ["xf"], to=TensorProto.FLOAT),
             mk("Cast", ["gt"], ["gi"], to=TensorProto.INT64),
             mk("Cast", ["gi"], ["gf"], to=TensorProto.FLOAT),
             mk("Cast", ["x"], ["xi"], to=TensorProto.INT64),  # toward zero
             mk("Cast", ["xi"], ["xif"], to=TensorProto.FLOAT),
             mk("Add", ["xf", "gf"], ["s"]), mk("Add", ["s", "w"], ["s2"]),
             mk("Add", ["s2", "xif"], ["y"])]
    path = save(nodes, [_vi("ids", TensorProto.INT64, [2, 6]),
                         _vi("m", TensorProto.INT64, [2, 6]),
                         _vi("x", TensorProto.FLOAT, [2, 6])],
                 [_vi("y", TensorProto.FLOAT, [2, 6])],
                 {"k": np.array(3, np.int64), "z": np.array([0.5], np.float32),
                  "big": np.array(-1e9, np.float32)}, tmp_path / "cmp.onnx")
    x = RNG.uniform(-3, 3, (2, 6)).astype(np.float32)
    x[0, :2] = 0.5  # equal to z
    feeds = {"ids": RNG.integers(0, 6, (2, 6)), "m": RNG.integers(0, 2, (2, 6)), "x": x}
    g = _match_ort(path, tmp_path, feeds)
    assert {"equal", "less", "less_equal", "greater", "greater_equal", "logical_or",
            "logical_xor", "logical_and", "logical_not", "where", "trunc", "not_equal"} <= \
        {op.op for op in g.ops}
    _peers_agree(tmp_path / "m.json")


def test_gather_gather_elements_cumsum_expand_tile_import_and_match_ort(tmp_path):
    mk = helper.make_node
    table = RNG.standard_normal((10, 4)).astype(np.float32)
    buf = np.arange(20, dtype=np.int64).reshape(1, 20) % 3
    nodes = [mk("Gather", ["table", "ids"], ["emb"]),                 # [2, 5, 4]
             mk("Cast", ["m"], ["mf"], to=TensorProto.FLOAT),
             mk("CumSum", ["m", "ax"], ["pos"], exclusive=1),          # int64 [2, 5]
             mk("GatherElements", ["buf2", "pos"], ["tt"], axis=1),    # [2, 5]
             mk("Cast", ["tt"], ["ttf"], to=TensorProto.FLOAT),
             mk("Unsqueeze", ["ttf", "ax2"], ["tt3"]),                 # [2, 5, 1]
             mk("Expand", ["tt3", "shp"], ["te"]),                     # [2, 5, 4]
             mk("Add", ["emb", "te"], ["e2"]),
             mk("Tile", ["mf", "reps"], ["mt"]),                       # [2, 20]
             mk("Unsqueeze", ["mt", "ax2"], ["mt3"]),
             mk("Slice", ["mt3", "s0", "s1", "axs"], ["mt5"]),          # [2, 5, 1]
             mk("Mul", ["e2", "mt5"], ["y"])]
    path = save(nodes, [_vi("ids", TensorProto.INT64, [2, 5]),
                         _vi("m", TensorProto.INT64, [2, 5])],
                 [_vi("y", TensorProto.FLOAT, [2, 5, 4])],
                 {"table": table, "buf2": np.concatenate([buf, buf]),
                  "ax": np.array(1, np.int64), "ax2": np.array([2], np.int64), "axs": np.array([1]),
                  "shp": np.array([1, 1, 4], np.int64), "reps": np.array([1, 4], np.int64),
                  "s0": np.array([3], np.int64), "s1": np.array([8], np.int64)},
                 tmp_path / "idx.onnx")
    feeds = {"ids": RNG.integers(0, 10, (2, 5)), "m": RNG.integers(0, 2, (2, 5))}
    g = _match_ort(path, tmp_path, feeds)
    ids = next(t for t in g.inputs if t.name == "ids")
    assert ids.dtype == "int64" and (ids.init["low"], ids.init["high"]) == (0, 10)
    m = next(t for t in g.inputs if t.name == "m")
    assert (m.init["low"], m.init["high"]) == (0, 2)  # indexes no table: a mask
    _peers_agree(tmp_path / "m.json")


def test_integer_past_2_24_is_refused(tmp_path):
    mk = helper.make_node
    nodes = [mk("Mul", ["ids", "k"], ["big"]), mk("Gather", ["table", "big"], ["y"])]
    path = save(nodes, [_vi("ids", TensorProto.INT64, [3])], [_vi("y", TensorProto.FLOAT, [3])],
                 {"k": np.array((1 << 24) + 3, np.int64),  # ids in [0, 2): up to 2^24 + 3
                  "table": np.zeros((100, 2), np.float32)}, tmp_path / "big.onnx")
    one_line_error(invoke("import", path, "-o", tmp_path / "b.json"), "2^24")


# -- the zoo -------------------------------------------------------------------------

def _zoo():
    sys.path.insert(0, ZOO_DIR)
    import zoo_models as Z
    Z.torchvision_models()  # transformers imports torchvision: stub its meta ops first
    return Z


@pytest.fixture(scope="module")
def zoo_files(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    Z = _zoo()
    d = tmp_path_factory.mktemp("zoo")
    out = {}
    for name in ("bert_base", "distilbert", "gpt2", "roberta", "swin_t", "vit_b_16"):
        built = Z.BY_NAME[name].build(True)
        path = Z.export(built, d / f"{name}.onnx")
        files = {}
        for k, v in built.inputs.items():
            files[k] = str(d / f"{name}.{k}.npy")
            np.save(files[k], v)
        out[name] = (path, files)
    return out


@pytest.mark.parametrize("name", ["bert_base", "distilbert", "gpt2", "roberta", "swin_t",
                                  "vit_b_16"])
def test_zoo_small_imports_runs_and_matches_ort(zoo_files, tmp_path, name):
    pytest.importorskip("onnxruntime")
    path, files = zoo_files[name]
    js = tmp_path / f"{name}.json"
    res = invoke("import", path, "-o", js)
    assert res.exit_code == 0, res.output
    if name in ("bert_base", "distilbert", "roberta"):  # eager attention, fused at import
        assert [op.op for op in load_model(str(js)).ops].count("attention") == 2
    if name == "vit_b_16":  # q and k each scaled first (MHA's math path): into the op's scale
        ops = load_model(str(js)).ops
        made = {o.outputs[0]: o.op for o in ops}
        att = [o for o in ops if o.op == "attention"]
        assert len(att) == 2 and all(made.get(t) != "affine" for o in att for t in o.inputs[:2])
        assert all(o.attrs["scale"] != 1.0 for o in att)
    inputs = [a for k, f in files.items() for a in ("--input", f"{k}={f}")]
    res = invoke("run", js, "--check", "--iterations", "2", "--warmup", "0", *inputs)
    assert res.exit_code == 0, res.output
    assert "check:      ok" in res.output
    res = invoke("compare", path, "--with", "ort", "--reps", "1", *inputs)
    assert res.exit_code == 0, res.output
    assert "ok (max rel. diff" in res.output
    if name == "bert_base":  # the export and torch forms of the fused graph
        _peers_agree(js)


def test_int_input_out_of_range_is_one_line(zoo_files, tmp_path):
    path, files = zoo_files["bert_base"]
    ids = np.load(files["input_ids"])
    ids[0, 2] = 100  # the small vocabulary has 100 rows
    bad = tmp_path / "ids.npy"
    np.save(bad, ids)
    one_line_error(invoke("run", path, "--iterations", "1", "--input", f"input_ids={bad}"),
                   "input_ids", "[0, 100)", "at [0, 2]")


def test_bert_dynamic_axes_sized_with_set(tmp_path):
    pytest.importorskip("transformers")
    import torch
    Z = _zoo()
    built = Z.BY_NAME["bert_base"].build(True)
    path = tmp_path / "dyn.onnx"
    args = tuple(torch.from_numpy(v) for v in built.inputs.values())
    axes = {k: {0: "batch", 1: "seq"} for k in built.inputs}
    axes["y"] = {0: "batch", 1: "seq"}
    import warnings
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(built.model, args, str(path), input_names=list(built.inputs),
                          output_names=["y"], dynamic_axes=axes, opset_version=17, dynamo=False)
    res = invoke("import", path, "-o", tmp_path / "d.json", "--set", "batch=2", "--set",
                 "seq=24")
    assert res.exit_code == 0, res.output
    g = load_model(str(tmp_path / "d.json"))
    assert g.shapes["y"] == (2, 24, 32)
    res = invoke("compare", path, "--with", "ort", "--reps", "1", "--set", "batch=2",
                 "--set", "seq=24")
    assert res.exit_code == 0, res.output
    assert "ok (max rel. diff" in res.output


def test_fold_rules_on_constants_match_ort(tmp_path):
    """CumSum, GatherElements, ScatterND, Tile, Trilu, LessOrEqual,
    GreaterOrEqual and Xor on constants fold at import (Swin's shifted-window
    masks are built this way) and give ONNX Runtime's values."""
    mk = helper.make_node
    c = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    nodes = [mk("CumSum", ["c", "ax"], ["cs"], reverse=1, exclusive=1),
             mk("GatherElements", ["c", "gi"], ["ge"], axis=1),
             mk("ScatterND", ["c", "si", "su"], ["sn"]),
             mk("Tile", ["c", "reps"], ["ti"]),
             mk("Slice", ["ti", "s0", "s1", "ax1"], ["tc"]),
             mk("Trilu", ["c"], ["tr"], upper=0),
             mk("LessOrEqual", ["c", "z"], ["le"]), mk("GreaterOrEqual", ["c", "z"], ["ge2"]),
             mk("Xor", ["le", "ge2"], ["xo"]), mk("Cast", ["xo"], ["xf"], to=TensorProto.FLOAT),
             mk("Sum", ["x", "cs", "ge", "sn", "tc", "tr", "xf"], ["y"])]
    path = save(nodes, [_vi("x", TensorProto.FLOAT, [3, 4])],
                 [_vi("y", TensorProto.FLOAT, [3, 4])],
                 {"c": c, "ax": np.array(1, np.int64), "ax1": np.array([1], np.int64),
                  "gi": np.array([[3, 0, -1, 2]] * 3, np.int64),
                  "si": np.array([[1, 2], [0, 0]], np.int64), "su": np.array([40, 50], np.float32),
                  "reps": np.array([1, 2], np.int64), "s0": np.array([2], np.int64),
                  "s1": np.array([6], np.int64), "z": np.array(0.0, np.float32)},
                 tmp_path / "fold.onnx")
    g = _match_ort(path, tmp_path, {"x": RNG.standard_normal((3, 4)).astype(np.float32)})
    assert [op.op for op in g.ops] == ["sum"]  # everything else folded
