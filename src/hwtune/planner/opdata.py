"""Per-op facts of a graph the cost model needs, in graph.ops order: type,
FLOPs, the bytes it reads and writes, its workload key (how op_profiles
names it), and whether the engine folds it at prepare (it never runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Set

from hwtune.graph.validate import BYTES_PER_ELEMENT


@dataclass(frozen=True)
class OpData:
    name: str
    type: str
    flops: int
    bytes: int        # inputs (params included) + outputs
    workload: str
    folded: bool = False  # computed once at prepare from params: costs a run nothing
    family: str = ""      # the serial-fraction fit it takes when not its type's (GEMV_FAMILY)

    @property
    def fit_type(self) -> str:
        """The key of the serial-fraction fit the cost model gives it."""
        return self.family or self.type


def folded_ops(graph) -> Set[str]:
    """Names of the ops the engine folds at prepare (exec/fold.c's rule): an
    op with inputs that are all params or outputs of folded ops -- the
    fusion pass's batch-norm folding of CONV weights, weight reshapes."""
    constant = {t.name for t in graph.params}
    out: Set[str] = set()
    for i in graph.order or range(len(graph.ops)):  # producers first
        op = graph.ops[i]
        if op.inputs and all(n in constant for n in op.inputs):
            out.add(op.name)
            constant.update(op.outputs)
    return out


def op_data(graph) -> List[OpData]:
    from hwtune.graph import ops as oplib
    from hwtune.graph.info import op_flops
    from hwtune.engine.runner import workload_keys
    keys = workload_keys(graph)
    folded = folded_ops(graph)
    out = []
    for op, wk in zip(graph.ops, keys):
        names = list(op.inputs) + list(op.outputs)
        nbytes = sum(oplib.numel(graph.shapes[n]) for n in names) * BYTES_PER_ELEMENT
        out.append(OpData(op.name, op.op, op_flops(graph, op), int(nbytes), wk,
                          op.name in folded, GEMV_FAMILY if takes_gemv(graph, op) else ""))
    return out


def takes_gemv(graph, op) -> bool:
    """Whether the engine runs op on the GEMM kernel's GEMV path: a matmul
    with at most GEMV_MAX_M rows of op(a) (engine/ops/linear.c)."""
    if op.op != "matmul" or not op.inputs:
        return False
    a = graph.shapes[op.inputs[0]]
    if len(a) != 2:
        return False
    rows = a[1] if (op.attrs or {}).get("transpose_a") else a[0]
    return int(rows) <= GEMV_MAX_M


# Op types whose scaling the scan's micro-benchmarks measure directly: the
# serial fraction fitted on the scan's GEMM serves matmul, its element-wise
# ops serve the graph's element-wise ops of the same name.
SCAN_GEMM_TYPES = ("matmul",)
# The GEMM kernel's GEMV path (kernels/gemm/gemm_internal.h HWT_GEMV_MAX_M,
# checked by a test): up to this many rows of A stream B once, unpacked.
# Its own fit, because it scales unlike the blocked path: on this 2-vCPU
# AMD EPYC (Zen 1, avx2) [1,256]x[256,1024] ran 1.11-1.53x faster on 2
# threads while [64,512]x[512,512] ran 1.76-2.2x, and
# predicting batch-1 LSTM steps with the GEMM's fit
# left deepcpu_lstm_i64_h256's 1x2 28-40% slower than predicted.
GEMV_MAX_M = 6
GEMV_FAMILY = "matmul (gemv)"
SCAN_ELTWISE = ("mul", "add", "sigmoid", "tanh", "relu")
