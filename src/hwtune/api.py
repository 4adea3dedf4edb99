"""hwtune from Python: load a model, run it, tune it, compare it with ONNX
Runtime and PyTorch, scan the machine (docs/api.md).

    import hwtune
    m = hwtune.load("lstm_small", vars={"seq": 4})
    r = hwtune.run(m, reps=20)
    print(r.median_s, r.p90_s, r.config_source)

Each function does what its command does (the same stored configs, the
same results.db rows: `db` is a path, default $HWTUNE_DB else
./results.db, or ":memory:"), returns a dataclass, prints nothing and
raises the typed errors of hwtune.errors (UsageError for bad arguments,
exit_code tells what the command would exit with). Trials are plain lists
of dicts (no pandas). The library behind it never imports the click layer.

`load`, `run` and `tune` are also at the top level (`hwtune.run`);
`compare` and `scan` are reached as `hwtune.api.compare` and
`hwtune.api.scan`, since `hwtune.compare` and `hwtune.scan` name the
library's subpackages.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from hwtune.errors import UsageError

PathLike = Union[str, os.PathLike]


@dataclass
class Model:
    """A loaded model: a model.json, an ONNX file (imported, cached by
    content) or a bundled model's name, with its vars (or ONNX dimensions)
    set."""
    name: str
    path: str
    graph: Any = field(repr=False)
    vars: Dict[str, Any] = field(default_factory=dict)
    shapes: Dict[str, Tuple[int, ...]] = field(default_factory=dict)

    @property
    def ops(self) -> int:
        return len(self.graph.ops)

    @property
    def inputs(self) -> Dict[str, Tuple[int, ...]]:
        return {t.name: tuple(t.shape) for t in self.graph.inputs}

    @property
    def outputs(self) -> List[str]:
        return list(self.graph.outputs)


@dataclass
class RunResult:
    """`hwtune run`: latency of the whole graph over `reps` timed runs."""
    model: str
    graph_hash: str
    config: Dict[str, Any]
    config_source: str          # tuned | user | default (+flags)
    reps: int
    warmup: int
    samples: List[float]        # seconds per run, in order
    median_s: float
    mad_s: float
    min_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    runs_per_s: float
    gflops: float
    run_id: int
    db: str
    notice: Optional[str] = None
    check: Optional[Dict[str, Any]] = None          # with check=True
    outputs: Optional[Dict[str, np.ndarray]] = field(default=None, repr=False)


@dataclass
class TuneResult:
    """`hwtune tune-graph`: the verdict (what `hwtune run` uses now), the
    figures behind it and every trial of the run."""
    model: str
    graph_hash: str
    uses: str                   # tuned | stored | default
    default_s: float            # the default config's median, in the final comparison
    tuned_s: Optional[float]    # the stored tuned config's; None when the default is kept
    speedup: float              # default / what run uses
    config: Optional[Dict[str, Any]]    # the tuned config; None when the default is kept
    verdict: Dict[str, Any]     # as --json's: speedup interval, not_confirmed, ...
    why: List[str]
    cuts: List[Dict[str, Any]]  # what the budget left for a rerun
    tuning_s: float
    run_id: int
    db: str
    trials: List[Dict[str, Any]] = field(default_factory=list, repr=False)


@dataclass
class ScanResult:
    """`hwtune scan`: the stored scan's summary (peaks, scaling, co-run)."""
    run_id: int
    db: str
    summary: Dict[str, Any] = field(repr=False)

    @property
    def advice(self) -> List[str]:
        return list(self.summary.get("advice") or [])


def _model(model: Union[str, Model], vars: Optional[Mapping[str, Any]],
           shapes: Optional[Mapping[str, Sequence[int]]]) -> Model:
    if isinstance(model, Model):
        if vars or shapes:
            raise UsageError("vars and shapes apply when loading: pass them to load(), or a "
                             "model name here")
        return model
    return load(model, vars=vars, shapes=shapes)


def load(model: str, *, vars: Optional[Mapping[str, Any]] = None,
         shapes: Optional[Mapping[str, Sequence[int]]] = None) -> Model:
    """A model.json path, an .onnx path or a bundled model's name
    (`hwtune model list`); vars override the model's vars (for an ONNX
    model: size symbolic dimensions), shapes give ONNX input shapes."""
    from hwtune.sources import load_any
    v = dict(vars or {})
    s = {k: tuple(int(d) for d in dims) for k, dims in (shapes or {}).items()}
    graph, path = load_any(str(model), v or None, s or None)
    return Model(graph.name, str(path), graph, v, s)


def _open_db(db: Optional[PathLike]):
    from hwtune.db import ResultsDB
    return ResultsDB.open(None if db is None else str(db))


def run(model: Union[str, Model], *, reps: int = 20, warmup: int = 3,
        executors: Optional[int] = None, threads: Optional[int] = None,
        scheduler: Optional[str] = None, pin: Optional[bool] = None,
        inputs: Optional[Mapping[str, np.ndarray]] = None, check: bool = False,
        keep_outputs: bool = False, vars: Optional[Mapping[str, Any]] = None,
        db: Optional[PathLike] = None) -> RunResult:
    """Run a model on the engine as `hwtune run` does: the flags given here,
    else the stored tuned or user config of this model on this host, else
    the default; the run is stored in db."""
    from hwtune import machine
    from hwtune.engine.config import resolve
    from hwtune.engine.prepare import prepare_run
    from hwtune.engine.runner import check_counts, native_engine, run_model
    from hwtune.native.isa import selected_isa
    from hwtune.native.threads import allowed_cpus

    m = _model(model, vars, None)
    check_counts(reps, warmup)
    flags = {"executors": executors, "threads": threads, "scheduler": scheduler, "pin": pin}
    declared = m.inputs
    feeds = {}
    for name, value in (inputs or {}).items():
        if name not in declared:
            raise UsageError(f"the model has no input {name!r} (inputs: {', '.join(declared)})")
        arr = np.ascontiguousarray(value, dtype=np.float32)
        if tuple(arr.shape) != declared[name]:
            raise UsageError(f"input {name!r} has shape {tuple(arr.shape)}, the model declares "
                             f"{declared[name]}")
        feeds[name] = arr
    cpus = allowed_cpus()
    resolve(None, "", "", flags, cpus=cpus, op_names=[op.name for op in m.graph.ops])
    native_engine()
    with _open_db(db) as d:
        host_key = d.upsert_host(machine.fingerprint())
        graph_hash = d.put_graph(m.graph.to_json())
        prepared = prepare_run(d, host_key, m.graph, graph_hash, flags, cpus=cpus)
        res, cfg, run_graph, knobs = (prepared.resolved, prepared.config, prepared.graph,
                                      prepared.knobs)
        config_id = prepared.config_id(d, host_key, graph_hash)
        options = {"model": m.path, "graph_hash": graph_hash, "vars": m.vars,
                   "config": cfg.to_json(), "config_source": res.source, "iterations": reps,
                   "warmup": warmup, "trace": None, "inputs": sorted(feeds) or None,
                   "conv_knobs": knobs.to_json(), "train": None, "api": True}
        r = run_model(d, host_key, run_graph, graph_hash, cfg, iterations=reps, warmup=warmup,
                      trace=False, options=options, kernel_variant=selected_isa(),
                      config_id=config_id, check=check, base_graph=m.graph, inputs=feeds,
                      keep_outputs=keep_outputs)
        path = str(d.path)
    p50, p90, p99 = (float(x) for x in np.percentile(r.samples, [50, 90, 99]))
    return RunResult(m.name, graph_hash, cfg.to_json(), res.source, reps, warmup,
                     list(r.samples), r.median_s, r.mad_s, r.min_s, p50, p90, p99,
                     r.runs_per_s, r.gflops, r.run_id, path, res.notice, r.check, r.outputs)


def tune(model: Union[str, Model], *, budget_s: Optional[float] = None, reps: int = 5,
         only: Optional[Sequence[str]] = None, search: str = "optuna",
         trials: Optional[int] = None, vars: Optional[Mapping[str, Any]] = None,
         db: Optional[PathLike] = None, progress=None) -> TuneResult:
    """Tune a model as `hwtune tune-graph` does and store the verdict.
    only: stages among sweep, conv, hillclimb; progress(stage, message):
    called as the stages go (default: silent)."""
    from hwtune import machine
    from hwtune.engine.runner import native_engine
    from hwtune.native.threads import allowed_cpus
    from hwtune.tuners.pipeline import TuneOptions, tune_graph

    m = _model(model, vars, None)
    opts = TuneOptions(budget_s=budget_s, trials=trials, only=list(only) if only else None,
                       search=search, reps=reps).check()
    native_engine()
    with _open_db(db) as d:
        host_key = d.upsert_host(machine.fingerprint())
        graph_hash = d.put_graph(m.graph.to_json())
        res = tune_graph(d, host_key, m.graph, graph_hash, opts, cpus=allowed_cpus(),
                         model_path=m.path, progress=progress,
                         run_options={"vars": m.vars, "api": True})
        rows = d.trials(host_key, run_id=res.run_id)
        path = str(d.path)
    doc = res.to_json()
    v = doc["verdict"]
    tuned = doc["tuned"]
    return TuneResult(
        m.name, graph_hash, v["uses"], res.default.median_s,
        tuned["median_s"] if tuned else None, res.speedup,
        tuned["config"] if tuned else None, v, list(res.why), list(res.cuts), res.tuning_s,
        res.run_id, path,
        [{k: r[k] for k in ("tuner", "search", "subject", "threads", "params", "status",
                            "median_s", "mad_s", "n", "created_at")} for r in rows])


def compare(model: Union[str, Model], peers: Sequence[str] = ("ort",), *, reps: int = 10,
            threads: Optional[int] = None, inputs: Optional[Mapping[str, np.ndarray]] = None,
            vars: Optional[Mapping[str, Any]] = None, db: Optional[PathLike] = None):
    """hwtune beside each peer ('ort', 'torch') on the same graph, weights
    and inputs, as `hwtune compare --with` does (a peer whose library is
    missing raises hwtune.compare.peers.PeerMissing). Returns
    hwtune.compare.run.CompareResult: .sides (median_s, ratio = side /
    hwtune, agree), .ok."""
    from hwtune import machine
    from hwtune.compare.run import compare as run_compare
    from hwtune.db.connect import resolve_path
    from hwtune.db.keys import graph_hash
    from hwtune.engine.runner import native_engine

    m = _model(model, vars, None)
    native_engine()
    d = _open_db(db) if os.path.exists(resolve_path(None if db is None else str(db))) else None
    try:
        return run_compare(m.graph, m.path, list(peers), inputs=dict(inputs or {}), reps=reps,
                           threads=threads, db=d,
                           host_key=machine.host_key(machine.fingerprint()),
                           graph_hash=graph_hash(m.graph.to_json()), required=True)
    finally:
        if d is not None:
            d.close()


def scan(*, quick: bool = True, threads: Optional[Sequence[int]] = None, corun: bool = False,
         db: Optional[PathLike] = None, progress=None) -> ScanResult:
    """Characterise this machine as `hwtune scan` does (quick by default,
    without the co-run benchmark unless corun=True) and store it."""
    from hwtune.native.isa import supported_isas
    from hwtune.native.threads import allowed_cpus
    from hwtune.scan.runner import run_scan
    from hwtune.scan.steps import ScanOptions, validate
    from hwtune.scan.summary import load_run

    opts = ScanOptions(threads=sorted(int(t) for t in threads) if threads else None,
                       quick=quick, corun=corun)
    validate(opts, len(allowed_cpus()), supported_isas())
    with _open_db(db) as d:
        result = run_scan(d, opts, progress=progress)
        summary = load_run(d, result.run_id)
        path = str(d.path)
    return ScanResult(result.run_id, path, summary)


__all__ = ["Model", "RunResult", "TuneResult", "ScanResult", "load", "run", "tune",
           "compare", "scan"]
