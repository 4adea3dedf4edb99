"""What every tuner stage needs to know, in one object.

A stage is `stage(ctx, graph, ...)`: where results go (db, run, host), what
it tunes for (ISA, CPUs), when to stop (deadline), whom to tell (progress),
and the user's search settings. The pipeline makes one context per
tuning; a test or benchmark makes one with `TuneContext(db, run_id, host)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, List, Optional

from hwtune import interrupts
from hwtune.measure import clock

Progress = Callable[[str, str], None]  # (stage, message)


def _quiet(stage: str, message: str) -> None:
    pass


@dataclass
class TuneContext:
    db: Any
    run_id: Optional[int]
    host_key: str
    isa: Optional[str] = None              # None: the selected ISA variant
    cpus: Optional[List[int]] = None       # None: every CPU this process may use
    deadline: Optional[float] = None       # a measure.clock.monotonic() value
    progress: Progress = field(default=_quiet)
    search: str = "optuna"                 # CONV template search
    trials: Optional[int] = None           # per CONV workload
    reps: int = 5                          # samples per trial
    seed: int = 0
    strategy: int = 1                      # per-op threads: 1 per op, 2 per op type
    check: str = "peer"                    # what candidates' outputs must match
    storage: Optional[str] = None          # Optuna RDB URL: CONV studies shared by a fleet

    def __post_init__(self):
        if self.isa is None:
            from hwtune.native.isa import selected_isa
            self.isa = selected_isa()
        if self.cpus is None:
            from hwtune.native.threads import allowed_cpus
            self.cpus = allowed_cpus()
        self.cpus = list(self.cpus)

    def out_of_time(self) -> bool:
        interrupts.check()  # a Ctrl-C that arrived inside a finalizer stops here
        return clock.passed(self.deadline)

    def say(self, stage: str) -> Callable[[str], None]:
        """progress for one stage: message -> None."""
        return lambda message: self.progress(stage, message)

    def with_(self, **changes) -> "TuneContext":
        return replace(self, **changes)

    def store(self, *, tuner: str, subject: str, threads: Optional[int], encode=None):
        """The TrialStore of one subject under this context."""
        from hwtune.tuners.loop import TrialStore
        return TrialStore(self.db, self.run_id, self.host_key, tuner=tuner, subject=subject,
                          isa=self.isa, threads=threads, encode=encode)
