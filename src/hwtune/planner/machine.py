"""What a machine offers the cost model and the simulator: cores, caches,
one core's compute peak, memory bandwidth as a function of busy cores, and
the engine's overheads there.

Two sources:
  - this host: the fingerprint (cores, caches), the latest `hwtune scan`
    (FMA peak of one thread for the kernel ISA, STREAM triad in L2 and out
    of cache per thread count) and the plan calibration (fork-join and the
    engine's dispatch overheads, calibrate.py);
  - a TOML description of another machine (configs/machines/*.toml; the
    keys are documented in docs/plan.md and in every bundled file), whose
    overheads are this host's measured ones times its overhead_scale.

Bandwidth with n busy cores never falls below what fewer cores got: n
threads can always leave some cores idle, so a lower measurement at more
threads is another program's load (the scan on a shared 2-core VM measured
22.0 GB/s on 1 thread and 12.1 on 2)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from hwtune.errors import UsageError
from hwtune.tomlread import toml_module

GB = 1e9


def _on_curve(curve: Tuple[float, ...], n: int) -> Optional[float]:
    """Bytes/s with n busy cores on a cache-bandwidth curve ([n] GB/s): the
    measured value, past the last count that count's rate per core; None
    without a curve."""
    if len(curve) <= 1:
        return None
    last = len(curve) - 1
    return (curve[n] if n <= last else curve[last] / last * n) * GB


@dataclass(frozen=True)
class Machine:
    name: str
    cores: int                 # cores the plan may use (reserved ones left out)
    threads_per_core: int
    sockets: int
    numa_nodes: int
    clock_ghz: Optional[float]
    l2_bytes: int              # one L2
    l2_shared_by: int          # cores per L2
    llc_bytes: int             # L3, or every L2 together where there is none
    peak_gflops_core: float    # FP32 FMA peak of one core, hwtune's kernel ISA there
    dram_gbs: Tuple[float, ...]  # [n]: GB/s out of cache with n busy cores (n = 0..cores)
    l2_gbs_core: float         # one core's GB/s in its L2 (triad)
    forkjoin_s: Tuple[float, ...]  # [n]: an n-thread region's fork-join (0 below 2)
    overhead_scale: float = 1.0    # the engine's dispatch overheads vs this host's
    source: str = ""
    notes: Tuple[str, ...] = ()
    # [n]: GB/s of the in-L2 triad with n busy cores (n = 0..), where measured
    # (this host's scan); empty: n times l2_gbs_core. On this 2-vCPU VM the
    # 2-thread in-L2 triad ran 1.74x the 1-thread one in one state and
    # 1.23-1.40x in another, not the 2x of private L2s.
    l2_gbs: Tuple[float, ...] = ()
    # [n]: GB/s of the triad over a quarter of the last-level cache with n
    # busy cores (this host's scan, where it measured one); empty: the in-L2
    # rate. On this host (AMD EPYC Zen 4, 1 MiB L2, 32 MiB L3) the L3 triad
    # ran 93 GB/s on one thread against 109 in L2, and 172-182 on two.
    l3_gbs: Tuple[float, ...] = ()
    # [n]: GB/s of one read stream the last-level cache serves with n busy
    # cores (a GEMV's weights, read once per call, nothing written back):
    # the scan's largest GEMV shape that lives there, its bytes over its
    # time (this host); empty: l3_bw. The triad (two reads, one write per
    # element) is another stream, and on this VM its 2-thread speedup did
    # not follow the GEMV's: in-L3 triad 1.20x, [1,1024]x[1024,4096] (16
    # MiB) 2.0x and deepcpu_lstm_i64_h1024's 1x2 over its 1x1 1.86x in one
    # validation; 1.45x, 1.69x and 1.77x in another; in the stored scan
    # they were 2.0x and 1.30x (2-vCPU AMD EPYC Zen 3, avx2; probes beside
    # the validations of 2026-12-05). Charged at the triad's
    # rate, those 1x2 rows were predicted 24-49% slow.
    l3_read_gbs: Tuple[float, ...] = ()

    def dram_bw(self, n: int) -> float:
        """Bytes/s out of cache with n busy cores."""
        return self.dram_gbs[max(0, min(n, self.cores))] * GB

    def l2_bw(self, n: int) -> float:
        """Bytes/s of in-cache traffic with n busy cores: the measured curve,
        past it the last measured count's rate per core."""
        n = max(1, int(n))
        got = _on_curve(self.l2_gbs, n)
        return n * self.l2_gbs_core * GB if got is None else got

    def l3_bw(self, n: int) -> float:
        """Bytes/s of traffic the last-level cache serves with n busy cores:
        the measured curve, past it the last count's rate per core; without
        one, the in-L2 rate."""
        got = _on_curve(self.l3_gbs, max(1, int(n)))
        return self.l2_bw(n) if got is None else got

    def l3_read_bw(self, n: int) -> float:
        """Bytes/s of one read stream from the last-level cache with n busy
        cores: the measured curve (past it, the last count's rate per
        core); without one, l3_bw."""
        got = _on_curve(self.l3_read_gbs, max(1, int(n)))
        return self.l3_bw(n) if got is None else got

    def bw_cap(self) -> List[float]:
        """The simulator's table: bytes/s served with c busy cores, c = 0..cores."""
        return [g * GB for g in self.dram_gbs]

    def forkjoin(self, n: int) -> float:
        if n < 2:
            return 0.0
        if n < len(self.forkjoin_s):
            return self.forkjoin_s[n]
        # past the table: the last step per extra thread (the join scans one
        # more line per thread)
        last = self.forkjoin_s[-1]
        step = last - self.forkjoin_s[-2] if len(self.forkjoin_s) > 2 else 0.0
        return last + step * (n - len(self.forkjoin_s) + 1)

    def describe(self) -> str:
        l3 = f"{self.llc_bytes / 2**20:.0f} MiB last-level cache"
        return (f"{self.name}: {self.cores} cores, {self.peak_gflops_core:.1f} GFLOPS/core peak, "
                f"{self.dram_gbs[1]:.1f} GB/s one core .. {self.dram_gbs[-1]:.1f} GB/s all, {l3}")

    def to_json(self) -> dict:
        return {"name": self.name, "cores": self.cores, "threads_per_core": self.threads_per_core,
                "sockets": self.sockets, "numa_nodes": self.numa_nodes,
                "clock_ghz": self.clock_ghz, "l2_bytes": self.l2_bytes,
                "l2_shared_by": self.l2_shared_by, "llc_bytes": self.llc_bytes,
                "peak_gflops_core": self.peak_gflops_core, "dram_gbs": list(self.dram_gbs),
                "l2_gbs_core": self.l2_gbs_core, "l2_gbs": list(self.l2_gbs),
                "l3_gbs": list(self.l3_gbs), "l3_read_gbs": list(self.l3_read_gbs),
                "forkjoin_s": list(self.forkjoin_s),
                "overhead_scale": self.overhead_scale, "source": self.source,
                "notes": list(self.notes)}


def envelope(points: Dict[int, float], cores: int) -> Tuple[float, ...]:
    """[n] for n = 0..cores from measured {n: value}: the best value of any
    count <= n (0 below the first measured count is filled with it)."""
    if not points:
        raise UsageError("no bandwidth measurements to build a curve from")
    out, best = [0.0], 0.0
    first = points[min(points)]
    for n in range(1, cores + 1):
        if n in points:
            best = max(best, points[n])
        out.append(best if best > 0 else first)
    return tuple(out)


def per_core_curve(points: Dict[int, float], cores: int) -> Tuple[float, ...]:
    """[n] for n = 0..cores from measured {n: GB/s} of traffic that private
    caches serve (it grows with the cores): linear between measured counts,
    below the first and past the last at that count's rate per core."""
    if not points:
        return ()
    ns = sorted(points)
    out = [0.0]
    for n in range(1, cores + 1):
        if n <= ns[0]:
            out.append(points[ns[0]] / ns[0] * n)
        elif n >= ns[-1]:
            out.append(points[ns[-1]] / ns[-1] * n)
        else:
            b = next(x for x in ns if x >= n)
            a = max(x for x in ns if x <= n)
            out.append(points[a] if a == b else
                       points[a] + (points[b] - points[a]) * (n - a) / (b - a))
    return tuple(out)


# -- TOML descriptions --------------------------------------------------------

def _num(doc: dict, path: str, *, lo: float, hi: float, integer: bool = False,
         default=None, where: str = ""):
    node = doc
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            if default is not None:
                return default
            raise UsageError(f"{where}: missing {path}")
        node = node[key]
    ok = isinstance(node, (int, float)) and not isinstance(node, bool)
    if integer:
        ok = ok and float(node).is_integer()
    if not ok or not math.isfinite(float(node)) or not lo <= node <= hi:
        kind = "an integer" if integer else "a number"
        raise UsageError(f"{where}: {path} must be {kind} in {lo:g}..{hi:g}, got {node!r}")
    return int(node) if integer else float(node)


def from_toml(path: str, host_overheads_scale: float = 1.0) -> Machine:
    """A machine description file; UsageError naming the key on bad input."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read machine description {path}: {exc.strerror}") from None
    try:
        doc = toml_module("a machine description").loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{path}: not valid TOML ({exc})") from None
    w = str(path)
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"{w}: missing name (a string)")
    cores = _num(doc, "cores", lo=1, hi=4096, integer=True, where=w)
    reserved = _num(doc, "reserved_cores", lo=0, hi=cores - 1, integer=True, default=0, where=w)
    use = cores - reserved
    per_core = _num(doc, "memory.dram_gbs_per_core", lo=0.01, hi=1e4, where=w)
    saturated = _num(doc, "memory.dram_gbs_saturated", lo=0.01, hi=1e5, where=w)
    l2_kib = _num(doc, "caches.l2_kib", lo=1, hi=1 << 20, integer=True, where=w)
    l2_by = _num(doc, "caches.l2_shared_by", lo=1, hi=cores, integer=True, where=w)
    l3_mib = _num(doc, "caches.l3_mib", lo=0, hi=1 << 20, default=0, where=w)
    llc = int(l3_mib * 2**20) if l3_mib > 0 else l2_kib * 1024 * max(1, cores // l2_by)
    # optional: without it the L3 level moves at the in-L2 rate, as for a
    # host scan without an in-L3 triad
    l3_core = _num(doc, "memory.l3_gbs_per_core", lo=0.01, hi=1e5, default=0.0, where=w)
    if l3_core and l3_mib <= 0:
        raise UsageError(f"{w}: memory.l3_gbs_per_core needs caches.l3_mib (an L3 to move in)")
    fj2 = _num(doc, "overheads.forkjoin_us", lo=0, hi=1e6, where=w) * 1e-6
    fj_step = _num(doc, "overheads.forkjoin_ns_per_thread", lo=0, hi=1e6, where=w) * 1e-9
    scale = _num(doc, "overheads.scale", lo=0.01, hi=1000, where=w)
    notes = doc.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise UsageError(f"{w}: notes must be a list of strings")
    return Machine(
        name=name.strip(), cores=use,
        threads_per_core=_num(doc, "threads_per_core", lo=1, hi=16, integer=True, default=1,
                              where=w),
        sockets=_num(doc, "sockets", lo=1, hi=64, integer=True, default=1, where=w),
        numa_nodes=_num(doc, "numa_nodes", lo=1, hi=1024, integer=True, default=1, where=w),
        clock_ghz=_num(doc, "clock_ghz", lo=0.1, hi=10, where=w),
        l2_bytes=l2_kib * 1024, l2_shared_by=l2_by, llc_bytes=llc,
        peak_gflops_core=_num(doc, "compute.peak_gflops_per_core", lo=0.01, hi=1e5, where=w),
        dram_gbs=tuple([0.0] + [min(n * per_core, saturated) for n in range(1, use + 1)]),
        l2_gbs_core=_num(doc, "memory.l2_gbs_per_core", lo=0.01, hi=1e5, where=w),
        l3_gbs=per_core_curve({1: l3_core}, use) if l3_core else (),
        forkjoin_s=tuple([0.0, 0.0] + [fj2 + fj_step * (n - 2) for n in range(2, use + 1)]),
        overhead_scale=scale * host_overheads_scale, source=_source(p), notes=tuple(notes))


def _source(p: Path) -> str:
    try:
        if p.resolve().parent == machines_dir().resolve():
            return f"bundled description configs/machines/{p.name}"
    except UsageError:
        pass
    return str(p)


def machines_dir() -> Path:
    from hwtune.sources import configs_dir
    return configs_dir() / "machines"


def bundled() -> Dict[str, Path]:
    """Bundled description name -> file (configs/machines/)."""
    d = machines_dir()
    return {p.stem: p for p in sorted(d.glob("*.toml"))} if d.is_dir() else {}


def resolve(arg: str) -> str:
    """A path for --machine: an existing file, else a bundled description."""
    if Path(arg).is_file():
        return arg
    found = bundled().get(Path(arg).stem if arg.endswith(".toml") else arg)
    if found is None:
        raise UsageError(f"invalid --machine {arg!r}: no such file, and no bundled description "
                         f"of that name (bundled: {', '.join(bundled()) or 'none'})")
    return str(found)


# -- this host ------------------------------------------------------------------

@dataclass
class HostFigures:
    """What the scan stored for this host, reduced to the model's inputs."""
    run_id: int
    isa: str
    peak_gflops_core: float
    dram: Dict[int, float] = field(default_factory=dict)  # threads -> GB/s
    l2: Dict[int, float] = field(default_factory=dict)
    l3: Dict[int, float] = field(default_factory=dict)
    gemm: List[dict] = field(default_factory=list)        # scaling rows (serial fractions)
    triads: List[dict] = field(default_factory=list)      # {where, threads, n}: the rows of l2/dram
    eltwise: List[dict] = field(default_factory=list)

    def gemm_shapes(self) -> Dict[Tuple[int, int, int], Dict[int, float]]:
        """(M, K, N) -> {threads: seconds} of the GEMM scaling rows that
        have a time."""
        out: Dict[Tuple[int, int, int], Dict[int, float]] = {}
        for r in self.gemm:
            if r.get("time_s"):
                out.setdefault((int(r["M"]), int(r["K"]), int(r["N"])), {})[
                    int(r["threads"])] = float(r["time_s"])
        return out


def gemm_bytes(M: int, K: int, N: int) -> int:
    """Bytes a [M,K]x[K,N] GEMM touches: A, B and C in fp32."""
    return 4 * (M * K + K * N + M * N)


def _least_disturbed(row: dict) -> float:
    """A scaling row's time for the serial-fraction fits: its fastest
    sample, else its median. Other processes only ever add time, and more
    to a run on two threads (it waits for its slower thread) than to one on
    one: a 1x2 GEMM whose median was taken under load measured slower than
    the 1x1 one and the fit gave the GEMM a serial fraction of 1.0 (issue
    #13, 2-core AMD EPYC, load 3-5). A scan keeps 9+ samples per row."""
    xs = [float(x) for x in (row.get("samples") or []) if x and x > 0]
    return min(xs) if xs else row["median_s"]


def scan_figures(db, host_key: str, isa: str) -> HostFigures:
    """The latest complete scan of this host; UsageError when there is none
    or it lacks the figures the model needs."""
    import json
    run = db.last_run(host_key, "scan")
    if run is None:
        raise UsageError("no scan of this host in the database: run `hwtune scan --quick` first "
                         "(the cost model needs its FMA peak and memory bandwidth)")
    figs = HostFigures(run_id=run["run_id"], isa=isa, peak_gflops_core=0.0)
    peaks = {}
    for row in db.measurements(run["run_id"]):
        if row.get("status") == "error" or row.get("value") is None:
            continue
        p = row.get("params") or {}
        p = json.loads(p) if isinstance(p, str) else p
        if row["bench"] == "fma_peak" and row["threads"] == 1:
            peaks[row["kernel_variant"]] = row["value"]
        elif row["bench"] == "triad":
            level = p.get("where") if p.get("where") in ("dram", "l3") else "l2"
            getattr(figs, level)[row["threads"]] = row["value"]
            if p.get("n"):
                figs.triads.append({"where": level, "threads": row["threads"],
                                    "n": int(p["n"])})
        elif row["bench"] == "gemm" and row["kernel_variant"] == isa:
            figs.gemm.append({"threads": row["threads"], "time_s": _least_disturbed(row), **p})
        elif row["bench"] == "eltwise" and row["kernel_variant"] == isa:
            figs.eltwise.append({"op": row["op"], "threads": row["threads"],
                                 "time_s": _least_disturbed(row), **p})
    figs.peak_gflops_core = peaks.get(isa) or max(peaks.values(), default=0.0)
    missing = [what for what, ok in (("the FMA peak", figs.peak_gflops_core > 0),
                                     ("out-of-cache triad", bool(figs.dram)),
                                     ("in-L2 triad", bool(figs.l2))) if not ok]
    if missing:
        raise UsageError(f"the latest scan of this host (run {run['run_id']}) lacks "
                         f"{', '.join(missing)}: run `hwtune scan` again")
    return figs


def _cache(fp: dict, level: str) -> Tuple[int, int]:
    """(bytes of one instance, CPUs sharing it) of a cache level, or (0, 1)."""
    c = (fp.get("caches") or {}).get(level) or {}
    groups = c.get("groups") or []
    size = c.get("size_bytes") or (groups[0].get("size_bytes") if groups else 0) or 0
    share = len(groups[0].get("cpus") or [1]) if groups else 1
    return int(size), max(1, share)


def read_stream(figs: HostFigures, l2_bytes: int, llc_bytes: int) -> Dict[int, float]:
    """{threads: GB/s} of the scan's largest GEMV shape (at most
    GEMV_MAX_M rows: the kernel streams B once) whose bytes live in the
    last-level cache (more than one L2, no more than the LLC): its bytes
    per call over its time; empty without one or without its 1-thread row.
    The time includes the compute and, past one thread, the pool's fork-
    join: ~1% of the 16 MiB shape's 225 us on two threads here."""
    from hwtune.planner.opdata import GEMV_MAX_M
    gemv = [(gemm_bytes(*shape), times) for shape, times in figs.gemm_shapes().items()
            if shape[0] <= GEMV_MAX_M and 1 in times]
    inside = [(nbytes, times) for nbytes, times in gemv if l2_bytes < nbytes <= llc_bytes]
    if not llc_bytes or not inside:
        return {}
    nbytes, times = max(inside, key=lambda bt: bt[0])
    return {t: nbytes / s / GB for t, s in times.items() if s > 0}


def host_machine(fp: dict, figs: HostFigures, forkjoin: Dict[int, float]) -> Machine:
    """This host: fingerprint + scan figures + measured fork-join
    ({threads: seconds})."""
    cores = int(fp.get("usable_cpus") or fp.get("logical_cpus") or 1)
    l2, l2_by = _cache(fp, "L2")
    l3, _ = _cache(fp, "L3")
    l2_core = figs.l2.get(1) or min(figs.l2.values())
    fj = [0.0, 0.0] + [forkjoin.get(n, 0.0) for n in range(2, cores + 1)]
    l2 = l2 or 512 * 1024
    llc = l3 or (l2 * max(1, cores // l2_by))
    mhz = (fp.get("volatile") or {}).get("cpu_mhz")
    return Machine(
        name=f"{fp.get('cpu_model') or 'this host'} (this host, {cores} usable CPUs)",
        cores=cores, threads_per_core=int(fp.get("threads_per_core") or 1),
        sockets=int(fp.get("sockets") or 1), numa_nodes=int(fp.get("numa_nodes") or 1),
        clock_ghz=(mhz / 1000.0) if mhz else None, l2_bytes=l2,
        l2_shared_by=l2_by, llc_bytes=llc,
        peak_gflops_core=figs.peak_gflops_core, dram_gbs=envelope(figs.dram, cores),
        l2_gbs_core=l2_core, l2_gbs=per_core_curve(figs.l2, cores),
        l3_gbs=per_core_curve(figs.l3, cores),
        l3_read_gbs=per_core_curve(read_stream(figs, l2, llc), cores),
        forkjoin_s=tuple(fj),
        overhead_scale=1.0,
        source=f"this host: scan run {figs.run_id} ({figs.isa}), fingerprint, plan calibration")


def parse_cores(text: str, limit: int = 4096) -> List[int]:
    """--cores 16,32,64 -> [16, 32, 64] (sorted, distinct)."""
    out = set()
    for part in str(text).split(","):
        part = part.strip()
        if not part.isdigit() or not 1 <= int(part) <= limit:
            raise UsageError(f"invalid --cores {text!r}: expected core counts like 16,32,64 "
                             f"(each 1..{limit})")
        out.add(int(part))
    return sorted(out)


def check_cores(machine: Machine, cores: Sequence[int]) -> None:
    over = [c for c in cores if c > machine.cores]
    if over:
        raise UsageError(f"invalid --cores {over[0]}: {machine.name} has {machine.cores} usable "
                         f"cores (pick --machine for a bigger one)")
