"""One op on the engine's pool and kernels: the op bench (hwt_bench_op).

An OpSide times one graph op prepared through its hwt_op_impl and run as
fork-joins on team 0 of a Pool the caller keeps for many sides (creating a
pool or an engine per tuner trial would cost more than many trials). The
timing loop is C: a sample is `calls` runs timed together, sized at
warm-up to last about sample_s.
"""

from __future__ import annotations

import math
from typing import Callable, List, Mapping, Optional, Tuple

from hwtune.measure.sides import MAX_CALLS, Side

# make() -> (the prepared OpBench, its outputs by name)
Maker = Callable[[], Tuple[object, Mapping[str, object]]]


class OpSide(Side):
    """make() prepares the op (and the buffers it writes). fresh: prepare
    it again for every sample (fresh workspaces and output buffers), so a
    comparison of several ops is not decided by where one instance's
    buffers happened to land; else one instance serves every sample."""

    def __init__(self, make: Maker, *, label: str = "", sample_s: Optional[float] = None,
                 fresh: bool = False):
        self._make, self.label, self.sample_s, self.fresh = make, label, sample_s, fresh
        self._bench, self._outputs = None, None
        self.calls = 1

    def _open(self):
        if self._bench is None:
            self._bench, self._outputs = self._make()
        return self._bench

    def _drop(self):
        if self._bench is not None:
            self._bench.close()
            self._bench = None

    def warm(self, n: int) -> float:
        """n single runs; the last one's time sizes the samples (and is what
        a time limit judges: the first run of a slow point is enough)."""
        per = float(self._open().run(max(0, n - 1), 1, 1)[0])
        if self.sample_s is not None:
            self.calls = max(1, min(MAX_CALLS, math.ceil(self.sample_s / max(per, 1e-9))))
        return per

    def take(self, k: int) -> List[float]:
        if not self.fresh:
            # One untimed sample first: it warms caches and workspace pages.
            return [float(x) for x in self._open().run(1, k, self.calls)]
        out = []
        for _ in range(k):
            self._drop()
            bench = self._open()
            bench.run(0, 1, 1)  # the fresh instance's first run: untimed
            out.append(float(bench.run(0, 1, self.calls)[0]))
        return out

    def outputs(self):
        self._open()
        return self._outputs

    def close(self) -> None:
        self._drop()
