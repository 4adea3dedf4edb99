"""tune-graph's plan: what each stage and workload would cost, and what the
budget gives it, decided before any search measures.

The costs are trials x trial time. A workload that an earlier run of the
same model on this host measured is costed at the seconds per trial that
run measured (tuners/trial_times.py), so a rerun with a bigger budget plans
the stages the first one cut at what they cost here. The others are
estimated from one probe (the default config, opened, warmed up and sampled
as the sweep samples), which gives the graph's latency; an op's time is the
graph's latency times the op's share of the graph's work (flops plus
elements written: element-wise ops move memory rather than compute).

With --budget, the time left after the final comparison's reserve is split
like Ansor's task scheduler splits trials: each workload is weighted by
its share of the graph's time (a CONV that is half the graph gets half the
CONV time), an item never gets more than it costs, and what a capped item
leaves is shared again among the others (water-filling). An item that
gets less than it costs is cut: its search runs fewer trials and it is not
stored as tuned, so a later run with a bigger budget resumes it from its
stored trials.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

# Per trial, beyond its samples: building the one-op (or whole-graph)
# engine, checking its outputs against the peer and storing the row. Measured
# on the 2-core dev VM (AMD EPYC, AVX2) with tune-graph --only conv and
# --only hillclimb on small CONV/LSTM graphs: 4-12 ms a trial whose samples
# were below 1 ms; 10 ms is the middle of that.
TRIAL_OVERHEAD_S = 0.010
# Per climbed workload, before its trials: its one-op graph, the peer
# reference run its outputs are checked against, the pool placements.
# Measured with the transformer block of benchmarks/unseen_graphs.py under
# --budget 60 (2-core AMD EPYC, AVX2, load ~24): 0.55 s for a 2-trial climb
# of a 64x256x256 matmul whose samples add up to ~0.1 s.
CLIMB_SETUP_S = 0.2
# Opening an engine for the sweep or the final comparison (plan, arena,
# prepacked weights): the probe measures it; this is the floor when the
# probe's own open was faster than the clock can be trusted for.
MIN_OPEN_S = 0.002
# Together, the items below their fair share of the graph's time get at
# least a quarter of the search time (each 1/4n): Ansor's scheduler also
# starts every task with a round of trials before it follows the gradient.
# A quarter keeps a CONV that is 90% of the graph at >= 3/4 of the time.
MIN_WEIGHT_SHARE = 0.25


@dataclass
class Item:
    """One unit of work the plan may cut: a stage, or a workload of one."""
    stage: str
    name: str
    trials: int                         # what it would measure without a budget
    trial_s: float                      # measured-latency estimate of one trial
    weight: float                       # its share of the graph's time
    reused: bool = False                # tuned before on this host: costs nothing
    allot_s: float = 0.0
    label: str = ""                     # for people: the op names (name is the key)
    tail_s: float = 0.0                 # after its trials, whatever their number
    measured_run: Optional[int] = None  # trial_s was measured in this earlier run

    @property
    def cost_s(self) -> float:
        return 0.0 if self.reused else self.trials * self.trial_s + self.tail_s

    def trials_in(self, seconds: float) -> int:
        """Trials that fit in seconds, after the item's tail."""
        if self.trial_s <= 0:
            return self.trials
        # (a hair over, so 4.8 s of 0.1-s trials is 48, not 47.999...)
        return max(0, min(self.trials, int((seconds - self.tail_s) / self.trial_s + 1e-9)))

    @property
    def allowed_trials(self) -> int:
        if self.reused:
            return 0
        if self.allot_s >= self.cost_s:
            return self.trials
        return self.trials_in(self.allot_s)

    @property
    def cut(self) -> bool:
        return not self.reused and self.allowed_trials < self.trials

    def to_json(self) -> dict:
        return {"stage": self.stage, "name": self.name, "label": self.label,
                "trials": self.trials,
                "trial_s": self.trial_s, "weight": self.weight, "reused": self.reused,
                "measured_run": self.measured_run,
                "cost_s": self.cost_s, "allot_s": self.allot_s,
                "allowed_trials": self.allowed_trials, "cut": self.cut}


@dataclass
class Plan:
    latency_s: float                    # the default config, probed
    open_s: float
    budget_s: Optional[float]
    reserve_s: float                    # profile + final comparison
    items: List[Item] = field(default_factory=list)

    def stage_items(self, stage: str) -> List[Item]:
        return [i for i in self.items if i.stage == stage]

    def stage_allot(self, stage: str) -> float:
        return sum(i.allot_s for i in self.stage_items(stage))

    def stage_cost(self, stage: str) -> float:
        return sum(i.cost_s for i in self.stage_items(stage))

    def item(self, stage: str, name: str) -> Optional[Item]:
        return next((i for i in self.items if i.stage == stage and i.name == name), None)

    @property
    def total_cost_s(self) -> float:
        return sum(i.cost_s for i in self.items) + self.reserve_s

    @property
    def planned_s(self) -> float:
        return sum(min(i.allot_s, i.cost_s) for i in self.items) + self.reserve_s

    def cuts(self) -> List[Item]:
        return [i for i in self.items if i.cut]

    def lines(self) -> List[str]:
        out = [f"probe: the default config runs in {self.latency_s * 1e3:.3f} ms "
               f"(engine opened in {self.open_s * 1e3:.1f} ms)"]
        for stage in dict.fromkeys(i.stage for i in self.items):
            items = self.stage_items(stage)
            out.append(f"{stage}: {self.stage_cost(stage):.1f} s estimated, "
                       f"{sum(min(i.allot_s, i.cost_s) for i in items):.1f} s planned")
            for i in items:
                seen = "" if i.measured_run is None else f" (measured in run {i.measured_run})"
                state = ("reused (tuned before on this host)" if i.reused else
                         f"{i.allowed_trials} of {i.trials} trials x {i.trial_s * 1e3:.1f} ms"
                         + seen + (" CUT" if i.cut else ""))
                out.append(f"  {i.label or i.name} ({i.weight:.0%} of the graph's time): "
                           f"{state}")
        out.append(f"final comparison and profile: {self.reserve_s:.1f} s")
        budget = f" of the {self.budget_s:.0f} s budget" if self.budget_s else ""
        out.append(f"total: {self.total_cost_s:.1f} s without a budget; "
                   f"{self.planned_s:.1f} s planned{budget}")
        return out

    def to_json(self) -> dict:
        return {"latency_s": self.latency_s, "open_s": self.open_s, "budget_s": self.budget_s,
                "reserve_s": self.reserve_s, "total_cost_s": self.total_cost_s,
                "planned_s": self.planned_s, "items": [i.to_json() for i in self.items]}


def op_weights(graph) -> Dict[str, float]:
    """op name -> share of the graph's time (flops + elements written)."""
    from hwtune.graph import ops as oplib
    from hwtune.graph.info import op_flops
    w = {op.name: float(op_flops(graph, op) +
                        sum(oplib.numel(graph.shapes[n]) for n in op.outputs))
         for op in graph.ops}
    total = sum(w.values()) or 1.0
    return {k: v / total for k, v in w.items()}


def allocate(items: Sequence[Item], seconds: float) -> None:
    """Water-filling by weight: every item gets seconds x its weight share,
    never more than it costs; what capped items leave goes round again.
    An item's weight is at least MIN_WEIGHT_SHARE / the number of items, so
    that the many tiny element-wise workloads of a graph are not all cut to
    nothing by one heavy CONV."""
    for i in items:
        i.allot_s = 0.0
    left = max(0.0, seconds)
    open_ = [i for i in items if not i.reused and i.cost_s > 0]
    floor = MIN_WEIGHT_SHARE / max(1, len(open_))

    def w(i):
        return max(i.weight, floor)
    while open_ and left > 1e-9:
        total_w = sum(w(i) for i in open_)
        capped = []
        for i in open_:
            give = left * w(i) / total_w
            if i.allot_s + give >= i.cost_s:
                capped.append(i)
        if not capped:
            for i in open_:
                i.allot_s += left * w(i) / total_w
            left = 0.0
            break
        for i in capped:
            left -= i.cost_s - i.allot_s
            i.allot_s = i.cost_s
        open_ = [i for i in open_ if i not in capped]


def build(graph, *, latency_s: float, open_s: float, budget_s: Optional[float],
          sweep: Optional[Item], conv: Sequence[Item], hillclimb: Sequence[Item],
          reserve_s: float, sweep_share: float) -> Plan:
    """The plan: the sweep first (it measures the latencies the others
    start from; at most sweep_share of what is left after the reserve), then
    the CONV workloads and hill-climbing groups by their share of the
    graph's time."""
    items = ([sweep] if sweep is not None else []) + list(conv) + list(hillclimb)
    plan = Plan(latency_s, max(open_s, MIN_OPEN_S), budget_s, reserve_s, items)
    if budget_s is None:
        for i in items:
            i.allot_s = i.cost_s
        return plan
    left = max(0.0, budget_s - reserve_s)
    if sweep is not None:
        sweep.allot_s = min(sweep.cost_s, sweep_share * left)
        left -= sweep.allot_s
    allocate(list(conv) + list(hillclimb), left)
    return plan




def stage_items(ctx, graph, graph_hash: str, *, usable: int, latency_s: float, open_s: float,
                stages: Sequence[str], team: Optional[int] = None,
                conv_threads: Sequence[int] = ()) -> Dict[str, list]:
    """The items of every stage that will run, costed from the probe, or at
    the trial time an earlier run of this graph measured for the workload
    (tuners/trial_times.py). Trials already stored count as done (a rerun
    resumes them); a workload tuned before on this host is reused.
    conv_threads: the thread counts CONV workloads are tuned at besides the
    team's (an item per workload and count, named "<key>@<t>t")."""
    from hwtune.tuners import conv_grad, conv_local, executor_sweep, hillclimb
    from hwtune.tuners.trial_times import TrialTimes

    weights = op_weights(graph)
    reps = ctx.reps
    out: Dict[str, list] = {"sweep": [], "conv": [], "hillclimb": []}
    if "sweep" in stages:
        configs = executor_sweep.candidate_configs(
            usable, width=executor_sweep.graph_width(graph))
        configs += executor_sweep.pin_variants(configs)
        store = ctx.store(tuner=executor_sweep.TUNER, subject=graph_hash, threads=usable)
        left = [c for c in configs
                if store.lookup(executor_sweep.config_params(c)) is None]
        trial_s = open_s + (executor_sweep.WARMUP + reps) * latency_s
        out["sweep"].append(Item("sweep", "executors x threads", len(left) or len(configs),
                                 trial_s, 1.0, reused=not left))
    # The later stages tune for the sweep's team; before it has run the
    # plan costs them for one team of every usable CPU (the default), and
    # the pipeline plans them again with the team the sweep chose.
    team = team or usable
    times = TrialTimes(ctx.db, ctx.host_key, graph_hash, reps) \
        if "conv" in stages or "hillclimb" in stages else None
    counts = list(dict.fromkeys([team] + [t for t in conv_threads if t != team]))
    for threads in counts if "conv" in stages else ():
        # After the search: the default's trial, and the confirmation
        # rounds of the best point of each of the top layouts and the
        # default, interleaved.
        out["conv"] += [
            _search_item(ctx, times, weights, conv_local.TUNER, key, names,
                         conv_local.planned_trials(ctx, wl.space(ctx.isa)),
                         conv_local.TOP_K + 1, latency_s=latency_s, team=team, threads=threads)
            for key, (wl, names) in conv_local.workload_groups(graph).items()]
    for threads in counts if "conv" in stages else ():
        # A training step's CONV gradients with knobs of their own
        # (tuners/conv_grad.py): a full search of the space unless --trials
        # says, then the best point and the default confirmed.
        out["conv"] += [
            _search_item(ctx, times, weights, wl.tuner, key, names,
                         ctx.trials if ctx.trials is not None else wl.space().size(), 2,
                         latency_s=latency_s, team=team, threads=threads)
            for key, (wl, names) in conv_grad.workload_groups(graph).items()]
    if "hillclimb" in stages and team >= 2:
        space = hillclimb.thread_space(team, ctx.cpus)
        folded = hillclimb.folded_ops(graph)
        for g in hillclimb.group_ops(graph):
            if all(n in folded for n in g.ops):
                continue  # computed once at prepare: the climb skips it (no trial, no time)
            done = ctx.db.tuned(ctx.host_key, tuner=hillclimb.TUNER, subject=g.workload_key,
                                isa=ctx.isa, threads=team)
            op_s = latency_s * weights[g.ops[0]]
            # A climb measures every count up to the best plus one (the
            # space size bounds it); samples until MIN_SAMPLE_S of op time.
            per = max(hillclimb.MIN_REPS * op_s, min(hillclimb.MIN_SAMPLE_S,
                                                     hillclimb.MAX_REPS * op_s))
            seen = times.get(hillclimb.TUNER, g.workload_key, ctx.isa)
            out["hillclimb"].append(Item("hillclimb", g.workload_key, space.size(),
                                         seen[0] if seen else TRIAL_OVERHEAD_S + per,
                                         sum(weights[n] for n in g.ops),
                                         reused=done is not None,
                                         label=f"{g.op_type} {_label(g.ops)}",
                                         tail_s=CLIMB_SETUP_S,
                                         measured_run=seen[1] if seen else None))
    return out


def _search_item(ctx, times, weights, tuner: str, key: str, names, trials: int,
                 confirmed: int, *, latency_s: float, team: int, threads: int) -> Item:
    """The conv stage's item of one workload's knob search at `threads`:
    `trials` trials (those stored count as done; tuned before on this host:
    reused), then the default's trial and CONFIRM_ROUNDS rounds of
    `confirmed` points interleaved. Named "<key>@<t>t" at another count
    than the team's."""
    from hwtune.tuners import conv_local
    done = ctx.db.tuned(ctx.host_key, tuner=tuner, subject=key, isa=ctx.isa, threads=threads)
    stored = len(ctx.store(tuner=tuner, subject=key, threads=threads).rows())
    # One op's share of the graph's time at the team size, each sample at
    # least the workload measure's minimum sample length; at another count,
    # scaled by team / threads (perfect scaling; issue #10's ResNet-18 3x3
    # rows ran 1.1-2.6x faster on 2 threads than on 1, mostly below 2x, so
    # the estimate for fewer threads errs long, on the side of the budget).
    op_s = max(latency_s * weights[names[0]] * team / threads, conv_local.MIN_SAMPLE_S)
    trial_s = TRIAL_OVERHEAD_S + ctx.reps * op_s
    tail = trial_s + conv_local.CONFIRM_ROUNDS * confirmed * op_s
    seen = times.get(tuner, key, ctx.isa, threads)
    other = threads != team
    return Item("conv", f"{key}@{threads}t" if other else key, max(1, trials - stored),
                seen[0] if seen else trial_s, sum(weights[n] for n in names),
                reused=done is not None,
                label=_label(names) + (f" @{threads}t" if other else ""),
                tail_s=tail, measured_run=seen[1] if seen else None)


def _label(names: Sequence[str]) -> str:
    return ", ".join(names[:3]) + (f" (+{len(names) - 3})" if len(names) > 3 else "")


class Ledger:
    """Hands out the plan's seconds item by item; time an item leaves unused
    (it finished early, or was reused) carries over to the next ones, and
    an overrun is taken back from them."""

    def __init__(self):
        from hwtune.measure import clock
        self._watch = clock.Stopwatch()
        self._granted = 0.0

    def grant(self, item: Item) -> float:
        carry = self._granted - self._watch.elapsed()
        self._granted += item.allot_s
        return max(0.0, item.allot_s + carry)
