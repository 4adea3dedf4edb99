"""A model.json training step in PyTorch eager: the peer of a training graph
(hwtune.graph.autodiff) for gradient checks, loss curves and timing.

The forward pass is torch_graph's op table on the same weights and inputs,
batch_norm in training mode when the step uses batch statistics, the loss
the one the training graph fuses (cross-entropy on the logits a
final softmax reads, or mean squared error, summed over the scored outputs),
then loss.backward() and torch.optim.SGD / Adam with the same settings: what
a PyTorch user's training loop runs. torch is imported on first use only.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from hwtune.errors import UsageError


class TorchTrainer:
    """graph: the forward model; train: its training graph (for the names of
    the loss targets and the optimizer settings); values: the training
    graph's inputs (weights, model inputs, targets)."""

    def __init__(self, graph, train, values: Dict[str, np.ndarray], threads: int = 1,
                 dtype: str = "float32"):
        import torch
        from hwtune.compare.torch_graph import _ops
        from hwtune.graph.autodiff import trainable_params
        self.torch = torch
        torch.set_num_threads(threads)
        self.dt = getattr(torch, dtype)
        self.graph, self.train = graph, train
        table = _ops(torch)
        for op in graph.ops:
            if op.op not in table or (op.resolved or {}).get("layout") not in (None, "NCHW"):
                raise UsageError(f'op "{op.name}" ({op.op}) has no PyTorch form here')
        from hwtune.graph.reference import init_params
        fixed = {n: v for n, v in init_params(graph).items()}
        trainable = trainable_params(graph)
        self.weights = {n: torch.tensor(np.asarray(values[n]), dtype=self.dt, requires_grad=True)
                        for n in trainable}
        self.consts = {n: torch.tensor(np.asarray(fixed[n]), dtype=self.dt)
                       for n in fixed if n not in self.weights}
        self.consts.update({t.name: torch.tensor(np.asarray(values[t.name]), dtype=self.dt)
                            for t in graph.inputs})
        # running statistics: state of a batch-statistics step (its inputs),
        # updated in place by model.train()'s batch_norm
        self.stats = {n: torch.tensor(np.asarray(values[n]), dtype=self.dt)
                      for n in fixed if n not in self.weights and n in values}
        upd = [op for op in train.ops if op.op == "batch_norm_stats_update"]
        if upd:
            momentum = upd[0].resolved["momentum"]
            table = dict(table, batch_norm=lambda g, op, a, x: torch.nn.functional.batch_norm(
                x[0], self.stats[op.inputs[3]], self.stats[op.inputs[4]], x[1], x[2],
                training=True, momentum=momentum, eps=a["epsilon"]))
        self.table = table
        self.loss_ops = [op for op in train.ops if op.op in ("softmax_cross_entropy",
                                                              "mse_loss")]
        self.targets = {op.inputs[1]: torch.tensor(np.asarray(values[op.inputs[1]]),
                                                   dtype=self.dt) for op in self.loss_ops}
        self.opt = self._optimizer()

    def _optimizer(self):
        upd = next((op for op in self.train.ops if op.op in ("sgd_update", "adam_update")), None)
        params = list(self.weights.values())
        if upd is None:
            return None
        a = upd.resolved
        if upd.op == "sgd_update":
            return self.torch.optim.SGD(params, lr=a["lr"], momentum=a["momentum"],
                                        weight_decay=a["weight_decay"])
        return self.torch.optim.Adam(params, lr=a["lr"], betas=(a["beta1"], a["beta2"]),
                                     eps=a["epsilon"])

    def loss(self):
        env = {**self.consts, **self.weights}
        g = self.graph
        for i in g.order:
            op = g.ops[i]
            out = self.table[op.op](g, op, op.resolved, [env[n] for n in op.inputs])
            if isinstance(out, list):
                env.update(zip(op.outputs, out))
            else:
                env[op.outputs[0]] = out
        total = None
        for op in self.loss_ops:
            pred, target = env[op.inputs[0]], self.targets[op.inputs[1]]
            if op.op == "softmax_cross_entropy":
                part = -(target * self.torch.log_softmax(pred, dim=1)).sum() / pred.shape[0]
            else:
                part = ((pred - target) ** 2).mean()
            total = part if total is None else total + part
        return total

    def gradients(self) -> Dict[str, np.ndarray]:
        for w in self.weights.values():
            w.grad = None
        self.loss().backward()
        return {n: w.grad.detach().numpy().copy() for n, w in self.weights.items()}

    def step(self) -> float:
        """One training step; returns the loss before the update."""
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss()
        loss.backward()
        self.opt.step()
        return float(loss.detach())

    def curve(self, steps: int) -> List[float]:
        return [self.step() for _ in range(steps)]


def version() -> Optional[str]:
    try:
        import torch
    except ImportError:
        return None
    return torch.__version__.split("+")[0]
