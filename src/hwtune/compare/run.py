"""compare(): hwtune (its stored tuned config when there is one) and each
peer on the same graph, weights and inputs; outputs checked, latencies
sampled interleaved."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from hwtune.compare.peers import PEERS, PeerMissing, Side, Subject
from hwtune.engine.prepare import prepare_run
from hwtune.errors import HwtuneError, UsageError

# Outputs agree when max |peer - hwtune| <= TOL x max |peer| on every
# output: float32 sums in another order (blocked CONV, fused GEMMs) differ
# by ~1e-6 relative; the same bound as `hwtune run --check`.
TOL = 1e-4
MAX_REPS = 1000
# A sample lasts at least 20 ms (several calls of a fast graph): well above
# the ~1 us timer and the ~10 us Python call overhead of a side.
SAMPLE_S = 0.02


class OutputsDiffer(HwtuneError):
    """A peer computed different outputs: a bug somewhere (exit 1)."""

    exit_code = 1


@dataclass
class SideResult:
    key: str
    name: str
    describe: str
    samples: List[float]
    median_s: float
    mad_s: float
    ratio: float                      # side / hwtune median: > 1, hwtune is faster
    agree: Optional[bool] = None      # None for hwtune itself
    max_rel_err: Optional[float] = None
    worst_output: Optional[str] = None
    # hwtune with int8 / bf16 ops (a tuned config's op_precision): how many
    # ops run in each, and its error against the same config in fp32 (the
    # reference the peers are checked against then).
    precision: Optional[Dict[str, int]] = None

    def to_json(self) -> Dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class CompareResult:
    model: str
    source: str
    ops: int
    inputs: str
    threads: int
    reps: int
    cpu: str
    isa: str
    load_before: List[float]
    load_after: List[float]
    sides: List[SideResult]
    notices: List[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.agree is not False for s in self.sides)

    def to_json(self) -> Dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "sides"}
        out["sides"] = [s.to_json() for s in self.sides]
        out["ok"], out["tolerance"] = self.ok, TOL
        return out


def agreement(ours: Dict[str, np.ndarray], theirs: Dict[str, np.ndarray]):
    """(worst relative error, output) over the outputs both name."""
    worst, where = 0.0, None
    for name, ref in theirs.items():
        if name not in ours:
            continue
        ref = np.asarray(ref, np.float64)
        got = np.asarray(ours[name], np.float64).reshape(ref.shape)
        scale = float(np.abs(ref).max(initial=0.0))
        diff = np.abs(got - ref)
        err = float(np.nan_to_num(diff, nan=np.inf).max(initial=0.0))
        rel = err / scale if scale > 0 else (0.0 if err == 0 else float("inf"))
        if where is None or rel > worst:
            worst, where = rel, name
    return worst, where


def _hwtune_side(db, host_key, graph, graph_hash, inputs, threads):
    """(Side, config): the engine as `hwtune run` would configure it, the
    stored tuned (or user) config of this graph on this host, else the
    default; threads forces 1 executor x threads."""
    flags = {} if threads is None else {"executors": 1, "threads": threads}
    run = prepare_run(db, host_key, graph, graph_hash, flags)
    eng = run.open()
    for name, value in inputs.items():
        eng.set_input(name, value)
    return Side("hwtune", "hwtune", f"{run.config.describe()} [{run.describe_source()}]",
                eng.run, eng.outputs, eng.close), run.config


def _fp32_outputs(graph, cfg, inputs) -> Dict[str, np.ndarray]:
    """The outputs of cfg with every op in fp32 (its op_precision dropped)."""
    from dataclasses import replace
    from hwtune.engine.effective import effective_graph
    from hwtune.engine.runner import open_engine
    fp32 = replace(cfg, op_precision={})
    eng = open_engine(effective_graph(graph, fp32), fp32, op_cost=None)
    try:
        for name, value in inputs.items():
            eng.set_input(name, value)
        eng.run()
        return {k: np.array(v, copy=True) for k, v in eng.outputs().items()}
    finally:
        eng.close()


def compare(graph, source_path: str, peers: Sequence[str], *, inputs: Dict[str, np.ndarray],
            reps: int, threads: Optional[int] = None, db=None, host_key: str = "",
            graph_hash: str = "", notice=None, required: bool = True,
            min_time: Optional[float] = None) -> CompareResult:
    """Run and time hwtune and each peer in `peers` (keys of PEERS).

    required: the peers were named by the user, so a peer whose library is
    missing raises PeerMissing (a comparison that compared nothing must not
    pass a CI step); else (a default list) it is skipped with a notice. No
    peer left to run (missing, or unable to load the model) raises
    PeerMissing too."""
    from hwtune.graph.reference import init_inputs, init_params
    from hwtune.machine import fingerprint
    from hwtune.native.isa import selected_isa
    from hwtune.native.threads import allowed_cpus
    from hwtune.scan.stats import mad, median
    from hwtune.sources import is_onnx
    from hwtune.measure.sampling import interleaved_calls

    if not 1 <= reps <= MAX_REPS:
        raise UsageError(f"invalid --reps {reps}: expected 1..{MAX_REPS}")
    if min_time is not None:
        # Each sample of each side lasts about SAMPLE_S: at least min_time
        # seconds per side, as hyperfine's minimum run time.
        reps = max(reps, min(MAX_REPS, math.ceil(min_time / SAMPLE_S)))
    bad = [p for p in peers if p not in PEERS]
    if bad:
        raise UsageError(f"unknown peer {bad[0]!r} in --with: choose from {', '.join(PEERS)}")
    notices = []
    load_before = list(os.getloadavg())
    feeds = {**init_inputs(graph), **inputs}
    hw, cfg = _hwtune_side(db, host_key, graph, graph_hash, feeds, threads)
    # The peers get as many threads as hwtune's config uses.
    side_threads = min(cfg.total_threads, len(allowed_cpus()))
    if is_onnx(source_path):
        with open(source_path, "rb") as fh:
            onnx_bytes, onnx_source = fh.read(), "the ONNX file"
    elif "ort" in peers:
        from hwtune.onnx.export import to_onnx
        onnx_bytes = to_onnx(graph).SerializeToString()
        onnx_source = "the model exported to ONNX"
    else:
        onnx_bytes, onnx_source = b"", ""
    subject = Subject(graph, init_params(graph), feeds, onnx_bytes, onnx_source, side_threads)
    sides = [hw]
    try:
        for key in peers:
            try:
                sides.append(PEERS[key](subject))
            except PeerMissing as exc:
                if required:
                    raise PeerMissing(f"--with {key}: {exc}") from None
                notices.append(f"skipping {key}: {exc}")
            except UsageError as exc:
                notices.append(f"skipping {key}: {exc}")
        if peers and len(sides) == 1:  # one error line, no notices before it
            raise PeerMissing("no peer to compare with: " + "; ".join(
                n.split(": ", 1)[1] for n in notices))
        for n in notices if notice else ():
            notice(n)
        for s in sides:
            s.run()
        ours = hw.outputs()
        # With int8 / bf16 ops, hwtune's error against fp32 is reported
        # beside its speed, and the peers are checked against fp32.
        ref = _fp32_outputs(graph, cfg, feeds) if cfg.op_precision else ours
        checks = {s.key: agreement(ref, s.outputs()) for s in sides[1:]}
        if cfg.op_precision:
            checks["hwtune"] = agreement(ours, ref)
        samples = interleaved_calls([s.run for s in sides], reps, sample_s=SAMPLE_S,
                                     max_calls=1000)
    finally:
        for s in sides:
            s.close()
    base = median(samples[0])
    results = []
    for s, xs in zip(sides, samples):
        med = median(xs)
        r = SideResult(s.key, s.name, s.describe, xs, med, mad(xs),
                       med / base if base > 0 else float("inf"))
        if s.key in checks:
            r.max_rel_err, r.worst_output = checks[s.key]
            r.agree = r.max_rel_err <= TOL if s is not hw else None
        if s is hw and cfg.op_precision:
            counts: Dict[str, int] = {}
            for p in cfg.op_precision.values():
                counts[p["precision"]] = counts.get(p["precision"], 0) + 1
            r.precision = counts
        results.append(r)
    fp = fingerprint()
    return CompareResult(
        model=graph.name, source=source_path, ops=len(graph.ops),
        inputs="from files" if inputs else "seeded", threads=side_threads, reps=reps,
        cpu=str(fp.get("cpu_model") or "unknown CPU"), isa=selected_isa(),
        load_before=load_before, load_after=list(os.getloadavg()), sides=results,
        notices=notices)

