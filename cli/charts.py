"""Small terminal line charts (plain text, optionally coloured with rich)."""

from __future__ import annotations

from typing import Optional, Sequence

# Marker per series, in order; the connecting dots take the series' colour.
MARKERS = ("●", "▲", "■", "◆")
STYLES = ("bold cyan", "bold magenta", "bold green", "bold yellow")
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


def to_rich(lines: list):
    """Colour the markers of a line_chart() for a rich console."""
    from rich.text import Text
    text = Text()
    for i, line in enumerate(lines):
        for ch in line:
            style = None
            if ch in MARKERS:
                style = STYLES[MARKERS.index(ch)]
            elif ch == SAT_CHAR:
                style = "red"
            text.append(ch, style=style)
        if i < len(lines) - 1:
            text.append("\n")
    return text
