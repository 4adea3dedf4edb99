"""Every bundled model at its full size, under every scheduler and every
executors x threads configuration that fits the machine, against the numpy
reference; outputs bit-identical across configurations and runs.

Minutes, not seconds, so it runs on request: HWTUNE_FULL_MODELS=1 runs every
model but inception_large (~9 minutes here under load; .ci/run sets it),
HWTUNE_FULL_MODELS=all adds inception_large (2 TFLOP a run, ~15 more
minutes: 20 passed in 23 minutes on 2026-11-22). The default test command
covers the same models shrunk in test_engine_run.py."""

import os
from pathlib import Path

import numpy as np
import pytest

from hwtune.engine.instance import NativeEngine
from hwtune.native.sched import schedulers
from hwtune.graph.model import load_model
from hwtune.graph.reference import run_reference

ROOT = Path(__file__).resolve().parent.parent
FULL = os.environ.get("HWTUNE_FULL_MODELS", "")
# 2 TFLOP a run: 11 configurations plus its float64 reference take ~15 minutes.
HEAVY = {"inception_large.json"}
MODELS = sorted(p.name for p in (ROOT / "configs" / "models").glob("*.json")
                if FULL == "all" or p.name not in HEAVY)
CPUS = len(os.sched_getaffinity(0))
CONFIGS = [(s.name, e, t) for s in schedulers().values()
           for e in ((1,) if s.single_team else (1, 2)) for t in (1, 2)
           if e * t <= (CPUS if s.single_team else max(CPUS, 2))]
# As in test_engine_run.py: float32 kernels against a float64 reference.
RTOL = 1e-4

pytestmark = pytest.mark.skipif(FULL not in ("1", "all"),
                                reason="full-size models take minutes: HWTUNE_FULL_MODELS=1 "
                                       "(or all, with inception_large)")


@pytest.mark.parametrize("name", MODELS)
def test_full_size_model(name):
    graph = load_model(ROOT / "configs" / "models" / name)
    want = run_reference(graph)
    first = None
    for sched, ex, th in CONFIGS:
        what = f"{name} {sched} {ex}x{th}"
        with NativeEngine(graph, executors=ex, threads=th, scheduler=sched) as eng:
            eng.run()
            got = eng.outputs()
        for out in graph.outputs:
            ref = np.asarray(want[out], dtype=np.float64)
            scale = max(float(np.max(np.abs(ref))), 1e-6)
            err = float(np.max(np.abs(got[out].astype(np.float64) - ref))) / scale
            assert err <= RTOL, f"{what} {out}: max error {err:.3g} of the output scale"
            if first is not None:
                assert np.array_equal(got[out], first[out]), \
                    f"{what}: {out} differs from {CONFIGS[0]}'s"
        if first is None:
            first = got
