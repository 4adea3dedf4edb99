"""Run training steps on a prepared engine: each step's `.new` outputs
(updated weights and optimizer state, hwtune.graph.autodiff) become the
next step's inputs."""

from typing import Dict, List, Mapping, Optional

import numpy as np

from hwtune.graph.autodiff import LOSS_NAME

NEW = ".new"


def step_inputs(graph, seed: int = 0) -> Dict[str, np.ndarray]:
    """A training step's initial inputs (hwtune.graph.reference's seeded
    values) with generic targets: one-hot labels of random classes, uniform
    regression targets in [-1, 1)."""
    from hwtune.graph.reference import init_inputs
    values = init_inputs(graph)
    rng = np.random.default_rng(seed)
    for name, v in values.items():
        if name.startswith("labels"):
            onehot = np.zeros(v.shape, np.float32)
            onehot[np.arange(v.shape[0]), rng.integers(0, v.shape[1], v.shape[0])] = 1
            values[name] = onehot
        elif name.startswith("target"):
            values[name] = rng.uniform(-1, 1, v.shape).astype(np.float32)
    return values


def feedback(graph) -> Dict[str, str]:
    """Output name -> the input it replaces in the next step."""
    inputs = {t.name for t in graph.inputs}
    return {o: o[:-len(NEW)] for o in graph.outputs
            if o.endswith(NEW) and o[:-len(NEW)] in inputs}


def train_steps(engine, graph, steps: int,
                values: Optional[Mapping[str, np.ndarray]] = None) -> List[float]:
    """Set `values` (inputs by name), run `steps` steps; returns each step's
    loss (before its update)."""
    for name, arr in (values or {}).items():
        engine.set_input(name, arr)
    back = feedback(graph)
    losses = []
    for _ in range(steps):
        engine.run()
        losses.append(float(engine.output(LOSS_NAME)[0]))
        new = {dst: engine.output(src) for src, dst in back.items()}
        for name, arr in new.items():
            engine.set_input(name, arr)
    return losses
