"""Is the process that started a run still the one running it?

A pid alone is not enough: after a crash the pid can be reused, so the
process must also have started before the run did.
"""

import os
from datetime import datetime
from pathlib import Path
from typing import Optional

# /proc/stat btime has 1 s resolution and the tick count ~10 ms; a process
# that started up to this long after the run's timestamp is still accepted
# as its owner rather than declared a reused pid.
_START_SLACK_S = 2.0


def _process_start_epoch(pid: int, proc: Path) -> Optional[float]:
    try:
        stat = (proc / str(pid) / "stat").read_text()
        btime = next(int(line.split()[1]) for line in (proc / "stat").read_text().splitlines()
                     if line.startswith("btime "))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    # Field 22 (starttime, clock ticks since boot) counted after the
    # parenthesised command name, which may itself contain spaces.
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        ticks = int(fields[19])
    except (IndexError, ValueError):
        return None
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def owner_alive(pid: Optional[int], started_at: datetime, proc: Path = Path("/proc")) -> bool:
    """True unless the pid is gone or now belongs to a younger process.
    Unknown pid or unreadable /proc: assume alive (never mislabel a live run)."""
    if pid is None or pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    except OSError:
        return True
    start = _process_start_epoch(pid, proc)
    if start is None:
        return True
    return start <= started_at.timestamp() + _START_SLACK_S
