"""tune-graph's final comparison: which config `hwtune run` uses from now.

The default config, every partial result of the stages, the tuned config
and the stored tuned config of a re-tune are measured interleaved, each
engine opened alone for each round as `hwtune run` runs it, each checked
against the default's outputs; verdict.py picks the winner by a paired
interval (a gain that does not show is no gain), and the winner is stored
as the tuned config, with any config it replaces kept in the run's facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

from hwtune.engine.config import EngineConfig
from hwtune.errors import HwtuneError
from hwtune.measure import OK, FixedSampling, clock
from hwtune.tuners import confirm as confirms
from hwtune.tuners import verdict as verdicts
from hwtune.tuners.context import Progress

# Interleaved repetitions of the final default-vs-candidates comparison: 15
# samples give a median whose MAD is ~2-4% here under the usual background
# load (measured on the 2-core dev VM with lstm_small and resnet18).
FINAL_REPS = 15
# ...but the whole comparison gets about this long: a 2-TFLOP model
# (inception_large, ~20 s a run here) gets fewer samples (never fewer than
# MIN_FINAL_REPS), where one run is long enough to average out load bursts.
FINAL_BUDGET_S = 120.0
MIN_FINAL_REPS = 5
# The floor of final rounds within a --budget (see pipeline.SWEEP_SHARE: the
# profile and the final comparison shrink to the time left, never below it).
MIN_BUDGET_FINAL_REPS = 3
# Untimed runs of each candidate before the comparison (the first faults in
# the arena and forms the teams; see executor_sweep.WARMUP).
FINAL_WARMUP = 2
# Each candidate's engine is opened anew for each round and closed after it
# (no other engine exists while it runs), with one untimed run first, after
# the previous engine's workers have parked (measure.settle): each chunk is
# taken as a lone `hwtune run` takes its samples. With every engine open side
# by side, issue #12's random DAG printed 2.29x in tune-graph and ~1.0x under
# `hwtune run`, and here a stored corun config of the Wide-ResNet block of
# benchmarks/unseen_graphs.py ran 8.9 ms among six open engines against 32-42
# ms alone (as `hwtune run` measured it; 2-core AMD EPYC, AVX2, load ~12).
FINAL_REWARM = 1
# Rounds of the final comparison (samples split evenly among them): each
# round opens every candidate's engine once, so the rounds are fewer than
# the samples (an open prepacks weights: ~80 ms for that Wide-ResNet block).
FINAL_ROUNDS = 5
# Candidates the budget reserves the final comparison for: the default, the
# sweep's result, sweep + CONV, corun pinned and unpinned and the tuned
# config (plus the stored one on a re-tune). Fewer leave their time to the
# final comparison's samples.
FINAL_CANDIDATES = 6
# The settle before each final sample polls the process' CPU time for at
# least one interval (measure.settling's poll_s) even when every pool is
# parked: the budget's reserve counts it.
SETTLE_POLL_S = 0.01


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
    process_s: List[float] = field(default_factory=list)  # per fresh process (confirm.py)
    # Relative output error allowed against the default's outputs: None is
    # hwtune run --check's; a config with int8 / bf16 ops gets the bound
    # tune-graph --max-error chose them within.
    tolerance: Optional[float] = None


def final_reserve(latency: Dict[str, float], candidates: int = 3,
                  open_s: float = 0.0, budget_s: Optional[float] = None) -> float:
    """Seconds the profile and the final comparison need at their floors:
    the profile's warm-up and runs of the tuned config, the warm-up and
    MIN_BUDGET_FINAL_REPS rounds (each opening the engine, with its re-warm
    run and its settle poll) of `candidates` candidates (FINAL_CANDIDATES,
    plus the stored config on a re-tune), and the confirmation of a gain in
    fresh processes (confirm.py) at its minimum."""
    from hwtune.tuners.executor_sweep import WARMUP
    best, default = latency.get("best", 0.0), latency.get("default", 0.0)
    profile = best * (WARMUP + 1)
    runs = FINAL_WARMUP + MIN_BUDGET_FINAL_REPS * (1 + FINAL_REWARM)  # a round a sample
    final = (default + (candidates - 1) * best) * runs
    opens = candidates * (1 + MIN_BUDGET_FINAL_REPS) * open_s  # warm-up + each round
    confirm = confirms.reserve(max(best, default), open_s, budget_s=budget_s)
    return profile + final + opens + candidates * MIN_BUDGET_FINAL_REPS * SETTLE_POLL_S + confirm


def full_cost(latency_s: float, candidates: int, open_s: float) -> float:
    """Seconds of the whole comparison without a budget: every candidate's
    warm-up, FINAL_REPS samples and a re-warm run and an open per round,
    and the confirmation's pairs of processes (confirm.py)."""
    return (candidates * ((FINAL_WARMUP + FINAL_REPS + FINAL_ROUNDS * FINAL_REWARM) * latency_s
                          + (1 + FINAL_ROUNDS) * open_s)
            + confirms.full_cost(latency_s, open_s))


def pin_choices(label: str, cfg: EngineConfig) -> List[Tuple[str, EngineConfig]]:
    """A scheduler that can pin is measured both ways, each with its pin
    stated, so the stored config carries a measured choice rather than the
    scheduler's default (issue #12: corun unpinned ran 7-25x slower than
    pinned on a 200-op random DAG, and a stored unpinned choice was then
    inherited by --scheduler corun)."""
    if not cfg.sched.can_pin:
        return [(label, cfg)]
    return [(f"{label} pinned", replace(cfg, pin=True)),
            (f"{label} unpinned", replace(cfg, pin=False))]


def same_config(a: EngineConfig, b: EngineConfig) -> bool:
    """The same engine settings: pinning compared as it runs (None is the
    scheduler's default), profiled op costs left aside (they are
    measurements, not settings)."""
    ja, jb = a.to_json(), b.to_json()
    ja.pop("op_cost", None)
    jb.pop("op_cost", None)
    return ja == jb


def stored_candidate(db, host_key: str, graph, graph_hash: str, cpus,
                     why: List[str], tolerance: Optional[float] = None
                     ) -> Tuple[Optional[Candidate], Optional[int]]:
    """The tuned config stored for this graph and host, as a candidate of
    the final comparison (a re-tune must beat it, not just the default);
    (None, None) when there is none. One that no longer applies (another
    hwtune's scheduler, CONV parameters for another graph, too many
    threads for this machine) is left out with a line in `why` and will
    be replaced. tolerance: the output error a stored config with int8 /
    bf16 ops may have (this run's --max-error; None holds it to fp32's, so
    a re-tune without --precision keeps an fp32 config)."""
    from hwtune.engine.effective import effective_graph

    row = db.engine_config(host_key, graph_hash, "tuned")
    if row is None:
        return None, None
    try:
        cfg = EngineConfig.from_db_row(row)
        cfg.validate(list(cpus), [op.name for op in graph.ops],
                     origin=f"the stored tuned engine config of graph {graph_hash[:12]}")
        run_graph = effective_graph(graph, cfg)
    except HwtuneError as exc:
        why.append(f"stored: the stored tuned config does not apply here ({exc}); a new one "
                   f"replaces it")
        return None, row["id"]
    return Candidate("stored", cfg, run_graph, op_cost=dict(row.get("op_cost") or {}),
                     tolerance=tolerance if cfg.op_precision else None), row["id"]


def store_verdict(db, host_key: str, graph, graph_hash: str, run_id: int, chosen: Candidate,
                  held: Optional[Candidate], stored_id: Optional[int]) -> int:
    """Store the chosen config as the tuned one. A stored config it replaces
    stays in the run's facts ('replaced_config'), with the figures both
    had in this run's interleaved comparison (held: the stored config as
    measured now, None when it was not)."""
    from hwtune.engine.lowered import lowered_doc

    if stored_id is not None:
        old = db.engine_config(host_key, graph_hash, "tuned")
        measured = held is not None and held.status == OK and held.samples
        db.add_fact(run_id, "replaced_config", {
            "config_id": stored_id,
            "config": old and {k: v for k, v in old.items() if k != "lowered"},
            "measured": ({"median_s": held.median_s, "mad_s": held.mad_s,
                          "samples": held.samples} if measured else
                         {"status": held.status, "note": held.note} if held else None),
            "by": {"label": chosen.label, "median_s": chosen.median_s, "mad_s": chosen.mad_s,
                   "samples": chosen.samples},
            "ratio": (verdicts.ratio(held.samples, chosen.samples).to_json()
                      if measured and chosen.samples else None)})
    fields = dict(chosen.config.db_fields(), op_cost=dict(chosen.op_cost))
    return db.put_engine_config(
        host_key, graph_hash, source="tuned", **fields,
        lowered=lowered_doc(chosen.graph) if chosen.graph is not graph else None)


def measure_final(cands: List[Candidate], progress: Progress,
                  deadline: Optional[float] = None) -> None:
    """The verdict: every candidate's engine sampled interleaved (round
    robin, so a burst of background load hits all alike), each checked
    against the default's outputs first (a candidate that computes
    something else cannot win); at most FINAL_BUDGET_S of samples, and
    with a deadline as many rounds as fit before it (at least
    MIN_BUDGET_FINAL_REPS, and no round starts after the deadline: the
    budget's sample estimate counts runs, not each round's engine opens and
    re-warm runs, which made inception_small's final comparison end 17 s
    after a 60 s budget)."""
    from hwtune.engine.runner import open_engine
    from hwtune.measure import settle
    from hwtune.measure.engine import FIRST, measure_engines

    limit_s, low = FINAL_BUDGET_S, MIN_FINAL_REPS
    if deadline is not None:
        limit_s, low = min(limit_s, max(deadline - clock.monotonic(), 0.0)), MIN_BUDGET_FINAL_REPS
    policy = FixedSampling(FINAL_REPS, rounds=FINAL_ROUNDS, budget_s=limit_s, min_reps=low)

    def on_round(r, n):
        progress("final", f"default vs {len(cands) - 1} candidate(s), interleaved: "
                          f"{n}/{policy.planned}")

    got = measure_engines([lambda c=c: open_engine(c.graph, c.config, c.op_cost or None)
                           for c in cands], policy, warmup=FINAL_WARMUP, reference=FIRST,
                          outputs=cands[0].graph.outputs, on_round=on_round,
                          settle=settle, settle_each=True, rewarm=FINAL_REWARM, fresh=True,
                          deadline=deadline, tolerances=[c.tolerance for c in cands])
    for c, m in zip(cands, got):
        c.samples, c.status, c.note = list(m.samples), m.status, m.note
        c.median_s, c.mad_s = (m.median, m.mad) if m.status == OK else (None, None)
    if cands[0].status != OK:
        raise HwtuneError(f"the default config of {cands[0].graph.name} failed in the final "
                          f"comparison: {cands[0].note}")


@dataclass
class Final:
    """What the final comparison decided."""
    candidates: List[Candidate]
    chosen: Candidate
    speedup: Any                        # verdict.Ratio: default / chosen, paired
    kept_stored: bool
    config_id: Optional[int]
    why: List[str]
    # The one verdict every format shows (verdict.summary): what `hwtune run`
    # uses now, with its figure, and a gain that did not hold across processes.
    verdict: Dict[str, Any] = field(default_factory=dict)


def drop_stored(db, host_key: str, graph_hash: str, run_id: int, held: Optional[Candidate],
                default: Candidate, stored_id: int) -> None:
    """The default beat the stored tuned config (or the stored one no longer
    applies): it is removed, so `hwtune run` uses the default and nothing
    named tuned is left that is not; the run's facts keep it
    ('replaced_config', by the default)."""
    old = db.engine_config(host_key, graph_hash, "tuned")
    measured = held is not None and held.status == OK and held.samples
    db.add_fact(run_id, "replaced_config", {
        "config_id": stored_id,
        "config": old and {k: v for k, v in old.items() if k != "lowered"},
        "measured": ({"median_s": held.median_s, "mad_s": held.mad_s, "samples": held.samples}
                     if measured else {"status": held.status, "note": held.note} if held
                     else None),
        "by": {"label": default.label, "median_s": default.median_s, "mad_s": default.mad_s,
               "samples": default.samples},
        "ratio": (verdicts.ratio(held.samples, default.samples).to_json()
                  if measured and default.samples else None)})
    db.drop_engine_config(host_key, graph_hash, "tuned")


def decide_and_store(db, host_key: str, graph, graph_hash: str, run_id: int, *,
                     default: Candidate, partial: List[Candidate], tuned: Candidate,
                     stored: Optional[Candidate], stored_id: Optional[int],
                     progress: Progress, deadline: Optional[float] = None,
                     confirm_s: float = 0.0) -> Final:
    """Measure the default, the partial results that differ from the tuned
    config, the tuned config and the stored one (unless one of them is the
    same config) interleaved; confirm a choice other than the default in
    fresh processes (confirm.py); store the choice unless it is the stored
    config itself.

    confirm_s: seconds before the deadline the interleaved comparison leaves
    to the confirmation (confirm.reserve). Sampled up to the deadline itself,
    it left none: `tune-graph mobilenet_v2.onnx --budget 300` found 1.08x in
    one process and kept the default with "no time left in --budget to
    measure it across fresh processes" (2-vCPU EPYC Zen 3), and so did every
    zoo model whose CONV stage used its whole share."""
    cands = [default] + [c for c in partial if c.config != tuned.config] + [tuned]
    if stored is not None and not any(same_config(c.config, stored.config) for c in cands):
        cands.append(stored)
    measure_final(cands, progress, None if deadline is None else deadline - confirm_s)
    why: List[str] = []
    for c in cands[1:]:
        if c.status != OK and c is not stored:
            why.append(f"final: '{c.label}' left out ({c.status}: {c.note})")
    # The stored config, or the new candidate that equals it.
    same = [c for c in cands if stored is not None and same_config(c.config, stored.config)]
    held = same[0] if same else None
    verdict = verdicts.decide(default, cands[1:], held)
    why += verdict.why
    chosen, speedup = verdict.chosen, verdict.speedup
    challenger = chosen
    if chosen is not default:
        chosen, speedup, lines = confirms.across_processes(
            default, verdict.incumbent, chosen, progress=progress, deadline=deadline)
        why += lines
    kept = held is not None and chosen is held
    if kept:
        config_id = stored_id
    elif chosen is default:
        # Nothing named tuned is stored for the default (a candidate that won
        # in one process only included); a stored config it beat is removed.
        config_id = None
        if stored_id is not None:
            drop_stored(db, host_key, graph_hash, run_id, held, default, stored_id)
    else:
        config_id = store_verdict(db, host_key, graph, graph_hash, run_id, chosen, held,
                                  stored_id)
    summary = verdicts.summary(default, verdict, challenger, chosen, speedup, config_id=config_id,
                               kept_stored=kept)
    return Final(cands, chosen, speedup, kept, config_id, why, summary)
