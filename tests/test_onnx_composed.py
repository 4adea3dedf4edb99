"""The rest of ONNX's unary math (Acos ... Atanh, Round: kernels of the
element-wise table) and the ops imported as a few engine ops each
(onnx/composed.py: IsNaN, IsInf, LogSoftmax, ReduceLogSumExp,
DepthToSpace, SpaceToDepth, ArgMin, Mean, LRN, SplitToSequence /
SequenceAt, TopK, GridSample, Col2Im, Tile of any count as expand,
BatchNormalization folded on a constant): references against independent oracles, kernels against
references bit for bit on every ISA, imports against ONNX Runtime."""

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from hwtune.graph.ops.eltwise import REFERENCES  # noqa: E402
from hwtune.native import eltwise as ew  # noqa: E402
from hwtune.native.isa import supported_isas  # noqa: E402
from hwtune.onnx.errors import OnnxImportError  # noqa: E402
from hwtune.onnx.importer import import_onnx  # noqa: E402

from onnx_models import fin, import_and_compare, op_types, save  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning"),
              pytest.mark.usefixtures("scratch_cache")]

RNG = np.random.default_rng(44)

# op: (numpy float64 oracle, ONNX op, in-domain input range for ONNX Runtime)
MATH = {
    "acos": (np.arccos, "Acos", (-1.0, 1.0)),
    "asin": (np.arcsin, "Asin", (-1.0, 1.0)),
    "atan": (np.arctan, "Atan", (-20.0, 20.0)),
    "tan": (np.tan, "Tan", (-1.5, 1.5)),
    "sinh": (np.sinh, "Sinh", (-80.0, 80.0)),
    "cosh": (np.cosh, "Cosh", (-80.0, 80.0)),
    "asinh": (np.arcsinh, "Asinh", (-1e3, 1e3)),
    "acosh": (np.arccosh, "Acosh", (1.0, 1e3)),
    "atanh": (np.arctanh, "Atanh", (-0.999, 0.999)),
    "round": (np.round, "Round", (-9.0, 9.0)),
}
SPECIAL = np.array([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, 2.5, -2.5, 1e-30, 100.0, -100.0,
                    1e30, np.inf, -np.inf, np.nan, 3.0e38], np.float32)


def _values():
    return np.concatenate([SPECIAL, RNG.uniform(-3, 3, 500).astype(np.float32),
                           RNG.uniform(-200, 200, 200).astype(np.float32)])


@pytest.mark.parametrize("op", sorted(MATH))
def test_references_match_numpy_in_and_out_of_the_domain(op):
    """NaN outside the domain (acos(1.5), acosh(0.5), atanh(2)), +-inf
    where the value overflows or is a pole (sinh(100), atanh(1)), the
    float32 rounding of the double value elsewhere."""
    x = _values()
    want = MATH[op][0](x.astype(np.float64)).astype(np.float32)
    got = REFERENCES[op].fn(x)
    assert got.dtype == np.float32
    assert np.array_equal(np.isnan(got), np.isnan(want)), x[np.isnan(got) != np.isnan(want)]
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1.2e-7, atol=0)


def test_round_takes_halves_to_even_and_keeps_the_sign_of_zero():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999998, -0.2], np.float32)
    y = REFERENCES["round"].fn(x)
    assert y.tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 2.0, -0.0]
    assert math.copysign(1.0, float(y[-1])) == -1.0


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("op", sorted(MATH))
def test_kernels_match_the_reference_bit_for_bit(op, isa):
    x = _values()
    got = ew.eltwise(op, x, isa=isa)
    want = REFERENCES[op].fn(x)
    assert ew.max_abs_error(op, isa) == 0
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (op, isa, x[~same][:5], got[~same][:5], want[~same][:5])


@pytest.mark.parametrize("op", sorted(MATH))
def test_unary_math_imports_and_matches_onnxruntime(op, tmp_path):
    lo, hi = MATH[op][2]
    x = RNG.uniform(lo, hi, (2, 3, 5, 7)).astype(np.float32)
    if op == "round":
        x.reshape(-1)[:4] = [0.5, 1.5, -2.5, 3.5]
    path = save([helper.make_node(MATH[op][1], ["x"], ["y"], name="f")],
                [fin("x", list(x.shape))], [fin("y", list(x.shape))], {}, tmp_path / "u.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert op_types(g) == [op]


def _graph(nodes, x, out_shape, tmp_path, inits=None, opset=17, name="m.onnx"):
    return save(nodes, [fin("x", list(x.shape))], [fin("y", list(out_shape))], inits or {},
                tmp_path / name, opset)


def _int64(v):
    return np.asarray(v, np.int64)


@pytest.mark.parametrize("which", ["nan", "inf", "posinf", "neginf"])
def test_isnan_and_isinf_masks_match_onnxruntime(which, tmp_path):
    """As models use them: x with its NaN or infinite entries replaced."""
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    x[0, 1], x[1, 2], x[2, 3] = np.nan, np.inf, -np.inf
    flag = {"nan": helper.make_node("IsNaN", ["x"], ["m"]),
            "inf": helper.make_node("IsInf", ["x"], ["m"]),
            "posinf": helper.make_node("IsInf", ["x"], ["m"], detect_negative=0),
            "neginf": helper.make_node("IsInf", ["x"], ["m"], detect_positive=0)}[which]
    # Where(m, 7, x), then where anything non-finite is left: 0
    nodes = [flag, helper.make_node("Where", ["m", "seven", "x"], ["w"]),
             helper.make_node("IsNaN", ["w"], ["n"]), helper.make_node("IsInf", ["w"], ["i"]),
             helper.make_node("Or", ["n", "i"], ["bad"]),
             helper.make_node("Where", ["bad", "zero", "w"], ["y"])]
    path = _graph(nodes, x, x.shape, tmp_path,
                  {"seven": np.float32(7.0), "zero": np.float32(0.0)})
    import_and_compare(path, tmp_path, {"x": x})


@pytest.mark.parametrize("axis, opset", [(-1, 17), (1, 17), (1, 11)])
def test_log_softmax_is_finite_where_log_of_softmax_is_not(axis, opset, tmp_path):
    """Logits 200 apart: softmax underflows to 0 for the low ones, and
    log(0) = -inf; the max-shifted form keeps ONNX Runtime's finite values."""
    x = (RNG.standard_normal((2, 5, 40)) * 60).astype(np.float32)
    x[0, 0, 0] = 150.0
    path = _graph([helper.make_node("LogSoftmax", ["x"], ["y"], axis=axis)], x, x.shape,
                  tmp_path, opset=opset)
    g = import_and_compare(path, tmp_path, {"x": x})
    assert "log" in op_types(g) and "softmax" not in op_types(g)


@pytest.mark.parametrize("axes, keep", [([2], 1), ([1, 2], 0), (None, 1), (None, 0)])
def test_reduce_log_sum_exp_matches_onnxruntime(axes, keep, tmp_path):
    x = (RNG.standard_normal((2, 5, 30)) * 40).astype(np.float32)
    want = np.log(np.exp(x.astype(np.float64)).sum(axis=tuple(axes) if axes else None,
                                                    keepdims=bool(keep)))
    attrs = {"keepdims": keep, **({"axes": axes} if axes else {})}
    path = _graph([helper.make_node("ReduceLogSumExp", ["x"], ["y"], **attrs)], x,
                  want.shape, tmp_path)
    import_and_compare(path, tmp_path, {"x": x})


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_and_back_match_onnxruntime(mode, tmp_path):
    x = RNG.standard_normal((2, 18, 3, 4)).astype(np.float32)
    path = _graph([helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=3, mode=mode)], x,
                  (2, 2, 9, 12), tmp_path)
    import_and_compare(path, tmp_path, {"x": x})
    z = RNG.standard_normal((1, 3, 6, 8)).astype(np.float32)
    path = _graph([helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2)], z,
                  (1, 12, 3, 4), tmp_path, name="s.onnx")
    import_and_compare(path, tmp_path, {"x": z})


def test_pixel_shuffle_from_pytorch_imports(tmp_path):
    torch = pytest.importorskip("torch")
    from onnx_models import export
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 12, 3, padding=1), torch.nn.PixelShuffle(2),
                              torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.PixelUnshuffle(2))
    x = torch.randn(1, 3, 10, 12)
    path = export(net.eval(), x, str(tmp_path / "ps.onnx"))
    import_and_compare(path, tmp_path, {"x": x.numpy()})


@pytest.mark.parametrize("axis, keep, last", [(1, 1, 0), (2, 0, 0), (0, 1, 1)])
def test_argmin_takes_the_first_or_last_of_equal_minima(axis, keep, last, tmp_path):
    x = RNG.integers(-2, 2, (4, 6, 5)).astype(np.float32)  # many ties
    want = np.argmin(np.flip(x, axis), axis) if last else np.argmin(x, axis)
    if last:
        want = x.shape[axis] - 1 - want
    if keep:
        want = np.expand_dims(want, axis)
    nodes = [helper.make_node("ArgMin", ["x"], ["i"], axis=axis, keepdims=keep,
                              select_last_index=last),
             helper.make_node("Cast", ["i"], ["y"], to=TensorProto.FLOAT)]
    path = _graph(nodes, x, want.shape, tmp_path)
    import_and_compare(path, tmp_path, {"x": x})


def test_mean_of_broadcasting_inputs_matches_onnxruntime(tmp_path):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    nodes = [helper.make_node("Mean", ["x", "b", "c"], ["y"])]
    path = _graph(nodes, x, x.shape, tmp_path,
                  {"b": RNG.standard_normal(4).astype(np.float32),
                   "c": RNG.standard_normal((1, 4)).astype(np.float32)})
    import_and_compare(path, tmp_path, {"x": x})


@pytest.mark.parametrize("size, beta", [(5, 0.75), (3, 1.0), (1, 0.5)])
def test_lrn_matches_onnxruntime(size, beta, tmp_path):
    """AlexNet's and GoogLeNet's Caffe-era LRN (size 5, alpha 1e-4, beta
    0.75), here with a larger alpha so the window sum matters."""
    x = (RNG.standard_normal((2, 16, 7, 9)) * 3).astype(np.float32)
    path = _graph([helper.make_node("LRN", ["x"], ["y"], size=size, alpha=1e-2, beta=beta,
                                    bias=2.0)], x, x.shape, tmp_path)
    g = import_and_compare(path, tmp_path, {"x": x})
    assert "pool2d" in op_types(g)


@pytest.mark.parametrize("split, axis, keep, pos, out", [
    ([1, 2, 3], 1, 1, 2, (2, 3, 5)),
    ([1, 2, 3], 1, 1, -3, (2, 1, 5)),
    (4, 1, 1, 1, (2, 2, 5)),          # a scalar: pieces of 4, the last shorter
    (None, 2, 0, 3, (2, 6)),          # one element each, the axis dropped
    (None, 2, 1, 4, (2, 6, 1)),
])
def test_split_to_sequence_at_a_position_is_a_slice(split, axis, keep, pos, out, tmp_path):
    x = RNG.standard_normal((2, 6, 5)).astype(np.float32)
    inits = {"pos": _int64(pos)}
    ins = ["x"]
    if split is not None:
        inits["split"] = _int64(split)
        ins.append("split")
    nodes = [helper.make_node("SplitToSequence", ins, ["s"], axis=axis, keepdims=keep),
             helper.make_node("SequenceAt", ["s", "pos"], ["y"])]
    path = _graph(nodes, x, out, tmp_path, inits)
    g = import_and_compare(path, tmp_path, {"x": x})
    assert set(op_types(g)) <= {"slice", "reshape"}


def test_sequence_at_a_run_time_position_is_one_error_line(tmp_path):
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=1),
             helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0),
             helper.make_node("Cast", ["m"], ["p"], to=TensorProto.INT64),
             helper.make_node("SequenceAt", ["s", "p"], ["y"])]
    path = _graph(nodes, x, (2, 1), tmp_path)
    with pytest.raises(OnnxImportError, match=r"SequenceAt.*position.*must be a constant"):
        import_onnx(str(path), str(tmp_path / "m.json"))


def test_isinf_detecting_nothing_is_all_false_even_on_nan(tmp_path):
    x = np.array([[np.nan, np.inf, -np.inf, 1.0]], np.float32)
    nodes = [helper.make_node("IsInf", ["x"], ["m"], detect_negative=0, detect_positive=0),
             helper.make_node("Cast", ["m"], ["y"], to=TensorProto.FLOAT)]
    path = _graph(nodes, x, x.shape, tmp_path)
    from conftest import run_engine
    from hwtune.graph import load_model
    import_onnx(str(path), str(tmp_path / "m.json"))
    got = run_engine(load_model(str(tmp_path / "m.json")), {"x": x}, threads=1)
    assert got["y"].tolist() == [[0.0, 0.0, 0.0, 0.0]]


def test_a_sequence_as_the_model_output_is_one_error_line(tmp_path):
    g = helper.make_graph([helper.make_node("SplitToSequence", ["x"], ["s"], axis=1)], "g",
                          [fin("x", [2, 6])],
                          [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "s.onnx"))
    with pytest.raises(OnnxImportError, match=r'output "s" is a sequence'):
        import_onnx(str(tmp_path / "s.onnx"), str(tmp_path / "m.json"))



@pytest.mark.parametrize("shape, reps", [((2, 1, 3), (1, 100, 2)), ((2, 3), (3, 70)),
                                         ((1, 4, 2), (2, 1, 1)), ((3, 2), (1, 1))])
def test_tile_of_a_run_time_tensor_any_count_matches_onnxruntime(shape, reps, tmp_path):
    """Tile as an expand of a [before, 1, d, after] view per repeated axis:
    more than 64 copies too (SwiftFormer tiles its query vector 256 times),
    axes of size 1 and larger, several axes at once."""
    x = RNG.standard_normal(shape).astype(np.float32)
    out = [d * r for d, r in zip(shape, reps)]
    nodes = [helper.make_node("Tile", ["x", "reps"], ["t"]),
             helper.make_node("Mul", ["t", "two"], ["y"])]
    path = _graph(nodes, x, out, tmp_path, {"reps": _int64(reps), "two": np.float32(2.0)})
    g = import_and_compare(path, tmp_path, {"x": x})
    assert "concat" not in op_types(g)
    assert op_types(g).count("expand") == sum(r > 1 for r in reps)


@pytest.mark.parametrize("training", [1, 0])
def test_batch_norm_of_a_constant_weight_folds_at_import(training, tmp_path):
    """BiT's weight-standardised Conv: the weight, seen as [1, O, I*k*k],
    normalised by a training-mode BatchNormalization (its own statistics per
    output channel; the running mean / var outputs unused), reshaped back
    and convolved. Folded at import in both modes: one conv2d."""
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    w = (RNG.standard_normal((4, 3, 3, 3)) * 0.3 + 0.2).astype(np.float32)
    nodes = [helper.make_node("Reshape", ["w", "flat"], ["wf"]),
             helper.make_node("BatchNormalization", ["wf", "ones", "zeros", "mean", "var"],
                              ["wn", "rm", "rv"] if training else ["wn"], epsilon=1e-8,
                              momentum=1.0, training_mode=training),
             helper.make_node("Reshape", ["wn", "wshape"], ["ws"]),
             helper.make_node("Conv", ["x", "ws"], ["y"], pads=[1, 1, 1, 1])]
    inits = {"w": w, "flat": _int64([1, 4, 27]), "wshape": _int64([4, 3, 3, 3]),
             "ones": np.ones(4, np.float32), "zeros": np.zeros(4, np.float32),
             "mean": (RNG.standard_normal(4) * 0.1).astype(np.float32),
             "var": RNG.uniform(0.5, 1.5, 4).astype(np.float32)}
    path = _graph(nodes, x, (1, 4, 8, 8), tmp_path, inits, opset=15)
    g = import_and_compare(path, tmp_path, {"x": x})
    assert op_types(g) == ["conv2d"]


def test_training_mode_batch_norm_of_a_run_time_tensor_is_one_error_line(tmp_path):
    x = RNG.standard_normal((2, 4, 3)).astype(np.float32)
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                              training_mode=1)]
    inits = {k: np.ones(4, np.float32) for k in "sbmv"}
    path = _graph(nodes, x, x.shape, tmp_path, inits, opset=15)
    with pytest.raises(OnnxImportError, match=r"training-mode BatchNormalization of a run-time"):
        import_onnx(str(path), str(tmp_path / "m.json"))


@pytest.mark.parametrize("shape, axis, k, largest", [((2, 7), -1, 7, 0), ((2, 7), 1, 3, 1),
                                                     ((5, 3, 4), 0, 2, 1), ((3, 6, 2), 1, 6, 0)])
def test_top_k_matches_onnxruntime_ties_to_the_lower_index(shape, axis, k, largest, tmp_path):
    """Values and indices (as ViTMAE uses argsort's: a GatherElements at
    them), equal values in the input: the lower index first, as ONNX says."""
    x = RNG.integers(-3, 4, shape).astype(np.float32)  # many ties
    out = list(shape)
    out[axis] = k
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest),
             helper.make_node("GatherElements", ["x", "i"], ["g"], axis=axis),
             helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["fi", "ten"], ["f10"]),
             helper.make_node("Add", ["v", "f10"], ["vi"]),
             helper.make_node("Add", ["vi", "g"], ["y"])]
    path = _graph(nodes, x, out, tmp_path, {"k": _int64([k]), "ten": np.float32(10.0)})
    g = import_and_compare(path, tmp_path, {"x": x}, tol=0)
    assert "gather_elements" in op_types(g)


def test_top_k_of_a_constant_folds_and_a_long_axis_is_one_error_line(tmp_path):
    c = RNG.standard_normal((3, 5)).astype(np.float32)
    x = RNG.standard_normal((3, 2)).astype(np.float32)
    nodes = [helper.make_node("TopK", ["c", "k"], ["v", "i"], largest=1),
             helper.make_node("Add", ["x", "v"], ["y"])]
    path = _graph(nodes, x, x.shape, tmp_path, {"c": c, "k": _int64([2])})
    assert op_types(import_and_compare(path, tmp_path, {"x": x})) == ["add"]
    x = RNG.standard_normal((2, 4096)).astype(np.float32)
    nodes = [helper.make_node("TopK", ["x", "k"], ["y", "i"])]
    path = _graph(nodes, x, (2, 4), tmp_path, {"k": _int64([4])}, name="long.onnx")
    with pytest.raises(OnnxImportError, match=r"TopK over 4096 elements in 2 rows"):
        import_onnx(str(path), str(tmp_path / "l.json"))


@pytest.mark.parametrize("mode, pad, corners", [("bilinear", "zeros", 1), ("bilinear", "zeros", 0),
                                                ("bilinear", "border", 0),
                                                ("nearest", "zeros", 1)])
def test_grid_sample_matches_onnxruntime(mode, pad, corners, tmp_path):
    """RAFT's correlation lookup (bilinear, zeros, align_corners) and the
    other supported forms; the grid reaches past the image on every side."""
    x = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
    grid = RNG.uniform(-1.3, 1.3, (2, 4, 7, 2)).astype(np.float32)
    grid[0, 0, :3] = [[-1, -1], [1, 1], [0.2, 1.0]]  # corners and an edge exactly
    nodes = [helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=pad,
                              align_corners=corners)]
    path = save(nodes, [fin("x", [2, 3, 5, 6]), fin("g", [2, 4, 7, 2])], [fin("y", [2, 3, 4, 7])],
                {}, tmp_path / "gs.onnx", 16)
    import_and_compare(path, tmp_path, {"x": x, "g": grid})


def test_grid_sample_reflection_is_one_error_line(tmp_path):
    nodes = [helper.make_node("GridSample", ["x", "g"], ["y"], padding_mode="reflection")]
    path = save(nodes, [fin("x", [1, 1, 4, 4]), fin("g", [1, 2, 2, 2])], [fin("y", [1, 1, 2, 2])],
                {}, tmp_path / "gs.onnx", 16)
    with pytest.raises(OnnxImportError, match=r'padding_mode "reflection"'):
        import_onnx(str(path), str(tmp_path / "m.json"))


def _col2im_blocks(image, block, strides, pads, dil):
    nd = len(image)
    return int(np.prod([(image[i] + pads[i] + pads[i + nd] - dil[i] * (block[i] - 1) - 1)
                        // strides[i] + 1 for i in range(nd)]))


# (image_shape, block_shape, strides, pads, dilations, side by side: no conv_transpose2d)
COL2IM = [
    ([8, 6], [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], True),    # MobileViT-V2's fold
    ([7, 5], [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], True),    # blocks short of the image
    ([6, 6], [2, 3], [2, 3], [1, 0, 1, 3], [1, 1], True),    # pads cropped, then zeros
    ([7, 8], [3, 3], [1, 2], [1, 1, 1, 1], [1, 1], False),   # overlapping: sums
    ([9, 9], [2, 3], [1, 1], [0, 1, 0, 0], [2, 1], False),   # dilated
    ([7, 7], [2, 2], [3, 3], [0, 0, 0, 0], [1, 1], False),   # gaps between blocks
    ([10], [3], [2], [1, 1], [1], False),                    # 1-D
    ([12], [4], [4], [0, 0], [1], True),
]


@pytest.mark.parametrize("image, block, strides, pads, dil, side", COL2IM)
def test_col2im_matches_onnxruntime(image, block, strides, pads, dil, side, tmp_path):
    n, c = 2, 3
    k = int(np.prod(block))
    shape = [n, c * k, _col2im_blocks(image, block, strides, pads, dil)]
    x = RNG.standard_normal(shape).astype(np.float32)
    nodes = [helper.make_node("Col2Im", ["x", "img", "blk"], ["y"], strides=strides, pads=pads,
                              dilations=dil)]
    path = save(nodes, [fin("x", shape)], [fin("y", [n, c] + image)],
                {"img": _int64(image), "blk": _int64(block)}, tmp_path / "c2i.onnx", 18)
    g = import_and_compare(path, tmp_path, {"x": x})
    assert ("conv_transpose2d" in op_types(g)) != side, op_types(g)


def test_col2im_of_a_constant_folds_and_a_mismatched_block_count_is_one_error_line(tmp_path):
    c = RNG.standard_normal((1, 12, 9)).astype(np.float32)  # 3 channels, 3x3 blocks of 2x2
    x = RNG.standard_normal((1, 3, 5, 6)).astype(np.float32)
    nodes = [helper.make_node("Col2Im", ["c", "img", "blk"], ["f"], strides=[2, 2],
                              pads=[0, 0, 1, 0]),
             helper.make_node("Add", ["x", "f"], ["y"])]
    inits = {"c": c, "img": _int64([5, 6]), "blk": _int64([2, 2])}
    path = _graph(nodes, x, x.shape, tmp_path, inits, opset=18)
    assert op_types(import_and_compare(path, tmp_path, {"x": x})) == ["add"]
    nodes = [helper.make_node("Col2Im", ["x", "img", "blk"], ["y"], name="fold")]
    path = save(nodes, [fin("x", [1, 12, 5])], [fin("y", [1, 3, 4, 4])],
                {"img": _int64([4, 4]), "blk": _int64([2, 2])}, tmp_path / "bad.onnx", 18)
    with pytest.raises(OnnxImportError, match=r'"fold".*input of 5 blocks, but image_shape '
                                              r"\[4, 4\].* holds \[3, 3\]"):
        import_onnx(str(path), str(tmp_path / "b.json"))


def test_col2im_of_a_3d_image_is_one_error_line(tmp_path):
    nodes = [helper.make_node("Col2Im", ["x", "img", "blk"], ["y"], name="fold3")]
    path = save(nodes, [fin("x", [1, 8, 8])], [fin("y", [1, 1, 3, 3, 3])],
                {"img": _int64([3, 3, 3]), "blk": _int64([2, 2, 2])}, tmp_path / "c3.onnx", 18)
    with pytest.raises(OnnxImportError, match=r"only \[N, C\*prod\(block\), L\] into 1-D or "
                                              r"2-D images"):
        import_onnx(str(path), str(tmp_path / "c.json"))


@pytest.mark.parametrize("stride", [4, 2])
def test_torch_fold_exported_at_opset_18_imports(stride, tmp_path):
    """torch.nn.Unfold -> a 1x1 conv on the patches -> torch.nn.Fold, as
    MobileViT-V2 unfolds and folds its feature map (stride 4: side by side;
    2: overlapping 4x4 windows summed)."""
    torch = pytest.importorskip("torch")
    from onnx_models import export

    class Patches(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mix = torch.nn.Conv1d(3 * 16, 3 * 16, 1)

        def forward(self, x):
            p = torch.nn.functional.unfold(x, 4, stride=stride)
            return torch.nn.functional.fold(self.mix(p), (12, 16), 4, stride=stride)

    torch.manual_seed(0)
    x = torch.randn(2, 3, 12, 16)
    path = export(Patches().eval(), x, str(tmp_path / "fold.onnx"), opset=18)
    import_and_compare(path, tmp_path, {"x": x.numpy()})


def test_a_small_mobilevit_v2_from_transformers_matches_onnxruntime(tmp_path):
    """transformers' MobileViT-V2 (width 0.25, 64x64 pixels), whose three
    torch.nn.functional.fold calls export as Col2Im with the dynamo
    exporter (the TorchScript one fails on aten::col2im)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import os
    import sys
    from onnx_models import export, exporters
    if "dynamo" not in exporters():
        pytest.skip("onnxscript (torch's dynamo exporter) is not installed")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    import zoo_models as Z
    try:
        Z.torchvision_models()  # transformers imports torchvision through the zoo's stand-in
    except ImportError:
        pytest.skip("torchvision is not installed")
    import transformers
    torch.manual_seed(0)
    cfg = transformers.MobileViTV2Config(image_size=64, width_multiplier=0.25)
    inner = Z._liven(transformers.MobileViTV2Model(cfg)).eval()

    class Hidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = inner

        def forward(self, x):
            return self.m(pixel_values=x).last_hidden_state

    x = torch.randn(1, 3, 64, 64)
    path = export(Hidden().eval(), x, str(tmp_path / "mvit2.onnx"), exporter="dynamo")
    assert [n.op_type for n in onnx.load(path).graph.node].count("Col2Im") == 3
    import_and_compare(path, tmp_path, {"x": x.numpy()})
