"""`hwtune check` end to end on a tiny real suite: exit codes, baselines in a
file and in results.db, host refusal, bad inputs as one-line errors.

The regression and pass cases compare a real measurement with a real
recorded baseline whose samples were scaled 1000x (a change no machine noise
imitates); the suite's min_effect of 200% keeps other users' load on the
shared test machine from turning either into 'undecidable'."""

import json
import shutil
import sys

import pytest
from click.testing import CliRunner

from hwtune.cli.main import cli
from check_suites import tiny_suite

TINY = tiny_suite("tiny")


@pytest.fixture
def env(tmp_path):
    suite = tmp_path / "ci.toml"
    suite.write_text(TINY)
    return tmp_path, ["--suite", str(suite), "--db", str(tmp_path / "results.db")]


def invoke(args):
    r = CliRunner().invoke(cli, ["check", *args])
    return r.exit_code, r.output


def flat(out):
    """The terminal output with its line wrapping undone."""
    return " ".join(out.split())


def recorded(tmp_path, args):
    base = tmp_path / "base.json"
    code, out = invoke(args + ["--update-baseline", "--baseline", str(base)])
    assert code == 0, out
    assert "BASELINE RECORDED" in out
    # the next step checks against the file just written, not results.db
    assert "next: hwtune check --baseline " in flat(out) and flat(out).replace(" ", "").endswith(
        f"--baseline{base}(comparesthenextbuildwiththisbaseline)"), out
    return base, json.loads(base.read_text())


def entry(doc):
    """The one host entry of a baseline file recorded here."""
    assert doc["version"] == 2 and len(doc["hosts"]) == 1
    return doc["hosts"][0]


def scaled(doc, factor, path):
    import math
    for f in entry(doc)["figures"]:
        if not f["name"].startswith("ref-"):
            f["samples"] = [x * factor for x in f["samples"]]
            # The levels over the recorded processes (log seconds, and log
            # of the ratio to the reference) move with the samples.
            for lv in f["params"].get("levels") or []:
                lv["abs"] += math.log(factor)
                lv["rel"] += math.log(factor)
    path.write_text(json.dumps(doc))
    return path


def test_regression_exit_1_and_outputs(env):
    tmp_path, args = env
    base, doc = recorded(tmp_path, args)
    fast = scaled(doc, 1e-3, tmp_path / "fast.json")  # the baseline was 1000x faster
    junit, md = tmp_path / "check.xml", tmp_path / "summary.md"
    code, out = invoke(args + ["--baseline", str(fast), "--junit", str(junit),
                               "--markdown", str(md)])
    assert code == 1, out
    assert "REGRESSION" in out
    assert f"next: hwtune check --baseline {fast} --figure " in flat(out)
    assert junit.read_text().count("<failure") == 2
    # JUnit time: the wall seconds each figure took to measure, within the run's
    import xml.etree.ElementTree as ET
    root = ET.fromstring(junit.read_text())
    total = float(root.get("time"))
    times = [float(tc.get("time")) for tc in root.iter("testcase")]
    assert all(0 < t <= total for t in times) and sum(times) <= total, (times, total)
    assert "| `g` |" in md.read_text()
    # JSON: machine-readable, raw samples on both sides
    code, out = invoke(args + ["--baseline", str(fast), "--json"])
    doc = json.loads(out)
    assert code == 1 and doc["status"] == "regression" and doc["exit_code"] == 1
    # a regression fails only after fresh processes measured it again
    for f in doc["figures"]:
        again = f["current"]["params"]["remeasure"]
        assert again["status"] == "regression" and len(again["samples"]) >= 3, f["name"]
        assert "again in fresh processes" in f["reason"]
    g = next(f for f in doc["figures"] if f["name"] == "g")
    assert g["ratio"] > 100 and len(g["current"]["samples"]) >= 6
    assert g["metric"] == "time" and g["decided_by"]["rounds"] >= 3


def test_pass_exit_0(env):
    tmp_path, args = env
    base, doc = recorded(tmp_path, args)
    slow = scaled(doc, 1e3, tmp_path / "slow.json")  # current is 1000x faster
    code, out = invoke(args + ["--baseline", str(slow)])
    assert code == 0, out
    assert "PASS" in out and "faster" in out


def test_undecidable_exit_3(env):
    tmp_path, args = env
    base, doc = recorded(tmp_path, args)
    for f in entry(doc)["figures"]:
        f["samples"] = f["samples"][:2]
        f["ref"] = f["ref"][:2]
        f["params"].pop("levels", None)  # a one-run baseline (of an older hwtune)
    (tmp_path / "few.json").write_text(json.dumps(doc))
    code, out = invoke(args + ["--baseline", str(tmp_path / "few.json")])
    assert code == 3 and "UNDECIDABLE" in out, out
    code, out = invoke(args + ["--baseline", str(tmp_path / "few.json"), "--undecidable-ok"])
    assert code == 0 and "UNDECIDABLE" in out, out


def test_db_baseline_and_record_or_report(env):
    tmp_path, args = env
    code, out = invoke(args)
    assert code == 2 and out.count("\n") == 1
    assert "no baseline of suite 'tiny'" in out and "--update-baseline" in out
    code, out = invoke(args + ["--mode", "record-or-report"])
    assert code == 0 and "BASELINE RECORDED" in out, out
    from hwtune.check import baseline as bl
    from hwtune.db import ResultsDB
    # The recorded time figures made 1000x slower (stored as a newer
    # baseline, the one compared with): the comparison's outcome must not
    # depend on how loaded the machine was during each run (see
    # test_record_or_report_on_an_unseen_host).
    with ResultsDB.open(tmp_path / "results.db") as db:
        host = db.hosts()[0]["host_key"]
        b = bl.load_db(db, host, "tiny")
        for f in b.figures.values():
            if not f.name.startswith("ref-"):
                f.samples = [x * 1e3 for x in f.samples]
        bl.save_db(db, b)
    code, out = invoke(args + ["--mode", "record-or-report"])
    assert code == 0, out
    assert "BASELINE RECORDED" not in out and "baseline:" in out
    with ResultsDB.open(tmp_path / "results.db") as db:
        runs = db._query("SELECT kind, status FROM runs")
        assert runs == [{"kind": "check", "status": "complete"}] * 2
        host = db.hosts()[0]["host_key"]
        assert set(bl.load_db(db, host, "tiny").figures) >= {"g", "e"}
        rows = db._query("SELECT op, n_samples FROM measurements WHERE bench = 'check'")
        assert {r["op"] for r in rows} >= {"g", "e"} and all(r["n_samples"] for r in rows)


def test_host_mismatch(env):
    tmp_path, args = env
    base, doc = recorded(tmp_path, args)
    entry(doc)["host_key"] = "0" * 16
    entry(doc)["host"] = {"cpu_model": "Other CPU"}
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc))
    code, out = invoke(args + ["--baseline", str(other)])
    assert code == 2 and out.startswith("error: baseline") and "refusing" in out
    assert "Other CPU" in out and out.count("\n") == 1
    code, out = invoke(args + ["--baseline", str(other), "--relative"])
    assert code in (0, 1, 3) and "note: baseline" in out and "relative" in out
    assert "error:" not in out


def test_record_or_report_on_an_unseen_host(env):
    """CI runs on whichever machine it gets: a committed baseline file from
    another host must neither fail the gate nor be overwritten; this host
    records its own entry beside it and later runs compare with that."""
    tmp_path, args = env
    base, doc = recorded(tmp_path, args)
    here = entry(doc)["host_key"]
    other = dict(entry(doc), host_key="intel-xeon-2c-000000000000",
                 host={"cpu_model": "Intel(R) Xeon(R) Processor @ 2.50GHz",
                       "isa_best": "avx512"}, isa="avx512")
    # Written the way older hwtune wrote one host's file (format version 1).
    other_v1 = dict(other, format=doc["format"], version=1)
    del other_v1["isa"]
    base.write_text(json.dumps(other_v1))
    code, out = invoke(args + ["--baseline", str(base)])
    assert code == 2 and "refusing" in out and "Xeon" in out  # gate mode still refuses
    code, out = invoke(args + ["--mode", "record-or-report", "--baseline", str(base)])
    assert code == 0 and "BASELINE RECORDED" in out, out
    assert "no entry for this host" in flat(out)
    got = json.loads(base.read_text())
    assert got["version"] == 2
    assert sorted(h["host_key"] for h in got["hosts"]) == sorted([here, other["host_key"]])
    kept = next(h for h in got["hosts"] if h["host_key"] == other["host_key"])
    assert kept["figures"] == other["figures"] and kept["isa"] == "avx512"
    # Next runs on this host compare with its own entry. Its time figures
    # are made 1000x slower first, so that what is compared cannot depend on
    # how loaded the machine was when each run measured: with the entry as
    # recorded, a comparison run under a load burst (1-minute load ~12 on 2
    # cores) is several times slower than the recording and fails as a
    # regression even at large_effect 300%.
    mine = next(h for h in got["hosts"] if h["host_key"] == here)
    for f in mine["figures"]:
        if not f["name"].startswith("ref-"):
            f["samples"] = [x * 1e3 for x in f["samples"]]
    base.write_text(json.dumps(got))
    code, out = invoke(args + ["--mode", "record-or-report", "--baseline", str(base)])
    assert code == 0 and "BASELINE RECORDED" not in out and "no entry" not in flat(out), out
    assert "baseline:" in out, out  # compared with this host's (scaled) entry
    code, out = invoke(args + ["--baseline", str(base)])  # gate mode finds this host's too
    # 3 (undecidable) stays possible: too few undisturbed rounds under load.
    assert code in (0, 3) and "refusing" not in out, out
    got = json.loads(base.read_text())
    assert sorted(h["host_key"] for h in got["hosts"]) == sorted([here, other["host_key"]])
    kept = next(h for h in got["hosts"] if h["host_key"] == other["host_key"])
    assert kept["figures"] == other["figures"]


COUNTED = """
[suite]
name = "counted"
min_rounds = 3
max_rounds = 6
max_seconds = 5.0
sample_seconds = 0.001
count_reps = 1

[[reference]]
kind = "blas_gemm"
M = 16
K = 16
N = 16

[[figure]]
name = "g"
kind = "gemm"
M = 16
K = 64
N = 64
metric = "estimated-cycles"

[[figure]]
name = "peak"
kind = "fma_peak"
"""


@pytest.mark.skipif(shutil.which("valgrind") is None,
                    reason="valgrind is not installed (Debian: apt-get install valgrind)")
def test_counted_figures_gate_on_an_unseen_host(tmp_path):
    """CI on a host the baseline file has no entry for: time figures record
    this host's entry, counted figures (valgrind, fixed ISA and caches) are
    compared with another host's counts and still fail a regression."""
    suite = tmp_path / "counted.toml"
    suite.write_text(COUNTED)
    args = ["--suite", str(suite), "--db", str(tmp_path / "results.db")]
    base, doc = recorded(tmp_path, args)
    e = entry(doc)
    g = next(f for f in e["figures"] if f["name"] == "g")
    assert g["params"]["metric"] == "estimated-cycles" and g["samples"][0] > 0
    assert g["params"]["counter"] == "callgrind" and g["params"]["isa"] in ("avx2", "generic")
    e["host_key"] = "intel-xeon-2c-000000000000"
    e["host"] = {"cpu_model": "Intel(R) Xeon(R) Processor @ 2.50GHz", "isa_best": "avx512"}
    base.write_text(json.dumps(doc))
    code, out = invoke(args + ["--mode", "record-or-report", "--baseline", str(base),
                               "--json"])
    got = json.loads(out)
    assert code == 0 and got["status"] == "recorded", out
    gout = next(f for f in got["figures"] if f["name"] == "g")
    assert gout["status"] == "pass" and "intel-xeon-2c-000000000000" in gout["reason"]
    assert gout["metric"] == "estimated-cycles" and gout["decided_by"]["calls"] == 1
    # The other host counted 20% less: this build does more work.
    g["samples"] = [x / 1.2 for x in g["samples"]]
    doc = {"format": doc["format"], "version": 2, "suite": "counted", "hosts": [e]}
    base.write_text(json.dumps(doc))
    code, out = invoke(args + ["--mode", "record-or-report", "--baseline", str(base)])
    assert code == 1 and "REGRESSION" in out and "+20" in flat(out), out


def test_against_another_build(env):
    """--against: every figure measured in two worker processes (here the
    same build: an A/A comparison), round by round, no baseline needed."""
    tmp_path, args = env
    code, out = invoke(args + ["--against", sys.executable, "--json"])
    # Warnings (stderr, mixed in by the test runner) may precede the document.
    assert "{" in out, out
    doc = json.loads(out[out.index("\n{") + 1:] if not out.startswith("{") else out)
    assert code in (0, 3) and doc["against"] and not doc["baseline"], out
    assert {f["name"] for f in doc["figures"]} == {"g", "e"}
    assert all(f["status"] in ("pass", "undecidable") for f in doc["figures"]), out
    assert all(f["decided_by"]["rounds"] >= 3 for f in doc["figures"])
    code, out = invoke(args + ["--against", sys.executable, "--update-baseline"])
    assert code == 2 and "--against" in out


@pytest.mark.parametrize("content,words", [
    (None, "does not exist"),
    ("{ nope", "not valid JSON"),
    ('{"format": "x"}', "not an hwtune check baseline"),
])
def test_bad_baseline_files(env, content, words):
    tmp_path, args = env
    p = tmp_path / "b.json"
    if content is not None:
        p.write_text(content)
    code, out = invoke(args + ["--baseline", str(p)])
    assert code == 2 and words in out and out.startswith("error:") and out.count("\n") == 1


def test_bad_suite_file(tmp_path):
    bad = tmp_path / "ci.toml"
    bad.write_text("[suite]\nchunk = 'x'\n[[figure]]\nkind = 'fma_peak'\n")
    code, out = invoke(["--suite", str(bad), "--db", str(tmp_path / "r.db")])
    assert code == 2 and "suite.chunk must be an integer" in out and out.count("\n") == 1
    bad.write_text("[suite\n")
    code, out = invoke(["--suite", str(bad), "--db", str(tmp_path / "r.db")])
    assert code == 2 and "not valid TOML" in out
    code, out = invoke(["--suite", str(tmp_path / "none.toml")])
    assert code == 2 and "does not exist" in out


def test_unknown_figure_and_bad_options(env):
    tmp_path, args = env
    code, out = invoke(args + ["--figure", "zzz"])
    assert code == 2 and "unknown figure zzz" in out
    code, out = invoke(args + ["--max-seconds", "0"])
    assert code == 2 and "--max-seconds" in out
    code, out = invoke(args + ["--metric", "joules"])
    assert code == 2 and "joules" in out


def test_help_has_example():
    r = CliRunner().invoke(cli, ["check", "--help"])
    assert r.exit_code == 0 and "Example:" in r.output and "--update-baseline" in r.output


def test_compare_two_saved_json_results(env):
    """--compare on two real `--json` results: A/A passes, B (A's samples
    x1000) regresses; nothing is measured or stored."""
    tmp_path, args = env
    r = CliRunner().invoke(cli, ["check", *args, "--update-baseline", "--baseline",
                                 str(tmp_path / "base.json"), "--json"])
    assert r.exit_code == 0, r.output
    a = tmp_path / "a.json"
    a.write_text(r.stdout)
    code, out = invoke(["--compare", str(a), str(a)])
    assert code == 0 and "PASS" in out, out
    doc = json.loads(r.stdout)
    for f in doc["figures"]:
        f["current"]["samples"] = [x * 1e3 for x in f["current"]["samples"]]
    b = tmp_path / "b.json"
    b.write_text(json.dumps(doc))
    code, out = invoke(["--compare", str(a), str(b)])
    assert code == 1 and "REGRESSION" in out, out
