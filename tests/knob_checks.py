"""Helpers of the CONV-knob tests (test_conv_knobs.py, test_train_conv_tuning.py):
a graph rewritten for some knobs must compute the reference's outputs, and
the CLI run in a fresh process against one database."""

import subprocess
import sys

import numpy as np

from hwtune.engine.runner import open_engine
from hwtune.graph.reference import run_reference


def assert_runs_like_the_reference(graph, run_graph, cfg):
    """run_graph (graph rewritten for some knobs) on the engine computes
    graph's reference outputs within 1e-4 of their scale."""
    want = run_reference(graph)
    eng = open_engine(run_graph, cfg)
    try:
        eng.run()
        got = eng.outputs()
    finally:
        eng.close()
    for name, ref in want.items():
        scale = float(np.max(np.abs(ref))) or 1.0
        assert float(np.max(np.abs(got[name] - ref))) <= 1e-4 * scale, name


def hwtune(*args, db):
    """`hwtune ARGS --db DB` in a fresh process."""
    return subprocess.run([sys.executable, "-m", "hwtune.cli.main", *args, "--db", str(db)],
                          capture_output=True, text=True, timeout=600)
