"""Engine samples taken in fresh processes, one process per sample set.

A process is the unit `hwtune run` repeats: each run of it gets its own
memory placement, and on the 2-vCPU EPYC VM that placement moved a corun
config of pathnet_small between ~17 and ~22 ms per run from one process to
the next, while samples inside one process stayed within a few percent.
Within-process intervals therefore understate what a user re-measuring with
`hwtune run` sees (Kalibera and Jones: repeat at the level where the
variance is). `paired_processes` alternates processes of several configs,
pair by pair, and returns each process' median.

The worker is this module run as a script: it reads a pickled spec (the
graph as it runs, its engine config and op costs, and the caller's
open_engine, pickled by reference: the engine layer's, so that this layer
below it imports none of it), opens the engine as `hwtune run` does, warms
it, times `samples` runs and prints their seconds as JSON. Nothing else in
the worker is timed.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence

from hwtune.errors import HwtuneError
from hwtune.measure import clock

# Seconds a worker needs before its engine opens: interpreter start and the
# engine's imports (0.26 s measured on the 2-vCPU EPYC VM, quiet; doubled
# for load).
START_S = 0.5


def worker_cost(open_s: float, run_s: float, warmup: int, samples: int) -> float:
    """Seconds one worker process costs a budget."""
    return START_S + open_s + (warmup + samples) * run_s


def _spec_file(graph, config, op_cost, open_engine, warmup: int, samples: int,
               tmp: str) -> str:
    path = os.path.join(tmp, f"spec-{id(config)}.pkl")
    try:
        with open(path, "wb") as f:
            pickle.dump({"graph": graph, "config": config, "op_cost": op_cost or None,
                         "open_engine": open_engine, "warmup": warmup, "samples": samples}, f)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise HwtuneError(f"the graph cannot be handed to a measuring process: {exc}") from None
    return path


def _run_worker(spec: str) -> List[float]:
    proc = subprocess.run([sys.executable, "-m", "hwtune.measure.processes", spec],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise HwtuneError(f"a measuring process failed (exit {proc.returncode}): {tail}")
    return list(json.loads(proc.stdout)["samples"])


def paired_processes(sides: Sequence[tuple], pairs: int, *, open_engine: Callable,
                     warmup: int, samples: int,
                     deadline: Optional[float] = None, min_pairs: int = 1,
                     on_pair: Optional[Callable[[int, int], None]] = None
                     ) -> List[List[float]]:
    """Per side, the median seconds of each of its processes.

    sides: (graph, EngineConfig, op_cost) per config; open_engine(graph,
    config, op_cost): the engine of one (a module-level function: it is
    pickled by reference into the worker). A pair is one process
    of every side, their order rotated pair by pair, so a load burst hits
    all sides alike. Stops after `pairs`, or at the deadline once
    `min_pairs` are in (no pair is started that the last one's length says
    would end past it)."""
    from hwtune.measure.stats import median
    out: List[List[float]] = [[] for _ in sides]
    with tempfile.TemporaryDirectory(prefix="hwtune-proc-") as tmp:
        specs = [_spec_file(g, c, oc, open_engine, warmup, samples, tmp)
                 for g, c, oc in sides]
        took = 0.0
        for p in range(pairs):
            if p >= min_pairs and deadline is not None and \
                    clock.monotonic() + took > deadline:
                break
            watch = clock.Stopwatch()
            order = list(range(len(sides)))
            shift = p % len(order)
            for i in order[shift:] + order[:shift]:
                out[i].append(median(_run_worker(specs[i])))
            took = watch.elapsed()
            if on_pair is not None:
                on_pair(p + 1, pairs)
    return out


def _worker(spec_path: str) -> Dict[str, Any]:
    with open(spec_path, "rb") as f:
        spec = pickle.load(f)
    engine = spec["open_engine"](spec["graph"], spec["config"], spec["op_cost"])
    try:
        for _ in range(spec["warmup"]):
            engine.run()
        return {"samples": [clock.per_call(engine.run, 1) for _ in range(spec["samples"])]}
    finally:
        engine.close()


if __name__ == "__main__":
    try:
        print(json.dumps(_worker(sys.argv[1])))
    except HwtuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
