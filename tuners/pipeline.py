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
and the final comparison (final.py) measures the tuned config against the
default (1 executor x all threads, sequential, default CONV parameters),
every partial result and the stored tuned config, interleaved; a candidate
replaces the incumbent only by a significant gain, so the stored config is
never slower than the one before as measured in this run.

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
from hwtune.graph.autodiff import is_training_graph
from hwtune.measure import OK, FixedSampling, clock
from hwtune.tuners import confirm as confirms
from hwtune.tuners import final as finals
from hwtune.tuners import verdict as verdicts
from hwtune.tuners.context import Progress, TuneContext
from hwtune.tuners.final import Candidate, pin_choices
from hwtune.tuners.plan import Ledger, Plan

STAGES = ("sweep", "conv", "hillclimb")
# With --budget the whole command (search, profile, final comparison) ends
# by the deadline: the sweep, which comes first, gets at most this share of
# it (it measures at least one sample of every config, so it cannot stop at
# once); the later search stages stop early enough to leave the profile and
# the final comparison their time at the latencies the sweep measured, and
# those two shrink to the time left, never below their floors (final.py). Measured with
# --budget 20 on the 2-core dev VM (AMD EPYC, AVX2, load ~5): lstm_medium took
# 33-47 s before (the profile, 6 s, and 15 final rounds, 14-24 s, ran after
# the deadline), 21.0 and 21.2 s with this; resnet18 19.9 s (the CONV search
# stops at the reserve). Half for the sweep: it alone is ~11 s of
# lstm_medium's 20 (engines, reference check, one round of 2 configs at
# 0.6-0.9 s a run), which leaves the profile and 3 final rounds their time.
# The plan (tuners/plan.py) gives the sweep its estimated cost, at most this
# share of the budget left after the final reserve; without a sweep
# (--only conv,hillclimb) the plan's probe gives the latency.
SWEEP_SHARE = 0.5
# Samples of the plan's probe of the default config (after one warm-up run):
# the sweep's first figures come later; the plan only needs the size of a
# run, and two samples keep the probe under 3 runs for a 20-s model.
PROBE_REPS = 2


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
    plan_only: bool = False             # --plan: print the plan and stop
    storage: Optional[str] = None       # Optuna RDB URL shared by a fleet (CONV studies)
    # Threads per executor to tune the CONV workloads at besides the team's
    # (--conv-threads; None: the thread counts of the configs the sweep
    # measures): a run at another count then finds knobs tuned for it
    # (hwtune.engine.conv_knobs) instead of the team's.
    conv_threads: Optional[Sequence[int]] = None
    # Precision per op (--precision fp32,int8,bf16 --max-error E): the
    # precisions an op may run in and the end-to-end error bound;
    # calibration: --input arrays (None: seeded samples).
    precisions: Sequence[str] = ("fp32",)
    max_error: Optional[float] = None
    calibration: Optional[Dict[str, Any]] = None

    def low_precisions(self) -> List[str]:
        return [p for p in self.precisions if p != "fp32"]

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
        if self.storage is not None and self.search != "optuna":
            raise UsageError(f"--storage shares Optuna studies: it needs --search optuna, not "
                             f"{self.search!r}")
        if self.storage is not None:
            # Reached and usable before anything is measured.
            from hwtune.tuners.shared_study import check_storage
            check_storage(self.storage)
        if self.strategy not in (1, 2):
            raise UsageError(f"invalid --strategy {self.strategy}: 1 (per op) or 2 (per op type)")
        for t in self.conv_threads or ():
            if isinstance(t, bool) or not isinstance(t, int) or t < 1:
                raise UsageError(f"invalid --conv-threads {t!r}: thread counts are integers "
                                 ">= 1")
        from hwtune.precision.options import check_precision
        check_precision(self.precisions, self.max_error)
        return self

    def conv_counts(self, graph, usable: int, team: int) -> List[int]:
        """The thread counts the CONV stage tunes at: the team's first, then
        --conv-threads, or by default the threads per executor of every
        config the sweep measures (1x2 and 2x1 on 2 CPUs: 2 and 1)."""
        if self.conv_threads is not None:
            extra = list(self.conv_threads)
        elif self.runs("sweep"):
            from hwtune.tuners import executor_sweep
            extra = sorted({c.threads for c in executor_sweep.candidate_configs(
                usable, width=executor_sweep.graph_width(graph))}, reverse=True)
        else:
            extra = []
        return list(dict.fromkeys([team] + [t for t in extra if t <= usable]))

    def runs(self, stage: str) -> bool:
        return not self.only or stage in self.only

    def recorded(self) -> Dict[str, Any]:
        """The options as the run stores them (`hwtune report` shows them):
        --storage without its password."""
        from hwtune.tuners.shared_study import redact_url
        return {"budget_s": self.budget_s, "trials": self.trials, "only": list(self.only or []),
                "search": self.search, "reps": self.reps, "strategy": self.strategy,
                "storage": redact_url(self.storage) if self.storage else None,
                "conv_threads": list(self.conv_threads) if self.conv_threads else None,
                "precisions": list(self.precisions), "max_error": self.max_error,
                "calibration": sorted(self.calibration) if self.calibration else None}


@dataclass
class StageReport:
    seconds: float = 0.0
    trials: int = 0
    measured: int = 0
    reused: int = 0
    note: str = ""
    stopped: str = "done"


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
    speedup_ci: Any = None              # verdict.Ratio: default / chosen, paired
    kept_stored: bool = False           # the stored tuned config stayed
    plan: Optional[Plan] = None
    cuts: List[dict] = field(default_factory=list)  # what the budget left undone
    verdict: Dict[str, Any] = field(default_factory=dict)  # verdict.summary
    precision: Optional[Dict[str, Any]] = None  # the precision stage's choice, per op

    @property
    def resume_s(self) -> float:
        """Estimated seconds of search a rerun needs to finish every cut."""
        return sum(c["resume_s"] for c in self.cuts)

    @property
    def speedup(self) -> float:
        """default / tuned: the verdict's paired figure (across fresh
        processes when a gain was confirmed, confirm.py), else the ratio of
        the in-process medians."""
        if self.speedup_ci is not None:
            return self.speedup_ci.median
        return self.default.median_s / self.chosen.median_s if self.chosen.median_s else 0.0

    def to_json(self) -> Dict[str, Any]:
        def cand(c: Candidate):
            return {"label": c.label, "config": c.config.to_json(), "median_s": c.median_s,
                    "mad_s": c.mad_s, "samples": c.samples, "process_s": c.process_s}
        # "tuned": the stored config `hwtune run` uses; null when that is the
        # default (verdict.uses says which, and why).
        tuned = None if self.chosen is self.default else cand(self.chosen)
        return {"run_id": self.run_id, "default": cand(self.default), "tuned": tuned,
                "verdict": self.verdict or verdicts.summary(
                    self.default, None, self.chosen, self.chosen, self.speedup_ci,
                    config_id=self.config_id, kept_stored=self.kept_stored),
                "candidates": [cand(c) for c in self.candidates], "speedup": self.speedup,
                "why": self.why, "tuning_s": self.tuning_s,
                "stages": {k: vars(v) for k, v in self.stages.items()},
                "config_id": self.config_id, "accuracy": self.accuracy,
                "speedup_ci": self.speedup_ci.to_json() if self.speedup_ci else None,
                "kept_stored": self.kept_stored, "cuts": self.cuts, "resume_s": self.resume_s,
                "plan": self.plan.to_json() if self.plan else None,
                "precision": self.precision}


def _noop(stage: str, message: str) -> None:
    pass


def _profile_runs(deadline: Optional[float], latency: Dict[str, float]) -> Dict[str, int]:
    """profile_op_costs' runs: its default, or what a fifth of the time left
    holds (at least one) when a budget is running out."""
    from hwtune.tuners.executor_sweep import PROFILE_RUNS, WARMUP
    best = latency.get("best")
    if deadline is None or not best:
        return {}
    fit = int(0.2 * (deadline - clock.monotonic()) / best) - WARMUP
    return {"runs": max(1, min(PROFILE_RUNS, fit))}


def _probe(graph, cfg: EngineConfig) -> Tuple[float, float]:
    """(seconds per run, seconds to open) of graph under cfg: the plan's
    measured base. A warm-up run and PROBE_REPS samples, as the sweep
    samples."""
    from hwtune.engine.runner import open_engine
    from hwtune.measure.engine import measure_engines

    opened: List[float] = []

    def opener():
        took = clock.Stopwatch()
        engine = open_engine(graph, cfg, None)
        opened.append(took.elapsed())
        return engine

    m = measure_engines([opener], FixedSampling(PROBE_REPS), warmup=1)[0]
    if m.status != OK:
        raise HwtuneError(f"the default config of {graph.name} does not run: {m.note}")
    return m.median, (opened[0] if opened else 0.0)


def make_plan(ctx: TuneContext, graph, graph_hash: str, opts: TuneOptions, *, usable: int,
              stored: bool) -> Plan:
    """Probe the default config, cost every stage that will run and share
    the budget among them (tuners/plan.py)."""
    from hwtune.tuners import plan as plans

    latency_s, open_s = _probe(graph, default_config(usable))
    names = [s for s in STAGES if opts.runs(s) and (s != "conv" or conv_ops(graph))]
    items = plans.stage_items(ctx, graph, graph_hash, usable=usable, latency_s=latency_s,
                              open_s=open_s, stages=names,
                              conv_threads=opts.conv_counts(graph, usable, usable))
    n_final = finals.FINAL_CANDIDATES + stored
    reserve = (finals.final_reserve({"best": latency_s, "default": latency_s}, n_final, open_s,
                                    opts.budget_s)
               if opts.budget_s is not None else finals.full_cost(latency_s, n_final, open_s))
    sweep = items["sweep"][0] if items["sweep"] else None
    return plans.build(graph, latency_s=latency_s, open_s=open_s, budget_s=opts.budget_s,
                       sweep=sweep, conv=items["conv"], hillclimb=items["hillclimb"],
                       reserve_s=reserve,
                       sweep_share=SWEEP_SHARE if opts.runs("conv") or opts.runs("hillclimb")
                       else 1.0)


def _replan(ctx: TuneContext, graph, graph_hash: str, opts: TuneOptions, *, usable: int,
            team: int, latency_s: float, open_s: float, stages: Sequence[str],
            seconds: Optional[float]) -> Plan:
    """The later stages' plan once the sweep has chosen the team."""
    from hwtune.tuners import plan as plans

    names = [s for s in stages if s != "conv" or conv_ops(graph)]
    items = plans.stage_items(ctx, graph, graph_hash, usable=usable, latency_s=latency_s,
                              open_s=open_s, stages=names, team=team,
                              conv_threads=opts.conv_counts(graph, usable, team))
    return plans.build(graph, latency_s=latency_s, open_s=open_s, budget_s=seconds,
                       sweep=None, conv=items["conv"], hillclimb=items["hillclimb"],
                       reserve_s=0.0, sweep_share=0.0)


def _cuts(ctx: TuneContext, graph, tuned_graph, graph_hash: str, opts: TuneOptions, *,
          usable: int, team: int, latency_s: float, open_s: float,
          stages: Dict[str, StageReport], climbed) -> List[dict]:
    """Every stage and workload this run left unfinished, each with the
    seconds a rerun needs for it: the plan's estimate of its remaining
    trials (what is stored is not measured again), scaled by how long this
    run's trials of that stage actually took against the estimate."""
    from hwtune.tuners import plan as plans

    out: List[dict] = []
    scale: Dict[str, float] = {}

    def calibrate(stage: str, items) -> None:
        rep = stages.get(stage)
        est = [i.trial_s for i in items]
        if rep is not None and rep.measured > 0 and est:
            seen = rep.seconds / rep.measured
            # Clamped: one stage's few trials are a rough guide, not a law.
            scale[stage] = min(20.0, max(0.5, seen / (sum(est) / len(est))))

    def add(item, reason):
        out.append({"stage": item.stage, "name": item.label or item.name, "key": item.name,
                    "reason": reason, "trials_left": item.trials,
                    "resume_s": item.cost_s * scale.get(item.stage, 1.0)})

    rep = stages.get("sweep")
    if rep is not None and rep.stopped != "done":
        for item in plans.stage_items(ctx, graph, graph_hash, usable=usable,
                                      latency_s=latency_s, open_s=open_s,
                                      stages=["sweep"])["sweep"]:
            if not item.reused:
                add(item, "stopped by the budget before every config was measured")
    if opts.runs("conv") and conv_ops(graph):
        rep = stages.get("conv")
        items = plans.stage_items(ctx, graph, graph_hash, usable=usable, latency_s=latency_s,
                                  open_s=open_s, stages=["conv"], team=team,
                                  conv_threads=opts.conv_counts(graph, usable, team))["conv"]
        calibrate("conv", items)
        for item in items:
            if not item.reused:
                add(item, "not started (budget)" if rep is None or rep.stopped == "budget"
                    else "search cut by the budget (best so far used, not stored as tuned)")
    if opts.runs("hillclimb") and team >= 2:
        status = {g.workload_key: g.status for g in climbed.groups} if climbed else {}
        items = plans.stage_items(ctx, tuned_graph, graph_hash, usable=usable,
                                  latency_s=latency_s, open_s=open_s, stages=["hillclimb"],
                                  team=team)["hillclimb"]
        calibrate("hillclimb", items)
        for item in items:
            st = status.get(item.name, "pending")
            if not item.reused and st in ("partial", "cut", "pending"):
                add(item, {"partial": "climb stopped by the budget",
                           "cut": "the plan gave it no time"}.get(st, "not started (budget)"))
    return out


def conv_ops(graph) -> List[str]:
    # Dense ones: a grouped conv2d has no template knobs to tune.
    return [op.name for op in graph.ops
            if op.op == "conv2d" and int((op.resolved or op.attrs).get("group") or 1) == 1]


def _stage_sweep(ctx: TuneContext, graph, graph_hash: str, cfg: EngineConfig,
                 report: StageReport) -> Tuple[EngineConfig, List[str], Dict[str, float]]:
    from hwtune.tuners import executor_sweep

    ctx.progress("sweep", "executors x threads per executor")
    usable = min(usable_cpu_count(ctx.cpus), len(ctx.cpus))
    res = executor_sweep.sweep(ctx, graph, graph_hash, extra=executor_sweep.pin_variants(
        executor_sweep.candidate_configs(usable, width=executor_sweep.graph_width(graph))))
    rows = [r for r in res.rows if r[1] is not None]
    report.trials, report.measured, report.reused = len(res.rows), res.measured, res.reused
    report.stopped = res.stopped
    from hwtune.report.fmt import seconds

    def name(c) -> str:
        return f"{c.executors}x{c.threads}{'' if c.pinned else ' unpinned'}"
    # Fastest first, the winner named with its pinning and figure: listed in
    # trial order, "2x1 was fastest of 4 (1x2 unpinned 0.14 ms, 2x1 0.35 ms,
    # ...)" read as if a slower config had won (issue #42).
    ranked = sorted(rows, key=lambda r: r[1])
    latency = {}
    if rows and res.best_s:
        latency = {"best": res.best_s, "default": max(sec for _, sec, _ in rows)}
    if not ranked or res.best_s is None:
        return res.best, [f"sweep: nothing measured; {name(res.best)} stands"], latency
    rest = ", ".join(f"{name(c)} {seconds(s)}" for c, s, _ in ranked if c != res.best)
    return res.best, [f"sweep: {name(res.best)} ({res.best.executors} executor(s) x "
                      f"{res.best.threads} thread(s)) was fastest of {len(res.rows)} at "
                      f"{seconds(res.best_s)}" + (f"; then {rest}" if rest else "")], latency


def _stage_conv(ctx: TuneContext, graph, cfg: EngineConfig, report: StageReport,
                limits=None, other_threads: Sequence[int] = ()
                ) -> Tuple[Dict[str, dict], List[str]]:
    """The team's CONV knobs and layouts (the config's op_params), then the
    workloads' knobs at other_threads (stored per thread count for runs at
    those counts; they do not change this config)."""
    params, why = _conv_team(ctx, graph, cfg, report, limits)
    why += _conv_other_threads(ctx, graph, cfg, report, limits, other_threads)
    if is_training_graph(graph):
        gw, more = _conv_grad(ctx, graph, cfg, report, other_threads, limits)
        params.update(gw)
        why += more
    return params, why


def _conv_grad(ctx: TuneContext, graph, cfg: EngineConfig, report: StageReport,
               other_threads: Sequence[int], limits=None) -> Tuple[Dict[str, dict], List[str]]:
    """A training step's CONV gradients with knobs of their own (weight
    gradients, im2col data gradients; the C ops' declarations) per workload
    at the team's thread count, the config's op_params, and at
    other_threads (stored for runs at those counts)."""
    from hwtune.tuners import conv_grad

    n_wl = len(conv_grad.workload_groups(graph))
    if not n_wl:
        return {}, []
    params: Dict[str, dict] = {}
    why = []
    for t in [cfg.threads] + [t for t in other_threads if t != cfg.threads]:
        if ctx.out_of_time():
            why.append(f"conv: CONV gradients not tuned at {t} thread(s): the budget ran "
                       "out (a rerun resumes)")
            continue
        ctx.progress("conv", f"CONV gradient search ({ctx.search}) at {t} thread(s)")
        got = conv_grad.tune_grad_workloads(
            ctx, graph, threads=t, pin=cfg.pinned, progress=lambda m: ctx.progress("conv", m),
            limits=_limits_at(limits, t, cfg.threads))
        seen = _tally(report, got)
        if t == cfg.threads:
            params = {name: dict(c.params) for name, c in got.items()}
            default_s = sum(c.default_seconds for c in seen
                            if c.default_seconds == c.default_seconds)
            tuned_s = sum(c.seconds for c in seen)
            why.append(f"conv: {len(seen)} of {n_wl} CONV gradient workload(s) (weight, "
                       f"im2col data) tuned at {t} thread(s): {default_s * 1e3:.2f} ms with "
                       f"default knobs -> {tuned_s * 1e3:.2f} ms tuned (sum over workloads)")
        else:
            why.append(f"conv: {len(seen)} of {n_wl} CONV gradient workload(s) tuned at "
                       f"{t} thread(s) too (stored for runs at {t} thread(s) per executor)")
    return params, why


def _tally(report: StageReport, got) -> List:
    """The distinct workloads' choices of got (op name -> choice; ops of one
    workload share it), their trials added to report: measured now, or
    reused from the store."""
    seen = list({c.workload_key: c for c in got.values()}.values())
    report.trials += sum(c.trials for c in seen)
    measured = sum(c.measured for c in seen)
    report.measured += measured
    report.reused += sum(c.trials for c in seen) - measured
    return seen


def _limits_at(limits, threads: int, team: int):
    """The plan's limits for the workloads searched at `threads`: the plan
    keys a workload's item at another count than the team's "<key>@<t>t"."""
    if limits is None or threads == team:
        return limits
    return lambda key: limits(f"{key}@{threads}t")


def _conv_progress(ctx: TuneContext, threads: int):
    def on_event(ev):
        if ev.get("done"):
            c = ev["choice"]
            ctx.progress("conv", f"{', '.join(ev['ops'][:3])}"
                                 f"{' ...' if len(ev['ops']) > 3 else ''} @{threads}t: "
                                 f"{c.seconds * 1e3:.3f} ms tuned vs "
                                 f"{c.default_seconds * 1e3:.3f} ms default "
                                 f"({c.trials} trials{', reused' if c.reused else ''})")
        elif ev["trial"] % 100 == 0:
            ctx.progress("conv", f"{ev['ops'][0]} @{threads}t: trial {ev['trial']}")
    return on_event


def _conv_other_threads(ctx: TuneContext, graph, cfg: EngineConfig, report: StageReport,
                        limits, counts: Sequence[int]) -> List[str]:
    from hwtune.tuners import conv_local

    why = []
    for t in counts:
        if ctx.out_of_time():
            why.append(f"conv: not tuned at {t} thread(s): the budget ran out (a rerun "
                       "resumes)")
            continue
        ctx.progress("conv", f"CONV template search ({ctx.search}) at {t} thread(s), for "
                             f"runs at that count")
        got = conv_local.tune_conv_workloads(
            ctx, graph, threads=t, events=_conv_progress(ctx, t), pin=cfg.pinned,
            limits=_limits_at(limits, t, cfg.threads))
        seen = _tally(report, got)
        n_wl = len(conv_local.workload_groups(graph))
        why.append(f"conv: {len(seen)} of {n_wl} CONV workload(s) tuned at {t} thread(s) "
                   f"too (stored for runs at {t} thread(s) per executor)")
    return why


def _conv_team(ctx: TuneContext, graph, cfg: EngineConfig, report: StageReport,
               limits=None) -> Tuple[Dict[str, dict], List[str]]:
    from hwtune.tuners import conv_local, layout_dp

    threads = cfg.threads
    ctx.progress("conv", f"CONV template search ({ctx.search}) at {threads} thread(s)")
    choices = conv_local.tune_conv_workloads(ctx, graph, threads=threads,
                                             events=_conv_progress(ctx, threads),
                                             pin=cfg.pinned, limits=limits)
    if not choices:
        return {}, []
    report.trials = sum(c.trials for c in choices.values())
    report.measured = sum(c.measured for c in choices.values())
    report.reused = report.trials - report.measured
    if is_training_graph(graph):
        # The backward ops read the forward activations in NCHW, so a
        # blocked chain would pay a transform back for each of them; the
        # forward CONVs keep NCHW with their fastest knobs instead, or
        # without knobs where the untuned plan (its per-run rules, the 1x1
        # GEMM) measured faster.
        from hwtune.tuners import conv_nchw
        groups = [(wl, [n for n in names if n in choices])
                  for wl, names in conv_local.workload_groups(graph).values()]
        nchw = conv_nchw.nchw_candidates(ctx, groups, threads=threads, pin=cfg.pinned)
        params = {}
        for k, c in choices.items():
            best = c.candidates[0] if c.candidates else (c.params, c.seconds)
            params[k] = (dict(nchw[k][0]) if k in nchw and nchw[k][1] < best[1]
                         else {**best[0], "layout": "NCHW"})
        untuned = sum(1 for p in params.values() if p == conv_nchw.PARAMS)
        ctx.progress("conv", "training graph: CONVs keep NCHW (no global layout search)")
        return params, [f"conv: {len(choices)} CONV op(s) of a training graph (data "
                        f"gradients included), NCHW with their fastest knobs; {untuned} "
                        "without knobs (the untuned plan measured faster)"]
    ctx.progress("conv", "global layout search (dynamic programming)")
    from hwtune.graph.passes.fuse import fuse_conv
    cost = layout_dp.measured_transform_cost(ctx.db, ctx.run_id, ctx.host_key,
                                             threads=threads, isa=ctx.isa)
    op_cost = layout_dp.measured_op_cost(ctx.db, ctx.run_id, ctx.host_key, threads=threads,
                                         isa=ctx.isa)
    # On the graph the engine runs (effective_graph): batch norms folded into
    # the CONVs cost nothing there, so only the pools and unfolded norms are
    # priced per layout; CONV names survive the fusion.
    from hwtune.tuners import conv_nchw
    groups = [(wl, [n for n in names if n in choices])
              for wl, names in conv_local.workload_groups(graph).values()]
    nchw = conv_nchw.nchw_candidates(ctx, groups, threads=threads, pin=cfg.pinned)
    cands = {k: list(c.candidates) + ([nchw[k]] if k in nchw else [])
             for k, c in choices.items()}
    from hwtune.graph.passes.plain import to_plain
    plan = layout_dp.choose_layouts(fuse_conv(to_plain(graph)), cands, cost, op_cost=op_cost)
    default_s = sum(c.default_seconds for c in choices.values()
                    if c.default_seconds == c.default_seconds)  # NaN: the default failed
    tuned_s = sum(c.seconds for c in choices.values())
    why = [f"conv: {len(choices)} CONV op(s), template time {default_s * 1e3:.2f} ms with "
           f"default knobs -> {tuned_s * 1e3:.2f} ms tuned (sum over ops, {threads} thread(s)); "
           f"layout DP estimate {plan.est_seconds * 1e3:.2f} ms including transforms "
           f"({plan.transform_seconds * 1e3:.2f} ms) and pooling/norm ops "
           f"({plan.op_seconds * 1e3:.2f} ms)"]
    chosen = sum(1 for k in nchw if plan.op_params.get(k) == conv_nchw.PARAMS)
    why.append(f"conv: {chosen} of {len(choices)} CONV op(s) keep NCHW with the default "
               "kernel (the layout DP's choice against the template's blocked layouts)")
    return plan.op_params, why


def _stage_precision(ctx: TuneContext, graph, cfg: EngineConfig, opts: TuneOptions,
                     report: StageReport):
    """Per-op precision within opts.max_error (hwtune.precision.choose), on
    the graph cfg runs; (PrecisionChoice, why lines)."""
    from hwtune.engine.effective import effective_graph
    from hwtune.precision import calibrate as cal
    from hwtune.precision.choose import choose_precision

    plain = effective_graph(graph, replace(cfg, op_params={}, op_precision={}))
    samples = (cal.given_samples(plain, opts.calibration) if opts.calibration
               else cal.seeded_samples(plain))

    def run_graph(table):
        return effective_graph(graph, replace(cfg, op_precision=table))
    choice = choose_precision(plain, run_graph, opts.precisions, opts.max_error, samples,
                              threads=cfg.threads, progress=ctx.say("precision"))
    report.trials = choice.evaluations
    report.measured = len(choice.ops)
    low = [c for c in choice.ops if c.precision != "fp32"]
    by = {}
    for c in low:
        by[c.precision] = by.get(c.precision, 0) + 1
    what = ", ".join(f"{n} in {p}" for p, n in by.items()) or "every op stays fp32"
    report.note = what
    gain = choice.fp32_s - choice.chosen_s
    return choice, [f"precision: {what} of {len(choice.ops)} candidate op(s); end-to-end error "
                    f"{choice.error:.2g} <= {opts.max_error:g} on {choice.samples} sample(s); "
                    f"their time {choice.fp32_s * 1e3:.2f} -> {choice.chosen_s * 1e3:.2f} ms "
                    f"(-{gain * 1e3:.2f} ms, per-op profile)"]


def _stage_hillclimb(ctx: TuneContext, graph, cfg: EngineConfig, report: StageReport,
                     limits=None):
    from hwtune.tuners import hillclimb

    ctx.progress("hillclimb", f"per-op thread counts inside a {cfg.threads}-thread team "
                              f"(strategy {ctx.strategy})")
    res = hillclimb.tune_op_threads(ctx, graph, team_threads=cfg.threads, limits=limits)
    report.measured, report.reused = res.measured, res.reused
    report.trials = res.measured + res.reused
    report.stopped = res.stopped
    changed = {k: v for k, v in res.op_threads.items() if v != cfg.threads}
    why = [f"hillclimb: {len(changed)} of {len(graph.ops)} ops run best on fewer than "
           f"{cfg.threads} threads"]
    return res, why


def tune_graph(db, host_key: str, graph, graph_hash: str, opts: TuneOptions, *,
               cpus: Sequence[int], model_path: str = "", progress: Optional[Progress] = None,
               on_plan=None, run_options: Optional[dict] = None):
    """Tune graph; returns its TuneResult, or with opts.plan_only the Plan
    (the probe is its only measurement; nothing is stored). on_plan(plan):
    called once before the first stage (a progress bar's total).
    run_options: recorded with the run besides the tuning options (the
    command's --set values, the training step's loss and optimizer)."""
    from hwtune.engine.effective import effective_graph
    from hwtune.engine.lowered import lowered_doc

    opts.check()
    progress = progress or _noop
    watch = clock.Stopwatch()
    usable = min(usable_cpu_count(cpus), len(cpus))
    over = [t for t in opts.conv_threads or () if t > usable]
    if over:
        raise UsageError(f"invalid --conv-threads {over[0]}: this run may use {usable} "
                         f"CPU(s); tune at counts up to {usable}")
    # The whole budget's deadline ends the profile and the final comparison;
    # each search stage and workload gets the plan's share of it.
    deadline = clock.deadline_after(opts.budget_s)
    ctx = TuneContext(db, None, host_key, cpus=list(cpus), progress=progress,
                      search=opts.search, trials=opts.trials, reps=opts.reps, seed=opts.seed,
                      strategy=opts.strategy, storage=opts.storage)
    stored_row = db.engine_config(host_key, graph_hash, "tuned")
    plan = make_plan(ctx, graph, graph_hash, opts, usable=usable,
                     stored=stored_row is not None)
    if opts.plan_only:
        return plan
    for line in plan.lines():
        progress("plan", line)
    if on_plan is not None:
        on_plan(plan)
    run_id = db.start_run(host_key, "tune", dict(opts.recorded(), **(run_options or {}),
                                                 model=model_path, graph_hash=graph_hash))
    ctx.run_id = run_id
    sweep_item = plan.item("sweep", "executors x threads")
    if opts.budget_s is not None:
        ctx.deadline = clock.deadline_after(
            sweep_item.allot_s if sweep_item is not None and not sweep_item.reused
            else opts.budget_s * SWEEP_SHARE)
    stages: Dict[str, StageReport] = {}
    why: List[str] = []

    def stage(name: str) -> Optional[StageReport]:
        """The stage's report when it runs now (asked for, budget left)."""
        if not opts.runs(name):
            return None
        if ctx.out_of_time():
            stages[name] = StageReport(stopped="budget", note="not started: the budget ran out")
            return None
        return stages.setdefault(name, StageReport())

    with finishing(db, run_id, "tuning run", kept="every finished trial is kept and the next "
                   "tune-graph resumes from them"):
        # The C runner (hwtune-run) runs a graph that was only tuned, too.
        # Inside `finishing`: a signal now still marks the run interrupted.
        db.put_lowered(graph_hash, lowered_doc(graph))
        db.add_fact(run_id, "tune_plan", plan.to_json())
        stored, stored_id = finals.stored_candidate(db, host_key, graph, graph_hash, cpus, why,
                                                    tolerance=opts.max_error)
        base = default_config(usable)
        default = Candidate("default", base, graph)
        cfg, tuned_graph = base, graph
        accuracy = None
        partial: List[Candidate] = []
        latency: Dict[str, float] = {"best": plan.latency_s, "default": plan.latency_s}
        n_final = finals.FINAL_CANDIDATES + (stored is not None)

        rep = stage("sweep")
        if rep is not None:
            took = clock.Stopwatch()
            cfg, lines, measured = _stage_sweep(ctx, graph, graph_hash, cfg, rep)
            latency.update(measured)
            rep.seconds = took.elapsed()
            why += lines
            if cfg != base:
                partial.append(Candidate("sweep", cfg, graph))
        if deadline is not None:
            # Later searches stop early enough to leave the profile and the
            # final comparison their time at the latencies measured so far.
            ctx.deadline = deadline - finals.final_reserve(latency, n_final, plan.open_s,
                                                           opts.budget_s)
        # Planned again for the team the sweep chose, at its latency, with
        # the time that is left.
        later = [s for s in ("conv", "hillclimb") if opts.runs(s)]
        replan = _replan(ctx, graph, graph_hash, opts, usable=usable, team=cfg.threads,
                         latency_s=latency["best"], open_s=plan.open_s, stages=later,
                         seconds=(None if deadline is None else
                                  max(0.0, ctx.deadline - clock.monotonic())))
        ledger = Ledger()

        def conv_limits(key):
            item = replan.item("conv", key)
            if deadline is None or item is None or item.reused:
                return None
            seconds = ledger.grant(item)
            if not item.cut:
                # Its whole search fits: estimates are not deadlines (the
                # stage's own deadline still holds).
                return None
            trials = item.trials_in(seconds)
            # The search stops early enough to leave the workload's tail
            # (its confirmation rounds) inside its share.
            return trials, max(0.0, seconds - item.tail_s), trials < item.trials

        def climb_limits(key):
            item = replan.item("hillclimb", key)
            if deadline is None or item is None or item.reused:
                return None
            seconds = ledger.grant(item)
            return seconds if item.cut else None

        rep = stage("conv") if conv_ops(graph) else None
        if rep is not None:
            took = clock.Stopwatch()
            op_params, lines = _stage_conv(ctx, graph, cfg, rep, conv_limits,
                                           opts.conv_counts(graph, usable, cfg.threads)[1:])
            rep.seconds = took.elapsed()
            why += lines
            if op_params:
                cfg = replace(cfg, op_params=op_params)
                tuned_graph = effective_graph(graph, cfg)
                partial.append(Candidate("sweep+conv", cfg, tuned_graph))

        choice = None
        tol = None  # the output error the tuned graph may have (int8 / bf16 ops)
        if opts.low_precisions():
            rep = stages.setdefault("precision", StageReport())
            took = clock.Stopwatch()
            choice, lines = _stage_precision(ctx, graph, cfg, opts, rep)
            rep.seconds = took.elapsed()
            why += lines
            if choice.op_precision:
                cfg = replace(cfg, op_precision=choice.op_precision)
                tuned_graph = effective_graph(graph, cfg)
                label = "+".join([s for s in ("sweep", "conv") if s in stages] + ["precision"])
                tol = opts.max_error
                partial.append(Candidate(label, cfg, tuned_graph, tolerance=tol))

        rep = stage("hillclimb")
        climbed = None
        if rep is not None:
            took = clock.Stopwatch()
            # Its workloads are those of the graph the CONV stage rewrote.
            replan = _replan(ctx, tuned_graph, graph_hash, opts, usable=usable, team=cfg.threads,
                             latency_s=latency["best"], open_s=plan.open_s,
                             stages=["hillclimb"],
                             seconds=(None if deadline is None else
                                      max(0.0, ctx.deadline - clock.monotonic())))
            ledger = Ledger()
            if cfg.threads < 2:
                rep.note = "teams of 1 thread: no per-op thread count to choose"
                why.append(f"hillclimb: skipped ({rep.note})")
            else:
                res, lines = _stage_hillclimb(ctx, tuned_graph, cfg, rep, climb_limits)
                climbed = res
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
                    partial += [Candidate(label, c, tuned_graph, tolerance=tol)
                                for label, c in pin_choices("corun", corun)]
            rep.seconds = took.elapsed()
            if res_tol := (opts.max_error if cfg.op_precision else None):
                partial = [replace(c, tolerance=res_tol) if c.graph is tuned_graph else c
                           for c in partial]

        cuts = _cuts(ctx, graph, tuned_graph, graph_hash, opts, usable=usable, team=cfg.threads,
                     latency_s=latency["best"], open_s=plan.open_s, stages=stages,
                     climbed=climbed)
        if cuts:
            why.append(f"cut: {len(cuts)} stage(s)/workload(s) by the budget; resuming needs "
                       f"~{sum(c['resume_s'] for c in cuts):.1f} s more (listed under 'cut')")
        # Profiled op costs order the critical-path scheduler's levels.
        # Named for what it is until the verdict: 'tuned' is only what is
        # stored and `hwtune run` uses (a candidate that wins in one process
        # and not across processes is never shown as tuned).
        final = Candidate("search result", cfg, tuned_graph, tolerance=tol)
        if cfg.sched.needs_costs:
            from hwtune.tuners.executor_sweep import profile_op_costs
            progress("profile", "per-op costs under the tuned config")
            final.op_cost = profile_op_costs(tuned_graph, cfg, **_profile_runs(deadline, latency))
        for c in partial:
            if c.config.sched.needs_costs and not c.op_cost:
                c.op_cost = final.op_cost if c.graph is tuned_graph else {}
        fin = finals.decide_and_store(db, host_key, graph, graph_hash, run_id, default=default,
                                      partial=partial, tuned=final, stored=stored,
                                      stored_id=stored_id, progress=progress,
                                      deadline=deadline, confirm_s=(
                                          0.0 if deadline is None else confirms.reserve(
                                              max(latency["best"], latency["default"]),
                                              plan.open_s, 2 + (stored is not None),
                                              budget_s=opts.budget_s)))
        why += fin.why
        chosen, cands = fin.chosen, fin.candidates
        result = TuneResult(run_id=run_id, default=default, chosen=chosen, candidates=cands,
                            stages=stages, why=why, tuning_s=watch.elapsed(),
                            config_id=fin.config_id, accuracy=accuracy,
                            speedup_ci=fin.speedup, kept_stored=fin.kept_stored, plan=plan,
                            cuts=cuts, verdict=fin.verdict,
                            precision=choice.to_json() if choice is not None else None)
        db.add_fact(run_id, "tune_summary", {
            "model": graph.name, "graph_hash": graph_hash,
            "default": {"config": default.config.to_json(), "median_s": default.median_s,
                        "mad_s": default.mad_s},
            "tuned": ({} if chosen is default else
                      {"config": chosen.config.to_json(), "median_s": chosen.median_s,
                       "mad_s": chosen.mad_s, "label": chosen.label}),
            "verdict": fin.verdict,
            "candidates": [{"label": x.label, "median_s": x.median_s, "mad_s": x.mad_s}
                           for x in cands],
            "speedup": result.speedup,
            "speedup_ci": fin.speedup.to_json() if fin.speedup else None,
            "kept_stored": result.kept_stored, "cuts": cuts,
            "resume_s": result.resume_s, "why": why, "tuning_s": result.tuning_s,
            "stages": {k: vars(v) for k, v in stages.items()}, "accuracy": accuracy,
            "precision": result.precision})
        return result

