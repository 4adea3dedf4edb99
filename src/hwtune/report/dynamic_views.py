"""What the formats show of dynamic models, decided once: `hwtune run
--inputs` (head lines and the result table), `hwtune tune-graph --inputs`
(its summary lines) and the report's section (throughput per model and
policy, the batch-size curve). Each format draws these its own way."""

from typing import Dict, List, Optional, Tuple


View = Tuple[List[str], List[list]]


def config_cell(r: dict, source: Optional[str] = None) -> str:
    """'1x2 c256 (tuned)': executors x threads, chunk, per-op counts, source."""
    n_ops = r.get("op_threads")
    n_ops = len(n_ops) if isinstance(n_ops, dict) else (n_ops or 0)
    text = f"{r['executors']}x{r['threads']} c{r['chunk']}"
    if n_ops:
        text += f" +{n_ops} op"
    source = source if source is not None else r.get("config_source")
    return f"{text} ({source})" if source else text


def check_cell(check) -> str:
    if check is None:
        return "-"
    return f"{'ok' if check['ok'] else 'MISMATCH'} ({check['rel']:.1e})"


# -- hwtune run --inputs ------------------------------------------------------
def run_head(doc: dict) -> List[str]:
    load = doc.get("load") or [None, None]
    cpu = f" on {doc['cpu']}" if doc.get("cpu") else ""
    loads = (f"; 1-min load {load[0]:.2f} before, {load[1]:.2f} after"
             if None not in load else "")
    return [f"model:    {doc['model']} ({doc['ops']} ops in F and readouts, {doc['states']} "
            f"states, model {doc['model_hash'][:12]})",
            f"inputs:   {doc['inputs']}: {doc['samples']} samples, {doc['vertices']} vertices, "
            f"{doc['edges']} child links (sha256 {doc['samples_digest'][:12]})",
            f"engine:   kernels {doc['isa']}{cpu}, {doc['iterations']} passes each, "
            f"interleaved{loads}"]


def run_table(doc: dict) -> View:
    header = ["policy", "batch", "config", "samples/s", "pass (ms)", "F calls", "rows/call",
              "vs serial", "check"]
    rows = []
    for r in doc["results"]:
        vs = r.get("vs_serial")
        rows.append([r["policy"], r["batch"], config_cell(r), f"{r['samples_per_s']:.1f}",
                     f"{r['median_s'] * 1e3:.2f}", r["groups"], f"{r['rows_per_group']:.1f}",
                     "-" if vs is None else f"{vs:.2f}x", check_cell(r.get("check"))])
    return header, rows


# -- hwtune tune-graph --inputs -------------------------------------------------
def _ms(s) -> str:
    return "-" if s is None else f"{s * 1e3:.2f} ms"


def histogram_total(hist: Dict[str, Dict]) -> Dict[int, int]:
    """rows -> op calls over every op of F."""
    out: Dict[int, int] = {}
    for by_rows in hist.values():
        for rows, calls in by_rows.items():
            out[int(rows)] = out.get(int(rows), 0) + int(calls)
    return dict(sorted(out.items()))


def tune_lines(doc: dict) -> List[str]:
    d, t = doc["default"], doc["tuned"]
    load = doc.get("load") or [0.0, 0.0]
    hist = histogram_total(doc.get("histogram") or {})
    out = [f"model:     {doc['model']} ({doc['ops']} ops, model {doc['model_hash'][:12]}), "
           f"policy {doc['policy']}, batch {doc['batch']}",
           f"inputs:    {doc['inputs']}: {doc['samples']} samples "
           f"(sha256 {doc['samples_digest'][:12]})",
           f"machine:   {doc.get('cpu') or '?'}, kernels {doc['isa']}, "
           f"{doc['cpus']} usable CPUs",
           f"row counts per op call over one pass (rows:calls, every op of F, chunk "
           f"{doc.get('histogram_chunk', '?')}): "
           + (" ".join(f"{r}:{c}" for r, c in hist.items()) or "-")]
    for name, st in doc["stages"].items():
        out.append(f"{name + ':':<12}{st['summary']} ({st['trials']} trials, {st['measured']} "
                   f"measured, {st['reused']} reused, {st['seconds']:.1f} s"
                   f"{', stopped: ' + st['stopped'] if st['stopped'] != 'done' else ''})")
    out.append(f"default:   {_ms(d['median_s'])} a pass, {d['samples_per_s']:.1f} samples/s "
               f"({config_cell(d['config'], '')})")
    out.append(f"tuned:     {_ms(t['median_s'])} a pass, {t['samples_per_s']:.1f} samples/s "
               f"({config_cell(t['config'], '')}; the {doc['chosen']} candidate)")
    out.append(f"ratio:     {doc['speedup']:.2f}x tuned vs default (medians of {doc['reps']} "
               f"passes each, interleaved; 1-min load {load[0]:.2f} before, {load[1]:.2f} "
               "after)")
    out.append("measured:  " + ", ".join(
        f"{c['label']} {c['speedup']:.2f}x ({config_cell(c['config'], '')})"
        for c in doc.get("candidates") or []))
    for w in doc.get("why") or []:
        out.append(f"  - {w}")
    out.append(f"stored:    {doc['chosen']} config as the tuned config {doc['config_id']} "
               f"(used by hwtune run --inputs at batch {doc['batch']}); run {doc['run_id']} "
               f"in {doc['db']}")
    return out


# -- hwtune report ----------------------------------------------------------------
def throughput_table(doc: dict) -> Optional[Tuple[str, List[str], List[list]]]:
    """Per model (and sample set) and policy: the best samples/s stored and
    the batch it was measured at, over the latest figure of each batch."""
    entries = doc.get("dynamic") or []
    if not entries:
        return None
    rows = []
    for e in entries:
        for policy, points in e["curves"].items():
            best = max(points, key=lambda p: p["samples_per_s"] or 0)
            batches = [p["batch"] for p in points]
            rows.append([f"{e['model']} ({e['samples']} samples {e['samples_digest'][:6]})",
                         policy, f"{best['samples_per_s']:.1f}", best["batch"],
                         ", ".join(map(str, batches)) if len(batches) < 4 else
                         f"{batches[0]}..{batches[-1]} ({len(batches)})",
                         config_cell(best), best["run_id"]])
    return (f"Dynamic models: best samples/s per policy ({len(entries)} model/sample set"
            f"{'s' if len(entries) != 1 else ''})",
            ["model", "policy", "samples/s", "batch", "batches", "config", "run"], rows)


def curve_series(entry: dict) -> List[tuple]:
    """(policy, batches, samples/s) per policy, for a line chart over batch."""
    return [(policy, [p["batch"] for p in points], [p["samples_per_s"] for p in points])
            for policy, points in entry["curves"].items()]


def curve_title(entry: dict) -> str:
    return (f"{entry['model']}: samples/s vs batch ({entry['samples']} samples "
            f"{entry['samples_digest'][:6]}, {entry['runs']} run"
            f"{'s' if entry['runs'] != 1 else ''})")


def curve_charts(doc: dict) -> List[tuple]:
    """(i, title, series) of every stored model entry i measured at more
    than one batch: the line charts each report format draws."""
    out = []
    for i, e in enumerate(doc.get("dynamic") or []):
        series = curve_series(e)
        if any(len(xs) > 1 for _, xs, _ in series):
            out.append((i, curve_title(e), series))
    return out
