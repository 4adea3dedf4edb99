"""The host's load around a timed section, and whether to call it quiet.

A figure is quiet only when the 1-minute load average stays below the
timed threads + 0.5 from before to after the section (the benchmark's own
threads count in the load; half a runnable process more means another
process shared a core for part of the minute). Anything else is printed
as under load, with the measured averages, and decides nothing.
"""

from __future__ import annotations

import os

QUIET_MARGIN = 0.5  # runnable processes above the benchmark's own threads


def load1() -> float:
    return os.getloadavg()[0]


def load_note(before: float, after: float, threads: int) -> str:
    """'quiet (load 1.2 -> 1.4)' or 'under load (load 3.1 -> 4.0)'."""
    quiet = max(before, after) < threads + QUIET_MARGIN
    return f"{'quiet' if quiet else 'under load'} (1-min load {before:.2f} -> {after:.2f})"
