"""Params the engines read in place start on a cache line: the GEMV path
streams an LSTM's recurrent weights unpacked, and a numpy array is only
16-byte aligned (an engine of deepcpu_lstm_i64_h64 ran ~20% slower when
its weights sat off a line: every AVX-512 load split over two)."""

import numpy as np
import pytest

from hwtune.graph.generators.builder import Builder
from hwtune.engine.instance import NativeEngine
from hwtune.native.ops import aligned_copy


@pytest.mark.parametrize("offset", [0, 1, 4, 15])
def test_aligned_copy_starts_on_a_line_and_keeps_the_values(offset):
    raw = np.arange(offset + 300, dtype=np.float32)
    src = raw[offset:].reshape(12, 25)  # 4-byte steps off whatever numpy gave
    out = aligned_copy(src)
    assert out.ctypes.data % 64 == 0
    assert out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, src)


def test_aligned_copy_keeps_an_aligned_contiguous_array():
    a = aligned_copy(np.ones(100, np.float32))
    assert aligned_copy(a) is a


def test_aligned_copy_converts_other_dtypes_and_layouts():
    src = np.arange(24, dtype=np.float64).reshape(4, 6).T  # not C-contiguous
    out = aligned_copy(src)
    assert out.ctypes.data % 64 == 0 and out.flags.c_contiguous and out.dtype == np.float32
    np.testing.assert_array_equal(out, src.astype(np.float32))


def _gemv_chain():
    b = Builder("aligned-params")
    b.input("x0", (1, 48), init="normal")
    for i in range(6):  # params of odd sizes: the next one's address moves
        b.param(f"w{i}", (48, 48), init="normal", std=0.1)
        b.param(f"pad{i}", (3 + i,), init="normal")
    for i in range(6):
        b.op(f"x{i + 1}", "matmul", [f"x{i}", f"w{i}"])
    b.output("x6")
    return b.build()


def test_every_param_the_engine_binds_starts_on_a_line():
    g = _gemv_chain()
    e = NativeEngine(g, executors=1, threads=1, scheduler="sequential")
    try:
        assert set(e._params) == {t.name for t in g.params}
        for name, arr in e._params.items():
            assert arr.ctypes.data % 64 == 0, name
        e.run()
        x = e.output("x6").copy()
    finally:
        e.close()
    from hwtune.graph.reference import run_reference
    np.testing.assert_allclose(x, run_reference(g)["x6"], rtol=1e-4, atol=1e-5)
