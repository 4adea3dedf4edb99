"""Run single ops of a lowered graph through their C implementations
(hwtune/op.h) without the engine: a test and benchmark harness.

The caller's numpy arrays are the buffers: each op context gets pointers to
contiguous float32 arrays for its inputs and freshly allocated (64-byte
aligned, NaN-filled) outputs, then prepare, run(tid) for tid in 0..nth-1 (sequentially:
the shares are disjoint, so the order cannot matter), and release.
"""

from typing import Dict, Mapping, Optional

import numpy as np

from hwtune.engine.lower import lower_graph
from hwtune.errors import EngineGraphError
from hwtune.graph.model import Graph
from hwtune.graph.reference import init_inputs, init_params
from hwtune.native.isa import resolve_isa
from hwtune.native.ops import aligned_empty, run_op


def run_ops(graph: Graph, nth: int = 1, isa: Optional[str] = None,
            inputs: Optional[Mapping[str, np.ndarray]] = None,
            params: Optional[Mapping[str, np.ndarray]] = None,
            repeat: int = 1, workspace: Optional[Dict[str, int]] = None
            ) -> Dict[str, np.ndarray]:
    """Execute a validated graph op by op in topological order, each op
    through its C implementation split into nth shares; returns the graph
    outputs. Inputs and params default to the reference's initialisation,
    so the result compares directly with run_reference(graph).
    workspace, if given, receives op name -> the workspace floats each
    share's prepare asked for (the op's plan)."""
    if nth < 1:
        raise EngineGraphError(f"nth must be >= 1, got {nth}")
    values: Dict[str, np.ndarray] = {}
    for src in (init_inputs(graph), init_params(graph), inputs or {}, params or {}):
        for name, arr in src.items():
            a = aligned_empty(graph.shapes[name])
            a[...] = np.asarray(arr, np.float32).reshape(graph.shapes[name])
            values[name] = a
    isa_idx = resolve_isa(isa)
    with lower_graph(graph) as ng:
        for i in graph.order:
            op = graph.ops[i]
            outs = [aligned_empty(graph.shapes[n]) for n in op.outputs]
            for o in outs:  # poison: an element no share writes stays NaN
                o.fill(np.nan)
            ws = run_op(ng.handle, i, op.op, [values[n] for n in op.inputs], outs, nth,
                        isa_idx, repeat)
            if workspace is not None:
                workspace[op.name] = ws
            values.update(zip(op.outputs, outs))
    return {name: values[name] for name in graph.outputs}
