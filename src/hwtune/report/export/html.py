"""The HTML format: the report as ONE self-contained file, inline CSS and
inline SVG charts, no script and no URL, so it opens offline and can be
mailed or attached to a CI run as is."""

from html import escape
from typing import List

from hwtune.report import fmt, svg, tune_verdict, views
from hwtune.report.export.base import Exporter
from hwtune.report.views import convergence_note, corun_grid, has_curve

CSS = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1000px;color:#222;
line-height:1.4;padding:0 12px}
h1{font-size:1.5em;margin-bottom:0}h2{border-bottom:1px solid #ccc;padding-bottom:4px;
margin-top:2em}h3{margin-bottom:.3em}
table{border-collapse:collapse;margin:.5em 0 1em}th,td{padding:3px 10px;border-bottom:1px
solid #e4e4e4;text-align:right;font-variant-numeric:tabular-nums}th{background:#f4f4f4}
td:first-child,th:first-child,td.l,th.l{text-align:left}td{white-space:nowrap}
td.l{white-space:normal}.dim{color:#666}.better{color:#07a32b}
.worse{color:#c00}.charts{display:flex;flex-wrap:wrap;gap:12px}
svg.chart{background:#fff;border:1px solid #e4e4e4;max-width:100%;height:auto}
ul.why{color:#444;font-size:.92em}code{background:#f4f4f4;padding:0 3px}
"""


def _e(x) -> str:
    return escape(str(x), quote=True)


def _table(header, rows, classes=None, left=()) -> str:
    """left: indexes of text columns (left-aligned, wrapping)."""
    def cell(tag, i, c):
        return f"<{tag} class='l'>{_e(c)}</{tag}>" if i in left else f"<{tag}>{_e(c)}</{tag}>"

    out = ["<table>"]
    if any(header):
        out.append("<tr>" + "".join(cell("th", i, h) for i, h in enumerate(header)) + "</tr>")
    for i, r in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        out.append(f"<tr{cls}>" + "".join(cell("td", j, c) for j, c in enumerate(r)) + "</tr>")
    return "".join(out) + "</table>"


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in str(text)).strip("-").lower()


def _host(h) -> str:
    return _table(["", ""], [
        ["CPU", h.get("cpu_model") or "?"],
        ["host key", h["host_key"]],
        ["cores", f"{h.get('physical_cores')} physical, {h.get('logical_cpus')} logical, "
                  f"{h.get('usable_cpus')} usable, {h.get('sockets')} socket(s), "
                  f"{h.get('numa_nodes')} NUMA node(s)"],
        ["kernels", f"{', '.join(h.get('kernel_variants') or [])} (best {h.get('isa_best')})"],
        ["ISA", " ".join(h.get("isa") or [])],
        ["caches", fmt.caches(h["caches"])],
        ["kernel", h.get("kernel_release") or "?"],
        ["seen", f"{fmt.date(h['first_seen'])} .. {fmt.date(h['last_seen'])}"],
    ], left=(1,))


def _sat_label(sat, xs) -> str:
    return f"saturates at {sat} threads" if sat is not None else ""


def _scan(scan) -> List[str]:
    run = scan.get("run", {})
    out = ["<h2 id='scan'>Scan</h2>",
           f"<p class='dim'>run {_e(run.get('run_id'))}, {_e(fmt.date(run.get('started_at')))}, "
           f"hwtune {_e(run.get('hwtune_version'))}; kernels "
           f"{_e(scan['facts'].get('selected_isa', '?'))}; BLAS "
           f"{_e(scan['facts'].get('blas', '?'))}</p>"]
    peaks = ([[f"FMA {r['isa']}", r["threads"], fmt.value(r["value"], "GFLOPS")]
              for r in scan["peak"]["fma"]] +
             [[f"triad {r['where']}", r["threads"], fmt.value(r["value"], "GB/s")]
              for r in scan["peak"]["triad"]])
    if peaks:
        out += ["<h3>Peaks</h3>", _table(["what", "threads", "value"], peaks)]
    for g in scan["gemm"]:
        xs = [r["threads"] for r in g["rows"]]
        out.append(f"<h3>GEMM [{g['M']},{g['K']}]x[{g['K']},{g['N']}] ({_e(g['isa'])})</h3>")
        out.append(svg.line_chart(
            f"gemm-{g['shape']}", f"GEMM {g['shape']}: GFLOPS vs threads",
            [{"name": "hwtune", "xs": xs, "ys": [r["value"] for r in g["rows"]]},
             {"name": "numpy BLAS", "xs": xs, "ys": [r["blas_value"] for r in g["rows"]],
              "dashed": True}],
            x_label="threads", y_label="GFLOPS", mark_x=g["saturation"],
            mark_label=_sat_label(g["saturation"], xs)))
        out.append(_table(["threads", "time", "GFLOPS", "speedup", "efficiency", "BLAS GFLOPS",
                           "vs BLAS", "spread"],
                          [[r["threads"], fmt.seconds(r["time_s"]), f"{r['value']:.1f}",
                            fmt.ratio(r["speedup"]), f"{100 * r['efficiency']:.0f}%",
                            "-" if r["blas_value"] is None else f"{r['blas_value']:.1f}",
                            "-" if r["vs_blas"] is None else f"{100 * r['vs_blas']:.0f}%",
                            "-" if r["rel_spread"] is None else f"{100 * r['rel_spread']:.1f}%"]
                           for r in g["rows"]]))
    if scan["eltwise"]:
        out.append(f"<h3>Element-wise ops ({scan['eltwise'][0]['n']} floats)</h3>"
                   "<div class='charts'>")
        for e in scan["eltwise"]:
            xs = [r["threads"] for r in e["rows"]]
            out.append(svg.line_chart(
                f"eltwise-{e['op']}", f"{e['op']}: {e['unit']} vs threads",
                [{"name": e["op"], "xs": xs, "ys": [r["value"] for r in e["rows"]]}],
                x_label="threads", y_label=e["unit"] or "", mark_x=e["saturation"],
                mark_label=_sat_label(e["saturation"], xs), width=320, height=230))
        out.append("</div>")
        out.append(_table(["op", "threads", "throughput", "speedup", "saturates at"],
                          [[e["op"], r["threads"], fmt.value(r["value"], e["unit"]),
                            fmt.ratio(r["speedup"]),
                            ("-" if e["saturation"] is None else e["saturation"]) if i == 0
                            else ""]
                           for e in scan["eltwise"] for i, r in enumerate(e["rows"])]))
    for op, c in scan["corun"].items():
        grid = corun_grid(c)
        out.append(f"<h3>Co-running {_e(op)} executors: pinned vs OS-placed</h3>")
        out.append(svg.grouped_bars(
            f"corun-{op}", f"co-run {op}: aggregate GFLOPS per executors x threads",
            [(k, [p, o]) for k, p, o in grid], ["pinned", "OS-placed"], y_label="GFLOPS",
            notes=[f"{p / o:.2f}x" if p and o else "" for _, p, o in grid]))
        b = c["best"]
        out.append(f"<p>Best: {b['executors']} executor(s) x {b['threads']} thread(s), "
                   f"{'pinned' if b['pinned'] else 'OS-placed'}, {b['gflops']:.1f} GFLOPS.</p>")
    for n in scan.get("noisy", []):
        out.append(f"<p class='worse'>noisy: {_e(n['label'])}</p>")
    return out


def _model(m) -> List[str]:
    d, t, v = m["default"], m["tuned"], m["verdict"]
    mid = _slug(m["model"])
    out = [f"<h2 id='model-{_e(mid)}'>Model {_e(m['model'])}</h2>",
           f"<p class='dim'>tuned in run {m['run_id']} ({_e(fmt.date(m['started_at']))}, "
           f"hwtune {_e(m['hwtune_version'])}), graph {_e(m['graph_hash'][:12])}"
           + (f"; {_e(fmt.tune_options(m['options']))}" if m.get("options") else "") + "</p>",
           "<ul class='verdict'>" + "".join(
               f"<li><b>{_e(label)}</b>: {_e(text)}</li>"
               for label, text in tune_verdict.lines(v))
           + (f"<li>tuning took {m['tuning_s']:.0f} s</li>" if m.get("tuning_s") else "")
           + "</ul>",
           _table(["", "latency", "MAD", "config"],
                  [["default", fmt.seconds(d.get("median_s")), fmt.seconds(d.get("mad_s")),
                    fmt.config(d.get("config"))]]
                  + ([["tuned", fmt.seconds(t.get("median_s")), fmt.seconds(t.get("mad_s")),
                       fmt.config(t.get("config"))]] if v["uses"] != "default" else []),
                  left=(3,))]
    cands = [c for c in m["candidates"] if c.get("median_s")]
    if cands:
        # Green: the config `hwtune run` uses (the verdict's), not the fastest
        # in-process median (a gain that did not hold across processes).
        used = (v.get("tuned") or {}).get("label") if v["uses"] != "default" else "default"
        out.append(svg.hbars(
            f"candidates-{mid}", f"{m['model']}: final candidates (interleaved, one process)",
            [(c["label"], c["median_s"] * 1e3, fmt.seconds(c["median_s"])) for c in cands],
            x_label="ms per run (lower is better)",
            colours=[svg.PALETTE[2] if c["label"] == used else svg.PALETTE[0]
                     for c in cands]))
    if m["stages"]:
        out.append(_table(["stage", "seconds", "trials", "measured", "reused"],
                          [[k, f"{s.get('seconds') or 0:.1f}", s.get("trials", "-"),
                            s.get("measured", "-"), s.get("reused", "-")]
                           for k, s in m["stages"].items()]))
    why = tune_verdict.why_shown(m["why"])
    if why:
        out.append("<ul class='why'>" + "".join(f"<li>{_e(w)}</li>" for w in why)
                   + "</ul>")
    conv = [s for s in m["convergence"] if s["first_s"]]
    if not has_curve(m):
        out.append(f"<p>Convergence: {_e(convergence_note(m))}.</p>")
    else:
        relative = len(conv) > 1
        out.append(svg.line_chart(
            f"convergence-{mid}", f"{m['model']}: search convergence (best so far)",
            [{"name": s["label"], "xs": [p["trial"] for p in s["points"]],
              "ys": [None if p["best_s"] is None else
                     (100 * p["best_s"] / s["first_s"] if relative else p["best_s"] * 1e3)
                     for p in s["points"]]} for s in conv],
            x_label="trial", y_label="% of first trial" if relative else "best ms",
            step=True, y_zero=False,
            x_ticks=None if max(len(s["points"]) for s in conv) <= 20 else
            [(x, str(x)) for x in range(0, max(len(s["points"]) for s in conv) + 1, 10)
             if x]))
        out.append(_table(["tuner: subject", "search", "trials", "failed", "first", "best"],
                          [[s["label"], s["search"], s["trials"], s["failed"],
                            fmt.seconds(s["first_s"]), fmt.seconds(s["best_s"])]
                           for s in m["convergence"]]))
    if m["top_ops"]:
        top = m["top_ops"]
        out.append(svg.hbars(
            f"top-ops-{mid}", f"{m['model']}: top ops by time",
            [(f"{o['op']} ({o['op_type'] or '?'})", o["seconds"] * 1e3,
              f"{fmt.seconds(o['seconds'])} ({100 * (o['share'] or 0):.0f}%)")
             for o in top["ops"]], x_label=f"ms ({top['source']})"))
    tl = m["timeline"]
    if tl:
        out.append(svg.gantt(f"timeline-{mid}",
                             f"{m['model']}: executor timeline (run {tl['run_id']}, "
                             f"{fmt.seconds(tl['makespan_s'])})", tl["events"]))
        out.append(f"<p class='dim'>config: {_e(fmt.config(tl.get('config')))}</p>")
    return out


def _history(doc) -> List[str]:
    history = doc["history"]
    if not history:
        return []
    out = ["<h2 id='history'>History</h2>",
           _table(["figure", "runs", "first", "latest", "change", "hwtune"],
                  [[s["label"], len(s["points"]), fmt.value(s["first"], s["unit"]),
                    fmt.value(s["latest"], s["unit"]), fmt.ratio(s["change"]),
                    ", ".join(s["versions"])] for s in history])]
    multi = [s for s in history if len(s["points"]) > 1]
    if multi:
        out.append("<div class='charts'>")
        for s in multi:
            n = len(s["points"])
            ys = [p["value"] * (1e3 if s["unit"] == "s" else 1) for p in s["points"]]
            out.append(svg.line_chart(
                f"history-{_slug(s['key'])}", s["label"],
                [{"name": s["label"], "xs": list(range(1, n + 1)), "ys": ys}],
                x_label="run (date, hwtune version)",
                y_label="ms" if s["unit"] == "s" else s["unit"], y_zero=False,
                x_ticks=[(i + 1, f"{p['date'][5:10]}\nv{p['version']}")
                         for i, p in enumerate(s["points"])], width=320, height=230))
        out.append("</div>")
    return out


def _compare(doc) -> List[str]:
    c = doc["compare"]
    if not c:
        return []
    a, b = c["sides"]
    out = ["<h2 id='compare'>Compare</h2>",
           f"<p>A = <b>{_e(a['label'])}</b> (<code>{_e(a['host_key'])}</code>"
           + (f", as of {_e(fmt.date(a['until']))}" if a["until"] else "") + "), "
           f"B = <b>{_e(b['label'])}</b> (<code>{_e(b['host_key'])}</code>"
           + (f", as of {_e(fmt.date(b['until']))}" if b["until"] else "") + ")</p>"]
    rows = [r for r in c["rows"] if r["gain"]]
    if rows:
        out.append(svg.hbars(
            "compare-ratios", "B relative to A (right of 1 = B better)",
            [(r["label"], r["gain"], f"{r['gain']:.2f}x") for r in rows],
            x_label="gain of B over A (log scale)", ref=1.0, log=True,
            colours=[svg.PALETTE[2] if r["gain"] >= 1 else svg.PALETTE[1] for r in rows]))
    out.append(_table(["figure", "A", "B", "B/A", ""],
                      [[r["label"], fmt.value(r["a"], r["unit"]), fmt.value(r["b"], r["unit"]),
                        fmt.ratio(r["ratio"]), fmt.gain_word(r["gain"])] for r in c["rows"]],
                      classes=[fmt.gain_word(r["gain"]) for r in c["rows"]]))
    sa, sb = c["scan"]
    if sa and sb:
        for ga in sa["gemm"]:
            gb = next((g for g in sb["gemm"] if g["shape"] == ga["shape"]), None)
            if not gb:
                continue
            out.append(svg.line_chart(
                f"compare-gemm-{ga['shape']}", f"GEMM {ga['shape']}: A vs B",
                [{"name": f"A {a['label']}", "xs": [r["threads"] for r in ga["rows"]],
                  "ys": [r["value"] for r in ga["rows"]]},
                 {"name": f"B {b['label']}", "xs": [r["threads"] for r in gb["rows"]],
                  "ys": [r["value"] for r in gb["rows"]], "dashed": True}],
                x_label="threads", y_label="GFLOPS"))
    return out


def _nav(doc) -> str:
    nav = ["<a href='#scan'>scan</a>"] if doc["scan"] else []
    nav += [f"<a href='#model-{_e(_slug(m['model']))}'>{_e(m['model'])}</a>"
            for m in doc["models"]]
    nav += ["<a href='#results'>runs and checks</a>"] if views.results_tables(doc) else []
    nav += ["<a href='#dynamic'>dynamic models</a>"] if doc.get("dynamic") else []
    nav += ["<a href='#history'>history</a>"] if doc["history"] else []
    nav += ["<a href='#compare'>compare</a>"] if doc["compare"] else []
    nav += ["<a href='#plan'>plan</a>"] if (doc.get("plan_validation") or {}).get("rows") else []
    return "<p>" + " &middot; ".join(nav) + "</p>"


def _head(doc) -> List[str]:
    h = doc["host"]
    return [f"<h1>hwtune report: {_e(h.get('cpu_model') or h['host_key'])}</h1>",
            f"<p class='dim'>{_e(h['host_key'])}; generated "
            f"{_e(fmt.date(doc['generated_at']))} by hwtune {_e(doc['hwtune_version'])} from "
            f"<code>{_e(doc['db'])}</code></p>",
            _nav(doc), "<h2>Machine</h2>", _host(h)]


def _scan_or_hint(doc) -> List[str]:
    if doc["scan"]:
        return _scan(doc["scan"])
    return ["<p>No scan stored: run <code>hwtune scan</code>.</p>"]


def _models(doc) -> List[str]:
    if not doc["models"]:
        return ["<p>No tuned model: run <code>hwtune tune-graph MODEL</code>.</p>"]
    return [part for m in doc["models"] for part in _model(m)]


def _view(view, left=(0,)) -> str:
    header, rows = view
    return _table(header, rows, left=left)


def _validation(v, with_model=False) -> List[str]:
    from hwtune.report import plan_views as pv
    return [_view(pv.validation_table(v["rows"], with_model), left=(0, 1) if with_model else (0,))
            ] + [f"<p>{_e(s)}.</p>" for s in pv.validation_sentences(v)] + (
                [f"<p class='dim'>{_e(pv.load_warning(v))}.</p>"] if pv.load_warning(v) else [])


def _plan_section(doc) -> List[str]:
    v = doc.get("plan_validation")
    if not v or not v["rows"]:
        return []
    return ["<h2 id='plan'>Plan: predicted vs measured on this host</h2>"] + _validation(v, True)


def _results(doc) -> List[str]:
    out = []
    for i, (title, header, rows) in enumerate(views.results_tables(doc)):
        anchor = " id='results'" if i == 0 else ""
        out += [f"<h2{anchor}>{_e(title)}</h2>", _table(header, rows, left=(0, 2, 5, 7))]
    return out


def _dynamic_section(doc) -> List[str]:
    from hwtune.report import dynamic_views as dv
    got = dv.throughput_table(doc)
    if got is None:
        return []
    title, header, rows = got
    out = [f"<h2 id='dynamic'>{_e(title)}</h2>", _table(header, rows, left=(0, 1, 5))]
    charts = [svg.line_chart(f"dynamic-{i}", chart_title,
                             [{"name": n, "xs": xs, "ys": ys} for n, xs, ys in series],
                             x_label="batch", y_label="samples/s")
              for i, chart_title, series in dv.curve_charts(doc)]
    if charts:
        out.append("<div class='charts'>" + "".join(charts) + "</div>")
    return out


# The report's sections in order: a new section is a function and a row
# (and a link in _nav).
REPORT_SECTIONS = (_head, _scan_or_hint, _models, _results, _dynamic_section, _history,
                   _compare, _plan_section)


def plan(doc: dict) -> str:
    """hwtune plan --format html: one self-contained page."""
    from hwtune.report import plan_views as pv
    body = [f"<h1>{_e(pv.title(doc))}</h1>"]
    body += ["<ul>" + "".join(f"<li>{_e(x)}</li>" for x in pv.machine_lines(doc)) + "</ul>"]
    body += ["<h2>Cost model</h2>", _view(pv.fit_table(doc), left=(0, 5))]
    if doc.get("mode") == "validate":
        body += ["<h2>Predicted (1-thread profiles) vs measured, interleaved</h2>"]
        body += _validation(doc["validation"])
    else:
        body += ["<h2>Best configuration per core count</h2>",
                 _view(pv.best_table(doc), left=(0, 1))]
        series = pv.chart_series(doc)
        if len(doc["cores"]) > 1 and series:
            body.append(svg.line_chart(
                "plan-cores", "Predicted latency vs cores (best split per scheduler)",
                [{"name": n, "xs": xs, "ys": ys} for n, xs, ys in series],
                x_label="cores", y_label="ms"))
        for r in doc["cores"]:
            body += [f"<h2>{r['cores']} cores</h2>", _view(pv.split_table(r)),
                     f"<p>Per-op thread counts (team of {r['op_threads']['team_threads']}):</p>",
                     _view(pv.op_threads_table(r))]
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width,initial-scale=1'>"
            f"<title>{_e(pv.title(doc))}</title>"
            f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def report(doc: dict) -> str:
    # --compare run:ID run:ID: the comparison first, the host's report after it
    sections = ((_compare,) + tuple(s for s in REPORT_SECTIONS if s is not _compare)
                if views.runs_compared(doc) else REPORT_SECTIONS)
    body = [part for section in sections for part in section(doc)]
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width,initial-scale=1'>"
            f"<title>hwtune report: {_e(doc['host']['host_key'])}</title>"
            f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


EXPORTER = Exporter("html", {"report": report, "plan": plan})
