"""The markdown format (GitHub-flavoured: a pull request, a wiki page, a CI
job summary): tables for figures, the terminal's text charts in code blocks
(markdown hosts strip inline SVG). Shows `hwtune report` and `hwtune check`
(a section that can be appended after other steps' sections)."""

from typing import List

from hwtune.report import fmt, tune_verdict, verdicts, views
from hwtune.report.export.base import Exporter
from hwtune.report.text_charts import gantt_lines, line_chart
from hwtune.report.views import convergence_note, convergence_series, corun_grid, has_curve


def _cell(v) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def table(header: List[str], rows: List[list], right_from: int = 1, left=()) -> List[str]:
    """Numbers right-aligned from column right_from on, except text columns
    named in left."""
    align = ["---" if i < right_from or i in left else "---:" for i in range(len(header))]
    out = ["| " + " | ".join(_cell(h) for h in header) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return out + [""]


def _chart(lines: List[str]) -> List[str]:
    return ["```text"] + lines + ["```", ""]


def _scan(scan) -> List[str]:
    run = scan.get("run", {})
    out = ["## Scan", "", f"Run {run.get('run_id')}, {fmt.date(run.get('started_at'))}, "
           f"hwtune {run.get('hwtune_version')}; kernels {scan['facts'].get('selected_isa', '?')}"
           f", BLAS {scan['facts'].get('blas', '?')}.", ""]
    if scan["peak"]["fma"]:
        out += ["### Peaks", ""]
        out += table(["what", "threads", "value"],
                     [[f"FMA {r['isa']}", r["threads"], fmt.value(r["value"], "GFLOPS")]
                      for r in scan["peak"]["fma"]] +
                     [[f"triad {r['where']}", r["threads"], fmt.value(r["value"], "GB/s")]
                      for r in scan["peak"]["triad"]])
    for g in scan["gemm"]:
        out += [f"### GEMM [{g['M']},{g['K']}]x[{g['K']},{g['N']}] ({g['isa']})", ""]
        out += table(["threads", "time", "GFLOPS", "speedup", "BLAS GFLOPS", "vs BLAS"],
                     [[r["threads"], fmt.seconds(r["time_s"]), f"{r['value']:.1f}",
                       fmt.ratio(r["speedup"]),
                       "-" if r["blas_value"] is None else f"{r['blas_value']:.1f}",
                       "-" if r["vs_blas"] is None else f"{100 * r['vs_blas']:.0f}%"]
                      for r in g["rows"]])
        xs = [r["threads"] for r in g["rows"]]
        if len(xs) > 1:
            out += [_sat_sentence(g["saturation"], xs), ""]
            out += _chart(line_chart([("hwtune", xs, [r["value"] for r in g["rows"]]),
                                      ("numpy BLAS", xs, [r["blas_value"] for r in g["rows"]])],
                                     mark_x=g["saturation"], y_unit="GFLOPS"))
    if scan["eltwise"]:
        out += [f"### Element-wise ops ({scan['eltwise'][0]['n']} floats)", ""]
        rows = []
        for e in scan["eltwise"]:
            top = max(e["rows"], key=lambda r: r["threads"])
            rows.append([e["op"], fmt.value(e["rows"][0]["value"], e["unit"]),
                         fmt.value(top["value"], e["unit"]), top["threads"],
                         "-" if e["saturation"] is None else e["saturation"]])
        out += table(["op", "1 thread", "most threads", "threads", "saturates at"], rows)
        main = next((e for e in scan["eltwise"] if e["op"] == "mul"), scan["eltwise"][0])
        xs = [r["threads"] for r in main["rows"]]
        if len(xs) > 1:
            out += _chart(line_chart([(main["op"], xs, [r["value"] for r in main["rows"]])],
                                     mark_x=main["saturation"], y_unit=main["unit"]))
    for op, c in scan["corun"].items():
        out += [f"### Co-running {op} executors (aggregate GFLOPS)", ""]
        out += table(["executors x threads", "pinned", "OS-placed", "pinned/OS"],
                     [[k, _g(p), _g(o), fmt.ratio(p / o) if p and o else "-"]
                      for k, p, o in corun_grid(c)])
        b = c["best"]
        out += [f"Best: {b['executors']} x {b['threads']}, "
                f"{'pinned' if b['pinned'] else 'OS-placed'}, {b['gflops']:.1f} GFLOPS.", ""]
    return out


def _g(v):
    return "-" if v is None else f"{v:.1f}"


def _sat_sentence(sat, xs) -> str:
    return (f"Still scaling at {xs[-1]} threads." if sat is None
            else f"Saturates at {sat} threads.")


def _model(m) -> List[str]:
    d, t = m["default"], m["tuned"]
    out = [f"## Model {m['model']}", "",
           f"Tuned in run {m['run_id']} ({fmt.date(m['started_at'])}, hwtune "
           f"{m['hwtune_version']})"
           + (f" with {_cell(fmt.tune_options(m['options']))}" if m.get("options") else "")
           + ".", ""]
    v = m["verdict"]
    rows = [["default", fmt.seconds(d.get("median_s")), fmt.seconds(d.get("mad_s")),
             fmt.config(d.get("config"))]]
    if v["uses"] != "default":
        rows.append(["tuned", fmt.seconds(t.get("median_s")), fmt.seconds(t.get("mad_s")),
                     fmt.config(t.get("config"))])
    out += table(["", "latency", "MAD", "config"], rows, left=(3,))
    out += [f"- **{label}**: {_cell(text)}" for label, text in tune_verdict.lines(v)]
    out += ([f"- tuning took {m['tuning_s']:.0f} s"] if m.get("tuning_s") else []) + [""]
    if m["stages"]:
        out += table(["stage", "seconds", "trials", "measured", "reused"],
                     [[k, f"{s.get('seconds') or 0:.1f}", s.get("trials", "-"),
                       s.get("measured", "-"), s.get("reused", "-")]
                      for k, s in m["stages"].items()])
    why = tune_verdict.why_shown(m["why"])
    if why:
        out += [f"- {w}" for w in why] + [""]
    out += ["### Convergence (best so far vs trial)", ""]
    if has_curve(m):
        series, unit = convergence_series(m)
        out += _chart(line_chart(series, width=50, height=8, y_unit=unit, x_label="trial"))
    else:
        out += [convergence_note(m) + ".", ""]
    if m["top_ops"]:
        top = m["top_ops"]
        out += ["### Top ops by time", "", f"From the {top['source']}.", ""]
        out += table(["op", "type", "time", "share"],
                     [[o["op"], o["op_type"] or "?", fmt.seconds(o["seconds"]),
                       f"{100 * (o['share'] or 0):.0f}%"] for o in top["ops"]], right_from=2)
    if m["timeline"]:
        tl = m["timeline"]
        out += [f"### Executor timeline (run {tl['run_id']})", "",
                f"Config: {fmt.config(tl.get('config'))}.", ""]
        out += _chart(gantt_lines(tl, width=60))
    return out


def _head(doc) -> List[str]:
    h = doc["host"]
    out = [f"# hwtune report: {h['host_key']}", "",
           f"Generated {fmt.date(doc['generated_at'])} by hwtune {doc['hwtune_version']} "
           f"from `{doc['db']}`.", "", "## Machine", ""]
    return out + table(["", ""], [
        ["CPU", h.get("cpu_model") or "?"],
        ["cores", f"{h.get('physical_cores')} physical, {h.get('logical_cpus')} logical, "
                  f"{h.get('usable_cpus')} usable"],
        ["kernels", ", ".join(h.get("kernel_variants") or [])],
        ["caches", fmt.caches(h["caches"])],
    ], right_from=2)


def _scan_or_hint(doc) -> List[str]:
    return _scan(doc["scan"]) if doc["scan"] else ["No scan stored: run `hwtune scan`.", ""]


def _models(doc) -> List[str]:
    return [line for m in doc["models"] for line in _model(m)]


def _history(doc) -> List[str]:
    if not doc["history"]:
        return []
    return ["## History", ""] + table(
        ["figure", "runs", "first", "latest", "change", "trend", "hwtune"],
        [[s["label"], len(s["points"]), fmt.value(s["first"], s["unit"]),
          fmt.value(s["latest"], s["unit"]), fmt.ratio(s["change"]),
          fmt.spark([p["value"] for p in s["points"]][-12:]),
          ", ".join(s["versions"])] for s in doc["history"]])


def _compare(doc) -> List[str]:
    c = doc["compare"]
    if not c:
        return []
    a, b = c["sides"]
    return ["## Compare", "", f"A = {a['label']} (`{a['host_key']}`), "
            f"B = {b['label']} (`{b['host_key']}`).", ""] + table(
        ["figure", "A", "B", "B/A", ""],
        [[r["label"], fmt.value(r["a"], r["unit"]), fmt.value(r["b"], r["unit"]),
          fmt.ratio(r["ratio"]), fmt.gain_word(r["gain"])] for r in c["rows"]])


def _view(view) -> List[str]:
    header, rows = view
    return table(header, rows, left=(0,)) + [""]


def _validation(v, with_model=False) -> List[str]:
    from hwtune.report import plan_views as pv
    warn = pv.load_warning(v)
    return _view(pv.validation_table(v["rows"], with_model)) + [
        line for s in pv.validation_sentences(v) for line in (s + ".", "")] + (
            [warn + ".", ""] if warn else [])


def _plan_section(doc) -> List[str]:
    v = doc.get("plan_validation")
    if not v or not v["rows"]:
        return []
    return ["## Plan: predicted vs measured on this host", ""] + _validation(v, True)


def _results(doc) -> List[str]:
    out = []
    for title, header, rows in views.results_tables(doc):
        out += [f"## {title}", ""] + table(header, rows, right_from=1, left=(2, 5, 7))
    return out


def _dynamic_section(doc) -> List[str]:
    from hwtune.report import dynamic_views as dv
    got = dv.throughput_table(doc)
    if got is None:
        return []
    title, header, rows = got
    out = [f"## {title}", ""] + table(header, rows, left=(1, 5))
    for _, chart_title, series in dv.curve_charts(doc):
        out += [f"### {chart_title}", ""]
        out += _chart(line_chart(series, width=50, height=8, y_unit="samples/s",
                                 x_label="batch"))
    return out


# The report's sections in order: a new section is a function and a row.
REPORT_SECTIONS = (_head, _scan_or_hint, _models, _results, _dynamic_section, _history,
                   _compare, _plan_section)


def plan(doc: dict) -> str:
    """hwtune plan --format markdown."""
    from hwtune.report import plan_views as pv
    out = [f"# {pv.title(doc)}", ""] + [f"- {x}" for x in pv.machine_lines(doc)] + [""]
    out += ["## Cost model", ""] + _view(pv.fit_table(doc))
    if doc.get("mode") == "validate":
        out += ["## Predicted (1-thread profiles) vs measured, interleaved", ""]
        out += _validation(doc["validation"])
        return "\n".join(out).rstrip() + "\n"
    out += ["## Best configuration per core count", ""] + _view(pv.best_table(doc))
    for r in doc["cores"]:
        out += [f"## {r['cores']} cores", "", "Predicted latency per scheduler and split:", ""]
        out += _view(pv.split_table(r))
        out += [f"Per-op thread counts (team of {r['op_threads']['team_threads']}):", ""]
        out += _view(pv.op_threads_table(r))
    series = pv.chart_series(doc)
    if len(doc["cores"]) > 1 and series:
        out += ["## Predicted latency vs cores (ms, best split per scheduler)", ""]
        out += _chart(line_chart(series, x_label="cores", y_unit="ms"))
    return "\n".join(out).rstrip() + "\n"


def report(doc: dict) -> str:
    sections = ((lambda d: [f"# hwtune report: {d['compare']['sides'][0]['label']} vs "
                            f"{d['compare']['sides'][1]['label']}", ""], _compare)
                if views.runs_compared(doc) else REPORT_SECTIONS)
    out = [line for section in sections for line in section(doc)]
    return "\n".join(out).rstrip() + "\n"


# -- check --------------------------------------------------------------------
def check(r) -> str:
    """A self-contained section (heading, table, notes) that can be appended
    to a CI job summary after other sections."""
    th = r.suite.thresholds
    out = [f"### {verdicts.headline(r)}", ""]
    out.append(f"Host `{r.host_key}`, mode `{r.mode}`"
               + (", relative to the reference kernel" if r.relative else "")
               + f"; alpha {th.alpha:g}, min effect {th.min_effect:.0%}"
               + (f", host noise floor {r.noise_floor:.1%}" if r.noise_floor is not None
                  else "") + ".")
    if r.baseline_info:
        out.append(f"Baseline: `{r.baseline_info['source']}` "
                   f"({r.baseline_info['created_at']}).")
    out.append("")
    rows = []
    for o in r.outcomes:
        v = o.verdict
        verdict = verdicts.ICON[o.status]
        if o.status in ("regression", "error"):
            verdict = f"**{verdict}**"
        rows.append([f"`{o.name}`", verdicts.value(verdicts.med(o.baseline), o.unit),
                     verdicts.value(verdicts.med(o.current), o.unit), verdicts.change(o),
                     "-" if v is None or v.ci is None else f"{v.ci[0]:.3f}-{v.ci[1]:.3f}",
                     verdicts.p_value(o), verdicts.decided_by(o, long=True), verdict])
    out += table(["figure", "baseline", "current",
                  "change vs reference" if r.relative else "change", "CI of ratio", "p",
                  "decided by", "verdict"], rows, left=(6, 7))
    notes = [f"- `{_cell(o.name)}`: {_cell(o.reason)}" for o in r.outcomes
             if o.status in verdicts.EXPLAINED]
    notes += [f"- {_cell(n)}" for n in r.notices]
    notes += [f"- recorded to `{d}`" for d in r.recorded_to]
    return "\n".join(out[:-1] + ([""] + notes if notes else [])) + "\n\n"


# -- compare ------------------------------------------------------------------
def compare(r) -> str:
    """hwtune compare as a self-contained section (a job summary, a PR)."""
    threads = f"{r.threads} thread{'' if r.threads == 1 else 's'}"
    out = [f"### hwtune compare: {r.model}", "",
           f"{r.cpu}, kernels {r.isa}, {threads}, {r.reps} interleaved samples per side "
           f"(medians); load average {fmt.loads(r.load_before)} before, {fmt.loads(r.load_after)} after; "
           f"inputs {r.inputs}.", ""]
    out += table(["side", "how it runs", "median", "MAD", "hwtune is", "outputs"],
                 [[s.name, s.describe, f"{s.median_s * 1e3:.3f} ms", f"{s.mad_s * 1e3:.3f} ms",
                   verdicts.compare_speed(s), verdicts.compare_side(s)] for s in r.sides],
                 right_from=2, left=(5,))
    return "\n".join(out) + "\n"


# -- run (a static model) ---------------------------------------------------------
def run(data: dict) -> str:
    """hwtune run as a self-contained section (a job summary, a PR)."""
    from hwtune.report import run_views
    out = []
    for doc in run_views.docs_of(data):
        out += [f"### hwtune run: {doc['model']}", ""]
        out += table(["", "value"],
                     [[label or " ", text] for label, text in run_views.lines(doc)],
                     right_from=2)
    return "\n".join(out) + "\n"


# -- dynamic models -------------------------------------------------------------
def dynamic(doc: dict) -> str:
    """hwtune run --inputs as a self-contained section."""
    from hwtune.report import dynamic_views as dv
    out = [f"### hwtune run: {doc['model']} over {doc['samples']} samples", ""]
    out += [f"- {x}" for x in dv.run_head(doc)[1:]] + [""]
    header, rows = dv.run_table(doc)
    out += table(header, rows, left=(2, len(header) - 1))
    out += [f"Stored as run {doc['run_id']} in `{doc['db']}`."]
    return "\n".join(out) + "\n"


def dynamic_tune(doc: dict) -> str:
    from hwtune.report import dynamic_views as dv
    return "\n".join([f"### hwtune tune-graph: {doc['model']}", "", "```text"]
                     + dv.tune_lines(doc) + ["```"]) + "\n"


EXPORTER = Exporter("markdown", {"report": report, "check": check, "compare": compare,
                                 "run": run,
                                 "plan": plan, "dynamic": dynamic, "dynamic-tune": dynamic_tune})
