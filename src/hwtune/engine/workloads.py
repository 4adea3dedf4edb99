"""The workloads a run chooses CONV knobs for, and the names their tuned
rows are stored under: a conv2d's (ConvWorkload, the template's knobs) and a
CONV gradient's with knobs of its own (GradConvWorkload). results.db keeps
one tuned row per workload key, host, ISA and thread count; the tuners
(hwtune.tuners.conv_local, conv_grad, conv_nchw) write them and a run
(hwtune.engine.conv_knobs) reads them, both through these keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from hwtune.db.keys import workload_key
from hwtune.engine.knob_space import Params, Space
from hwtune.graph.ops.train import (grad_data_conv, grad_data_forward_conv,
                                    grad_weight_conv)
from hwtune.native import conv, grad_conv

# tuning_trials.tuner / tuned_subjects.tuner of each search.
CONV_TUNER = "conv"                # the forward CONV template's knobs
NCHW_TUNER = "conv-nchw"           # the NCHW default kernel, measured once
GRAD_TUNERS = {"conv2d_grad_weight": "conv-grad-weight", "conv2d_grad_data": "conv-grad-data"}
# tuning_trials.search of the rows re-measured interleaved after a search.
CONFIRM_SEARCH = "confirm"


@dataclass(frozen=True)
class ConvWorkload:
    """A conv2d op's cost-defining shape, in NCHW/OIHW terms."""
    x_shape: Tuple[int, int, int, int]
    w_shape: Tuple[int, int, int, int]
    bias: bool
    stride: Tuple[int, int]
    pad: Tuple[int, int]
    dilation: Tuple[int, int] = (1, 1)
    pad_end: Optional[Tuple[int, int]] = None  # None: symmetric (= pad)
    # Weights that change every run (a training step's: graph inputs, and
    # the turned weights of a stride-1 conv2d_grad_data): each share packs
    # (or Winograd-transforms) them per run, so trials run the NCHW op with
    # the weights as an input, as the step runs it, and the knobs chosen
    # include that cost (the winograd knob then overrides the op's per-run
    # size rule, engine/ops/ops_util.h).
    per_run_weights: bool = False

    @property
    def geometry(self) -> Dict[str, object]:
        """The native binding's keyword arguments for this workload."""
        return {"stride": self.stride, "pad": self.pad, "dilation": self.dilation,
                "pad_end": self.pad_end}

    @property
    def key(self) -> str:
        shapes = [self.x_shape, self.w_shape] + ([(self.w_shape[0],)] if self.bias else [])
        attrs = {"stride": list(self.stride), "padding": list(self.pad)}
        # Only when not the default, so the keys of workloads tuned before
        # dilation and asymmetric padding existed stay the same.
        if tuple(self.dilation) != (1, 1):
            attrs["dilation"] = list(self.dilation)
        if self.pad_end is not None and tuple(self.pad_end) != tuple(self.pad):
            attrs["padding_end"] = list(self.pad_end)
        if self.per_run_weights:
            attrs["weights"] = "per_run"
        return workload_key("conv2d", shapes, attrs)

    @property
    def flops(self) -> float:
        n, _, oh, ow = conv.out_shape(self.x_shape, self.w_shape, **self.geometry)
        k, c, r, s = self.w_shape
        return 2.0 * n * k * oh * ow * c * r * s

    def knobs(self, isa: str) -> Dict[str, list]:
        return conv.knobs(self.x_shape, self.w_shape, isa=isa, **self.geometry)

    def default_params(self, isa: str) -> Params:
        return conv.default_params(self.x_shape, self.w_shape, isa=isa, **self.geometry)

    def space(self, isa: str) -> Space:
        """The search space: the template's knobs, with the Winograd points
        (winograd != 0) only at the default's register knobs, which that
        template does not read (ic_bn / oc_bn still name its NCHW[x]c
        tensors' blocks, so they stay free)."""
        fixed = {k: v for k, v in self.default_params(isa).items()
                 if k in ("reg_n", "unroll_ker", "reg_h")}

        def valid(p: Params) -> bool:
            return not p.get("winograd") or all(p.get(k) == v for k, v in fixed.items())
        return Space(self.knobs(isa), valid=valid)


def tuned_op(graph, op) -> bool:
    """Whether the CONV search tunes op: a dense conv2d, or a
    conv2d_grad_data that runs as a forward CONV (stride 1, padding inside
    the kernel). A grouped conv2d has no template knobs (graph/ops/conv.py)."""
    if op.op == "conv2d":
        return int((op.resolved or op.attrs).get("group") or 1) == 1
    if op.op != "conv2d_grad_data":
        return False
    return grad_data_forward_conv([graph.shapes[t] for t in op.inputs], op.resolved) is not None


def conv_workload(graph, op) -> ConvWorkload:
    """The workload of a validated graph's conv2d op (NCHW or NCHWc), or of
    a conv2d_grad_data that runs as a forward CONV (tuned_op): that CONV's,
    so a data gradient shaped like a forward conv of the step shares its
    tuning."""
    attrs = op.resolved or {}
    if op.op == "conv2d_grad_data":
        x, w, pad = grad_data_forward_conv([graph.shapes[t] for t in op.inputs], attrs)
        return ConvWorkload(tuple(int(v) for v in x), tuple(int(v) for v in w), False, (1, 1),
                            tuple(int(v) for v in pad), per_run_weights=True)
    x, w = (tuple(graph.shapes[name]) for name in op.inputs[:2])
    inputs = {t.name for t in graph.inputs}
    if len(x) == 5:  # NCHW[x]c: the same workload as its NCHW original
        x = (x[0], x[1] * x[4], x[2], x[3])
        w = (w[0] * w[5], w[1] * w[4], w[2], w[3])
    stride = tuple(attrs.get("stride", (1, 1)))
    pad = tuple(attrs.get("padding", (0, 0)))
    dilation = tuple(attrs.get("dilation") or (1, 1))
    pad_end = attrs.get("padding_end")
    pad_end = None if pad_end is None or tuple(pad_end) == pad else tuple(pad_end)
    return ConvWorkload(tuple(int(v) for v in x), tuple(int(v) for v in w),
                        len(op.inputs) >= 3, stride, pad, dilation, pad_end,
                        per_run_weights=op.inputs[1] in inputs)


def channels_last_point(wl: ConvWorkload, default: Params, space: Space) -> Optional[Params]:
    """The point that holds a 1x1 stride-1 unpadded CONV's tensors in one
    block of channels (ic_bn = C, oc_bn = K: channels-last), which the
    kernel runs as one GEMM per image (kernels/conv/nhwc_gemm.c); None for
    any other workload. The depthwise CONVs between such CONVs run in their
    input's block, without the transposes of their NCHW path. A random
    search over the divisors of C and K rarely draws it: the tuner measures
    it first (hwtune.tuners.conv_local) and the layout DP weighs it with the
    transforms it saves or costs. It is no default: held for the 1x1
    CONVs of 196 pixels or fewer, MobileNetV2 and EfficientNet-B0 ran
    0.996x and 0.984x the NCHW default at 1 thread and 0.93x and 0.94x at
    2 (all of them: 0.97x, 0.95x; 0.80x, 0.93x), AVX-512, Zen 4, medians of
    6 and 4 alternated rounds (benchmarks/channels_last.py); the 1x1 CONVs
    of 112x112 and 56x56 images run slower as GEMMs over channels-last
    pixels (16->96 at 112x112: 573 against 496 us)."""
    k, c, r, s = wl.w_shape
    pad_end = wl.pad_end if wl.pad_end is not None else wl.pad
    if ((r, s) != (1, 1) or tuple(wl.stride) != (1, 1) or any(wl.pad) or any(pad_end)
            or tuple(wl.dilation) != (1, 1)):
        return None
    point = dict(default, ic_bn=c, oc_bn=k, winograd=0)
    return point if space.contains(point) else None


def nchw_kernel(wl: ConvWorkload, isa: Optional[str] = None) -> str:
    """The kernel the workload's NCHW default plan runs on isa (default:
    the selected one): "NCHW" (the template), "NCHW-gemm", "NCHW-direct"
    or "NCHW-stem"."""
    return conv.nchw_kernel(wl.x_shape, wl.w_shape, isa=isa, **wl.geometry)


# The op attributes that fix a gradient's shape besides its inputs'.
_GEOMETRY = {"conv2d_grad_weight": ("kernel", "stride", "padding"),
             "conv2d_grad_data": ("input_size", "stride", "padding")}


@dataclass(frozen=True)
class GradConvWorkload:
    """A CONV gradient op's cost-defining shape: its type, input shapes and
    geometry attributes."""
    op: str
    in_shapes: Tuple[Tuple[int, ...], ...]
    geometry: Tuple[Tuple[str, Tuple[int, int]], ...]

    @property
    def tuner(self) -> str:
        return GRAD_TUNERS[self.op]

    @property
    def key(self) -> str:
        return workload_key(self.op, self.in_shapes,
                            {k: list(v) for k, v in self.geometry})

    def conv(self):
        """(x, w, stride, padding) of the forward conv."""
        fn = grad_weight_conv if self.op == "conv2d_grad_weight" else grad_data_conv
        return fn(self.in_shapes, dict(self.geometry))

    @property
    def out_shape(self) -> Tuple[int, ...]:
        x, w, _, _ = self.conv()
        return tuple(w if self.op == "conv2d_grad_weight" else x)

    def _call(self, fn, *args):
        x, w, stride, pad = self.conv()
        return getattr(grad_conv, fn)(*args, x, w, stride=stride, pad=pad, op=self.op)

    def knobs(self) -> Dict[str, list]:
        return self._call("knobs")

    def default_params(self) -> Params:
        return self._call("default_params")

    def canonical(self, params: Params) -> Params:
        return self._call("canonical", params)

    def space(self) -> Space:
        return Space(self.knobs(), valid=lambda p: self.canonical(p) == dict(p))


def has_own_knobs(graph, op) -> bool:
    """Whether op is a CONV gradient with knobs of its own: every weight
    gradient, and data gradients that are not forward CONVs."""
    if op.op == "conv2d_grad_weight":
        return True
    if op.op != "conv2d_grad_data":
        return False
    return not tuned_op(graph, op)


def grad_workload(graph, op) -> GradConvWorkload:
    shapes = tuple(tuple(int(v) for v in graph.shapes[t]) for t in op.inputs[:2])
    return GradConvWorkload(op.op, shapes,
                            tuple((k, tuple(int(v) for v in op.resolved[k]))
                                  for k in _GEOMETRY[op.op]))
