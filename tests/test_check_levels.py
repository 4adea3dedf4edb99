"""A stored baseline as a distribution over processes (hwtune.check.levels):
the level of a run, the test of a check's level(s) against the recorded
spread, and `hwtune check` recording and judging with it end to end."""

import json
import math

import pytest
from click.testing import CliRunner

from hwtune.check import levels
from check_suites import tiny_suite
from hwtune.check.levels import Level
from hwtune.cli.main import cli


def lv(x, se=0.002):
    return Level(x, x - 1.0, se, se)


# Six recorded processes whose levels spread ~1% (log seconds).
BASE = [lv(math.log(1e-3) + d) for d in (-0.012, -0.004, 0.0, 0.003, 0.008, 0.011)]
MID = sum(b.abs for b in BASE) / len(BASE)


def decide(shift, base=BASE, n=1, **kw):
    cur = [lv(MID + math.log(shift))] * n
    return levels.decide(base, cur, relative=kw.get("relative", False), alpha=0.01,
                         min_effect=0.05)


def test_decide_by_the_recorded_spread():
    assert decide(1.10).status == "regression"
    assert decide(1.10, relative=True).status == "regression"  # rel levels move alike
    assert decide(1.003).status == "pass"
    assert decide(0.85).status == "improvement"
    d = decide(1.10)
    assert abs(d.ratio - 1.10) < 1e-9 and d.ci[0] > 1.0
    assert "vs 6 recorded processes" in d.reason


def test_a_wide_spread_does_not_fail_a_small_slowdown():
    wide = [lv(math.log(1e-3) + d) for d in (-0.15, -0.08, 0.0, 0.05, 0.09, 0.12)]
    mid = sum(b.abs for b in wide) / len(wide)
    got = levels.decide(wide, [lv(mid + math.log(1.08))], relative=False, alpha=0.01,
                        min_effect=0.05)
    # slower by min_effect, not significantly: a pass that says so
    assert got.status == "pass" and "not significant" in got.reason, got.reason
    got = levels.decide(wide, [lv(mid + math.log(1.03))], relative=False, alpha=0.01,
                        min_effect=0.05)
    assert got.status == "pass" and "not significant" not in got.reason
    # a second run (the re-measure) narrows it: two runs at +60% decide
    got = levels.decide(wide, [lv(mid + math.log(1.6))] * 2, relative=False, alpha=0.01,
                        min_effect=0.05)
    assert got.status == "regression"


def test_the_check_runs_own_error_counts():
    # A run whose own standard error is large cannot fail on its estimate alone.
    noisy = [Level(MID + math.log(1.10), MID, 0.2, 0.2)]
    got = levels.decide(BASE, noisy, relative=False, alpha=0.01, min_effect=0.05)
    assert got.status == "pass" and "not significant" in got.reason


def test_level_of_a_run():
    # 4 rounds of 2 samples: figure 2 ms, reference 1 ms; round 3 discarded.
    costs = [2e-3] * 8
    ref = [1e-3] * 8
    params = {"ends": [2, 4, 6, 8], "kept": [1, 1, 0, 1]}
    got = levels.level_of(costs, ref, params)
    assert got.abs == pytest.approx(math.log(2e-3)) and got.rel == pytest.approx(math.log(2))
    assert levels.level_of(costs[:4], ref[:4], {"ends": [2, 4]}) is None  # < 3 rounds
    assert Level.from_json(got.to_json()) == got


TINY = tiny_suite("lv", eltwise=False)


def _tiny_args(tmp_path):
    """`hwtune check` arguments for the tiny suite with a scratch database,
    and the path of a baseline file to record."""
    suite = tmp_path / "s.toml"
    suite.write_text(TINY)
    return ["check", "--suite", str(suite), "--db", str(tmp_path / "r.db")], tmp_path / "b.json"


def test_update_baseline_records_levels_and_check_uses_them(tmp_path):
    args, base = _tiny_args(tmp_path)
    r = CliRunner().invoke(cli, args + ["--update-baseline", "--baseline", str(base)])
    assert r.exit_code == 0, r.output
    fig = next(f for f in json.loads(base.read_text())["hosts"][0]["figures"]
               if f["name"] == "g")
    assert len(fig["params"]["levels"]) == 3  # this process and 2 fresh ones
    assert fig["params"]["rounds"] <= 6  # sampled as a level: 2 x min_rounds
    r = CliRunner().invoke(cli, args + ["--baseline", str(base), "--json"])
    doc = json.loads(r.stdout)
    g = next(f for f in doc["figures"] if f["name"] == "g")
    assert r.exit_code == 0 and g["status"] == "pass", g["reason"]
    assert "vs 3 recorded processes" in g["reason"]
    assert set(g["current"]["params"]["level"]) == {"abs", "rel", "se_abs", "se_rel"}
    # --processes 1: one run, the single-run test (as baselines of older hwtune)
    one = tmp_path / "one.json"
    r = CliRunner().invoke(cli, args + ["--update-baseline", "--baseline", str(one),
                                        "--processes", "1"])
    assert r.exit_code == 0, r.output
    fig = json.loads(one.read_text())["hosts"][0]["figures"]
    assert all("levels" not in f["params"] for f in fig)


def test_bad_processes(tmp_path):
    suite = tmp_path / "s.toml"
    suite.write_text(TINY.replace("processes = 3", "processes = 0"))
    r = CliRunner().invoke(cli, ["check", "--suite", str(suite), "--db",
                                 str(tmp_path / "r.db"), "--update-baseline"])
    assert r.exit_code == 2 and "suite.processes" in r.output


def test_ci_gates_with_the_documented_recipe():
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    recipe = ("hwtune check --update-baseline --baseline perf-baseline.json",
              "hwtune check --baseline perf-baseline.json")
    help_text = CliRunner().invoke(cli, ["check", "--help"]).output
    readme = (root / "README.md").read_text()
    for line in recipe:
        assert line in help_text and line in readme
    run = "\n".join(ln for ln in (root / ".ci" / "run").read_text().splitlines()
                    if not ln.lstrip().startswith("#"))
    assert "--undecidable-ok" not in run
    # The project's own CI on a shared machine: docs/check.md's recipe for
    # it (counted figures gate at 1%, time figures from large_effect), the
    # same line in .ci/run and in that section of the docs.
    ci = '.venv/bin/hwtune check --mode record-or-report --baseline "$tmp/perf-baseline.json"'
    assert ci in run
    assert ci in (root / "docs" / "check.md").read_text()


def test_a_fresh_process_with_too_few_rounds_is_tried_again(tmp_path, monkeypatch):
    """Recording a baseline: a fresh process that keeps too few rounds for a
    level (a loaded machine) is replaced by another fresh process, up to
    gate.FRESH_TRIES in a row; only then does the recording fail, naming
    the figure (it failed at the first such process: a flaky CI)."""
    from hwtune.check import gate, remeasure
    real = remeasure.record_level
    calls = {"n": 0}

    def flaky(*a, **kw):  # every other fresh process keeps too few rounds
        calls["n"] += 1
        if calls["n"] % 2:
            lv, res = real(*a, **kw)
            return None, res
        return real(*a, **kw)
    monkeypatch.setattr(remeasure, "record_level", flaky)
    args, base = _tiny_args(tmp_path)
    r = CliRunner().invoke(cli, args + ["--update-baseline", "--baseline", str(base)])
    assert r.exit_code == 0, r.output
    figs = json.loads(base.read_text())["hosts"][0]["figures"]
    assert all(len(f["params"]["levels"]) == 3 for f in figs if f["name"] in ("g", "e"))
    monkeypatch.setattr(remeasure, "record_level", lambda *a, **kw: (None, real(*a, **kw)[1]))
    r = CliRunner().invoke(cli, args + ["--update-baseline", "--baseline", str(tmp_path / "c.json")])
    assert r.exit_code == 2 and f"in {gate.FRESH_TRIES} fresh processes in a row" in r.output


def test_a_check_run_with_too_few_rounds_is_measured_again_in_fresh_processes(tmp_path,
                                                                               monkeypatch):
    """Checking against a baseline of levels: a run that keeps too few
    undisturbed rounds for a level (a loaded machine: the clean-clone CI of
    c407636 failed the test above this way) is decided by a level taken in
    fresh processes, up to gate.FRESH_TRIES; still too few, it stays
    undecidable and says why."""
    from hwtune.check import gate, levels
    args, base = _tiny_args(tmp_path)
    r = CliRunner().invoke(cli, args + ["--update-baseline", "--baseline", str(base)])
    assert r.exit_code == 0, r.output
    real = levels.level_of
    calls = {"n": 0}

    def first_run_disturbed(costs, ref, params):  # this process's level: too few rounds
        calls["n"] += 1
        return None if calls["n"] == 1 else real(costs, ref, params)
    monkeypatch.setattr(levels, "level_of", first_run_disturbed)
    r = CliRunner().invoke(cli, args + ["--baseline", str(base), "--json", "--figure", "g"])
    g = next(f for f in json.loads(r.stdout)["figures"] if f["name"] == "g")
    assert r.exit_code == 0 and g["status"] == "pass", g["reason"]
    assert g["reason"].startswith(gate.TOO_FEW_ROUNDS + "; in fresh processes: ")
    monkeypatch.setattr(levels, "level_of", lambda *a: None)
    r = CliRunner().invoke(cli, args + ["--baseline", str(base), "--json", "--figure", "g"])
    g = next(f for f in json.loads(r.stdout)["figures"] if f["name"] == "g")
    assert r.exit_code == 3 and g["status"] == "undecidable" and \
        g["reason"] == gate.TOO_FEW_ROUNDS
