"""Turn stored scan rows into one summary dict.

Every output format (hwtune.report.export: terminal tables, --json, the
report's markdown and HTML) prints this dict, so everything derived
(speedup, efficiency, saturation, vs-BLAS ratio, best co-run layout) is
computed here once, from what results.db holds, never from in-memory state
of the scan that ran.
"""

from __future__ import annotations

import json
from typing import Optional

from hwtune.errors import UsageError
from hwtune.scan import stats
from hwtune.scan.steps import DEFAULT_SATURATION, REFERENCE_VARIANT

NOISY_ADVICE = ("some measurements stayed noisy after 2 re-measurements: close other "
                "programs, or raise --reps")


def _params(row: dict) -> dict:
    p = row.get("params") or {}
    return json.loads(p) if isinstance(p, str) else dict(p)


def _warnings(facts: dict) -> list:
    w = facts.get("warnings") or []
    return [w] if isinstance(w, str) else list(w)


def _scaling(rows: list, saturation: float) -> dict:
    """rows: one per thread count (value = throughput). Adds speedup,
    efficiency (relative to the smallest measured count) and the saturation
    point."""
    rows = sorted(rows, key=lambda r: r["threads"])
    base = rows[0]
    out = []
    for r in rows:
        out.append(dict(
            r,
            speedup=round(stats.speedup(base["value"], r["value"]), 4),
            efficiency=round(stats.efficiency(base["value"], r["value"], r["threads"],
                                              base["threads"]), 4),
        ))
    sat = stats.saturation_point([r["threads"] for r in rows], [r["value"] for r in rows],
                                 saturation)
    return {"rows": out, "saturation": sat}


def _point(row: dict) -> dict:
    return {
        "threads": row["threads"],
        # NULL when the database refused a non-finite figure: count it as 0
        # throughput so the curve shows the hole instead of crashing.
        "value": row["value"] if row.get("value") is not None else 0.0,
        "time_s": row.get("median_s"),
        "mad_s": row.get("mad_s"),
        "rel_spread": row.get("rel_spread"),
        "status": row.get("status", "ok"),
        "pinned": row.get("pinned"),
    }


def _label(row: dict, p: dict) -> str:
    shape = "x".join(str(p[k]) for k in ("M", "K", "N")) if "M" in p else (
        f"n={p['n']}" if "n" in p else "")
    where = p.get("where", "")
    place = (f"{row.get('executors', 1)}x{row['threads']}t" if row["bench"] == "corun"
             else f"{row['threads']}t")
    op = "" if row["op"] == row["bench"] else row["op"]
    return " ".join(x for x in (row["bench"], op, shape, where, place,
                                row.get("kernel_variant") or "") if x)


def _with_fma_ratio(dot: dict, fma: list) -> dict:
    """The int8 / bf16 peaks, each with its ratio to the FP32 FMA peak of
    the same ISA and threads (None without that row). A kind with no row
    (the CPU lacks every variant of it, or an older scan) is left out."""
    by = {(r["isa"], r["threads"]): r["value"] for r in fma}
    out = {}
    for kind, rows in dot.items():
        for r in rows:
            f = by.get((r["isa"], r["threads"]))
            r["vs_fma"] = round(r["value"] / f, 4) if f else None
        if rows:
            out[kind] = rows
    return out


def summarize(rows: list, *, run: Optional[dict] = None, host: Optional[dict] = None,
              facts=None, saturation: Optional[float] = None) -> dict:
    """Build the scan summary from measurement rows (as db.measurements returns)."""
    facts = dict(facts or {})
    if saturation is None:
        try:
            saturation = float(facts.get("saturation", DEFAULT_SATURATION))
        except (TypeError, ValueError):
            saturation = DEFAULT_SATURATION

    fma, triad, noisy, errors = [], [], [], []
    dot = {"int8": [], "bf16": []}
    gemm_groups, elt_groups, corun_groups = {}, {}, {}
    for row in rows:
        p = _params(row)
        if row.get("status") == "noisy":
            noisy.append({"label": _label(row, p), "rel_spread": row.get("rel_spread")})
        if row.get("status") == "error":
            # A failed step has no figure: list it, keep it off the curves.
            errors.append({"label": _label(row, p), "note": row.get("note")})
            continue
        bench = row["bench"]
        if bench == "fma_peak":
            pt = _point(row)
            fma.append(dict(pt, isa=row["kernel_variant"], per_thread=pt["value"] / row["threads"]))
        elif bench == "dot_peak" and row["op"] in dot:
            dot[row["op"]].append(dict(_point(row), isa=row["kernel_variant"],
                                       kernel=p.get("kernel"), unit=row.get("unit")))
        elif bench == "triad":
            triad.append(dict(_point(row), where=p.get("where"), n=p.get("n")))
        elif bench == "gemm":
            key = (p["M"], p["K"], p["N"])
            side = "ref" if row["kernel_variant"] == REFERENCE_VARIANT else "hw"
            g = gemm_groups.setdefault(key, {"hw": {}, "ref": {}, "isa": None})
            g[side][row["threads"]] = _point(row)
            if side == "hw":
                g["isa"] = row["kernel_variant"]
        elif bench == "eltwise":
            key = (row["op"], p.get("n"))
            e = elt_groups.setdefault(key, {"unit": row.get("unit"), "isa": row["kernel_variant"],
                                            "pts": {}})
            e["pts"][row["threads"]] = _point(row)
        elif bench == "corun":
            c = corun_groups.setdefault(row["op"], [])
            c.append({
                "executors": row.get("executors", 1), "threads": row["threads"],
                "cpus": row.get("executors", 1) * row["threads"],
                "placement": "pinned" if row.get("pinned") else "os",
                "pinned": bool(row.get("pinned")),
                "gflops": _point(row)["value"], "team_gflops": p.get("team_gflops"),
                "rel_spread": row.get("rel_spread"), "status": row.get("status", "ok"),
            })

    gemm = []
    for (M, K, N), g in gemm_groups.items():
        sc = _scaling(list(g["hw"].values()), saturation) if g["hw"] else {"rows": [],
                                                                            "saturation": None}
        ref = _scaling(list(g["ref"].values()), saturation) if g["ref"] else None
        for r in sc["rows"]:
            br = g["ref"].get(r["threads"])
            r["blas_value"] = br["value"] if br else None
            r["blas_time_s"] = br["time_s"] if br else None
            r["vs_blas"] = round(r["value"] / br["value"], 4) if br and br["value"] else None
        gemm.append({
            "shape": f"{M}x{K}x{N}", "M": M, "K": K, "N": N, "isa": g["isa"],
            "unit": "GFLOPS", "rows": sc["rows"], "saturation": sc["saturation"],
            "blas_saturation": ref["saturation"] if ref else None,
        })

    eltwise = []
    for (op, n), e in elt_groups.items():
        sc = _scaling(list(e["pts"].values()), saturation)
        eltwise.append({"op": op, "n": n, "isa": e["isa"], "unit": e["unit"],
                        "rows": sc["rows"], "saturation": sc["saturation"]})

    corun = {}
    for op, entries in corun_groups.items():
        entries.sort(key=lambda c: (c["executors"] * c["threads"], c["executors"],
                                    not c["pinned"]))
        best = max(entries, key=lambda c: c["gflops"])
        gains = []
        for c in entries:
            if c["pinned"]:
                os_ = [o for o in entries if not o["pinned"] and o["executors"] == c["executors"]
                       and o["threads"] == c["threads"]]
                if os_ and os_[0]["gflops"] > 0:
                    gains.append(c["gflops"] / os_[0]["gflops"])
        corun[op] = {"rows": entries, "best": best,
                     "pinned_vs_os_max": round(max(gains), 4) if gains else None}

    advice = []
    if noisy:
        advice.append(NOISY_ADVICE)
    summary = {
        "run": _run_info(run),
        "host": _host_info(host),
        "facts": {k: v for k, v in facts.items() if k != "warnings"},
        "saturation_threshold": saturation,
        "peak": {"fma": fma, "triad": triad, **_with_fma_ratio(dot, fma)},
        "gemm": gemm,
        "eltwise": eltwise,
        "corun": corun,
        "noisy": noisy,
        "errors": errors,
        "warnings": _warnings(facts),
        "advice": advice,
        "measurements": len(rows),
    }
    return summary


def _run_info(run: Optional[dict]) -> dict:
    if not run:
        return {}
    keep = ("run_id", "kind", "status", "started_at", "finished_at", "hwtune_version",
            "options", "note")
    return {k: run[k] for k in keep if k in run}


def _host_info(host: Optional[dict]) -> dict:
    if not host:
        return {}
    fp = host.get("fingerprint", host)
    if isinstance(fp, str):
        fp = json.loads(fp)
    keep = ("host_key", "cpu_model", "vendor", "arch", "sockets", "physical_cores",
            "logical_cpus", "threads_per_core", "usable_cpus", "isa_best", "kernel_variants")
    out = {k: fp.get(k) for k in keep if k in fp}
    out.setdefault("host_key", host.get("host_key"))
    return out


def load_run(db, run_id: int, saturation: Optional[float] = None) -> dict:
    """Summary of one stored run; saturation overrides the stored threshold."""
    run = db.run(run_id)
    return summarize(db.measurements(run_id), run=run, host=db.host(run["host_key"]),
                     facts=db.facts(run_id), saturation=saturation)


def load_last(db, host_key: str, saturation: Optional[float] = None) -> dict:
    """Summary of the last scan stored for this host; UsageError if none."""
    # The newest scan, interrupted ones included (they hold real figures);
    # a 'running' one belongs to a scan still in progress, so skip it.
    run = db.last_run(host_key, "scan", complete_only=False)
    if run and run["status"] == "running":
        run = db.last_run(host_key, "scan")
    if not run:
        raise UsageError("no stored scan for this host in the database: run 'hwtune scan' first")
    return load_run(db, run["run_id"], saturation)
