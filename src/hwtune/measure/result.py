"""What a measurement produced: a status, the raw samples, a note.

The statuses are the ones results.db stores for tuning trials (TVM's
measurement layer records failures the same way): a failed measurement is
data, never an exception that loses the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from hwtune.measure import stats

OK, ERROR, WRONG_ANSWER, TIMEOUT = "ok", "error", "wrong_answer", "timeout"


@dataclass
class Measurement:
    """samples: every raw sample taken (seconds per run unless the side
    measures a rate), kept whatever the status."""
    status: str
    samples: List[float] = field(default_factory=list)
    note: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.status == OK and bool(self.samples)

    @property
    def median(self) -> Optional[float]:
        return stats.median(self.samples) if self.samples else None

    @property
    def mad(self) -> Optional[float]:
        return stats.mad(self.samples) if self.samples else None

    @property
    def rel_spread(self) -> Optional[float]:
        return stats.rel_spread(self.samples) if self.samples else None
