"""Binding for hwtune/bench.h: timed measurement loops run in C on a Pool.

Every C call is kept to about CALL_SECONDS, and these functions loop over
calls: ctypes releases the GIL during a call, and Ctrl-C raises
KeyboardInterrupt between calls, leaving the pool idle and reusable.
"""

import ctypes
import math
from typing import List, Optional

import numpy as np

from hwtune.errors import UsageError
from hwtune.native._lib import check, lib, sig
from hwtune.native.eltwise import OPS
from hwtune.native.isa import resolve_isa
from hwtune.native.threads import Pool

# Long enough that per-call setup (allocation, initialisation, one warm-up)
# stays a small fraction, short enough for Ctrl-C to feel immediate.
CALL_SECONDS = 0.25
# Fork-join regions per call: ~0.1 s at the ~1 us a region costs here.
_FORKJOIN_CHUNK = 100_000

_dp = ctypes.POINTER(ctypes.c_double)
_P = ctypes.c_void_p
_i, _l, _d = ctypes.c_int, ctypes.c_long, ctypes.c_double

sig("hwt_now", _d)
sig("hwt_count_marks", _i)
sig("hwt_count_begin", None)
sig("hwt_count_end", None, ctypes.c_char_p)
sig("hwt_bench_counting_mode", None, _i)
sig("hwt_bench_gemm", _i, _P, _i, _i, _i, _i, _i, _i, _i, _i, _dp)
sig("hwt_bench_eltwise", _i, _P, _i, _i, _l, _i, _i, _i, _i, _i, _i, _dp)
sig("hwt_bench_corun", _i, _P, _i, _i, _i, _i, _l, _i, _d, _dp)
sig("hwt_bench_forkjoin_pool", _d, _P, _i, _l)
sig("hwt_bench_forkjoin_omp", _d, _i, _l)
sig("hwt_bench_xfer", _i, _P, _l, _i, _dp, _dp)
sig("hwt_bench_wake", _i, _P, ctypes.c_double, _i, _dp)
sig("hwt_bench_spin_s", ctypes.c_double, _i)
sig("hwt_qgemm_variant_for", _i, _i)
sig("hwt_qgemm_variant_name", ctypes.c_char_p, _i)
sig("hwt_bgemm_variant_for", _i, _i)
sig("hwt_bgemm_variant_name", ctypes.c_char_p, _i)
# The int8 / bf16 GEMM peak probes: kind ids of hwt_probe_dot_peak.
DOT_KINDS = {"int8": 0, "bf16": 1}
# Element-wise op names as the C library's table spells them (ids are positions).
EW_OPS = OPS


def _probe(name: str):
    """The probe loops need kernels/probe; bind them when the library has them."""
    fn = getattr(lib, name, None)
    if fn is not None:
        fn.argtypes = [_P, _i, _i, _d] if name == "hwt_probe_fma_peak" else [_P, _i, _l, _i, _d]
        fn.restype = _d
    return fn


def now() -> float:
    """The monotonic clock the C loops use, in seconds."""
    return lib.hwt_now()


def count_marks() -> int:
    """0: built without valgrind's header (no counting marks); 1: marks
    built in; 2: marks built in and running under valgrind."""
    return int(lib.hwt_count_marks())


def count_begin() -> None:
    """Under callgrind: start instrumenting, counts zeroed."""
    lib.hwt_count_begin()


def count_end(name: str) -> None:
    """Under callgrind: dump the counts since count_begin() as `name`, stop."""
    lib.hwt_count_end(name.encode())


def counting_mode(on: bool) -> None:
    """Counting mode: gemm_samples and eltwise_samples run each call's
    thread shares one after another on the calling thread and place their
    operands at 2 MiB boundaries (the same work at the same simulated cache
    sets, the same counts every run); timings mean nothing while it is on."""
    lib.hwt_bench_counting_mode(1 if on else 0)


def _threads(pool: Pool, threads) -> int:
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= pool.threads:
        raise UsageError(
            f"threads={threads!r}: must be 1..{pool.threads}, the pool's threads per executor")
    return threads


def _positive(**kw) -> None:
    for k, v in kw.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise UsageError(f"{k}={v!r}: must be an integer >= 1")


def _seconds(seconds) -> float:
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise UsageError(f"seconds={seconds!r}: must be a positive number")
    return float(seconds)


def _sampled(pool: Pool, call, warmup: int, reps: int, what: str) -> np.ndarray:
    """Runs call(handle, warmup, reps, out_ptr) in chunks of ~CALL_SECONDS."""
    _positive(reps=reps)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise UsageError(f"warmup={warmup!r}: must be an integer >= 0")
    out = np.empty(reps, dtype=np.float64)
    done, chunk, first = 0, 1, True
    while done < reps:
        n = min(chunk, reps - done)
        # Every call allocates fresh operands: warm them up again (once)
        # unless the caller asked for no warm-up at all.
        w = warmup if first else min(warmup, 1)
        with pool._lock:
            st = call(pool.handle, w, n, out[done:].ctypes.data_as(_dp))
        check(st, what)
        per = float(np.mean(out[done:done + n]))
        chunk = max(1, int(CALL_SECONDS / max(per, 1e-9)))
        done += n
        first = False
    return out


def gemm_samples(pool: Pool, threads: int, M: int, K: int, N: int, *, isa: Optional[str] = None,
                 warmup: int = 3, reps: int = 10, inner: int = 1) -> np.ndarray:
    """Seconds per [M,K]x[K,N] FP32 GEMM on executor 0 with `threads` threads."""
    threads = _threads(pool, threads)
    _positive(M=M, K=K, N=N, inner=inner)
    isa_i = resolve_isa(isa)
    return _sampled(
        pool, lambda h, w, r, out: lib.hwt_bench_gemm(h, threads, M, K, N, isa_i, w, r, inner, out),
        warmup, reps, f"gemm {M}x{K}x{N}")


def eltwise_samples(pool: Pool, threads: int, op: str, n: int, *, isa: Optional[str] = None,
                    nt_stores: bool = False, warmup: int = 3, reps: int = 10,
                    inner: int = 1, regions: int = 1) -> np.ndarray:
    """Seconds per element-wise `op` (one of EW_OPS) over n floats on executor 0.

    regions > 1: each call covers the same n elements as that many fork-join
    regions over consecutive slices: the same work, more fork-join cost."""
    threads = _threads(pool, threads)
    _positive(n=n, inner=inner, regions=regions)
    if regions > n:
        raise UsageError(f"regions={regions} exceeds n={n}: every region needs an element")
    if op not in EW_OPS:
        raise UsageError(f"unknown element-wise op {op!r}: choose one of {', '.join(EW_OPS)}")
    op_i, isa_i, nt = EW_OPS.index(op), resolve_isa(isa), 1 if nt_stores else 0
    return _sampled(
        pool,
        lambda h, w, r, out: lib.hwt_bench_eltwise(h, threads, op_i, n, isa_i, nt, w, r, inner,
                                                   regions, out),
        warmup, reps, f"{op} n={n}")


def corun(pool: Pool, kind: str, *, M: Optional[int] = None, K: Optional[int] = None,
          N: Optional[int] = None, n: Optional[int] = None, isa: Optional[str] = None,
          seconds: float = 1.0) -> List[float]:
    """GFLOPS of every executor while all of them loop the same op at once.

    kind "gemm" runs [M,K]x[K,N]; kind "mul" multiplies n floats. Each
    executor uses all its threads. The run is split into calls of at most
    ~2*CALL_SECONDS; the figures are time-weighted means over the calls.
    """
    seconds = _seconds(seconds)
    if kind == "gemm":
        _positive(M=M, K=K, N=N)
        args = (1, M, K, N, 1)
    elif kind == "mul":
        _positive(n=n)
        args = (0, 1, 1, 1, n)
    else:
        raise UsageError(f"unknown co-run kind {kind!r}: choose gemm or mul")
    isa_i = resolve_isa(isa)
    total = np.zeros(pool.executors)
    buf = (ctypes.c_double * pool.executors)()
    left = seconds
    while left > 1e-9:
        # Each call re-creates its operands, so slices are not made tiny.
        s = min(left, 2 * CALL_SECONDS)
        with pool._lock:
            st = lib.hwt_bench_corun(pool.handle, *args, isa_i, s, buf)
        check(st, f"co-run {kind}")
        total += np.asarray(buf[:]) * s
        left -= s
    return [float(x) for x in total / seconds]


def _best_of_slices(pool: Pool, fn, args, seconds: float, what: str) -> float:
    """Peak-style probes: best slice, since other load on a shared machine
    only ever lowers a rate."""
    best, left = 0.0, seconds
    while left > 1e-9:
        s = min(left, CALL_SECONDS)
        with pool._lock:
            r = fn(pool.handle, *args, s)
        if r < 0:
            check(int(r), what)
        best = max(best, r)
        left -= s
    return best


def fma_peak(pool: Pool, threads: int, *, isa: Optional[str] = None, seconds: float = 1.0) -> float:
    """Peak FP32 FMA GFLOPS of `threads` threads of executor 0."""
    threads, seconds, isa_i = _threads(pool, threads), _seconds(seconds), resolve_isa(isa)
    fn = _probe("hwt_probe_fma_peak")
    if fn is None:
        raise UsageError("this libhwtune has no FMA probe (kernels/probe is missing)")
    return _best_of_slices(pool, fn, (threads, isa_i), seconds, "FMA peak probe")


def dot_variant(kind: str, isa: Optional[str] = None) -> Optional[str]:
    """The int8 or bf16 GEMM variant ("avx512_vnni", "avx512_bf16", "avx2",
    "generic") that the ISA row isa runs on this CPU exactly, or None where
    the CPU lacks it (AVX-512 without VNNI / AVX512_BF16) or there is none
    (bf16 on AVX2): the kernels then fall back to another row."""
    isa_i = resolve_isa(isa)
    fam = {"int8": "qgemm", "bf16": "bgemm"}[kind]
    if getattr(lib, f"hwt_{fam}_variant_for")(isa_i) != isa_i:
        return None
    return getattr(lib, f"hwt_{fam}_variant_name")(isa_i).decode()


def dot_peak(pool: Pool, threads: int, kind: str, *, isa: Optional[str] = None,
             seconds: float = 1.0) -> float:
    """Peak int8 GOPS (kind "int8") or bf16 GFLOPS (kind "bf16") of the GEMM
    kernels, `threads` threads of executor 0 each on an L2-resident product."""
    threads, seconds, isa_i = _threads(pool, threads), _seconds(seconds), resolve_isa(isa)
    if kind not in DOT_KINDS:
        raise UsageError(f"unknown peak kind {kind!r}: choose int8 or bf16")
    fn = getattr(lib, "hwt_probe_dot_peak", None)
    if fn is None:
        raise UsageError("this libhwtune has no int8/bf16 peak probe")
    fn.argtypes = [_P, _i, _i, _i, _d]
    fn.restype = _d
    return _best_of_slices(pool, fn, (threads, isa_i, DOT_KINDS[kind]), seconds,
                           f"{kind} peak probe")


def triad(pool: Pool, threads: int, n: int, *, isa: Optional[str] = None,
          seconds: float = 1.0) -> float:
    """STREAM-triad GB/s over n floats per array with `threads` threads of executor 0."""
    threads, seconds, isa_i = _threads(pool, threads), _seconds(seconds), resolve_isa(isa)
    _positive(n=n)
    fn = _probe("hwt_probe_triad")
    if fn is None:
        raise UsageError("this libhwtune has no triad probe (kernels/probe is missing)")
    return _best_of_slices(pool, fn, (threads, n, isa_i), seconds, "triad probe")


def forkjoin_pool(pool: Pool, threads: int, iters: int) -> float:
    """Seconds per empty fork-join region on executor 0 with `threads` threads."""
    threads = _threads(pool, threads)
    _positive(iters=iters)
    spent, left = 0.0, iters
    while left:
        k = min(left, _FORKJOIN_CHUNK)
        with pool._lock:
            r = lib.hwt_bench_forkjoin_pool(pool.handle, threads, k)
        if r < 0:
            check(int(r), "fork-join benchmark")
        spent += r * k
        left -= k
    return spent / iters


def xfer(pool: Pool, nbytes: int, reps: int):
    """(remote, local): per round, seconds thread 1 of executor 0 takes to
    read a buffer of nbytes that thread 0 just wrote, and thread 0 to read
    it back after writing it again (numpy arrays of reps). Executor 0 needs
    two threads; pinned, they are two cores."""
    _threads(pool, 2)
    _positive(nbytes=nbytes, reps=reps)
    remote, local = np.zeros(reps), np.zeros(reps)
    with pool._lock:
        rc = lib.hwt_bench_xfer(pool.handle, nbytes, reps, remote.ctypes.data_as(_dp),
                                local.ctypes.data_as(_dp))
    check(int(rc), "core-to-core transfer benchmark")
    return remote, local


def wake(pool: Pool, gap_s: float, reps: int) -> np.ndarray:
    """Per round, seconds from the master posting to executor 0's other
    thread, parked for gap_s, to that thread running again (numpy array of
    reps). Executor 0 needs two threads; pinned, they are two cores."""
    _threads(pool, 2)
    _positive(reps=reps)
    if not 0 <= gap_s < 1:
        raise UsageError(f"invalid gap {gap_s!r}: 0 <= gap < 1 s")
    out = np.zeros(reps)
    with pool._lock:
        rc = lib.hwt_bench_wake(pool.handle, float(gap_s), reps, out.ctypes.data_as(_dp))
    check(int(rc), "wake-up benchmark")
    return out


def spin_s(reps: int = 5) -> float:
    """Seconds an executor polls its empty slot before it parks (the
    engine's spin), the fastest of reps timings."""
    _positive(reps=reps)
    r = lib.hwt_bench_spin_s(reps)
    if r < 0:
        check(int(r), "spin timing")
    return float(r)


def forkjoin_omp(threads: int, iters: int) -> Optional[float]:
    """Seconds per empty OpenMP parallel region, or None without OpenMP."""
    _positive(threads=threads, iters=iters)
    spent, left = 0.0, iters
    while left:
        k = min(left, _FORKJOIN_CHUNK)
        r = lib.hwt_bench_forkjoin_omp(threads, k)
        if r < 0:
            return None  # arguments were validated: negative means no OpenMP
        spent += r * k
        left -= k
    return spent / iters
