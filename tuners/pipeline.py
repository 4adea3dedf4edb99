"""`hwtune tune-graph`: the stages, in order, and the final verdict.

1. sweep      executors x threads per executor (Graphi's profiler), default
              CONV parameters; picks the team size the later stages tune for.
2. conv       per CONV workload, the NCHW[x]c template knobs (NeoCPU 3.3,
              local search at the chosen team size), then the global layout
              DP (Algorithm 2) over measured layout-transform costs; the
              graph is rewritten with the chosen layouts.
3. hillclimb  per-op thread counts inside a team (runtime concurrency
              control, Strategy 1 or 2) and each op's best few counts for
              Strategy 3 ('corun').
Then per-op costs are profiled under the result (the critical-path levels),
and the tuned config is measured against the default (1 executor x all
threads, sequential, default CONV parameters) and every partial result,
interleaved; the fastest wins, so the stored config is never slower than the
default as measured in this run.

Every trial is committed as it finishes; a rerun after Ctrl-C reuses them
(resume), and CONV workloads / per-op thread counts tuned on this host are
reused across models.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from hwtune.db.lifecycle import finishing
from hwtune.engine.config import EngineConfig, default_config, usable_cpu_count
from hwtune.errors import HwtuneError, UsageError
from hwtune.measure import OK, FixedSampling, clock
from hwtune.tuners.context import Progress, TuneContext

STAGES = ("sweep", "conv", "hillclimb")
# Interleaved repetitions of the final default-vs-candidates comparison: 15
# samples give a median whose MAD is ~2-4% here under the usual background
# load (measured on the 2-core dev VM with lstm_small and resnet18).
FINAL_REPS = 15
# ...but the whole comparison gets about this long: a 2-TFLOP model
# (inception_large, ~20 s a run here) gets fewer samples (never fewer than
# MIN_FINAL_REPS), where one run is long enough to average out load bursts.
FINAL_BUDGET_S = 120.0
MIN_FINAL_REPS = 5
# With --budget the whole command (search, profile, final comparison) ends
# by the deadline: the sweep, which comes first, gets at most this share of
# it (it measures at least one sample of every config, so it cannot stop at
# once); the later search stages stop early enough to leave the profile and
# the final comparison their time at the latencies the sweep measured, and
# those two shrink to the time left, never below these floors. Measured with
# --budget 20 on the 2-core dev VM (AMD EPYC, AVX2, load ~5): lstm_medium took
# 33-47 s before (the profile, 6 s, and 15 final rounds, 14-24 s, ran after
# the deadline), 21.0 and 21.2 s with this; resnet18 19.9 s (the CONV search
# stops at the reserve). Half for the sweep: it alone is ~11 s of
# lstm_medium's 20 (engines, reference check, one round of 2 configs at
# 0.6-0.9 s a run), which leaves the profile and 3 final rounds their time.
# Without a sweep (--only conv,hillclimb) no latency is known yet: the
# search then keeps a fifth of the budget for the end.
SWEEP_SHARE = 0.5
NO_SWEEP_SHARE = 0.8
MIN_BUDGET_FINAL_REPS = 3

# Untimed runs of each candidate before the comparison (the first faults in
# the arena and forms the teams; see executor_sweep.WARMUP).
FINAL_WARMUP = 2
# The final comparison keeps the default unless a candidate is faster by more
# than this fraction: below it the difference is within the run-to-run noise
# measured on this machine (1-2% MAD/median on quiet runs), and switching
# would claim a speedup the measurement cannot show.
MIN_GAIN = 0.01


@dataclass
class TuneOptions:
    budget_s: Optional[float] = None
    trials: Optional[int] = None        # per CONV workload
    only: Optional[Sequence[str]] = None
    # TPE with a budget by default: a ResNet 3x3 workload has ~1,800 legal
    # knob combinations, ~23 ms each to measure here (42 s per workload for the
    # grid, 8 s for Optuna's 15% budget, which reached the grid's best on the
    # grid's own measured table: benchmarks/bench_tuners.py).
    search: str = "optuna"
    reps: int = 5
    seed: int = 0
    strategy: int = 1                   # hill climbing: 1 per op, 2 per op type

    def check(self) -> "TuneOptions":
        if self.budget_s is not None and not self.budget_s > 0:
            raise UsageError(f"invalid --budget {self.budget_s!r}: must be > 0 seconds")
        if self.trials is not None and (isinstance(self.trials, bool) or self.trials < 1):
            raise UsageError(f"invalid --trials {self.trials!r}: must be an integer >= 1")
        bad = [s for s in (self.only or ()) if s not in STAGES]
        if bad:
            raise UsageError(f"invalid --only {bad[0]!r}: choose from {', '.join(STAGES)}")
        from hwtune.tuners.search import SEARCHES
        if self.search not in SEARCHES:
            raise UsageError(f"invalid --search {self.search!r}: choose one of "
                             f"{', '.join(sorted(SEARCHES))}")
        if not 1 <= self.reps <= 1000:
            raise UsageError(f"invalid --reps {self.reps}: expected 1..1000")
        if self.strategy not in (1, 2):
            raise UsageError(f"invalid --strategy {self.strategy}: 1 (per op) or 2 (per op type)")
        return self

    def runs(self, stage: str) -> bool:
        return not self.only or stage in self.only


@dataclass
class StageReport:
    seconds: float = 0.0
    trials: int = 0
    measured: int = 0
    reused: int = 0
    note: str = ""
    stopped: str = "done"


@dataclass
class Candidate:
    label: str
    config: EngineConfig
    graph: Any                          # the graph this config runs (layout rewrites applied)
    op_cost: Dict[str, float] = field(default_factory=dict)
    median_s: Optional[float] = None
    mad_s: Optional[float] = None
    samples: List[float] = field(default_factory=list)
    status: Optional[str] = None        # of its final measurement
    note: Optional[str] = None


@dataclass
class TuneResult:
    run_id: int
    default: Candidate
    chosen: Candidate
    candidates: List[Candidate]
    stages: Dict[str, StageReport]
    why: List[str]
    tuning_s: float
    config_id: Optional[int] = None
    accuracy: Optional[dict] = None

    @property
    def speedup(self) -> float:
        return self.default.median_s / self.chosen.median_s if self.chosen.median_s else 0.0

    def to_json(self) -> Dict[str, Any]:
        def cand(c: Candidate):
            return {"label": c.label, "config": c.config.to_json(), "median_s": c.median_s,
                    "mad_s": c.mad_s, "samples": c.samples}
        return {"run_id": self.run_id, "default": cand(self.default), "tuned": cand(self.chosen),
                "candidates": [cand(c) for c in self.candidates], "speedup": self.speedup,
                "why": self.why, "tuning_s": self.tuning_s,
                "stages": {k: vars(v) for k, v in self.stages.items()},
                "config_id": self.config_id, "accuracy": self.accuracy}


def _noop(stage: str, message: str) -> None:
    pass


def _final_reserve(latency: Dict[str, float]) -> float:
    """Seconds the profile and the final comparison need at their floors:
    the profile's warm-up and runs of the tuned config, and the warm-up and
    MIN_BUDGET_FINAL_REPS rounds of three candidates (the default, the tuned
    config and one partial result)."""
    from hwtune.tuners.executor_sweep import WARMUP
    best, default = latency.get("best", 0.0), latency.get("default", 0.0)
    profile = best * (WARMUP + 1)
    final = (default + 2 * best) * (FINAL_WARMUP + MIN_BUDGET_FINAL_REPS)
    return profile + final


def _profile_runs(deadline: Optional[float], latency: Dict[str, float]) -> Dict[str, int]:
    """profile_op_costs' runs: its default, or what a fifth of the time left
    holds (at least one) when a budget is running out."""
    from hwtune.tuners.executor_sweep import PROFILE_RUNS, WARMUP
    best = latency.get("best")
    if deadline is None or not best:
        return {}
    fit = int(0.2 * (deadline - clock.monotonic()) / best) - WARMUP
    return {"runs": max(1, min(PROFILE_RUNS, fit))}


def conv_ops(graph) -> List[str]:
    return [op.name for op in graph.ops if op.op == "conv2d"]


def _stage_sweep(ctx: TuneContext, graph, graph_hash: str, cfg: EngineConfig,
                 report: StageReport) -> Tuple[EngineConfig, List[str], Dict[str, float]]:
    from hwtune.tuners import executor_sweep

    ctx.progress("sweep", "executors x threads per executor")
    res = executor_sweep.sweep(ctx, graph, graph_hash)
    rows = [r for r in res.rows if r[1] is not None]
    report.trials, report.measured, report.reused = len(res.rows), res.measured, res.reused
    report.stopped = res.stopped
    table = ", ".join(f"{c.executors}x{c.threads} {s * 1e3:.2f} ms" for c, s, _ in rows)
    latency = {}
    if rows and res.best_s:
        latency = {"best": res.best_s, "default": max(sec for _, sec, _ in rows)}
    return res.best, [f"sweep: {res.best.executors} executor(s) x {res.best.threads} thread(s) "
                      f"was fastest of {len(res.rows)} ({table})"], latency


def _stage_conv(ctx: TuneContext, graph, cfg: EngineConfig,
                report: StageReport) -> Tuple[Dict[str, dict], List[str]]:
    from hwtune.tuners import conv_local, layout_dp

    threads = cfg.threads
    ctx.progress("conv", f"CONV template search ({ctx.search}) at {threads} thread(s)")

    def on_event(ev):
        if ev.get("done"):
            c = ev["choice"]
            ctx.progress("conv", f"{', '.join(ev['ops'][:3])}"
                                 f"{' ...' if len(ev['ops']) > 3 else ''}: "
                                 f"{c.seconds * 1e3:.3f} ms tuned vs "
                                 f"{c.default_seconds * 1e3:.3f} ms default "
                                 f"({c.trials} trials{', reused' if c.reused else ''})")
        elif ev["trial"] % 100 == 0:
            ctx.progress("conv", f"{ev['ops'][0]}: trial {ev['trial']}")

    choices = conv_local.tune_conv_workloads(ctx, graph, threads=threads, events=on_event,
                                             pin=cfg.pinned)
    if not choices:
        return {}, []
    report.trials = sum(c.trials for c in choices.values())
    report.measured = sum(c.measured for c in choices.values())
    report.reused = report.trials - report.measured
    ctx.progress("conv", "global layout search (dynamic programming)")
    cost = layout_dp.measured_transform_cost(ctx.db, ctx.run_id, ctx.host_key,
                                             threads=threads, isa=ctx.isa)
    plan = layout_dp.choose_layouts(graph, {k: c.candidates for k, c in choices.items()}, cost)
    default_s = sum(c.default_seconds for c in choices.values()
                    if c.default_seconds == c.default_seconds)  # NaN: the default failed
    tuned_s = sum(c.seconds for c in choices.values())
    why = [f"conv: {len(choices)} CONV op(s), template time {default_s * 1e3:.2f} ms with "
           f"default knobs -> {tuned_s * 1e3:.2f} ms tuned (sum over ops, {threads} thread(s)); "
           f"layout DP estimate {plan.est_seconds * 1e3:.2f} ms including transforms"]
    return plan.op_params, why


def _stage_hillclimb(ctx: TuneContext, graph, cfg: EngineConfig, report: StageReport):
    from hwtune.tuners import hillclimb

    ctx.progress("hillclimb", f"per-op thread counts inside a {cfg.threads}-thread team "
                              f"(strategy {ctx.strategy})")
    res = hillclimb.tune_op_threads(ctx, graph, team_threads=cfg.threads)
    report.measured, report.reused = res.measured, res.reused
    report.trials = res.measured + res.reused
    report.stopped = res.stopped
    changed = {k: v for k, v in res.op_threads.items() if v != cfg.threads}
    why = [f"hillclimb: {len(changed)} of {len(graph.ops)} ops run best on fewer than "
           f"{cfg.threads} threads"]
    return res, why


def _measure_final(cands: List[Candidate], progress: Progress,
                   deadline: Optional[float] = None) -> None:
    """The verdict: every candidate's engine sampled interleaved (round
    robin, so a burst of background load hits all alike), each checked
    against the default's outputs first (a candidate that computes
    something else cannot win); at most FINAL_BUDGET_S of samples, and
    with a deadline as many rounds as fit before it (at least
    MIN_BUDGET_FINAL_REPS)."""
    from hwtune.engine.runner import open_engine
    from hwtune.measure.engine import FIRST, measure_engines

    limit_s, low = FINAL_BUDGET_S, MIN_FINAL_REPS
    if deadline is not None:
        limit_s, low = min(limit_s, max(deadline - clock.monotonic(), 0.0)), MIN_BUDGET_FINAL_REPS
    policy = FixedSampling(FINAL_REPS, budget_s=limit_s, min_reps=low)

    def on_round(r, n):
        progress("final", f"default vs tuned, interleaved: {n}/{policy.planned}")

    got = measure_engines([lambda c=c: open_engine(c.graph, c.config, c.op_cost or None)
                           for c in cands], policy, warmup=FINAL_WARMUP, reference=FIRST,
                          outputs=cands[0].graph.outputs, on_round=on_round)
    for c, m in zip(cands, got):
        c.samples, c.status, c.note = list(m.samples), m.status, m.note
        c.median_s, c.mad_s = (m.median, m.mad) if m.status == OK else (None, None)
    if cands[0].status != OK:
        raise HwtuneError(f"the default config of {cands[0].graph.name} failed in the final "
                          f"comparison: {cands[0].note}")


def tune_graph(db, host_key: str, graph, graph_hash: str, opts: TuneOptions, *,
               cpus: Sequence[int], model_path: str = "", progress: Optional[Progress] = None
               ) -> TuneResult:
    from hwtune.engine.effective import effective_graph
    from hwtune.engine.lowered import lowered_doc

    opts.check()
    progress = progress or _noop
    watch = clock.Stopwatch()
    usable = min(usable_cpu_count(cpus), len(cpus))
    run_id = db.start_run(host_key, "tune", {
        "model": model_path, "graph_hash": graph_hash, "budget_s": opts.budget_s,
        "trials": opts.trials, "only": list(opts.only or []), "search": opts.search,
        "reps": opts.reps, "strategy": opts.strategy})
    # The whole budget's deadline ends the profile and the final comparison;
    # the search stages get their own, earlier one (see SWEEP_SHARE).
    deadline = clock.deadline_after(opts.budget_s)
    ctx = TuneContext(db, run_id, host_key, cpus=list(cpus), progress=progress,
                      deadline=clock.deadline_after(opts.budget_s and opts.budget_s * SWEEP_SHARE),
                      search=opts.search,
                      trials=opts.trials, reps=opts.reps, seed=opts.seed,
                      strategy=opts.strategy)
    stages: Dict[str, StageReport] = {}
    why: List[str] = []
    # The C runner (hwtune-run) runs a graph that was only tuned, too.
    db.put_lowered(graph_hash, lowered_doc(graph))

    def stage(name: str) -> Optional[StageReport]:
        """The stage's report when it runs now (asked for, budget left)."""
        if not opts.runs(name) or ctx.out_of_time():
            return None
        return stages.setdefault(name, StageReport())

    with finishing(db, run_id, "tuning run", kept="every finished trial is kept and the next "
                   "tune-graph resumes from them"):
        base = default_config(usable)
        default = Candidate("default", base, graph)
        cfg, tuned_graph = base, graph
        accuracy = None
        partial: List[Candidate] = []
        latency: Dict[str, float] = {}

        rep = stage("sweep")
        if rep is not None:
            took = clock.Stopwatch()
            cfg, lines, latency = _stage_sweep(ctx, graph, graph_hash, cfg, rep)
            rep.seconds = took.elapsed()
            why += lines
            if cfg != base:
                partial.append(Candidate("sweep", cfg, graph))
        if deadline is not None:
            # Later searches stop early enough to leave the profile and the
            # final comparison their time at the latencies the sweep measured;
            # without a measured latency (no sweep ran) they keep a share.
            ctx.deadline = (deadline - _final_reserve(latency) if latency
                            else deadline - opts.budget_s * (1 - NO_SWEEP_SHARE))

        rep = stage("conv") if conv_ops(graph) else None
        if rep is not None:
            took = clock.Stopwatch()
            op_params, lines = _stage_conv(ctx, graph, cfg, rep)
            rep.seconds = took.elapsed()
            why += lines
            if op_params:
                cfg = replace(cfg, op_params=op_params)
                tuned_graph = effective_graph(graph, cfg)
                partial.append(Candidate("sweep+conv", cfg, tuned_graph))

        rep = stage("hillclimb")
        if rep is not None:
            took = clock.Stopwatch()
            if cfg.threads < 2:
                rep.note = "teams of 1 thread: no per-op thread count to choose"
                why.append(f"hillclimb: skipped ({rep.note})")
            else:
                res, lines = _stage_hillclimb(ctx, tuned_graph, cfg, rep)
                why += lines
                accuracy = res.accuracy
                # Ops the layout pass inserted are not named in the model, so
                # a stored config could not be checked against it: they keep
                # the team size.
                names = {op.name for op in graph.ops}
                op_threads = {k: v for k, v in res.op_threads.items()
                              if v != cfg.threads and k in names}
                cfg = replace(cfg, op_threads=op_threads)
                if res.candidates:
                    corun = replace(cfg, scheduler="corun", op_candidates={
                        k: [[int(t), float(s)] for t, s in v] for k, v in res.candidates.items()})
                    partial.append(Candidate("corun", corun, tuned_graph))
            rep.seconds = took.elapsed()

        # Profiled op costs order the critical-path scheduler's levels.
        final = Candidate("tuned", cfg, tuned_graph)
        if cfg.sched.needs_costs:
            from hwtune.tuners.executor_sweep import profile_op_costs
            progress("profile", "per-op costs under the tuned config")
            final.op_cost = profile_op_costs(tuned_graph, cfg, **_profile_runs(deadline, latency))
        for c in partial:
            if c.config.sched.needs_costs and not c.op_cost:
                c.op_cost = final.op_cost if c.graph is tuned_graph else {}
        cands = [default] + [c for c in partial if c.config != cfg] + [final]
        _measure_final(cands, progress, deadline)
        ran = [c for c in cands[1:] if c.status == OK]
        for c in cands[1:]:
            if c.status != OK:
                why.append(f"final: '{c.label}' left out ({c.status}: {c.note})")
        chosen = min(ran, key=lambda c: c.median_s) if ran else default
        if chosen.median_s > default.median_s * (1 - MIN_GAIN):
            why.append(f"final: no tuned candidate beat the default by more than "
                       f"{MIN_GAIN:.0%} in the interleaved comparison: keeping the default")
            chosen = default
        else:
            why.append(f"final: '{chosen.label}' was fastest of {len(cands)} candidates "
                       f"measured interleaved ({len(chosen.samples)} samples each)")

        c = chosen.config
        fields = dict(c.db_fields(), op_cost=dict(chosen.op_cost))
        config_id = db.put_engine_config(
            host_key, graph_hash, source="tuned", **fields,
            lowered=lowered_doc(chosen.graph) if chosen.graph is not graph else None)
        result = TuneResult(run_id=run_id, default=default, chosen=chosen, candidates=cands,
                            stages=stages, why=why, tuning_s=watch.elapsed(),
                            config_id=config_id, accuracy=accuracy)
        db.add_fact(run_id, "tune_summary", {
            "model": graph.name, "graph_hash": graph_hash,
            "default": {"config": default.config.to_json(), "median_s": default.median_s,
                        "mad_s": default.mad_s},
            "tuned": {"config": c.to_json(), "median_s": chosen.median_s,
                      "mad_s": chosen.mad_s, "label": chosen.label},
            "candidates": [{"label": x.label, "median_s": x.median_s, "mad_s": x.mad_s}
                           for x in cands],
            "speedup": result.speedup, "why": why, "tuning_s": result.tuning_s,
            "stages": {k: vars(v) for k, v in stages.items()}, "accuracy": accuracy})
        return result

