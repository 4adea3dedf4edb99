"""Forms found by exporting architectures beyond the held-out set (issue
#41): OneHot of run-time ids (CANINE's hash buckets) and of constants,
EyeLike (XLNet's relative-attention mask), a one-operand Einsum (XLNet's
"ijbn->bnij"), an empty Slice concatenated away (Phi-3's rotary "pass"
half at partial_rotary_factor 1.0), a 0/1 mask times 1e30 (XLNet) and ids
read through a Transpose before their embedding lookup (XLNet), GatherND
and ScatterElements at constant indices (torch's dynamo exporter: every
Hugging Face attention mask, BART's shift_tokens_right): each imports, and
the numpy reference and the engine match ONNX Runtime."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hwtune.onnx.errors import OnnxImportError  # noqa: E402
from hwtune.onnx.importer import import_onnx  # noqa: E402

from onnx_models import import_and_compare, save  # noqa: E402 (tests/ is on sys.path)

RNG = np.random.default_rng(47)
pytestmark = pytest.mark.usefixtures("scratch_cache")


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def _save(path, nodes, inputs, outputs, inits=()):
    return save(nodes, inputs, outputs, {t.name: numpy_helper.to_array(t) for t in inits}, path)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_of_run_time_ids_matches_onnxruntime(axis, tmp_path):
    # ids through a table lookup (so the importer knows their range), then
    # OneHot with negative ids counted from the end, as ONNX defines.
    table = np.arange(-4, 8, dtype=np.int64)
    depth = 9
    nodes = [helper.make_node("Gather", ["table", "ids"], ["v"], name="lookup"),
             helper.make_node("OneHot", ["v", "depth", "values"], ["oh"], name="onehot",
                              axis=axis),
             helper.make_node("Mul", ["oh", "x"], ["y"], name="mul")]
    inits = [numpy_helper.from_array(table, "table"),
             numpy_helper.from_array(np.array([depth], np.int64), "depth"),
             numpy_helper.from_array(np.array([-0.5, 2.0], np.float32), "values")]
    out_shape = [3, 4]
    out_shape.insert(axis % 3, depth)
    path = _save(tmp_path / "m.onnx", nodes, [_vi("ids", [3, 4], TensorProto.INT64),
                                              _vi("x", out_shape)],
                 [_vi("y", out_shape)], inits)
    ids = RNG.integers(0, len(table), (3, 4)).astype(np.int64)
    x = RNG.standard_normal(out_shape).astype(np.float32)
    import_and_compare(path, tmp_path, {"ids": ids, "x": x})


def test_one_hot_of_constants_folds(tmp_path):
    nodes = [helper.make_node("OneHot", ["ids", "depth", "values"], ["oh"], name="onehot"),
             helper.make_node("Add", ["oh", "x"], ["y"], name="add")]
    inits = [numpy_helper.from_array(np.array([0, 3, -1], np.int64), "ids"),
             numpy_helper.from_array(np.array(4, np.int64), "depth"),
             numpy_helper.from_array(np.array([0.0, 1.0], np.float32), "values")]
    path = _save(tmp_path / "m.onnx", nodes, [_vi("x", [3, 4])], [_vi("y", [3, 4])], inits)
    g = import_and_compare(path, tmp_path, {"x": RNG.standard_normal((3, 4)).astype(np.float32)})
    assert [op.op for op in g.ops] == ["add"]


@pytest.mark.parametrize("k", [0, 1, -2])
def test_eye_like_becomes_a_constant(k, tmp_path):
    nodes = [helper.make_node("EyeLike", ["x"], ["e"], name="eye", k=k),
             helper.make_node("Sub", ["x", "e"], ["y"], name="sub")]
    path = _save(tmp_path / "m.onnx", nodes, [_vi("x", [4, 6])], [_vi("y", [4, 6])])
    g = import_and_compare(path, tmp_path, {"x": RNG.standard_normal((4, 6)).astype(np.float32)})
    assert [op.op for op in g.ops] == ["sub"]


@pytest.mark.parametrize("eq,shape", [("ijbn->bnij", [3, 4, 2, 5]), ("ijk->kj", [3, 4, 5]),
                                      ("ij->ij", [3, 4])])
def test_one_operand_einsum_matches_onnxruntime(eq, shape, tmp_path):
    x = RNG.standard_normal(shape).astype(np.float32)
    out = list(np.einsum(eq, x).shape)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Einsum", ["r"], ["y"], name="einsum", equation=eq)]
    path = _save(tmp_path / "m.onnx", nodes, [_vi("x", shape)], [_vi("y", out)])
    import_and_compare(path, tmp_path, {"x": x})


def test_einsum_diagonal_is_one_error(tmp_path):
    nodes = [helper.make_node("Einsum", ["x"], ["y"], name="einsum", equation="ii->i")]
    path = _save(tmp_path / "m.onnx", nodes, [_vi("x", [3, 3])], [_vi("y", [3])])
    with pytest.raises(OnnxImportError, match="a diagonal"):
        import_onnx(str(path), str(tmp_path / "m.json"))


def test_empty_slice_concatenated_away(tmp_path):
    # x[..., 8:] of an 8-wide axis is empty; concat([relu(x), empty]) is relu(x)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Slice", ["x", "b", "e", "ax"], ["s"], name="slice"),
             helper.make_node("Concat", ["r", "s"], ["y"], name="concat", axis=-1)]
    inits = [numpy_helper.from_array(np.array([8], np.int64), n) for n in ("b",)] + [
        numpy_helper.from_array(np.array([2 ** 62], np.int64), "e"),
        numpy_helper.from_array(np.array([-1], np.int64), "ax")]
    path = _save(tmp_path / "m.onnx", nodes, [_vi("x", [2, 3, 8])], [_vi("y", [2, 3, 8])],
                 inits)
    import_and_compare(path, tmp_path, {"x": RNG.standard_normal((2, 3, 8)).astype(np.float32)})


def test_empty_tensor_read_at_run_time_is_one_error(tmp_path):
    # w[:, 8:9] is empty; added to the run-time x it is read at run time
    nodes = [helper.make_node("Slice", ["w", "b", "e", "ax"], ["s"], name="slice"),
             helper.make_node("Add", ["s", "x"], ["y"], name="add")]
    inits = [numpy_helper.from_array(np.array([v], np.int64), n)
             for n, v in (("b", 8), ("e", 9), ("ax", -1))]
    inits.append(numpy_helper.from_array(np.ones((2, 8), np.float32), "w"))
    path = _save(tmp_path / "m.onnx", nodes, [_vi("x", [2, 1])], [_vi("y", [2, 0])], inits)
    with pytest.raises(OnnxImportError, match="empty tensor"):
        import_onnx(str(path), str(tmp_path / "m.json"))


def test_mask_times_a_huge_constant_imports(tmp_path):
    # (ids > 0) as float, times 1e30, subtracted from scores: the integer
    # check must not refuse the {0, 1e30} mask (XLNet's attention mask).
    nodes = [helper.make_node("Gather", ["table", "ids"], ["v"], name="lookup"),
             helper.make_node("Greater", ["v", "zero"], ["m"], name="gt"),
             helper.make_node("Cast", ["m"], ["mf"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Mul", ["mf", "big"], ["pen"], name="mul"),
             helper.make_node("Sub", ["x", "pen"], ["d"], name="sub"),
             helper.make_node("Softmax", ["d"], ["y"], name="softmax", axis=-1)]
    inits = [numpy_helper.from_array(np.array([0, 1, 0, 2, 0, 3], np.int64), "table"),
             numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array(1e30, np.float32), "big")]
    path = _save(tmp_path / "m.onnx", nodes, [_vi("ids", [2, 5], TensorProto.INT64),
                                              _vi("x", [2, 5])], [_vi("y", [2, 5])], inits)
    ids = np.array([[0, 1, 2, 3, 4], [5, 0, 2, 4, 1]], np.int64)
    import_and_compare(path, tmp_path, {"ids": ids, "x": RNG.standard_normal((2, 5))
                                        .astype(np.float32)})


def test_ids_read_through_a_transpose_take_their_tables_range(tmp_path):
    nodes = [helper.make_node("Transpose", ["ids"], ["t"], name="t", perm=[1, 0]),
             helper.make_node("Gather", ["table", "t"], ["y"], name="lookup")]
    table = RNG.standard_normal((10, 4)).astype(np.float32)
    path = _save(tmp_path / "m.onnx", nodes, [_vi("ids", [2, 3], TensorProto.INT64)],
                 [_vi("y", [3, 2, 4])], [numpy_helper.from_array(table, "table")])
    g = import_and_compare(path, tmp_path, {"ids": np.array([[0, 9, 4], [7, 1, 3]], np.int64)})
    ids = next(t for t in g.inputs if t.name == "ids")
    assert (ids.init["low"], ids.init["high"]) == (0, 10)


@pytest.mark.parametrize("dshape,idx,b", [
    ((2, 3, 4), [[[0, 1]], [[1, -1]]], 0),          # two index tuples, rows of 4
    ((1, 16), [[[[0, 3]], [[0, 15]]]], 0),          # the HF mask's attention_mask[b, kv] form
    ((2, 3, 4), [[1], [2]], 1),                     # batch_dims 1
    ((2, 3, 4), [[0, 1, 2], [1, 2, 3]], 0),         # full tuples: single elements
])
def test_gather_nd_of_run_time_data_matches_onnxruntime(dshape, idx, b, tmp_path):
    # torch's dynamo exporter writes every Hugging Face attention mask as a
    # GatherND of the run-time mask at constant indices.
    idx = np.asarray(idx, np.int64)
    k = idx.shape[-1]
    out = list(idx.shape[:-1]) + list(dshape[b + k:])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("GatherND", ["r", "idx"], ["y"], name="gnd", batch_dims=b)]
    path = _save(tmp_path / "m.onnx", nodes, [_vi("x", list(dshape))], [_vi("y", out)],
                 [numpy_helper.from_array(idx, "idx")])
    g = import_and_compare(path, tmp_path, {"x": RNG.standard_normal(dshape).astype(np.float32)})
    assert "take" in [op.op for op in g.ops]


def test_gather_nd_of_constants_folds_and_bad_indices_are_one_error(tmp_path):
    data = RNG.standard_normal((3, 4)).astype(np.float32)
    nodes = [helper.make_node("GatherND", ["d", "idx"], ["g"], name="gnd"),
             helper.make_node("Add", ["g", "x"], ["y"], name="add")]
    inits = [numpy_helper.from_array(data, "d"),
             numpy_helper.from_array(np.array([[2], [0]], np.int64), "idx")]
    path = _save(tmp_path / "m.onnx", nodes, [_vi("x", [2, 4])], [_vi("y", [2, 4])], inits)
    g = import_and_compare(path, tmp_path, {"x": RNG.standard_normal((2, 4)).astype(np.float32)})
    assert [op.op for op in g.ops] == ["add"]
    nodes = [helper.make_node("GatherND", ["x", "idx"], ["y"], name="gnd")]
    path = _save(tmp_path / "bad.onnx", nodes, [_vi("x", [3, 4])], [_vi("y", [1, 4])],
                 [numpy_helper.from_array(np.array([[3]], np.int64), "idx")])
    with pytest.raises(OnnxImportError, match="out of range"):
        import_onnx(str(path), str(tmp_path / "bad.json"))


@pytest.mark.parametrize("axis,idx", [(1, [[1, 0, 3]]), (0, [[1, 0, 1, 0]]), (-1, [[-1, 0]])])
def test_scatter_elements_of_run_time_data_matches_onnxruntime(axis, idx, tmp_path):
    # BART's shift_tokens_right through the dynamo exporter (select_scatter)
    idx = np.asarray(idx, np.int64)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Neg", ["u"], ["nu"], name="neg"),
             helper.make_node("ScatterElements", ["r", "idx", "nu"], ["y"], name="sc",
                              axis=axis)]
    path = _save(tmp_path / "m.onnx", nodes, [_vi("x", [2, 4]), _vi("u", list(idx.shape))],
                 [_vi("y", [2, 4])], [numpy_helper.from_array(idx, "idx")])
    feeds = {"x": RNG.standard_normal((2, 4)).astype(np.float32),
             "u": RNG.standard_normal(idx.shape).astype(np.float32)}
    g = import_and_compare(path, tmp_path, feeds)
    assert "take" in [op.op for op in g.ops]


def test_scatter_elements_of_constants_folds(tmp_path):
    nodes = [helper.make_node("ScatterElements", ["d", "idx", "u"], ["s"], name="sc", axis=1),
             helper.make_node("Add", ["s", "x"], ["y"], name="add")]
    inits = [numpy_helper.from_array(np.zeros((2, 3), np.float32), "d"),
             numpy_helper.from_array(np.array([[2], [0]], np.int64), "idx"),
             numpy_helper.from_array(np.array([[5.0], [7.0]], np.float32), "u")]
    path = _save(tmp_path / "m.onnx", nodes, [_vi("x", [2, 3])], [_vi("y", [2, 3])], inits)
    g = import_and_compare(path, tmp_path, {"x": RNG.standard_normal((2, 3)).astype(np.float32)})
    assert [op.op for op in g.ops] == ["add"]
