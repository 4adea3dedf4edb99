"""Which missing input a `--from-cores K` miss comes from: every validated
configuration predicted again from the K-CPU inputs with one part of the
cost model taken from this host's own stored inputs (its scan and plan
calibration on all its CPUs, when the user's database holds them), one
part at a time:

  inter-core   what only two cores show: the fork-join of an op inside a
               run and the pool's empty region, a run's own cost and a
               dispatch on two executors, the core-to-core transfer and a
               parked executor's wake-up (plan calibration);
  bandwidth    the in-L2, in-L3, read-stream and out-of-cache rates with
               more than one busy core (scan triads, GEMV rows);
  serial       the serial fractions fitted to the scan's multi-thread
               GEMM and element-wise rows;
  all three    together: what is left is the model's own error on this
               host (the 1-thread profiles, the simulator), as a validation
               from the stored inputs on all CPUs would show it.

A row whose error shrinks when one part is filled in missed by that part
(the K-CPU inputs' stand-in for it). A diagnostic shown apart: the
reported error stays the K-CPU inputs' own, and this host's stored
figures are only as good as the moment the scan and calibration were
taken."""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Optional, Sequence

from hwtune.planner import costmodel
from hwtune.planner.calibrate import Calibration
from hwtune.planner.machine import Machine
from hwtune.planner.search import Predictor

PARTS = ("inter-core", "bandwidth", "serial", "all three")


def inter_core(cal_k: Calibration, cal_all: Calibration) -> Calibration:
    """cal_k with the figures only more than K cores measure taken from
    cal_all: fork-join (in a run and the empty region), the run's own cost
    on two executors and a dispatch between them, the core-to-core
    transfer and the wake-up (the spin before parking too: a K = 1
    calibration has no second thread to time it with)."""
    overheads = {s: dict(o, dispatch_s=cal_all.overheads.get(s, {}).get("dispatch_s",
                                                                          o.get("dispatch_s", 0.0)))
                 for s, o in cal_k.overheads.items()}
    run_s = {s: {**r, **{n: v for n, v in cal_all.run_s.get(s, {}).items() if n > 1}}
             for s, r in cal_k.run_s.items()}
    return replace(cal_k, forkjoin=dict(cal_all.forkjoin),
                   forkjoin_pool=dict(cal_all.forkjoin_pool), overheads=overheads, run_s=run_s,
                   xfer_s=cal_all.xfer_s, xfer_bps=cal_all.xfer_bps, spin_s=cal_all.spin_s,
                   wake_s=cal_all.wake_s)


def with_bandwidth(target: Machine, host_all: Machine) -> Machine:
    """target (this host's CPU scaled from K-CPU inputs) with this host's
    measured bandwidth curves."""
    return replace(target, dram_gbs=host_all.dram_gbs, l2_gbs=host_all.l2_gbs,
                   l3_gbs=host_all.l3_gbs, l3_read_gbs=host_all.l3_read_gbs)


def with_forkjoin(target: Machine, host_all: Machine) -> Machine:
    return replace(target, forkjoin_s=host_all.forkjoin_s)


def variants(p: Predictor, host_all: Machine, fits_all: Dict[str, costmodel.SerialFit],
             cal_all: Calibration) -> Dict[str, Predictor]:
    """Part name -> p with that part from this host's own inputs (host_all:
    host_machine of its scan with its calibration's in-run fork-join;
    fits_all: fit_serial of its scan; cal_all: its plan calibration)."""
    model = p.model

    def copy(target: Machine, fits, cal: Calibration) -> Predictor:
        return replace(p, model=costmodel.CostModel(model.host, target, fits), calibration=cal,
                       _sim=None, _tables={})
    return {
        "inter-core": copy(with_forkjoin(model.target, host_all), model.fits,
                           inter_core(p.calibration, cal_all)),
        "bandwidth": copy(with_bandwidth(model.target, host_all), model.fits, p.calibration),
        "serial": copy(model.target, fits_all, p.calibration),
        "all three": copy(with_bandwidth(with_forkjoin(model.target, host_all), host_all),
                          fits_all, inter_core(p.calibration, cal_all)),
    }


def predict_rows(variant_predictors: Dict[str, Predictor], rows: List[dict],
                 sched_rows: Sequence) -> None:
    """Each row (a validation row's json) gets predicted_with: part ->
    seconds of its configuration under that part's variant."""
    by_name = {r.name: r for r in sched_rows}
    for r in rows:
        row = by_name.get(r["scheduler"])
        if row is None:
            continue
        r["predicted_with"] = {
            part: vp.simulate(row, int(r["executors"]), int(r["threads"]))[0]
            for part, vp in variant_predictors.items()}


def summary(rows: Sequence[dict]) -> Dict[str, dict]:
    """Part -> the validation summary with that part filled in (median and
    worst |error| over the rows): the part whose summary falls most is the
    one the K-CPU inputs got wrong."""
    from hwtune.planner.validate import summary as base
    out = {}
    for part in PARTS:
        got = [{"predicted_s": (r.get("predicted_with") or {}).get(part),
                "measured_s": r.get("measured_s")} for r in rows]
        out[part] = base(got)
    return out


def from_db(db, host_key: str, fp: dict, isa: str) -> Optional[tuple]:
    """(host_all, fits_all, cal_all, source) from this host's stored scan
    and plan calibration; None when either is missing or the calibration
    saw one core only."""
    from hwtune.errors import UsageError
    from hwtune.planner.inputs import stored_calibration
    from hwtune.planner.machine import host_machine, scan_figures
    try:
        figs = scan_figures(db, host_key, isa)
    except UsageError:
        return None
    cal = stored_calibration(db, host_key)
    if cal is None or not cal.forkjoin:
        return None
    host = host_machine(fp, figs, cal.forkjoin)
    fits = costmodel.fit_serial(host, costmodel.scan_points(figs), cal.forkjoin_pool)
    return host, fits, cal, f"scan run {figs.run_id} and the stored plan calibration"
