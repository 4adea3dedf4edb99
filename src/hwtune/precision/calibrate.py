"""Calibration for post-training quantisation: the inputs the tuner measures
on, the activation ranges of the tensors int8 ops read, and the error of a
rewritten graph against the fp32 one.

Ranges are the min and max over every calibration sample (not a
percentile): the bound tune-graph keeps is a worst case (max abs error,
below), and clipping a tensor at a percentile puts the largest per-element
errors exactly on the outliers it clips; with the few samples calibration
runs here (4 seeded by default) a percentile of the tail is also mostly
noise. The range always holds 0 (zero is exact, as ONNX requires).

Error (docs/precision.md): the largest |y - y_fp32| over every output
element and sample, divided by the output's scale max|y_fp32| (over the
samples), the worst output deciding: what `hwtune run --check` and the
zoo's check compare, so a bound of 1e-2 means "within 1% of the output's
magnitude everywhere".
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from hwtune.graph.model import Graph

# Seeded calibration samples when the user gives no --input: 4 held the
# ResNet activation ranges within a few percent of those of 16 (the max of
# a post-ReLU tensor grows slowly with the sample count) at a quarter of
# the runs.
DEFAULT_SAMPLES = 4

Sample = Dict[str, np.ndarray]


def seeded_samples(graph: Graph, n: int = DEFAULT_SAMPLES) -> List[Sample]:
    """n input sets drawn as the engine seeds inputs, from seeds
    graph.seed, graph.seed + 1, ... (the first is what `hwtune run` uses)."""
    from hwtune.graph.reference import init_tensor
    return [{t.name: init_tensor(t, graph.seed + k, False) for t in graph.inputs}
            for k in range(n)]


def _with_outputs(graph: Graph, extra: Iterable[str]) -> Graph:
    from hwtune.graph.validate import validate_graph
    inputs = {t.name for t in graph.inputs} | {t.name for t in graph.params}
    outs = list(dict.fromkeys(list(graph.outputs) + [t for t in extra if t not in inputs]))
    if outs == list(graph.outputs):
        return graph
    g = Graph(name=graph.name, inputs=list(graph.inputs), params=list(graph.params),
              ops=list(graph.ops), outputs=outs, seed=graph.seed,
              description=graph.description, vars=dict(graph.vars), source=graph.source)
    validate_graph(g)
    return g


def run_samples(graph: Graph, samples: Sequence[Sample], threads: int,
                extra: Iterable[str] = ()) -> List[Dict[str, np.ndarray]]:
    """The engine's outputs (and the tensors in extra, graph inputs taken
    from the sample) for each sample, one prepared engine for all."""
    from hwtune.engine.runner import native_engine
    extra = list(extra)
    g = _with_outputs(graph, extra)
    eng = native_engine().NativeEngine(g, executors=1, threads=threads)
    try:
        out = []
        for s in samples:
            for name, v in s.items():
                eng.set_input(name, v)
            eng.run()
            got = {n: np.array(eng.output(n), copy=True) for n in g.outputs}
            for n in extra:
                if n in s:
                    got[n] = np.asarray(s[n], np.float32)
            out.append(got)
        return out
    finally:
        eng.close()


def u8_params(lo: float, hi: float) -> Tuple[float, int]:
    """(scale, zero point) mapping [min(lo, 0), max(hi, 0)] onto 0..255."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = float(np.float32((hi - lo) / 255.0))
    if not scale > 0:
        return 1.0, 0  # an all-zero tensor: any scale gives q = 0
    zero = int(np.clip(np.rint(-lo / scale), 0, 255))
    return scale, zero


def activation_params(values: Sequence[Mapping[str, np.ndarray]],
                      tensors: Iterable[str]) -> Dict[str, Tuple[float, int]]:
    """tensor -> (scale, zero point) from its min / max over the samples."""
    out = {}
    for t in tensors:
        lo = min(float(np.min(v[t])) for v in values)
        hi = max(float(np.max(v[t])) for v in values)
        out[t] = u8_params(lo, hi)
    return out


def output_error(got: Sequence[Mapping[str, np.ndarray]],
                 want: Sequence[Mapping[str, np.ndarray]],
                 outputs: Sequence[str]) -> float:
    """max |got - want| / max |want| over samples, worst output (module
    docstring); inf when got is not finite where want is."""
    worst = 0.0
    for name in outputs:
        diff, scale = 0.0, 0.0
        for g, w in zip(got, want):
            a = np.asarray(g[name], np.float64)
            b = np.asarray(w[name], np.float64).reshape(a.shape)
            if not np.isfinite(a).all() and np.isfinite(b).all():
                return float("inf")
            diff = max(diff, float(np.abs(a - b).max(initial=0.0)))
            scale = max(scale, float(np.abs(b).max(initial=0.0)))
        rel = diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))
        worst = max(worst, rel)
    return worst


def given_samples(graph: Graph, arrays: Optional[Mapping[str, np.ndarray]]) -> List[Sample]:
    """The user's inputs (--input NAME=FILE.npy) as one sample, inputs not
    given seeded as `hwtune run` seeds them."""
    sample = seeded_samples(graph, 1)[0]
    sample.update({k: np.asarray(v, np.float32) for k, v in (arrays or {}).items()})
    return [sample]
