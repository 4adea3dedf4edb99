"""Matmuls on one param (an unrolled recurrence) hold one packed copy of it
per engine, not one each: an engine's memory does not grow with the steps
of the recurrence (lstm_large held 2.2 GB of packed copies per engine and
a plan --validate opening 11 engines of it was killed for memory)."""

import numpy as np

from hwtune.graph.generators.builder import Builder
from hwtune.engine.instance import NativeEngine

STEPS = 32
ROWS, K = 8, 512     # W: 1 MiB; a packed copy per step would be 32 MiB


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _unrolled(steps: int):
    b = Builder(f"unrolled-{steps}")
    b.input("x0", (ROWS, K), init="normal")
    b.param("w", (K, K), init="normal", std=1.0 / np.sqrt(K))
    for i in range(steps):
        b.op(f"x{i + 1}", "matmul", [f"x{i}", "w"])
    b.output(f"x{steps}")
    return b.build()


def test_matmuls_on_one_param_share_its_packed_copy():
    grown = {}
    for steps in (1, STEPS):
        g = _unrolled(steps)
        before = _rss_mb()
        e = NativeEngine(g, executors=1, threads=1, scheduler="sequential")
        try:
            grown[steps] = _rss_mb() - before
        finally:
            e.close()
    # one packed copy of W is 1 MiB; 31 more would add 31 MiB
    assert grown[STEPS] - grown[1] < 12, grown


def test_the_shared_copy_computes_the_recurrence():
    g = _unrolled(6)
    e = NativeEngine(g, executors=1, threads=2, scheduler="sequential")
    try:
        x = np.random.default_rng(3).standard_normal((ROWS, K)).astype(np.float32)
        w = e._params["w"].astype(np.float64)
        e.set_input("x0", x)
        e.run()
        out = e.output("x6")
    finally:
        e.close()
    want = x.astype(np.float64)
    for _ in range(6):
        want = want @ w
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
