"""Views of a report document that several formats show alike: the co-run
grid, and a model's search convergence as chart series or as a sentence.
Each format draws them its own way; what they contain is decided here once."""

import json
from typing import List, Optional, Tuple

from hwtune.report.fmt import date, seconds, spark


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


def _short_config(source, c) -> str:
    """'tuned 2x1 corun pinned': enough to tell two runs' configs apart in
    one table cell (the whole config is in --format json)."""
    if not isinstance(c, dict):
        return source or "?"
    pin = "pinned" if c.get("pin") else ""
    return " ".join(str(x) for x in (source or "?", f"{c.get('executors', '?')}x"
                                     f"{c.get('threads', '?')}", c.get("scheduler", "?"), pin)
                    if x)


def _run_notes(e: dict) -> str:
    notes = {True: ["checked"], False: ["WRONG output"], None: []}[e["check_ok"]]
    return ", ".join(notes + (["noisy"] if e["noisy"] else [])) or "-"


def _shown_vars(pairs: List[dict]):
    """A model's --set values are shown only where its steps differ in them
    (the whole set is in --format json)."""
    differ = {}
    for p in pairs:
        for k, v in p["vars"].items():
            differ.setdefault((p["model"], k), set()).add(json.dumps(v))
    return lambda p: " ".join([p["model"]] + [f"{k}={v}" for k, v in sorted(p["vars"].items())
                                              if len(differ[(p["model"], k)]) > 1])


def _step(p: dict) -> str:
    """'mse, sgd': the step's loss and optimizer (and batch_norm's form when
    it is not the default batch statistics)."""
    bn = ", running BN" if p.get("batch_norm") == "running" else ""
    return f"{p['loss'] or '?'}, {p['optimizer'] or '?'}{bn}"


def _ratio(v) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _memory(side: Optional[dict]) -> str:
    from hwtune.graph.limits import human_bytes
    return "-" if not side or side.get("arena_bytes") is None else human_bytes(
        side["arena_bytes"])


def _run_pair_rows(pairs: List[dict]) -> List[list]:
    name = _shown_vars(pairs)
    return [[name(p), _step(p),
             seconds(p["forward"]["median_s"]) if p["forward"] else "not run",
             seconds(p["training"]["median_s"]), _ratio(p["step_over_forward"]),
             _memory(p["forward"]), _memory(p["training"]),
             (f"{p['forward']['run_id']}, " if p["forward"] else "")
             + str(p["training"]["run_id"])] for p in pairs]


def _tuned_pair_rows(pairs: List[dict]) -> List[list]:
    name = _shown_vars(pairs)
    # narrower than the runs' table: the step's own default-vs-tuned speedup
    # is in its tuned model's section and in --format json
    return [[f"{name(p)} ({_step(p)})",
             seconds(p["forward"]["tuned_s"]) if p["forward"] else "not tuned",
             seconds(p["training"]["default_s"]), seconds(p["training"]["tuned_s"]),
             _ratio(p["step_over_forward"])] for p in pairs]


def training_tables(doc: dict) -> List[Tuple[str, List[str], List[list]]]:
    """Training steps beside forward passes: the latest `run --train` and
    `run`, and the latest `tune-graph --train` and `tune-graph`."""
    training = doc.get("training") or {}
    out = []
    if training.get("runs"):
        out.append(("Training steps beside forward passes (latest `run --train` and `run`)",
                    ["model", "loss, optimizer", "forward", "step", "step / forward",
                     "forward memory", "step memory", "run ids"],
                    _run_pair_rows(training["runs"])))
    if training.get("tuned"):
        out.append(("Tuned training steps beside tuned forward passes (`tune-graph --train`)",
                    ["model (loss, optimizer)", "forward tuned", "step default", "step tuned",
                     "step / forward"],
                    _tuned_pair_rows(training["tuned"])))
    return out


def results_tables(doc: dict) -> List[Tuple[str, List[str], List[list]]]:
    """The latest `hwtune run` of each graph and `hwtune check` of each
    suite, as (title, header, rows) tables; the trend column is the history
    oldest to newest (latency for runs, status initials for checks)."""
    out = []
    runs = doc.get("runs") or []
    if runs:
        out.append((f"Latest run of {len(runs)} graph{'s' if len(runs) != 1 else ''}",
                    ["model", "run", "config", "median", "GFLOP/s", "notes", "runs", "trend"],
                    [[e["model"], e["run_id"], _short_config(e["config_source"], e["config"]),
                      seconds(e["median_s"]),
                      "-" if e["gflops"] is None else f"{e['gflops']:.2f}",
                      _run_notes(e), e["runs"],
                      spark([h["median_s"] for h in e["history"]][-12:])] for e in runs]))
    out += training_tables(doc)
    checks = doc.get("checks") or []
    if checks:
        out.append((f"Latest check of {len(checks)} suite{'s' if len(checks) != 1 else ''}",
                    ["suite", "run", "date", "status", "figures", "checks", "history"],
                    [[e["suite"], e["run_id"], date(e["started_at"]),
                      f"{e['status']} (exit {e['exit_code']})",
                      ", ".join(f"{n} {k}" for k, n in sorted(e["counts"].items())) or "-",
                      e["checks"],
                      " ".join((h["status"] or "?")[0].upper() for h in e["history"][-12:])]
                     for e in checks]))
    compares = doc.get("compares") or []
    if compares:
        out.append((f"Latest comparison of {len(compares)} model"
                    f"{'s' if len(compares) != 1 else ''} (hwtune compare)",
                    ["model", "run", "date", "hwtune", "peers", "compares", "hwtune trend"],
                    [[e["model"], e["run_id"], date(e["started_at"]),
                      seconds(e["sides"][0]["median_s"]),
                      ", ".join(_peer_text(sd) for sd in e["sides"][1:]) or "-",
                      e["compares"],
                      spark([h["sides"][0]["median_s"] for h in e["history"]
                             if h["sides"] and h["sides"][0]["median_s"]][-12:])]
                     for e in compares]))
    return out


def _peer_text(side: dict) -> str:
    """'ort 1.20 ms (hwtune 1.5x faster)': the ratio in words."""
    r = side.get("ratio")
    if not r or side.get("median_s") is None:
        return f"{side.get('key')} -"
    words = (f"hwtune {r:.2f}x faster" if r >= 1 else f"hwtune {1 / r:.2f}x slower")
    wrong = "" if side.get("agree") is not False else ", outputs differ"
    return f"{side.get('key')} {seconds(side['median_s'])} ({words}{wrong})"


def runs_compared(doc: dict) -> bool:
    """`--compare run:ID run:ID`: the report is that comparison (its head
    and the two runs side by side), not the whole host with it at the end."""
    c = doc.get("compare") or {}
    return any(side.get("run_id") is not None for side in c.get("sides") or [])
