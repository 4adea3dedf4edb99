"""Reverse-mode differentiation of a model.json graph into one training step.

The training graph holds the forward ops unchanged, a fused loss on the
chosen output, the backward ops (reverse topological order, one gradient
rule per forward op, gradients of a tensor used several times summed by one
`sum` op) and one optimizer update per trainable parameter. It is an
ordinary graph: the arena plans the activations the backward pass keeps like
any other tensor, and every scheduler and the tuner run it as they run a
forward graph.

Inputs of the step: the model's inputs, its trainable parameters (inputs,
since they change every step), the loss target (`labels` or
`target`) and the optimizer state (`<param>.momentum`, or `<param>.m`,
`<param>.v` and `adam.step`), zeros (step 1) initially. Outputs: `loss`, then
`<param>.new` and the new state (`<state>.new`) in parameter order; feeding
each `.new` tensor back as its source gives the next step.
"""

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from hwtune.graph.autodiff.blocked import via_nchw
from hwtune.graph.autodiff.rules import RULES, NoRule
from hwtune.graph.errors import fail
from hwtune.graph.ops import numel
from hwtune.graph.model import Graph, Op, Tensor
from hwtune.graph.naming import fresh_name
from hwtune.graph.passes.layout_rules import layout_name

LOSSES = ("cross_entropy", "mse")
# "none": the step outputs the loss and each parameter's gradient
# (`<param>.grad`) instead of updating (gradient checks, external optimizers).
OPTIMIZERS = ("sgd", "adam", "none")
# Defaults of PyTorch's torch.optim.SGD(momentum=0.9) and Adam, so that the
# curves compare with the same numbers.
DEFAULTS = {"none": {}, "sgd": {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.0},
            "adam": {"lr": 0.001, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}}
LOSS_NAME = "loss"


@dataclass
class TrainSpec:
    loss: str = "cross_entropy"
    optimizer: str = "sgd"
    output: Optional[str] = None          # the model output the loss reads (default: first)
    hyper: Optional[Dict[str, float]] = None  # lr, momentum, ... over DEFAULTS
    # batch_norm: "batch" normalises by the batch's statistics, as PyTorch's
    # model.train() does (batch_norm_train); "running" keeps the model's
    # stored mean and var, as in inference (fine-tuning with frozen
    # statistics, model.eval()).
    batch_norm: str = "batch"
    # PyTorch's BatchNorm momentum: the batch's weight in the running averages
    bn_momentum: float = 0.1


BATCH_NORM_MODES = ("batch", "running")


class Emitter:
    """Appends backward ops with fresh names; knows every tensor's shape."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.ops: List[Op] = []
        self.shapes: Dict[str, tuple] = dict(graph.shapes)
        self.taken = set(self.shapes) | {op.name for op in graph.ops}
        self.prefix = "grad"
        self.current = ""  # the forward op whose rule is emitting

    def fresh(self, base: str) -> str:
        return fresh_name(base, self.taken, ".")

    def shape(self, name: str) -> tuple:
        return self.shapes[name]

    def op(self, op_type: str, inputs: Sequence[str], n_out: int = 1, names=None, **attrs):
        from hwtune.graph import ops as oplib
        spec = oplib.get(op_type)
        base = self.fresh(f"{self.prefix}/{self.current}/{op_type}")
        outs = ([self.fresh(n) for n in names] if names else [base] if n_out == 1
                else [self.fresh(f"{base}:{i}") for i in range(n_out)])
        resolved = spec.normalize_attrs(attrs)
        shapes = spec.infer([self.shapes[n] for n in inputs], resolved, n_out)
        for n, s in zip(outs, shapes):
            self.shapes[n] = tuple(s)
        self.ops.append(Op(base, op_type, list(inputs), outs, attrs))
        return outs[0] if n_out == 1 else outs


def trainable_params(graph: Graph) -> List[str]:
    """Params that get an update: all but the statistics batch_norm reads."""
    stats = {n for op in graph.ops if op.op == "batch_norm" for n in op.inputs[3:5]}
    return [t.name for t in graph.params if t.name not in stats]


def _needs_grad(graph: Graph, sources) -> set:
    """Tensors that depend on a trainable parameter (forward reachability)."""
    live = set(sources)
    for i in graph.order:
        op = graph.ops[i]
        if any(n in live for n in op.inputs):
            live.update(op.outputs)
    return live


def _loss(e: Emitter, graph: Graph, spec: TrainSpec, inputs: List[Tensor]):
    """Emit the fused loss of each scored output (all outputs, or
    spec.output) and their sum; returns (loss name, {tensor: its gradient})."""
    scored = [spec.output] if spec.output else list(graph.outputs)
    for y in scored:
        if y not in graph.outputs:
            fail("output", f'"{y}" is not an output of the model (outputs: '
                           f'{", ".join(graph.outputs)})')
    e.current = "loss"
    one = len(scored) == 1
    losses, seeds = [], {}
    for y in scored:
        shape = graph.shapes[y]
        tag = "" if one else f":{y}"
        if spec.loss == "cross_entropy":
            producer = next((op for op in graph.ops if y in op.outputs), None)
            logits = y
            if producer is not None and producer.op == "softmax" and (
                    producer.resolved["axis"] in (-1, len(shape) - 1)):
                logits = producer.inputs[0]  # fused softmax + cross-entropy on the logits
            if len(graph.shapes[logits]) != 2:
                fail("loss", f'cross_entropy needs [N, C] logits; "{logits}" is '
                             f"{list(graph.shapes[logits])} (use --loss mse)")
            lshape = tuple(graph.shapes[logits])
            label = Tensor(e.fresh(f"labels{tag}"), lshape,
                           init={"init": "constant", "value": 1.0 / lshape[1]})
            op_type, pred = "softmax_cross_entropy", logits
        else:
            label = Tensor(e.fresh(f"target{tag}"), tuple(shape), init={"init": "zeros"})
            op_type, pred = "mse_loss", y
        inputs.append(label)
        e.shapes[label.name] = label.shape
        loss, d = e.op(op_type, [pred, label.name], n_out=2,
                       names=[f"{LOSS_NAME}{tag}", f"grad/{pred}"])
        losses.append(loss)
        seeds[pred] = d
    if not one:
        total = e.fresh(LOSS_NAME)
        e.shapes[total] = (1,)
        e.ops.append(Op(total, "sum", losses, [total]))
        return total, seeds
    return losses[0], seeds


def _backward(e: Emitter, graph: Graph, seeds: Dict[str, str], live: set) -> Dict[str, str]:
    """Gradients of every live tensor the loss depends on."""
    pending: Dict[str, List[str]] = {t: [g] for t, g in seeds.items()}

    def total(name: str) -> Optional[str]:
        parts = pending.get(name)
        if not parts:
            return None
        if len(parts) > 1:
            e.current = name
            pending[name] = [e.op("sum", parts)]
        return pending[name][0]

    for i in reversed(graph.order):
        op = graph.ops[i]
        dys = [total(n) for n in op.outputs]
        if all(d is None for d in dys):
            continue
        wants = [n in live for n in op.inputs]
        if not any(wants):
            continue
        fn = RULES.get(op.op)
        where = op.loc or op.name
        if fn is None:
            fail(where, f'op "{op.name}": {op.op} has no gradient rule (rules exist for '
                        f'{", ".join(sorted(RULES))})')
        e.current = op.name
        dys = [d if d is not None else e.op("affine", [n], scale=0.0, shift=0.0)
               for d, n in zip(dys, op.outputs)]
        try:
            grads = (via_nchw(e, op, dys, wants, fn)
                     if (op.resolved or {}).get("layout") == "NCHWc" else fn(e, op, dys, wants))
        except NoRule as exc:
            fail(where, f'op "{op.name}": no gradient rule for {exc}')
        for name, g, w in zip(op.inputs, grads, wants):
            if g is not None and w:
                pending.setdefault(name, []).append(g)
    return {n: total(n) for n in list(pending)}


def _optimizer(e: Emitter, spec: TrainSpec, params: List[Tensor], grads: Dict[str, str],
               inputs: List[Tensor], outputs: List[str]) -> None:
    hyper = dict(DEFAULTS[spec.optimizer])
    for k, v in (spec.hyper or {}).items():
        if k not in hyper:
            fail(k, f"{spec.optimizer} has no setting {k} (settings: {', '.join(hyper)})")
        hyper[k] = float(v)
    step = None
    if spec.optimizer == "none":
        outputs.extend(grads[p.name] for p in params if grads.get(p.name))
        return
    if spec.optimizer == "adam":
        step = e.fresh("adam.step")
        inputs.append(Tensor(step, (1,), init={"init": "ones"}))
        e.shapes[step] = (1,)
    for p in params:
        g = grads.get(p.name)
        if g is None:
            continue
        e.current = p.name
        states = ["momentum"] if spec.optimizer == "sgd" else ["m", "v"]
        names = []
        for s in states:
            names.append(e.fresh(f"{p.name}.{s}"))
            inputs.append(Tensor(names[-1], tuple(p.shape), init={"init": "zeros"}))
            e.shapes[names[-1]] = tuple(p.shape)
        op_type = "sgd_update" if spec.optimizer == "sgd" else "adam_update"
        ins = [p.name, g] + names + ([step] if step else [])
        outs = [e.fresh(f"{n}.new") for n in [p.name] + names]
        from hwtune.graph import ops as oplib
        resolved = oplib.get(op_type).normalize_attrs(hyper)
        for o in outs:
            e.shapes[o] = tuple(p.shape)
        e.ops.append(Op(e.fresh(f"update/{p.name}"), op_type, ins, outs, dict(resolved)))
        outputs.extend(outs)
    if step:
        e.current = "adam"
        new = e.fresh(f"{step}.new")
        e.ops.append(Op(new, "affine", [step], [new], {"scale": 1.0, "shift": 1.0}))
        e.shapes[new] = (1,)
        outputs.append(new)


def _name_gradients(e: Emitter, graph: Graph, grads: Dict[str, str], params) -> None:
    """Give each parameter's gradient the name `<param>.grad` (a tensor that
    is two parameters' gradient, as in `sum`, or a forward tensor, gets a
    copy for the second name)."""
    rename, copies = {}, []
    for p in params:
        g = grads.get(p)
        if g is None:
            continue
        name = e.fresh(f"{p}.grad")
        e.shapes[name] = e.shapes[g]
        if g in graph.shapes or g in rename:
            copies.append(Op(name, "reshape", [g], [name], {"shape": list(e.shapes[g])}))
        else:
            rename[g] = name
        grads[p] = name
    for op in e.ops:
        op.inputs = [rename.get(n, n) for n in op.inputs]
        op.outputs = [rename.get(n, n) for n in op.outputs]
        if len(op.outputs) == 1 and op.name in rename:
            op.name = rename[op.name]
    for op in copies:
        op.inputs = [rename.get(n, n) for n in op.inputs]
    e.ops.extend(copies)


def _as_input(t: Tensor) -> Tensor:
    """A trainable parameter as an input of the step: its value changes
    every step, so the engine must neither fold ops on it nor prepack it.
    Keeps the parameter's initial values (the default scale of a param, not
    of an input)."""
    init = dict(t.init)
    if init.get("init", "uniform") in ("uniform", "normal") and "scale" not in init \
            and "low" not in init and "data" not in init:
        from hwtune.graph.reference import default_scale
        init["scale"] = default_scale(t.shape, True)
    return Tensor(t.name, t.shape, t.dtype, init)


def _batch_statistics(graph: Graph):
    """The forward graph with each batch_norm in training mode:
    batch_norm_train on (x, gamma, beta) (an NCHW[x]c one between layout
    transforms to NCHW and back), whose extra outputs (the batch's
    mean and invstd) the backward pass and the running statistics' update
    read. Returns it and, per such op, (mean, var, batch mean, batch
    invstd, elements per channel): the running mean and var leave the
    forward graph's params to become state of the step."""
    from dataclasses import replace
    ops, stats = [], []
    taken = set(graph.shapes) | {op.name for op in graph.ops}
    for i in graph.order:
        o = graph.ops[i]
        attrs = dict(o.attrs)
        if o.op == "batch_norm":
            y = o.outputs[0]
            outs = [y, f"{y}/batch_mean", f"{y}/batch_invstd"]
            attrs.pop("layout", None)
            shape = graph.shapes[o.inputs[0]]
            x, blocked = o.inputs[0], o.resolved.get("layout", "NCHW") == "NCHWc"
            if blocked:
                # batch_norm_train runs in NCHW: x [N, C/b, H, W, b] goes
                # there and its output comes back to the same blocks.
                b = shape[4]
                shape = (shape[0], shape[1] * b) + tuple(shape[2:4])
                x = fresh_name(f"{x}/nchw", taken, ".")
                outs[0] = fresh_name(f"{y}/nchw", taken, ".")
                ops.append(Op(fresh_name(f"{o.name}/to_nchw", taken, "."), "layout_transform",
                              [o.inputs[0]], [x], {"src": layout_name(b), "dst": "NCHW"},
                              loc=o.loc))
            count = shape[0] * (numel(shape[2:]) if len(shape) > 2 else 1)
            if count < 2:  # PyTorch refuses it too: the output would be beta, dx zero
                fail(o.loc or o.name, f'batch_norm "{o.name}" sees one value per channel '
                                      f"({list(shape)}): batch statistics need at least two "
                                      "(a larger batch, or --batch-norm running)")
            stats.append((o.inputs[3], o.inputs[4], outs[1], outs[2], count,
                          o.resolved["epsilon"]))
            ops.append(Op(o.name, "batch_norm_train", [x] + list(o.inputs[1:3]), outs, attrs,
                          loc=o.loc))
            if blocked:
                ops.append(Op(fresh_name(f"{o.name}/to_nchwc", taken, "."), "layout_transform",
                              [outs[0]], [y], {"src": "NCHW", "dst": layout_name(b)},
                              loc=o.loc))
        else:
            ops.append(Op(o.name, o.op, list(o.inputs), list(o.outputs), attrs, loc=o.loc))
    if not stats:
        return graph, []
    names = {n for s in stats for n in s[:2]}
    params = [t for t in graph.params if t.name not in names]
    out = replace(graph, ops=ops, params=params, shapes={}, order=[])
    from hwtune.graph.validate import validate_graph
    validate_graph(out)
    return out, stats


def _running_statistics(e: Emitter, original: Graph, stats, momentum: float,
                        inputs: List[Tensor], outputs: List[str]) -> None:
    """Each running mean and var becomes an input of the step (state, its
    initial value the model's), updated as PyTorch's model.train() does:
    outputs `<mean>.new` and `<var>.new`."""
    by_name = {t.name: t for t in original.params}
    done = set()
    for mean, var, bmean, binv, count, eps in stats:
        e.current = mean
        if mean in done or var in done:
            fail(mean, f'batch_norm statistics "{mean}"/"{var}" are shared by two batch_norm '
                       "ops: a training step cannot update them twice")
        done.update((mean, var))
        inputs.extend(_as_input(by_name[n]) for n in (mean, var))
        outs = [e.fresh(f"{mean}.new"), e.fresh(f"{var}.new")]
        for o in outs:
            e.shapes[o] = tuple(by_name[mean].shape)
        e.ops.append(Op(e.fresh(f"update/{mean}"), "batch_norm_stats_update",
                        [mean, var, bmean, binv], outs,
                        {"momentum": momentum, "epsilon": eps, "count": count}))
        outputs.extend(outs)


def _prune(ops: List[Op], outputs: Sequence[str]) -> List[Op]:
    """Drop ops nothing reads (the forward softmax the fused loss replaces)."""
    needed = set(outputs)
    keep = []
    for op in reversed(ops):
        if any(n in needed for n in op.outputs):
            keep.append(op)
            needed.update(op.inputs)
    return keep[::-1]


def training_graph(graph: Graph, spec: Optional[TrainSpec] = None) -> Graph:
    """One training step of a validated graph, validated."""
    spec = spec or TrainSpec()
    if spec.loss not in LOSSES:
        fail("loss", f'unknown loss "{spec.loss}" (choose {", ".join(LOSSES)})')
    if spec.optimizer not in OPTIMIZERS:
        fail("optimizer", f'unknown optimizer "{spec.optimizer}" (choose '
                          f'{", ".join(OPTIMIZERS)})')
    if spec.batch_norm not in BATCH_NORM_MODES:
        fail("batch_norm", f'unknown batch_norm mode "{spec.batch_norm}" (choose '
                           f'{", ".join(BATCH_NORM_MODES)})')
    if not graph.order and graph.ops:
        from hwtune.graph.validate import validate_graph
        validate_graph(graph)
    original, stats = graph, []
    if spec.batch_norm == "batch":
        graph, stats = _batch_statistics(graph)
    e = Emitter(graph)
    inputs = [Tensor(t.name, t.shape, t.dtype, dict(t.init)) for t in graph.inputs]
    trainable = trainable_params(graph)
    live = _needs_grad(graph, trainable)
    loss, seeds = _loss(e, graph, spec, inputs)
    grads = _backward(e, graph, seeds, live)
    if not any(grads.get(p) for p in trainable):
        fail("model", "the loss depends on no parameter: nothing to train")
    _name_gradients(e, graph, grads, trainable)
    outputs = [loss]
    _optimizer(e, spec, [t for t in graph.params if t.name in trainable], grads, inputs,
               outputs)
    _running_statistics(e, original, stats, spec.bn_momentum, inputs, outputs)
    forward = [Op(o.name, o.op, list(o.inputs), list(o.outputs), dict(o.attrs))
               for o in (graph.ops[i] for i in graph.order)]
    weights = [_as_input(t) for t in graph.params if t.name in trainable]
    n_in = len(graph.inputs)
    train = Graph(name=f"{graph.name}.train", description=(
                      f"training step of {graph.name}: {spec.loss} loss, {spec.optimizer}"),
                  inputs=inputs[:n_in] + weights + inputs[n_in:],
                  params=[Tensor(t.name, t.shape, t.dtype, dict(t.init)) for t in graph.params
                          if t.name not in trainable],
                  ops=_prune(forward + e.ops, outputs), outputs=outputs, seed=graph.seed)
    for i, t in enumerate(train.inputs):
        t.loc = f"inputs[{i}]"
    for i, t in enumerate(train.params):
        t.loc = f"params[{i}]"
    for i, o in enumerate(train.ops):
        o.loc = f"ops[{i}]"
    from hwtune.graph.validate import validate_graph
    validate_graph(train)
    return train


def is_training_graph(graph) -> bool:
    """Whether graph is a training step (training_graph's): it holds an
    optimizer update or a fused loss."""
    return any(op.op in ("sgd_update", "adam_update", "softmax_cross_entropy", "mse_loss")
               for op in graph.ops)
