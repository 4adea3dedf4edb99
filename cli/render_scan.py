"""Render a scan summary (scan/report.py) as rich tables and charts."""

from __future__ import annotations

import contextlib

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich import box
from rich.table import Table

from hwtune.cli.charts import line_chart, to_rich


def _err_console() -> Console:
    return Console(stderr=True)


@contextlib.contextmanager
def progress():
    """A progress bar on stderr; yields (on_step, on_warn) callbacks."""
    console = _err_console()
    bar = Progress(TextColumn("[bold]scan[/]"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("{task.description}"),
                   console=console, transient=True)
    task = None

    def on_step(done, total, step):
        nonlocal task
        if task is None:
            task = bar.add_task("", total=total)
        bar.update(task, completed=done, description=step.label if step else "done")

    def on_warn(msg):
        console.print(f"[yellow]warning:[/] {msg}", highlight=False)

    with bar:
        yield on_step, on_warn


def advice_to_stderr(summary: dict):
    console = _err_console()
    for a in summary.get("advice", []):
        console.print(f"[yellow]note:[/] {a}", highlight=False)


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


def _table(title, columns, caption=None):
    """Compact table: 80 columns hold the widest (GEMM) one."""
    t = Table(title=title, title_justify="left", caption=caption, caption_justify="left",
              box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 1),
              collapse_padding=True, title_style="bold")
    for c in columns:
        t.add_column(c, justify="right", no_wrap=True)
    return t


def _header(console, s):
    h, run = s.get("host", {}), s.get("run", {})
    cores = h.get("physical_cores")
    console.print(
        f"[bold]{h.get('cpu_model') or 'unknown CPU'}[/]  "
        f"{cores if cores is not None else '?'} cores, {h.get('usable_cpus', '?')} usable CPUs, "
        f"kernels: {s['facts'].get('selected_isa', h.get('isa_best', '?'))}, "
        f"BLAS: {s['facts'].get('blas', '?')}", highlight=False)
    rid = run.get("run_id", "?")
    console.print(f"scan run {rid} ({run.get('status', '?')}), {s['measurements']} measurements, "
                  f"host {h.get('host_key', '?')}", style="dim", highlight=False)


def _peaks(console, s):
    fma = s["peak"]["fma"]
    if fma:
        t = _table("FP32 FMA peak", ("ISA", "threads", "GFLOPS", "per thread", "spread"))
        for r in fma:
            t.add_row(r["isa"], str(r["threads"]), _f(r["value"]), _f(r["per_thread"]),
                      _spread(r))
        console.print(t)
    tri = s["peak"]["triad"]
    if tri:
        t = _table("Memory bandwidth (STREAM triad, GB/s)",
                   ("threads", "out of cache", "in L2", "spread"))
        by_t = {}
        for r in tri:
            by_t.setdefault(r["threads"], {})[r["where"]] = r
        for th in sorted(by_t):
            d, l2 = by_t[th].get("dram"), by_t[th].get("l2")
            worst = max((x for x in (d, l2) if x), key=lambda x: x["rel_spread"] or 0)
            t.add_row(str(th), _f(d and d["value"]), _f(l2 and l2["value"]), _spread(worst))
        console.print(t)


def _threads(n):
    return f"{n} thread{'s' if n != 1 else ''}"


def _sat_text(sat, rows):
    if len(rows) < 2:
        return "(one thread count: no scaling figures)"
    if sat is None:
        return f"still scaling at {_threads(rows[-1]['threads'])}"
    return f"saturates at {_threads(sat)}"


def _gemm(console, s):
    for g in s["gemm"]:
        rows = g["rows"]
        t = _table(f"GEMM [{g['M']},{g['K']}]x[{g['K']},{g['N']}] ({g['isa']})",
                   ("threads", "time", "GFLOPS", "speedup", "eff.", "BLAS", "GFLOPS",
                    "vs BLAS", "spread"),
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
                "spread"))
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


def _corun(console, s):
    for op, c in s["corun"].items():
        t = _table(f"Co-running {op} executors (aggregate GFLOPS)",
                   ("executors x threads", "pinned", "OS-placed", "pinned/OS", "per team",
                    "spread"))
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
        b = c["best"]
        console.print(f"best {op} layout: {b['executors']} executor(s) x "
                      f"{_threads(b['threads'])}, {'pinned' if b['pinned'] else 'OS-placed'}, "
                      f"{b['gflops']:.1f} GFLOPS", highlight=False)
    if s["corun"]:
        console.print()


def render(summary: dict, console: Console = None):
    console = console or Console()
    _header(console, summary)
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
