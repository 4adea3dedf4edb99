"""ScatterND on run-time data (issue #41, held-out models: BART's
shift_tokens_right writes its input ids one place to the right with
ScatterND): imported as a row selection (reshape, concat, take) that matches
the fold's numpy loop (onnx/fold.py, the contract), the engine and ONNX
Runtime; a form it cannot take is one error line, exit 2."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from click.testing import CliRunner  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hwtune.cli.main import cli  # noqa: E402
from hwtune.graph import load_model, run_reference  # noqa: E402
from hwtune.onnx import fold as F  # noqa: E402
from hwtune.onnx.importer import import_onnx  # noqa: E402

from conftest import run_engine  # noqa: E402 (tests/ is on sys.path)

TOL = 1e-4
RNG = np.random.default_rng(41)


pytestmark = pytest.mark.usefixtures("scratch_cache")


def _model(path, dshape, ushape, indices, dtype=TensorProto.FLOAT, reduction=None):
    kw = {"reduction": reduction} if reduction else {}
    node = helper.make_node("ScatterND", ["x", "idx", "u"], ["y"], name="scatter", **kw)
    g = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("x", dtype, dshape),
         helper.make_tensor_value_info("u", dtype, ushape)],
        [helper.make_tensor_value_info("y", dtype, dshape)],
        [numpy_helper.from_array(np.asarray(indices, np.int64), "idx")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)




CASES = {
    # slices of the last axis, one index written twice (the last write wins)
    "rows": ((2, 5, 3), (3, 3), [[0, 1], [1, 4], [0, 1]]),
    # every element addressed (k = rank), negative indices
    "elements": ((3, 4), (2, 2), [[[0, -1], [2, 0]], [[-3, 2], [1, 1]]]),
    # whole leading slices
    "slices": ((4, 2, 3), (2, 2, 3), [[3], [0]]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_scatter_nd_matches_fold_reference_engine_and_onnxruntime(case, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    dshape, ushape, indices = CASES[case]
    path = _model(tmp_path / "m.onnx", dshape, ushape, indices)
    feeds = {"x": RNG.standard_normal(dshape).astype(np.float32),
             "u": RNG.standard_normal(ushape).astype(np.float32)}
    import_onnx(path, str(tmp_path / "m.json"))
    g = load_model(str(tmp_path / "m.json"))
    assert "take" in [op.op for op in g.ops]
    want = F._scatter_nd([feeds["x"], np.asarray(indices), feeds["u"]], {}, None)[0]
    ort_y = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_array_equal(ort_y, want)  # the fold's loop is ONNX's semantics
    ref = run_reference(g, feeds)["y"]
    got = run_engine(g, feeds, threads=2)["y"]
    scale = float(np.abs(want).max())
    assert ref.shape == want.shape and np.abs(ref - want).max() <= TOL * scale
    assert got.shape == want.shape and np.abs(got - want).max() <= TOL * scale


def test_scatter_nd_shifts_int64_ids_like_bart(tmp_path):
    """shifted[:, 1:] = ids[:, :-1]: int64 data and updates at run time."""
    ort = pytest.importorskip("onnxruntime")
    seq = 6
    idx = [[[0, j] for j in range(1, seq)]]
    path = _model(tmp_path / "m.onnx", (1, seq), (1, seq - 1), idx, dtype=TensorProto.INT64)
    ids = RNG.integers(0, 100, (1, seq)).astype(np.int64)
    feeds = {"x": ids, "u": ids[:, :-1].copy()}
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    import_onnx(path, str(tmp_path / "m.json"))
    g = load_model(str(tmp_path / "m.json"))
    got = run_engine(g, {k: v.astype(np.float32) for k, v in feeds.items()}, threads=2)["y"]
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_scatter_nd_reduction_is_one_error_line(tmp_path):
    path = _model(tmp_path / "m.onnx", (2, 3), (1, 3), [[1]], reduction="add")
    res = CliRunner().invoke(cli, ["import", path, "-o", str(tmp_path / "m.json")])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "scatter" in lines[0] and 'reduction "add"' in lines[0], res.output
    assert "Traceback" not in res.output
