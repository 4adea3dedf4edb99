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
# LSTM 2.10-2.91x around 2.42x, PathNet 1.72-3.11x around 2.26x).
SERIAL_SCALES = (0.5, 2.0)
# The doubled end is at least this fraction: one 2-thread point cannot tell
# s = 0 from s = 0.02 (2.00x against 1.96x on two threads). One GEMM's
# 2-thread speed-up moved between 1.87x and 1.96x from one VM state to the
# next (2-vCPU AMD EPYC Zen 3, avx2), and a scan fitted every fraction but
# the GEMMs' at 0 (2-vCPU AMD EPYC Zen 4, avx512, 2026-12-05: its 2-thread
# GEMMs ran 1.92x and 2.09x), which left the band a single point (LSTM's
# training step 1.42x / 1.42x; with every fraction at least 0.02, 1.93x).
SERIAL_FLOOR = 0.02


def with_serial_scale(p, scale: float, floor: float = 0.0):
    """A copy of Predictor p whose every serial fraction is multiplied by
    scale, then raised to floor (at most 1); close() it after use. A fit
    stopped at an edge (SerialFit.at_edge) is not scaled: past this host's
    cores its family's, scaled, stands in for it; only a floor above its
    fraction moves it (a fit stopped at 0). A scaled fit is a hypothesis,
    not a fit to points: its error is cleared so that a fraction scaled to
    1 does not read as stopped at an edge."""
    def hypothesis(f):
        s = f.serial_fraction if f.at_edge else f.serial_fraction * scale
        if f.at_edge and s >= floor:
            return f
        return dataclasses.replace(f, serial_fraction=min(1.0, max(s, floor)),
                                   median_rel_err=0.0)
    fits = {k: hypothesis(f) for k, f in p.model.fits.items()}
    return dataclasses.replace(p, model=CostModel(p.model.host, p.model.target, fits),
                               _tables={}, _sim=None)


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
    band: the best speedup again at each of SERIAL_SCALES (the doubled end
    at least SERIAL_FLOOR)."""
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
        q = with_serial_scale(p, scale, SERIAL_FLOOR if scale > 1 else 0.0)
        try:
            x, split = best_speedup(q, paper, rows_by_name)
        finally:
            q.close()
        bands.append({"serial_scale": scale, "speedup": x, "best_split": split})
    return {"model": paper.model, "label": paper.label, "sequential_s": seq,
            "best_split": best["split"], "best_cp_s": best["cp_s"], "speedup": speedup,
            "paper_speedup": list(paper.fig6),
            "speedup_inside": _inside(speedup, *paper.fig6),
            "cp_over_sq_range": [min(ratios), max(ratios)],
            "paper_cp_over_sq_range": [lo, hi],
            "cp_over_sq_inside": all(_inside(r, lo, hi) for r in ratios),
            "splits": splits, "serial_band": bands}


def table(results: Sequence[dict]) -> Tuple[List[str], List[List[str]]]:
    """The side-by-side table: predicted vs paper."""
    header = ["model", "best n x k", "speedup vs S64", "paper (Fig. 6)", "",
              f"serial fractions x0.5 / x2 (>= {SERIAL_FLOOR})", "critical-path / shared-queue",
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
