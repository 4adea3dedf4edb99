"""Throughput of a dynamic model under several (policy, batch) configs,
measured interleaved (through hwtune.measure) on one sample set, each
checked against the numpy reference when asked."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Sequence

from hwtune.dynamic.executor import DynamicEngine, DynConfig, compare
from hwtune.dynamic.model import DynModel
from hwtune.measure import stats
from hwtune.measure.sampling import interleaved_calls
from hwtune.native.dynamic import Samples


@dataclass
class DynResult:
    config: DynConfig
    threads: int
    seconds: List[float]          # per pass over the whole sample set
    samples: int
    groups: int                   # batched F evaluations per pass
    rows: int                     # vertex rows they covered
    check: Optional[Dict[str, object]] = None
    extra: Dict[str, object] = field(default_factory=dict)

    @property
    def median_s(self) -> float:
        return stats.median(self.seconds)

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.median_s

    def to_json(self) -> Dict[str, object]:
        return {"policy": self.config.policy, "batch": self.config.batch,
                "chunk": self.config.chunk, "executors": self.config.executors,
                "threads": self.threads, "pin": self.config.pin, "median_s": self.median_s,
                "mad_s": stats.mad(self.seconds), "samples_per_s": self.samples_per_s,
                "samples": self.samples, "groups": self.groups,
                "rows_per_group": self.rows / max(self.groups, 1), "seconds": self.seconds,
                "check": self.check}


def measure(model: DynModel, samples: Samples, configs: Sequence[DynConfig], *,
            reps: int = 10, check: bool = False, tolerance: float = 1e-4,
            reference=None) -> List[DynResult]:
    """One DynResult per config; every engine is prepared first, then timed
    one pass each per round, rounds interleaved."""
    from hwtune.dynamic.reference import run_reference
    engines: List[DynamicEngine] = []
    try:
        for c in configs:  # inside the try: one that fails closes those made before it
            engines.append(DynamicEngine(model, samples, c))
        want = None
        if check:
            want = reference or run_reference(model, samples.arrays(),
                                              engines[0].params)["readouts"]
        checks = []
        for e in engines:
            e.run()
            checks.append(compare(model, e.readouts(), want, tolerance) if check else None)
        times = interleaved_calls([e.run for e in engines], reps, sample_s=0.0)
        out = []
        for e, c, secs, chk in zip(engines, configs, times, checks):
            g, r = e.groups()
            # the chunk the engine ran (None in a config: the engine's default)
            out.append(DynResult(replace(c, chunk=e.chunk), e.threads, list(secs),
                                 samples.count, g, r, chk))
        return out
    finally:
        for e in engines:
            e.close()
