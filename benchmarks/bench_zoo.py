"""The model zoo benchmark (issue #41): real architectures as users bring
them, through hwtune as a user drives it.

Run with the installed package (peers: pip install onnxruntime torch==2.13.0
transformers; torchvision: pip install --no-deps torchvision==0.28.0 pillow):
    python benchmarks/bench_zoo.py [--models resnet50,bert_base] [--small]
        [--threads 1,2] [--tune 300] [--reps 15] [--workdir DIR] [--db DB]
        [--json OUT.json]

For each architecture of benchmarks/zoo_models.py (torchvision classifiers,
transformers BERT / DistilBERT / GPT-2 / RoBERTa, ViT, Swin, bidirectional
LSTM / GRU; seeded weights, nothing downloaded):
  1. build it with its library's own code and export it with
     torch.onnx.export (TorchScript exporter, opset 17), the example inputs
     saved as .npy beside it;
  2. `hwtune import` (ok, or the error line);
  3. `hwtune compare MODEL.onnx --with ort,torch --threads T --json` (--with) on the
     example inputs: hwtune against ONNX Runtime and PyTorch (eager, one
     call per op of the same graph), interleaved, outputs checked (max error
     relative to the output's scale; the bound is 1e-4);
  4. with --tune B: `hwtune tune-graph MODEL.onnx --budget B` then step 3
     again (hwtune uses its tuned config);
  5. the share of this host's measured FMA peak at T threads (`hwtune scan`
     in --db; run once if the database has none) that hwtune's median
     reaches: graph FLOPs / median / peak.
It prints one table (a row per model and thread count) and the machine's
load before and after each compare (a row under load decides nothing), and
with --json writes every figure.

Ratios are peer median / hwtune median: above 1.0 hwtune is faster.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import numpy as np

import zoo_models as Z  # noqa: E402 (benchmarks/ is sys.path[0])

from hwtune.measure.clock import monotonic

HWTUNE = os.path.join(os.path.dirname(sys.executable), "hwtune")
TOL = 1e-4  # hwtune compare's agreement bound (relative to the output's scale)


def sh(args, timeout=None):
    """(returncode, stdout, the stderr's last error line or tail)."""
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout} s"
    errs = [ln for ln in r.stderr.splitlines() if ln.startswith("error")]
    return r.returncode, r.stdout, (errs[0] if errs else r.stderr.strip()[-300:])


def exported(entry, small, workdir):
    """(onnx path, [--input NAME=FILE.npy ...]) of one zoo entry, exported
    once per work folder."""
    stem = os.path.join(workdir, entry.name + ("_small" if small else ""))
    path = stem + ".onnx"
    built = None
    if not os.path.exists(path):
        built = entry.build(small)
        Z.export(built, path)
    flags = []
    for name in (built.inputs if built else _input_names(path)):
        npy = f"{stem}.{name}.npy"
        if built is not None:
            np.save(npy, built.inputs[name])
        flags += ["--input", f"{name}={npy}"]
    return path, flags


def _input_names(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    return [i.name for i in m.graph.input if i.name not in inits]


def fma_peak(db, threads):
    """GFLOPS of the stored FMA peak at `threads` (None: none stored)."""
    rc, out, _ = sh([HWTUNE, "scan", "--show", "--json", "--db", db])
    if rc != 0:
        sh([HWTUNE, "scan", "--quick", "--db", db])
        rc, out, _ = sh([HWTUNE, "scan", "--show", "--json", "--db", db])
    if rc != 0:
        return None
    rows = json.loads(out).get("peak", {}).get("fma", [])
    vals = [r["value"] for r in rows if r.get("threads") == threads and r.get("value")]
    return max(vals) if vals else None


def graph_flops(onnx_path):
    rc, out, _ = sh([HWTUNE, "model", "info", onnx_path[:-5] + ".json", "--json"])
    return json.loads(out)["flops"] if rc == 0 else None


def compare(path, flags, threads, reps, db, peers="ort,torch"):
    rc, out, err = sh([HWTUNE, "compare", path, "--with", peers, "--threads",
                       str(threads), "--reps", str(reps), "--json", "--db", db] + flags)
    if not out.strip().startswith("{"):
        return {"error": err or f"exit {rc}"}
    res = json.loads(out)
    sides = {s["key"]: s for s in res["sides"]}
    row = {"hwtune_ms": sides["hwtune"]["median_s"] * 1e3,
           "load": [res["load_before"][0], res["load_after"][0]],
           "config": sides["hwtune"]["describe"], "isa": res["isa"], "cpu": res["cpu"]}
    for key in ("ort", "torch"):
        if key in sides:
            row[f"{key}_ms"] = sides[key]["median_s"] * 1e3
            row[f"{key}_ratio"] = sides[key]["ratio"]
            row[f"{key}_err"] = sides[key]["max_rel_err"]
    errs = [row.get("ort_err"), row.get("torch_err")]
    row["max_err"] = max((e for e in errs if e is not None), default=None)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(Z.BY_NAME),
                    help="comma-separated zoo names (default: all)")
    ap.add_argument("--small", action="store_true", help="the reduced sizes the tests use")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--tune", type=int, default=0, metavar="SECONDS",
                    help="tune-graph budget per model (0: untuned only)")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--with", dest="peers", default="ort,torch",
                    help="peers of hwtune compare (ort, torch; default both)")
    ap.add_argument("--workdir", default="zoo-work")
    ap.add_argument("--db", default=None, help="results database (default: WORKDIR/zoo.db)")
    ap.add_argument("--json", dest="json_out", default=None)
    a = ap.parse_args(argv)
    names = [n for n in a.models.split(",") if n]
    unknown = [n for n in names if n not in Z.BY_NAME]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; the zoo: {', '.join(Z.BY_NAME)}")
    threads = [int(t) for t in a.threads.split(",")]
    os.makedirs(a.workdir, exist_ok=True)
    db = a.db or os.path.join(a.workdir, "zoo.db")
    peaks = {t: fma_peak(db, t) for t in threads}
    print(f"# FMA peak (GFLOPS, stored scan): "
          + ", ".join(f"{t} thread(s) {p:.1f}" if p else f"{t}: none" for t, p in peaks.items()))
    rows = []
    for name in names:
        entry = Z.BY_NAME[name]
        t0 = monotonic()
        row = {"model": name, "source": entry.source}
        try:
            path, flags = exported(entry, a.small, a.workdir)
        except Exception as e:  # an exporter failure is the row's result
            row["import"] = f"export failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
            rows.append(row)
            print(f"{name}: {row['import']}", flush=True)
            continue
        rc, _, err = sh([HWTUNE, "import", path, "-o", path[:-5] + ".json"])
        row["import"] = "ok" if rc == 0 else err
        if rc == 0:
            row["gflop"] = (graph_flops(path) or 0) / 1e9
            for t in threads:
                row[f"untuned_t{t}"] = compare(path, flags, t, a.reps, db, a.peers)
            if a.tune:
                rc, _, err = sh([HWTUNE, "tune-graph", path, "--budget", str(a.tune),
                                 "--db", db], timeout=a.tune * 3 + 600)
                row["tune"] = "ok" if rc == 0 else err
                for t in threads:
                    row[f"tuned_t{t}"] = compare(path, flags, t, a.reps, db, a.peers)
            for key in [k for k in row if k.startswith(("untuned_t", "tuned_t"))]:
                r, t = row[key], int(key.rsplit("_t", 1)[1])
                if "hwtune_ms" in r and peaks.get(t) and row.get("gflop"):
                    r["peak_share"] = row["gflop"] / (r["hwtune_ms"] / 1e3) / peaks[t]
        row["seconds"] = monotonic() - t0
        rows.append(row)
        print(line(row, threads), flush=True)
    print()
    print(table(rows, threads))
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"peaks": peaks, "rows": rows}, f, indent=1)
    bad = [r["model"] for r in rows if r["import"] != "ok" or any(
        isinstance(v, dict) and (v.get("error") or (v.get("max_err") or 0) > TOL)
        for v in r.values())]
    if bad:
        print(f"\nnot importing, failing or not matching: {', '.join(bad)}")
    return 1 if bad else 0


def _fmt(v, f):
    return "-" if v is None else format(v, f)


def line(row, threads):
    if row["import"] != "ok":
        return f"{row['model']}: {row['import']}"
    parts = [f"{row['model']}: imported, {row.get('gflop', 0):.2f} GFLOP"]
    for key in [k for k in row if k.startswith(("untuned_t", "tuned_t"))]:
        r = row[key]
        if "error" in r:
            parts.append(f"{key}: {r['error']}")
        else:
            parts.append(f"{key}: {r['hwtune_ms']:.2f} ms, x ORT {_fmt(r.get('ort_ratio'), '.2f')}"
                         f", err {_fmt(r.get('max_err'), '.1e')}")
    return "; ".join(parts)


def table(rows, threads):
    head = ("model", "import", "max err", "T", "hwtune ms", "x ORT", "x torch",
            "tuned ms", "x ORT tuned", "x torch tuned", "% FMA peak", "load")
    out = [head]
    for row in rows:
        if row["import"] != "ok":
            out.append((row["model"], row["import"][:60]) + ("",) * (len(head) - 2))
            continue
        for t in threads:
            u, tu = row.get(f"untuned_t{t}", {}), row.get(f"tuned_t{t}", {})
            best = tu if "hwtune_ms" in tu else u
            errs = [x.get("max_err") for x in (u, tu) if x.get("max_err") is not None]
            out.append((row["model"], "ok" if "error" not in u else u["error"][:40],
                        _fmt(max(errs) if errs else None, ".1e"), str(t),
                        _fmt(u.get("hwtune_ms"), ".2f"), _fmt(u.get("ort_ratio"), ".2f"),
                        _fmt(u.get("torch_ratio"), ".2f"), _fmt(tu.get("hwtune_ms"), ".2f"),
                        _fmt(tu.get("ort_ratio"), ".2f"), _fmt(tu.get("torch_ratio"), ".2f"),
                        _fmt(100 * best["peak_share"] if best.get("peak_share") else None,
                             ".0f"),
                        "/".join(f"{x:.1f}" for x in u.get("load", []))))
    widths = [max(len(r[i]) for r in out) for i in range(len(head))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in out]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
