"""Views of a report document that several formats show alike: the co-run
grid, and a model's search convergence as chart series or as a sentence.
Each format draws them its own way; what they contain is decided here once."""

from typing import List, Tuple

from hwtune.report.fmt import seconds


def corun_grid(c: dict) -> list:
    """[(layout 'k x t', pinned GFLOPS, OS GFLOPS)] in the scan's order."""
    layouts = {}
    for r in c["rows"]:
        layouts.setdefault((r["executors"], r["threads"]), {})[r["placement"]] = r["gflops"]
    return [(f"{k} x {t}", d.get("pinned"), d.get("os")) for (k, t), d in layouts.items()]


def has_curve(model: dict) -> bool:
    """A convergence chart needs a search with two or more results; fewer
    read better as one sentence (convergence_note)."""
    return any(sum(p["best_s"] is not None for p in s["points"]) >= 2
               for s in model["convergence"])


def convergence_note(model: dict) -> str:
    parts = [f"{s['label']}: {s['trials']} trial{'s' if s['trials'] != 1 else ''}, best "
             f"{seconds(s['best_s'])}" for s in model["convergence"]]
    return "; ".join(parts) if parts else "no trials stored for this tuning"


def convergence_series(model: dict) -> Tuple[List[tuple], str]:
    """(series for text_charts.line_chart, y unit). One search: best-so-far
    in ms; several (different subjects, different scales): best-so-far as %
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
