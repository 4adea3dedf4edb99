"""Key figures: the few numbers per scan and per tuned model that history
and --compare follow. Each is {key, label, unit, better, value}; the key is
stable across runs so the same figure lines up over dates and hosts."""

from typing import Dict, List, Optional

Figure = Dict[str, object]


def _fig(key: str, label: str, value: Optional[float], unit: str, better: str) -> Figure:
    return {"key": key, "label": label, "value": value, "unit": unit, "better": better}


def _top(rows: List[dict]) -> Optional[dict]:
    """The row at the most threads: the figure a user would quote."""
    return max(rows, key=lambda r: r["threads"]) if rows else None


def scan_figures(scan: Optional[dict]) -> List[Figure]:
    if not scan:
        return []
    out = []
    for bench, by, name, unit in (("fma", "isa", "FMA peak", "GFLOPS"),
                                  ("triad", "where", "triad", "GB/s")):
        groups: Dict[str, List[dict]] = {}
        for r in scan["peak"][bench]:
            groups.setdefault(r[by], []).append(r)
        for key, rows in groups.items():
            r = _top(rows)
            out.append(_fig(f"{bench}:{key}", f"{name} {key} ({r['threads']}t)", r["value"],
                            unit, "higher"))
    for g in scan["gemm"]:
        if not g["rows"]:
            continue
        one, top = g["rows"][0], _top(g["rows"])
        out.append(_fig(f"gemm:{g['shape']}:1t", f"GEMM {g['shape']} ({one['threads']}t)",
                        one["value"], "GFLOPS", "higher"))
        if top is not one:
            out.append(_fig(f"gemm:{g['shape']}:top", f"GEMM {g['shape']} ({top['threads']}t)",
                            top["value"], "GFLOPS", "higher"))
        if top.get("vs_blas"):
            out.append(_fig(f"gemm:{g['shape']}:vs_blas", f"GEMM {g['shape']} vs BLAS",
                            top["vs_blas"], "x", "higher"))
    for e in scan["eltwise"]:
        top = _top(e["rows"])
        if top:
            out.append(_fig(f"eltwise:{e['op']}", f"{e['op']} ({top['threads']}t)",
                            top["value"], e["unit"] or "", "higher"))
    for op, c in scan["corun"].items():
        b = c["best"]
        out.append(_fig(f"corun:{op}:best", f"co-run {op} best", b["gflops"], "GFLOPS",
                        "higher"))
        if c.get("pinned_vs_os_max"):
            out.append(_fig(f"corun:{op}:pin_gain", f"co-run {op} pinned/OS",
                            c["pinned_vs_os_max"], "x", "higher"))
    return out


def model_figures(m: dict, tag: str = "") -> List[Figure]:
    """tag: set when two tuned graphs share a model name (different --set
    overrides), so their figures stay apart."""
    name = f"{m['model']}{tag}"
    return [
        _fig(f"model:{name}:default", f"{name} default", m["default"].get("median_s"), "s",
             "lower"),
        _fig(f"model:{name}:tuned", f"{name} tuned", m["tuned"].get("median_s"), "s", "lower"),
        _fig(f"model:{name}:speedup", f"{name} speedup", m.get("speedup"), "x", "higher"),
    ]


def snapshot_figures(scan: Optional[dict], models: List[dict]) -> List[Figure]:
    out = scan_figures(scan)
    names = [m["model"] for m in models]
    for m in models:
        tag = f"@{m['graph_hash'][:8]}" if names.count(m["model"]) > 1 else ""
        out += model_figures(m, tag)
    return out


def ratio_rows(a: List[Figure], b: List[Figure]) -> List[dict]:
    """Side-by-side rows over the union of keys (A's order first); ratio =
    B/A, and `gain` > 1 whenever B is better whichever way the unit runs."""
    bi = {f["key"]: f for f in b}
    keys = [f["key"] for f in a] + [f["key"] for f in b if f["key"] not in
                                    {x["key"] for x in a}]
    ai = {f["key"]: f for f in a}
    rows = []
    for k in keys:
        fa, fb = ai.get(k), bi.get(k)
        meta = fa or fb
        va = fa["value"] if fa else None
        vb = fb["value"] if fb else None
        ratio = vb / va if va and vb is not None else None
        gain = None
        if ratio:
            gain = ratio if meta["better"] == "higher" else 1.0 / ratio
        rows.append({"key": k, "label": meta["label"], "unit": meta["unit"],
                     "better": meta["better"], "a": va, "b": vb,
                     "ratio": None if ratio is None else round(ratio, 4),
                     "gain": None if gain is None else round(gain, 4)})
    return rows
