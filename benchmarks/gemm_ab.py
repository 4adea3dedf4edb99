"""The same GEMMs through two builds of libhwtune, interleaved in one process.

    python benchmarks/gemm_ab.py --a OTHER/libhwtune.so --b THIS/libhwtune.so \
        [--shapes 128x768x768,197x768x3072] [--reps 41]

Per shape (M x K x N, B untransposed, packed by the call as a CONV's
activations or a Linear layer's input are), hwt_gemm_run_part of each build
on the same operands, one thread, thread CPU time, A and B alternating in
every round (the order rotating). Prints each build's
median in us and a/b (above 1.0 the --b build is faster). The two builds
are separate ctypes handles (RTLD_LOCAL), so each call runs its own code.
With --numpy, numpy's matmul (the system BLAS numpy was built with; run
with OPENBLAS_NUM_THREADS=1 for one thread) is a third side in the same
rounds, and b/numpy shows the --b build against it (above 1.0 numpy is
faster).
"""

from __future__ import annotations

import argparse
import ctypes
import statistics

import numpy as np

from hwtune.measure import FixedSampling, interleave
from hwtune.measure.sides import CallSide
from hwtune.native import gemm as g

DEFAULT = ("128x768x768,128x768x3072,128x3072x768,197x768x2304,64x512x512,"
           "256x1024x1024,128x64x3136,256x256x3136")


def bind(path: str):
    lib = ctypes.CDLL(path)
    mk = lib.hwt_gemm_plan_make
    mk.argtypes = [ctypes.POINTER(g.GemmDesc), ctypes.c_int, ctypes.c_int,
                   ctypes.POINTER(g.GemmPlan)]
    run = lib.hwt_gemm_run_part
    run.argtypes = [ctypes.POINTER(g.GemmPlan)] + [ctypes.c_void_p] * 5 + [ctypes.c_int] * 2
    return mk, run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--shapes", default=DEFAULT)
    ap.add_argument("--reps", type=int, default=41)
    ap.add_argument("--isa", default="avx2")
    ap.add_argument("--numpy", action="store_true",
                    help="numpy.matmul as a third side (the system BLAS)")
    args = ap.parse_args()
    isa = {"generic": 0, "avx2": 1, "avx512": 2}[args.isa]
    sides = [bind(args.a), bind(args.b)]
    print(f"{'shape':>18} {'a us':>9} {'b us':>9} {'a/b':>6}"
          + (f" {'numpy us':>9} {'b/numpy':>7}" if args.numpy else ""))
    for s in args.shapes.split(","):
        M, K, N = (int(x) for x in s.split("x"))
        rng = np.random.default_rng(0)
        a = rng.standard_normal((M, K)).astype(np.float32)
        b = rng.standard_normal((K, N)).astype(np.float32)
        cs = [np.empty((M, N), np.float32) for _ in sides]
        desc = g.make_desc(M, K, N)
        calls = []
        for (mk, run), c in zip(sides, cs):
            p = g.GemmPlan()
            if mk(ctypes.byref(desc), isa, 1, ctypes.byref(p)) != 0:
                raise SystemExit(f"plan failed for {s}")
            ws = g.workspace(p.ws_floats)
            args_ = (ctypes.byref(p), a.ctypes.data, b.ctypes.data, c.ctypes.data, None,
                     ws.ctypes.data, 0, 1)
            calls.append((run, args_, p, ws))
        # One sample of each build per round, the order rotating every
        # round; thread CPU time, so time descheduled does not count.
        timed = [CallSide(lambda c=c: c[0](*c[1]), calls=1, cpu_time=True) for c in calls]
        if args.numpy:
            cn = np.empty((M, N), np.float32)
            timed.append(CallSide(lambda: np.matmul(a, b, out=cn), calls=1, cpu_time=True))
        t = [m.samples for m in interleave(timed, FixedSampling(args.reps),
                                           raise_errors=True)]
        if not np.allclose(cs[0], cs[1], rtol=1e-4, atol=1e-3 * np.abs(cs[0]).max()):
            raise SystemExit(f"{s}: the two builds disagree")
        ma, mb = statistics.median(t[0]) * 1e6, statistics.median(t[1]) * 1e6
        line = f"{s:>18} {ma:9.1f} {mb:9.1f} {ma / mb:6.3f}"
        if args.numpy:
            mn = statistics.median(t[2]) * 1e6
            line += f" {mn:9.1f} {mb / mn:7.3f}"
        print(line)


if __name__ == "__main__":
    main()
