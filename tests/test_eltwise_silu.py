"""silu's kernel runs sigmoid's interleaved chains (kernels/eltwise/body.c):
its output must be, bit for bit, x times the sigmoid kernel's output on
every ISA, through the chains loop, the vector loop, masked tails and an
unaligned start, at every share count; and within its bound of the
float64 reference."""

import numpy as np
import pytest

from hwtune.native.eltwise import eltwise, max_abs_error
from hwtune.native.isa import supported_isas


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 and exp(90) in numpy
@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("n", [1, 15, 16, 63, 64, 65, 200, 4099])
def test_silu_is_x_times_the_sigmoid_kernel(isa, n):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n + 1) * 6).astype(np.float32)
    x[::11] = np.array([np.nan, np.inf, -np.inf, 90.0, -90.0, 0.0, -0.0], np.float32)[
        np.arange(len(x[::11])) % 7]
    for view in (x[:n], x[1:]):  # aligned, and one float off the vector boundary
        sig = eltwise("sigmoid", view, isa=isa)
        want = view * sig
        for nth in (1, 3):
            got = eltwise("silu", view, isa=isa, nth=nth)
            np.testing.assert_array_equal(got.view(np.uint32)[~np.isnan(want)],
                                          want.view(np.uint32)[~np.isnan(want)])
            assert np.array_equal(np.isnan(got), np.isnan(want))
        finite = np.isfinite(view)
        ref = view.astype(np.float64) / (1.0 + np.exp(-view.astype(np.float64)))
        err = np.abs(got[finite] - ref[finite]) / np.maximum(1.0, np.abs(ref[finite]))
        assert err.max(initial=0.0) <= max_abs_error("silu", isa)
