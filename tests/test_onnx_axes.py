"""ONNX axes out of the range the spec gives each op are refused, not
wrapped (onnx/axes.py): `hwtune import` of a model whose node has such an
axis exits 2 with one line naming the node, on the converter's path (a
run-time input) and on the constant folder's (every input a constant).
Axes inside the range, the ends included (Flatten's rank, Unsqueeze's and
OneHot's output rank), still import and match ONNX Runtime."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hwtune.onnx.axes import check_perm, normalize_axes, normalize_axis  # noqa: E402
from hwtune.onnx.errors import InvalidAxis, Unsupported  # noqa: E402

from conftest import invoke  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.usefixtures("scratch_cache")]

SHAPE = [1, 2, 3, 4]  # rank 4: axes -4..3 (Flatten -4..4; an output of rank 5: -5..4)
I64 = np.int64


def test_normalize_axis_takes_onnx_ranges():
    assert [normalize_axis(a, 4) for a in (-4, -1, 0, 3)] == [0, 3, 0, 3]
    assert normalize_axis(4, 4, inclusive=True) == 4 and normalize_axis(-4, 4, inclusive=True) == 0
    assert normalize_axes([-1, 0], 2) == [1, 0]
    assert check_perm([0, 2, 1], 3) == [0, 2, 1]
    for bad in (4, -5, 2 ** 40, -(2 ** 63)):
        with pytest.raises(InvalidAxis, match=rf"axis {bad} is out of range for a rank-4 "
                                              r"input \(-4\.\.3\)"):
            normalize_axis(bad, 4)
    with pytest.raises(InvalidAxis, match=r"\(-4\.\.4\)"):
        normalize_axis(5, 4, inclusive=True)
    with pytest.raises(InvalidAxis, match="axes 2 is out of range"):
        normalize_axes([0, 2], 2)
    for bad in ([0, 1, 2, -1], [0, 0, 1, 2], [0, 1, 2]):
        with pytest.raises(InvalidAxis, match="is not a permutation of the 4 axes"):
            check_perm(bad, 4)
    assert issubclass(InvalidAxis, Unsupported)  # a rule's refusal, with the node's name


def _c(name, values, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(values, dtype), name)


def _x(name="x", shape=SHAPE):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _y(shape):
    return helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))


def _zeros():
    return np.zeros(SHAPE, I64)


# op type -> (inputs after x (constants by name), attributes, opset, outputs)
# with an axis out of range for x's rank 4. Each name in "inputs" is an
# initializer given in "inits"; "" skips an optional input.
OUT_OF_RANGE = {
    "Softmax": dict(attrs={"axis": 4}),
    "Softmax opset 11": dict(op="Softmax", attrs={"axis": -5}, opset=11),
    "LogSoftmax": dict(attrs={"axis": 4}),
    "LayerNormalization": dict(inputs=["s"], inits={"s": np.ones(4)}, attrs={"axis": 4}),
    "LpNormalization": dict(attrs={"axis": -5}),
    "ArgMax": dict(attrs={"axis": 4}),
    "ArgMin": dict(attrs={"axis": -5}),
    "Concat": dict(inputs=["x"], attrs={"axis": 4}),
    "Split": dict(attrs={"axis": 4}, outputs=2),
    "Gather": dict(inputs=["i"], inits={"i": np.array([0], I64)}, attrs={"axis": 4}),
    "GatherElements": dict(inputs=["i"], inits={"i": _zeros()}, attrs={"axis": 4}),
    "ScatterElements": dict(inputs=["i", "u"], inits={"i": _zeros(), "u": np.ones(SHAPE)},
                            attrs={"axis": -5}),
    "CumSum": dict(inputs=["a"], inits={"a": np.array(4, I64)}),
    "Flatten": dict(attrs={"axis": 5}),
    "Squeeze": dict(inputs=["a"], inits={"a": np.array([4], I64)}),
    "Unsqueeze": dict(inputs=["a"], inits={"a": np.array([5], I64)}),  # output rank 5
    "Transpose": dict(attrs={"perm": [0, 1, 2, -1]}),
    "Slice": dict(inputs=["b", "e", "a"], inits={"b": np.array([0], I64), "e": np.array([1], I64),
                                                "a": np.array([4], I64)}),
    "Pad": dict(inputs=["p", "", "a"], inits={"p": np.array([1, 1], I64),
                                              "a": np.array([-5], I64)}, opset=18),
    "Resize": dict(inputs=["", "sc"], inits={"sc": np.array([2.0])}, attrs={"axes": [4]},
                   opset=18),
    "ReduceMean": dict(attrs={"axes": [4]}),
    "ReduceSum": dict(inputs=["a"], inits={"a": np.array([4], I64)}),
    "ReduceMax": dict(attrs={"axes": [-5]}),
    "ReduceL2": dict(attrs={"axes": [4]}),
    "ReduceLogSumExp": dict(attrs={"axes": [4]}),
    "TopK": dict(inputs=["k"], inits={"k": np.array([1], I64)}, attrs={"axis": 4}, outputs=2),
    "OneHot": dict(inputs=["n", "v"], inits={"n": np.array(3, I64), "v": np.array([0.0, 1.0])},
                   attrs={"axis": 5}),  # output rank 5
}


def _model(tmp_path, key, case, const_x=False):
    """The case's node named "n" on x (a graph input, or with const_x an
    initializer: the constant folder's path), its first output the graph's
    "y" (through SequenceAt for SplitToSequence)."""
    op = case.get("op", key)
    n_out = case.get("outputs", 1)
    outs = ["y"] + [f"y{k}" for k in range(1, n_out)]
    inits = [_c(k, v, v.dtype if v.dtype != np.float64 else np.float32)
             for k, v in case.get("inits", {}).items()]
    first = "x"
    nodes = []
    if case.get("int_x"):  # ONNX Runtime's OneHot takes integer indices
        first = "xi"
        nodes.append(helper.make_node("Cast", ["x"], ["xi"], to=TensorProto.INT64))
    nodes.append(helper.make_node(op, [first] + case.get("inputs", []), outs, name="n",
                                  **case.get("attrs", {})))
    ints = {"ArgMax": "y", "ArgMin": "y", "TopK": "y1"}.get(op)
    graph_outputs = [helper.make_tensor_value_info(
        o, TensorProto.INT64 if o == ints else TensorProto.FLOAT, ["d"]) for o in outs]
    inputs = [_x()]
    if const_x:  # x an initializer; a graph input of its own, unread
        inputs = [_x("z", [1])]
        inits.append(_c("x", np.arange(24).reshape(SHAPE)))
    g = helper.make_graph(nodes, "g", inputs, graph_outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", case.get("opset", 17))])
    m.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    return path


def _import_fails(tmp_path, path, *needles):
    res = invoke("import", path, "-o", tmp_path / "m.json")
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2, res.output
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    assert all(n in lines[0] for n in needles), res.output


@pytest.mark.parametrize("key", sorted(OUT_OF_RANGE))
def test_an_axis_out_of_range_is_one_error_line(tmp_path, key):
    case = OUT_OF_RANGE[key]
    op = case.get("op", key)
    why = "is not a permutation" if op == "Transpose" else "is out of range for a rank-"
    _import_fails(tmp_path, _model(tmp_path, key, case), f'node "n" ({op})', why)


FOLDED = ["Concat", "Split", "Gather", "GatherElements", "CumSum", "Flatten", "Squeeze",
          "Unsqueeze", "Transpose", "Slice", "ReduceSum", "ReduceMax", "TopK", "ArgMin",
          "OneHot", "ScatterElements"]


@pytest.mark.parametrize("key", FOLDED)
def test_an_axis_out_of_range_on_constants_is_one_error_line(tmp_path, key):
    """Every input a constant: the folder refuses the axis itself (it used
    to wrap it, or leave the node to a converter that reads run-time
    tensors)."""
    case = OUT_OF_RANGE[key]
    why = "is not a permutation" if key == "Transpose" else "is out of range for a rank-"
    _import_fails(tmp_path, _model(tmp_path, key, case, const_x=True), f'node "n" ({key})', why)


def test_a_per_axis_dequantize_axis_out_of_range_is_one_error_line(tmp_path):
    """A per-channel weight's DequantizeLinear (the QDQ form) with axis 4 on
    rank-4 weights; a per-tensor scale ignores the axis, as ONNX does."""
    w = np.ones([2, 2, 3, 3], np.int8)
    for axis, ok in ((4, False), (-4, True)):
        nodes = [helper.make_node("DequantizeLinear", ["w", "s", "zp"], ["wf"], name="n",
                                  axis=axis),
                 helper.make_node("Conv", ["x", "wf"], ["y"], name="conv", pads=[1, 1, 1, 1])]
        inits = [numpy_helper.from_array(w, "w"), _c("s", [0.5, 0.25]),
                 numpy_helper.from_array(np.zeros(2, np.int8), "zp")]
        g = helper.make_graph(nodes, "g", [_x("x", [1, 2, 5, 5])], [_y([1, 2, 5, 5])], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, str(tmp_path / "q.onnx"))
        if ok:
            res = invoke("import", tmp_path / "q.onnx", "-o", tmp_path / "q.json")
            assert res.exit_code == 0, res.output
        else:
            _import_fails(tmp_path, tmp_path / "q.onnx", 'node "n" (DequantizeLinear)',
                          "axis 4 is out of range for a rank-4 input")


# The ends of each range, which must still import: (key, attrs or inputs
# replaced) run against ONNX Runtime.
EDGES = [
    ("Flatten", dict(attrs={"axis": 4})),
    ("Flatten", dict(attrs={"axis": -4})),
    ("Unsqueeze", dict(inputs=["a"], inits={"a": np.array([4], I64)})),
    ("Unsqueeze", dict(inputs=["a"], inits={"a": np.array([-5], I64)})),
    ("Softmax", dict(attrs={"axis": -4})),
    ("Concat", dict(inputs=["x"], attrs={"axis": -4})),
    ("Gather", dict(inputs=["i"], inits={"i": np.array([1, 0], I64)}, attrs={"axis": -1})),
    ("ReduceSum", dict(inputs=["a"], inits={"a": np.array([-4, 3], I64)})),
    ("OneHot", dict(inputs=["n", "v"], inits={"n": np.array(3, I64), "v": np.array([0.0, 1.0])},
                    attrs={"axis": -5}, int_x=True)),
    ("Transpose", dict(attrs={"perm": [3, 2, 1, 0]})),
]


@pytest.mark.parametrize("key,case", EDGES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(EDGES)])
def test_axes_at_the_ends_of_the_range_still_import(tmp_path, key, case):
    ort = pytest.importorskip("onnxruntime")
    from conftest import run_engine
    from hwtune.graph import load_model
    from hwtune.onnx.importer import import_onnx
    path = _model(tmp_path, key, case)
    x = np.random.default_rng(5).integers(0, 3, SHAPE).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    import_onnx(str(path), str(tmp_path / "m.json"))
    got = run_engine(load_model(str(tmp_path / "m.json")), {"x": x})["y"]
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-6, atol=1e-6)
