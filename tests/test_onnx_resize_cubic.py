"""Cubic Resize of a constant folds at import (issue #41, held-out models:
DINOv2 resizes its position embeddings bicubically): the fold
(onnx/resize_fold.py, the contract) matches ONNX Runtime up and down, for
each coordinate transformation, and a cubic Resize of run-time data is
still one error line naming the node."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from click.testing import CliRunner  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hwtune.cli.main import cli  # noqa: E402
from hwtune.graph import load_model  # noqa: E402
from hwtune.onnx.importer import import_onnx  # noqa: E402

TOL = 1e-4
RNG = np.random.default_rng(47)
W = RNG.standard_normal((1, 2, 5, 4)).astype(np.float32)


pytestmark = pytest.mark.usefixtures("scratch_cache")


def _model(path, out_shape, transform, scales=None, runtime=False):
    inits = [numpy_helper.from_array(W, "w")]
    if scales is not None:
        inits.append(numpy_helper.from_array(np.asarray(scales, np.float32), "scales"))
        rin = ["x" if runtime else "w", "", "scales"]
    else:
        inits.append(numpy_helper.from_array(np.asarray(out_shape, np.int64), "sizes"))
        rin = ["x" if runtime else "w", "", "", "sizes"]
    nodes = [helper.make_node("Resize", rin, ["r"], name="resize", mode="cubic",
                              coordinate_transformation_mode=transform, cubic_coeff_a=-0.75),
             helper.make_node("Add", ["r", "x" if not runtime else "r"], ["y"], name="add")]
    xshape = list(W.shape) if runtime else list(out_shape)
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     xshape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         list(out_shape))], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


@pytest.mark.parametrize("out_shape,transform,scales", [
    ((1, 2, 7, 3), "half_pixel", None),          # up on H, down on W
    ((1, 2, 9, 9), "pytorch_half_pixel", None),
    ((1, 2, 8, 2), "align_corners", None),
    ((1, 2, 10, 8), "half_pixel", [1, 1, 2, 2]),
    ((1, 2, 10, 8), "asymmetric", [1, 1, 2, 2]),
])
def test_cubic_resize_of_a_weight_folds_and_matches_onnxruntime(out_shape, transform, scales,
                                                                tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from hwtune.engine.instance import NativeEngine
    path = _model(tmp_path / "m.onnx", out_shape, transform, scales)
    feeds = {"x": RNG.standard_normal(out_shape).astype(np.float32)}
    import_onnx(path, str(tmp_path / "m.json"))
    g = load_model(str(tmp_path / "m.json"))
    assert [o.op for o in g.ops] == ["add"]  # the resize is folded
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    with NativeEngine(g, threads=1) as eng:
        eng.set_input("x", feeds["x"])
        eng.run()
        got = eng.outputs()["y"]
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= TOL * float(np.abs(want).max())


def test_cubic_resize_of_run_time_data_is_one_error_line(tmp_path):
    path = _model(tmp_path / "m.onnx", (1, 2, 7, 3), "half_pixel", runtime=True)
    res = CliRunner().invoke(cli, ["import", path, "-o", str(tmp_path / "m.json")])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and '"resize"' in lines[0] and "cubic" in lines[0], res.output
