"""Plan inputs without measuring: a host and a target described by the
bundled TOML files, a small graph, given 1-thread op times and overheads.
Everything downstream (cost model, simulation, search, documents) is the
real code; only the measured inputs are given."""

import numpy as np

from hwtune.graph import load_model
from hwtune.planner import costmodel
from hwtune.planner.calibrate import Calibration
from hwtune.planner.machine import bundled, from_toml
from hwtune.planner.opdata import op_data
from hwtune.planner.search import Predictor
from hwtune.sources import bundled_models

# Overheads of the order this 2-core VM measured (calibrate.py): 10 ns
# inline, ~1 us per dispatch, 25-50 ns per serial decision, 10-30 us a run.
CALIBRATION = Calibration(
    forkjoin={2: 3e-7}, forkjoin_pool={2: 2e-7},
    overheads={"sequential": {"inline_s": 1e-8, "dispatch_s": 0.0, "section_s": 0.0},
               "shared-queue": {"inline_s": 1e-8, "dispatch_s": 1e-6, "section_s": 5e-8},
               "critical-path": {"inline_s": 1e-8, "dispatch_s": 8e-7, "section_s": 2.5e-8},
               "corun": {"inline_s": 1e-8, "dispatch_s": 1.2e-6, "section_s": 4e-8}},
    run_s={"sequential": {1: 1.5e-5}, "shared-queue": {1: 5e-6, 2: 3e-5},
           "critical-path": {1: 1.5e-5, 2: 4e-5}, "corun": {1: 1.5e-5, 2: 4e-5}},
    add_s=5e-8)

FITS = {"matmul": costmodel.SerialFit("matmul", 0.1, 2, 0.01, 0.02, "given"),
        "mul": costmodel.SerialFit("mul", 0.2, 1, 0.0, 0.0, "given")}


def machine(name):
    return from_toml(str(bundled()[name]))


def predictor(model="lstm_small", target="epyc-7763", host="ryzen-9-5950x", seed=0):
    """A Predictor with 1-thread times drawn from the ops' FLOPs at 20 GFLOPS
    plus 1 us (deterministic)."""
    g = load_model(str(bundled_models()[model]))
    ops = op_data(g)
    t1 = np.array([d.flops / 20e9 + 1e-6 for d in ops])
    h, t = machine(host), machine(target)
    return Predictor(graph=g, ops=ops, t1=t1, model=costmodel.CostModel(h, t, FITS),
                     calibration=CALIBRATION, host=h)


def plan_doc(cores=(8, 16)):
    from hwtune.native import sched
    from hwtune.planner import search
    p = predictor()
    try:
        results = search.plan(p, list(cores), list(sched.schedulers().values()))
    finally:
        p.close()
    return {"model": "lstm-small", "graph_hash": "00c86f44", "ops": 1040, "db": "r.db",
            "run_id": 1, "mode": "predict",
            "host": {"host_key": "h", "cpu_model": "Test CPU", "isa": "avx2", "cores": 2,
                     "load_1min": 0.5},
            "machine": p.target.to_json(), "fit_data": "all",
            "fits": [f.to_json() for f in FITS.values()], "calibration": CALIBRATION.to_json(),
            "cores": results,
            "chart": {k: [[c, s] for c, s in v]
                      for k, v in search.chart_series(results).items()},
            "speedup_vs_sequential": [
                r["schedulers"]["sequential"]["best"]["latency_s"] / r["best"]["latency_s"]
                for r in results]}


def validation_doc():
    from hwtune.planner.validate import summary
    rows = [{"scheduler": "sequential", "executors": 1, "threads": 1, "predicted_s": 0.021,
             "measured_s": 0.022, "mad_s": 0.0004, "rel_error": -1 / 22, "status": "ok",
             "note": None, "samples": [0.022] * 3},
            {"scheduler": "critical-path", "executors": 2, "threads": 1, "predicted_s": 0.012,
             "measured_s": None, "mad_s": None, "rel_error": None, "status": "error",
             "note": "refused", "samples": []}]
    doc = dict(plan_doc(), mode="validate")
    doc.pop("cores")
    doc["validation"] = {"rows": rows, "summary": summary(rows)}
    return doc
