"""`hwtune run` without the click layer: build the engine for a graph and a
resolved config, time warm-up + N iterations, optionally profile one more,
and store everything in results.db as it is measured."""

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hwtune.engine.config import EngineConfig
from hwtune.db.lifecycle import finishing
from hwtune.engine.trace import OpEvent, profiled_runs
from hwtune.errors import HwtuneError, NativeError, UsageError
from hwtune.measure.output_check import CHECK_TOL
from hwtune.measure.engine import EngineSide

# Above this MAD/median the latency is reported as noisy: ~2x the spread of
# repeated medians measured on the shared 2-core dev box (as hwtune scan).
NOISY = 0.05
MAX_ITERATIONS = 100_000
# Profiled runs behind each --trace: per-op medians of 5 runs were within
# ~10% of those of 21 on lstm-small on the shared dev box, at a quarter of
# the time; the trace file shows the last of them.
PROFILE_RUNS = 5
# --check's tolerance (CHECK_TOL, the measurement layer's output check),
# where the scale of an output is at least this share of the largest
# output's: a float32 result carries rounding of ~1.2e-7 (one ulp) of the
# sums it came from, and a few ulps of the graph's largest values are noise
# wherever they cancel. The transformer block of benchmarks/unseen_graphs.py
# trained one SGD step: the key bias's gradient is zero in exact arithmetic
# (softmax does not see a per-row constant), numpy gave 7e-14 and the engine
# 3.5e-13, against gradients up to ~1e-1 elsewhere: "4.9 x max|numpy|", a
# false mismatch without the floor.
ROUNDOFF_FLOOR = 1e-6


class OutputMismatch(HwtuneError):
    """--check: the engine's outputs differ from the numpy reference (a bug,
    not a usage error: exit 1)."""

    exit_code = 1


@dataclass
class RunResult:
    run_id: int
    samples: List[float]
    median_s: float
    mad_s: float
    min_s: float
    max_s: float
    rel_spread: float
    runs_per_s: float
    gflops: float
    flops: int
    events: List[OpEvent] = field(default_factory=list)
    check: Optional[Dict[str, Any]] = None
    outputs: Optional[Dict[str, Any]] = None  # with keep_outputs: name -> array

    @property
    def noisy(self) -> bool:
        return self.rel_spread > NOISY

    def to_json(self) -> Dict[str, Any]:
        return {"run_id": self.run_id,
                "latency_s": {"median": self.median_s, "mad": self.mad_s, "min": self.min_s,
                              "max": self.max_s, "rel_spread": self.rel_spread,
                              "samples": self.samples},
                "throughput": {"runs_per_s": self.runs_per_s, "gflops": self.gflops},
                "flops": self.flops, "noisy": self.noisy, "check": self.check}


def check_counts(iterations: int, warmup: int) -> None:
    if not 1 <= iterations <= MAX_ITERATIONS:
        raise UsageError(f"invalid --iterations {iterations}: expected 1..{MAX_ITERATIONS}")
    if not 0 <= warmup <= MAX_ITERATIONS:
        raise UsageError(f"invalid --warmup {warmup}: expected 0..{MAX_ITERATIONS}")


def native_engine():
    """The module of the C engine opened for a model (its NativeEngine);
    NativeError when this build lacks the binding."""
    try:
        from hwtune.engine import instance as mod
    except ImportError as exc:
        raise NativeError(f"engine not available: the C engine binding "
                          f"(hwtune.native.engine) is missing in this build ({exc})"
                          ) from None
    return mod


def open_engine(graph, cfg: EngineConfig, op_cost: Optional[Dict[str, float]] = None):
    """A prepared C engine for graph under cfg (params and inputs seeded as
    run_reference seeds them). Per-op settings of ops the fusion pass
    absorbed into a CONV are dropped: that CONV's own settings apply."""
    from hwtune.graph.passes.fuse import fused_ops
    gone = fused_ops(graph)

    def kept(table):
        return {k: v for k, v in table.items() if k not in gone} if table else None
    return native_engine().NativeEngine(
        graph, executors=cfg.executors, threads=cfg.threads,
        scheduler=cfg.scheduler, pin=cfg.pinned,
        op_threads=kept(cfg.op_threads), op_cost=kept(op_cost or cfg.op_cost),
        op_priority=kept(cfg.op_priority),
        op_candidates=kept(getattr(cfg, "op_candidates", None)))


def reference_outputs(graph, check: str = "peer"):
    """What every candidate's outputs must match. 'numpy': the numpy
    reference (hwtune run --check's oracle; 45 s for inception_small and 18 s
    for lstm_medium on this shared box, too slow for every sweep). 'peer':
    one sequential 1-thread engine run, so a scheduler that races or skips
    an op shows as a mismatch while kernel correctness stays the kernels'
    own tests' job."""
    if check == "numpy":
        from hwtune.graph import run_reference  # looked up per call, as check_outputs does
        return run_reference(graph)
    e = open_engine(graph, EngineConfig(executors=1, threads=1, scheduler="sequential"))
    try:
        e.run()
        return e.outputs()
    finally:
        e.close()


def workload_keys(graph) -> List[str]:
    from hwtune.db.keys import workload_key
    return [workload_key(op.op, [graph.shapes[n] for n in op.inputs], op.resolved or {})
            for op in graph.ops]


def _op_threads(cfg: EngineConfig, graph) -> List[int]:
    return [cfg.op_threads.get(op.name) or cfg.threads for op in graph.ops]


def profiled_costs(db, host_key: str, graph, cfg: EngineConfig) -> Optional[Dict[str, float]]:
    """Stored per-op medians for this layout, for the levels of schedulers
    that need op costs; None unless every op has one (the engine's FLOP/byte estimate and
    measured times are on different scales, so they are never mixed)."""
    costs = {}
    for op, wk, t in zip(graph.ops, workload_keys(graph), _op_threads(cfg, graph)):
        row = db.op_profile(host_key, wk, threads=t, executors=cfg.executors)
        if row is None or row["median_s"] is None:
            return None
        costs[op.name] = row["median_s"]
    return costs


def store_op_profiles(db, host_key: str, graph, cfg: EngineConfig, runs: List[List[OpEvent]],
                      config_id: Optional[int]) -> int:
    """Per workload and thread count, the median over every op instance in
    every profiled run; returns the rows stored."""
    from hwtune.measure.stats import mad, median
    keys = workload_keys(graph)
    index = {op.name: i for i, op in enumerate(graph.ops)}
    samples: Dict[tuple, List[float]] = {}
    for events in runs:
        for e in events:
            i = index[e.op_name]
            samples.setdefault((keys[i], e.op_type, e.threads), []).append(e.end_s - e.start_s)
    for (wk, op_type, threads), xs in samples.items():
        db.add_op_profile(host_key, wk, op_type, threads=threads, executors=cfg.executors,
                          median_s=median(xs), mad_s=mad(xs), n=len(xs), config_id=config_id)
    return len(samples)


def check_outputs(outputs: Dict[str, Any], graph, inputs=None) -> Dict[str, Any]:
    """Compare the engine's outputs with the numpy reference (run_reference
    seeds params and inputs the way the engine binding does; inputs given
    to the engine are given to it too)."""
    import numpy as np
    from hwtune.graph import run_reference
    ref = run_reference(graph, inputs)
    rows = []
    for name in graph.outputs:
        want = np.asarray(ref[name], dtype=np.float64)
        got = np.asarray(outputs[name], dtype=np.float64).reshape(want.shape)
        # A NaN or infinity the model computes (log of a negative, an
        # overflow) matches the same one in the reference; one on one side
        # only is a mismatch. The finite rest is compared by value.
        fin = np.isfinite(want) & np.isfinite(got)
        same = (np.isnan(got) & np.isnan(want)) | ((got == want) & ~np.isfinite(want))
        max_abs = float("inf") if not (fin | same).all() else \
            float(np.abs(got[fin] - want[fin]).max(initial=0))
        rows.append((name, max_abs, float(np.abs(want[np.isfinite(want)]).max(initial=0))))
    # An output far below the graph's largest (a gradient that is zero in
    # exact arithmetic, say) holds rounding residue, not a value to compare
    # relatively: it is measured against ROUNDOFF_FLOOR x the largest.
    floor = ROUNDOFF_FLOOR * max((r for _, _, r in rows), default=0.0)
    worst = {"output": None, "max_abs": 0.0, "max_ref": 0.0, "rel": 0.0, "floored": False}
    for name, max_abs, max_ref in rows:
        scale = max(max_ref, floor)
        rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
        if worst["output"] is None or rel > worst["rel"]:
            worst = {"output": name, "max_abs": max_abs, "max_ref": max_ref, "rel": rel,
                     "floored": max_ref < floor}
    return dict(worst, tolerance=CHECK_TOL, ok=worst["rel"] <= CHECK_TOL)


def op_costs(db, host_key: Optional[str], graph, cfg: EngineConfig,
             given: Optional[Dict[str, float]] = None) -> Optional[Dict[str, float]]:
    """The per-op seconds the engine gets: for a scheduler whose table row
    needs op costs (it orders ops by levels), the given ones, else the
    config's stored ones, else the profiled op_profiles of this host; None
    for the others (and when nothing is known)."""
    if not cfg.sched.needs_costs:
        return None
    if given or cfg.op_cost:
        return given or cfg.op_cost
    if db is None or not host_key:
        return None
    return profiled_costs(db, host_key, graph, cfg)


def arena_fact(engine, cfg: EngineConfig) -> Dict[str, Any]:
    """The tensor arena the engine planned (engine.c: a scheduler that runs
    the plan's order one op at a time reuses buffers in that order, the
    others only where no two ops can overlap): the run's peak tensor memory,
    for a training step its activations kept for the backward pass
    included. Parameters and inputs are bound, not in it."""
    reuse = "sequential" if cfg.sched.in_order else "parallel_safe"
    with_reuse, without = engine.arena_bytes()
    return {"arena_bytes": with_reuse, "arena_bytes_no_reuse": without, "reuse": reuse}


def run_model(db, host_key: str, graph, graph_hash: str, cfg: EngineConfig, *,
              iterations: int, warmup: int, trace: bool, options: Dict[str, Any],
              kernel_variant: str, config_id: Optional[int] = None, check: bool = False,
              progress=None, base_graph=None, op_cost: Optional[Dict[str, float]] = None,
              inputs: Optional[Dict[str, Any]] = None, keep_outputs: bool = False,
              min_time: Optional[float] = None) -> RunResult:
    """Time the engine on graph; one 'run' row with one 'graph' measurement.
    With trace, PROFILE_RUNS more runs are profiled: their per-op medians go
    to op_profiles (and order the next run of a scheduler that needs op
    costs), the last run's
    events to run_traces. graph is what runs (a config's layout rewrites
    applied); base_graph, when given, is the model graph_hash names.
    op_cost: the config's stored per-op costs (else profiled op_profiles).
    inputs: name -> array replacing seeded inputs; keep_outputs: return the
    outputs of the last timed run in result.outputs. min_time: more timed
    runs than `iterations` while the timed runs add up to less than
    min_time seconds (at most MAX_ITERATIONS)."""
    from hwtune.engine.lowered import lowered_doc
    from hwtune.graph.info import graph_info
    from hwtune.measure import FixedSampling, interleave
    from hwtune.measure.stats import mad, median, rel_spread

    check_counts(iterations, warmup)
    flops = graph_info(graph).flops
    costs = op_costs(db, host_key, graph, cfg, op_cost)
    # for the C runner (engine/standalone/)
    db.put_lowered(graph_hash, lowered_doc(base_graph if base_graph is not None else graph))
    engine = open_engine(graph, cfg, costs)
    for name, value in (inputs or {}).items():
        engine.set_input(name, value)
    run_id = db.start_run(host_key, "run", options)
    try:
        with finishing(db, run_id, "run"):
            db.add_fact(run_id, "memory", arena_fact(engine, cfg))
            # Warm-up runs are sampled too (and dropped) so that progress
            # moves during a long model's warm-up.
            total = warmup + iterations
            # min_time counts the warm-up runs' seconds too (they are
            # samples of the same side): at most warmup runs more than asked.
            policy = FixedSampling(total) if min_time is None else FixedSampling(
                total, min_total_s=float(min_time), max_reps=warmup + MAX_ITERATIONS)
            got = interleave([EngineSide(engine)], policy, raise_errors=True,
                             on_round=(lambda r, n: progress(n, total)) if progress else None)
            samples = got[0].samples[warmup:]
            checked = None
            if check:
                checked = check_outputs(engine.outputs(), graph, inputs)
                # a NaN / infinity on one side only makes max_abs infinite:
                # stored as null, as results.db stores every non-finite real
                db.add_fact(run_id, "check", {k: None if isinstance(v, float) and not
                                              math.isfinite(v) else v
                                              for k, v in checked.items()})
            events: List[OpEvent] = []
            if trace:
                # Profiled separately: recording events must not touch the timings.
                runs = profiled_runs(engine, graph, PROFILE_RUNS)
                events = runs[-1]
                store_op_profiles(db, host_key, graph, cfg, runs, config_id)
            med = median(samples)
            result = RunResult(run_id=run_id, samples=samples, median_s=med, mad_s=mad(samples),
                               min_s=min(samples), max_s=max(samples),
                               rel_spread=rel_spread(samples),
                               runs_per_s=1.0 / med if med > 0 else 0.0,
                               gflops=flops / med / 1e9 if med > 0 else 0.0, flops=flops,
                               events=events, check=checked,
                               outputs=engine.outputs() if keep_outputs else None)
            db.add_measurement(
                run_id, bench="graph", op=graph.name,
                params={"graph_hash": graph_hash, "config": cfg.to_json(),
                        "iterations": iterations, "warmup": warmup, "flops": flops},
                kernel_variant=kernel_variant, threads=cfg.threads, executors=cfg.executors,
                pinned=cfg.pinned, samples=samples, median_s=result.median_s, mad_s=result.mad_s,
                rel_spread=result.rel_spread, value=result.gflops, unit="GFLOP/s",
                status="noisy" if result.noisy else "ok")
            if events:
                db.add_trace(run_id, 0, [e._asdict() for e in events])
            return result
    finally:
        engine.close()
