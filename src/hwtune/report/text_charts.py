"""Plain-text charts for the terminal and markdown reports. Line charts
come from hwtune.cli.charts (the ones `hwtune scan --show` draws); this adds
the report's own: convergence series and an executor timeline."""

from typing import List, Tuple

IDLE = "·"


def has_curve(model: dict) -> bool:
    """A convergence chart needs a search with two or more results; fewer
    read better as one sentence (convergence_note)."""
    return any(sum(p["best_s"] is not None for p in s["points"]) >= 2
               for s in model["convergence"])


def convergence_note(model: dict) -> str:
    from hwtune.report.fmt import seconds
    parts = [f"{s['label']}: {s['trials']} trial{'s' if s['trials'] != 1 else ''}, best "
             f"{seconds(s['best_s'])}" for s in model["convergence"]]
    return "; ".join(parts) if parts else "no trials stored for this tuning"


def convergence_series(model: dict) -> Tuple[list, str]:
    """(series for charts.line_chart, y unit). One search: best-so-far in
    ms; several (different subjects, different scales): best-so-far as %
    of each search's first result, so they share an axis."""
    conv = [s for s in model["convergence"] if s["first_s"]]
    tuners = [s["tuner"] for s in conv]
    # The chart's legend is one line: tuner names when they tell series apart.
    names = tuners if len(set(tuners)) == len(tuners) else [s["label"] for s in conv]
    if len(conv) == 1:
        s = conv[0]
        return [(names[0], [p["trial"] for p in s["points"]],
                 [None if p["best_s"] is None else p["best_s"] * 1e3 for p in s["points"]])
                ], "best ms"
    return [(name, [p["trial"] for p in s["points"]],
             [None if p["best_s"] is None else 100 * p["best_s"] / s["first_s"]
              for p in s["points"]]) for name, s in zip(names, conv)], "% of first"


def _symbols(types: List[str]) -> dict:
    """One letter per op type: its initial, else the next free letter."""
    out, used = {}, set()
    for t in types:
        cand = [c.upper() for c in t if c.isalpha()] + [chr(c) for c in range(65, 91)]
        sym = next(c for c in cand if c not in used)
        used.add(sym)
        out[t] = sym
    return out


def gantt_lines(timeline: dict, width: int = 60) -> List[str]:
    """One row per executor; each cell shows the op type busiest in it."""
    events = timeline["events"]
    end = timeline["makespan_s"] or 1e-12
    types = sorted({e["op_type"] for e in events})
    sym = _symbols(types)
    cell = end / width
    lines = []
    for ex in timeline["executors"]:
        busy = [dict() for _ in range(width)]
        for e in (e for e in events if e["executor"] == ex):
            c0 = min(width - 1, int(e["start_s"] / cell))
            c1 = min(width - 1, int(e["end_s"] / cell))
            for c in range(c0, c1 + 1):
                lo, hi = max(e["start_s"], c * cell), min(e["end_s"], (c + 1) * cell)
                # A boundary touch (rounding) is not a visit; an op inside one
                # cell always shows, however short.
                if hi - lo > cell * 1e-6 or c0 == c1:
                    busy[c][e["op_type"]] = busy[c].get(e["op_type"], 0.0) + max(hi - lo, 1e-15)
        row = "".join(sym[max(b, key=b.get)] if b else IDLE for b in busy)
        lines.append(f"exec {ex:<2} │{row}│")
    ms = end * 1e3
    lines.append(f"        0{' ' * (width - 8)}{ms:>8.2f} ms")
    legend = "  ".join(f"{sym[t]}={t}" for t in types) + f"  {IDLE}=idle"
    # Wrap the legend at the chart's width so 80 columns always hold it.
    words, cur = legend.split("  "), ""
    for w in words:
        if cur and len(cur) + 2 + len(w) > width + 10:
            lines.append("        " + cur)
            cur = w
        else:
            cur = f"{cur}  {w}" if cur else w
    lines.append("        " + cur)
    return lines
