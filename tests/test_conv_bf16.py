"""conv2d's precision="bf16" (issue #43): the bf16 CONV (kernels/bgemm/
bconv.c: im2col gathered into bf16 panels, the bf16 GEMM's micro-kernels,
the fp32 CONV's epilogue) against the numpy reference and against the fp32
conv, on every ISA variant this CPU runs and 1/2/3 thread shares.

The bounds, for an output with reduction length L = C * KH * KW:
- vs the reference (x and w rounded to bf16, float64 sums): every bf16
  product is exact in fp32, and the kernel adds them one at a time in fp32
  (two steps per k pair, zero padding adds nothing), then the bias and the
  residual: at most L + 2 roundings of a partial sum, each within
  u = 2^-24 of it, so |got - want| <= (L + 3) u * S with S the sum of
  |products| + |bias| + |residual| (the first-order bound gamma_n <= n u
  plus a one-rounding margin for the second-order term).
- vs fp32 (operands not rounded): bf16 keeps 8 significant bits, each
  operand within 2^-8 relatively of its fp32 value, so a product within
  2^-7 + 2^-16; plus the fp32 sums' (L + 3) * 2^-23 (both sides' rounding).
ReLU and relu_max only clamp, which does not widen either bound.

ISA variants: "avx512" runs vdpbf16ps where CPUID has AVX512_BF16; "avx2"
and "generic" (and avx512 without AVX512_BF16 when not forced) run the
portable C path by design: AVX2 has no bf16 product. A forced avx512 on a
CPU without AVX512_BF16 is refused with one line (hwtune.native.isa.
bf16_variant)."""

import numpy as np
import pytest

from hwtune.engine.ops_harness import run_ops
from hwtune.graph import load_model
from hwtune.graph.ops.linear import bf16_round
from hwtune.graph.ops.conv import conv2d_nchw_f64
from hwtune.graph.reference import run_reference
from hwtune.native.isa import supported_isas

# (N, C, H, W, OC, KH, KW, attrs, residual)
CASES = [
    (1, 16, 9, 9, 32, 1, 1, {}, False),                                   # 1x1: the GEMM
    (2, 7, 6, 5, 40, 3, 3, {"padding": 1}, True),                         # odd L, batch
    (1, 3, 23, 21, 24, 7, 7, {"stride": 2, "padding": 3}, False),         # the stem's form
    (1, 32, 8, 8, 64, 1, 1, {"stride": 2}, True),                         # projection
    (1, 12, 10, 11, 17, 3, 3, {"dilation": 2, "padding": [1, 2],
                               "padding_end": [2, 0]}, False),            # dilated, asymmetric
    (3, 64, 5, 5, 33, 3, 3, {"padding": 1, "relu": True, "relu_max": 0.5}, False),
]


def _model(case, bias=True):
    n, c, h, w, oc, kh, kw, attrs, res = case
    x = {"name": "x", "shape": [n, c, h, w]}
    params = [{"name": "w", "shape": [oc, c, kh, kw]}]
    if bias:
        params.append({"name": "b", "shape": [oc]})
    inputs = [x]
    node = {"name": "y", "op": "conv2d", "inputs": ["x"] + [p["name"] for p in params],
            "attrs": dict(attrs)}
    if res:
        (sh, sw), (pt, pl), (dh, dw), (pb, pr) = _geo(attrs)
        oh = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
        ow = (w + pl + pr - (kw - 1) * dw - 1) // sw + 1
        inputs = [x, {"name": "r", "shape": [n, oc, oh, ow]}]
        node["inputs"].append("r")
    return load_model({"format_version": 1, "name": "bf16_conv", "seed": 3, "inputs": inputs,
                       "params": params, "ops": [node], "outputs": ["y"]})


def _data(g, rng):
    return {t.name: rng.standard_normal(t.shape).astype(np.float32)
            for t in list(g.inputs) + list(g.params)}


def _geo(attrs):
    def pair(v, d):
        v = attrs.get(v, d)
        return tuple(v) if isinstance(v, (list, tuple)) else (v, v)
    pad = pair("padding", 0)
    end = pair("padding_end", 0) if "padding_end" in attrs else pad
    return pair("stride", 1), pad, pair("dilation", 1), end


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[1]}x{c[2]}x{c[3]}-{c[4]}k{c[5]}")
def test_bf16_conv_matches_reference(case, isa):
    g = _model(case)
    g16 = _model(case[:7] + (dict(case[7], precision="bf16"),) + case[8:])
    rng = np.random.default_rng(sum(case[:7]))
    data = _data(g, rng)
    inputs = {k: data.pop(k) for k in ("x", "r") if k in data}
    want = run_reference(g16, inputs=inputs, params=data)["y"]
    fp32 = run_reference(g, inputs=inputs, params=data)["y"].astype(np.float64)
    stride, pad, dil, end = _geo(case[7])
    sabs = conv2d_nchw_f64(np.abs(bf16_round(inputs["x"])), np.abs(bf16_round(data["w"])),
                           stride, pad, dil, end)
    sabs += np.abs(data["b"]).reshape(1, -1, 1, 1)
    if "r" in inputs:
        sabs += np.abs(inputs["r"])
    length = case[1] * case[5] * case[6]
    for nth in (1, 2, 3):
        got = run_ops(g16, nth=nth, isa=isa, inputs=inputs, params=data)["y"]
        assert got.shape == want.shape
        err = np.abs(got.astype(np.float64) - want)
        assert np.all(err <= (length + 3) * 2.0**-24 * sabs + 1e-30), (nth, err.max())
        err32 = np.abs(got - fp32)
        assert np.all(err32 <= (2.0**-7 + 2.0**-16 + (length + 3) * 2.0**-23) * sabs), nth
    # the rounding is real: bf16 differs from the fp32 conv at these sizes
    assert np.max(np.abs(got - fp32)) > 1e-4 * np.max(np.abs(fp32))


@pytest.mark.parametrize("isa", supported_isas())
def test_bf16_conv_no_bias(isa):
    case = (1, 9, 7, 7, 20, 3, 3, {"padding": 1, "precision": "bf16"}, False)
    g = _model(case, bias=False)
    rng = np.random.default_rng(5)
    data = _data(g, rng)
    inputs = {"x": data.pop("x")}
    want = run_reference(g, inputs=inputs, params=data)["y"]
    sabs = conv2d_nchw_f64(np.abs(bf16_round(inputs["x"])), np.abs(bf16_round(data["w"])),
                           (1, 1), (1, 1))
    got = run_ops(g, nth=2, isa=isa, inputs=inputs, params=data)["y"]
    assert np.all(np.abs(got - want) <= (9 * 9 + 3) * 2.0**-24 * sabs + 1e-30)


def test_bf16_conv_refuses_grouped_and_nchwc():
    from hwtune.graph.ops import OpError
    case = (1, 8, 6, 6, 8, 3, 3, {"group": 8, "precision": "bf16"}, False)
    n, c, h, w, oc, kh, kw, attrs, _ = case
    doc = {"format_version": 1, "name": "dw", "seed": 1,
           "inputs": [{"name": "x", "shape": [n, c, h, w]}],
           "params": [{"name": "w", "shape": [oc, 1, kh, kw]}],
           "ops": [{"name": "y", "op": "conv2d", "inputs": ["x", "w"], "attrs": attrs}],
           "outputs": ["y"]}
    with pytest.raises(Exception, match="precision bf16 needs a dense"):
        load_model(doc)
    assert OpError


def test_bf16_conv_needs_weight_w():
    doc = {"format_version": 1, "name": "ww", "seed": 1,
           "inputs": [{"name": "x", "shape": [1, 4, 5, 5]}, {"name": "w", "shape": [8, 4, 3, 3]}],
           "ops": [{"name": "y", "op": "conv2d", "inputs": ["x", "w"],
                    "attrs": {"precision": "bf16"}}],
           "outputs": ["y"]}
    g = load_model(doc)
    rng = np.random.default_rng(2)
    with pytest.raises(Exception, match="precision bf16 needs w to be a weight"):
        run_ops(g, inputs=_data(g, rng))


def test_with_precision_converts_dense_convs_only():
    from hwtune.graph.passes.precision import precision_counts, with_precision
    g = load_model({"format_version": 1, "name": "cnn", "seed": 1,
                    "inputs": [{"name": "x", "shape": [1, 8, 6, 6]}],
                    "params": [{"name": "w1", "shape": [8, 8, 3, 3]},
                               {"name": "wd", "shape": [8, 1, 3, 3]},
                               {"name": "wf", "shape": [288, 10]}],
                    "ops": [{"name": "c1", "op": "conv2d", "inputs": ["x", "w1"],
                             "attrs": {"padding": 1, "relu": True}},
                            {"name": "dw", "op": "conv2d", "inputs": ["c1", "wd"],
                             "attrs": {"padding": 1, "group": 8}},
                            {"name": "f", "op": "reshape", "inputs": ["dw"],
                             "attrs": {"shape": [1, 288]}},
                            {"name": "y", "op": "matmul", "inputs": ["f", "wf"]}],
                    "outputs": ["y"]})
    got, n = with_precision(g, "bf16")
    assert n == 2
    assert [op.attrs.get("precision") for op in got.ops] == ["bf16", None, None, "bf16"]
    assert precision_counts(got, "bf16") == {"conv2d": 1, "matmul": 1}
    rng = np.random.default_rng(4)
    data = _data(got, rng)
    inputs = {"x": data.pop("x")}
    want = run_reference(got, inputs=inputs, params=data)["y"]
    out = run_ops(got, nth=2, inputs=inputs, params=data)["y"]
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * np.max(np.abs(want)))


def test_bf16_variant_fallback_and_forced_refusal(monkeypatch):
    from hwtune.errors import UsageError
    import hwtune.native.isa as isa_mod
    for name in supported_isas():
        if name != "avx512":
            assert isa_mod.bf16_variant(name) == "generic"
    if "avx512" not in supported_isas():
        pytest.skip("no AVX-512 here: the forced avx512 row cannot be asked for")
    if isa_mod.cpu_features()["avx512_bf16"]:
        assert isa_mod.bf16_variant("avx512") == "avx512_bf16"
    no_bf16 = dict(isa_mod.cpu_features(), avx512_bf16=False)
    monkeypatch.setattr(isa_mod, "cpu_features", lambda: no_bf16)
    monkeypatch.delenv("HWTUNE_ISA", raising=False)
    if isa_mod.selected_isa() == "avx512":
        assert isa_mod.bf16_variant() == "generic"  # not forced: the portable path
    monkeypatch.setenv("HWTUNE_ISA", "avx512")
    with pytest.raises(UsageError, match="no bf16 kernels on this CPU") as e:
        isa_mod.bf16_variant()
    assert "\n" not in str(e.value)


def test_run_refuses_forced_avx512_without_bf16(tmp_path, monkeypatch):
    import json
    from click.testing import CliRunner
    import hwtune.native.isa as isa_mod
    from hwtune.cli.main import cli
    if "avx512" not in supported_isas():
        pytest.skip("no AVX-512 here: HWTUNE_ISA=avx512 is refused before bf16 is asked")
    model = tmp_path / "c.json"
    model.write_text(json.dumps({
        "format_version": 1, "name": "c", "seed": 1,
        "inputs": [{"name": "x", "shape": [1, 4, 6, 6]}],
        "params": [{"name": "w", "shape": [8, 4, 3, 3]}],
        "ops": [{"name": "y", "op": "conv2d", "inputs": ["x", "w"]}], "outputs": ["y"]}))
    no_bf16 = dict(isa_mod.cpu_features(), avx512_bf16=False)
    monkeypatch.setattr(isa_mod, "cpu_features", lambda: no_bf16)
    monkeypatch.setenv("HWTUNE_ISA", "avx512")
    res = CliRunner().invoke(cli, ["run", str(model), "--precision", "bf16", "--reps", "1",
                                   "--warmup", "0", "--db", str(tmp_path / "r.db")])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "no bf16 kernels on this CPU" in lines[0], res.output


def test_run_precision_bf16_converts_convs_cli(tmp_path, monkeypatch):
    import json
    from click.testing import CliRunner
    from hwtune.cli.main import cli
    from hwtune.native.isa import bf16_variant
    monkeypatch.delenv("HWTUNE_DB", raising=False)
    model = tmp_path / "c.json"
    model.write_text(json.dumps({
        "format_version": 1, "name": "c", "seed": 1,
        "inputs": [{"name": "x", "shape": [1, 8, 10, 10]}],
        "params": [{"name": "w", "shape": [16, 8, 3, 3]}, {"name": "b", "shape": [16]},
                   {"name": "wd", "shape": [16, 1, 3, 3]}],
        "ops": [{"name": "c1", "op": "conv2d", "inputs": ["x", "w", "b"],
                 "attrs": {"padding": 1, "relu": True}},
                {"name": "y", "op": "conv2d", "inputs": ["c1", "wd"],
                 "attrs": {"padding": 1, "group": 16}}],
        "outputs": ["y"]}))
    res = CliRunner().invoke(cli, ["run", str(model), "--precision", "bf16", "--check",
                                   "--reps", "2", "--warmup", "0", "--db", str(tmp_path / "r.db")])
    assert res.exit_code == 0, res.output
    assert (f"--precision bf16: 0 matmul(s) and 1 conv2d(s) on weights run in bf16 "
            f"({bf16_variant()} kernels)") in res.output
    assert "check:      ok" in res.output
