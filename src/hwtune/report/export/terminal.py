"""The terminal format: rich tables and coloured text charts. A live
terminal gets colour; a file gets the same text plain, 80 columns.

Every command that prints to a terminal prints through here: `hwtune scan`
(the scan tables, also the report's scan section), `hwtune report` (80
columns whatever the terminal's width), `hwtune check` (one screen, at
least 80 columns) and `hwtune tune-graph` (its summary lines)."""

import io
from typing import Any, Callable, Dict, Optional, Tuple

from rich import box
from rich.console import Console
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from hwtune.report import fmt, verdicts, views
from hwtune.report.export.base import Exporter
from hwtune.report.text_charts import MARKERS, SAT_CHAR, gantt_lines, line_chart
from hwtune.report.views import convergence_note, convergence_series, corun_grid, has_curve

# The report fits 80 columns on any terminal, and so does any text written
# to a file.
WIDTH = 80
# Colour of each line_chart series' markers, in MARKERS order.
STYLES = ("bold cyan", "bold magenta", "bold green", "bold yellow")


def _table(title, columns, *, justify=None, header=True, caption=None, fixed=False):
    """fixed: every column right-aligned and never wrapped (the scan's
    number tables: 80 columns hold the widest, GEMM's). Else column 0 is
    left-aligned, the others right unless justify says otherwise, and a
    long cell folds onto a second line instead of being cropped."""
    t = Table(title=title, title_justify="left", caption=caption, caption_justify="left",
              box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 1),
              collapse_padding=True, title_style="bold", show_header=header)
    for i, c in enumerate(columns):
        if fixed:
            t.add_column(c, justify="right", no_wrap=True)
        else:
            t.add_column(c, justify=(justify or {}).get(i, "right" if i else "left"),
                         overflow="fold")
    return t


def to_rich(lines: list) -> Text:
    """Colour the markers of a text_charts.line_chart() for a rich console."""
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


# -- scan ---------------------------------------------------------------------
def _f(v, nd=1):
    return "-" if v is None else f"{v:.{nd}f}"


def _pct(v):
    return "-" if v is None else f"{100 * v:.0f}%"


def _us(s):
    if s is None:
        return "-"
    return f"{s * 1e6:.1f}µs" if s < 1e-3 else f"{s * 1e3:.2f}ms"


def _spread(r):
    """Spread cell: the MAD/median, flagged when the row is stored as noisy."""
    text = _pct(r.get("rel_spread"))
    return f"[yellow]{text}![/]" if r.get("status") == "noisy" else text


def _threads(n):
    return f"{n} thread{'s' if n != 1 else ''}"


def _sat_text(sat, rows):
    if len(rows) < 2:
        return "(one thread count: no scaling figures)"
    if sat is None:
        return f"still scaling at {_threads(rows[-1]['threads'])}"
    return f"saturates at {_threads(sat)}"


def _scan_header(console, s):
    h, run = s.get("host", {}), s.get("run", {})
    cores = h.get("physical_cores")
    console.print(
        f"[bold]{h.get('cpu_model') or 'unknown CPU'}[/]  "
        f"{cores if cores is not None else '?'} cores, {h.get('usable_cpus', '?')} usable CPUs, "
        f"kernels: {s['facts'].get('selected_isa', h.get('isa_best', '?'))}, "
        f"BLAS: {s['facts'].get('blas', '?')}{_amx(s['facts'].get('amx'))}", highlight=False)
    rid = run.get("run_id", "?")
    console.print(f"scan run {rid} ({run.get('status', '?')}), {s['measurements']} measurements, "
                  f"host {h.get('host_key', '?')}", style="dim", highlight=False)


def _amx(amx) -> str:
    """AMX as the scan found it (detected only: no AMX kernel yet)."""
    if not amx or not amx.get("cpuid"):
        return ""
    if not amx.get("os"):
        return ", AMX: in CPUID, state not enabled by the OS"
    return ", AMX: usable (no kernel yet)" if amx.get("permitted") else \
        ", AMX: present, Linux refused the tile permission"


def _peaks(console, s):
    fma = s["peak"]["fma"]
    if fma:
        t = _table("FP32 FMA peak", ("ISA", "threads", "GFLOPS", "per thread", "spread"),
                   fixed=True)
        for r in fma:
            t.add_row(r["isa"], str(r["threads"]), _f(r["value"]), _f(r["per_thread"]),
                      _spread(r))
        console.print(t)
    for kind, title in (("int8", "int8 GEMM peak (u8 x s8)"), ("bf16", "bf16 GEMM peak")):
        rows = s["peak"].get(kind)
        if not rows:
            continue
        t = _table(title, ("ISA", "kernel", "threads", rows[0]["unit"], "x FMA peak", "spread"),
                   fixed=True)
        for r in rows:
            t.add_row(r["isa"], r["kernel"] or "?", str(r["threads"]), _f(r["value"]),
                      _f(r["vs_fma"], 2), _spread(r))
        console.print(t)
    tri = s["peak"]["triad"]
    if tri:
        levels = [w for w in ("dram", "l3", "l2") if any(r["where"] == w for r in tri)]
        names = {"dram": "out of cache", "l3": "in L3", "l2": "in L2"}
        t = _table("Memory bandwidth (STREAM triad, GB/s)",
                   ("threads", *(names[w] for w in levels), "spread"), fixed=True)
        by_t = {}
        for r in tri:
            by_t.setdefault(r["threads"], {})[r["where"]] = r
        for th in sorted(by_t):
            got = [by_t[th].get(w) for w in levels]
            worst = max((x for x in got if x), key=lambda x: x["rel_spread"] or 0)
            t.add_row(str(th), *(_f(x and x["value"]) for x in got), _spread(worst))
        console.print(t)


def _gemm(console, s):
    for g in s["gemm"]:
        rows = g["rows"]
        t = _table(f"GEMM [{g['M']},{g['K']}]x[{g['K']},{g['N']}] ({g['isa']})",
                   ("threads", "time", "GFLOPS", "speedup", "eff.", "BLAS", "GFLOPS",
                    "vs BLAS", "spread"), fixed=True,
                   caption=(f"hwtune {_sat_text(g['saturation'], rows)}; BLAS "
                            f"{_sat_text(g['blas_saturation'], rows)} (a step must gain "
                            f"{s['saturation_threshold']:.0%})") if len(rows) > 1 else None)
        for r in rows:
            t.add_row(str(r["threads"]), _us(r["time_s"]), _f(r["value"]), _f(r["speedup"], 2),
                      _pct(r["efficiency"]), _us(r["blas_time_s"]), _f(r["blas_value"]),
                      _pct(r["vs_blas"]), _spread(r))
        console.print(t)
        ratios = [r["vs_blas"] for r in rows if r["vs_blas"]]
        if ratios:
            best = max(rows, key=lambda r: r["value"])
            spread = (f" ({_pct(min(ratios))}..{_pct(max(ratios))} over thread counts)"
                      if len(ratios) > 1 else "")
            console.print(f"hwtune kernel = [bold]{_pct(best['vs_blas'])}[/] of system BLAS at "
                          f"{_threads(best['threads'])}{spread}", highlight=False)
        xs = [r["threads"] for r in rows]
        if len(xs) > 1:
            chart = line_chart([("hwtune", xs, [r["value"] for r in rows]),
                                ("numpy BLAS", xs, [r["blas_value"] for r in rows])],
                               mark_x=g["saturation"], y_unit="GFLOPS")
            console.print(to_rich(chart))
        console.print()


def _eltwise(console, s):
    if not s["eltwise"]:
        return
    n = s["eltwise"][0]["n"]
    t = _table(f"Element-wise ops on {n} floats ({s['eltwise'][0]['isa']})",
               ("op", "threads", "time", "throughput", "speedup", "eff.", "saturates",
                "spread"), fixed=True)
    for e in s["eltwise"]:
        for i, r in enumerate(e["rows"]):
            first = i == 0
            sat = e["saturation"]
            t.add_row(e["op"] if first else "", str(r["threads"]), _us(r["time_s"]),
                      f"{_f(r['value'], 2)} {e['unit']}", _f(r["speedup"], 2),
                      _pct(r["efficiency"]),
                      (("-" if len(e["rows"]) < 2 else "no" if sat is None else f"at {sat}")
                       if first else ""), _spread(r))
    console.print(t)
    main = next((e for e in s["eltwise"] if e["op"] == "mul"), s["eltwise"][0])
    xs = [r["threads"] for r in main["rows"]]
    if len(xs) > 1:
        console.print(f"element-wise {main['op']} of {main['n']} floats: "
                      f"{_sat_text(main['saturation'], main['rows'])}", highlight=False)
        console.print(to_rich(line_chart([(main["op"], xs, [r["value"] for r in main["rows"]])],
                                         mark_x=main["saturation"], y_unit=main["unit"])))
    console.print()


def _best_layout(console, op, b):
    console.print(f"best {op} layout: {b['executors']} executor(s) x "
                  f"{_threads(b['threads'])}, {'pinned' if b['pinned'] else 'OS-placed'}, "
                  f"{b['gflops']:.1f} GFLOPS", highlight=False)


def _corun(console, s):
    for op, c in s["corun"].items():
        t = _table(f"Co-running {op} executors (aggregate GFLOPS)",
                   ("executors x threads", "pinned", "OS-placed", "pinned/OS", "per team",
                    "spread"), fixed=True)
        layouts = {}
        for r in c["rows"]:
            layouts.setdefault((r["executors"], r["threads"]), {})[r["placement"]] = r
        for (k, th), d in layouts.items():
            p, o = d.get("pinned"), d.get("os")
            ratio = p["gflops"] / o["gflops"] if p and o and o["gflops"] else None
            teams = (p or o).get("team_gflops") or []
            worst = max((x for x in (p, o) if x), key=lambda x: x["rel_spread"] or 0)
            t.add_row(f"{k} x {th}", _f(p and p["gflops"]), _f(o and o["gflops"]), _pct(ratio),
                      " ".join(_f(x) for x in teams), _spread(worst))
        console.print(t)
        _best_layout(console, op, c["best"])
    if s["corun"]:
        console.print()


def print_scan(console: Console, summary: dict) -> None:
    """`hwtune scan`'s output, and the report's scan section."""
    _scan_header(console, summary)
    _peaks(console, summary)
    _gemm(console, summary)
    _eltwise(console, summary)
    _corun(console, summary)
    for n in summary["noisy"]:
        console.print(f"[yellow]noisy (!):[/] {n['label']} (spread {_pct(n['rel_spread'])})",
                      highlight=False)
    for e in summary.get("errors", []):
        console.print(f"[red]failed:[/] {e['label']}: {e['note']}", highlight=False)
    for w in summary["warnings"]:
        console.print(f"[yellow]warning:[/] {w}", highlight=False)
    for a in summary["advice"]:
        console.print(f"[yellow]note:[/] {a}", highlight=False)


# -- report -------------------------------------------------------------------
def _host(console, h):
    t = _table(None, ("", ""), justify={1: "left"}, header=False)
    t.add_row("CPU", h.get("cpu_model") or "?")
    t.add_row("cores", f"{h.get('physical_cores')} physical, {h.get('logical_cpus')} logical, "
                       f"{h.get('usable_cpus')} usable, {h.get('sockets')} socket(s), "
                       f"{h.get('numa_nodes')} NUMA node(s)")
    t.add_row("kernels", f"{', '.join(h.get('kernel_variants') or [])} (best "
                         f"{h.get('isa_best')})")
    t.add_row("caches", fmt.caches(h["caches"]) or "?")
    t.add_row("seen", f"{fmt.date(h['first_seen'])} .. {fmt.date(h['last_seen'])}")
    console.print(t)


def _report_scan(console, scan):
    run = scan.get("run", {})
    console.print(Rule(f"Scan (run {run.get('run_id')}, {fmt.date(run.get('started_at'))}, "
                       f"hwtune {run.get('hwtune_version')})", align="left"))
    # The co-run table of `hwtune scan` adds a per-team column that passes
    # 80 columns at 4 executors: the report draws its own grid instead.
    print_scan(console, dict(scan, corun={}))
    for op, c in scan["corun"].items():
        grid = corun_grid(c)
        top = max((v for _, p, o in grid for v in (p, o) if v), default=1.0)
        t = _table(f"Co-running {op} executors: pinned vs OS-placed (GFLOPS)",
                   ("executors x threads", "pinned", "OS-placed", "pinned/OS", "pinned"),
                   justify={4: "left"})
        for k, p, o in grid:
            t.add_row(k, "-" if p is None else f"{p:.1f}", "-" if o is None else f"{o:.1f}",
                      fmt.ratio(p / o) if p and o else "-",
                      "█" * max(1, round((p or 0) / top * 20)))
        console.print(t)
        _best_layout(console, op, c["best"])


def _model(console, m):
    console.print(Rule(f"Model {m['model']} (tuned in run {m['run_id']}, "
                       f"{fmt.date(m['started_at'])})", align="left"))
    from hwtune.report import tune_verdict
    d = m["default"]
    console.print(f"default [bold]{fmt.seconds(d.get('median_s'))}[/]"
                  + (f", {m['tuning_s']:.0f} s of tuning" if m.get("tuning_s") else ""),
                  highlight=False)
    for label, text in tune_verdict.lines(m["verdict"]):
        console.print(Text.assemble((f"{label}: ", "bold"), text))
    if m.get("options"):
        console.print(f"options: {fmt.tune_options(m['options'])}", highlight=False,
                      markup=False)
    if m["stages"]:
        st = _table("Search stages", ("stage", "seconds", "trials", "measured", "reused"))
        for name, s in m["stages"].items():
            st.add_row(name, f"{s.get('seconds') or 0:.1f}", str(s.get("trials", "-")),
                       str(s.get("measured", "-")), str(s.get("reused", "-")))
        console.print(st)
    for line in tune_verdict.why_shown(m["why"]):
        console.print(Text("  " + line, style="dim"))
    if has_curve(m):
        series, unit = convergence_series(m)
        console.print("[bold]Convergence[/] (best so far vs trial)")
        console.print(to_rich(line_chart(series, width=50, height=8, y_unit=unit,
                                         x_label="trial")))
    else:
        console.print(f"[bold]Convergence:[/] {convergence_note(m)}", highlight=False)
    if m["top_ops"]:
        top = m["top_ops"]
        console.print(f"[bold]Top ops by time[/] [dim]({top['source']})[/]", highlight=False)
        ot = _table(None, ("op", "type", "time", "share", ""), justify={1: "left", 4: "left"})
        for o in top["ops"]:
            share = o["share"] or 0
            ot.add_row(o["op"], o["op_type"] or "?", fmt.seconds(o["seconds"]),
                       f"{100 * share:.0f}%", "█" * max(1, round(share * 20)))
        console.print(ot)
    tl = m["timeline"]
    if tl:
        console.print(f"[bold]Executor timeline[/] of run {tl['run_id']} [dim]"
                      f"({fmt.config(tl.get('config'))})[/]", highlight=False)
        console.print("\n".join(gantt_lines(tl, width=60)), highlight=False)
    console.print()


def _history(console, history):
    rows = [s for s in history if len(s["points"]) > 1] or history
    t = _table(f"History of {len(rows)} figures (trend: runs oldest to newest)",
               ("figure", "runs", "first", "latest", "change", "trend"))
    for s in rows:
        t.add_row(s["label"], str(len(s["points"])), fmt.value(s["first"], s["unit"]),
                  fmt.value(s["latest"], s["unit"]), fmt.ratio(s["change"]),
                  fmt.spark([p["value"] for p in s["points"]][-12:]))
    console.print(t)
    versions = sorted({v for s in history for v in s["versions"]})
    dates = sorted(p["date"] for s in history for p in s["points"])
    if dates:
        console.print(f"[dim]hwtune {', '.join(versions)}; {fmt.date(dates[0])} .. "
                      f"{fmt.date(dates[-1])}[/]", highlight=False)


def _compare(console, c):
    a, b = c["sides"]
    console.print(Rule(f"Compare: A = {a['label']}, B = {b['label']}", align="left"))
    for s, name in ((a, "A"), (b, "B")):
        if s.get("run_id") is not None:  # --compare run:ID run:ID
            console.print(f"{name}: {s['label']} on {s['host_key']}", highlight=False)
            continue
        console.print(f"{name}: {s['host_key']}" + (f" as of {fmt.date(s['until'])}"
                                                    if s["until"] else " (latest)"),
                      highlight=False)
    t = _table(None, ("figure", "A", "B", "B/A", ""))
    for r in c["rows"]:
        word = fmt.gain_word(r["gain"])
        style = {"better": "green", "worse": "red"}.get(word)
        t.add_row(r["label"], fmt.value(r["a"], r["unit"]), fmt.value(r["b"], r["unit"]),
                  fmt.ratio(r["ratio"]), f"[{style}]{word}[/]" if style else word)
    console.print(t)


def _report_head(console, doc):
    h = doc["host"]
    console.print(f"[bold]hwtune report[/] for {h['host_key']}", highlight=False)
    console.print(f"[dim]{doc['db']}, generated {fmt.date(doc['generated_at'])} by hwtune "
                  f"{doc['hwtune_version']}[/]", highlight=False)
    _host(console, h)


def _report_scan_or_hint(console, doc):
    if doc["scan"]:
        _report_scan(console, doc["scan"])
    else:
        console.print("no scan stored for this host: run 'hwtune scan'")
    console.print()


def _report_models(console, doc):
    for m in doc["models"]:
        _model(console, m)
    if not doc["models"]:
        console.print("no tuned model for this host: run 'hwtune tune-graph MODEL'")


def _report_history(console, doc):
    if doc["history"]:
        console.print(Rule("History", align="left"))
        _history(console, doc["history"])


def _report_compare(console, doc):
    if doc["compare"]:
        _compare(console, doc["compare"])


def _report_results(console, doc):
    for title, header, rows in views.results_tables(doc):
        t = _table(title, header)
        for r in rows:
            t.add_row(*map(str, r))
        console.print(t)
    if doc.get("runs") or doc.get("checks") or doc.get("compares"):
        console.print()


def _report_dynamic(console, doc):
    from hwtune.report import dynamic_views as dv
    got = dv.throughput_table(doc)
    if got is None:
        return
    title, header, rows = got
    t = _table(title, header)
    for r in rows:
        t.add_row(*map(str, r))
    console.print(t)
    for _, chart_title, series in dv.curve_charts(doc):
        console.print(f"[bold]{chart_title}[/]", highlight=False)
        console.print(to_rich(line_chart(series, width=50, height=8, y_unit="samples/s",
                                         x_label="batch")))
    console.print()


# The report's sections in order: a new section is a function and a row.
REPORT_SECTIONS = (_report_head, _report_scan_or_hint, _report_models, _report_results,
                   _report_dynamic, _report_history, _report_compare,
                   lambda console, doc: _report_plan(console, doc))


def print_report(console: Console, doc: dict) -> None:
    if views.runs_compared(doc):
        console.print(f"[bold]hwtune report[/] [dim]{doc['db']}, generated "
                      f"{fmt.date(doc['generated_at'])} by hwtune {doc['hwtune_version']}[/]",
                      highlight=False)
        _report_compare(console, doc)
        return
    for section in REPORT_SECTIONS:
        section(console, doc)


# -- check --------------------------------------------------------------------
def print_check(console: Console, r) -> None:
    """One screen: a line per figure, then the verdict and what to do."""
    th = r.suite.thresholds
    # No box, one space between columns: seven columns fit in 80.
    t = Table(title=verdicts.headline(r), title_justify="left", box=None,
              padding=(0, 1, 0, 0), header_style="bold")
    # 20 columns for the name in 80 (the other six take the rest); a wider
    # console (COLUMNS=200 on a pipe) shows whole names.
    t.add_column("figure", overflow="ellipsis", no_wrap=True,
                 max_width=max(20, console.width - 60))
    t.add_column("baseline", justify="right", no_wrap=True)
    t.add_column("current", justify="right", no_wrap=True)
    # Relative mode compares ratios to the reference kernel, not the medians
    # shown beside it.
    t.add_column("rel chg" if r.relative else "change", justify="right", no_wrap=True)
    t.add_column("p", justify="right", no_wrap=True)
    # What decided: "time 40r" (rounds of samples) or "est-cyc 3c" (calls counted).
    t.add_column("by", justify="right", no_wrap=True)
    t.add_column("verdict", no_wrap=True, min_width=11)
    for o in r.outcomes:
        style = {"regression": "bold red", "error": "bold red", "undecidable": "yellow",
                 "warn": "yellow", "new": "yellow", "improvement": "green"}.get(o.status)
        t.add_row(o.name, verdicts.value(verdicts.med(o.baseline), o.unit),
                  verdicts.value(verdicts.med(o.current), o.unit), verdicts.change(o),
                  verdicts.p_value(o), verdicts.decided_by(o),
                  verdicts.ICON[o.status], style=style)
    console.print(t)
    console.print(f"thresholds: time alpha {th.alpha:g} (group-sequential), min effect "
                  f"{th.min_effect:.0%}" + (f", fail at {r.suite.large_effect:.0%} "
                                            "(record-or-report)"
                                            if r.mode == "record-or-report" else "")
                  + f"; counts {r.suite.count_threshold:.1%}"
                  + (f"; host noise floor {r.noise_floor:.1%}" if r.noise_floor is not None
                     else ""), highlight=False)
    if r.baseline_info:
        b = r.baseline_info
        console.print(f"baseline:   {b['source']} ({b['created_at']}, hwtune "
                      f"{b['hwtune_version']})", highlight=False)
    for dest in r.recorded_to:
        console.print(f"recorded:   {dest}", highlight=False)
    for o in r.outcomes:
        if o.status in verdicts.EXPLAINED:
            console.print(f"  {o.name}: {o.reason}", highlight=False, markup=False)
    for n in r.notices:
        console.print(f"note: {n}", highlight=False, markup=False)
    if r.status == "undecidable":
        console.print("the machine was too noisy (or figures lack a baseline) to decide: rerun "
                      "on a quieter machine, raise --max-seconds, count the kernel figures "
                      "(--metric estimated-cycles), or pass --undecidable-ok (exit 0)",
                      highlight=False)


# -- tune-graph ---------------------------------------------------------------
def print_tune(console: Console, doc: dict) -> None:
    """tune-graph's summary: the default, the one verdict (what `hwtune run`
    uses, with its figure; a gain not confirmed across processes named as
    such), why, where the time went, what is stored, what to do next."""
    from hwtune.report import tune_verdict as tv

    def line(text):
        console.print(text, markup=False, highlight=False, emoji=False, soft_wrap=True)

    d, v = doc["default"], doc["verdict"]
    line(f"model:     {doc['model']} ({doc['ops']} ops, graph {doc['graph_hash'][:12]})")
    line(f"default:   {fmt.seconds(d['median_s'])} +- {fmt.seconds(d['mad_s'])} "
         f"({fmt.config(d['config'])}, default CONV knobs)")
    t = doc.get("tuned")
    for label, text in tv.lines(v):
        line(f"{label + ':':<10s} {text}")
    shown = {d["label"], (t or {}).get("label")}
    others = [c for c in doc["candidates"] if c["label"] not in shown and c.get("median_s")]
    if others:
        line("also measured (one process): " + ", ".join(
            f"{c['label']} {fmt.seconds(c['median_s'])}" for c in others))
    why = tv.why_shown(doc["why"])
    if why:
        line("why:")
    for w in why:
        line(f"  - {w}")
    if doc.get("precision"):
        from hwtune.report import precision_views
        for text in precision_views.lines(doc["precision"]):
            line(text)
    spent = ", ".join(f"{k} {v['seconds']:.1f} s ({v['trials']} trials, {v['reused']} reused)"
                      for k, v in doc["stages"].items())
    line(f"tuning:    {doc['tuning_s']:.1f} s total{'; ' + spent if spent else ''}")
    cuts = doc.get("cuts") or []
    if cuts:
        line(f"cut:       {len(cuts)} stage(s)/workload(s) left for a rerun, which needs "
             f"~{doc['resume_s']:.0f} s more of --budget:")
        small = [c for c in cuts if c["resume_s"] < 0.1]
        for c in cuts:
            if c not in small or len(small) < 3:
                line(f"  - {c['stage']} {c['name']}: {c['reason']} (~{c['resume_s']:.1f} s)")
        if len(small) >= 3:
            line(f"  - {len(small)} small workloads "
                 f"({', '.join(sorted({c['stage'] for c in small}))}) under 0.1 s each")
    elif doc.get("plan"):
        line("cut:       nothing (every planned stage and workload finished)")
    if doc.get("accuracy"):
        line(f"thread-count interpolation accuracy: {doc['accuracy']}")
    line(f"stored:    {tv.stored_line(v, doc['run_id'], doc['db'])}")
    if doc.get("next"):
        line(f"next:      {doc['next']}")


# -- dynamic models -----------------------------------------------------------
def print_dynamic(console: Console, doc: dict) -> None:
    """`hwtune run MODEL --inputs FILE`: one line per (policy, batch)
    measured, interleaved, with its config and the ratio to serial."""
    from hwtune.report import dynamic_views as dv

    def line(text):
        console.print(text, markup=False, highlight=False, emoji=False, soft_wrap=True)

    for text in dv.run_head(doc):
        line(text)
    header, rows = dv.run_table(doc)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    for r in [header] + rows:
        line("  ".join(str(c).ljust(w) if i in (0, 2, len(r) - 1) else str(c).rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    line(f"stored:   run {doc['run_id']} in {doc['db']}")


def print_dynamic_tune(console: Console, doc: dict) -> None:
    """`hwtune tune-graph MODEL --inputs FILE`: the stages, the row-count
    histogram, default vs tuned measured interleaved."""
    from hwtune.report import dynamic_views as dv
    for text in dv.tune_lines(doc):
        console.print(text, markup=False, highlight=False, emoji=False, soft_wrap=True)


# -- run (a static model) -------------------------------------------------------
def print_run(console: Console, data: dict) -> None:
    """hwtune run: one block per run (a --threads list gives several)."""
    from hwtune.report import run_views
    for i, doc in enumerate(run_views.docs_of(data)):
        if i:
            console.print()
        for label, text in run_views.lines(doc):
            console.print(f"{label + ':' if label else '':<11s} {text}", markup=False,
                          highlight=False, emoji=False, soft_wrap=True)


# -- compare ------------------------------------------------------------------
def print_compare(console: Console, r) -> None:
    """hwtune compare: one row per side, interleaved medians, ratio to hwtune."""
    def line(text):
        console.print(text, markup=False, highlight=False, emoji=False, soft_wrap=True)

    line(f"model:   {r.model} ({r.ops} ops) from {r.source}; inputs {r.inputs}")
    line(f"machine: {r.cpu}, kernels {r.isa}, {_threads(r.threads)}; load average "
         f"{fmt.loads(r.load_before)} before, {fmt.loads(r.load_after)} after")
    line(f"timing:  {r.reps} interleaved samples per side, medians")
    w = max(len(s.name) for s in r.sides)
    speed = [verdicts.compare_speed(s) for s in r.sides]
    ws = max(len(x) for x in speed + ["hwtune is"])
    line(f"  {'side':{w}s}  {'median':>11s}  {'MAD':>9s}  {'hwtune is':>{ws}s}  outputs")
    for s, sp in zip(r.sides, speed):
        line(f"  {s.name:{w}s}  {s.median_s * 1e3:>8.3f} ms  {s.mad_s * 1e3:>6.3f} ms  "
             f"{sp:>{ws}s}  {verdicts.compare_side(s)}")
    for s in r.sides:
        line(f"  {s.name}: {s.describe}")


# -- plan ---------------------------------------------------------------------
def _view_table(console, title, view, caption=None):
    header, rows = view
    t = _table(title, header, caption=caption)
    for r in rows:
        t.add_row(*r)
    console.print(t)


def _validation(console, v, with_model=False):
    from hwtune.report import plan_views as pv
    _view_table(console, None, pv.validation_table(v["rows"], with_model))
    for line in pv.validation_sentences(v):
        console.print(line, highlight=False)
    if pv.load_warning(v):
        console.print(pv.load_warning(v), style="yellow", highlight=False)


def print_plan(console: Console, doc: dict) -> None:
    """hwtune plan: best configuration per core count, every scheduler and
    split, per-op thread counts, latency vs cores; or the validation."""
    from hwtune.report import plan_views as pv

    def line(text):
        console.print(text, markup=False, highlight=False, emoji=False)
    line(pv.title(doc))
    for text in pv.machine_lines(doc):
        line(text)
    _view_table(console, "Cost model: serial fraction per op type", pv.fit_table(doc))
    if doc.get("mode") == "validate":
        console.print(Rule("Predicted (1-thread profiles) vs measured, interleaved",
                           align="left"))
        _validation(console, doc["validation"])
        return
    _view_table(console, "Best configuration per core count", pv.best_table(doc))
    for r in doc["cores"]:
        _view_table(console, f"{r['cores']} cores: predicted latency per scheduler and split",
                    pv.split_table(r))
        _view_table(console, f"{r['cores']} cores: per-op thread counts, team of "
                             f"{r['op_threads']['team_threads']}", pv.op_threads_table(r))
    series = pv.chart_series(doc)
    if len(doc["cores"]) > 1 and series:
        console.print("[bold]Predicted latency vs cores (ms, best split per scheduler)[/]")
        console.print(to_rich(line_chart(series, x_label="cores", y_unit="ms")))


def _report_plan(console, doc):
    v = doc.get("plan_validation")
    if v and v["rows"]:
        console.print(Rule("Plan: predicted vs measured on this host", align="left"))
        _validation(console, v, with_model=True)


# -- the exporter -------------------------------------------------------------
Printer = Callable[[Console, Any], None]


def _at_most_80(width: int) -> int:
    return min(width, WIDTH)


def _at_least_80(width: int) -> int:
    return max(WIDTH, width)


# kind -> (printer, width on a live terminal from the terminal's width;
# None: the terminal's own width)
PRINTERS: Dict[str, Tuple[Printer, Optional[Callable[[int], int]]]] = {
    "scan": (print_scan, None),
    "report": (print_report, _at_most_80),
    "check": (print_check, _at_least_80),
    "tune": (print_tune, None),
    "compare": (print_compare, None),
    "run": (print_run, None),
    "plan": (print_plan, None),
    "dynamic": (print_dynamic, None),
    "dynamic-tune": (print_dynamic_tune, None),
}


class TerminalExporter(Exporter):
    def __init__(self):
        super().__init__("terminal", {kind: self._plain(kind) for kind in PRINTERS})

    @staticmethod
    def _plain(kind: str):
        def render(data) -> str:
            console = Console(width=WIDTH, record=True, file=io.StringIO(), color_system=None)
            PRINTERS[kind][0](console, data)
            return console.export_text()
        return render

    def write(self, kind: str, data, stream) -> None:
        printer, width = PRINTERS[kind]
        console = Console(file=stream)
        if width is not None:
            console.width = width(console.width)
        printer(console, data)


EXPORTER = TerminalExporter()
