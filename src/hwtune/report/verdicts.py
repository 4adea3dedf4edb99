"""How a check outcome reads in every format (terminal, markdown, JUnit):
the verdict words, the headline, and the numbers of one figure (three
significant digits: a median moves by ~1% between runs, more digits would
only show noise)."""

from typing import Optional

from hwtune.check.stats import median

ICON = {"pass": "ok", "improvement": "faster", "regression": "REGRESSION", "warn": "slower",
        "undecidable": "undecidable", "new": "new", "error": "ERROR", "recorded": "recorded"}
HEADLINE = {"pass": "PASS", "regression": "REGRESSION", "undecidable": "UNDECIDABLE",
            "error": "ERROR", "recorded": "BASELINE RECORDED"}
# Outcomes whose reason is printed under the table: what needs a look.
EXPLAINED = ("regression", "error", "undecidable", "new", "warn")


def headline(r) -> str:
    c = r.counts()
    parts = [f"{n} {s}" for s, n in sorted(c.items())]
    mode = f"{r.mode}{', relative' if r.relative else ''}"
    return (f"hwtune check: {HEADLINE[r.status]} - suite {r.suite.name} ({mode}), "
            f"{', '.join(parts) or 'no figures'}, {r.elapsed_s:.0f} s")


def value(v: Optional[float], unit: str) -> str:
    if v is None:
        return "-"
    if unit == "s":
        for scale, u in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
            if v >= scale * 0.9995:  # 999.7 us rounds to 3 digits as 1 ms, not 1e+03 us
                return f"{v / scale:.3g} {u}"
        return f"{v * 1e9:.3g} ns"
    if unit == "count":  # the `by` column names what was counted
        return f"{v:.3g}"
    return f"{v:.3g} {unit}"


def med(f) -> Optional[float]:
    """Median of a figure's samples (None for a missing side)."""
    return median(f.samples) if f is not None and f.samples else None


def change(o) -> str:
    v = o.verdict
    return "-" if v is None or v.ratio is None else f"{v.ratio - 1:+.1%}"


SHORT_METRIC = {"time": "time", "instructions": "instr", "cycles": "cycles",
                "estimated-cycles": "est-cyc"}


def decided_by(o, long: bool = False) -> str:
    """Which metric decided and how much it took: rounds of samples (time)
    or counted calls (counts)."""
    d = o.samples_taken if hasattr(o, "samples_taken") else {}
    metric = d.get("metric", "time")
    if metric == "time":
        n = d.get("rounds")
        if not n:
            return metric
        return (f"time, {n} rounds ({d.get('samples')} samples)" if long
                else f"time {n}r")
    calls = d.get("calls")
    name = metric if long else SHORT_METRIC.get(metric, metric)
    if not calls:
        return name
    return (f"{metric} ({d.get('counter')}, {calls:g} calls)" if long
            else f"{name} {calls:g}c")


def pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.1%}"


def pct0(x: Optional[float]) -> str:
    return "-" if x is None else (f"{x:.0%}" if x < 100 else ">9999%")


def p_value(o) -> str:
    if o.verdict is None or o.verdict.p is None:
        return "-"
    p = o.verdict.p
    return f"{p:.0e}" if p < 1e-3 else f"{p:.2g}"


def compare_side(s) -> str:
    """hwtune compare: one side's output check against the reference side
    (hwtune with int8 / bf16 ops: its error against its own fp32 run)."""
    if getattr(s, "precision", None):
        ops = ", ".join(f"{n} op(s) {p}" for p, n in sorted(s.precision.items()))
        return (f"{ops}: error {s.max_rel_err:.1e} vs fp32 (max rel. diff on "
                f"{s.worst_output}; the others are checked against fp32)")
    if s.agree is None:
        return "reference"
    word = "ok" if s.agree else "WRONG"
    return f"{word} (max rel. diff {s.max_rel_err:.1e} on {s.worst_output})"


def compare_speed(s) -> str:
    """hwtune compare: how fast hwtune is beside one side, in words (ratio =
    the side's median / hwtune's: 1.21x faster, 0.85x (slower))."""
    r = s.ratio
    if s.key == "hwtune" or r is None or r != r or r in (float("inf"), 0.0):
        return "-"
    if f"{r:.2f}" == "1.00":
        return "1.00x (even)"
    return f"{r:.2f}x faster" if r > 1 else f"{r:.2f}x (slower)"
