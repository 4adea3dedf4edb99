"""What a report (or one side of --compare) is about: a stored host, as of
now or as of the end of a date."""

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import List, Optional, Sequence

from hwtune.errors import UsageError

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2})?Z?$")
_STORED = "%Y-%m-%dT%H:%M:%S.%fZ"  # hwtune.db.timestamps


@dataclass(frozen=True)
class Side:
    host_key: str
    until: Optional[str] = None  # stored-format timestamp bound, None = everything
    label: str = ""

    def to_json(self) -> dict:
        return {"host_key": self.host_key, "until": self.until, "label": self.label}


def _short(host_key: str) -> str:
    # The readable slug; the 12-hex digest only matters when two hosts share it.
    return host_key.rsplit("-", 1)[0] if "-" in host_key else host_key


def resolve_host(db, key: Optional[str], default: Optional[str] = None) -> str:
    """An exact host key or a unique prefix of one; UsageError naming the
    stored hosts otherwise."""
    hosts = [h["host_key"] for h in db.hosts()]
    if not hosts:
        raise UsageError(f"{db.path} holds no results yet: run 'hwtune scan' first")
    want = key if key is not None else default
    if want in hosts:
        return want
    if key is None:
        raise UsageError(f"this machine ({default}) has no results in {db.path}: run "
                         f"'hwtune scan', or pick --host from: {_listing(hosts)}")
    matches = [h for h in hosts if h.startswith(key)]
    if len(matches) == 1:
        return matches[0]
    what = "matches several hosts" if matches else "is not a stored host"
    raise UsageError(f"--host {key!r} {what}: choose one of {_listing(matches or hosts)}")


def _listing(hosts: Sequence[str]) -> str:
    shown = ", ".join(hosts[:4])
    return shown + (f" (and {len(hosts) - 4} more)" if len(hosts) > 4 else "")


def parse_when(text: str) -> Optional[str]:
    """A date (the end of that UTC day) or date-time as a stored-format
    timestamp bound; None when text is not a date at all."""
    t = text.strip()
    try:
        if _DATE.match(t):
            end = datetime.strptime(t, "%Y-%m-%d") + timedelta(days=1, microseconds=-1)
        elif _DATETIME.match(t):
            t = t.rstrip("Z").replace(" ", "T")
            fmt = "%Y-%m-%dT%H:%M:%S" if t.count(":") == 2 else "%Y-%m-%dT%H:%M"
            end = datetime.strptime(t, fmt)
        else:
            return None
    except ValueError:
        raise UsageError(f"--compare {text!r} is not a valid date (YYYY-MM-DD)") from None
    return end.replace(tzinfo=timezone.utc).strftime(_STORED)


def compare_sides(db, host_key: str, values: Sequence[str]) -> List[Side]:
    """--compare values -> the two sides. One host: this report's host vs
    it; one date: the host as of that date vs now; two of a kind: those."""
    if not values:
        return []
    if len(values) > 2:
        raise UsageError(f"--compare takes one or two values (hosts or dates), got "
                         f"{len(values)}: {', '.join(values)}")
    whens = [parse_when(v) for v in values]
    if all(w is not None for w in whens):
        if len(values) == 1:
            sides = [Side(host_key, whens[0], values[0]), Side(host_key, None, "latest")]
        else:
            sides = [Side(host_key, w, v) for w, v in zip(whens, values)]
    elif all(w is None for w in whens):
        keys = [resolve_host(db, v) for v in values]
        if len(keys) == 1:
            keys = [host_key] + keys
        sides = [Side(k, None, _short(k)) for k in keys]
        if sides[0].label == sides[1].label:
            sides = [Side(k, None, k) for k in keys]
    else:
        raise UsageError("--compare takes two hosts or two dates, not one of each: "
                         f"{', '.join(values)}")
    if sides[0] == sides[1]:
        raise UsageError(f"--compare needs two different hosts or dates, both sides are "
                         f"{sides[0].label}")
    return sides
