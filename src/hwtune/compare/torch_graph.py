"""Run a model.json graph in PyTorch eager: the PyTorch side of `hwtune
compare`.

Each hwtune op is one PyTorch call (torch.nn.functional / ATen) on the same
weights, in the graph's topological order, under torch.inference_mode():
what the model's own nn.Module.forward would run, op for op, in eager mode
(a matmul with bias is one addmm, as nn.Linear; conv2d with bias one
F.conv2d). An imported ONNX model runs as its imported graph, the same
nodes the file describes with shape computations folded. No torch.compile
and no fusion beyond what these calls do: PyTorch as most users run it.
"""

from __future__ import annotations

import functools
from typing import Dict

import numpy as np

from hwtune.errors import UsageError
from hwtune.graph.ops.conv import conv_pads


def _ops(torch):
    F = torch.nn.functional

    def matmul(g, op, a, x):
        A = x[0].t() if a["transpose_a"] else x[0]
        B = x[1].t() if a["transpose_b"] else x[1]
        return torch.addmm(x[2], A, B) if len(x) == 3 else torch.mm(A, B)

    def asymmetric(a):
        """F.pad's (left, right, top, bottom) when padding_end differs from
        padding (PyTorch's ops pad symmetrically), else None."""
        pt, pl, pb, pr = conv_pads(a)
        return None if (pt, pl) == (pb, pr) else (pl, pr, pt, pb)

    def conv(g, op, a, x):
        b = x[2] if len(x) >= 3 else None
        pads, groups = asymmetric(a), int(a.get("group") or 1)
        if pads is None:
            y = F.conv2d(x[0], x[1], b, a["stride"], a["padding"], a["dilation"], groups)
        else:
            # As PyTorch's own padding="same" does for even kernels: pad, then convolve.
            y = F.conv2d(F.pad(x[0], pads), x[1], b, a["stride"], 0, a["dilation"], groups)
        # The fused epilogue: residual, ReLU, ReLU6's clamp, SiLU / HardSwish.
        y = y + x[3] if len(x) == 4 else y
        y = torch.relu(y) if a.get("relu") else y
        y = torch.clamp(y, max=a["relu_max"]) if a.get("relu_max") is not None else y
        act = {"silu": F.silu, "hard_swish": F.hardswish}.get(a.get("act"))
        return act(y) if act is not None else y

    def conv3d(g, op, a, x):
        b = x[2] if len(x) >= 3 else None
        begin = tuple(a["padding"])
        end = tuple(a["padding_end"]) if a["padding_end"] is not None else begin
        if begin == end:
            y = F.conv3d(x[0], x[1], b, a["stride"], begin, a["dilation"])
        else:  # F.pad lists the last axis first: (left, right, top, bottom, front, back)
            pads = (begin[2], end[2], begin[1], end[1], begin[0], end[0])
            y = F.conv3d(F.pad(x[0], pads), x[1], b, a["stride"], 0, a["dilation"])
        y = y + x[3] if len(x) == 4 else y  # the fused residual
        return torch.relu(y) if a["relu"] else y

    def conv_transpose(g, op, a, x):
        b = x[2] if len(x) == 3 else None
        pt, pl, pb, pr = conv_pads(a)
        if (pt, pl) == (pb, pr):
            return F.conv_transpose2d(x[0], x[1], b, a["stride"], a["padding"],
                                      a["output_padding"], 1, a["dilation"])
        # Asymmetric: the full output, cropped (and extended) to the shape.
        y = F.conv_transpose2d(x[0], x[1], None, a["stride"], 0, 0, 1, a["dilation"])
        oh, ow = g.shapes[op.outputs[0]][2:]
        y = F.pad(y, (0, max(0, pl + ow - y.shape[3]), 0, max(0, pt + oh - y.shape[2])))
        y = y[:, :, pt:pt + oh, pl:pl + ow]
        return y if b is None else y + b.reshape(1, -1, 1, 1)

    def pool(g, op, a, x):
        stride = a["stride"] if a["stride"] is not None else a["kernel"]
        pads = asymmetric(a)
        if pads is None and a["mode"] == "max":
            return F.max_pool2d(x[0], a["kernel"], stride, a["padding"],
                                ceil_mode=a["ceil_mode"])
        if pads is None:
            return F.avg_pool2d(x[0], a["kernel"], stride, a["padding"],
                                ceil_mode=a["ceil_mode"],
                                count_include_pad=a["count_include_pad"])
        # Asymmetric: pad explicitly (-inf never wins a max); an average is
        # the window sum over the count of positions its divisor counts.
        if a["mode"] == "max":
            return F.max_pool2d(F.pad(x[0], pads, value=float("-inf")), a["kernel"], stride,
                                ceil_mode=a["ceil_mode"])
        xp = F.pad(x[0], pads)
        mask = torch.ones_like(xp[:1, :1]) if a["count_include_pad"] else \
            F.pad(torch.ones_like(x[0][:1, :1]), pads)
        sums = [F.avg_pool2d(t, a["kernel"], stride, ceil_mode=a["ceil_mode"],
                             divisor_override=1) for t in (xp, mask)]
        return sums[0] / sums[1]

    def global_pool(g, op, a, x):
        if a["mode"] == "max":
            return F.adaptive_max_pool2d(x[0], 1)
        return F.adaptive_avg_pool2d(x[0], 1)

    def split(g, op, a, x):
        sizes = [g.shapes[o][a["axis"]] for o in op.outputs]
        return list(torch.split(x[0], sizes, dim=a["axis"]))

    def slice_(g, op, a, x):
        axis = a["axis"] % x[0].dim()
        b, e, _ = slice(a["begin"], a["end"]).indices(x[0].shape[axis])
        return x[0].narrow(axis, b, e - b)

    def pad(g, op, a, x):
        rank = x[0].dim()
        # F.pad takes (begin, end) pairs from the last axis backwards.
        widths = [w for i in reversed(range(rank)) for w in (a["pads"][i], a["pads"][i + rank])]
        return F.pad(x[0], widths, value=a["value"])

    def reduce_sum(g, op, a, x):
        axes = list(a["axes"]) or list(range(x[0].dim()))
        return torch.sum(x[0], axes, keepdim=a["keepdims"]).reshape(g.shapes[op.outputs[0]])

    def out_shape(g, op, a, x):
        return x[0].reshape(g.shapes[op.outputs[0]])

    def clip(g, op, a, x):
        lo, hi = (v if np.isfinite(v) else None for v in (a["min"], a["max"]))
        return torch.clamp(x[0], lo, hi)

    def layer_norm(g, op, a, x):
        return F.layer_norm(x[0], tuple(g.shapes[op.inputs[1]]), x[1],
                            x[2] if len(x) == 3 else None, a["epsilon"])

    def transpose(g, op, a, x):
        perm = a["perm"] if a["perm"] is not None else list(range(x[0].dim()))[::-1]
        return x[0].permute(*perm)

    def lstm_cell(g, op, a, x):
        b = x[0].shape[0]
        z = x[0]
        if len(x) > 2:
            z = z + x[2][a["x_row"]:a["x_row"] + b]
        if len(x) > 3:
            z = z + x[3]
        i, f, gg, o = z.chunk(4, dim=1)
        c = torch.sigmoid(f) * x[1] + torch.sigmoid(i) * torch.tanh(gg)
        return [torch.sigmoid(o) * torch.tanh(c), c]

    # comparisons, logic, indices: bool and int as float32 values (1.0 / 0.0)
    def pred(fn):
        return lambda g, op, a, x: fn(*x).to(torch.float32)

    def take(g, op, a, x):
        n = x[0].shape[a["axis"]]
        idx = torch.trunc(x[1]).long().remainder(n)
        return x[0].index_select(a["axis"], idx.reshape(-1)).reshape(
            g.shapes[op.outputs[0]])

    def cumsum(g, op, a, x):
        v = x[0].flip(a["axis"]) if a["reverse"] else x[0]
        s = torch.cumsum(v, a["axis"])
        if a["exclusive"]:
            s = s - v
        return s.flip(a["axis"]) if a["reverse"] else s

    indexing = {
        "equal": pred(torch.eq), "not_equal": pred(torch.ne), "less": pred(torch.lt),
        "less_equal": pred(torch.le), "greater": pred(torch.gt),
        "greater_equal": pred(torch.ge), "logical_and": pred(torch.logical_and),
        "logical_or": pred(torch.logical_or), "logical_xor": pred(torch.logical_xor),
        "logical_not": pred(torch.logical_not),
        "trunc": lambda g, op, a, x: torch.trunc(x[0]),
        "take": take, "cumsum": cumsum,
        "gather_elements": lambda g, op, a, x: torch.gather(
            x[0], a["axis"], torch.trunc(x[1]).long().remainder(x[0].shape[a["axis"]])),
        "expand": lambda g, op, a, x: x[0].expand(*g.shapes[op.outputs[0]]).contiguous(),
        "where": lambda g, op, a, x: torch.where(x[0] != 0, x[1], x[2]),
        "attention": lambda g, op, a, x: torch.matmul(torch.softmax(
            torch.matmul(x[0], x[1]) * a["scale"] + (x[3] if len(x) > 3 else 0.0), -1), x[2]),
    }
    def resize(g, op, a, x):
        # The reference's own index and weight tables (graph/ops/resize.py),
        # applied with index_select and the same two blends in torch ops.
        from hwtune.graph.ops import resize as R
        n, c, h, w = x[0].shape
        oh, ow = a["size"]
        sh = a["scale_h"] if a["scale_h"] is not None else oh / h
        sw = a["scale_w"] if a["scale_w"] is not None else ow / w
        t = a["coordinate_transformation_mode"]
        idx = lambda v: torch.from_numpy(np.asarray(v, np.int64))  # noqa: E731
        if a["mode"] == "nearest":
            iy = idx(R.nearest_index(h, oh, sh, t, a["nearest_mode"]))
            ix = idx(R.nearest_index(w, ow, sw, t, a["nearest_mode"]))
            return x[0].index_select(2, iy).index_select(3, ix)
        y0, y1, wy = R.linear_taps(h, oh, sh, t)
        x0, x1, wx = R.linear_taps(w, ow, sw, t)
        r0, r1 = x[0].index_select(2, idx(y0)), x[0].index_select(2, idx(y1))
        tt = r0 + torch.from_numpy(wy).reshape(-1, 1) * (r1 - r0)
        a0, a1 = tt.index_select(3, idx(x0)), tt.index_select(3, idx(x1))
        return a0 + torch.from_numpy(wx) * (a1 - a0)

    def argmax(g, op, a, x):
        ax = a["axis"]
        i = (x[0].size(ax) - 1 - torch.argmax(x[0].flip(ax), ax)) if a["select_last_index"] \
            else torch.argmax(x[0], ax)
        return i.float().reshape(g.shapes[op.outputs[0]])

    return {
        **indexing,
        "matmul": matmul,
        "resize": resize,
        "argmax": argmax,
        "lstm_cell": lstm_cell,
        "add": lambda g, op, a, x: torch.add(x[0], x[1]),
        "sub": lambda g, op, a, x: torch.sub(x[0], x[1]),
        "mul": lambda g, op, a, x: torch.mul(x[0], x[1]),
        "div": lambda g, op, a, x: torch.div(x[0], x[1]),
        "minimum": lambda g, op, a, x: torch.minimum(x[0], x[1]),
        "maximum": lambda g, op, a, x: torch.maximum(x[0], x[1]),
        "mod": lambda g, op, a, x: torch.remainder(x[0], x[1]),  # floored, as numpy
        "sum": lambda g, op, a, x: functools.reduce(torch.add, x),
        "affine": lambda g, op, a, x: torch.add(torch.mul(x[0], a["scale"]), a["shift"]),
        "sigmoid": lambda g, op, a, x: torch.sigmoid(x[0]),
        "tanh": lambda g, op, a, x: torch.tanh(x[0]),
        "relu": lambda g, op, a, x: torch.relu(x[0]),
        "abs": lambda g, op, a, x: torch.abs(x[0]),
        "leaky_relu": lambda g, op, a, x: F.leaky_relu(x[0], a["alpha"]),
        # activations of issue #41
        "hard_sigmoid": lambda g, op, a, x: torch.clamp(x[0] * a["alpha"] + a["beta"], 0, 1),
        "hard_swish": lambda g, op, a, x: F.hardswish(x[0]),
        "silu": lambda g, op, a, x: F.silu(x[0]),
        "mish": lambda g, op, a, x: F.mish(x[0]),
        "gelu_tanh": lambda g, op, a, x: F.gelu(x[0], approximate="tanh"),
        "softplus": lambda g, op, a, x: F.softplus(x[0]),
        "softsign": lambda g, op, a, x: F.softsign(x[0]),
        "elu": lambda g, op, a, x: F.elu(x[0], a["alpha"]),
        "selu": lambda g, op, a, x: a["gamma"] * F.elu(x[0], a["alpha"]),
        "celu": lambda g, op, a, x: F.celu(x[0], a["alpha"]),
        "thresholded_relu": lambda g, op, a, x: F.threshold(x[0], a["alpha"], 0.0),
        "prelu": lambda g, op, a, x: torch.where(x[0] > 0, x[0], x[0] * x[1]),
        "reciprocal": lambda g, op, a, x: torch.reciprocal(x[0]),
        "neg": lambda g, op, a, x: torch.neg(x[0]),
        "sign": lambda g, op, a, x: torch.sign(x[0]),
        "log": lambda g, op, a, x: torch.log(x[0]),
        "sin": lambda g, op, a, x: torch.sin(x[0]),
        "cos": lambda g, op, a, x: torch.cos(x[0]),
        "acos": lambda g, op, a, x: torch.acos(x[0]),
        "asin": lambda g, op, a, x: torch.asin(x[0]),
        "atan": lambda g, op, a, x: torch.atan(x[0]),
        "tan": lambda g, op, a, x: torch.tan(x[0]),
        "sinh": lambda g, op, a, x: torch.sinh(x[0]),
        "cosh": lambda g, op, a, x: torch.cosh(x[0]),
        "asinh": lambda g, op, a, x: torch.asinh(x[0]),
        "acosh": lambda g, op, a, x: torch.acosh(x[0]),
        "atanh": lambda g, op, a, x: torch.atanh(x[0]),
        "round": lambda g, op, a, x: torch.round(x[0]),
        "clip": clip,
        "sqrt": lambda g, op, a, x: torch.sqrt(x[0]),
        "exp": lambda g, op, a, x: torch.exp(x[0]),
        "erf": lambda g, op, a, x: torch.erf(x[0]),
        "gelu": lambda g, op, a, x: F.gelu(x[0]),
        "floor": lambda g, op, a, x: torch.floor(x[0]),
        "ceil": lambda g, op, a, x: torch.ceil(x[0]),
        "pow": lambda g, op, a, x: torch.pow(x[0], x[1]),
        "batch_matmul": lambda g, op, a, x: torch.matmul(x[0], x[1]),
        "layer_norm": layer_norm, "transpose": transpose,
        "conv2d": conv, "pool2d": pool, "global_pool2d": global_pool,
        "conv3d": conv3d,
        "conv_transpose2d": conv_transpose,
        "batch_norm": lambda g, op, a, x: F.batch_norm(x[0], x[3], x[4], x[1], x[2],
                                                       training=False, eps=a["epsilon"]),
        "softmax": lambda g, op, a, x: torch.softmax(x[0], a["axis"]),
        "concat": lambda g, op, a, x: torch.cat(x, a["axis"]),
        "split": split, "slice": slice_, "pad": pad, "reduce_sum": reduce_sum,
        "reshape": out_shape, "flatten": out_shape,
        "gather": lambda g, op, a, x: torch.index_select(
            x[0], a["axis"], torch.tensor(a["indices"], dtype=torch.long)),
    }


class TorchGraph:
    """A graph prepared for PyTorch: run() computes the outputs."""

    def __init__(self, graph, params: Dict[str, np.ndarray], inputs: Dict[str, np.ndarray],
                 threads: int):
        import torch
        self.torch = torch
        torch.set_num_threads(threads)
        table = _ops(torch)
        steps = []
        for i in graph.order:
            op = graph.ops[i]
            layout = (op.resolved or {}).get("layout")
            if op.op not in table or layout not in (None, "NCHW"):
                raise UsageError(f'op "{op.name}" ({op.op}) has no PyTorch form here')
            steps.append((table[op.op], op))
        # Free each intermediate after its last reader, as eager code does.
        last = {}
        for k, (_, op) in enumerate(steps):
            for n in op.inputs:
                last[n] = k
        keep = set(graph.outputs) | set(params) | set(inputs)
        self.free = [[n for n in dict.fromkeys(op.inputs) if last[n] == k and n not in keep]
                     for k, (_, op) in enumerate(steps)]
        self.graph, self.steps = graph, steps
        self.values = {n: torch.from_numpy(np.ascontiguousarray(v, np.float32))
                       for n, v in {**params, **inputs}.items()}
        self.last: Dict[str, np.ndarray] = {}

    def run(self) -> None:
        g, env = self.graph, dict(self.values)
        with self.torch.inference_mode():
            for (fn, op), dead in zip(self.steps, self.free):
                out = fn(g, op, op.resolved, [env[n] for n in op.inputs])
                if isinstance(out, list):
                    env.update(zip(op.outputs, out))
                else:
                    env[op.outputs[0]] = out
                for n in dead:
                    del env[n]
        self.last = {n: env[n] for n in g.outputs}

    def outputs(self) -> Dict[str, np.ndarray]:
        return {n: t.contiguous().numpy() for n, t in self.last.items()}


def version() -> str:
    import torch
    return torch.__version__.split("+")[0]

