"""Prepare-time fusion of a CONV with the ops that follow it.

Two rewrites, each only where the CONV's output has that one consumer and
is not a graph output (so no other op or the user ever sees the skipped
intermediate):

- batch-norm folding: conv2d -> batch_norm (inference; gamma, beta, mean,
  var params) becomes one conv2d with weights w * s and bias
  (b - mean) * s + beta, s = gamma / sqrt(var + epsilon) per output
  channel. The scaled weights and bias are computed by ops inserted on the
  params -- a batch_norm over the weights reshaped so that the output
  channel is the normalised axis -- which the engine folds once at prepare
  (exec/fold.c), so the user's model and its stored param values stay
  untouched and every run reads the folded constants.
- residual epilogue: conv2d -> add(., r) with r of the output's shape
  becomes conv2d with r as its 4th input (a zero bias is added when it had
  none), added to the tile before the ReLU -- ResNet's block ending.
- ReLU epilogue: conv2d [-> add] -> relu becomes conv2d with relu=true,
  applied by the kernel while the output tile is in registers; a dense or
  depthwise conv2d [-> add] -> clip(0, max) (MobileNet's ReLU6) becomes
  conv2d with relu=true and relu_max=max (MobileNetV2: all 35 clips, 17
  of them after dense 1x1 convs).
- activation epilogue: conv2d [-> add] -> silu / hard_swish becomes conv2d
  with act="silu" / "hard_swish", applied by the kernel in its epilogue
  (EfficientNet-B0: all 49 silu ops, after its stem, expand, depthwise and
  squeeze-excitation convs; MobileNetV3-Large: 20 of its 21 hard_swish
  ops, the other follows a matmul). Every conv path applies it
  (graph/ops/conv.py's act). SiLU costs its arithmetic fused or not
  (EfficientNet-B0, 1 thread, op_breakdown.py: the fused convs 12.20 ms
  against 10.13 ms of convs + 2.09 ms of silu, Zen 4 under load);
  HardSwish's pass was the cost (MobileNetV3-Large: 0.15 ms of hard_swish
  ops gone, total 7.05 -> 6.85 ms with the GEMM epilogue's vector pass).

conv3d (NCDHW, the video classifiers) takes the residual and ReLU epilogues,
added while its frame is copied to the output (engine/ops/conv3d.c):
r3d_18's 8 add and 17 relu ops.

ResNet-18: 20 batch_norm, 17 relu and 8 add ops (each a pass over an
activation) disappear into their CONVs. Op names are kept for the CONVs (tuned
op_params and per-op settings name them); `fused_ops(graph)` maps each
absorbed op to the CONV that took it over.
"""

from typing import Dict, List, Optional

from hwtune.errors import UsageError
from hwtune.graph.errors import GraphError
from hwtune.graph.model import Graph, Op, Tensor
from hwtune.graph.ops.conv import ACTS

_FUSED_ATTR = "_fused_ops"


def fused_ops(graph: Graph) -> Dict[str, str]:
    """Absorbed op name -> name of the conv2d it was fused into ({} for a
    graph the pass did not make)."""
    return dict(getattr(graph, _FUSED_ATTR, {}) or {})


class _Fuser:
    def __init__(self, graph: Graph):
        self.g = graph
        self.params = {t.name: t for t in graph.params}
        self.outputs = set(graph.outputs)
        self.consumers: Dict[str, List[int]] = {}
        for i, op in enumerate(graph.ops):
            for t in set(op.inputs):
                self.consumers.setdefault(t, []).append(i)
        self.ops: List[Op] = []
        self.new_params: List[Tensor] = []
        self.absorbed: Dict[int, str] = {}  # op index -> conv name

    def sole_consumer(self, tensor: str, kind: str, first: bool = True) -> Optional[int]:
        """The op of type `kind` that is the only reader of `tensor`, reading
        it once (as its first input, if `first`); None if there is none, it
        was taken already, or the tensor is a graph output."""
        users = self.consumers.get(tensor, [])
        if tensor in self.outputs or len(users) != 1 or users[0] in self.absorbed:
            return None
        op = self.g.ops[users[0]]
        if op.op != kind or op.inputs.count(tensor) != 1 or (first and op.inputs[0] != tensor):
            return None
        return users[0]

    def residual(self, out: str) -> Optional[int]:
        """The add that takes `out` plus a tensor of the same shape."""
        j = self.sole_consumer(out, "add", first=False)
        if j is None:
            return None
        add = self.g.ops[j]
        other = add.inputs[1] if add.inputs[0] == out else add.inputs[0]
        same = tuple(self.g.shapes[other]) == tuple(self.g.shapes[out])
        return j if same and len(add.inputs) == 2 else None

    def emit(self, name, kind, inputs, outputs, attrs, like: Op):
        self.ops.append(Op(name, kind, list(inputs), list(outputs), dict(attrs),
                           like.loc, like.origin))

    def zeros(self, name: str, n: int) -> str:
        self.new_params.append(Tensor(name, (n,), init={"init": "zeros"}))
        return name

    def fold_bn(self, conv: Op, bn: Op, inputs: List[str]) -> List[str]:
        """Inputs of the folded conv: weights and bias scaled by bn."""
        w, layout = inputs[1], conv.resolved["layout"]
        shape = self.g.shapes[w]
        if len(shape) == 4:  # OIHW (a blocked depthwise conv's too): OC on axis 0
            layout = "NCHW"
        oc = shape[0] * (shape[5] if layout == "NCHWc" else 1)
        gamma, beta, mean, var = bn.inputs[1:]
        eps = {"epsilon": bn.resolved["epsilon"]}
        tag = f"@bn_{bn.name}"
        zero = self.zeros(f"{bn.name}@zeros", oc)
        # The weights with the output channel as the normalised axis: w * s.
        if layout == "NCHWc":
            flat = [1, shape[0], shape[1] * shape[2] * shape[3] * shape[4], 1, shape[5]]
        else:
            flat = [1, shape[0], shape[1] * shape[2] * shape[3]]
        names = [f"{w}{tag}@flat", f"{w}{tag}@scaled", f"{w}{tag}"]
        self.emit(names[0], "reshape", [w], [names[0]], {"shape": flat}, conv)
        self.emit(names[1], "batch_norm", [names[0], gamma, zero, zero, var],
                  [names[1]], dict(eps, layout=layout), bn)
        self.emit(names[2], "reshape", [names[1]], [names[2]], {"shape": list(shape)}, conv)
        # The bias: (b - mean) * s + beta is batch_norm itself on [1, OC].
        b = inputs[2] if len(inputs) == 3 else zero
        bias = [f"{conv.name}{tag}@bias_flat", f"{conv.name}{tag}@bias_scaled",
                f"{conv.name}{tag}@bias"]
        self.emit(bias[0], "reshape", [b], [bias[0]], {"shape": [1, oc]}, conv)
        self.emit(bias[1], "batch_norm", [bias[0], gamma, beta, mean, var], [bias[1]],
                  dict(eps, layout="NCHW"), bn)
        self.emit(bias[2], "reshape", [bias[1]], [bias[2]], {"shape": [oc]}, conv)
        return [inputs[0], names[2], bias[2]]

    def bn_foldable(self, conv: Op, bn: Op) -> bool:
        return (conv.inputs[1] in self.params
                and all(t in self.params for t in bn.inputs[1:])
                and bn.resolved["layout"] == conv.resolved["layout"])

    def conv(self, op: Op) -> None:
        inputs, attrs, out = list(op.inputs), dict(op.attrs), op.outputs[0]
        # conv3d (NCDHW) takes the residual and the ReLU, not the rest.
        plain = op.op == "conv2d"
        j = self.sole_consumer(out, "batch_norm") if plain else None
        if j is not None and self.bn_foldable(op, self.g.ops[j]):
            bn = self.g.ops[j]
            inputs = self.fold_bn(op, bn, inputs)
            out = bn.outputs[0]
            self.absorbed[j] = op.name
        done = op.resolved["relu"] or op.resolved.get("act") is not None  # epilogue ends
        j = self.residual(out) if len(inputs) < 4 and not done else None
        if j is not None:
            add = self.g.ops[j]
            if len(inputs) == 2:
                oc = self.g.shapes[out][1] * (self.g.shapes[out][4] if plain and len(
                    self.g.shapes[out]) == 5 else 1)
                inputs.append(self.zeros(f"{op.name}@zero_bias", oc))
            inputs.append(add.inputs[1] if add.inputs[0] == out else add.inputs[0])
            out = add.outputs[0]
            self.absorbed[j] = op.name
        j = self.sole_consumer(out, "relu")
        if j is not None and not done:
            attrs["relu"] = True
            out = self.g.ops[j].outputs[0]
            self.absorbed[j] = op.name
        j = self.sole_consumer(out, "clip") if plain and self.clamps(op) else None
        if j is not None and not done and "relu" not in attrs:
            lo, hi = self.g.ops[j].resolved["min"], self.g.ops[j].resolved["max"]
            if lo == 0.0 and hi > 0.0:
                attrs["relu"] = True
                if hi != float("inf"):
                    attrs["relu_max"] = hi
                out = self.g.ops[j].outputs[0]
                self.absorbed[j] = op.name
        for act in ACTS if plain else ():  # conv3d has no act epilogue
            j = self.sole_consumer(out, act)
            if j is not None and not done and "relu" not in attrs and "act" not in attrs:
                attrs["act"] = act
                out = self.g.ops[j].outputs[0]
                self.absorbed[j] = op.name
        self.emit(op.name, op.op, inputs, [out], attrs, op)

    def clamps(self, op: Op) -> bool:
        """A dense (group 1) or depthwise (group = C) conv2d, whose kernels
        clamp (ReLU6); other grouped convs do not."""
        group = int(op.resolved.get("group") or 1)
        x = self.g.shapes[op.inputs[0]]
        channels = x[1] * (x[4] if len(x) == 5 else 1)
        return group == 1 or group == channels

    def run(self) -> List[Op]:
        for i in self.g.order:
            if i in self.absorbed:
                continue
            op = self.g.ops[i]
            if op.op in ("conv2d", "conv3d"):
                self.conv(op)
            else:
                self.emit(op.name, op.op, op.inputs, op.outputs, op.attrs, op)
        return self.ops


def fuse_conv(graph: Graph) -> Graph:
    """A new validated Graph computing the same outputs as `graph` with its
    CONVs' batch norms folded and ReLUs / activations fused; `graph` itself when nothing
    fuses."""
    from hwtune.graph.passes.layout import ensure_validated
    from hwtune.graph.validate import validate_graph
    graph = ensure_validated(graph)
    fuser = _Fuser(graph)
    ops = fuser.run()
    if not fuser.absorbed:
        return graph
    new = Graph(name=graph.name, inputs=list(graph.inputs),
                params=list(graph.params) + fuser.new_params, ops=ops,
                outputs=list(graph.outputs), seed=graph.seed, description=graph.description,
                vars=dict(graph.vars), source=graph.source)
    try:
        validate_graph(new)
    except GraphError as exc:
        # Every rewrite above keeps shapes by construction: a failure is a bug.
        raise UsageError(f"the fusion pass built an invalid graph: {exc}") from None
    setattr(new, _FUSED_ATTR, {graph.ops[i].name: conv for i, conv in fuser.absorbed.items()})
    return new
