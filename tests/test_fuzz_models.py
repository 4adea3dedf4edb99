"""The seeded model fuzzer (benchmarks/fuzz_models.py) in the test suite:
200 mutants of the bundled models through validation, storage, the engine
and the reference; any internal error, bad input accepted, crash or hang
fails. The script runs 5,000 and more by hand."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import fuzz_models  # noqa: E402

COUNT = 200


def test_200_mutants_end_in_a_clean_refusal_or_a_clean_run():
    out = fuzz_models.run_fuzz(COUNT, seed=0, timeout=120)
    assert sum(out["verdicts"].values()) == COUNT
    assert out["failures"] == [], "\n".join(
        f"#{f['index']} {f['verdict']}: {f['mutant']}: {f['detail']}" for f in out["failures"])
    # Both sides are exercised: mutants the validator refuses and mutants
    # that validate and run on the engine.
    assert out["verdicts"].get("refused", 0) > COUNT // 4
    assert out["verdicts"].get("ran", 0) > COUNT // 20


def test_the_oracle_reports_what_validation_lets_through(monkeypatch):
    """With the data check switched off, a mutant with the wrong number of
    data values validates and `run` refuses it: reported as ACCEPTED; a NaN
    that gets as far as storage is an INTERNAL error."""
    import hwtune.graph.model as model
    doc = {"inputs": [{"name": "x", "shape": [2], "data": [1.0]}],
           "ops": [{"name": "y", "op": "relu", "inputs": ["x"]}], "outputs": ["y"]}
    assert fuzz_models.check_mutant({"doc": doc, "overrides": {}})[0] == "refused"
    monkeypatch.setattr(model, "_check_data", lambda *a, **k: True)
    verdict, detail = fuzz_models.check_mutant({"doc": doc, "overrides": {}})
    assert verdict == "ACCEPTED" and "1 values for shape [2]" in detail
    monkeypatch.setattr(model, "check_document", lambda *a, **k: None)
    doc["inputs"][0]["data"] = [float("nan"), 1.0]
    assert fuzz_models.check_mutant({"doc": doc, "overrides": {}})[0] == "INTERNAL"


@pytest.mark.parametrize("index", [3, 77])
def test_a_mutant_is_reproducible_from_its_seed_and_index(index):
    seeds = fuzz_models.seeds()
    a = fuzz_models.make_mutant(seeds, index, 11)
    b = fuzz_models.make_mutant(seeds, index, 11)
    assert a["what"] == b["what"] and repr(a.get("doc", a.get("bytes"))) == \
        repr(b.get("doc", b.get("bytes")))
