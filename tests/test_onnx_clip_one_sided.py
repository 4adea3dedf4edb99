"""Clip with one bound (issue #41, held-out models: Swin V2 clamps its
logit scale with max only): imported as minimum / maximum against a
one-element param, matching the numpy reference, the engine and ONNX
Runtime, and `hwtune run` stores and runs it (a clip op's default -inf
bound made the stored lowered graph fail: "Out of range float values are
not JSON compliant"). Clip of constants folds at import."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from click.testing import CliRunner  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hwtune.cli.main import cli  # noqa: E402
from hwtune.graph import load_model, run_reference  # noqa: E402
from hwtune.onnx.importer import import_onnx  # noqa: E402

from conftest import run_engine  # noqa: E402 (tests/ is on sys.path)

TOL = 1e-4
RNG = np.random.default_rng(43)


pytestmark = pytest.mark.usefixtures("scratch_cache")


def _model(path, lo, hi, const_input=False):
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), k)
             for k, v in (("lo", lo), ("hi", hi)) if v is not None]
    nodes, inputs = [], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])]
    src = "x"
    if const_input:  # clip(w) * x: the clip reads a weight only
        inits.append(numpy_helper.from_array(RNG.standard_normal((2, 8)).astype(np.float32), "w"))
        src = "w"
    nodes.append(helper.make_node("Clip", [src, "lo" if lo is not None else "",
                                           "hi" if hi is not None else ""], ["c"], name="clip"))
    nodes.append(helper.make_node("Mul", ["c", "x"], ["y"], name="mul"))
    g = helper.make_graph(nodes, "g", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)




@pytest.mark.parametrize("lo,hi,op", [(None, 0.5, "minimum"), (-0.25, None, "maximum"),
                                      (-0.5, 0.5, "clip"), (0.0, None, "relu")])
def test_clip_bounds_match_reference_engine_and_onnxruntime(lo, hi, op, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    path = _model(tmp_path / "m.onnx", lo, hi)
    feeds = {"x": RNG.standard_normal((2, 8)).astype(np.float32)}
    import_onnx(path, str(tmp_path / "m.json"))
    g = load_model(str(tmp_path / "m.json"))
    assert op in [o.op for o in g.ops]
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    scale = float(np.abs(want).max())
    assert np.abs(run_reference(g, feeds)["y"] - want).max() <= TOL * scale
    assert np.abs(run_engine(g, feeds, threads=2)["y"] - want).max() <= TOL * scale


def test_clip_of_a_weight_folds_at_import(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    path = _model(tmp_path / "m.onnx", None, 0.3, const_input=True)
    feeds = {"x": RNG.standard_normal((2, 8)).astype(np.float32)}
    import_onnx(path, str(tmp_path / "m.json"))
    g = load_model(str(tmp_path / "m.json"))
    assert [o.op for o in g.ops] == ["mul"]
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert np.abs(run_engine(g, feeds, threads=2)["y"] - want).max() <= TOL * float(np.abs(want).max())


def test_one_sided_clip_runs_from_the_cli(tmp_path):
    path = _model(tmp_path / "m.onnx", None, 0.5)
    res = CliRunner().invoke(cli, ["run", path, "--iterations", "1", "--warmup", "0",
                                   "--db", str(tmp_path / "r.db")])
    assert res.exit_code == 0, res.output
