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
from hwtune.native.dynamic import DynExecutor, Samples, samples_options


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

    def to_json(self) -> Dict[str, object]:
        return asdict(self)


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
        from hwtune.native.pool import allowed_cpus
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
        cfg = {"policy": config.policy, "batch": config.batch, "chunk": config.chunk,
               "executors": config.executors, "threads_per_executor": threads,
               "pin": config.pin, "isa": config.isa,
               "hoist": None if config.hoist is None else int(config.hoist)}
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
