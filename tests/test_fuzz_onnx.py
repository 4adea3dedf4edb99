"""The seeded ONNX fuzzer (benchmarks/fuzz_onnx.py) in the test suite: 60
mutants of its small seed models through `hwtune import`, `hwtune run
--check` and ONNX Runtime; any traceback or internal error, crash, hang or
output that differs from ONNX Runtime's fails. The script runs thousands by
hand. Then one regression test per bug it found: each was an internal
error (a traceback behind 'internal error: ...') where a clean one-line
refusal belongs."""

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import fuzz_onnx  # noqa: E402

from hwtune.onnx.errors import OnnxImportError  # noqa: E402
from hwtune.onnx.importer import import_onnx  # noqa: E402

COUNT = 60


def test_60_mutants_end_in_a_clean_refusal_or_a_run_that_matches_onnx_runtime():
    out = fuzz_onnx.run_fuzz(COUNT, seed=0, workers=2, timeout=60)
    assert sum(out["verdicts"].values()) == COUNT
    assert out["failures"] == [], "\n".join(
        f"#{f['index']} {f['verdict']}: {f['mutant']}: {f['detail']}" for f in out["failures"])
    # Both sides are exercised: mutants hwtune refuses and mutants it runs.
    assert out["verdicts"].get("refused", 0) > COUNT // 2
    assert out["verdicts"].get("ran", 0) >= 2


def test_the_oracle_reports_a_wrong_answer_and_an_internal_error(monkeypatch):
    """A seed run with one output changed after the run is WRONG; a stderr
    with a traceback is INTERNAL; a clean last line is a refusal."""
    name, seed = fuzz_onnx.seeds()[0]
    m = {"index": 0, "bytes": seed.SerializeToString()}
    assert fuzz_onnx.check_mutant(m) == ("ran", "matches ORT")
    real = fuzz_onnx._compare
    monkeypatch.setattr(fuzz_onnx, "_compare", lambda ours, ref: real(
        {k: v + 0.1 * np.abs(v).max() for k, v in ours.items()}, ref))
    assert fuzz_onnx.check_mutant(m)[0] == "WRONG"
    assert fuzz_onnx._judge_failure(1, "Traceback (most recent call last):\n  x\nValueError",
                                    "run")[0] == "INTERNAL"
    assert fuzz_onnx._judge_failure(1, "error: internal error: ValueError: x", "run")[0] == \
        "INTERNAL"
    assert fuzz_onnx._judge_failure(2, "note: x\nerror: bad pads", "run")[0] == "refused"
    assert fuzz_onnx._judge_failure(-11, "", "run")[0] == "CRASH"
    assert fuzz_onnx._judge_failure(None, "", "run")[0] == "HANG"


@pytest.mark.parametrize("index", [3, 77])
def test_a_mutant_is_reproducible_from_its_seed_and_index(index):
    seeds = fuzz_onnx.seeds()
    a = fuzz_onnx.make_mutant(seeds, index, 11)
    b = fuzz_onnx.make_mutant(seeds, index, 11)
    assert a["what"] == b["what"] and a["bytes"] == b["bytes"]


# -- regressions: what the fuzzer found -------------------------------------
def _seed(name):
    m = dict(fuzz_onnx.seeds())[name]
    out = type(m)()
    out.CopyFrom(m)
    return out


def _init(m, name):
    return next(t for t in m.graph.initializer if t.name == name)


def _refused(m, tmp_path, *needles):
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    with pytest.raises(OnnxImportError) as e:
        import_onnx(str(path), str(tmp_path / "m.json"))
    msg = str(e.value)
    assert "\n" not in msg and all(n in msg for n in needles), msg


@pytest.mark.parametrize("dims", [[], [1], [4, 3, 3, 2], [2, 3, 3, 3]])
def test_an_initializer_whose_data_does_not_fill_its_dims_is_refused(tmp_path, dims):
    """Was 'internal error: ValueError: cannot reshape array of size 108
    into shape (4,3,3,2)' (fuzz_onnx seed 0: init c1w dims [4, 3, 3, 2])."""
    m = _seed("cnn")
    t = _init(m, "c1w")
    del t.dims[:]
    t.dims.extend(dims)
    _refused(m, tmp_path, 'initializer "c1w" (FLOAT, dims', "does not hold the data")


def test_an_initializer_whose_bytes_are_of_another_type_is_refused(tmp_path):
    """float32 bytes declared FLOAT16 (twice as many values as the dims)."""
    m = _seed("grouped")
    _init(m, "dww").data_type = TensorProto.FLOAT16
    _refused(m, tmp_path, 'initializer "dww" (FLOAT16, dims [4, 1, 3, 3])')


def test_a_constant_node_whose_tensor_does_not_fill_its_dims_is_refused(tmp_path):
    m = _seed("resize")
    pads = _init(m, "pads2")
    m.graph.initializer.remove(pads)
    value = numpy_helper.from_array(numpy_helper.to_array(pads), "pads2")
    del value.dims[:]
    value.dims.append(3)
    m.graph.node.insert(0, helper.make_node("Constant", [], ["pads2"], value=value))
    _refused(m, tmp_path, '(Constant): attribute "value"', "does not hold the data")


@pytest.mark.parametrize("what,edit,needle", [
    ("X rank", lambda m: m.graph.input[0].type.tensor_type.shape.dim.add().__setattr__(
        "dim_value", 2), "LSTM input X of shape [4, 1, 3, 2]"),
    ("R rank", lambda m: _reshape_init(m, "R", [20, 5]), "LSTM R of shape [20, 5]"),
    ("W size", lambda m: _reshape_init(m, "W", [1, 10, 6]), "LSTM W of shape [1, 10, 6]"),
    ("B size", lambda m: _reshape_init(m, "B", [1, 20, 2]), "LSTM B of shape [1, 20, 2]"),
    ("hidden_size", lambda m: _set_attr(m.graph.node[0], "hidden_size", -1),
     "LSTM hidden_size=-1 but R"),
])
def test_an_lstm_whose_shapes_do_not_agree_is_refused(tmp_path, what, edit, needle):
    """Was 'internal error: ValueError: too many values to unpack' (an X of
    rank 4), IndexError (R of rank 2); a hidden_size contradicting R was
    ignored (ONNX Runtime refuses it)."""
    m = _seed("lstm")
    edit(m)
    _refused(m, tmp_path, 'node "" (LSTM)', needle)


def _reshape_init(m, name, dims):
    t = _init(m, name)
    a = numpy_helper.to_array(t)
    t.CopyFrom(numpy_helper.from_array(a.reshape(dims), name))


def _set_attr(node, name, value):
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    node.attribute.append(helper.make_attribute(name, value))


@pytest.mark.parametrize("perm", [[0, 2, 1], [0, 2, 1, 3, 4], [0, 1, 1, 3]])
def test_a_transpose_perm_that_is_not_a_permutation_of_its_axes_is_refused(tmp_path, perm):
    """Was 'internal error: IndexError: list index out of range'."""
    m = _seed("transformer")
    node = next(n for n in m.graph.node if n.op_type == "Transpose")
    _set_attr(node, "perm", perm)
    _refused(m, tmp_path, "(Transpose): perm", "is not a permutation of the 4 axes")


def test_a_layer_norm_scale_that_does_not_broadcast_is_refused(tmp_path):
    """Was 'internal error: ValueError: input operand has more dimensions
    than allowed by the axis remapping' (numpy's broadcast_to)."""
    m = _seed("transformer")
    _reshape_init(m, "ln_s", [2, 4, 1])
    _refused(m, tmp_path, "LayerNormalization scale of shape [2, 4, 1]",
             "the normalised shape is [8]")


@pytest.mark.parametrize("node,axis", [("Gather", 100), ("Gather", 2 ** 40), ("Softmax", -5),
                                       ("LayerNormalization", 3), ("Concat", 3)])
def test_an_axis_out_of_range_is_refused_not_wrapped(tmp_path, node, axis):
    """Gather axis=100 on a rank-2 table imported as axis 0 (100 % 2): a
    made-up answer to a model ONNX Runtime refuses (every op's axes:
    tests/test_onnx_axes.py)."""
    m = _seed("transformer")
    _set_attr(next(n for n in m.graph.node if n.op_type == node), "axis", axis)
    _refused(m, tmp_path, f"({node}):", f"axis {axis} is out of range for a rank-")


@pytest.mark.parametrize("kernel", [[-1, -2], [3, 100], [2 ** 40, 3], [3]])
def test_a_conv_kernel_shape_unlike_its_weights_is_refused(tmp_path, kernel):
    """kernel_shape was ignored (the weights' dims were used): [-1, -2] ran."""
    m = _seed("grouped")
    _set_attr(m.graph.node[0], "kernel_shape", kernel)
    _refused(m, tmp_path, "(Conv): kernel_shape", "does not match the weights' spatial dims")


def test_a_float_slice_index_tensor_is_refused(tmp_path):
    """Slice axes as DOUBLE (float bytes read as NaN) was 'internal error:
    ValueError: cannot convert float NaN to integer'; 2.5 was truncated."""
    m = _seed("transformer")
    _init(m, "ax").CopyFrom(numpy_helper.from_array(np.array([np.nan]), "ax"))
    _refused(m, tmp_path, "(Slice): Slice axes of type float64")


def test_a_resize_scale_that_is_not_positive_and_finite_is_refused(tmp_path):
    """scales [1, inf, 2, 2] was 'internal error: OverflowError: cannot
    convert float infinity to integer'."""
    m = _seed("resize")
    _init(m, "scales").CopyFrom(numpy_helper.from_array(
        np.array([1, np.inf, 2, 2], np.float32), "scales"))
    _refused(m, tmp_path, "(Resize): Resize scales [1.0, inf, 2.0, 2.0]")


def test_a_name_that_is_not_utf8_is_refused(tmp_path):
    """protobuf returns such a string field as bytes: a graph name of
    b'gr\\xefuped' was 'internal error: TypeError: Object of type bytes is
    not JSON serializable' when the model.json was written."""
    data = _seed("grouped").SerializeToString().replace(b"grouped", b"gr\xefuped")
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    with pytest.raises(OnnxImportError, match="a name is not UTF-8"):
        import_onnx(str(path), str(tmp_path / "m.json"))


def test_an_input_above_the_tensor_size_limit_is_refused_before_it_is_sized(tmp_path):
    """An LSTM input of [4, 2**40, 3] was 'internal error: MemoryError'
    (its zero initial state, [2**40, hidden], allocated at import)."""
    m = _seed("lstm")
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 2 ** 40
    _refused(m, tmp_path, 'input "x" of shape [4, 1099511627776, 3] needs',
             "HWTUNE_MAX_TENSOR_BYTES")
