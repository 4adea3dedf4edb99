"""Import-time fusions of Linear blocks (src/hwtune/onnx/fuse.py): the
exact GELU written out becomes one gelu op, a MatMul's bias Add becomes the
matmul's bias input. Each import is checked against ONNX Runtime (numpy
reference and engine, within 1e-4 of the output's scale)."""

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

from onnx_models import fin, import_and_compare, op_types, save  # noqa: E402 (tests/ is on sys.path)

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.usefixtures("scratch_cache")]

TOL = 1e-4
RNG = np.random.default_rng(43)


def c(v):
    return np.array(v, np.float32)


def _gelu_nodes(order):
    """x/2 (1 + erf(x / sqrt 2)) as exporters write it, the product with
    x/2 in one of three orders."""
    nodes = [helper.make_node("Div", ["x", "sqrt2"], ["d"], name="d"),
             helper.make_node("Erf", ["d"], ["e"], name="e"),
             helper.make_node("Add", ["e", "one"], ["a"], name="a")]
    if order == "x_then_half":      # PyTorch's nn.GELU export
        nodes += [helper.make_node("Mul", ["x", "a"], ["m"], name="m"),
                  helper.make_node("Mul", ["m", "half"], ["y"], name="y")]
    elif order == "half_x":         # (x * 0.5) * (1 + erf)
        nodes += [helper.make_node("Mul", ["x", "half"], ["h"], name="h"),
                  helper.make_node("Mul", ["h", "a"], ["y"], name="y")]
    else:                           # ((1 + erf) * 0.5) * x
        nodes += [helper.make_node("Mul", ["a", "half"], ["h"], name="h"),
                  helper.make_node("Mul", ["h", "x"], ["y"], name="y")]
    return nodes


GELU_INITS = {"sqrt2": c(math.sqrt(2.0)), "one": c(1.0), "half": c(0.5)}


@pytest.mark.parametrize("order", ["x_then_half", "half_x", "half_then_x"])
def test_erf_gelu_written_out_becomes_one_gelu(order, tmp_path):
    x = RNG.uniform(-5, 5, (4, 16)).astype(np.float32)
    path = save(_gelu_nodes(order), [fin("x", [4, 16])], [fin("y", [4, 16])], GELU_INITS,
                tmp_path / "g.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert op_types(g) == ["gelu"]
    assert g.ops[0].name == "y"


def test_erf_gelu_with_an_intermediate_read_twice_is_left_alone(tmp_path):
    x = RNG.uniform(-5, 5, (4, 16)).astype(np.float32)
    # the erf's output is also a graph output: nothing may be fused
    path = save(_gelu_nodes("x_then_half"), [fin("x", [4, 16])],
                [fin("y", [4, 16]), fin("e", [4, 16])], GELU_INITS, tmp_path / "g.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert "gelu" not in op_types(g) and "erf" in op_types(g)
    # a divisor other than sqrt 2 is another function
    path = save(_gelu_nodes("x_then_half"), [fin("x", [4, 16])], [fin("y", [4, 16])],
                {**GELU_INITS, "sqrt2": c(1.5)}, tmp_path / "g2.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert "gelu" not in op_types(g)


def _linear_nodes(bias_first):
    """[2, 5, 8] @ [8, 6] + b[6] as PyTorch exports nn.Linear on rank 3."""
    add = ["b", "mm"] if bias_first else ["mm", "b"]
    return [helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
            helper.make_node("Add", add, ["y"], name="y")]


@pytest.mark.parametrize("bias_first", [True, False])
@pytest.mark.parametrize("rank", [2, 3])
def test_matmul_bias_add_becomes_the_matmul_bias(bias_first, rank, tmp_path):
    shape = [2, 5, 8] if rank == 3 else [10, 8]
    x = RNG.standard_normal(shape).astype(np.float32)
    inits = {"w": RNG.standard_normal((8, 6)).astype(np.float32),
             "b": RNG.standard_normal(6).astype(np.float32)}
    path = save(_linear_nodes(bias_first), [fin("x", shape)], [fin("y", shape[:-1] + [6])],
                inits, tmp_path / "g.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert "add" not in op_types(g)
    mm = [op for op in g.ops if op.op == "matmul"]
    assert len(mm) == 1 and len(mm[0].inputs) == 3
    assert g.ops[-1].name == "y"


def test_matmul_add_that_is_no_bias_stays_an_add(tmp_path):
    x = RNG.standard_normal((2, 5, 8)).astype(np.float32)
    w = RNG.standard_normal((8, 6)).astype(np.float32)
    # a [5, 6] addend is no per-column bias
    path = save(_linear_nodes(False), [fin("x", [2, 5, 8])], [fin("y", [2, 5, 6])],
                {"w": w, "b": RNG.standard_normal((5, 6)).astype(np.float32)},
                tmp_path / "g.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert "add" in op_types(g)
    # the matmul's output also a graph output: the add stays
    path = save(_linear_nodes(False), [fin("x", [2, 5, 8])],
                [fin("y", [2, 5, 6]), fin("mm", [2, 5, 6])],
                {"w": w, "b": RNG.standard_normal(6).astype(np.float32)}, tmp_path / "g2.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert "add" in op_types(g)


def test_torch_linear_gelu_linear_on_rank_3_fuses(tmp_path):
    """ConvNeXt's and BERT's MLP as torch.onnx.export writes it (opset 17)."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(7)
    m = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(),
                            torch.nn.Linear(32, 8)).eval()
    x = torch.randn(1, 6, 6, 8)
    path = tmp_path / "mlp.onnx"
    with torch.no_grad():
        torch.onnx.export(m, (x,), str(path), input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False)
    g = import_and_compare(path, tmp_path, {"x": x.numpy()})
    types = op_types(g)
    assert "gelu" in types and "erf" not in types and "add" not in types
    assert [len(op.inputs) for op in g.ops if op.op == "matmul"] == [3, 3]
    # the gelu reads the first matmul's rows, the second matmul the gelu's
    # (no reshape copies of the hidden layer between them)
    k = types.index("gelu")
    assert types[k - 1:k + 2] == ["matmul", "gelu", "matmul"]
    assert g.ops[k].inputs == [g.ops[k - 1].name] and g.ops[k + 1].inputs[0] == g.ops[k].name


def _reshape_nodes(back):
    return [helper.make_node("Reshape", ["x", "s1"], ["r1"], name="r1"),
            helper.make_node("Relu", ["r1"], ["u"], name="u"),
            helper.make_node("Sigmoid", ["u"], ["v"], name="v"),
            helper.make_node("Reshape", ["v", back], ["r2"], name="r2"),
            helper.make_node("MatMul", ["r2", "w"], ["y"], name="y")]


def test_reshapes_around_elementwise_ops_go(tmp_path):
    x = RNG.standard_normal((12, 8)).astype(np.float32)
    inits = {"s1": np.array([2, 6, 8], np.int64), "s0": np.array([12, 8], np.int64),
             "s2": np.array([24, 4], np.int64), "w": RNG.standard_normal((8, 3)).astype(np.float32),
             "w2": RNG.standard_normal((4, 3)).astype(np.float32)}
    path = save(_reshape_nodes("s0"), [fin("x", [12, 8])], [fin("y", [12, 3])], inits,
                tmp_path / "g.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert op_types(g) == ["relu", "sigmoid", "matmul"]
    assert g.ops[0].inputs == ["x"] and g.ops[2].inputs[0] == g.ops[1].name
    # reshaped back to another shape: both reshapes stay
    nodes = _reshape_nodes("s2")
    nodes[-1] = helper.make_node("MatMul", ["r2", "w2"], ["y"], name="y")
    path = save(nodes, [fin("x", [12, 8])], [fin("y", [24, 3])], inits, tmp_path / "g2.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert op_types(g).count("reshape") == 2
    # an intermediate also a graph output: both reshapes stay
    path = save(_reshape_nodes("s0"), [fin("x", [12, 8])],
                [fin("y", [12, 3]), fin("u", [2, 6, 8])], inits, tmp_path / "g3.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert op_types(g).count("reshape") == 2


def test_layer_scale_folds_into_the_linear(tmp_path):
    """ConvNeXt's block tail as torchvision exports it: Linear on NHWC,
    Permute back to NCHW, the layer scale gamma[C, 1, 1] times it, the
    residual add. The scale goes into the Linear's weight and bias."""
    torch = pytest.importorskip("torch")

    class Tail(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(24, 8)
            self.gamma = torch.nn.Parameter(torch.rand(8, 1, 1) + 0.5)

        def forward(self, x, h):
            y = self.lin(h).permute(0, 3, 1, 2)
            return x + self.gamma * y

    torch.manual_seed(11)
    m = Tail().eval()
    x, h = torch.randn(1, 8, 5, 6), torch.randn(1, 5, 6, 24)
    path = tmp_path / "tail.onnx"
    with torch.no_grad():
        torch.onnx.export(m, (x, h), str(path), input_names=["x", "h"], output_names=["y"],
                          opset_version=17, dynamo=False)
    g = import_and_compare(path, tmp_path, {"x": x.numpy(), "h": h.numpy()})
    types = op_types(g)
    assert "mul" not in types and types.count("add") == 1 and "matmul" in types
    # the original weight and gamma are not written beside the scaled ones
    assert not any("gamma" == p.name for p in g.params)


def test_a_scale_along_another_axis_stays_a_mul(tmp_path):
    x = RNG.standard_normal((2, 5, 8)).astype(np.float32)
    w = RNG.standard_normal((8, 6)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
             helper.make_node("Mul", ["mm", "g"], ["y"], name="y")]
    # g scales rows (axis 1 of [2, 5, 6]), not the matmul's columns
    path = save(nodes, [fin("x", [2, 5, 8])], [fin("y", [2, 5, 6])],
                {"w": w, "g": RNG.standard_normal((5, 1)).astype(np.float32)}, tmp_path / "g.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert "mul" in op_types(g)
    # a column scale [6] folds
    path = save(nodes, [fin("x", [2, 5, 8])], [fin("y", [2, 5, 6])],
                {"w": w, "g": RNG.standard_normal(6).astype(np.float32)}, tmp_path / "g2.onnx")
    g = import_and_compare(path, tmp_path, {"x": x})
    assert "mul" not in op_types(g)
