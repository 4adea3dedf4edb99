"""Precision as a tuned knob (issue #43): the post-training quantisation
rewrite against the numpy reference and the engine, the per-op choice
within an error bound, the stored choice applied by `hwtune run` and
hwtune-run, `hwtune compare`'s error column, and tune-graph's refusals."""

import json
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from hwtune.cli.main import cli
from hwtune.engine.config import EngineConfig
from hwtune.engine.effective import effective_graph
from hwtune.graph.model import load_model
from hwtune.graph.reference import run_reference
from hwtune.native._lib import _find
from hwtune.precision import calibrate as cal
from hwtune.precision.choose import choose_precision
from hwtune.graph.passes.op_precision import PrecisionError, apply_precision, candidates


def _model(c=16, hw=16):
    """conv-bn-relu, conv-relu, conv + residual + relu, average pool, fc:
    every form the int8 rewrite handles (BN folded, ReLU fused, residual
    after the qconv2d, matmul with bias)."""
    bn = [{"name": f"bn.{k}", "shape": [c], **r} for k, r in
          (("gamma", {"low": 0.8, "high": 1.2}), ("beta", {}), ("mean", {}),
           ("var", {"low": 0.5, "high": 1.5}))]
    return {
        "format_version": 1, "name": "qtiny", "seed": 3,
        "inputs": [{"name": "x", "shape": [1, 8, hw, hw]}],
        "params": [{"name": "c1.w", "shape": [c, 8, 3, 3]}, *bn,
                   {"name": "c2.w", "shape": [c, c, 3, 3]},
                   {"name": "c3.w", "shape": [c, c, 3, 3]},
                   {"name": "fc.w", "shape": [c, 10]}, {"name": "fc.b", "shape": [10]}],
        "ops": [
            {"name": "c1", "op": "conv2d", "inputs": ["x", "c1.w"], "attrs": {"padding": 1}},
            {"name": "bn1", "op": "batch_norm",
             "inputs": ["c1", "bn.gamma", "bn.beta", "bn.mean", "bn.var"]},
            {"name": "r1", "op": "relu", "inputs": ["bn1"]},
            {"name": "c2", "op": "conv2d", "inputs": ["r1", "c2.w"], "attrs": {"padding": 1}},
            {"name": "r2", "op": "relu", "inputs": ["c2"]},
            {"name": "c3", "op": "conv2d", "inputs": ["r2", "c3.w"], "attrs": {"padding": 1}},
            {"name": "s3", "op": "add", "inputs": ["c3", "r1"]},
            {"name": "r3", "op": "relu", "inputs": ["s3"]},
            {"name": "gap", "op": "global_pool2d", "inputs": ["r3"], "attrs": {"mode": "avg"}},
            {"name": "flat", "op": "flatten", "inputs": ["gap"]},
            {"name": "fc", "op": "matmul", "inputs": ["flat", "fc.w", "fc.b"]}],
        "outputs": ["fc"],
    }


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("prec") / "qtiny.json"
    path.write_text(json.dumps(_model()))
    return path


def _fused(path):
    return effective_graph(load_model(str(path)), EngineConfig())


def _int8_table(fused, names=None):
    samples = cal.seeded_samples(fused, 2)
    xs = {op.name: op.inputs[0] for op in fused.ops}
    names = names or candidates(fused, "int8")
    ref = cal.run_samples(fused, samples, 1, extra={xs[n] for n in names})
    acts = cal.activation_params(ref, {xs[n] for n in names})
    return {n: {"precision": "int8", "a_scale": acts[xs[n]][0], "a_zero": acts[xs[n]][1]}
            for n in names}


def test_candidates_and_rewrite_match_the_numpy_reference(tiny):
    fused = _fused(tiny)
    assert candidates(fused, "int8") == ["c1", "c2", "c3", "fc"]
    q = apply_precision(fused, _int8_table(fused))
    kinds = {op.name: op.op for op in q.ops}
    assert [kinds[n] for n in ("c1", "c2", "c3", "fc")] == ["qconv2d"] * 3 + ["qmatmul"]
    # c3's residual and ReLU follow it; c1 and c2 keep their ReLU fused.
    assert kinds["c3@res"] == "add" and kinds["c3@relu"] == "relu"
    assert [op.resolved["relu"] for op in q.ops if op.name in ("c1", "c2")] == [True, True]
    want = run_reference(fused)["fc"]
    got = run_reference(q)["fc"]
    err = np.abs(got - want).max() / np.abs(want).max()
    # 8-bit activations and weights through 3 convs: ~1% of the output's
    # scale, far from fp32 rounding (0 would mean nothing was quantised).
    assert 1e-5 < err < 5e-2, err


def test_engine_runs_the_rewritten_graph_as_its_reference(tiny):
    from hwtune.engine.runner import check_outputs
    fused = _fused(tiny)
    q = apply_precision(fused, _int8_table(fused))
    out = cal.run_samples(q, cal.seeded_samples(q, 1), 1)[0]
    res = check_outputs(out, q)
    assert res["ok"], res


def test_rewrite_refuses_what_it_cannot_apply(tiny):
    fused = _fused(tiny)
    with pytest.raises(PrecisionError, match="no op named 'nope'"):
        apply_precision(fused, {"nope": {"precision": "int8", "a_scale": 1.0, "a_zero": 0}})
    with pytest.raises(PrecisionError, match="a global_pool2d that cannot run in int8"):
        apply_precision(fused, {"gap": {"precision": "int8", "a_scale": 1.0, "a_zero": 0}})
    with pytest.raises(PrecisionError, match="a_zero must be an integer in 0..255"):
        apply_precision(fused, {"c1": {"precision": "int8", "a_scale": 1.0, "a_zero": 300}})


def _choose(path, max_error, times=None):
    fused = _fused(path)
    graph = load_model(str(path))

    def run_graph(table):
        return effective_graph(graph, EngineConfig(op_precision=table))
    return choose_precision(fused, run_graph, ["fp32", "int8"], max_error,
                            cal.seeded_samples(fused, 2), threads=1, runs=3)


def test_a_tiny_bound_keeps_fp32(tiny):
    ch = _choose(tiny, 1e-9)
    assert ch.op_precision == {} and ch.error == 0.0
    assert all(c.precision == "fp32" for c in ch.ops)
    assert all(e > 1e-9 for c in ch.ops for e in c.errors.values())


def test_the_chosen_set_meets_the_bound(tiny, monkeypatch):
    # Timing decides which ops gain; here every int8 op is made to gain
    # (a loaded machine must not decide the test) and the bound is loose.
    from hwtune.precision import choose as ch_mod
    real = ch_mod._op_times

    def faster_int8(graphs, threads, runs):
        t = real(graphs, threads, runs)
        t["int8"] = {k: 0.0 for k in t["int8"]}
        return t
    monkeypatch.setattr(ch_mod, "_op_times", faster_int8)
    loose = _choose(tiny, 0.5)
    assert sorted(loose.op_precision) == ["c1", "c2", "c3", "fc"]
    assert 0 < loose.error <= 0.5
    # A bound between one op's error and all four's keeps a measured subset.
    errs = sorted(c.errors["int8"] for c in loose.ops)
    mid = _choose(tiny, errs[0] * 1.01)
    assert mid.error <= errs[0] * 1.01 and 1 <= len(mid.op_precision) < 4


# -- the command line --------------------------------------------------------

@pytest.mark.parametrize("flags, words", [
    (["--precision", "fp32,int4", "--max-error", "1e-2"], "invalid --precision 'int4'"),
    (["--precision", ",", "--max-error", "1e-2"], "invalid --precision ','"),
    (["--precision", "fp32,int8"], "needs --max-error E"),
    (["--precision", "fp32,int8", "--max-error", "-1"], "invalid --max-error -1"),
    (["--max-error", "1e-2"], "--max-error bounds the error of low-precision ops"),
    (["--precision", "int8", "--max-error", "0.1", "--input", "nope=x.npy"],
     "the model has no input \"nope\""),
])
def test_bad_precision_flags_are_one_line_exit_2(tiny, tmp_path, flags, words):
    res = CliRunner().invoke(cli, ["tune-graph", str(tiny), "--db", str(tmp_path / "r.db"),
                                   *flags])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], lines


def _stored_db(tiny, tmp_path):
    """results.db with a tuned config of tiny whose convs run in int8, as
    tune-graph stores it (lowered graph included)."""
    from hwtune import machine
    from hwtune.db import ResultsDB
    from hwtune.engine.lowered import lowered_doc
    graph = load_model(str(tiny))
    table = _int8_table(_fused(tiny), ["c2", "c3"])
    cfg = EngineConfig(executors=1, threads=1, scheduler="sequential", op_precision=table)
    db_path = tmp_path / "r.db"
    with ResultsDB.open(str(db_path)) as db:
        host = db.upsert_host(machine.fingerprint())
        gh = db.put_graph(graph.to_json())
        db.put_engine_config(host, gh, source="tuned", **cfg.db_fields(),
                             lowered=lowered_doc(effective_graph(graph, cfg)))
    return db_path, gh, table


def test_run_and_the_c_runner_apply_the_stored_precision(tiny, tmp_path):
    db, gh, table = _stored_db(tiny, tmp_path)
    out = tmp_path / "o.npz"
    res = CliRunner().invoke(cli, ["run", str(tiny), "--db", str(db), "--iterations", "1",
                                   "--warmup", "0", "--json", "--save-outputs", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["config_source"] == "tuned" and doc["config"]["op_precision"] == table
    got = np.load(out)["fc"]
    q = apply_precision(_fused(tiny), table)
    want_q, want_fp32 = run_reference(q)["fc"], run_reference(_fused(tiny))["fc"]
    scale = np.abs(want_fp32).max()
    # The run computed the int8 graph (its reference), not the fp32 one.
    assert np.abs(got - want_q).max() <= 1e-4 * scale
    assert np.abs(got - want_fp32).max() > 1e-4 * scale
    runner = _find().parent / "hwtune-run"
    proc = subprocess.run([str(runner), "--db", str(db), "--graph", gh, "--iterations", "1",
                           "--warmup", "0"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lowered = json.loads(__import__("sqlite3").connect(db).execute(
        "SELECT lowered_json FROM engine_configs WHERE source = 'tuned'").fetchone()[0])
    assert sum(op["type"] == "qconv2d" for op in lowered["ops"]) == 2


def test_compare_reports_the_error_beside_the_speed(tiny, tmp_path):
    pytest.importorskip("onnxruntime")
    db, _, _ = _stored_db(tiny, tmp_path)
    res = CliRunner().invoke(cli, ["compare", str(tiny), "--db", str(db), "--with", "ort",
                                   "--reps", "2", "--json"])
    assert res.exit_code == 0, res.output
    sides = {s["key"]: s for s in json.loads(res.stdout)["sides"]}
    hw = sides["hwtune"]
    assert hw["precision"] == {"int8": 2}
    assert 1e-5 < hw["max_rel_err"] < 5e-2
    assert sides["ort"]["agree"] is True  # checked against hwtune's fp32 outputs


def test_bf16_sets_the_matmul_precision_and_stays_near_fp32(tiny):
    fused = _fused(tiny)
    # the dense NCHW convs run in bf16 too (conv2d's precision attribute)
    assert candidates(fused, "bf16") == ["c1", "c2", "c3", "fc"]
    q = apply_precision(fused, {"fc": {"precision": "bf16"}})
    assert [op.resolved["precision"] for op in q.ops if op.name == "fc"] == ["bf16"]
    samples = cal.seeded_samples(fused, 1)
    err = cal.output_error(cal.run_samples(q, samples, 1), cal.run_samples(fused, samples, 1),
                           fused.outputs)
    # bf16 keeps 8 mantissa bits: ~2^-9 relative per operand.
    assert 0 < err < 1e-2, err


def test_an_int8_chain_passes_u8_and_keeps_residuals_f32(tiny):
    fused = _fused(tiny)
    q = apply_precision(fused, _int8_table(fused))
    ops = {op.name: op for op in q.ops}
    # c2's output only c3 reads, as its activation: requantised in c2.
    assert ops["c2"].resolved["out"] == "u8" and ops["c3"].inputs[0] == ops["c2"].outputs[0]
    assert not any(op.op == "quantize_u8" and op.inputs[0] == "r2" for op in q.ops)
    # c1's output is also c3's residual: f32, quantised once for c2.
    assert ops["c1"].resolved["out"] == "f32" and ops["c3@res"].inputs[1] == "r1"
    want = run_reference(fused)["fc"]
    err = np.abs(run_reference(q)["fc"] - want).max() / np.abs(want).max()
    assert err < 5e-2, err
