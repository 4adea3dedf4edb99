"""What every format shows of a plan document (kind "plan", built by
hwtune.planner.session) and of the report's plan-validation section, as
headers and rows of strings: the terminal, markdown and HTML exporters only
lay them out."""

from typing import List, Optional, Sequence, Tuple

Table = Tuple[List[str], List[List[str]]]

# The goal for predictions from 1-thread profiles on this host.
GOAL_MEDIAN, GOAL_WORST = 0.10, 0.25


def ms(s: Optional[float]) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    return f"{s * 1e3:.3f} ms" if s < 1 else f"{s:.3f} s"


def pct(x: Optional[float], signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%"


def _config(c: dict) -> str:
    strategy = {"team": "", "strategy1": ", Strategy 1", "strategy2": ", Strategy 2",
                "strategy3": ", Strategy 3 candidates"}.get(c["strategy"], "")
    if c["scheduler"] == "corun":
        return f"corun, {c['executors'] * c['threads']} workers{strategy}"
    return f"{c['scheduler']} {c['executors']}x{c['threads']}{strategy}"


def title(doc: dict) -> str:
    m = doc["machine"]
    what = "validation on this host" if doc.get("mode") == "validate" else "plan"
    return f"{what}: {doc['model']} ({doc['ops']} ops) on {m['name']}"


def machine_lines(doc: dict) -> List[str]:
    m, h = doc["machine"], doc["host"]
    load = f", load {h['load_1min']:.1f}" if h.get("load_1min") is not None else ""
    lines = [f"machine: {m['cores']} cores, {m['peak_gflops_core']:.1f} GFLOPS/core peak, "
             f"memory {m['dram_gbs'][1]:.1f} GB/s on one core .. {m['dram_gbs'][-1]:.1f} GB/s "
             f"on all, {m['llc_bytes'] / 2**20:.0f} MiB last-level cache",
             f"source: {m['source']}",
             f"profiles: 1-thread op times measured on {h.get('cpu_model') or h['host_key']} "
             f"({h['isa']}{load})"]
    fc = doc.get("from_cores")
    if fc:
        lines.append(f"inputs: quick scan, calibration and 1-thread profiles taken on "
                     f"{fc['from_cores']} of this host's {fc['host_cores']} CPUs (CPU "
                     f"{', '.join(map(str, fc['cpus']))}) into a scratch database; every "
                     f"configuration predicted from them at {fc['host_cores']} cores and "
                     f"measured on all {fc['host_cores']}: the error on cores the inputs "
                     f"never saw")
        lines += unseen_lines(doc)
    return (lines + whole_run_lines(doc) + order_lines(doc) + calibration_lines(doc)
            + interval_lines(doc)
            + [f"note: {n}" for n in m.get("notes") or []])


def whole_run_lines(doc: dict) -> List[str]:
    """The model's plain whole 1-thread run against the simulated one, and
    the per-op time it charges (inputs.run_gap)."""
    w = doc.get("whole_run")
    if not w:
        return []
    if not w.get("measured_s"):
        return ["whole run: no plain 1-thread run of the model stored with its profiles "
                "(profile again with --fresh): nothing charged between ops beyond the "
                "calibrated dispatch"]
    gap = w.get("gap_per_op_s") or 0.0
    what = (f"{gap * 1e6:+.3f} us charged to each of its {w['ops']} ops at every thread count"
            if gap else "within the 1x1 rows' spread: nothing charged")
    return [f"whole run: a plain 1-thread run took {ms(w['measured_s'])} where the profiles "
            f"and calibration simulate {ms(w['simulated_s'])}: {what}"]


def unseen_lines(doc: dict) -> List[str]:
    """With --from-cores: which parts of the prediction no input measured
    (past the inputs' CPUs the model extrapolates them)."""
    fc, m = doc.get("from_cores") or {}, doc.get("machine") or {}
    cal = doc.get("calibration") or {}
    out = []
    if not doc.get("fits"):
        out.append("no multi-thread point in the inputs: every serial fraction is 0")
    fj = m.get("forkjoin_s") or []
    if fc.get("from_cores", 0) < 2 and len(fj) > 2:
        out.append(f"fork-join not measured: {fj[2] * 1e6:.2f} us at 2 threads, two "
                   f"published bare-metal core-to-core line transfers (fork and join), one "
                   f"more per thread")
    if fc.get("from_cores", 0) < 2:
        out.append("what a second core adds to a team's op inside a run (the lines of its "
                   "inputs the other core wrote, its start after the fork) is not measured: "
                   "a team's op is its split compute, its traffic on the bandwidth curve and "
                   "the fork-join")
    if not cal.get("xfer_s") and not cal.get("wake_s"):
        out.append("no core-to-core transfer or wake-up term, no dispatch cost between "
                   "executors, and a 2-executor run's own cost taken as one executor's (one "
                   "CPU: nothing crossed)")
    return ["unmeasured: " + "; ".join(out)] if out else []


def interval_lines(doc: dict) -> List[str]:
    """Where the predictions' ranges come from: this host's stored
    validations of the model's op families, or that there is none."""
    iv = doc.get("intervals")
    if iv is None or doc.get("mode") != "predict":
        return []
    if iv.get("error_lo") is None:
        return ["ranges: no validation of this model's op families stored for this host and "
                "ISA: the predictions have no measured range (run `hwtune plan MODEL "
                "--validate`, or with --from-cores K)"]
    shares = ", ".join(f"{f} {x:.0%}" for f, x in iv["shares"].items() if x > 0)
    fams = "; ".join(f"{f} {pct(r['lo'], True)} .. {pct(r['hi'], True)} "
                     f"({', '.join(r['models'])})" for f, r in iv["ranges"].items()
                     if iv["shares"].get(f, 0) > 0)
    recs = iv.get("records") or []
    fc = sorted({r["from_cores"] for r in recs if r.get("from_cores")})
    out = [f"ranges: from the errors of this host's last validations ({len(recs)} models"
           + (f", inputs on {'/'.join(map(str, fc))} CPUs for some" if fc else "")
           + f"), by op family of this model's 1-thread time ({shares}): {fams}"]
    if iv.get("missing"):
        out.append(f"ranges leave out {', '.join(iv['missing'])}: no stored validation of a "
                   f"model where that family takes a fifth of the time")
    return out


def order_lines(doc: dict) -> List[str]:
    """The 1-thread op total in each out-of-order scheduler's own order
    against the sequential order's, when profiled (or reused)."""
    orders = doc.get("order_vs_sequential") or {}
    if not orders:
        return []
    return ["1-thread op total in each scheduler's own order vs sequential: " +
            ", ".join(f"{k} {v:.2f}x" for k, v in sorted(orders.items()))]


def calibration_lines(doc: dict) -> List[str]:
    """The engine calibration's repeatability: how many attempts it took
    and the largest spread between them, with a warning when no two agreed."""
    c = doc.get("calibration") or {}
    spread = c.get("spread") or {}
    if not spread:
        return []
    name, worst = max(spread.items(), key=lambda kv: kv[1])
    line = (f"calibration: {c.get('attempts', 1)} attempts, largest spread {worst:.0%} "
            f"({name})")
    if c.get("settled", True):
        return [line]
    return [line, "warning: no two engine calibrations agreed: predictions of sub-millisecond "
            "models are uncertain; rerun with --fresh on an idle machine"]


def fit_table(doc: dict) -> Table:
    rows = [[f["op_type"], f"{f['serial_fraction']:.3f}", str(f["points"]),
             pct(f["median_rel_err"]), pct(f["max_rel_err"]), f["source"]]
            for f in doc.get("fits") or []]
    return ["op type", "serial fraction", "points", "median err", "worst err", "fitted to"], rows


def best_table(doc: dict) -> Table:
    rows = []
    for r, sp in zip(doc["cores"], doc.get("speedup_vs_sequential") or []):
        b = r["best"]
        iv = b.get("interval_s")
        rows.append([str(r["cores"]), _config(b), ms(b["latency_s"]),
                     ms_range(iv[0], iv[1]) if iv else "no validation",
                     f"{sp:.2f}x" if sp else "-"])
    return ["cores", "best configuration", "predicted latency",
            "range (validations)", "vs sequential"], rows


def ms_range(lo: float, hi: float) -> str:
    """lo-hi seconds in one unit (ms())."""
    if hi < 1e-3:
        return f"{lo * 1e6:.1f}-{hi * 1e6:.1f} us"
    return f"{lo * 1e3:.3f}-{hi * 1e3:.3f} ms" if hi < 1 else f"{lo:.3f}-{hi:.3f} s"


def split_table(result: dict) -> Table:
    """One core count: a row per executors x threads split and per-op
    thread strategy (at each scheduler's best split), a column per
    scheduler, predicted milliseconds."""
    names = list(result["schedulers"])
    labels: List[str] = []
    cells = {}
    for name, s in result["schedulers"].items():
        for c in s["splits"]:
            lab = f"{c['executors']}x{c['threads']}"
            labels += [lab] if lab not in labels else []
            cells[(lab, name)] = c["latency_s"]
        for c in s.get("strategies") or []:
            lab = {"strategy1": "Strategy 1", "strategy2": "Strategy 2",
                   "strategy3": "Strategy 3"}[c["strategy"]]
            cells[(lab, name)] = c["latency_s"]
    labels += [x for x in ("Strategy 1", "Strategy 2", "Strategy 3")
               if any((x, n) in cells for n in names)]

    def num(v):
        return "" if v is None else f"{v * 1e3:.3f}"
    rows = [[lab] + [num(cells.get((lab, n))) for n in names] for lab in labels]
    rows.append(["best"] + [num(s["best"]["latency_s"]) if s.get("best") else
                            s.get("note", "-") for s in result["schedulers"].values()])
    return ["ms"] + names, rows


def op_threads_table(result: dict) -> Table:
    ot = result.get("op_threads") or {}
    s1 = (ot.get("strategy1") or {}).get("by_type", {})
    s2 = (ot.get("strategy2") or {}).get("by_type", {})

    def cell(d):
        return ", ".join(f"{n} op{'s' if n != 1 else ''} x {t}" for t, n in
                         sorted(d.items(), key=lambda kv: int(kv[0])))
    rows = [[t, cell(s1.get(t, {})), cell(s2.get(t, {}))] for t in sorted(set(s1) | set(s2))]
    return ["op type", "Strategy 1 (threads)", "Strategy 2 (threads)"], rows


def chart_series(doc: dict) -> List[tuple]:
    """(scheduler, cores, predicted ms) per scheduler, for line charts."""
    out = []
    for name, pts in (doc.get("chart") or {}).items():
        xs = [c for c, s in pts if s is not None]
        ys = [s * 1e3 for c, s in pts if s is not None]
        if xs:
            out.append((name, xs, ys))
    return out


def fastest_sample(r: dict) -> Optional[float]:
    """A validation row's fastest sample (stored rows keep them as JSON)."""
    xs = r.get("samples")
    if xs is None and r.get("samples_json"):
        import json
        try:
            xs = json.loads(r["samples_json"])
        except ValueError:
            xs = None
    xs = [x for x in (xs or []) if isinstance(x, (int, float)) and x > 0]
    return min(xs) if xs else None


def ratio(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.3f}x"


def vs_fastest(r: dict) -> Optional[float]:
    """A validation row's prediction against its fastest sample, as a
    relative error (None without samples)."""
    from hwtune.planner.validate import rel_error
    return rel_error(r.get("predicted_s"), fastest_sample(r))


def validation_table(rows: Sequence[dict], with_model: bool = False) -> Table:
    """Predicted against the median measured (the error the goal is about),
    and against the fastest sample: other processes only add time, and on a
    shared host a 2-thread configuration's median is theirs as much as the
    engine's (2-core AMD EPYC Zen 1 at load 6-8: the 2-thread medians of
    the DeepCPU LSTM i64_h64 and ResNet-18 were 1.1-3.7x their 1x1 ones)."""
    scan = any(r.get("predicted_beside_s") is not None for r in rows)
    paired = any(r.get("paired_ratio") is not None for r in rows)
    header = (["model"] if with_model else []) + [
        "scheduler", "config", "predicted", "measured", "MAD", "error", "fastest",
        "vs fastest"] + (["probed beside (--explain)", "its error"] if scan else []) + (
        ["vs 1x1, paired", "its error"] if paired else []) + ["status"]
    out = []
    for r in rows:
        cfg = f"{r['executors']}x{r['threads']}"
        stored = [ms(r.get("predicted_beside_s")),
                  pct(beside_error(r), signed=True)] if scan else []
        out.append(([r["model"]] if with_model else []) + [
            r["scheduler"], cfg, ms(r.get("predicted_s")), ms(r.get("measured_s")),
            ms(r.get("mad_s")), pct(r.get("rel_error"), signed=True), ms(fastest_sample(r)),
            pct(vs_fastest(r), signed=True)] + stored + (
            [ratio(r.get("paired_ratio")), pct(r.get("paired_error"), signed=True)]
            if paired else []) + [status(r)])
    return header, out


def status(r: dict) -> str:
    """A row's status, and whether its samples were disturbed (their MAD
    above validate.DISTURBED_MAD of the median after a second pass) or
    measured again."""
    s = r.get("status", "ok")
    if r.get("disturbed"):
        return f"{s}, disturbed"
    return f"{s}, measured again" if r.get("remeasured") else s


def beside_error(r: dict) -> Optional[float]:
    """--explain's diagnostic: the prediction from the figures probed beside
    the samples, against the median measured."""
    from hwtune.planner.validate import rel_error
    return rel_error(r.get("predicted_beside_s"), r.get("measured_s"))


def load_warning(v: dict) -> Optional[str]:
    """The validation's note on other processes' load, when they took a
    noticeable share of the CPUs while it measured."""
    from hwtune.planner.validate import BUSY_WARN
    share = v.get("others_cpu_share")
    if share is None or share <= BUSY_WARN:
        return None
    return (f"warning: other processes used {share:.0%} of the CPUs while measuring: "
            "configurations with more threads than idle CPUs were slowed; rerun "
            "`hwtune plan --validate` on an idle machine")


def validation_sentence(summary: dict) -> str:
    if not summary.get("configs"):
        return "nothing measured"
    med, worst = summary["median_abs_error"], summary["max_abs_error"]
    ok = med <= GOAL_MEDIAN and worst <= GOAL_WORST
    return (f"median |error| {pct(med)}, worst {pct(worst)} over {summary['configs']} "
            f"configurations (goal: median <= {GOAL_MEDIAN:.0%}, worst <= {GOAL_WORST:.0%}: "
            f"{'met' if ok else 'missed'})")


def validation_sentences(v: dict) -> List[str]:
    """The goal sentence (predictions from the stored inputs, as `hwtune
    plan` makes them), and with --explain, the diagnostic's apart."""
    out = [validation_sentence(v["summary"])]
    out += disturbed_sentences(v)
    ex = v.get("explain") or {}
    beside = ex.get("summary")
    if beside and beside.get("configs"):
        n = (ex.get("beside") or {}).get("probes")
        out.append(f"diagnostic, not the figure (--explain): predicted again from the "
                   f"machine's scaling figures probed beside the samples"
                   f"{f' ({n} probes)' if n else ''}: median |error| "
                   f"{pct(beside['median_abs_error'])}, worst {pct(beside['max_abs_error'])}")
        probed = (ex.get("beside") or {}).get("model run, 1 thread (op total)")
        if probed and ex.get("op_total_stored_s"):
            out.append(f"the model's 1-thread op total: {ms(probed[1])} probed beside "
                       f"(median), {ms(ex['op_total_stored_s'])} stored")
    out += attribution_sentences(v.get("attribution"))
    paired = v.get("summary_paired")
    if paired and paired.get("configs"):
        out.append(f"against the sequential 1x1 measured in the same rounds (the machine's "
                   f"drift between rounds cancels): median |error| "
                   f"{pct(paired['median_abs_error'])}, worst {pct(paired['max_abs_error'])} "
                   f"over {paired['configs']} configurations")
    return out


def disturbed_sentences(v: dict) -> List[str]:
    """The rows whose samples stayed disturbed after a second pass: counted
    in the figure, and the figure without them beside it."""
    from hwtune.planner.validate import DISTURBED_MAD
    n = (v.get("summary") or {}).get("disturbed") or 0
    if not n:
        return []
    rest = v.get("summary_undisturbed") or {}
    without = (f"; without them: median |error| {pct(rest['median_abs_error'])}, worst "
               f"{pct(rest['max_abs_error'])} over {rest['configs']}"
               if rest.get("configs") else "")
    return [f"warning: {n} configuration(s) disturbed while measured (MAD above "
            f"{DISTURBED_MAD:.0%} of the median in two passes), counted in the figure above"
            f"{without}; rerun on an idle machine"]


def attribution_sentences(att: Optional[dict]) -> List[str]:
    """--from-cores: which missing input a miss comes from (attribute.py),
    a diagnostic apart from the figure."""
    if not att:
        return []
    if not att.get("source"):
        return [f"which part a miss comes from: not shown ({att.get('note')})"]
    parts = "; ".join(f"{part}: median |error| {pct(s['median_abs_error'])}, worst "
                      f"{pct(s['max_abs_error'])}"
                      for part, s in (att.get("parts") or {}).items() if s.get("configs"))
    return [f"diagnostic, not the figure: each row predicted again with one part from this "
            f"host's own inputs on all its CPUs ({att['source']}): {parts} (the part whose "
            f"error falls most is the one the inputs on fewer CPUs miss)"]
