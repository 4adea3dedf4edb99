"""An op's time on t threads of a machine, from its 1-thread time measured
on this host. The parts, each from a measurement:

  memory   the bytes the op reads and writes move at the bandwidth of
           where they live (levels()): one core's L2 when they fit in it
           (the in-L2 triad for that many busy cores: private caches scale
           with the threads), the last-level cache when they fit there (the
           scan's triad over a quarter of it, a description's per-core
           figure; the in-L2 rate where neither exists; a GEMV's weights
           at the read-stream rate of the scan's GEMV that lives there,
           Machine.l3_read_gbs), else out of cache
           at the machine's triad bandwidth for that many busy cores (hwtune
           scan; a description's per-core and saturated figures);
  compute  the rest of the 1-thread time, at the target's per-core FMA peak
           relative to this host's (scan), split over the threads but for a
           serial fraction s fitted per op type (of a GEMV, whose work is
           its weight stream, the same share of its traffic too);
  fork-join one region per op on more than one thread (measured here with
           the engine's pool; a description's figure elsewhere).

    T(t) = c * (s + (1 - s) / t) + memory(t) + forkjoin(t)
    with c = (t1 - memory_here(1)) * peak_here / peak_there
    (a GEMV: memory(t) -> s * memory(1) + (1 - s) * memory(t))

A GEMV's 1-thread time is all traffic: with the serial share on compute
only, a fit had no part to act on, and a GEMV of 1-2 MiB in the L3 (16-40
us) came out at its bytes over the 2-thread bandwidth, 1.6-1.9x faster,
where the scan's [1,256]x[256,1024] ran 1.1x faster and deepcpu_lstm_i256_
h256's 1x2 1.16x its 1x1: those rows were predicted 29-31% fast (2-vCPU AMD
EPYC Zen 3, avx2). Other ops keep their traffic out of it: on
every op type the share would hold, the scan's ReLU of 32768 floats (2.8
us) fitted 0.175, a fixed per-call cost a fraction cannot describe, and
Graphi's PathNet, whose ReLUs of megabytes took it to 64 cores, came out
2.58x its S64 against 2.26x (paper: 1.2-2.1x).

The serial fraction of an op type is fitted (least squares on the log of
predicted / measured time, s in [0, 1]) to measurements of that type on
more than one thread on this host: the scan's GEMM and element-wise scaling
runs, and op profiles at 2+ threads (tune-graph's hill climb) unless
told to use 1-thread data only. Its fit error is kept with it. Co-running
ops share the out-of-cache bandwidth in the simulator: each op's
out-of-cache share of its time and its bytes/s go with its times."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from hwtune.planner.machine import Machine, gemm_bytes
from hwtune.planner.opdata import GEMV_FAMILY, GEMV_MAX_M, SCAN_ELTWISE, SCAN_GEMM_TYPES

# Resolution of the serial-fraction fit: 0.005 is below what 2-thread
# points can tell apart (run-to-run spread of 2-5% at 2 threads here).
FIT_STEP = 0.005
# An op type the fits do not cover takes the serial fraction of the family
# it resembles: the GEMM's when its instances do at least this many FLOPs
# per byte they touch (matmul-like: conv2d, lstm_cell, batch_matmul), else
# the scan's element-wise ops pooled (memory-like: pooling, concat, norms).
# With 0 for every unfitted type, ResNet-18's 1x2 was predicted 33% below
# its measured time (its CONVs scaled 1.6x on 2 threads, not 2x; 2-core AMD
# EPYC, 1-thread profiles). The smallest CONV of the bundled CNNs does ~9
# FLOPs/byte, the element-wise ops < 1.
COMPUTE_FLOPS_PER_BYTE = 2.0
GEMM_FAMILY = "matmul"
# A fit's stand-in when its own points are missing: a scan without a GEMV
# shape (older, or --gemm without one) leaves the GEMV path to the GEMM's.
FALLBACK = {GEMV_FAMILY: GEMM_FAMILY}
ELTWISE_FAMILY = "element-wise (pooled)"
# Each of the scan's GEMV shapes is fitted on its own, keyed by its size
# (gemv_fit_key), and a GEMV op takes the fit of the shape nearest its own
# bytes (on a log scale): how a GEMV scales depends on where its weights
# live. On a 2-vCPU AMD EPYC Zen 3 (avx2) the scan's [1,256]x[256,1024] (1
# MiB) ran 0.9-1.1x faster on two threads of one team and [1,1024]x[1024,
# 4096] (16 MiB) 1.5-2.0x; with one fit from the 1 MiB shape (serial fraction
# 1.0), the 1x2 runs of deepcpu_lstm_i64_h1024 (1.9x its 1x1) were predicted
# 36-71% slow.
_MIB = float(1 << 20)


def _sized_key(family: str, size: float, unit: str, scale: float) -> str:
    """A sized fit key: the family, the size in `unit`s (of `scale`), the unit."""
    return f"{family} {size / scale:.4g} {unit}"


def _key_size(key: str, family: str, unit: str, scale: float) -> Optional[float]:
    """The size a _sized_key of family and unit names; None for any other key."""
    head, tail = family + " ", " " + unit
    if not (key.startswith(head) and key.endswith(tail)):
        return None
    try:
        x = float(key[len(head):-len(tail)]) * scale
    except ValueError:
        return None
    return x if x > 0 else None


def gemv_fit_key(nbytes: float) -> str:
    """The fit key of a scan GEMV shape that touches nbytes."""
    return _sized_key(GEMV_FAMILY, nbytes, "MiB", _MIB)


def gemv_fit_bytes(key: str) -> Optional[float]:
    """The bytes a gemv_fit_key names; None for any other key."""
    return _key_size(key, GEMV_FAMILY, "MiB", _MIB)


# Each of the scan's blocked GEMM shapes (more than GEMV_MAX_M rows) is
# fitted on its own too, keyed by its FLOPs (gemm_fit_key), and a matmul --
# or an op that takes the GEMM's fit as its family's (conv2d and the other
# compute-like types) -- takes the fit of the shape nearest its own FLOPs
# (log scale), unless op profiles fitted the GEMM itself: the 2-thread cost
# of the GEMM kernel is not a fixed share of its work. On a 2-vCPU AMD EPYC
# Zen 3 (avx2) [64,512]x[512,512] ran 1.47-1.51x faster on two threads and
# [64,512]x[512,2048] 1.87x, [512,512]x[512,512] 1.94x (a
# near-constant 60-130 us a call that the small shape's 390 us cannot
# hide); with the one fit of the small shape, lstm_medium's 1x2 runs (its
# matmuls [64,512]x[512,2048]) were predicted 27-44% slow and resnet18's and
# pathnet_large's (CONVs of 0.1-0.5 GFLOP) 3-19% slow.
_MFLOP = 1e6


def gemm_fit_key(flops: float) -> str:
    """The fit key of a scan GEMM shape doing flops FLOPs."""
    return _sized_key(GEMM_FAMILY, flops, "MFLOP", _MFLOP)


def gemm_fit_flops(key: str) -> Optional[float]:
    """The FLOPs a gemm_fit_key names; None for any other key."""
    return _key_size(key, GEMM_FAMILY, "MFLOP", _MFLOP)


def _sized_fits(fits: Dict[str, "SerialFit"], size_of) -> list:
    """[(size, fit)] of the fits whose key size_of reads a size from
    (gemv_fit_bytes, gemm_fit_flops), smallest first."""
    return sorted(((x, f) for f in fits.values() if (x := size_of(f.op_type)) is not None),
                  key=lambda xf: xf[0])


def _nearest(sized: list, size: Optional[float]):
    """The fit of sized [(size, fit)] (smallest first) nearest size on a
    log scale; the smallest's without size; None when empty."""
    if not sized:
        return None
    if not size or size <= 0:
        return sized[0][1]
    return min(sized, key=lambda sf: abs(math.log(size / sf[0])))[1]


# Operands per element of the scan's element-wise ops (inputs + output).
_ELT_OPERANDS = {"mul": 3, "add": 3, "fma": 4, "sigmoid": 2, "tanh": 2, "relu": 2}


@dataclass(frozen=True)
class Point:
    """One multi-thread measurement on this host: the op's 1-thread and
    t-thread times and its bytes."""
    op_type: str
    t1: float
    tn: float
    threads: int
    nbytes: int
    source: str
    # Timed as a bare region of the pool (the scan's loops), not as an op
    # of an engine run: it pays the pool's empty fork-join, not the larger
    # in-run figure of the calibration (calibrate.forkjoin()).
    bare: bool = False


# A fit that ends on an edge of [0, 1] and still misses its points by more
# than this did not measure a serial fraction: its points are ruled by what
# the model charges apart (the fork-join, the memory traffic), and the edge
# is where the search stopped. It describes this host's thread counts, which
# it was fitted to, but not how the type scales past them: there the type
# takes its family's fit. The scan's 2-thread ReLU of 32768 floats (2.82 us
# on one thread, 2.22 us on two) was fitted at 1.0 and still predicted 4.6%
# fast; extrapolated, PathNet's ReLUs ran 1.8x faster on 64 Xeon Phi cores
# than on one (relu_grad, with the pooled element-wise fit, 32x) and were 38%
# of its training step's S64 time; Graphi's Figure 6 speedup over S64 came
# out 2.95x, 2.24x with the family's fit (paper: 1.2-2.1x; 2-vCPU AMD EPYC
# Zen 3, avx2). 2% is the run-to-run spread of
# the scan's 2-thread rows here.
EDGE_MISS = 0.02


@dataclass(frozen=True)
class SerialFit:
    op_type: str
    serial_fraction: float
    points: int
    median_rel_err: Optional[float]   # |predicted / measured - 1| over the points
    max_rel_err: Optional[float]
    source: str

    def to_json(self) -> dict:
        return dict(self.__dict__)

    @property
    def at_edge(self) -> bool:
        """Stopped at 0 or 1 still missing its points (EDGE_MISS): no
        serial fraction explains them."""
        return (self.serial_fraction in (0.0, 1.0) and
                (self.median_rel_err or 0.0) > EDGE_MISS)


# Where an op's bytes live (levels()).
L2, L3, DRAM = 0, 1, 2


def levels(m: Machine, nbytes, t1=None, dram_1t: Optional[float] = None) -> np.ndarray:
    """Per op, where its bytes live on m: one core's L2 when they fit in it,
    the last-level cache when they fit there, else memory, unless its
    1-thread time t1 moved them faster than memory gives one core
    (dram_1t bytes/s, this host's): then the last-level cache serves most
    of them. deepcpu_lstm_i1024_h1024's recurrent GEMV reads 33.6 MB (32
    MiB L3) in ~450 us on one thread, 75 GB/s against the out-of-cache
    triad's 26-50, and ran 2x faster on two threads where the triad ran
    1.4-2.2x (AMD EPYC Zen 4: the triad falls from 93
    GB/s at 8 MiB to 26-40 from 32 MiB on)."""
    nb = np.asarray(nbytes, dtype=np.float64)
    lvl = np.where(nb <= m.l2_bytes, L2, np.where(nb <= m.llc_bytes, L3, DRAM))
    if t1 is not None and dram_1t:
        t = np.broadcast_to(np.asarray(t1, dtype=np.float64), nb.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            fast = (t > 0) & (nb > t * dram_1t)
        lvl = np.where((lvl == DRAM) & fast, L3, lvl)
    return lvl


def memory_time(m: Machine, nbytes, threads: int, level=None, stream=None) -> np.ndarray:
    """Seconds to move nbytes (an array) on `threads` threads of m, from
    where they live (level: levels(); by their size when not given); an op
    whose stream flag is set (streams(): a GEMV's weights) reads them from
    the last-level cache at m's read-stream rate (Machine.l3_read_gbs)."""
    nbytes = np.asarray(nbytes, dtype=np.float64)
    t = max(int(threads), 1)
    lvl = levels(m, nbytes) if level is None else np.asarray(level)
    bw = np.choose(lvl, [m.l2_bw(t), m.l3_bw(t), m.dram_bw(t)])
    if stream is not None:
        bw = np.where((lvl == L3) & np.asarray(stream, dtype=bool), m.l3_read_bw(t), bw)
    return nbytes / bw


def is_stream(fit_type: str) -> bool:
    """Whether an op (or a scan point) of this fit key reads its bytes as
    one stream (the GEMV path: B read once, unpacked; Machine.l3_read_gbs)."""
    return fit_type == GEMV_FAMILY or gemv_fit_bytes(fit_type) is not None


def streams(fit_types: Sequence[str]) -> np.ndarray:
    return np.array([is_stream(t) for t in fit_types], dtype=bool)


def host_levels(host: Machine, t1, nbytes) -> np.ndarray:
    """levels() on this host, with the op's measured 1-thread time."""
    return levels(host, nbytes, t1, host.dram_bw(1))


def split_here(host: Machine, t1, nbytes, stream=None) -> Tuple[np.ndarray, np.ndarray]:
    """(compute, memory) seconds of the 1-thread times t1 on this host: the
    memory part at the host's 1-thread rates, never more than t1."""
    t1 = np.asarray(t1, dtype=np.float64)
    m1 = np.minimum(memory_time(host, nbytes, 1, host_levels(host, t1, nbytes), stream), t1)
    return t1 - m1, m1


def effective_bytes(host: Machine, t1, nbytes, stream=None) -> np.ndarray:
    """The bytes an op really moves: all it reads and writes, unless its
    measured time is shorter than moving them would take (a slice reads a
    part of its input), then the share that fits in its time."""
    nb = np.asarray(nbytes, dtype=np.float64)
    full = memory_time(host, nb, 1, host_levels(host, t1, nb), stream)
    _, m1 = split_here(host, t1, nb, stream)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(full > 0, m1 / full, 0.0)
    return nb * share


def _predict_here(host: Machine, p: Sequence[Point], s: float,
                  pool_forkjoin: Optional[Dict[int, float]] = None) -> np.ndarray:
    t1 = np.array([x.t1 for x in p])
    nb = np.array([x.nbytes for x in p], dtype=np.float64)
    n = np.array([x.threads for x in p])
    st = streams([x.op_type for x in p])
    c1, mem1 = split_here(host, t1, nb, st)   # mem1: what `moved` takes on one thread
    moved = effective_bytes(host, t1, nb, st)
    lvl = host_levels(host, t1, nb)
    mem = np.array([float(memory_time(host, b, t, v, f))
                    for b, t, v, f in zip(moved, n, lvl, st)])
    pool = pool_forkjoin or {}
    fj = np.array([pool.get(int(x.threads), host.forkjoin(int(x.threads))) if x.bare
                   else host.forkjoin(int(x.threads)) for x in p])
    held = np.where(st, s, 0.0)   # the serial share of a stream's traffic
    return c1 * (s + (1 - s) / n) + held * mem1 + (1 - held) * mem + fj


def fit_serial(host: Machine, points: Sequence[Point],
               pool_forkjoin: Optional[Dict[int, float]] = None) -> Dict[str, SerialFit]:
    """Per op type, the serial fraction that best predicts its points; a
    bare point (the scan's) pays pool_forkjoin (threads -> seconds of an
    empty region of the pool) rather than the in-run fork-join: with the
    in-run figure (1.8 us, calibrated at load ~6) the scan's 2-thread adds,
    muls and ReLUs of 32768 floats (3.2 us measured) were predicted 44-57%
    slow at any serial fraction (2-core AMD EPYC, avx2)."""
    by_type: Dict[str, List[Point]] = {}
    for p in points:
        if p.t1 > 0 and p.tn > 0 and p.threads > 1 and p.threads <= host.cores:
            by_type.setdefault(p.op_type, []).append(p)
    out = {}
    grid = np.arange(0.0, 1.0 + FIT_STEP / 2, FIT_STEP)
    for op_type, pts in sorted(by_type.items()):
        meas = np.array([p.tn for p in pts])
        best_s, best_err = 0.0, math.inf
        for s in grid:
            err = float(np.sum(np.log(_predict_here(host, pts, float(s), pool_forkjoin)
                                      / meas) ** 2))
            if err < best_err - 1e-15:
                best_s, best_err = float(s), err
        rel = np.abs(_predict_here(host, pts, best_s, pool_forkjoin) / meas - 1)
        sources = sorted({p.source for p in pts})
        out[op_type] = SerialFit(op_type, best_s, len(pts), float(np.median(rel)),
                                 float(np.max(rel)), " + ".join(sources))
    elt = [p for p in points if p.op_type in SCAN_ELTWISE and p.source == "scan eltwise"]
    if elt:
        pooled = fit_serial(host, [Point(ELTWISE_FAMILY, p.t1, p.tn, p.threads, p.nbytes,
                                         p.source, p.bare) for p in elt], pool_forkjoin)
        out.update(pooled)
    return out


def scan_points(figs) -> List[Point]:
    """Points from the scan's GEMM and element-wise scaling runs (each
    thread count against the 1-thread run of the same shape); a shape of at
    most GEMV_MAX_M rows gives its GEMV size key's points, any other the
    GEMM types' and its own FLOPs key's (gemm_fit_key)."""
    out = []
    for (M, K, N), times in figs.gemm_shapes().items():
        nbytes = gemm_bytes(M, K, N)
        for t, tn in times.items():
            if t > 1 and 1 in times:
                for op_type in ((gemv_fit_key(nbytes),) if M <= GEMV_MAX_M
                                else SCAN_GEMM_TYPES + (gemm_fit_key(2.0 * M * K * N),)):
                    out.append(Point(op_type, times[1], tn, t, nbytes, "scan gemm",
                                     bare=True))
    elt: Dict[tuple, Dict[int, float]] = {}
    for r in figs.eltwise:
        if r.get("time_s") and r["op"] in SCAN_ELTWISE:
            elt.setdefault((r["op"], r["n"]), {})[r["threads"]] = r["time_s"]
    for (op, n), times in elt.items():
        nbytes = 4 * n * _ELT_OPERANDS.get(op, 3)
        for t, tn in times.items():
            if t > 1 and 1 in times:
                out.append(Point(op, times[1], tn, t, nbytes, "scan eltwise", bare=True))
    return out


@dataclass
class OpTable:
    """The simulator's inputs: [n_ops, max_threads] arrays (column t-1: on t
    threads) of seconds, out-of-cache share of them, and bytes/s."""
    seconds: np.ndarray
    mem_frac: np.ndarray
    mem_bps: np.ndarray

    def best_threads(self, limit: int) -> np.ndarray:
        """Per op, the fastest count up to limit (Strategy 1)."""
        return np.argmin(self.seconds[:, :limit], axis=1) + 1

    def plus(self, extra: np.ndarray) -> "OpTable":
        """This table with extra[i] seconds more on op i at every thread
        count (never below 0): time that does not split over a team; the
        out-of-cache share and rate keep their seconds."""
        seconds = np.maximum(self.seconds + np.asarray(extra, dtype=np.float64)[:, None], 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            keep = np.where(seconds > 0, self.seconds / seconds, 0.0)
        return OpTable(seconds, self.mem_frac * keep, self.mem_bps * keep)

    def candidates(self, limit: int, k: int = 3) -> List[List[Tuple[int, float]]]:
        """Per op, its k fastest counts up to limit with their seconds, best
        first (Strategy 3's candidates)."""
        order = np.argsort(self.seconds[:, :limit], axis=1, kind="stable")[:, :k]
        return [[(int(t) + 1, float(self.seconds[i, t])) for t in row]
                for i, row in enumerate(order)]


class CostModel:
    """Op times on `target` from 1-thread times measured on `host`."""

    def __init__(self, host: Machine, target: Machine, fits: Dict[str, SerialFit]):
        self.host, self.target, self.fits = host, target, dict(fits)
        # the scan's GEMV shapes' fits by their bytes, its GEMM shapes' by
        # their FLOPs, smallest first
        self._gemv_sized = _sized_fits(self.fits, gemv_fit_bytes)
        self._gemm_sized = _sized_fits(self.fits, gemm_fit_flops)

    def _gemm_fit(self, flops: Optional[float]) -> Optional[SerialFit]:
        """The GEMM's fit for an op of flops FLOPs: GEMM_FAMILY's own when op
        profiles fitted it, else the scan GEMM shape's nearest flops, else
        GEMM_FAMILY's (all the scan's shapes pooled)."""
        f = self.fits.get(GEMM_FAMILY)
        if f is not None and "op profiles" in f.source:
            return f
        return (_nearest(self._gemm_sized, flops) if flops else None) or f

    def _family(self, flops_per_byte: Optional[float], flops: Optional[float],
                compute: bool = False) -> Optional[SerialFit]:
        """The fit of the family an op resembles: the GEMM's (for its flops)
        when compute or at COMPUTE_FLOPS_PER_BYTE, else the scan's
        element-wise ops pooled."""
        if compute or (flops_per_byte is not None and
                       flops_per_byte >= COMPUTE_FLOPS_PER_BYTE):
            return self._gemm_fit(flops)
        return self.fits.get(ELTWISE_FAMILY)

    def serial_fractions(self, op_type: str, flops_per_byte: Optional[float] = None,
                         nbytes: Optional[float] = None, flops: Optional[float] = None
                         ) -> Tuple[float, float]:
        """(on this host's thread counts, past them). The type's own fit (a
        GEMV op's: the scan GEMV shape's nearest nbytes, unless op profiles
        fitted GEMV_FAMILY itself; a matmul's: the GEMM's for its flops,
        _gemm_fit), else its stand-in's (FALLBACK), else its family's
        (COMPUTE_FLOPS_PER_BYTE; the GEMM's for its flops), else 0 (perfect
        scaling: no measurement says otherwise). Past this host's thread
        counts a fit stopped at an edge (EDGE_MISS) gives way to its
        family's (matmuls and GEMVs: the GEMM's)."""
        f = self.fits.get(op_type)
        if f is None and op_type == GEMV_FAMILY:
            f = _nearest(self._gemv_sized, nbytes)
        if op_type == GEMM_FAMILY:
            f = self._gemm_fit(flops)
        f = f or self.fits.get(FALLBACK.get(op_type, ""))
        if f is None and flops_per_byte is not None:
            f = self._family(flops_per_byte, flops)
        near = f.serial_fraction if f else 0.0
        if f is None or not f.at_edge:
            return near, near
        g = self._family(flops_per_byte, flops,
                         compute=op_type in (GEMM_FAMILY, GEMV_FAMILY))
        return near, (g.serial_fraction if g is not None and not g.at_edge else near)

    def serial_fraction(self, op_type: str, flops_per_byte: Optional[float] = None,
                        nbytes: Optional[float] = None, flops: Optional[float] = None,
                        far: bool = False) -> float:
        """serial_fractions()'s first (far: its second)."""
        return self.serial_fractions(op_type, flops_per_byte, nbytes, flops)[int(far)]

    def parts(self, t1: Sequence[float], nbytes: Sequence[int], types: Sequence[str],
              max_threads: int, flops: Optional[Sequence[float]] = None) -> Dict[str, np.ndarray]:
        """The model's parts per op and thread count ([n_ops, max_threads],
        column t-1: on t threads), seconds: 'serial' (the compute share
        that does not split), 'parallel' (the rest, split over the
        threads), 'memory' (the traffic at the target's bandwidth curve),
        'forkjoin'; and 'out_of_cache' (the memory part's out-of-cache
        seconds) and 'cached' ([n_ops] bool: the data stays in a cache),
        'bytes' ([n_ops] bytes moved). table() is their sum."""
        t1 = np.asarray(t1, dtype=np.float64)
        st = streams(types)
        c1, _ = split_here(self.host, t1, nbytes, st)
        # where the data lives follows all it touches (and, on a target whose
        # last-level cache is as large as this host's, how fast it moved
        # here); the traffic, what it moves
        lvl = levels(self.target, nbytes, t1, self.host.dram_bw(1)
                     if self.target.llc_bytes >= self.host.llc_bytes else None)
        cached = lvl != DRAM
        nb = effective_bytes(self.host, t1, nbytes, st)
        c1 = c1 * (self.host.peak_gflops_core / self.target.peak_gflops_core)
        intensity = ([f / b if b else 0.0 for f, b in zip(flops, nbytes)]
                     if flops is not None else [None] * len(types))
        work = list(flops) if flops is not None else [None] * len(types)
        s_near, s_far = np.array([self.serial_fractions(t, x, b, w)
                                  for t, x, b, w in zip(types, intensity, nbytes, work)]
                                 ).reshape(-1, 2).T
        threads = np.arange(1, max_threads + 1)
        # the fitted thread counts take the fit; more threads, s_far
        s = np.where(threads[None, :] <= self.host.cores, s_near[:, None], s_far[:, None])
        bw = {lv: np.array([f(int(t)) for t in threads]) for lv, f in
              ((L2, self.target.l2_bw), (L3, self.target.l3_bw), (DRAM, self.target.dram_bw))}
        l2, l3, dram = (nb[:, None] / bw[lv][None, :] for lv in (L2, L3, DRAM))
        read = nb[:, None] / np.array([self.target.l3_read_bw(int(t)) for t in threads])[None, :]
        l3 = np.where(st[:, None], read, l3)
        # a stream's serial share moves its bytes as one thread does
        held = np.where(st[:, None], s, 0.0)
        memory = np.choose(lvl[:, None], [l2, l3, dram])
        memory = held * memory[:, :1] + (1 - held) * memory
        fj = np.array([self.target.forkjoin(int(t)) for t in threads])
        out_of_cache = np.where(cached[:, None], 0.0, held * dram[:, :1] + (1 - held) * dram)
        return {"serial": c1[:, None] * s, "parallel": c1[:, None] * (1 - s) / threads[None, :],
                "memory": memory, "forkjoin": np.broadcast_to(fj[None, :], memory.shape),
                "out_of_cache": out_of_cache, "cached": cached, "bytes": nb}

    def table(self, t1: Sequence[float], nbytes: Sequence[int], types: Sequence[str],
              max_threads: int, flops: Optional[Sequence[float]] = None) -> OpTable:
        q = self.parts(t1, nbytes, types, max_threads, flops)
        seconds = q["serial"] + q["parallel"] + q["memory"] + q["forkjoin"]
        cached, nb = q["cached"], q["bytes"]
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(seconds > 0, q["out_of_cache"] / seconds, 0.0)
            bps = np.where(seconds > 0, np.where(cached[:, None], 0.0, nb[:, None]) / seconds, 0.0)
        return OpTable(seconds, frac, bps)


def profile_points(data: Iterable, t1: Dict[str, float], multi: Dict[str, Dict[int, float]]
                   ) -> List[Point]:
    """Points from op profiles: workload -> {threads: seconds} beyond 1 thread,
    against its 1-thread time (data: OpData of the graph)."""
    out, seen = [], set()
    for d in data:
        if d.workload in seen or d.workload not in t1:
            continue
        seen.add(d.workload)
        for t, tn in (multi.get(d.workload) or {}).items():
            if t > 1:
                out.append(Point(d.fit_type, t1[d.workload], tn, t, d.bytes, "op profiles"))
    return out
