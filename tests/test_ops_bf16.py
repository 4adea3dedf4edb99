"""matmul's precision="bf16" (issue #43): the bf16 GEMM (kernels/bgemm/,
AVX512_BF16 where the CPU has it, else portable C) against the numpy
reference (operands rounded to bf16, float64 sums: its contract) and
against the plain float32 product within bf16's error bound, on every ISA
variant this CPU runs and 1/2/3 thread shares; fp32 stays the default."""

import numpy as np
import pytest

from hwtune.engine.ops_harness import run_ops
from hwtune.graph import load_model
from hwtune.graph.ops.linear import bf16_round
from hwtune.graph.reference import run_reference
from hwtune.native.isa import supported_isas


def _model(m, k, n, attrs, bias=True, b_input=False):
    inputs = [{"name": "a", "shape": [k, m] if attrs.get("transpose_a") else [m, k]}]
    params = [{"name": "b", "shape": [n, k] if attrs.get("transpose_b") else [k, n]}]
    if bias:
        params.append({"name": "bias", "shape": [n]})
    if b_input:
        inputs, params = inputs + params[:1], params[1:]
    node = {"name": "y", "op": "matmul", "inputs": [t["name"] for t in inputs + params],
            "attrs": attrs}
    return load_model({"format_version": 1, "name": "bf16_mm", "seed": 3, "inputs": inputs,
                       "params": params, "ops": [node], "outputs": ["y"]})


def _data(g, rng):
    return {t.name: rng.standard_normal(t.shape).astype(np.float32)
            for t in list(g.inputs) + list(g.params)}


CASES = [(1, 5, 3, {}), (7, 33, 40, {"transpose_b": True}), (20, 64, 96, {}),
         (13, 130, 17, {"transpose_a": True}), (9, 257, 33, {})]


def test_bf16_round_ties_nan_denormals():
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.0, np.inf, 2**-130, -(2**-130), np.nan,
                  np.finfo(np.float32).max], dtype=np.float32)
    r = bf16_round(x)
    np.testing.assert_array_equal(r[:7], [1.0, 1.0, 1 + 2**-6, -2.0, np.inf, 0.0, -0.0])
    assert np.signbit(r[6]) and np.isnan(r[7]) and r[8] == np.inf


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}")
def test_bf16_matmul_matches_reference(case, isa):
    m, k, n, attrs = case
    g = _model(m, k, n, dict(attrs, precision="bf16"))
    rng = np.random.default_rng(m * k + n)
    data = _data(g, rng)
    inputs = {"a": data.pop("a")}
    want = run_reference(g, inputs=inputs, params=data)["y"]
    a = inputs["a"].T if attrs.get("transpose_a") else inputs["a"]
    b = data["b"].T if attrs.get("transpose_b") else data["b"]
    sabs = np.abs(bf16_round(a)).astype(np.float64) @ np.abs(bf16_round(b)) + np.abs(data["bias"])
    fp32 = a.astype(np.float64) @ b + data["bias"]
    for nth in (1, 2, 3):
        got = run_ops(g, nth=nth, isa=isa, inputs=inputs, params=data)["y"]
        # fp32 sums of exact bf16 products: two roundings per k pair and one for the bias
        assert np.all(np.abs(got - want) <= (k + 3) * 2.0**-24 * sabs + 1e-30), nth
        # bf16 keeps 8 significant bits: a product is within 2^-7 + 2^-16 of a * b
        assert np.all(np.abs(got - fp32) <= (2.0**-7 + 2.0**-16 + (k + 3) * 2.0**-23) * sabs)
    # the rounding is real: at this size bf16 differs from the fp32 product
    if k >= 33:
        assert np.max(np.abs(got - fp32)) > 1e-4 * np.max(np.abs(fp32))


def test_fp32_default_unchanged():
    g32 = _model(20, 64, 96, {})
    g = _model(20, 64, 96, {"precision": "fp32"})
    rng = np.random.default_rng(1)
    data = _data(g, rng)
    inputs = {"a": data.pop("a")}
    np.testing.assert_array_equal(run_ops(g32, inputs=inputs, params=data)["y"],
                                  run_ops(g, inputs=inputs, params=data)["y"])
    want = run_reference(g32, inputs=inputs, params=data)["y"]
    np.testing.assert_allclose(run_ops(g32, inputs=inputs, params=data)["y"], want,
                               rtol=1e-5, atol=1e-5)


def test_bf16_needs_weight_b():
    g = _model(4, 8, 8, {"precision": "bf16"}, bias=False, b_input=True)
    rng = np.random.default_rng(2)
    with pytest.raises(Exception, match="precision bf16 needs b to be a weight"):
        run_ops(g, inputs=_data(g, rng))


def test_with_precision_sets_weight_matmuls_only():
    from hwtune.graph.passes.precision import with_precision
    g = load_model({"format_version": 1, "name": "two", "seed": 1,
                    "inputs": [{"name": "x", "shape": [4, 8]}, {"name": "z", "shape": [8, 8]}],
                    "params": [{"name": "w", "shape": [8, 8]}],
                    "ops": [{"name": "h", "op": "matmul", "inputs": ["x", "w"]},
                            {"name": "y", "op": "matmul", "inputs": ["h", "z"]}],
                    "outputs": ["y"]})
    same, n = with_precision(g, "fp32")
    assert same is g and n == 0
    got, n = with_precision(g, "bf16")
    assert n == 1
    assert [op.attrs.get("precision") for op in got.ops] == ["bf16", None]
    assert [op.name for op in got.ops] == ["h", "y"] and not g.ops[0].attrs
    rng = np.random.default_rng(4)
    data = _data(got, rng)
    params = {"w": data.pop("w")}
    want = run_reference(got, inputs=data, params=params)["y"]
    out = run_ops(got, inputs=data, params=params)["y"]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * np.max(np.abs(want)))


def test_run_precision_bf16_cli(tmp_path):
    import json
    import os
    import subprocess
    import sys
    model = tmp_path / "mm.json"
    model.write_text(json.dumps({
        "format_version": 1, "name": "mm", "seed": 1,
        "inputs": [{"name": "x", "shape": [16, 96]}],
        "params": [{"name": "w", "shape": [96, 64]}, {"name": "b", "shape": [64]}],
        "ops": [{"name": "y", "op": "matmul", "inputs": ["x", "w", "b"]}], "outputs": ["y"]}))
    env = dict(os.environ)
    env.pop("HWTUNE_DB", None)
    res = subprocess.run([sys.executable, "-m", "hwtune.cli.main", "run", str(model),
                          "--precision", "bf16", "--check", "--reps", "2", "--warmup", "0",
                          "--db", str(tmp_path / "r.db")],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "--precision bf16: 1 matmul(s) and 0 conv2d(s) on weights run in bf16" in res.stderr
    assert "check:      ok" in res.stdout
    bad = subprocess.run([sys.executable, "-m", "hwtune.cli.main", "run", str(model),
                          "--precision", "int4", "--db", str(tmp_path / "r.db")],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
