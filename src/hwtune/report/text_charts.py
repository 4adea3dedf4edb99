"""Plain-text charts, drawn once for the terminal and markdown exporters
(markdown puts them in code blocks; the terminal colours their markers):
line charts over thread counts or trials, and an executor timeline."""

from typing import List, Optional, Sequence

IDLE = "·"
# Marker per series, in order (the terminal colours each series' markers).
MARKERS = ("●", "▲", "■", "◆")
SAT_CHAR = "┊"
OVERLAP = "◉"


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def line_chart(series: Sequence[tuple], *, width: int = 48, height: int = 10,
               mark_x: Optional[float] = None, y_unit: str = "",
               x_label: str = "threads") -> list:
    """series: (name, xs, ys) tuples. Returns the chart as text lines.

    x is linear in the thread count so the eye reads scaling correctly;
    mark_x draws a dotted vertical line (the saturation point)."""
    pts = [(x, y) for _, xs, ys in series for x, y in zip(xs, ys) if y is not None]
    if not pts:
        return ["(no data)"]
    xmin = min(p[0] for p in pts)
    xmax = max(p[0] for p in pts)
    ymax = max(p[1] for p in pts) or 1.0
    ymin = 0.0  # throughput charts start at zero so ratios read true
    grid = [[" "] * width for _ in range(height)]

    def col(x):
        return 0 if xmax == xmin else round((x - xmin) / (xmax - xmin) * (width - 1))

    def row(y):
        return height - 1 - round((y - ymin) / (ymax - ymin) * (height - 1))

    if mark_x is not None and xmin <= mark_x <= xmax:
        c = col(mark_x)
        for r in range(height):
            grid[r][c] = SAT_CHAR
    for si, (_, xs, ys) in enumerate(series):
        marker = MARKERS[si % len(MARKERS)]
        seq = sorted((x, y) for x, y in zip(xs, ys) if y is not None)
        for (x0, y0), (x1, y1) in zip(seq, seq[1:]):
            c0, c1 = col(x0), col(x1)
            for c in range(c0 + 1, c1):
                y = y0 + (y1 - y0) * (c - c0) / (c1 - c0)
                if grid[row(y)][c] in (" ", SAT_CHAR):
                    grid[row(y)][c] = "·"
        for x, y in seq:
            cell = grid[row(y)][col(x)]
            # Two series on one cell (hwtune equal to BLAS) must stay visible.
            grid[row(y)][col(x)] = OVERLAP if cell in MARKERS or cell == OVERLAP else marker

    label_w = max(len(_fmt(v)) for v in (ymax, ymin, (ymax + ymin) / 2))
    lines = []
    for r in range(height):
        if r == 0:
            lab = _fmt(ymax)
        elif r == height - 1:
            lab = _fmt(ymin)
        elif r == height // 2:
            lab = _fmt((ymax + ymin) / 2)
        else:
            lab = ""
        lines.append(f"{lab:>{label_w}} ┤{''.join(grid[r])}")
    axis = " " * label_w + " └" + "─" * width
    lines.append(axis)
    xs_all = sorted({p[0] for p in pts})
    ticks = [" "] * (width + 8)
    for x in xs_all:
        s = str(x)
        c = col(x)
        if all(ch == " " for ch in ticks[c:c + len(s) + 1]):
            ticks[c:c + len(s)] = list(s)
    lines.append(" " * (label_w + 2) + "".join(ticks).rstrip() + f"  {x_label}")
    legend = "   ".join(f"{MARKERS[i % len(MARKERS)]} {name}" for i, (name, _, _) in
                       enumerate(series))
    if any(OVERLAP in ln for ln in lines):
        legend += f"   {OVERLAP} both"
    if mark_x is not None:
        legend += f"   {SAT_CHAR} saturates at {mark_x:g}"
    if y_unit:
        legend = f"[{y_unit}]  " + legend
    lines.append(" " * (label_w + 2) + legend)
    return lines


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
