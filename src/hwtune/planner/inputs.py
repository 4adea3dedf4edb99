"""Assembling a Predictor for one model: this host's figures (scan,
calibration, 1-thread op profiles, measured now when missing), the fitted
serial fractions, and the machine to predict for.

Without --machine the machine is this host's CPU with more cores, as a
bigger instance of the same cloud machine type gives: each core computes
and reaches its caches as here, and memory bandwidth grows with the cores
at this host's all-core figure per core."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from hwtune.errors import UsageError
from hwtune.planner import costmodel
from hwtune.planner.calibrate import (CALIBRATION_VERSION, Calibration, calibrate, profile_1t,
                                      whole_run_s)
from hwtune.planner.machine import Machine, from_toml, host_machine, resolve, scan_figures
from hwtune.planner.opdata import op_data
from hwtune.planner.search import Predictor

CALIBRATION_FACT = "plan_calibration"
# A fork-join region's join scans one cache line per thread: past the thread
# counts measured here each extra thread adds about one core-to-core line
# transfer. 30 ns: the published core-to-core latency of Zen 3 within a CCX
# (20-30 ns, e.g. chips and cheese / AnandTech measurements of the EPYC 7003
# series), the CPU family of the machine these figures were measured on; not
# measured by hwtune itself.
FORKJOIN_LINE_S = 30e-9
# A host measured on one core has no 2-thread region to extend: the pool's
# region (engine/threads/pool.c) moves two lines between the cores, the
# fork's generation word to the worker (chan_fork / chan_wait) and the
# worker's done word back (chan_join), so it starts at two transfers, not
# one. Still a bare-metal figure: this 2-vCPU Zen 4 VM's empty region
# measured 0.18-0.19 us (under load), as the Zen 3 VM's 0.27-0.32 us did
# against 2 x 20-30 ns: a VM's vCPU pair is not described by it
# (bench_plan.py parts --from-cores 1 shows the gap).
REGION_LINES = 2

Progress = Callable[[str], None]


def _quiet(message: str) -> None:
    pass


def stored_calibration(db, host_key: str) -> Optional[Calibration]:
    for run in reversed(db.runs(host_key, "plan")):
        facts = db.facts(run["run_id"])
        if CALIBRATION_FACT in facts:
            cal = Calibration.from_json(facts[CALIBRATION_FACT])
            # an older method's figures: measure again
            return cal if cal.version == CALIBRATION_VERSION else None
    return None


def host_calibration(db, host_key: str, run_id: int, cores: int, *, fresh: bool,
                     progress: Progress) -> Calibration:
    cal = None if fresh else stored_calibration(db, host_key)
    if cal is None:
        cal = calibrate(cores, progress)
        db.add_fact(run_id, CALIBRATION_FACT, cal.to_json())
    return cal


WHOLE_RUN_FACT = "plan_whole_run_1t"


def one_thread_times(db, host_key: str, graph, ops, *, fresh: bool,
                     progress: Progress, run_id: Optional[int] = None) -> Dict[str, float]:
    """workload -> 1-thread seconds: stored op profiles (1 executor x 1
    thread), or profiled now (and stored) when any is missing or fresh;
    then (with run_id) the model's plain whole 1-thread run timed in the
    profile's warm-up is stored with the run (WHOLE_RUN_FACT)."""
    t1: Dict[str, float] = {}
    ops = [d for d in ops if not d.folded]  # never run: no profile
    if not fresh:
        for d in ops:
            if d.workload not in t1:
                row = db.op_profile(host_key, d.workload, threads=1, executors=1)
                if row and row["median_s"]:
                    t1[d.workload] = row["median_s"]
    if fresh or any(d.workload not in t1 for d in ops):
        plain: List[float] = []
        t1 = profile_1t(graph, progress=progress, plain=plain)
        types = {d.workload: d.type for d in ops}
        for wk, s in t1.items():
            db.add_op_profile(host_key, wk, types[wk], threads=1, executors=1, median_s=s,
                              mad_s=None, n=1)
        whole = whole_run_s(plain)
        if run_id is not None and whole:
            db.add_fact(run_id, WHOLE_RUN_FACT, {"ops": [d.name for d in ops],
                                                 "median_s": whole, "runs": len(plain)})
    return t1


def stored_whole_run(db, host_key: str, ops, run_id: Optional[int] = None) -> Optional[float]:
    """The latest plain whole 1-thread run of this graph (its ops' names) on
    this host (WHOLE_RUN_FACT): run_id's own (still running), else the
    latest finished plan run's; seconds, None when none is stored."""
    names = [d.name for d in ops if not d.folded]
    ids = ([run_id] if run_id is not None else []) + [
        r["run_id"] for r in reversed(db.runs(host_key, "plan"))]
    for rid in ids:
        got = db.facts(rid).get(WHOLE_RUN_FACT)
        if got and got.get("ops") == names and got.get("median_s"):
            return float(got["median_s"])
    return None


# The whole run is charged per op only when it lies this far from the
# simulated one: the run-to-run spread of the 1x1 rows in the
# validations here was 1-3% (MAD over median; lstm_small --from-cores 1
# under load ~2, 2-vCPU AMD EPYC Zen 4), a gap inside it is not told
# apart from none.
RUN_GAP_MIN = 0.03


def run_gap(p: Predictor, host_p: Predictor, whole_s: Optional[float]) -> dict:
    """Per op that runs, the seconds a plain whole 1-thread run of the
    model (whole_s, measured on the inputs' cores) takes beyond the
    simulated sequential 1x1 of the same inputs on this host (host_p: its
    target is the host): time between and around ops that neither the
    per-op profiles (their ops' own spans, summed to the profiled runs'
    op totals) nor the calibrated dispatch costs hold. Charged to every
    op at every thread count (p.run_gap_s, times the target's
    overheads.scale): the executor's own time, which a team does not
    split. Signed; 0 within RUN_GAP_MIN of the simulated run."""
    from hwtune.native import sched
    seq = sched.schedulers()["sequential"]
    simulated, _ = host_p.simulate(seq, 1, 1)
    n = sum(1 for d in p.ops if not d.folded)
    out = {"measured_s": whole_s, "simulated_s": float(simulated), "gap_per_op_s": 0.0,
           "ops": n}
    if whole_s and simulated > 0 and n and abs(whole_s / simulated - 1) > RUN_GAP_MIN:
        out["gap_per_op_s"] = (whole_s - simulated) / n
    p.run_gap_s = out["gap_per_op_s"] * p.target.overhead_scale
    return out


ORDER_FACT = "plan_order_scales"


def order_scales(db, host_key: str, run_id: int, p: Predictor, graph_hash: str, rows, *,
                 fresh: bool, progress: Progress) -> Dict[str, np.ndarray]:
    """Per scheduler that runs ops out of the plan's order, per op, its
    1-thread time in that order over the sequential order's
    (calibrate.order_scales): the latest stored for this graph and host,
    else (or when `fresh`) profiled now and stored with this run. `plan`
    and `plan --validate` take them the same way: they are 1-thread
    profiles of the model, one of the stored inputs both predict from."""
    names = [d.name for d in p.ops]
    if not fresh:
        for run in reversed(db.runs(host_key, "plan")):
            got = db.facts(run["run_id"]).get(ORDER_FACT)
            if got and got.get("graph_hash") == graph_hash and got.get("ops") == names:
                return {k: np.asarray(v, dtype=np.float64) for k, v in got["scales"].items()}
    from hwtune.planner.calibrate import order_scales as profile_orders
    out = profile_orders(p.graph, p.ops, rows, lambda row: p.op_cost(row, 1, 1), progress)
    db.add_fact(run_id, ORDER_FACT, {"graph_hash": graph_hash, "ops": names,
                                     "scales": {k: [float(x) for x in v]
                                                for k, v in out.items()}})
    return out


def multi_thread_times(db, host_key: str, ops, max_threads: int) -> Dict[str, Dict[int, float]]:
    """workload -> {threads: seconds} of stored 2+ thread profiles."""
    out: Dict[str, Dict[int, float]] = {}
    for wk in {d.workload for d in ops}:
        for t in range(2, max_threads + 1):
            row = db.op_profile(host_key, wk, threads=t, executors=1)
            if row and row["median_s"]:
                out.setdefault(wk, {})[t] = row["median_s"]
    return out


def _per_core_past(curve, cores: int) -> tuple:
    """A cache-bandwidth curve ([n] GB/s) up to `cores`: past its last
    count, that count's rate per core (each core brings its cache's share)."""
    out = list(curve)
    if len(out) > 1:
        out += [curve[-1] / (len(curve) - 1) * n for n in range(len(out), cores + 1)]
    return tuple(out)


def scaled_host(host: Machine, cores: int) -> Machine:
    """This host's CPU with `cores` cores (see the module's docstring)."""
    if cores <= host.cores:
        return host
    per_core_all = host.dram_gbs[-1] / host.cores
    dram = list(host.dram_gbs) + [max(host.dram_gbs[-1], per_core_all * n)
                                  for n in range(host.cores + 1, cores + 1)]
    l2, l3 = _per_core_past(host.l2_gbs, cores), _per_core_past(host.l3_gbs, cores)
    l3_read = _per_core_past(host.l3_read_gbs, cores)
    fj = list(host.forkjoin_s)
    if len(fj) == 2 and cores >= 2:
        fj.append(REGION_LINES * FORKJOIN_LINE_S)
    while len(fj) <= cores:
        fj.append(fj[-1] + FORKJOIN_LINE_S)
    # The last-level cache stays as seen here: a VM's L3 is the one its CPU
    # complex shares, and one op's data competes for one complex's L3.
    return replace(host, name=f"{host.name.split(' (')[0]} scaled to {cores} cores",
                   cores=cores, dram_gbs=tuple(dram), l2_gbs=l2, l3_gbs=l3,
                   l3_read_gbs=l3_read, forkjoin_s=tuple(fj),
                   source=host.source + "; more cores: same per-core figures, memory bandwidth "
                   "per core at this host's all-core figure",
                   notes=host.notes + ("a bigger instance of this host's CPU: per-core compute "
                                       "and caches as measured here, memory bandwidth growing "
                                       "with the cores (a real socket saturates: describe it "
                                       "with --machine)",))


def engine_graph(graph):
    """The graph the engine runs for a config without tuned CONV knobs
    (what `hwtune run` runs with no stored config): batch norms folded into
    their CONVs, residual adds and ReLUs fused into them. Profiling and
    simulating the model as written would time ops that never run (ResNet-18:
    20 batch norms, 17 ReLUs, 8 adds) and miss the fused CONVs' own times."""
    from hwtune.engine.config import EngineConfig
    from hwtune.engine.effective import effective_graph
    return effective_graph(graph, EngineConfig())


def build(db, host_key: str, fp: dict, graph, *, run_id: int, machine: Optional[str] = None,
          max_cores: Optional[int] = None, data: str = "scan", fresh: bool = False,
          fresh_profiles: bool = False, progress: Optional[Progress] = None) -> Tuple[Predictor, List[costmodel.SerialFit]]:
    """The Predictor of graph on the machine (this host scaled to max_cores
    without one), and the fits it uses. data 'scan' (what `hwtune plan`
    and its validation use): serial fractions from the scan's
    micro-benchmarks only, nothing of the model but its 1-thread profiles;
    'all' adds stored multi-thread op profiles (tune-graph's) to the fits.
    fresh: calibrate and profile again; fresh_profiles: profile again."""
    from hwtune.native.isa import selected_isa
    progress = progress or _quiet
    isa = selected_isa()
    figs = scan_figures(db, host_key, isa)
    cores_here = int(fp.get("usable_cpus") or 1)
    cal = host_calibration(db, host_key, run_id, cores_here, fresh=fresh, progress=progress)
    ops = op_data(graph)
    t1w = one_thread_times(db, host_key, graph, ops, fresh=fresh or fresh_profiles,
                           progress=progress, run_id=run_id)
    extra = []
    if data == "all":
        extra = costmodel.profile_points(ops, t1w, multi_thread_times(db, host_key, ops,
                                                                       cores_here))
    target = from_toml(resolve(machine)) if machine is not None else None
    t1 = t1_array(ops, t1w)
    p, fits = assemble(fp, figs, cal, graph, ops, t1, extra_points=extra, target=target,
                       max_cores=max_cores)
    db.put_cost_params(host_key, run_id, data, [f.to_json() for f in fits.values()])
    host_p, _ = assemble(fp, figs, cal, graph, ops, t1, extra_points=extra)
    try:
        p.whole_run = run_gap(p, host_p, stored_whole_run(db, host_key, ops, run_id))
    except BaseException:
        p.close()
        raise
    finally:
        host_p.close()
    return p, list(fits.values())


def t1_array(ops, t1w: Dict[str, float], fallback: Optional[np.ndarray] = None) -> np.ndarray:
    """Per op (ops order) its 1-thread seconds from t1w (workload ->
    seconds): 0 for a folded op; an op t1w lacks takes fallback's value."""
    return np.array([0.0 if d.folded else
                     t1w[d.workload] if d.workload in t1w or fallback is None else
                     float(fallback[i]) for i, d in enumerate(ops)])


def assemble(fp: dict, figs, cal: Calibration, graph, ops, t1: np.ndarray, *,
             extra_points=(), target: Optional[Machine] = None,
             max_cores: Optional[int] = None, order: Optional[Dict[str, np.ndarray]] = None
             ) -> Tuple[Predictor, Dict[str, costmodel.SerialFit]]:
    """The Predictor from this host's figures (scan figs, calibration cal)
    and the model's 1-thread times t1, with the serial fractions fitted to
    the scan's scaling rows (and extra_points); the target is this host
    scaled to max_cores unless given."""
    host = host_machine(fp, figs, cal.forkjoin)
    points = costmodel.scan_points(figs) + list(extra_points)
    fits = costmodel.fit_serial(host, points, cal.forkjoin_pool)
    target = target or scaled_host(host, max_cores or host.cores)
    p = Predictor(graph=graph, ops=ops, t1=t1, model=costmodel.CostModel(host, target, fits),
                  calibration=cal, host=host, scan=figs, order=dict(order or {}))
    return p, fits


def check_target_cores(target: Machine, cores) -> None:
    over = [c for c in cores if c > target.cores]
    if over:
        raise UsageError(f"invalid --cores {over[0]}: {target.name} has {target.cores} usable "
                         f"cores")
