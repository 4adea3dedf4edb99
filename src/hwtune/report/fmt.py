"""Number and config formatting shared by every output format."""

from typing import Optional

SPARKS = "▁▂▃▄▅▆▇█"


def seconds(s: Optional[float]) -> str:
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} µs"


def loads(xs) -> str:
    """Load averages (1, 5, 15 minutes) as uptime shows them."""
    return "/".join(f"{x:.2f}" for x in xs)


def value(v: Optional[float], unit: str) -> str:
    if v is None:
        return "-"
    if unit == "s":
        return seconds(v)
    if unit == "x":
        return f"{v:.2f}x"
    return f"{v:.1f} {unit}" if v >= 10 else f"{v:.2f} {unit}"


def size(n: Optional[int]) -> str:
    if not n:
        return "-"
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n} B"


def caches(c: dict) -> str:
    return ", ".join(f"{k} {size(v)}" for k, v in c.items() if v) or "?"


def ratio(r: Optional[float]) -> str:
    return "-" if r is None else f"{r:.2f}x"


def date(ts: Optional[str]) -> str:
    """'2026-11-21T21:47:45.080703Z' -> '2026-11-21 21:47'."""
    return "-" if not ts else ts[:16].replace("T", " ")


def config(c: Optional[dict]) -> str:
    if not c:
        return "-"
    text = (f"{c.get('executors', '?')} executor{'s' if c.get('executors') != 1 else ''} x "
            f"{c.get('threads', '?')} thread{'s' if c.get('threads') != 1 else ''}, "
            f"{c.get('scheduler', '?')}, {'pinned' if c.get('pin') else 'OS-placed'}")
    extra = []
    for key, what in (("op_threads", "per-op threads"), ("op_params", "CONV params"),
                      ("op_priority", "priorities"), ("op_candidates", "co-run candidates")):
        n = len(c.get(key) or {})
        if n:
            extra.append(f"{what} for {n} op{'s' if n != 1 else ''}")
    return text + ("; " + ", ".join(extra) if extra else "")


def tune_options(o: Optional[dict]) -> str:
    """A tune run's recorded options, as tune-graph's flags read."""
    if not o:
        return "-"
    parts = []
    for key, flag, unit in (("search", "search", ""), ("reps", "reps", ""),
                            ("budget_s", "budget", " s"), ("trials", "trials", ""),
                            ("strategy", "strategy", "")):
        if o.get(key) is not None:
            parts.append(f"{flag} {o[key]:g}{unit}" if isinstance(o[key], float)
                         else f"{flag} {o[key]}{unit}")
    if o.get("only"):
        parts.append(f"only {','.join(o['only'])}")
    if o.get("storage"):
        parts.append(f"storage {o['storage']}")
    return ", ".join(parts) or "-"


def spark(values) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if hi == lo:
        return SPARKS[3] * len(vals)
    return "".join(SPARKS[round((v - lo) / (hi - lo) * (len(SPARKS) - 1))] for v in vals)


def gain_word(gain: Optional[float]) -> str:
    """How B compares to A, whichever way the figure's unit runs."""
    if gain is None:
        return ""
    # Within 3%: run-to-run noise of a median on this shared machine
    # (scan's rel_spread is 1-3%), so not called better or worse.
    if abs(gain - 1) < 0.03:
        return "same"
    return "better" if gain > 1 else "worse"
