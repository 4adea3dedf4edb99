"""`hwtune scan` end to end: a real (shrunken) scan into a temporary results.db,
--show, --json, every usage error, and Ctrl-C keeping what was measured."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from conftest import rows, sigint_default

from hwtune.cli.main import cli
from hwtune.native.bench import dot_variant
from hwtune.native.isa import cpu_features
from hwtune.native.threads import allowed_cpus

# HWTUNE_SCAN_SCALE shrinks reps and probe durations so the quick scan of the
# test runs in a few seconds; the code path is the real one.
ENV = dict(os.environ, HWTUNE_SCAN_SCALE="0.25", COLUMNS="120")
ENV.pop("HWTUNE_DB", None)
NCPU = len(allowed_cpus())


def hwtune(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "hwtune.cli.main", *args],
                          capture_output=True, text=True, env=env or ENV, timeout=timeout)


@pytest.fixture(scope="module")
def scanned(tmp_path_factory):
    db = tmp_path_factory.mktemp("scan") / "results.db"
    res = hwtune("scan", "--quick", "--db", str(db), "--json", "--gemm", "64x512x512",
                 "--gemm", "1x512x2048")
    return db, res


def test_quick_scan_stores_and_prints_json(scanned):
    db, res = scanned
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    s = json.loads(res.stdout)  # nothing but JSON on stdout
    assert s["run"]["status"] == "complete"
    for section in ("host", "peak", "gemm", "eltwise", "corun", "warnings", "advice", "noisy"):
        assert section in s
    assert {g["shape"] for g in s["gemm"]} == {"64x512x512", "1x512x2048"}
    threads = list(range(1, NCPU + 1))
    for g in s["gemm"]:
        assert [r["threads"] for r in g["rows"]] == threads
        for r in g["rows"]:
            assert r["value"] > 0 and r["blas_value"] > 0
            assert r["vs_blas"] == pytest.approx(r["value"] / r["blas_value"], abs=1e-4)
        assert g["rows"][0]["speedup"] == 1.0 and g["rows"][0]["efficiency"] == 1.0
    assert {e["op"] for e in s["eltwise"]} == {"mul", "add", "fma", "sigmoid", "tanh", "relu"}
    assert s["peak"]["fma"] and all(r["value"] > 0 for r in s["peak"]["fma"])
    # AMX: detected and reported only (CPUID, XCR0, Linux's arch_prctl grant)
    amx = s["facts"]["amx"]
    assert set(amx) == {"cpuid", "os", "permitted"}
    assert amx["cpuid"] == cpu_features()["amx_tile"]
    assert not amx["permitted"] or (amx["cpuid"] and amx["os"])
    # int8 / bf16 GEMM peaks of the selected ISA (the quick scan's only one)
    # where this CPU runs that variant row exactly, left out (not zero) where not
    isa = s["peak"]["fma"][0]["isa"]
    for kind in ("int8", "bf16"):
        variant = dot_variant(kind, isa)
        if variant is None:
            assert kind not in s["peak"]
            continue
        got = s["peak"][kind]
        assert sorted(r["threads"] for r in got) == sorted({1, NCPU})
        for r in got:
            assert r["kernel"] == variant and r["isa"] == isa and r["value"] > 0
            assert r["vs_fma"] > 0 and r["unit"] == ("GOPS" if kind == "int8" else "GFLOPS")
    # in L3 only where the fingerprint names an L3 at least 8x a thread's L2
    assert {"dram", "l2"} <= {r["where"] for r in s["peak"]["triad"]} <= {"dram", "l2", "l3"}
    assert set(s["corun"]) == {"gemm", "mul"}
    layouts = {(r["executors"], r["threads"], r["placement"]) for r in s["corun"]["gemm"]["rows"]}
    assert (1, 1, "pinned") in layouts and (1, 1, "os") in layouts
    if NCPU >= 2:
        assert (2, 1, "pinned") in layouts and (1, 2, "os") in layouts


def test_every_measurement_is_stored_with_its_statistics(scanned):
    db, res = scanned
    s = json.loads(res.stdout)
    run_id = s["run"]["run_id"]
    got = rows(db, "SELECT bench, kernel_variant, n_samples, median_s, mad_s, rel_spread, value, "
                   "status FROM measurements WHERE run_id = ?", run_id)
    assert len(got) == s["measurements"] > 0
    benches = {r[0] for r in got}
    dot = any(dot_variant(k, s["peak"]["fma"][0]["isa"]) for k in ("int8", "bf16"))
    assert benches == {"fma_peak", "triad", "gemm", "eltwise", "corun"} | (
        {"dot_peak"} if dot else set())
    assert any(r[1] == "numpy-blas" for r in got if r[0] == "gemm")
    for bench, _, n, med, mad, spread, value, status in got:
        assert n >= 3 and value > 0 and status in ("ok", "noisy")
        assert spread is not None and spread >= 0
        if bench in ("gemm", "eltwise"):  # timed kernels: seconds per call
            assert med > 0 and mad >= 0
    facts = dict(rows(db, "SELECT key, value_json FROM run_facts WHERE run_id = ?", run_id))
    assert "gemm_saturation" in facts and "blas" in facts


def test_show_prints_the_stored_scan_without_measuring(scanned):
    db, res = scanned
    before = rows(db, "SELECT count(*) FROM measurements")[0][0]
    shown = hwtune("scan", "--show", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    for text in ("FP32 FMA peak", "GEMM [64,512]x[512,512]", "of system BLAS",
                 "Element-wise ops", "Co-running gemm", "best gemm layout", "threads"):
        assert text in shown.stdout
    stored = json.loads(res.stdout)["peak"]
    for kind, title in (("int8", "int8 GEMM peak"), ("bf16", "bf16 GEMM peak")):
        assert (title in shown.stdout) == (kind in stored)
    as_json = hwtune("scan", "--show", "--json", "--db", str(db))
    assert json.loads(as_json.stdout)["run"]["run_id"] == json.loads(res.stdout)["run"]["run_id"]
    assert rows(db, "SELECT count(*) FROM measurements")[0][0] == before


def _usage_error(tmp_path, *args):
    # In-process (CliRunner): the same click layer, without a 1 s interpreter
    # start per case; the subprocess cases below cover real stderr/exit codes.
    db = tmp_path / "r.db"
    res = CliRunner().invoke(cli, ["scan", "--db", str(db), *args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert not db.exists(), "a usage error must not create the database"
    return res.exit_code, lines[0]


@pytest.mark.parametrize("args,message", [
    (("--threads", "0"), f"error: invalid --threads 0: thread counts must be between 1 and "
                         f"{NCPU} (the CPUs this process may use)"),
    (("--threads", f"1,{NCPU + 1}"), f"error: invalid --threads 1,{NCPU + 1}: thread counts must "
                                     f"be between 1 and {NCPU} (the CPUs this process may use)"),
    (("--threads", "two"), "error: invalid --threads 'two': expected counts like 1,2,4 or a "
                           "range like 1-4"),
    (("--gemm", "64x512"), "error: invalid --gemm '64x512': expected MxKxN with positive "
                           "integers, e.g. 64x512x512"),
    (("--gemm", "0x512x512"), "error: invalid --gemm '0x512x512': expected MxKxN with positive "
                              "integers, e.g. 64x512x512"),
    (("--eltwise-size", "-5"), "error: invalid --eltwise-size '-5': expected a positive number "
                               "of elements, e.g. 32768"),
    (("--eltwise-size", "lots"), "error: invalid --eltwise-size 'lots': expected a positive "
                                 "number of elements, e.g. 32768"),
    (("--isa", "sse9"), "error: invalid --isa 'sse9': choose one of generic, avx2, avx512"),
    (("--reps", "0"), "error: invalid --reps 0: expected 1..10000"),
])
def test_usage_errors_are_one_line_exit_2_before_measuring(tmp_path, args, message):
    code, line = _usage_error(tmp_path, *args)
    assert code == 2
    assert line == message


def test_click_usage_error_exits_2(tmp_path):
    res = hwtune("scan", "--reps", "many", "--db", str(tmp_path / "r.db"))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr and "--reps" in res.stderr


def test_show_rederives_saturation_and_refuses_measuring_options(scanned):
    db, res = scanned
    strict = CliRunner().invoke(cli, ["scan", "--show", "--json", "--saturation", "0",
                                      "--db", str(db)])
    assert strict.exit_code == 0, strict.stderr
    assert json.loads(strict.stdout)["saturation_threshold"] == 0.0
    bad = CliRunner().invoke(cli, ["scan", "--show", "--quick", "--threads", "1", "--db", str(db)])
    assert bad.exit_code == 2
    assert bad.stderr.strip() == ("error: --show prints the stored scan and measures nothing: "
                                  "drop --quick, --threads (only --db, --json and --saturation "
                                  "apply)")


def test_show_without_a_stored_scan_is_an_error(tmp_path):
    res = hwtune("scan", "--show", "--db", str(tmp_path / "empty.db"))
    assert res.returncode == 2
    assert res.stderr.strip() == ("error: no stored scan for this host in the database: run "
                                  "'hwtune scan' first")


def test_foreign_file_as_db_is_a_one_line_database_error(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("not a database\n")
    res = hwtune("scan", "--show", "--db", str(junk))
    assert res.returncode == 2
    assert res.stderr.startswith("error: ") and len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.stderr
    assert junk.read_text() == "not a database\n"


def test_noisy_measurements_are_marked_and_the_user_is_told(tmp_path):
    # --noise 0: any spread at all counts as noisy, so every retry path runs
    # and most rows end up 'noisy' (identical samples are impossible here).
    db = tmp_path / "n.db"
    res = hwtune("scan", "--quick", "--no-corun", "--threads", "1", "--gemm", "16x64x64",
                 "--eltwise-size", "4096", "--noise", "0", "--db", str(db))
    assert res.returncode == 0, res.stderr
    assert "close other programs, or raise --reps" in res.stdout
    # a long command ends with one line saying what to do next
    last = res.stdout.strip().splitlines()[-1]
    assert last.startswith("next: hwtune tune-graph") and res.stdout.count("next:") == 1
    noisy = rows(db, "SELECT count(*), min(note) FROM measurements WHERE status = 'noisy'")[0]
    assert noisy[0] > 0 and noisy[1] == "3 attempt(s)"


def test_ctrl_c_keeps_finished_measurements_and_exits_130(tmp_path):
    db = tmp_path / "i.db"
    env = dict(ENV)
    env.pop("HWTUNE_SCAN_SCALE")  # the full scan: long enough to interrupt
    proc = subprocess.Popen([sys.executable, "-m", "hwtune.cli.main", "scan", "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=sigint_default)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if db.exists():
                try:
                    if rows(db, "SELECT count(*) FROM measurements")[0][0] >= 2:
                        break
                except sqlite3.OperationalError:
                    pass  # schema not created yet
            time.sleep(0.05)
        else:
            pytest.fail("scan stored no measurement within 30 s")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    kept = rows(db, "SELECT count(*) FROM measurements")[0][0]
    run_id, status = rows(db, "SELECT run_id, status FROM runs")[0]
    assert status == "interrupted"
    assert err.strip().splitlines()[-1] == (
        f"error: interrupted: kept {kept} measurements of scan run {run_id} "
        f"(marked 'interrupted')")
    assert kept >= 2


def test_refused_pinning_is_a_single_warning_not_an_error():
    # An unpinned pool stands for one whose pins the OS refused (the pool
    # reports both the same way: .pinned is False); the scan keeps going.
    from hwtune.native.threads import Pool
    from hwtune.scan.runner import _Measurer

    warned = []
    m = _Measurer(1, warned.append)
    with Pool(executors=1, threads=1, pin=False) as pool:
        assert m._check_pinned(pool, True) is False
        assert m._check_pinned(pool, True) is False
    assert len(warned) == 1 and "refused to pin" in warned[0]
    m.close()


def test_chart_marks_points_and_the_saturation_point():
    from hwtune.report.text_charts import MARKERS, OVERLAP, SAT_CHAR, line_chart

    lines = line_chart([("hwtune", [1, 2, 4], [10.0, 19.0, 20.0]),
                        ("blas", [1, 2, 4], [10.0, 12.0, 14.0])], width=30, height=8,
                       mark_x=2, y_unit="GFLOPS")
    plot = lines[:8]
    assert plot[0].split("┤")[1].rstrip().endswith(MARKERS[0])  # max at the top right
    both = 7 - round(10.0 / 20.0 * 7)  # both series start at (1, 10): one shared cell
    assert plot[both].split("┤")[1][0] == OVERLAP
    col = plot[3].index("┤") + 1 + round((2 - 1) / 3 * 29)
    assert all(ln[col] in (SAT_CHAR, MARKERS[0], MARKERS[1], "·", OVERLAP) for ln in plot)
    assert "saturates at 2" in lines[-1] and "[GFLOPS]" in lines[-1]
    assert line_chart([("x", [], [])]) == ["(no data)"]
