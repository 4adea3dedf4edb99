"""The report on a terminal: rich tables and text charts that fit 80
columns. The scan section is `hwtune scan --show`'s own renderer."""

from rich import box
from rich.console import Console
from rich.rule import Rule
from rich.table import Table

from hwtune.report import fmt
from hwtune.report.text_charts import (convergence_note, convergence_series, gantt_lines,
                                       has_curve)

WIDTH = 80


def _table(title, columns, justify=None, header=True):
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
              padding=(0, 1, 0, 1), collapse_padding=True, title_style="bold",
              show_header=header)
    for i, c in enumerate(columns):
        t.add_column(c, justify=(justify or {}).get(i, "right" if i else "left"),
                     overflow="fold")
    return t


def _host(console, h):
    t = _table(None, ("", ""), justify={1: "left"}, header=False)
    caches = fmt.caches(h["caches"])
    t.add_row("CPU", h.get("cpu_model") or "?")
    t.add_row("cores", f"{h.get('physical_cores')} physical, {h.get('logical_cpus')} logical, "
                       f"{h.get('usable_cpus')} usable, {h.get('sockets')} socket(s), "
                       f"{h.get('numa_nodes')} NUMA node(s)")
    t.add_row("kernels", f"{', '.join(h.get('kernel_variants') or [])} (best "
                         f"{h.get('isa_best')})")
    t.add_row("caches", caches or "?")
    t.add_row("seen", f"{fmt.date(h['first_seen'])} .. {fmt.date(h['last_seen'])}")
    console.print(t)


def _scan(console, scan):
    from hwtune.cli.render_scan import render as render_scan
    run = scan.get("run", {})
    console.print(Rule(f"Scan (run {run.get('run_id')}, {fmt.date(run.get('started_at'))}, "
                       f"hwtune {run.get('hwtune_version')})", align="left"))
    # The co-run table of `scan --show` adds a per-team column that passes
    # 80 columns at 4 executors: the report draws its own grid instead.
    render_scan(dict(scan, corun={}), console)
    _corun(console, scan["corun"])


def _corun(console, corun):
    from hwtune.report.markdown import corun_grid
    for op, c in corun.items():
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
        b = c["best"]
        console.print(f"best {op} layout: {b['executors']} executor(s) x {b['threads']} "
                      f"thread(s), {'pinned' if b['pinned'] else 'OS-placed'}, "
                      f"{b['gflops']:.1f} GFLOPS", highlight=False)


def _model(console, m):
    from hwtune.cli.charts import line_chart, to_rich
    console.print(Rule(f"Model {m['model']} (tuned in run {m['run_id']}, "
                       f"{fmt.date(m['started_at'])})", align="left"))
    d, t = m["default"], m["tuned"]
    console.print(f"default [bold]{fmt.seconds(d.get('median_s'))}[/] -> tuned "
                  f"[bold green]{fmt.seconds(t.get('median_s'))}[/]: speedup "
                  f"[bold]{fmt.ratio(m.get('speedup'))}[/]"
                  + (f" in {m['tuning_s']:.0f} s of tuning" if m.get("tuning_s") else ""),
                  highlight=False)
    console.print(f"chosen: {fmt.config(t.get('config'))}", highlight=False)
    if m["stages"]:
        st = _table("Search stages", ("stage", "seconds", "trials", "measured", "reused"))
        for name, s in m["stages"].items():
            st.add_row(name, f"{s.get('seconds') or 0:.1f}", str(s.get("trials", "-")),
                       str(s.get("measured", "-")), str(s.get("reused", "-")))
        console.print(st)
    for line in m["why"]:
        console.print(f"  [dim]{line}[/]", highlight=False)
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


def render(doc: dict, console: Console = None) -> None:
    console = console or Console(width=min(WIDTH, Console().width))
    h = doc["host"]
    console.print(f"[bold]hwtune report[/] for {h['host_key']}", highlight=False)
    console.print(f"[dim]{doc['db']}, generated {fmt.date(doc['generated_at'])} by hwtune "
                  f"{doc['hwtune_version']}[/]", highlight=False)
    _host(console, h)
    if doc["scan"]:
        _scan(console, doc["scan"])
    else:
        console.print("no scan stored for this host: run 'hwtune scan'")
    console.print()
    if doc["models"]:
        for m in doc["models"]:
            _model(console, m)
    else:
        console.print("no tuned model for this host: run 'hwtune tune-graph MODEL'")
    if doc["history"]:
        console.print(Rule("History", align="left"))
        _history(console, doc["history"])
    if doc["compare"]:
        _compare(console, doc["compare"])
