"""Graphi's medium models on its 68-core machine (configs/machines/
xeon-phi-7250.toml), predicted from this host's profiles, beside what the
paper measured (Tang et al., "Scheduling Computation Graphs of Deep
Learning Models on Manycore CPUs"):

  Figure 6 (section 7.3): the best n x k of Graphi against a sequential
  engine on 64 cores (S64): "for LSTM and PhasedLSTM, the highest
  improvements ranged from 2.3x to 3.1x, and for PathNet, they ranged from
  1.2x to 2.1x" (over small, medium and large); GoogleNet "around 1.2x".
  Table 2 (section 7.4): Graphi's time relative to the naive shared-queue
  scheduler on the medium models, per n x k.

Graphi measured training steps (forward and backward); hwtune's models are
the forward graphs of the same shapes (Table 1), and `bench_plan.py graphi
--train` predicts their training steps (hwtune.graph.autodiff), as the
paper timed them: the backward pass doubles the parallel operations."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from hwtune.planner.costmodel import CostModel

# n x k of Graphi's section 7.3 (64 cores: 2 of the 68 ran its scheduler and
# its light-weight executor); PathNet also 6 x 10, GoogleNet 3 x 10.
SPLITS = ((2, 32), (4, 16), (8, 8), (16, 4), (32, 2))
SEQUENTIAL = (1, 64)


@dataclass(frozen=True)
class PaperRow:
    model: str              # bundled model name
    label: str              # as the paper names it
    fig6: Tuple[float, float]  # best n x k vs S64, the paper's range
    table2: Dict[str, float]   # n x k -> Graphi time / naive time
    extra: Tuple[Tuple[int, int], ...] = ()


PAPER = (
    PaperRow("lstm_medium", "LSTM", (2.3, 3.1),
             {"2x32": 0.86, "4x16": 0.88, "8x8": 0.82, "16x4": 0.91, "32x2": 0.87}),
    PaperRow("phased_lstm_medium", "PhasedLSTM", (2.3, 3.1),
             {"2x32": 0.81, "4x16": 0.85, "8x8": 0.91, "16x4": 0.86, "32x2": 0.85}),
    PaperRow("pathnet_medium", "PathNet", (1.2, 2.1),
             {"2x32": 0.88, "4x16": 0.92, "8x8": 0.89, "16x4": 0.91, "32x2": 0.92},
             extra=((6, 10),)),
    # "around 1.2x": taken as 1.1-1.3
    PaperRow("inception_medium", "GoogleNet", (1.1, 1.3),
             {"2x32": 0.94, "4x16": 0.96, "8x8": 0.93, "16x4": 0.91, "32x2": 0.92},
             extra=((3, 10),)),
)


# The speedup over S64 says how badly single ops scale to 64 threads, and
# that rests on serial fractions fitted to 2-thread points of this host (one
# point per scan shape): a 2-thread speedup of 1.87x gives s = 0.07 and at
# most 11.9x on 64 threads, 1.96x gives s = 0.02 and 28x. The benchmark
# prints the best speedup again with every serial fraction halved and
# doubled: the band a 2-core host cannot narrow (training steps of the
# medium models on the Xeon Phi description, 2-vCPU AMD EPYC Zen 3, avx2:
# LSTM 2.10-2.91x around 2.42x, PathNet 1.72-3.11x around 2.26x). The band
# is what the fits give, never raised toward the paper's range: a fit of 0
# halves and doubles to 0, and a row outside the range says why (reasons()).
SERIAL_SCALES = (0.5, 2.0)


def with_serial_scale(p, scale: float):
    """A copy of Predictor p whose every serial fraction is multiplied by
    scale (at most 1); close() it after use. A fit stopped at an edge
    (SerialFit.at_edge) is not scaled: past this host's cores its family's,
    scaled, stands in for it. A scaled fit is a hypothesis, not a fit to
    points: its error is cleared so that a fraction scaled to 1 does not
    read as stopped at an edge."""
    def hypothesis(f):
        if f.at_edge:
            return f
        return dataclasses.replace(f, serial_fraction=min(1.0, f.serial_fraction * scale),
                                   median_rel_err=0.0)
    fits = {k: hypothesis(f) for k, f in p.model.fits.items()}
    return dataclasses.replace(p, model=CostModel(p.model.host, p.model.target, fits),
                               _tables={}, _sim=None)


# A Table 2 ratio this far above 1 is named as critical-path's own loss:
# 1% is about the spread of the simulated ratios at 16x4 and 32x2, where
# no order can win (the bound is 0.99-1.00 there).
LOSS_NOTE = 0.01


def s64_parts(p) -> Dict[str, float]:
    """Shares of S64's op time (every op on 64 threads, in the sequential
    order) by cost-model part (CostModel.parts): how much of it the 64
    threads split, and what they do not ('serial', 'memory', 'forkjoin');
    with 'serial_zero', the share of that op time in op types whose serial
    fraction is 0 past this host's cores."""
    t = SEQUENTIAL[1]
    q = p.model.parts(p.t1_for("sequential"), [d.bytes for d in p.ops],
                      [d.fit_type for d in p.ops], t, flops=[d.flops for d in p.ops])
    col = {k: q[k][:, t - 1] for k in ("serial", "parallel", "memory", "forkjoin")}
    ran = np.array([not d.folded for d in p.ops])
    total = float(sum(v[ran].sum() for v in col.values()))
    out = {k: float(v[ran].sum()) / total if total > 0 else 0.0 for k, v in col.items()}
    zero = np.array([p.model.serial_fraction(
        d.fit_type, d.flops / d.bytes if d.bytes else 0.0, d.bytes, d.flops, far=True) == 0.0
        for d in p.ops])
    op_s = sum(col.values())
    out["serial_zero"] = float(op_s[ran & zero].sum()) / total if total > 0 else 0.0
    return out


def reasons(r: dict) -> List[str]:
    """Why a predicted row (predict_row) falls outside the paper's ranges,
    from what the prediction itself holds: S64's parts for Figure 6 (a
    speedup over S64 is what S64 loses to 64 threads and executors win
    back), the band at halved and doubled serial fractions, and per split
    outside Table 2, the bound any order of the same op times has against
    the queue (lower_bound). Empty when every figure is inside."""
    out = []
    lo, hi = r["paper_speedup"]
    x = r["speedup"]
    if not lo <= x <= hi:
        q = r["s64_parts"]
        side = "below" if x < lo else "above"
        band = [b["speedup"] for b in r.get("serial_band") or ()]
        reach = ""
        if band:
            blo, bhi = min(band + [x]), max(band + [x])
            reach = (f"; with every serial fraction x{SERIAL_SCALES[0]:g} .. "
                     f"x{SERIAL_SCALES[-1]:g}: {blo:.2f}x .. {bhi:.2f}x, "
                     + ("reaching the range" if blo <= hi and bhi >= lo else
                        f"still {side} it"))
        out.append(
            f"Fig. 6 {x:.2f}x {side} {lo:.1f}-{hi:.1f}x: S64's op time on 64 threads is "
            f"{q['parallel']:.0%} split compute, {q['serial']:.0%} serial compute, "
            f"{q['memory']:.0%} memory traffic, {q['forkjoin']:.0%} fork-join "
            f"({q['serial_zero']:.0%} of it in op types whose fitted serial fraction is 0: "
            f"their 2-thread points here scaled as an ideal split)" + reach)
    plo, phi = r["paper_cp_over_sq_range"]
    for sp in r["splits"]:
        paper = sp.get("paper_cp_over_sq")
        ratio, bound = sp["cp_over_sq"], sp.get("bound_over_sq")
        if paper is None or plo <= ratio <= phi:
            continue
        b = "-" if bound is None else f"{bound:.3f}"
        if ratio > phi and bound is not None and bound > phi:
            why = (f"no order of these op times gets below {b} of the queue's run "
                   f"(the chain or the total work over {sp['split'].split('x')[0]} "
                   f"executors bounds it)")
        elif ratio > phi:
            why = (f"an order could reach {b} of the queue's run: critical-path's "
                   f"order and its per-op costs lose the rest")
        else:
            why = f"critical-path gains more than the paper measured (bound {b})"
        if ratio > 1.0 + LOSS_NOTE:
            # past what the bound explains: critical-path's own run is slower
            why += (f"; critical-path's run is {ratio - 1:.0%} over the queue's (its order "
                    f"or its per-op costs, such as ops it runs on one thread)")
        out.append(f"Table 2 {sp['split']} {ratio:.3f} outside {plo:.2f}-{phi:.2f}: {why}")
    return out


def best_speedup(p, paper: "PaperRow", rows_by_name) -> Tuple[float, str]:
    """S64 over the best critical-path n x k, and that n x k."""
    seq, _ = p.simulate(rows_by_name["sequential"], *SEQUENTIAL)
    best = min(((p.simulate(rows_by_name["critical-path"], n, k)[0], f"{n}x{k}")
                for n, k in SPLITS + paper.extra))
    return seq / best[0], best[1]


def _inside(x: Optional[float], lo: float, hi: float) -> Optional[bool]:
    return None if x is None else lo <= x <= hi


def lower_bound(graph, events, executors: int) -> float:
    """No order of these ops, at the durations they had in this simulated
    run, finishes before max(longest dependency chain, total work spread
    over every executor): the most any ready-queue policy can gain over this
    run is its makespan over this bound."""
    dur = {e.op: e.end_s - e.start_s for e in events}
    producer = {t: op.name for op in graph.ops for t in op.outputs}
    finish: Dict[str, float] = {}
    for i in graph.order or range(len(graph.ops)):
        op = graph.ops[i]
        ready = max((finish[producer[t]] for t in op.inputs if t in producer), default=0.0)
        finish[op.name] = ready + dur.get(op.name, 0.0)
    chain = max(finish.values(), default=0.0)
    return max(chain, sum(dur.values()) / max(executors, 1))


def predict_row(p, paper: PaperRow, rows_by_name, band: bool = True) -> dict:
    """One model: sequential on 64 cores, critical-path and shared-queue at
    every n x k, the best critical-path speedup and the per-split ratios;
    band: the best speedup again at each of SERIAL_SCALES; reasons: why a
    figure outside the paper's range is there (reasons())."""
    seq_row, cp, sq = (rows_by_name["sequential"], rows_by_name["critical-path"],
                       rows_by_name["shared-queue"])
    seq, _ = p.simulate(seq_row, *SEQUENTIAL)
    splits = []
    for n, k in SPLITS + paper.extra:
        t_cp, _ = p.simulate(cp, n, k)
        t_sq, ev = p.simulate(sq, n, k, events=True)
        label = f"{n}x{k}"
        paper_ratio = paper.table2.get(label)
        # what any ordering could gain at most over the shared queue's run
        bound = lower_bound(p.graph, ev, n) / t_sq if ev else None
        splits.append({"split": label, "cp_s": t_cp, "sq_s": t_sq, "cp_over_sq": t_cp / t_sq,
                       "bound_over_sq": bound, "paper_cp_over_sq": paper_ratio})
    best = min(splits, key=lambda s: s["cp_s"])
    speedup = seq / best["cp_s"]
    lo, hi = min(paper.table2.values()), max(paper.table2.values())
    ratios = [s["cp_over_sq"] for s in splits if s["split"] in paper.table2]
    bands = []
    for scale in (SERIAL_SCALES if band else ()):
        q = with_serial_scale(p, scale)
        try:
            x, split = best_speedup(q, paper, rows_by_name)
        finally:
            q.close()
        bands.append({"serial_scale": scale, "speedup": x, "best_split": split})
    out = {"model": paper.model, "label": paper.label, "sequential_s": seq,
            "best_split": best["split"], "best_cp_s": best["cp_s"], "speedup": speedup,
            "paper_speedup": list(paper.fig6),
            "speedup_inside": _inside(speedup, *paper.fig6),
            "cp_over_sq_range": [min(ratios), max(ratios)],
            "paper_cp_over_sq_range": [lo, hi],
            "cp_over_sq_inside": all(_inside(r, lo, hi) for r in ratios),
            "splits": splits, "serial_band": bands, "s64_parts": s64_parts(p)}
    out["reasons"] = reasons(out)
    return out


def table(results: Sequence[dict]) -> Tuple[List[str], List[List[str]]]:
    """The side-by-side table: predicted vs paper."""
    header = ["model", "best n x k", "speedup vs S64", "paper (Fig. 6)", "",
              "serial fractions x0.5 / x2", "critical-path / shared-queue",
              "paper (Table 2)", ""]
    rows = []
    for r in results:
        lo, hi = r["cp_over_sq_range"]
        plo, phi = r["paper_cp_over_sq_range"]
        rows.append([r["label"], r["best_split"], f"{r['speedup']:.2f}x",
                     f"{r['paper_speedup'][0]:.1f}-{r['paper_speedup'][1]:.1f}x",
                     "inside" if r["speedup_inside"] else "OUTSIDE",
                     " / ".join(f"{b['speedup']:.2f}x" for b in r.get("serial_band") or ())
                     or "-",
                     f"{lo:.3f}-{hi:.3f}", f"{plo:.2f}-{phi:.2f}",
                     "inside" if r["cp_over_sq_inside"] else "OUTSIDE"])
    return header, rows


def split_table(results: Sequence[dict]) -> Tuple[List[str], List[List[str]]]:
    """Per model and n x k: predicted critical-path and shared-queue
    latencies and their ratio beside Table 2's."""
    header = ["model", "n x k", "critical-path", "shared-queue", "cp / sq",
              "any order / sq (bound)", "paper"]
    rows = []
    for r in results:
        for s in r["splits"]:
            b = s.get("bound_over_sq")
            rows.append([r["label"], s["split"], f"{s['cp_s'] * 1e3:.2f} ms",
                         f"{s['sq_s'] * 1e3:.2f} ms", f"{s['cp_over_sq']:.3f}",
                         "-" if b is None else f">= {b:.3f}",
                         "-" if s["paper_cp_over_sq"] is None else f"{s['paper_cp_over_sq']:.2f}"])
    return header, rows
