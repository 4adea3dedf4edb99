"""Inline SVG charts for the HTML report: plain markup, no script, no
external reference, so the file renders offline in any browser."""

import math
from html import escape
from typing import List, Optional, Sequence, Tuple

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#7F7F00",
           "#000000")
FONT = 'font-family="system-ui,sans-serif" font-size="11"'


def _e(text) -> str:
    return escape(str(text), quote=True)


def _num(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.0f}" if float(v).is_integer() else f"{v:.1f}"
    if a >= 1:
        return f"{v:.2g}" if float(v).is_integer() else f"{v:.2f}".rstrip("0").rstrip(".")
    return f"{v:.3g}"


def nice_ticks(lo: float, hi: float, n: int = 5) -> List[float]:
    """Round tick values covering [lo, hi] (1, 2, 5 x 10^k steps)."""
    # A flat range, or one narrower than a billionth of its values (a series
    # of 100 * x / x that rounds to 100 and 99.99999999999997): a step that
    # small no longer moves t past lo in floats, and the loop below never
    # ended (the CI's README report of a convergence curve so, 3.7 GB of ticks).
    if hi - lo <= max(abs(lo), abs(hi)) * 1e-9:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks, t = [], start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def _open(chart_id: str, title: str, w: int, h: int) -> List[str]:
    return [f'<svg class="chart" data-chart="{_e(chart_id)}" viewBox="0 0 {w} {h}" '
            f'width="{w}" height="{h}" role="img" aria-label="{_e(title)}" {FONT}>',
            f"<title>{_e(title)}</title>",
            f'<text x="8" y="16" font-size="13" font-weight="600">{_e(title)}</text>']


def _empty(parts: List[str], width: int, height: int, text: str) -> str:
    """Close a chart that has nothing to draw, saying so in its middle."""
    parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">'
                 f'{_e(text)}</text></svg>')
    return "".join(parts)


def _legend(parts: List[str], items: Sequence[Tuple[str, str, str]], x: float, y: float,
            max_x: float) -> None:
    """items: (label, colour, kind) with kind line|dash|box|mark."""
    for label, colour, kind in items:
        wid = 22 + 6.2 * len(label)
        if x + wid > max_x:
            x, y = 8, y + 15
        if kind == "box":
            parts.append(f'<rect x="{x:.1f}" y="{y - 8:.1f}" width="10" height="10" '
                         f'fill="{colour}"/>')
        elif kind == "mark":
            parts.append(f'<line x1="{x + 5:.1f}" y1="{y - 10:.1f}" x2="{x + 5:.1f}" '
                         f'y2="{y + 2:.1f}" stroke="{colour}" stroke-dasharray="3 2"/>')
        else:
            dash = ' stroke-dasharray="5 3"' if kind == "dash" else ""
            parts.append(f'<line x1="{x:.1f}" y1="{y - 4:.1f}" x2="{x + 14:.1f}" '
                         f'y2="{y - 4:.1f}" stroke="{colour}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{x + 18:.1f}" y="{y:.1f}">{_e(label)}</text>')
        x += wid + 10


def line_chart(chart_id: str, title: str, series: Sequence[dict], *, x_label: str,
               y_label: str, mark_x: Optional[float] = None, mark_label: str = "",
               step: bool = False, x_ticks: Optional[Sequence[Tuple[float, str]]] = None,
               y_zero: bool = True, width: int = 640, height: int = 300) -> str:
    """series: dicts with name, xs, ys (None = gap) and optional dashed.
    step draws best-so-far curves as steps; mark_x a dashed vertical line."""
    pts = [(x, y) for s in series for x, y in zip(s["xs"], s["ys"]) if y is not None]
    parts = _open(chart_id, title, width, height)
    if not pts:
        return _empty(parts, width, height, "no data")
    left, right, top, bottom = 62, 28, 30, 70
    pw, ph = width - left - right, height - top - bottom
    xmin, xmax = min(p[0] for p in pts), max(p[0] for p in pts)
    if xmin == xmax:
        xmin, xmax = xmin - 1, xmax + 1
    ylo = 0.0 if y_zero else min(p[1] for p in pts)
    yt = nice_ticks(ylo, max(p[1] for p in pts))
    ymin, ymax = yt[0], yt[-1]

    def X(x):
        return left + (x - xmin) / (xmax - xmin) * pw

    def Y(y):
        return top + ph - (y - ymin) / ((ymax - ymin) or 1) * ph

    parts.append('<g class="grid" stroke="#ddd">')
    for t in yt:
        parts.append(f'<line x1="{left}" y1="{Y(t):.1f}" x2="{left + pw}" y2="{Y(t):.1f}"/>')
    parts.append("</g>")
    for t in yt:
        parts.append(f'<text x="{left - 6}" y="{Y(t) + 4:.1f}" text-anchor="end">'
                     f'{_num(t)}</text>')
    ticks = x_ticks if x_ticks is not None else [(x, _num(x)) for x in
                                                 sorted({p[0] for p in pts})]
    last_end = -1e9
    for x, lab in ticks:
        lines = str(lab).split("\n")  # a second line (a version under a date)
        half = 3.2 * max(len(t) for t in lines)
        if X(x) - half < last_end:  # keep tick labels from overlapping
            continue
        parts.append(f'<line x1="{X(x):.1f}" y1="{top + ph}" x2="{X(x):.1f}" '
                     f'y2="{top + ph + 4}" stroke="#444"/>')
        spans = "".join(f'<tspan x="{X(x):.1f}" dy="{0 if i == 0 else 12}">{_e(t)}</tspan>'
                        for i, t in enumerate(lines))
        parts.append(f'<text y="{top + ph + 16}" text-anchor="middle">{spans}</text>')
        last_end = X(x) + half + 4
    parts.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" '
                 f'stroke="#444"/>')
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#444"/>')
    two = any("\n" in str(lab) for _, lab in ticks)
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{top + ph + (44 if two else 32)}" '
                 f'text-anchor="middle">{_e(x_label)}</text>')
    parts.append(f'<text transform="translate(14 {top + ph / 2:.1f}) rotate(-90)" '
                 f'text-anchor="middle">{_e(y_label)}</text>')
    legend = []
    if mark_x is not None and xmin <= mark_x <= xmax:
        parts.append(f'<line class="mark" x1="{X(mark_x):.1f}" y1="{top}" x2="{X(mark_x):.1f}" '
                     f'y2="{top + ph}" stroke="#c00" stroke-dasharray="4 3"/>')
        legend.append((mark_label or f"x = {_num(mark_x)}", "#c00", "mark"))
    for i, s in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        seq = [(x, y) for x, y in zip(s["xs"], s["ys"]) if y is not None]
        if not seq:
            continue
        d, prev = [], None
        for x, y in seq:
            if prev is None:
                d.append(f"M{X(x):.1f},{Y(y):.1f}")
            elif step:
                d.append(f"H{X(x):.1f}V{Y(y):.1f}")
            else:
                d.append(f"L{X(x):.1f},{Y(y):.1f}")
            prev = (x, y)
        dash = ' stroke-dasharray="5 3"' if s.get("dashed") else ""
        parts.append(f'<path class="series" d="{"".join(d)}" fill="none" stroke="{colour}" '
                     f'stroke-width="2"{dash}/>')
        if len(seq) <= 40:
            for x, y in seq:
                parts.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="{colour}">'
                             f'<title>{_e(s["name"])}: {_num(y)} at {_num(x)}</title></circle>')
        legend.append((s["name"], colour, "dash" if s.get("dashed") else "line"))
    _legend(parts, legend, 8, height - 12, width - 8)
    parts.append("</svg>")
    return "".join(parts)


def grouped_bars(chart_id: str, title: str, groups: Sequence[Tuple[str, Sequence[Optional[float]]]],
                 names: Sequence[str], *, y_label: str, notes: Sequence[str] = (),
                 width: int = 640, height: int = 280) -> str:
    """groups: (label, one value per name); notes: text above each group."""
    parts = _open(chart_id, title, width, height)
    vals = [v for _, vs in groups for v in vs if v is not None]
    if not vals:
        return _empty(parts, width, height, "no data")
    left, right, top, bottom = 62, 16, 40, 56
    pw, ph = width - left - right, height - top - bottom
    yt = nice_ticks(0, max(vals))

    def Y(y):
        return top + ph - y / yt[-1] * ph

    for t in yt:
        parts.append(f'<line x1="{left}" y1="{Y(t):.1f}" x2="{left + pw}" y2="{Y(t):.1f}" '
                     f'stroke="#ddd"/><text x="{left - 6}" y="{Y(t) + 4:.1f}" '
                     f'text-anchor="end">{_num(t)}</text>')
    gw = pw / len(groups)
    bw = min(36, gw * 0.8 / max(1, len(names)))
    for gi, (label, vs) in enumerate(groups):
        x0 = left + gi * gw + (gw - bw * len(vs)) / 2
        for i, v in enumerate(vs):
            if v is None:
                continue
            parts.append(f'<rect class="bar" x="{x0 + i * bw:.1f}" y="{Y(v):.1f}" '
                         f'width="{bw - 2:.1f}" height="{top + ph - Y(v):.1f}" '
                         f'fill="{PALETTE[i % len(PALETTE)]}"><title>{_e(label)} '
                         f'{_e(names[i])}: {_num(v)}</title></rect>')
        cx = left + gi * gw + gw / 2
        parts.append(f'<text x="{cx:.1f}" y="{top + ph + 14}" text-anchor="middle">'
                     f'{_e(label)}</text>')
        if gi < len(notes) and notes[gi]:
            top_v = max((v for v in vs if v is not None), default=0)
            parts.append(f'<text x="{cx:.1f}" y="{Y(top_v) - 4:.1f}" text-anchor="middle" '
                         f'font-size="10">{_e(notes[gi])}</text>')
    parts.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" '
                 f'stroke="#444"/>')
    parts.append(f'<text transform="translate(14 {top + ph / 2:.1f}) rotate(-90)" '
                 f'text-anchor="middle">{_e(y_label)}</text>')
    _legend(parts, [(n, PALETTE[i % len(PALETTE)], "box") for i, n in enumerate(names)],
            8, height - 12, width - 8)
    parts.append("</svg>")
    return "".join(parts)


def hbars(chart_id: str, title: str, items: Sequence[Tuple[str, float, str]], *,
          x_label: str, width: int = 640, colours: Optional[Sequence[str]] = None,
          ref: Optional[float] = None, log: bool = False) -> str:
    """items: (label, value, text after the bar). ref: a vertical reference
    line (1.0 for ratios); log: log-scale x (ratios either side of 1)."""
    row = 20
    height = 48 + row * max(1, len(items)) + 24
    parts = _open(chart_id, title, width, height)
    vals = [v for _, v, _ in items if v is not None and (v > 0 or not log)]
    if not vals:
        return _empty(parts, width, height, "no data")
    # ~6.6 px per character of the 11 px system font (measured in Chromium).
    left = min(280, 16 + 6.6 * max(len(lab) for lab, _, _ in items))
    right, top = 110, 30
    pw = width - left - right
    if log:
        lo = min(vals + [ref or 1.0])
        hi = max(vals + [ref or 1.0])
        span = max(math.log(hi / lo), math.log(1.25))
        mid = (math.log(hi) + math.log(lo)) / 2
        lo, hi = math.exp(mid - span / 2 * 1.1), math.exp(mid + span / 2 * 1.1)

        def X(v):
            return left + (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo)) * pw
        base = X(ref or 1.0)
    else:
        xt = nice_ticks(0, max(vals))

        def X(v):
            return left + v / xt[-1] * pw
        base = left
        for t in xt:
            parts.append(f'<line x1="{X(t):.1f}" y1="{top}" x2="{X(t):.1f}" '
                         f'y2="{top + row * len(items)}" stroke="#eee"/>'
                         f'<text x="{X(t):.1f}" y="{top + row * len(items) + 14}" '
                         f'text-anchor="middle">{_num(t)}</text>')
    for i, (label, v, note) in enumerate(items):
        y = top + i * row
        parts.append(f'<text x="{left - 6}" y="{y + 14}" text-anchor="end">{_e(label)}</text>')
        if v is None or (log and v <= 0):
            parts.append(f'<text x="{left + 4}" y="{y + 14}" fill="#888">n/a</text>')
            continue
        x = X(v)
        colour = colours[i] if colours else PALETTE[0]
        parts.append(f'<rect class="bar" x="{min(base, x):.1f}" y="{y + 3}" '
                     f'width="{max(1.0, abs(x - base)):.1f}" height="{row - 6}" '
                     f'fill="{colour}"><title>{_e(label)}: {_e(note)}</title></rect>')
        parts.append(f'<text x="{max(base, x) + 4:.1f}" y="{y + 14}">{_e(note)}</text>')
    if ref is not None:
        parts.append(f'<line x1="{base:.1f}" y1="{top - 4}" x2="{base:.1f}" '
                     f'y2="{top + row * len(items) + 2}" stroke="#444"/>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{height - 6}" text-anchor="middle">'
                 f'{_e(x_label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def gantt(chart_id: str, title: str, events: Sequence[dict], *, width: int = 720) -> str:
    """One row per executor, one box per op coloured by op type; times in
    ms from the first op."""
    executors = sorted({e["executor"] for e in events})
    row = 26
    height = 40 + row * max(1, len(executors)) + 56
    parts = _open(chart_id, title, width, height)
    if not events:
        return _empty(parts, width, height, "no events")
    left, right, top = 78, 16, 30
    pw = width - left - right
    end = max(e["end_s"] for e in events) * 1e3
    xt = nice_ticks(0, end)

    def X(ms):
        return left + ms / xt[-1] * pw

    types = sorted({e["op_type"] for e in events})
    colour = {t: PALETTE[i % len(PALETTE)] for i, t in enumerate(types)}
    for t in xt:
        parts.append(f'<line x1="{X(t):.1f}" y1="{top}" x2="{X(t):.1f}" '
                     f'y2="{top + row * len(executors)}" stroke="#eee"/>'
                     f'<text x="{X(t):.1f}" y="{top + row * len(executors) + 14}" '
                     f'text-anchor="middle">{_num(t)}</text>')
    for i, ex in enumerate(executors):
        parts.append(f'<text x="{left - 6}" y="{top + i * row + 17}" text-anchor="end">'
                     f'executor {ex}</text>')
    for e in events:
        i = executors.index(e["executor"])
        x0, x1 = X(e["start_s"] * 1e3), X(e["end_s"] * 1e3)
        dur = (e["end_s"] - e["start_s"]) * 1e3
        parts.append(f'<rect class="bar" x="{x0:.2f}" y="{top + i * row + 3}" '
                     f'width="{max(0.6, x1 - x0):.2f}" height="{row - 6}" '
                     f'fill="{colour[e["op_type"]]}" stroke="#fff" stroke-width="0.3">'
                     f'<title>{_e(e["op_name"])} ({_e(e["op_type"])}, {e["threads"]} thr): '
                     f'{dur:.3f} ms</title></rect>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{top + row * len(executors) + 30}" '
                 f'text-anchor="middle">ms since the first op</text>')
    _legend(parts, [(t, colour[t], "box") for t in types], 8, height - 12, width - 8)
    parts.append("</svg>")
    return "".join(parts)
