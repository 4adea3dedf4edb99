"""ci.toml parsing: the default suite loads; every bad input is one UsageError
naming the file and key."""

from pathlib import Path

import pytest

from hwtune.check.suite import load_suite, parse_suite, reference_for
from hwtune.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
GOOD = {
    "suite": {"name": "t", "min_rounds": 4, "chunk": 2},
    "reference": [{"kind": "blas_gemm", "M": 8, "K": 8, "N": 8},
                  {"kind": "numpy_eltwise", "n": 1024}],
    "figure": [{"kind": "gemm", "M": 8, "K": 16, "N": 8},
               {"kind": "eltwise", "op": "mul", "n": 4096},
               {"kind": "fma_peak"}],
}


def test_default_suite_loads():
    s = load_suite(ROOT / "configs" / "ci.toml")
    assert s.name == "ci" and len(s.figures) >= 5 and s.references
    kinds = {f.kind for f in s.figures}
    assert {"gemm", "eltwise", "fma_peak", "triad", "model"} <= kinds
    model = next(f for f in s.figures if f.kind == "model")
    assert Path(model.params["model"]).is_file()  # resolved next to the toml


def test_metric_per_figure():
    doc = dict(GOOD, figure=[{"kind": "gemm", "M": 8, "K": 16, "N": 8,
                              "metric": "estimated-cycles"}, {"kind": "fma_peak"}])
    s = parse_suite(doc)
    assert [s.metric_of(f) for f in s.figures] == ["estimated-cycles", "time"]
    assert s.to_json()["figures"][0]["metric"] == "estimated-cycles"
    ci = load_suite(ROOT / "configs" / "ci.toml")
    counted = {f.kind for f in ci.figures if ci.metric_of(f) != "time"}
    assert counted == {"gemm", "eltwise"}  # the kernel figures gate on any host


def test_parse_good_and_reference_matching():
    s = parse_suite(GOOD)
    assert [f.name for f in s.figures] == ["gemm-8x16x8-t1", "eltwise-mul-n4096-t1",
                                           "fma_peak-t1"]
    assert reference_for(s, s.figures[0]).kind == "blas_gemm"
    assert reference_for(s, s.figures[1]).kind == "numpy_eltwise"
    assert reference_for(s, s.figures[2]).kind == "blas_gemm"
    assert s.figures[2].higher_is_better and not s.figures[0].higher_is_better


@pytest.mark.parametrize("change,words", [
    ({"bogus": {}}, "unknown section"),
    ({"suite": {"min_rounds": "many"}}, "suite.min_rounds must be an integer"),
    ({"suite": {"min_rounds": 2}}, "suite.min_rounds must be in 3..1000"),
    ({"suite": {"min_rounds": 9, "max_rounds": 5}}, "suite.max_rounds"),
    ({"suite": {"max_seconds": 0.0}}, "suite.max_seconds"),
    ({"suite": {"samples": 9}}, "samples and rounds are gone"),
    ({"suite": {"metric": "joules"}}, "suite.metric must be one of"),
    ({"figure": [{"kind": "fma_peak", "metric": "instructions"}]}, "can only be timed"),
    ({"figure": [{"kind": "gemm", "M": 8, "K": 8, "N": 8, "metric": "x"}]}, "metric must be"),
    ({"thresholds": {"count_threshold": 1.5}}, "count_threshold"),
    ({"suite": {"speed": 1}}, "unknown key speed"),
    ({"thresholds": {"alpha": 0.9}}, "alpha must be in"),
    ({"thresholds": {"min_effect": 0.3, "large_effect": 0.1}}, "large_effect"),
    ({"figure": []}, "at least one [[figure]]"),
    ({"figure": [{"kind": "warp"}]}, "kind must be one of"),
    ({"figure": [{"kind": "gemm", "M": 8, "K": 8}]}, "figure[0].N is required"),
    ({"figure": [{"kind": "gemm", "M": 0, "K": 8, "N": 8}]}, "must be >= 1"),
    ({"figure": [{"kind": "gemm", "M": 8, "K": 8, "N": 8, "tile": 4}]}, "unknown key tile"),
    ({"figure": [{"kind": "eltwise", "op": "swish", "n": 8}]}, "op must be one of"),
    ({"figure": [{"kind": "eltwise", "op": "mul", "n": 8, "regions": 9}]},
     "regions (9) exceeds n (8)"),
    ({"figure": [{"kind": "model", "model": "nope.json"}]}, "no such file"),
    ({"figure": [{"kind": "fma_peak"}, {"kind": "fma_peak"}]}, "duplicate figure name"),
    ({"reference": {"kind": "triad", "n": 8}}, "reference[0].kind must be one of"),
])
def test_bad_suites(change, words):
    doc = dict(GOOD, **change)
    with pytest.raises(UsageError) as e:
        parse_suite(doc, "ci.toml")
    assert words in str(e.value) and "ci.toml" in str(e.value)
    assert "\n" not in str(e.value)


def test_bad_files(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        load_suite(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[suite\nname = 1\n")
    with pytest.raises(UsageError, match="not valid TOML"):
        load_suite(bad)
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UsageError):
        load_suite(binary)


def test_select():
    s = parse_suite(GOOD)
    assert [f.name for f in s.select(["fma_peak-t1"]).figures] == ["fma_peak-t1"]
    with pytest.raises(UsageError, match="unknown figure nope"):
        s.select(["nope"])


def test_best_of_reduces_consecutive_runs():
    from hwtune.check.measure import best_of
    assert best_of([3.0, 1.0, 2.0, 5.0, 4.0, 6.0], 3, min) == [1.0, 4.0]
    assert best_of([3.0, 1.0, 2.0, 5.0, 4.0, 6.0], 2, max) == [3.0, 5.0, 6.0]
    assert best_of([1.0, 2.0], 1, min) == [1.0, 2.0]
    assert parse_suite(dict(GOOD, suite={"best_of": 4})).best_of == 4
    with pytest.raises(UsageError, match="best_of must be in 1..100"):
        parse_suite(dict(GOOD, suite={"best_of": 0}))
