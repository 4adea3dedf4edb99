"""Tuner-quality benchmark (issue #4): do the searches find what exhaustive
enumeration finds?

Run with the installed package:  python benchmarks/bench_tuners.py [--threads N]

(a) CONV template local search on ResNet-18 workloads small enough to
    enumerate: the exhaustive grid's best vs Optuna TPE with at most 30% of
    the grid's trials (goal: within 3% of the exhaustive best). Also Optuna
    replayed on the grid's measured table (several seeds, no measurement):
    the search's quality without the machine's noise.
(b) Per-op thread hill climbing vs an exhaustive thread sweep on a few ops of
    lstm_medium and resnet18 (goal: within 2%).

Both searches measure independently (no shared trials). Their winners are
then re-measured interleaved, round-robin, so a burst of load from the other
users of this shared machine hits both alike and the % compares like with
like; figures are medians. Goals end in PASS/MISS.
"""

from __future__ import annotations

import argparse
import os

from hwtune.native.isa import selected_isa
from hwtune.native.threads import allowed_cpus
from hwtune.measure import clock
from hwtune.measure.stats import median
from hwtune.tuners.conv_local import (DEFAULT_BUDGET_FRACTION, ConvMeasure, ConvWorkload,
                                      confirm)
from hwtune.tuners.loop import TrialTimeout, run_search
from hwtune.tuners.search import OK, Outcome, Space, key_of, make_search

MODELS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "models")

GOAL_OPTUNA = 0.03      # issue #4: within 3% of the exhaustive best ...
MAX_FRACTION = 0.30     # ... with at most 30% of its trials
# The budget used: the tuner's default (conv_local.DEFAULT_BUDGET_FRACTION).
OPTUNA_FRACTION = DEFAULT_BUDGET_FRACTION
# Seeds for the replay of the grid's table (no measurement: seconds each).
REPLAY_SEEDS = range(5)
GOAL_CLIMB = 0.02       # issue #4: hill climbing within 2% of exhaustive

# ResNet-18 batch-1 workloads small enough to enumerate within the budget:
# the 1x1 stride-2 shortcut convs (12.8 MFLOP each, 864-900 points; a grid
# takes ~40 s here under load, the 3x3 layers' grids take 4-5 minutes).
CONV_WORKLOADS = {
    "res3 1x1/2 64->128 @56": ConvWorkload((1, 64, 56, 56), (128, 64, 1, 1), False, (2, 2),
                                           (0, 0)),
    "res4 1x1/2 128->256 @28": ConvWorkload((1, 128, 28, 28), (256, 128, 1, 1), False, (2, 2),
                                            (0, 0)),
    "res5 1x1/2 256->512 @14": ConvWorkload((1, 256, 14, 14), (512, 256, 1, 1), False, (2, 2),
                                            (0, 0)),
}
# Shorter samples than the tuner's default keep the grids (~870 trials
# each) inside the 3-minute budget; grid and Optuna use the same settings.
REPS, MIN_SAMPLE_S = 3, 0.001
# Final interleaved re-measure: rounds x (one >= FINAL_SAMPLE_S sample each).
FINAL_ROUNDS, FINAL_SAMPLE_S = 25, 0.005

# (model, op name): a large and a small GEMM, element-wise ops where one
# thread may win, and two conv layers.
CLIMB_OPS = (("lstm_medium", "XW1.1"), ("lstm_medium", "L1.1.hw"), ("lstm_medium", "L1.1.si"),
             ("lstm_medium", "L1.1.gates"), ("resnet18", "B4a.conv1"), ("resnet18", "B5b.relu1"))


def pct(a: float, b: float) -> str:
    return f"{(a / b - 1) * 100:+.1f}%"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


# ---------------------------------------------------------------- (a) CONV

def _interleaved_conv(m: ConvMeasure, points) -> list:
    """Median seconds of each params, sampled round-robin on fresh plans."""
    return [median(xs) for xs in confirm(m, points, FINAL_ROUNDS, FINAL_SAMPLE_S)]


def replay(space: Space, history, budget: int) -> list:
    """Optuna on the grid's own table instead of the machine: what the
    search finds with a fixed landscape, free of measurement noise. Returns
    each seed's best as a fraction above the table's minimum."""
    table = {key_of(p): o for p, o in history}
    best = min(o.seconds for _, o in history if o.status == OK)

    def lookup(p):
        o = table[key_of(p)]
        if o.status != OK:
            raise TrialTimeout(o.note or o.status)
        return Outcome(OK, o.seconds)

    return [run_search(make_search("optuna", space, seed=s, max_trials=budget), lookup).best_s
            / best - 1 for s in REPLAY_SEEDS]


def bench_conv(threads: int, isa: str, seed: int, n_workloads: int) -> bool:
    print(f"(a) CONV local search, {threads} thread(s), {isa}: exhaustive grid vs Optuna TPE "
          f"(<= {OPTUNA_FRACTION:.0%} of the grid's trials)")
    all_ok = True
    for name, wl in list(CONV_WORKLOADS.items())[:n_workloads]:
        space = Space(wl.knobs(isa))
        size = space.size()
        m = ConvMeasure(wl, threads=threads, isa=isa, reps=REPS, min_sample_s=MIN_SAMPLE_S)
        d = m(wl.default_params(isa))  # sets the slow-point limit, as the tuner does
        m.limit_s = max(0.05, 10 * d.seconds) if d.status == OK else None

        watch = clock.Stopwatch()
        grid = make_search("grid", space)
        g = run_search(grid, m)
        t_grid = watch.elapsed()
        ranked = sorted((o.seconds, i) for i, (_, o) in enumerate(grid.history)
                        if o.status == OK)

        budget = int(OPTUNA_FRACTION * size)
        watch = clock.Stopwatch()
        opt = make_search("optuna", space, seed=seed, max_trials=budget)
        o = run_search(opt, m)
        t_opt = watch.elapsed()
        # Where Optuna's pick sits in the grid's own measurements.
        rank = next(r for r, (_, i) in enumerate(ranked)
                    if grid.history[i][0] == o.best_params) + 1

        default = wl.default_params(isa)
        g_s, o_s, d_s = _interleaved_conv(m, [g.best_params, o.best_params, default])
        if o.best_params == g.best_params:
            o_s = g_s  # one point: its two figures differ by noise only
        ok = o_s <= g_s * (1 + GOAL_OPTUNA) and o.measured <= MAX_FRACTION * size
        all_ok &= ok
        statuses = {}
        for _, out in grid.history:
            statuses[out.status] = statuses.get(out.status, 0) + 1
        gf = wl.flops / 1e9
        counts = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
        print(f"  {name}: space {size} points ({counts}); default params {default}")
        print(f"    grid    {g.measured:4d} trials {t_grid:5.1f} s  best {g.best_params}")
        print(f"    optuna  {o.measured:4d} trials {t_opt:5.1f} s  best {o.best_params} "
              f"(rank {rank} of {len(ranked)} in the grid's table)")
        print(f"    re-measured interleaved ({FINAL_ROUNDS} rounds): default {d_s * 1e3:.3f} ms "
              f"({gf / d_s:.0f} GFLOPS), grid {g_s * 1e3:.3f} ms ({gf / g_s:.0f} GFLOPS), "
              f"optuna {o_s * 1e3:.3f} ms: optuna vs grid {pct(o_s, g_s)}  {verdict(ok)}")
        m.close()
        gaps = replay(space, grid.history, budget)
        ok_r = sum(g <= GOAL_OPTUNA for g in gaps)
        all_ok &= ok_r == len(gaps)
        seeds = f"{REPLAY_SEEDS.start}-{REPLAY_SEEDS.stop - 1}"
        print(f"    replay of the grid's table, seeds {seeds}: "
              f"optuna's best is {', '.join(f'{g * 100:+.1f}%' for g in gaps)} from the table's "
              f"minimum ({ok_r}/{len(gaps)} within {GOAL_OPTUNA:.0%})  "
              f"{verdict(ok_r == len(gaps))}")
    return all_ok


# ---------------------------------------------------------------- (b) threads

def bench_climb(max_threads: int) -> bool:
    try:
        from hwtune.tuners import hillclimb
    except ImportError:
        print("(b) TODO: hwtune.tuners.hillclimb is not installed yet; hill climbing vs "
              "exhaustive thread sweep not measured")
        return True
    from hwtune.graph import load_model

    print(f"(b) per-op thread hill climbing vs exhaustive sweep of 1..{max_threads} threads")
    if max_threads <= 2:
        print(f"    note: with {max_threads} CPUs the climb (1, then 2 if 1 was slower) and "
              f"the sweep try the same counts; the comparison only shows measurement noise")
    all_ok = True
    graphs = {}
    for model, op_name in CLIMB_OPS:
        if model not in graphs:
            graphs[model] = load_model(os.path.join(MODELS_DIR, f"{model}.json"))
        g = graphs[model]
        op = next(o for o in g.ops if o.name == op_name)
        one = hillclimb.one_op_graph(g, op)

        def seconds(t, one=one):
            out = hillclimb.measure_op(one, t)
            return out.seconds if out.status == OK else None

        c = hillclimb.climb(seconds, max_threads)
        ex = hillclimb.exhaustive(seconds, max_threads)
        t_ex = min(ex, key=ex.get)
        rounds = {c.best_threads: [], t_ex: []}
        for _ in range(9):
            for t in rounds:
                rounds[t].append(seconds(t))
        s_c, s_ex = median(rounds[c.best_threads]), median(rounds[t_ex])
        ok = s_c <= s_ex * (1 + GOAL_CLIMB)
        all_ok &= ok
        print(f"  {model}:{op.name} ({op.op}): climb -> {c.best_threads} thread(s) after "
              f"{len(c.measured)} measurements, sweep -> {t_ex}; re-measured interleaved "
              f"{s_c * 1e6:.1f} us vs {s_ex * 1e6:.1f} us ({pct(s_c, s_ex)})  {verdict(ok)}")
    return all_ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=len(allowed_cpus()),
                    help="threads per CONV trial and hill-climb limit (default: all CPUs)")
    ap.add_argument("--seed", type=int, default=0, help="Optuna seed")
    ap.add_argument("--only", choices=("conv", "climb"), help="run one part")
    ap.add_argument("--workloads", type=int, default=2, choices=(1, 2, 3),
                    help="how many CONV workloads (each ~1 minute here under load)")
    a = ap.parse_args()
    watch = clock.Stopwatch()
    isa = selected_isa()
    ok = True
    if a.only in (None, "conv"):
        ok &= bench_conv(a.threads, isa, a.seed, a.workloads)
    if a.only in (None, "climb"):
        ok &= bench_climb(a.threads)
    print(f"total {watch.elapsed():.0f} s: {'all goals met' if ok else 'goals missed'}")


if __name__ == "__main__":
    main()
