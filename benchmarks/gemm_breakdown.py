"""GEMM breakdown against numpy/OpenBLAS, one thread, AVX-512 (or the best ISA).

Run with the installed package:
    OPENBLAS_NUM_THREADS=1 python benchmarks/gemm_breakdown.py [--reps 101] [--cpu 1]

Per shape, the median time of: numpy (np.matmul into a preallocated C),
hwtune per call including packing (hwt_gemm_run_part), hwtune with B prepacked
once (hwt_gemm_run_part_packed: constant weights; labelled separately since it
does less work per call) and packing B alone (hwt_gemm_pack_b). The samples
are interleaved (one of each per repetition) so bursts of load from other
processes on a shared machine hit every variant alike, and timed in thread
CPU time so time this thread spends descheduled does not count.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics

import numpy as np

from hwtune.measure import FixedSampling, clock, interleave
from hwtune.measure.sides import CallSide
from hwtune.native import gemm as g

SHAPES = [(64, 512, 512), (256, 1024, 1024), (1, 512, 2048), (128, 768, 768), (64, 512, 2048),
          (320, 512, 2048)]
# (M, K, N) of the Linear layers of ViT-B/16 (197 tokens), BERT-base and
# GPT-2 at seq 128: QKV (GPT-2 fused 2304), attention out, MLP up and down.
TRANSFORMER_SHAPES = [(197, 768, 768), (197, 768, 3072), (197, 3072, 768), (197, 768, 2304),
                      (128, 768, 768), (128, 768, 2304), (128, 768, 3072), (128, 3072, 768)]
# Calls per sample: a [64,512]x[512,512] call takes ~0.35 ms, so 8 calls make a
# ~3 ms sample, far above the thread clock's resolution and the ~1 us ctypes
# call; the larger shapes take one call per sample.
TARGET_SAMPLE_S = 0.003


def run_shape(M: int, K: int, N: int, reps: int) -> dict:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = np.empty((M, N), np.float32)
    desc = g.make_desc(M, K, N)
    plan = g.make_plan(desc, nth=1)
    ws = g.workspace(plan.ws_floats)
    packed = g.workspace(plan.packed_b_floats)
    pp = ctypes.byref(plan)
    pa, pb, pc, pw, pk = (g._ptr(x) for x in (a, b, c, ws, packed))
    run_part, run_packed, pack_b = (g.lib.hwt_gemm_run_part, g.lib.hwt_gemm_run_part_packed,
                                    g.lib.hwt_gemm_pack_b)
    fns = {
        "numpy": lambda: np.matmul(a, b, out=c),
        "hwtune": lambda: run_part(pp, pa, pb, pc, None, pw, 0, 1),
        "prepacked": lambda: run_packed(pp, pa, pk, pc, None, pw, 0, 1),
        "pack_b": lambda: pack_b(pp, pb, pk),
    }
    pack_b(pp, pb, pk)
    run_packed(pp, pa, pk, pc, None, pw, 0, 1)
    ref = a.astype(np.float64) @ b
    assert np.abs(c - ref).max() < 1e-3 * np.abs(ref).max(), "prepacked result is wrong"
    t1 = min(clock.cpu_per_call(fns["numpy"], 1) for _ in range(3))
    inner = max(1, round(TARGET_SAMPLE_S / max(t1, 1e-7)))
    sides = [CallSide(fn, calls=inner, cpu_time=True) for fn in fns.values()]
    got = interleave(sides, FixedSampling(reps), raise_errors=True)
    out = {k: statistics.median(m.samples) for k, m in zip(fns, got)}
    out["gflop"] = 2.0 * M * N * K * 1e-9
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=101)
    ap.add_argument("--cpu", type=int, default=None, help="pin to this CPU")
    ap.add_argument("--shapes", default=None,
                    help="MxKxN list, e.g. 197x768x768,128x768x2304 (default: the built-in set)")
    ap.add_argument("--transformers", action="store_true",
                    help="the Linear GEMMs of ViT-B/16 (M=197), BERT-base and GPT-2 (M=128)")
    args = ap.parse_args()
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        print("warning: set OPENBLAS_NUM_THREADS=1 for a one-thread comparison")
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    print(f"{'shape':>22} {'numpy':>14} {'hwtune':>22} {'prepacked B':>22} {'pack_b':>9}")
    shapes = SHAPES
    if args.transformers:
        shapes = TRANSFORMER_SHAPES
    if args.shapes:
        shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    for M, K, N in shapes:
        r = run_shape(M, K, N, args.reps)
        gf = r["gflop"]

        def fmt(k):
            return f"{r[k] * 1e6:7.1f}us {gf / r[k]:5.1f}GF"

        print(f"[{M},{K}]x[{K},{N}]".rjust(22), fmt("numpy"),
              f"{fmt('hwtune')} {r['numpy'] / r['hwtune']:4.2f}x",
              f"{fmt('prepacked')} {r['numpy'] / r['prepacked']:4.2f}x",
              f"{r['pack_b'] * 1e6:7.1f}us")


if __name__ == "__main__":
    main()
