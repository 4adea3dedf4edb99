"""Each part of the cost model (costmodel.py) checked on its own
micro-benchmark, so that a bad total shows which part is wrong: the part's
prediction from the stored scan and calibration against a measurement it
was not fitted to. No figure here is tuned to any result.

  compute   a compute-bound GEMM on one thread under each other ISA this
            CPU runs, predicted from its time under the selected ISA and
            the FMA peaks (the cost model's compute part scales with the
            per-core peak: c * peak_here / peak_there)
  memory    an element-wise add out of cache and in L2 on 1..cores
            threads, predicted as its bytes over the scan's triad curve
            for that many threads (memory_time) plus the pool's fork-join
  forkjoin  a tiny add (its work ~100 ns) on 2..cores threads, predicted
            as its 1-thread time split plus the calibrated empty region
  serial    per fitted op type, a shape the scan did not time (a GEMM of
            other sizes, each scan element-wise op at 4x its size) on
            2..cores threads, predicted from its 1-thread time by the
            type's fitted serial fraction (CostModel.table)

Every prediction is of a bare call of the kernels' benchmark loop, so the
fork-join is the pool's empty region (Calibration.forkjoin_pool), as
fit_serial charges the scan's points."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional

import numpy as np

from hwtune.planner import costmodel
from hwtune.planner.machine import Machine, gemm_bytes

# Samples per micro-benchmark (its median is the figure) and untimed calls.
REPS = 15
WARMUP = 5
# The compute check's GEMM: 2 x 256 x 512 x 512 = 134 MFLOP on 1.5 MiB, ~1 ms
# at 100 GFLOPS: its time is the FMAs', its bytes a few us at L3 rates.
COMPUTE_GEMM = (256, 512, 512)
# Out of cache: 3 x 4 x 8 Mi floats = 96 MiB (past a 32 MiB L3); in L2:
# 3 x 4 x 16 Ki = 192 KiB (a 1 MiB L2 and a 512 KiB one).
MEMORY_N = {"dram": 8 << 20, "l2": 16 << 10}
FORKJOIN_N = 256
# Held-out GEMM shapes: a GEMV-like one and a blocked one, neither the
# scan's default shapes (64x512x512, 1x256x1024, 1x1024x4096).
SERIAL_GEMMS = ((1, 512, 2048), (128, 512, 1024))
SERIAL_ELT_SCALE = 4
_OPERANDS = {"mul": 3, "add": 3, "fma": 4, "sigmoid": 2, "tanh": 2, "relu": 2}


@dataclass
class Check:
    part: str          # compute, memory, forkjoin, serial
    bench: str         # the micro-benchmark
    threads: int
    predicted_s: float
    measured_s: float

    @property
    def error(self) -> float:
        return (self.predicted_s - self.measured_s) / self.measured_s

    def to_json(self) -> dict:
        return dict(self.__dict__, error=self.error)


def _median(xs) -> float:
    return float(np.median(np.asarray(xs, dtype=np.float64)))


def check_compute(pool, host: Machine, isas: List[str], selected: str,
                  peak: Callable[[str], float]) -> List[Check]:
    """The GEMM on one thread under `selected`, then under every other ISA
    in isas: predicted as compute * peak(selected) / peak(other) plus the
    same memory part."""
    from hwtune.native import bench
    M, K, N = COMPUTE_GEMM
    nb = gemm_bytes(M, K, N)
    here = _median(bench.gemm_samples(pool, 1, M, K, N, isa=selected, warmup=WARMUP, reps=REPS))
    c1, m1 = costmodel.split_here(host, np.array([here]), np.array([nb]))
    p_here = peak(selected)
    out = []
    for isa in isas:
        if isa == selected:
            continue
        got = _median(bench.gemm_samples(pool, 1, M, K, N, isa=isa, warmup=WARMUP, reps=REPS))
        pred = float(c1[0]) * p_here / peak(isa) + float(m1[0])
        out.append(Check("compute", f"gemm {M}x{K}x{N} {selected} -> {isa}", 1, pred, got))
    return out


def check_memory(pool, host: Machine, cores: int, pool_fj: dict) -> List[Check]:
    from hwtune.native import bench
    out = []
    for where, n in MEMORY_N.items():
        nb = 4 * n * _OPERANDS["add"]
        lvl = {"dram": costmodel.DRAM, "l2": costmodel.L2}[where]
        for t in range(1, cores + 1):
            got = _median(bench.eltwise_samples(pool, t, "add", n, warmup=WARMUP, reps=REPS))
            pred = float(costmodel.memory_time(host, np.array([nb]), t, np.array([lvl]))[0])
            pred += pool_fj.get(t, 0.0) if t > 1 else 0.0
            out.append(Check("memory", f"add n={n} ({where})", t, pred, got))
    return out


def check_forkjoin(pool, cores: int, pool_fj: dict) -> List[Check]:
    from hwtune.native import bench
    out = []
    one = _median(bench.eltwise_samples(pool, 1, "add", FORKJOIN_N, warmup=WARMUP, reps=REPS,
                                        inner=100))
    for t in range(2, cores + 1):
        got = _median(bench.eltwise_samples(pool, t, "add", FORKJOIN_N, warmup=WARMUP,
                                            reps=REPS, inner=100))
        out.append(Check("forkjoin", f"add n={FORKJOIN_N}", t, one / t + pool_fj.get(t, 0.0),
                         got))
    return out


def check_serial(pool, host: Machine, cores: int, fits: dict, elt_ops, elt_n: int,
                 target: Optional[Machine] = None) -> List[Check]:
    """Held-out shapes predicted from their own 1-thread time by the fits,
    on target (this host scaled, from fewer CPUs' inputs; default host)."""
    from hwtune.native import bench
    from hwtune.planner.opdata import GEMV_FAMILY, GEMV_MAX_M
    model = costmodel.CostModel(host, target or host, fits)
    out = []
    cases = []
    for M, K, N in SERIAL_GEMMS:
        kind = GEMV_FAMILY if M <= GEMV_MAX_M else costmodel.GEMM_FAMILY
        cases.append((f"gemm {M}x{K}x{N} ({kind})", kind, gemm_bytes(M, K, N), 2.0 * M * K * N,
                      lambda t, M=M, K=K, N=N: bench.gemm_samples(pool, t, M, K, N,
                                                                  warmup=WARMUP, reps=REPS)))
    for op in elt_ops:
        n = elt_n * SERIAL_ELT_SCALE
        cases.append((f"{op} n={n}", op, 4 * n * _OPERANDS.get(op, 3), float(n),
                      lambda t, op=op, n=n: bench.eltwise_samples(pool, t, op, n,
                                                                  warmup=WARMUP, reps=REPS)))
    for label, kind, nb, flops, run in cases:
        one = _median(run(1))
        table = model.table([one], [nb], [kind], cores, flops=[flops])
        for t in range(2, cores + 1):
            got = _median(run(t))
            s = model.serial_fraction(kind, flops / nb, nb, flops)
            out.append(Check("serial", f"{label}, s={s:.3f}", t,
                             float(table.seconds[0, t - 1]), got))
    return out


def run_all(db, host_key: str, fp: dict, *, progress=None,
            from_cores: Optional[int] = None) -> List[Check]:
    """Every part's checks on this host, from its stored scan and plan
    calibration (calibrated now when none is stored). from_cores K: from a
    quick scan and a calibration taken on K of its CPUs instead (a scratch
    database, fromcores.scratch_scan), this host's CPU scaled to all of
    them as `hwtune plan --validate --from-cores K` predicts it
    (inputs.scaled_host): each part's error on thread counts its inputs
    never saw."""
    from hwtune.native.isa import selected_isa
    from hwtune.planner.inputs import host_calibration
    from hwtune.planner.machine import scan_figures
    progress = progress or (lambda m: None)
    isa = selected_isa()
    cores = int(fp.get("usable_cpus") or 1)
    if from_cores is not None and from_cores < cores:
        from hwtune.planner.fromcores import scratch_scan
        with scratch_scan(from_cores, progress=progress, host_cores=cores) as (sdb, shk, sfp, _):
            figs = scan_figures(sdb, shk, isa)
            run = sdb.start_run(shk, "plan", {"partcheck": True, "from_cores": from_cores})
            cal = host_calibration(sdb, shk, run, from_cores, fresh=True, progress=progress)
            sdb.finish_run(run, "complete")
        return checks_from(figs, cal, sfp, cores, isa, progress)
    figs = scan_figures(db, host_key, isa)
    run = db.start_run(host_key, "plan", {"partcheck": True})
    cal = host_calibration(db, host_key, run, cores, fresh=False, progress=progress)
    db.finish_run(run, "complete")
    return checks_from(figs, cal, fp, cores, isa, progress)


def checks_from(figs, cal, fp: dict, cores: int, isa: str, progress) -> List[Check]:
    """The checks on `cores` threads of this host, predicted from scan
    figures figs and calibration cal taken on fp's CPUs (fewer than cores:
    this host's CPU scaled, inputs.scaled_host)."""
    from hwtune.native import bench
    from hwtune.native.isa import supported_isas
    from hwtune.native.threads import Pool
    from hwtune.planner.inputs import scaled_host
    from hwtune.planner.machine import host_machine
    # the bare benchmark loops pay the pool's empty region (fit_serial)
    host = host_machine(fp, figs, cal.forkjoin_pool)
    fits = costmodel.fit_serial(host, costmodel.scan_points(figs), cal.forkjoin_pool)
    target = scaled_host(host, cores)
    pool_fj = {t: target.forkjoin(t) for t in range(2, cores + 1)}
    pool = Pool(executors=1, threads=cores, pin=True)
    peaks = {}

    def peak(name: str) -> float:
        if name not in peaks:
            peaks[name] = bench.fma_peak(pool, 1, isa=name, seconds=0.3)
        return peaks[name]
    try:
        progress("compute: a GEMM under each ISA")
        out = check_compute(pool, host, list(supported_isas()), isa, peak)
        progress("memory: adds out of cache and in L2")
        out += check_memory(pool, target, cores, pool_fj)
        progress("fork-join: tiny adds")
        out += check_forkjoin(pool, cores, pool_fj)
        progress("serial fractions: shapes the scan did not time")
        elt = sorted({r["op"] for r in figs.eltwise})
        n = int(next((r["n"] for r in figs.eltwise), 32768))
        out += check_serial(pool, host, cores, fits, elt, n, target=target)
    finally:
        pool.close()
    return out


def summary(checks: List[Check]) -> dict:
    """Per part: checks, median and worst |error|."""
    out = {}
    for part in ("compute", "memory", "forkjoin", "serial"):
        errs = [abs(c.error) for c in checks if c.part == part]
        out[part] = ({"checks": len(errs), "median_abs_error": float(np.median(errs)),
                      "max_abs_error": float(max(errs))} if errs else
                     {"checks": 0, "median_abs_error": None, "max_abs_error": None})
    return out
