"""Was a chunk of samples preempted? Wall time, this thread's CPU time and
the machine's steal time around it.

A sample taken while the measuring thread sat in the run queue (another
process on its CPU) or while the hypervisor ran another guest on its vCPU
(steal time) measures the neighbour, not the code. Both are measurable:

- descheduling: for single-threaded work, 1 - (thread CPU time / wall time)
  of the chunk is the share of it the thread was off its CPU;
- steal: /proc/stat's `steal` column (USER_HZ ticks summed over every CPU)
  grows while the hypervisor holds a vCPU; its growth over the chunk,
  divided by the chunk's wall time x the CPUs, is the share stolen.

The documented discard rule (docs/check.md): a chunk is part of a
preemption burst when it lost more than burst_threshold() of its wall time,
that is more than BURST_FACTOR times the median loss of the chunks of the
same measurement and never less than BURST_FLOOR. The rule reads only the
machine, never the measured values, so discarding by it cannot favour one
side of a comparison.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import List, Optional, Sequence

from hwtune.measure import clock
from hwtune.measure.sides import Side

# Measured on the shared 2-core EPYC VM at load average ~6: 1-thread kernel
# chunks of ~36 ms lost 22-42% of their wall time to descheduling (the
# thread waits for its pinned CPU, setup included) while their best-of-5
# samples stayed within 2% of each other; a loss that is a fixed share of
# every chunk is load, not a burst. A burst is a chunk that lost much more
# than its neighbours: twice their median loss, and at least a quarter.
BURST_FACTOR = 2.0
BURST_FLOOR = 0.25


def burst_threshold(losses: Sequence[float]) -> float:
    """The loss share above which a chunk counts as preempted."""
    xs = sorted(losses)
    if not xs:
        return BURST_FLOOR
    mid = len(xs) // 2
    med = xs[mid] if len(xs) % 2 else 0.5 * (xs[mid - 1] + xs[mid])
    return max(BURST_FLOOR, BURST_FACTOR * med)


_STAT = "/proc/stat"
_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def steal_seconds() -> Optional[float]:
    """Seconds of steal time summed over every CPU since boot (None where
    /proc/stat has no steal column: not Linux, or a kernel without it)."""
    try:
        with open(_STAT, "rb") as f:
            first = f.readline().split()
    except OSError:
        return None
    # cpu user nice system idle iowait irq softirq steal ...
    if len(first) < 9 or first[0] != b"cpu":
        return None
    return int(first[8]) / _HZ


@dataclass
class Window:
    """One chunk's wall seconds, this thread's CPU seconds and the steal
    seconds (all CPUs) that accrued during it."""
    wall_s: float
    cpu_s: float
    steal_s: Optional[float]
    single_thread: bool
    cpus: int
    lost: Optional[float] = None  # as computed where it was measured

    def lost_share(self) -> float:
        """Share of the chunk's wall time lost to preemption (0..1)."""
        if self.lost is not None:
            return self.lost
        if self.wall_s <= 0:
            return 0.0
        lost = 0.0
        if self.single_thread:
            lost = max(lost, 1.0 - self.cpu_s / self.wall_s)
        if self.steal_s:
            lost = max(lost, self.steal_s / (self.wall_s * max(1, self.cpus)))
        return min(1.0, max(0.0, lost))

    def to_json(self):
        return {"wall_s": self.wall_s, "cpu_s": self.cpu_s, "steal_s": self.steal_s,
                "lost": self.lost_share()}


def window(fn, *, single_thread: bool, cpus: int):
    """(fn(), Window) for one call of fn."""
    s0 = steal_seconds()
    c0 = time.thread_time()
    w0 = clock.now()
    out = fn()
    wall = clock.now() - w0
    cpu = time.thread_time() - c0
    s1 = steal_seconds()
    steal = None if s0 is None or s1 is None else max(0.0, s1 - s0)
    return out, Window(wall, cpu, steal, single_thread, cpus)


class WindowedSide(Side):
    """A side whose every take() records a Window (windows[i]: chunk i).
    single_thread: the side's work runs on the calling thread only, so its
    CPU time tells descheduling apart (a pool of several threads spreads
    the work over threads this one cannot see)."""

    def __init__(self, side: Side, *, single_thread: bool, cpus: int = 1):
        self.side, self.label = side, getattr(side, "label", "")
        self.single_thread, self.cpus = single_thread, cpus
        self.windows: List[Window] = []

    def warm(self, n: int):
        return self.side.warm(n)

    def take(self, k: int) -> List[float]:
        xs, w = window(lambda: self.side.take(k), single_thread=self.single_thread,
                       cpus=self.cpus)
        self.windows.append(w)
        return xs

    def outputs(self):
        return self.side.outputs()

    def close(self) -> None:
        self.side.close()
