"""The configured run, written once: the config a model runs with on this
host (flags, else the stored tuned or user config, else the default), each
CONV's knobs for the thread count it runs at, and the graph the layout pass
builds for them, checked against the CPUs; then the engine opened on it.
`hwtune run`, hwtune.api.run, compare, the check suite's model figures and
benchmarks/bench_peers.py all run a model this way, so a run measured by any
of them is the run `hwtune run` makes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from hwtune.engine.config import EngineConfig, Resolved, resolve
from hwtune.engine.conv_knobs import ConvKnobs, for_run
from hwtune.engine.runner import op_costs, open_engine
from hwtune.graph.model import Graph
from hwtune.native.threads import allowed_cpus


@dataclass
class PreparedRun:
    """A model configured to run: `config` (the resolved config with each
    CONV's knobs) runs `graph` (the model rewritten for those knobs);
    `resolved` is where the config came from, before the knobs."""
    config: EngineConfig
    graph: Graph
    knobs: ConvKnobs
    resolved: Resolved

    @property
    def source(self) -> str:
        """'default', 'tuned' or 'user', '+flags' when flags changed it."""
        return self.resolved.source

    def describe_source(self, notes: bool = True) -> str:
        """'tuned; conv knobs: tuned@2t for 12 ops; notes: ...' (notes:
        with the knob choice's notes)."""
        return "; ".join([self.source] + ([self.knobs.summary()] if self.knobs.sources else [])
                         + (["notes: " + " / ".join(self.knobs.notes)]
                            if notes and self.knobs.notes else []))

    def config_id(self, db, host_key: str, graph_hash: str, *, save: bool = False
                  ) -> Optional[int]:
        """The engine_configs row of the config run, stored so the C engine
        and the tuner find it: saved as the 'user' config when `save`, the
        default stored as 'default', a stored config's own row; None for a
        stored config that flags changed (flags never overwrite a tuned or
        user config)."""
        if save:
            return db.put_engine_config(host_key, graph_hash, source="user",
                                        **self.config.db_fields())
        if self.source == "default":
            return db.put_engine_config(host_key, graph_hash, source="default",
                                        **self.config.db_fields())
        if "+" not in self.source:
            return db.engine_config(host_key, graph_hash, self.source)["id"]
        return None

    def open(self, db=None, host_key: Optional[str] = None):
        """The C engine prepared on graph under config, with the op costs a
        scheduler that orders ops by them needs (the config's, else the
        profiled ones stored for this host in db)."""
        return open_engine(self.graph, self.config,
                           op_costs(db, host_key, self.graph, self.config))


def prepare_run(db, host_key: str, graph: Graph, graph_hash: str,
                flags: Optional[Mapping[str, Any]] = None, *,
                cpus: Optional[Sequence[int]] = None, isa: Optional[str] = None
                ) -> PreparedRun:
    """The run of graph (plain, validated) on host_key: the config resolved
    from flags (keys of engine.config.FLAG_FIELDS; None: not given) and what
    db stores for graph_hash (db None: nothing stored), each CONV's knobs
    for the threads it runs at (conv_knobs.for_run), and the per-op tables
    checked against the graph that runs and the CPUs (default: the allowed
    ones). Raises UsageError for a config that cannot run."""
    if cpus is None:
        cpus = allowed_cpus()
    resolved = resolve(db, host_key, graph_hash, flags or {}, cpus=cpus)
    cfg, run_graph, knobs = for_run(db, host_key, graph, resolved.config,
                                    params_threads=resolved.params_threads, isa=isa)
    # Per-op tables name ops of the graph that runs (layout rewrites add some).
    cfg.validate(cpus, [op.name for op in run_graph.ops])
    return PreparedRun(cfg, run_graph, knobs, resolved)
