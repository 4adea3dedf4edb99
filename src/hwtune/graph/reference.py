"""Run a validated graph in numpy: the semantic reference for the engine.

Parameters (and inputs not supplied by the caller) come from the model's
weights file when it has one ("init": "file"), else are initialised from the
model's seed; each tensor draws from its own stream keyed by (seed, name), so
adding a parameter never changes the values of the others.
"""

import zlib
from typing import Dict, Optional

import numpy as np

from hwtune.graph import ops as oplib
from hwtune.graph.errors import fail
from hwtune.graph.model import WEIGHTS_KEY, Graph, Tensor, flatten_data


def default_scale(shape, is_param: bool) -> float:
    """U(-s, s) / N(0, s) scale when the model gives none.

    Weights use 1/sqrt(fan_in) (LeCun) so activations stay O(1) through
    ResNet's and LSTM's deep stacks; fan_in is the reduced extent of the
    layouts hwtune uses: [K, N] matmul weights, OIHW and OIHW[i]i[o]o conv
    weights.  Vectors (biases, norms) and graph inputs use 1 and 0.1.
    """
    if not is_param:
        return 1.0
    if len(shape) == 2:
        fan_in = shape[0]
    elif len(shape) == 4:
        fan_in = shape[1] * shape[2] * shape[3]
    elif len(shape) == 6:
        fan_in = shape[1] * shape[2] * shape[3] * shape[4]
    else:
        return 0.1
    return 1.0 / float(np.sqrt(fan_in))


def init_tensor(t: Tensor, seed: int, is_param: bool = True) -> np.ndarray:
    spec = t.init
    if "data" in spec:
        data = np.asarray(flatten_data(spec["data"]), dtype=np.float32)
        if data.size != oplib.numel(t.shape):
            fail(f"{t.loc}.data", f"{data.size} values for shape {oplib.show_shape(t.shape)}")
        return data.reshape(t.shape)
    kind = spec.get("init", "uniform")
    if kind == "file":
        if WEIGHTS_KEY not in spec:
            fail(f"{t.loc}.init", f'tensor "{t.name}" takes its values from a weights file, '
                                  "but the model was not loaded from one")
        return spec[WEIGHTS_KEY].array(t.name)
    if kind == "zeros":
        return np.zeros(t.shape, np.float32)
    if kind == "ones":
        return np.ones(t.shape, np.float32)
    if kind == "constant":
        return np.full(t.shape, spec["value"], np.float32)
    rng = np.random.default_rng([seed, zlib.crc32(t.name.encode())])
    if t.dtype != "float32":  # ids and masks: integers in [low, high)
        return rng.integers(int(spec.get("low", 0)), int(spec.get("high", 2)),
                            t.shape).astype(np.float32)
    scale = spec.get("scale", default_scale(t.shape, is_param))
    if kind == "normal":
        return rng.standard_normal(t.shape, dtype=np.float32) * np.float32(scale)
    low, high = spec.get("low", -scale), spec.get("high", scale)
    # float32 draws: half the time and memory of float64 for 10M+ weights.
    u = rng.random(t.shape, dtype=np.float32)
    return (np.float32(low) + np.float32(high - low) * u).astype(np.float32)


def init_params(graph: Graph) -> Dict[str, np.ndarray]:
    return {t.name: init_tensor(t, graph.seed, True) for t in graph.params}


def init_inputs(graph: Graph) -> Dict[str, np.ndarray]:
    return {t.name: init_tensor(t, graph.seed, False) for t in graph.inputs}


def run_reference(graph: Graph, inputs: Optional[Dict[str, np.ndarray]] = None,
                  params: Optional[Dict[str, np.ndarray]] = None,
                  keep_all: bool = False) -> Dict[str, np.ndarray]:
    """Execute every op in topological order; returns the graph outputs
    (every tensor with keep_all=True).  Intermediates are freed after their
    last use so peak memory follows the graph's live set."""
    if not graph.order and graph.ops:
        from hwtune.graph.validate import validate_graph
        validate_graph(graph)
    values = init_inputs(graph)
    for name, arr in (inputs or {}).items():
        _check_given(graph, name, arr, "input")
        values[name] = np.asarray(arr, np.float32)
    values.update(init_params(graph))
    for name, arr in (params or {}).items():
        _check_given(graph, name, arr, "param")
        values[name] = np.asarray(arr, np.float32)
    last_use = {}
    for step, i in enumerate(graph.order):
        for name in graph.ops[i].inputs:
            last_use[name] = step
    keep = set(graph.outputs)
    for step, i in enumerate(graph.order):
        op = graph.ops[i]
        spec = oplib.get(op.op)
        outs = spec.ref([values[n] for n in op.inputs], op.resolved, len(op.outputs))
        for name, arr in zip(op.outputs, outs):
            values[name] = arr
        if not keep_all:
            for name in set(op.inputs):
                if last_use[name] == step and name not in keep:
                    del values[name]
    if keep_all:
        return values
    return {name: values[name] for name in graph.outputs}


def _check_given(graph, name, arr, what):
    if name not in graph.shapes:
        fail(name, f"no {what} named \"{name}\" in the model")
    want = graph.shapes[name]
    if tuple(np.shape(arr)) != tuple(want):
        fail(name, f"{what} has shape {oplib.show_shape(np.shape(arr))}, "
                   f"the model declares {oplib.show_shape(want)}")
