"""A dynamic model on the C engine: lower F, give every tensor its role,
bind the params the numpy reference uses, read the samples, prepare.

One DynamicEngine is one (model, sample set, config); run() evaluates every
batch of the set, readouts() returns what the readouts computed."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Dict, List, Optional

import numpy as np

from hwtune.dynamic.model import DynModel
from hwtune.engine.lower import lower_graph
from hwtune.graph.reference import init_params
from hwtune.native.dynamic import (DynamicError, DynExecutor, Samples, default_chunk,
                                   n_buckets, samples_options)


@dataclass
class DynConfig:
    """How the engine evaluates batches (hwt_dyn_config)."""

    policy: str = "batched"
    batch: int = 64
    chunk: Optional[int] = None      # most rows per op call (C default 256)
    executors: int = 1
    threads: Optional[int] = None    # per executor (default: all usable CPUs / executors)
    pin: bool = True
    hoist: Optional[bool] = None     # None: by policy (on for batched and by-depth)
    isa: Optional[int] = None
    # op name -> {rows: threads} for the op calls over that many rows (a
    # power of two up to the chunk); unnamed ops and row counts: the
    # engine's default (the whole team unless the piece is too small)
    op_threads: Optional[Dict[str, Dict[int, int]]] = None

    def to_json(self) -> Dict[str, object]:
        return asdict(self)


def op_thread_table(model: DynModel, op_threads: Optional[Dict[str, Dict[int, int]]],
                    chunk: int) -> Optional[List[int]]:
    """The C table of per-op thread counts (hwt_dyn_config.op_threads: op k
    at bucket j, 2^j rows, at k * n_buckets + j; 0: the default) from op
    name -> {rows: threads}. Row counts above the chunk are never called
    (left out); a name F lacks or a row count that is no power of two is
    refused."""
    if not op_threads:
        return None
    nb = n_buckets(chunk)
    index = {op.name: k for k, op in enumerate(model.graph.ops)}
    table = [0] * (len(index) * nb)
    for name, by_rows in op_threads.items():
        if name not in index:
            raise DynamicError(f"per-op thread counts name op {name!r}, which {model.name} "
                               "does not have")
        for rows, threads in by_rows.items():
            rows, threads = int(rows), int(threads)
            if rows < 1 or rows & (rows - 1):
                raise DynamicError(f"per-op thread counts of {name!r}: {rows} rows is not a "
                                   "power of two")
            if threads < 1:
                raise DynamicError(f"per-op thread counts of {name!r}: {threads} threads at "
                                   f"{rows} rows")
            if rows <= chunk:
                table[index[name] * nb + rows.bit_length() - 1] = threads
    return table


def _options(model: DynModel, limits):
    """What model's vertices take (token ids below the vocabulary, feature
    rows of the input width, the arity), plus any size limits given."""
    width = model.input_width if model.input_kind == "features" else 0
    return samples_options(model.input_kind, vocab=model.vocab, feature_width=width,
                           arity=model.arity, **limits)


def read_samples(model: DynModel, path: str, **limits) -> Samples:
    """The input graphs of path, checked against model's vertex input."""
    return Samples.read(path, _options(model, limits))


def parse_samples(model: DynModel, text: str, **limits) -> Samples:
    return Samples.parse(text, _options(model, limits))


class DynamicEngine:
    def __init__(self, model: DynModel, samples: Samples, config: DynConfig, *,
                 params: Optional[Dict[str, np.ndarray]] = None, keep_states: bool = False,
                 record: bool = False):
        from hwtune.native.threads import allowed_cpus
        self.model, self.samples, self.config = model, samples, config
        ng = lower_graph(model.graph)
        ids = ng.tensor_ids
        by_name = {x.name: x for x in model.gathers}
        param_names = {t.name for t in model.graph.params}
        roles = []
        for name, tid in sorted(ids.items(), key=lambda kv: kv[1]):
            x = by_name.get(name)
            if name in param_names:
                roles.append(("param", 0, 0))
            elif x is None:
                roles.append(("op", 0, 0))
            elif x.kind == "vertex_input":
                roles.append(("vertex_input", 0, 0))
            elif x.kind == "child":
                roles.append(("child", x.state, x.child))
            elif x.kind in ("child_sum", "child_each"):
                roles.append((x.kind, x.state, 0))
            elif x.kind in ("to_edges", "sum_edges"):
                roles.append((x.kind, ids[x.source], 0))
            else:  # a readout's read of a final state
                roles.append(("state", x.readout, x.state))
        threads = config.threads or max(1, len(allowed_cpus()) // max(1, config.executors))
        self.chunk = config.chunk or default_chunk()
        cfg = {"policy": config.policy, "batch": config.batch, "chunk": self.chunk,
               "executors": config.executors, "threads_per_executor": threads,
               "pin": config.pin, "isa": config.isa,
               "hoist": None if config.hoist is None else int(config.hoist),
               "op_threads": op_thread_table(model, config.op_threads, self.chunk)}
        self.threads = threads
        self.ex = DynExecutor(ng, roles, [ids[u] for _, _, u in model.states],
                              ids[model.embedding] if model.embedding else -1,
                              [(r.at, [ids[o] for o in r.outputs]) for r in model.readouts],
                              cfg)
        self.params = params if params is not None else init_params(model.graph)
        for t in model.graph.params:
            self.ex.bind(ids[t.name], self.params[t.name])
        self.ex.prepare(samples, keep_states=keep_states, record=record)

    def run(self) -> None:
        self.ex.run()

    def readouts(self) -> List[List[np.ndarray]]:
        return [[self.ex.readout(r, k, self.model.width(name))
                 for k, name in enumerate(ro.outputs)]
                for r, ro in enumerate(self.model.readouts)]

    def states(self) -> List[np.ndarray]:
        return [self.ex.states(i, w) for i, (_, w, _) in enumerate(self.model.states)]

    def groups(self) -> tuple:
        return self.ex.groups()

    def histogram(self) -> Dict[str, Dict[int, int]]:
        """op name -> {rows: calls per run}: the row counts F's ops are
        called at over the prepared sample set (each call is one piece,
        prepared for a power-of-two row count up to the chunk)."""
        nb = n_buckets(self.chunk)
        out: Dict[str, Dict[int, int]] = {}
        for k, op in enumerate(self.model.graph.ops):
            calls = {1 << j: c for j, (c, _) in enumerate(self.ex.op_calls(k, nb)) if c}
            if calls:
                out[op.name] = calls
        return out

    def close(self) -> None:
        self.ex.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def compare(model: DynModel, got: List[List[np.ndarray]], want: List[List[np.ndarray]],
            tolerance: float = 1e-4) -> Dict[str, object]:
    """The largest difference of any readout output, relative to that
    output's scale (max |reference|); ok when within tolerance."""
    worst = {"ok": True, "max_abs": 0.0, "rel": 0.0, "output": "", "tolerance": tolerance}
    for ro, gs, ws in zip(model.readouts, got, want):
        for name, a, b in zip(ro.outputs, gs, ws):
            if a.shape != b.shape:
                return {"ok": False, "max_abs": float("inf"), "rel": float("inf"),
                        "output": name, "tolerance": tolerance,
                        "note": f"shape {a.shape} vs reference {b.shape}"}
            if a.size == 0:
                continue
            diff = float(np.max(np.abs(a.astype(np.float64) - b)))
            scale = max(float(np.max(np.abs(b))), 1e-30)
            if not np.isfinite(diff):
                diff = float("inf")
            rel = diff / scale
            if rel >= worst["rel"]:
                worst.update(max_abs=diff, rel=rel, output=name)
    worst["ok"] = worst["rel"] <= tolerance
    return worst
