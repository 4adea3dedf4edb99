"""Helpers of the CONV-knob tests (test_conv_knobs.py, test_train_conv_tuning.py):
their two-conv graph, the check that a graph rewritten for some knobs
computes the reference's outputs, and the CLI run in a fresh process
against one database."""

import subprocess
import sys

import numpy as np

from hwtune.engine.runner import open_engine
from hwtune.graph.generators.builder import Builder
from hwtune.graph.reference import run_reference


def two_convs(x_shape, a_out: int, b_out: int):
    """x -> A (3x3, padding 1, no bias, a_out channels) -> relu -> B (3x3,
    padding 1, b_out channels): a graph of two CONV workloads."""
    b = Builder("two-convs")
    t = b.input("x", x_shape)
    t = b.op("A", "conv2d", [t, b.param("A.w", (a_out, x_shape[1], 3, 3))],
             stride=[1, 1], padding=[1, 1])
    t = b.op("A.relu", "relu", [t])
    t = b.op("B", "conv2d", [t, b.param("B.w", (b_out, a_out, 3, 3))],
             stride=[1, 1], padding=[1, 1])
    b.output(t)
    return b.build()


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
