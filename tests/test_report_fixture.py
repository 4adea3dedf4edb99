"""A results.db for the report tests, written only through ResultsDB: two
hosts, two scans of one host on two dates and hwtune versions (4 thread
counts, so curves saturate), and one tuned model with its trials, tuned
config, op costs and a profiled run's trace, as tune-graph stores them."""

import contextlib
from datetime import datetime, timedelta, timezone

import pytest

from hwtune.db import ResultsDB
from hwtune.db import store

GRAPH = {"name": "tiny_cnn", "ops": [
    {"name": "conv1", "op": "conv2d"}, {"name": "relu1", "op": "relu"},
    {"name": "conv2", "op": "conv2d"}, {"name": "pool", "op": "maxpool"},
    {"name": "fc", "op": "matmul"}, {"name": "softmax", "op": "softmax"}]}
CONV_KEY = 'conv2d|[1,16,32,32];[32,16,3,3]|{"pad":1}'
# GEMM GFLOPS at 1..4 threads: +90%, +32%, +4% -> saturates at 3 threads.
GEMM = (100.0, 190.0, 250.0, 260.0)
BLAS = (90.0, 170.0, 240.0, 300.0)
MUL = (6.0, 11.0, 11.5, 11.6)  # saturates at 2: nothing later gains 10%
TUNED_TRIALS = [5.0e-3, 4.0e-3, None, 4.4e-3, 3.1e-3, 3.3e-3, 3.0e-3]  # None: an error trial
CONV_TRIALS = [1.2e-3, 0.9e-3, 1.0e-3, 0.7e-3, 0.8e-3]
OP_COST = {"conv1": 1.1e-3, "relu1": 0.1e-3, "conv2": 0.9e-3, "pool": 0.2e-3,
           "fc": 0.6e-3, "softmax": 0.05e-3}


def fingerprint(model: str, cores: int) -> dict:
    return {"fingerprint_version": 1, "arch": "x86_64", "vendor": "intel",
            "cpu_model": model, "family": 6, "model": 85, "stepping": 7,
            "isa": {"avx2": True, "avx512f": True, "fma": True},
            "kernel_variants": ["generic", "avx2", "avx512"], "isa_best": "avx512",
            "sockets": 1, "physical_cores": cores, "threads_per_core": 1,
            "logical_cpus": cores, "numa_nodes": 1, "affinity_size": cores,
            "usable_cpus": cores, "cpu_quota": None,
            "caches": {"L2": {"size_bytes": 1 << 20, "groups": None},
                       "L3": {"size_bytes": 36 << 20, "groups": None}}}


@contextlib.contextmanager
def clock(start: str):
    """Stored timestamps from `start` on, one second per write: runs land
    on chosen dates, as weeks of real use would leave them."""
    t = [datetime.fromisoformat(start).replace(tzinfo=timezone.utc)]

    def now():
        t[0] += timedelta(seconds=1)
        return t[0].strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    saved = store.utc_now
    store.utc_now = now
    try:
        yield
    finally:
        store.utc_now = saved


def _m(db, run, bench, op, variant, threads, value, unit, params=None, executors=1,
       pinned=True):
    db.add_measurement(run, bench=bench, op=op, params=params or {}, kernel_variant=variant,
                       threads=threads, executors=executors, pinned=pinned,
                       samples=[1e-3] * 5, median_s=1e-3, mad_s=1e-5, rel_spread=0.01,
                       value=value, unit=unit)


def add_scan(db, host, scale=1.0, version=None):
    run = db.start_run(host, "scan", {"threads": [1, 2, 3, 4]})
    if version:  # an older hwtune wrote this run
        db._conn.execute("UPDATE runs SET hwtune_version = ? WHERE run_id = ?", [version, run])
    for t in range(1, 5):
        _m(db, run, "fma_peak", "fma", "avx512", t, 150.0 * t * scale, "GFLOPS")
        _m(db, run, "triad", "triad", "avx512", t, 10.0 * min(t, 2) * scale, "GB/s",
           {"where": "dram", "n": 12495530})
        g = {"M": 64, "K": 512, "N": 512}
        _m(db, run, "gemm", "gemm", "avx512", t, GEMM[t - 1] * scale, "GFLOPS", g)
        _m(db, run, "gemm", "gemm", "numpy-blas", t, BLAS[t - 1] * scale, "GFLOPS", g,
           pinned=None)
        _m(db, run, "eltwise", "mul", "avx512", t, MUL[t - 1] * scale, "GFLOPS", {"n": 32768})
        _m(db, run, "eltwise", "relu", "avx512", t, 7.5 * t ** 0.5 * scale, "Gelem/s",
           {"n": 32768})
    for k, t in ((1, 1), (1, 2), (2, 1), (1, 4), (2, 2), (4, 1)):
        for pinned, gain in ((True, 1.08 if k > 1 else 1.0), (False, 1.0)):
            v = GEMM[t - 1] * k * 0.95 * gain * scale
            _m(db, run, "corun", "gemm", "avx512", t, v, "GFLOPS",
               {"M": 64, "K": 512, "N": 512, "team_gflops": [round(v / k, 3)] * k},
               executors=k, pinned=pinned)
    for key, value in (("selected_isa", "avx512"), ("blas", "openblas 0.3 (SkylakeX)"),
                       ("saturation", 0.1)):
        db.add_fact(run, key, value)
    db.finish_run(run, "complete")
    return run


# As tune-graph records --storage: without its password.
STORAGE = "postgresql://tuner:***@db-host/hwtune"


def add_tuning(db, host, tuned_s=3.0e-3, default_s=4.5e-3):
    gh = db.put_graph(GRAPH)
    run = db.start_run(host, "tune", {"model": "configs/models/tiny_cnn.json",
                                      "graph_hash": gh, "search": "optuna", "reps": 5,
                                      "budget_s": 60.0, "only": [], "trials": None,
                                      "storage": STORAGE})
    for i, s in enumerate(TUNED_TRIALS):
        db.add_trial(run, host, tuner="executor_sweep", search="grid", subject=gh,
                     isa="avx512", threads=4, params={"executors": 1 + i % 4, "i": i},
                     status="ok" if s else "error", median_s=s, mad_s=s and s * 0.01,
                     samples=[s] * 3 if s else [], note=None if s else "refused")
    for i, s in enumerate(CONV_TRIALS):
        db.add_trial(run, host, tuner="conv_template", search="random", subject=CONV_KEY,
                     isa="avx512", threads=2, params={"oc_bn": 8 * (i + 1)}, status="ok",
                     median_s=s, mad_s=s * 0.02, samples=[s] * 3)
    tuned = {"executors": 2, "threads": 2, "scheduler": "critical-path", "pin": True,
             "op_threads": {"relu1": 1}, "op_params": {"conv1": {"oc_bn": 32}},
             "op_priority": {}}
    db.put_engine_config(host, gh, executors=2, threads_per_executor=2,
                         scheduler="critical-path", pin=True, op_threads={"relu1": 1},
                         op_params={"conv1": {"oc_bn": 32}}, op_cost=OP_COST, source="tuned")
    default = {"executors": 1, "threads": 4, "scheduler": "sequential", "pin": False,
               "op_threads": {}, "op_params": {}, "op_priority": {}}
    db.add_fact(run, "tune_summary", {
        "model": "tiny_cnn", "graph_hash": gh,
        "default": {"config": default, "median_s": default_s, "mad_s": 4e-5},
        "tuned": {"config": tuned, "median_s": tuned_s, "mad_s": 3e-5, "label": "tuned"},
        "candidates": [{"label": "default", "median_s": default_s, "mad_s": 4e-5},
                       {"label": "sweep", "median_s": 3.4e-3, "mad_s": 3e-5},
                       {"label": "tuned", "median_s": tuned_s, "mad_s": 3e-5}],
        "speedup": default_s / tuned_s, "why": ["sweep: 2 executors x 2 threads won",
                                                 "final: 'tuned' was fastest of 3"],
        "tuning_s": 42.0,
        "stages": {"sweep": {"seconds": 20.0, "trials": 7, "measured": 6, "reused": 0},
                   "conv": {"seconds": 15.0, "trials": 5, "measured": 5, "reused": 0}}})
    db.finish_run(run, "complete")
    # A profiled `hwtune run` with the tuned config: two executors.
    prof = db.start_run(host, "run", {"model": "tiny_cnn", "graph_hash": gh, "config": tuned,
                                      "config_source": "tuned"})
    t0 = 100.0
    events = [("conv1", "conv2d", 0, 2, 0.0, 1.1e-3), ("conv2", "conv2d", 1, 2, 0.0, 0.9e-3),
              ("relu1", "relu", 0, 1, 1.1e-3, 1.2e-3), ("pool", "maxpool", 1, 2, 1.2e-3, 1.4e-3),
              ("fc", "matmul", 0, 2, 1.4e-3, 2.0e-3), ("softmax", "softmax", 0, 2, 2.0e-3,
                                                       2.05e-3)]
    db.add_trace(prof, 0, [dict(op_name=n, op_type=o, executor=e, threads=th,
                                start_s=t0 + s, end_s=t0 + f) for n, o, e, th, s, f in events])
    db.finish_run(prof, "complete")
    return run, gh


def build(path) -> dict:
    """Populate a results.db at path; returns the host keys."""
    with ResultsDB.open(path) as db:
        with clock("2026-10-01T09:00:00"):
            a = db.upsert_host(fingerprint("Fixture Xeon A", 4))
            add_scan(db, a, scale=0.8, version="0.0.9")
        with clock("2026-11-20T09:00:00"):
            add_scan(db, a, scale=1.0)
            add_tuning(db, a)
        with clock("2026-11-20T12:00:00"):
            b = db.upsert_host(fingerprint("Fixture Epyc B", 4))
            add_scan(db, b, scale=1.25)
            add_tuning(db, b, tuned_s=2.0e-3, default_s=4.0e-3)
    return {"a": a, "b": b}


@pytest.fixture(scope="module")
def fixture_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "results.db"
    return path, build(path)


def test_fixture_holds_what_the_report_reads(fixture_db):
    path, hosts = fixture_db
    with ResultsDB.open(path) as db:
        runs = [db.run(i) for i in range(1, 8)]
        assert [r["kind"] for r in runs] == ["scan", "scan", "tune", "run", "scan", "tune", "run"]
        assert runs[0]["started_at"].startswith("2026-10-01")
        assert runs[0]["hwtune_version"] == "0.0.9"
        assert len(db.trials(run_id=3)) == len(TUNED_TRIALS) + len(CONV_TRIALS)
        assert db.engine_config(hosts["a"], runs[2]["options"]["graph_hash"], "tuned")
        assert len(db.trace(4)) == 6
