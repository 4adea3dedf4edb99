"""The NCHW default kernel of each CONV as a candidate of the global layout
search.

The template search (conv_local) times NCHW[x]c convs alone, and the layout
DP adds the transforms a blocked conv needs around it. An NCHW conv with
default params is another kernel altogether, which that search never times:
the template staging and transposing its own rows (no transforms), the
Winograd template on NCHW tensors, or, for 1x1 stride-1 unpadded CONVs, one
GEMM per image (kernels/conv/conv.c: 1.03-1.5x the NCHW[x]c template on
GoogleNet and ResNet 1x1 shapes at 1 thread). Here it is measured once per
workload and thread count with the template trials' harness and check
(ConvMeasure), stored as a `conv-nchw` trial, and offered to the layout DP as
an NCHW candidate ({"layout": "NCHW"}, no knob attributes, so the engine's
plan is the default one): the DP takes it where it beats the best NCHW[x]c
candidate with the transforms around that priced, e.g. a lone stride-2 3x3
CONV between NCHW tensors (ResNet-18's conv3_1 at 1 thread: the NCHW default
1.48-1.50 ms against 1.57-1.67 ms for the tuner's best NCHW[x]c knobs alone).
"""

from __future__ import annotations

from typing import Dict, Iterable, Tuple

from hwtune.engine.workloads import NCHW_TUNER
from hwtune.tuners.context import TuneContext
from hwtune.tuners.search import OK, Params

TUNER = NCHW_TUNER
PARAMS: Params = {"layout": "NCHW"}
SEARCH = "measure"


def nchw_candidates(ctx: TuneContext, workloads: Iterable[Tuple[object, Iterable[str]]], *,
                    threads: int, pin: bool = False) -> Dict[str, Tuple[Params, float]]:
    """op name -> (PARAMS, seconds) for the ops of every workload (workload,
    op names), as conv_local groups them. A stored trial is reused; a failed
    one is stored with its status and offers nothing."""
    from hwtune.tuners.conv_local import ConvMeasure
    out: Dict[str, Tuple[Params, float]] = {}
    for wl, names in workloads:
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
