"""The NCHW GEMM kernel as a candidate of the global layout search.

A 1x1 stride-1 unpadded CONV with default params on NCHW tensors runs as one
GEMM per image (kernels/conv/conv.c: the plan's layout "NCHW-gemm"), 1.03-1.5x
the NCHW[x]c template on GoogleNet and ResNet 1x1 shapes at 1 thread. That
kernel has no knobs, so the template search (conv_local) never sees it; here
it is measured once per workload and thread count, with the same harness and
check as the template's trials (ConvMeasure), stored as a `conv-gemm` trial,
and offered to the layout DP as an NCHW candidate ({"layout": "NCHW"}, no
knob attributes, so the engine's plan picks the GEMM): the DP takes it when
it beats the best NCHW[x]c candidate including the transforms around it.
"""

from __future__ import annotations

from typing import Dict, Iterable, Tuple

from hwtune.native import conv
from hwtune.tuners.context import TuneContext
from hwtune.tuners.search import OK, Params

TUNER = "conv-gemm"
PARAMS: Params = {"layout": "NCHW"}
SEARCH = "measure"


def eligible(wl) -> bool:
    """Whether the workload's NCHW default plan is the GEMM kernel."""
    return conv.nchw_kernel(wl.x_shape, wl.w_shape, **wl.geometry) == "NCHW-gemm"


def gemm_candidates(ctx: TuneContext, workloads: Iterable[Tuple[object, Iterable[str]]], *,
                    threads: int, pin: bool = False) -> Dict[str, Tuple[Params, float]]:
    """op name -> (PARAMS, seconds) for every op whose workload runs as a
    GEMM in NCHW; workloads (workload, op names) as conv_local groups them.
    A stored trial is reused; a failed one is stored with its status and
    offers nothing."""
    from hwtune.tuners.conv_local import ConvMeasure
    out: Dict[str, Tuple[Params, float]] = {}
    for wl, names in workloads:
        if not eligible(wl):
            continue
        store = ctx.store(tuner=TUNER, subject=wl.key, threads=threads)
        got = store.lookup(PARAMS)
        if got is None:
            if ctx.out_of_time():
                continue
            m = ConvMeasure(wl, threads=threads, isa=ctx.isa, reps=ctx.reps, seed=ctx.seed,
                            pin=pin)
            try:
                got = m(PARAMS)
            finally:
                m.close()
            store.add(PARAMS, got, SEARCH)
        if got.status == OK:
            for name in names:
                out[name] = (dict(PARAMS), got.seconds)
    return out
