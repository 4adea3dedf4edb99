"""Turn scan options into the ordered list of measurement steps.

Validation happens here, before anything is measured: a scan that would fail
on its last step after 40 s of measuring wastes the user's minute.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Optional

from hwtune.errors import UsageError

# Graphi's first microbenchmark sizes (LSTM "medium" from the TensorFlow
# benchmark): GEMM [64,512]x[512,512] and 32768 element pairs; and a batch-1
# LSTM step's [1,256]x[256,1024] (DeepCPU's serving case, the GEMM kernel's
# GEMV path), which scales differently: 1.11-1.53x on 2 threads against
# 1.76-2.2x for the 64-row GEMM on a 2-vCPU AMD EPYC (Zen 1, avx2); and a
# 1024-hidden step's [1,1024]x[1024,4096] (16 MiB of weights, DeepCPU's
# large case), which scales unlike the 1 MiB one: on a 2-vCPU AMD EPYC Zen 3
# (avx2) the 1 MiB GEMV ran 0.9-1.1x on two threads of one team and the 16
# MiB one 1.5-2.0x (the 1024-hidden
# LSTMs' 1x2 runs 1.9x); and the same LSTM's fused four-gate step
# [64,512]x[512,2048], four times the first's work, which scales unlike it:
# 1.87x on two threads where the first ran 1.47-1.51x (2-vCPU AMD EPYC Zen
# 3, avx2), so the plan fits each GEMM shape on its own
# (planner/costmodel.gemm_fit_key). The co-running steps use the first shape.
DEFAULT_GEMM = ((64, 512, 512), (1, 256, 1024), (1, 1024, 4096), (64, 512, 2048))
DEFAULT_ELTWISE_SIZE = 32768

# kernel_variant of the numpy-BLAS reference rows (hwtune rows carry the ISA).
REFERENCE_VARIANT = "numpy-blas"

ELTWISE_OPS = ("mul", "add", "fma", "sigmoid", "tanh", "relu")
# FLOPs per element for the arithmetic ops; activations report Gelem/s since
# their flop count depends on the polynomial each ISA variant uses.
ELTWISE_FLOPS = {"mul": 1, "add": 1, "fma": 2}

# Largest accepted dimensions: keep a typo (--gemm 64x512x5120000) from
# allocating tens of GiB before the first sample.
MAX_GEMM_DIM = 1 << 16
MAX_GEMM_BYTES = 2 << 30
MAX_ELTWISE_SIZE = 1 << 28
MAX_REPS = 10000

# Default saturation threshold: a step up in threads must buy >= 10% more
# throughput to count as scaling. Medians of 10 repeated 21-sample runs of the
# same kernel on this shared 2-core Xeon (load average ~12) moved by a rel.
# MAD of 0.5% (mul 32768, 1 thread) to 3% (2 threads), and GEMM 64x512x512
# at 2 threads by far more; a gain under ~3x the typical 3% cannot be told
# apart from noise with confidence.
DEFAULT_SATURATION = 0.1

# A measurement whose MAD exceeds 5% of its median is re-measured. The same
# runs showed a within-run rel. MAD of 1.7-1.9% (max 5.3%) for mul 32768
# even under that load, while samples disturbed by other processes (GEMM
# with the cores oversubscribed) reach 40-65%: 5% separates the two.
DEFAULT_NOISE = 0.05
NOISY_RETRIES = 2


@dataclass(frozen=True)
class Budget:
    """Repetitions and durations of one scan flavour (full or --quick)."""

    reps: int            # samples per timed kernel measurement
    probe_reps: int      # samples per time-boxed probe (FMA peak, triad, co-run)
    sample_s: float      # target duration of one sample (inner calls are sized to it)
    fma_s: float         # seconds per FMA-peak sample
    triad_dram_s: float  # seconds per out-of-cache triad sample
    triad_l2_s: float
    corun_s: float
    all_isas: bool       # peaks for every supported ISA variant, or only the selected one
    dram_x_l3: int       # out-of-cache triad: total array footprint in multiples of L3


# Durations: on this shared 2-core Xeon at load average ~9 the full scan took
# 38 s and --quick 12 s (budgets: 60 s and 15 s). 50 ms FMA-peak samples
# repeated within a rel. MAD of 3-5% there; one out-of-cache triad pass over
# the 4x-L3 arrays (150 MB) took ~37 ms at the 4 GB/s measured, so 100 ms
# holds a few passes after the probe's own warm-up pass. 2 ms samples hold
# ~330 calls of the 6 us element-wise multiply, so clock reads vanish in them,
# while 21 samples still take only 42 ms.
FULL = Budget(reps=21, probe_reps=5, sample_s=0.002, fma_s=0.05, triad_dram_s=0.1,
              triad_l2_s=0.03, corun_s=0.1, all_isas=True, dram_x_l3=4)
QUICK = Budget(reps=9, probe_reps=3, sample_s=0.001, fma_s=0.03, triad_dram_s=0.05,
               triad_l2_s=0.02, corun_s=0.05, all_isas=False, dram_x_l3=2)


@dataclass(frozen=True)
class Step:
    """One measurement: what to run, where, and how long."""

    bench: str            # fma_peak | dot_peak | triad | gemm | eltwise | corun
    op: str               # fma | triad | gemm | mul | add | ... (corun: gemm | mul)
    params: dict
    threads: int          # threads per executor
    isa: str
    reps: int
    warmup: int = 3
    seconds: float = 0.0  # per sample, for time-boxed probes
    sample_s: float = 0.0  # target sample duration for timed kernels
    executors: int = 1
    pin: bool = True
    reference: bool = False  # gemm: numpy BLAS measured interleaved

    @property
    def label(self) -> str:
        """Short text for the progress bar."""
        p = self.params
        if self.bench == "fma_peak":
            what = "FMA peak"
        elif self.bench == "dot_peak":
            what = f"{self.op} peak ({p['kernel']})"
        elif self.bench == "triad":
            what = f"triad {p['where']}"
        elif self.bench == "eltwise":
            what = f"{self.op} n={p['n']}"
        else:
            shape = "{M}x{K}x{N}".format(**p) if "M" in p else f"n={p['n']}"
            what = f"{self.bench} {self.op} {shape}" if self.bench == "corun" else f"gemm {shape}"
        if self.bench == "corun":
            place = f"{self.executors}x{self.threads}t {'pinned' if self.pin else 'OS'}"
        else:
            place = f"{self.threads}t"
        ref = " + BLAS" if self.reference else ""
        return f"{what} {place} [{self.isa}]{ref}"


@dataclass
class ScanOptions:
    threads: Optional[list] = None          # None: 1..N usable CPUs
    quick: bool = False
    isa: Optional[str] = None               # None: selected ISA for kernels
    reps: Optional[int] = None
    gemm: tuple = DEFAULT_GEMM
    eltwise_size: int = DEFAULT_ELTWISE_SIZE
    corun: bool = True
    saturation: float = DEFAULT_SATURATION
    noise: float = DEFAULT_NOISE
    scale: float = field(default_factory=lambda: scale_from_env())

    def as_dict(self) -> dict:
        return {
            "threads": self.threads, "quick": self.quick, "isa": self.isa,
            "reps": self.reps, "gemm": [list(s) for s in self.gemm],
            "eltwise_size": self.eltwise_size, "corun": self.corun,
            "saturation": self.saturation, "noise": self.noise, "scale": self.scale,
        }


def scale_from_env() -> float:
    """HWTUNE_SCAN_SCALE shrinks every duration and rep count (tests only)."""
    raw = os.environ.get("HWTUNE_SCAN_SCALE")
    if not raw:
        return 1.0
    try:
        v = float(raw)
    except ValueError:
        raise UsageError(f"invalid HWTUNE_SCAN_SCALE {raw!r}: expected a number in (0, 1]") from None
    if not 0 < v <= 1:
        raise UsageError(f"invalid HWTUNE_SCAN_SCALE {raw!r}: expected a number in (0, 1]")
    return v


# ---- parsing of option text (shared by the CLI and library callers) ----

def parse_threads(text: str) -> list:
    """'1,2,4' or '1-4' or a mix ('1,2,6-8') -> sorted unique ints."""
    out = set()
    for part in str(text).split(","):
        part = part.strip()
        m = re.fullmatch(r"(-?\d+)(?:-(\d+))?", part)
        if not m:
            raise UsageError(
                f"invalid --threads {text!r}: expected counts like 1,2,4 or a range like 1-4")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi < lo:
            raise UsageError(f"invalid --threads {text!r}: range {part} is empty")
        out.update(range(lo, hi + 1))
    return sorted(out)


def parse_shape(text: str) -> tuple:
    """'64x512x512' (MxKxN: [M,K]x[K,N]) -> (M, K, N)."""
    m = re.fullmatch(r"\s*(\d+)[xX](\d+)[xX](\d+)\s*", str(text))
    dims = tuple(int(g) for g in m.groups()) if m else ()
    if not dims or min(dims) < 1:
        raise UsageError(
            f"invalid --gemm {text!r}: expected MxKxN with positive integers, e.g. 64x512x512")
    M, K, N = dims
    if max(dims) > MAX_GEMM_DIM or 4 * (M * K + K * N + M * N) > MAX_GEMM_BYTES:
        raise UsageError(
            f"invalid --gemm {text!r}: too large (each dimension <= {MAX_GEMM_DIM}, "
            f"A+B+C <= {MAX_GEMM_BYTES >> 30} GiB)")
    return dims


def parse_size(text) -> int:
    """Element count for --eltwise-size: a positive integer."""
    s = str(text).strip().replace("_", "")
    if not re.fullmatch(r"\d+", s) or int(s) < 1:
        raise UsageError(
            f"invalid --eltwise-size {text!r}: expected a positive number of elements, e.g. 32768")
    n = int(s)
    if n > MAX_ELTWISE_SIZE:
        raise UsageError(f"invalid --eltwise-size {text!r}: at most {MAX_ELTWISE_SIZE} elements")
    return n


# ---- validation and planning ----

def resolve_threads(threads: Optional[list], n_allowed: int,
                    n_default: Optional[int] = None) -> list:
    """The thread counts to measure. Default 1..n_default (the usable CPUs:
    the affinity mask capped by a cgroup CPU quota); explicit counts may go
    up to n_allowed (the affinity mask)."""
    if threads is None:
        n = min(n_default or n_allowed, n_allowed)
        return list(range(1, max(n, 1) + 1))
    threads = sorted(set(int(t) for t in threads))
    if not threads:
        raise UsageError("invalid --threads: no thread count given")
    bad = [t for t in threads if t < 1 or t > n_allowed]
    if bad:
        raise UsageError(
            f"invalid --threads {','.join(map(str, threads))}: thread counts must be between 1 "
            f"and {n_allowed} (the CPUs this process may use)")
    return threads


def validate(opts: ScanOptions, n_allowed: int, supported: list,
             n_default: Optional[int] = None) -> list:
    """Check every option; return the resolved thread list."""
    threads = resolve_threads(opts.threads, n_allowed, n_default)
    if opts.isa is not None and opts.isa not in supported:
        from hwtune.native.isa import ISA_NAMES
        if opts.isa not in ISA_NAMES:
            raise UsageError(
                f"invalid --isa {opts.isa!r}: choose one of {', '.join(ISA_NAMES)}")
        raise UsageError(
            f"invalid --isa {opts.isa!r}: not supported on this CPU (supported: "
            f"{', '.join(supported)})")
    if opts.reps is not None and not 1 <= opts.reps <= MAX_REPS:
        raise UsageError(f"invalid --reps {opts.reps}: expected 1..{MAX_REPS}")
    for shape in opts.gemm:
        parse_shape("x".join(map(str, shape)))
    parse_size(opts.eltwise_size)
    if not 0 <= opts.saturation < 10:
        raise UsageError(f"invalid --saturation {opts.saturation}: expected a fraction like 0.1")
    if not 0 <= opts.noise < 10:
        raise UsageError(f"invalid --noise {opts.noise}: expected a fraction like 0.05")
    return threads


def _scaled(budget: Budget, scale: float) -> Budget:
    if scale >= 1:
        return budget
    return Budget(
        reps=max(3, math.ceil(budget.reps * scale)),
        probe_reps=max(3, math.ceil(budget.probe_reps * scale)) if scale > 0.5 else 3,
        sample_s=budget.sample_s * scale, fma_s=budget.fma_s * scale,
        triad_dram_s=budget.triad_dram_s * scale, triad_l2_s=budget.triad_l2_s * scale,
        corun_s=budget.corun_s * scale, all_isas=False, dram_x_l3=budget.dram_x_l3)


def corun_layouts(threads: list, n_cpus: int) -> list:
    """(executors, threads per executor) with k*t <= N, t from the thread list.

    Every k for small machines; for large ones k is limited to powers of two
    plus the largest k that fits, keeping the step count ~N log N / t."""
    out = []
    for t in threads:
        kmax = n_cpus // t
        if kmax <= 8:
            ks = range(1, kmax + 1)
        else:
            ks = sorted({1 << i for i in range(kmax.bit_length()) if 1 << i <= kmax} | {kmax})
        out.extend((k, t) for k in ks)
    return out


def triad_sizes(l2_bytes: int, l3_bytes: int, x_l3: int = 4) -> tuple:
    """(dram_n, l2_n_per_thread): floats per array for the two triad runs.

    Out of cache: the three arrays total x_l3 times the L3; a pass streams
    them in order, so with LRU-like replacement even 2x leaves nothing of
    the previous pass to hit, and 4x also defeats adaptive policies that keep
    part of a stream. --quick uses 2x: each sample first-touches its arrays,
    and at 4x (150 MB here) that set-up dominated the quick scan's triad time.
    In L2: the three arrays of one thread fill half its L2, leaving room for
    the code, stack and prefetcher over-reach."""
    dram_n = max(1 << 20, (x_l3 * l3_bytes) // 12)
    l2_n = max(1024, l2_bytes // 2 // 12)
    return dram_n, l2_n


def l3_triad_n(l2_bytes: int, l3_bytes: int, threads: int) -> Optional[int]:
    """Floats per array of the in-L3 triad on `threads` threads, or None
    where it cannot be told from the in-L2 one: the three arrays total a
    quarter of the L3 (well inside it, whatever part of it a VM's
    neighbours hold), and only when each thread's share is at least twice
    its L2. On a 32 MiB L3 (AMD EPYC Zen 4) the triad held 93 GB/s on one
    thread at 8 MiB, 66-80 at 16 and 26-40 from 32 on."""
    total = l3_bytes // 4
    if l3_bytes <= 0 or total < 2 * l2_bytes * max(1, threads):
        return None
    return total // 12


def make_plan(opts: ScanOptions, *, n_allowed: int, supported: list, selected: str,
              l2_bytes: int, l3_bytes: int, n_default: Optional[int] = None,
              dot_variants: Optional[dict] = None) -> list:
    """The ordered steps of a scan. Raises UsageError for bad options.
    dot_variants: {(kind, isa): kernel variant} of the int8 / bf16 GEMM rows
    this CPU runs exactly (hwtune.native.bench.dot_variant); each gets a
    peak step beside the FMA peak of its ISA, and a missing one none."""
    threads = validate(opts, n_allowed, supported, n_default)
    b = _scaled(QUICK if opts.quick else FULL, opts.scale)
    reps = opts.reps or b.reps
    probe_reps = opts.reps or b.probe_reps
    isa = opts.isa or selected
    nmax = max(threads)
    steps = []

    peak_isas = [opts.isa] if opts.isa else (supported if b.all_isas else [selected])
    for i in peak_isas:
        for t in sorted({1, nmax}):
            steps.append(Step("fma_peak", "fma", {}, t, i, probe_reps, warmup=1, seconds=b.fma_s))
        for kind in ("int8", "bf16"):
            variant = (dot_variants or {}).get((kind, i))
            if variant:
                for t in sorted({1, nmax}):
                    steps.append(Step("dot_peak", kind, {"kernel": variant}, t, i, probe_reps,
                                      warmup=1, seconds=b.fma_s))

    dram_n, l2_n = triad_sizes(l2_bytes, l3_bytes, b.dram_x_l3)
    if opts.scale < 1:  # tests: filling 150 MB per sample dominates a shrunken scan
        dram_n = max(l2_n, int(dram_n * opts.scale))
    for t in threads:
        steps.append(Step("triad", "triad", {"where": "dram", "n": dram_n}, t, isa,
                          probe_reps, warmup=1, seconds=b.triad_dram_s))
        steps.append(Step("triad", "triad", {"where": "l2", "n": l2_n * t}, t, isa,
                          probe_reps, warmup=1, seconds=b.triad_l2_s))
        l3_n = l3_triad_n(l2_bytes, l3_bytes, t)
        if l3_n is not None:
            steps.append(Step("triad", "triad", {"where": "l3", "n": l3_n}, t, isa,
                              probe_reps, warmup=1, seconds=b.triad_l2_s))

    for (M, K, N) in opts.gemm:
        for t in threads:
            steps.append(Step("gemm", "gemm", {"M": M, "K": K, "N": N}, t, isa, reps,
                              sample_s=b.sample_s, reference=True))

    for op in ELTWISE_OPS:
        for t in threads:
            steps.append(Step("eltwise", op, {"n": opts.eltwise_size}, t, isa, reps,
                              sample_s=b.sample_s))

    if opts.corun:
        M, K, N = opts.gemm[0]
        for k, t in corun_layouts(threads, nmax):
            for kind, params in (("gemm", {"M": M, "K": K, "N": N}),
                                 ("mul", {"n": opts.eltwise_size})):
                for pin in (True, False):
                    steps.append(Step("corun", kind, params, t, isa, probe_reps, warmup=0,
                                      seconds=b.corun_s, executors=k, pin=pin))
    return steps
