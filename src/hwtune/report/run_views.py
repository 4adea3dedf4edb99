"""`hwtune run` (a static model) in words, the same in the terminal and
Markdown formats: one (label, text) line per fact, every latency in the
unit that reads it best (fmt.seconds: 1.9 µs, 2.62 ms, 1.20 s)."""

from typing import List, Tuple

from hwtune.measure.stats import percentiles
from hwtune.report.fmt import seconds


def lines(doc: dict) -> List[Tuple[str, str]]:
    lat = doc["latency_s"]
    p = percentiles(lat["samples"]) if lat.get("samples") else {}
    out = [("model", f"{doc['model']} ({doc['ops']} ops, {doc['flops'] / 1e9:.3f} GFLOP, "
                     f"graph {doc['graph_hash'][:12]})"),
           ("config", f"{doc.get('config_text') or doc['config']} ({doc['config_source']}"
                      + (f", read from {doc['db']})" if doc.get("db") and
                         str(doc["config_source"]).split("+")[0] in ("tuned", "user") else ")"))]
    if doc.get("knobs_text"):
        out.append(("", doc["knobs_text"]))
    out.append(("latency", f"median {seconds(lat['median'])} +- {seconds(lat['mad'])} (MAD, "
                           f"{lat['rel_spread']:.1%}), min {seconds(lat['min'])} over "
                           f"{doc['iterations']} runs after {doc['warmup']} warm-up"))
    if p:
        out.append(("percentile", f"p50 {seconds(p['p50'])}, p90 {seconds(p['p90'])}, "
                                   f"p99 {seconds(p['p99'])}"))
    t = doc["throughput"]
    out.append(("throughput", f"{t['runs_per_s']:.1f} runs/s, {t['gflops']:.2f} GFLOP/s"))
    tr = doc.get("trace")
    if tr:
        busy = ", ".join(f"{ex}: {b:.0%}" for ex, b in tr["busy"].items())
        out.append(("trace", f"{tr['path']} ({tr['events']} ops in {seconds(tr['makespan_s'])}; "
                             f"executors busy {busy or '-'}; open in ui.perfetto.dev)"))
    c = doc.get("check")
    if c:
        scale = ("the rounding floor of the largest output" if c.get("floored")
                 else "max|numpy|")
        out.append(("check", f"{'ok' if c['ok'] else 'MISMATCH'}: max |engine - numpy| "
                             f"{c['max_abs']:.3g} = {c['rel']:.2g} x {scale} on {c['output']} "
                             f"(tolerance {c['tolerance']:g})"))
    if doc.get("outputs_file"):
        out.append(("outputs", f"{', '.join(doc.get('outputs') or [])} -> "
                               f"{doc['outputs_file']}"))
    out.append(("stored", f"run {doc['run_id']} in {doc['db']}"))
    return out


def docs_of(data: dict) -> List[dict]:
    """One run's document, or each of a --threads list's."""
    return data["runs"] if "runs" in data else [data]
