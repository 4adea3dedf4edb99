"""Per op, predicted against measured on a team of t threads: a model's
ops profiled on one thread and on t threads (the sequential scheduler, one
team, fresh engines taken in turns), beside the cost model's parts for
each at t threads. Summed per op type, it says which part of the
prediction a miss is in: the split compute, the serial share, the memory
traffic at the t-core bandwidth, or the fork-join (what is left over when
the compute and traffic are right)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

import numpy as np

from hwtune.planner.search import Predictor

# Fresh engines per thread count, taken in turns (1, t, 1, t, ...): this
# VM's speed flips for stretches of seconds, and a chunk of one count's
# engines would land in one stretch.
ROUNDS = 3
WARM_S = 0.2
RUNS = 5


@dataclass
class TypeRow:
    op_type: str
    ops: int
    measured_1t_s: float
    measured_s: float           # per run, on t threads
    predicted_s: float
    parts: Dict[str, float]     # the prediction's parts (serial, parallel, memory, forkjoin)

    @property
    def error(self) -> float:
        return (self.predicted_s - self.measured_s) / self.measured_s if self.measured_s else 0.0

    def to_json(self) -> dict:
        return dict(self.__dict__, error=self.error)


def profile(graph, threads: int, *, rounds: int = ROUNDS, warm_s: float = WARM_S,
            runs: int = RUNS) -> Dict[int, Dict[str, float]]:
    """{1, threads} -> op name -> median seconds, each from `rounds` fresh
    sequential engines of one team (pinned), taken in turns."""
    from hwtune.engine.trace import op_medians, profiled_runs
    from hwtune.measure import clock
    from hwtune.engine.instance import NativeEngine
    history: Dict[int, list] = {1: [], threads: []}
    for _ in range(rounds):
        for t in history:
            e = NativeEngine(graph, executors=1, threads=t, scheduler="sequential", pin=True)
            try:
                warm = clock.Stopwatch()
                e.run()
                while warm.elapsed() < warm_s:
                    e.run()
                history[t] += profiled_runs(e, graph, runs)
            finally:
                e.close()
    return {t: op_medians(h) for t, h in history.items()}


def by_type(p: Predictor, measured: Dict[int, Dict[str, float]], threads: int
            ) -> List[TypeRow]:
    """Per op type (most measured time first): the ops' times summed, one
    thread and `threads` measured, and the prediction at `threads` with its
    parts (CostModel.parts on p's 1-thread times, the sequential order)."""
    q = p.model.parts(p.t1, [d.bytes for d in p.ops], [d.fit_type for d in p.ops], threads,
                      flops=[d.flops for d in p.ops])
    col = threads - 1
    rows: Dict[str, TypeRow] = {}
    for i, d in enumerate(p.ops):
        if d.folded or d.name not in measured[threads]:
            continue
        r = rows.setdefault(d.type, TypeRow(d.type, 0, 0.0, 0.0, 0.0,
                                            {k: 0.0 for k in ("parallel", "serial", "memory",
                                                              "forkjoin")}))
        r.ops += 1
        r.measured_1t_s += measured[1].get(d.name, 0.0)
        r.measured_s += measured[threads][d.name]
        for k in r.parts:
            r.parts[k] += float(q[k][i, col])
        r.predicted_s = sum(r.parts.values())
    return sorted(rows.values(), key=lambda r: -r.measured_s)


def total(rows: List[TypeRow]) -> TypeRow:
    parts = {k: float(np.sum([r.parts[k] for r in rows])) for k in
             ("parallel", "serial", "memory", "forkjoin")}
    return TypeRow("all", sum(r.ops for r in rows), sum(r.measured_1t_s for r in rows),
                   sum(r.measured_s for r in rows), sum(parts.values()), parts)
