"""1x1 CONVs of small images run as the transposed GEMM (kernels/conv/pw_t.c):
y^T = x^T . W^T per image into each thread's workspace, written back as NCHW
by the variant's epilogue_t with the bias, residual and activation. Checked
against the C reference on every ISA this host runs (the path is taken
where the variant's pw_t_max_hw admits the image: AVX2 at up to 7x7), over
batches, thread shares (1..3, sequential in this process, one workspace
reused) and the strided 1x1 (pw_stride.c copies each share's pixels)."""

import ctypes

import numpy as np
import pytest

from hwtune.native import conv
from hwtune.native._lib import lib
from hwtune.native.conv import _ptr
from hwtune.native.isa import supported_isas

ISAS = supported_isas()

# (N, C, H, W, K, stride): 7x7 (49 pixels: 8 rows of 6 and 1), an odd image
# with fewer pixels than one row panel of some shares, a batch, a strided 1x1
# whose subsampled image is 7x7, and a K that is no multiple of 16 (the
# GEMM's masked right edge, here the output channels).
CASES = [(1, 40, 7, 7, 48, 1), (2, 24, 5, 3, 20, 1), (1, 64, 14, 14, 32, 2),
         (1, 96, 7, 7, 37, 1), (3, 17, 6, 6, 64, 1)]
ACTS = [dict(), dict(relu=True), dict(relu=True, relu_max=6.0), dict(act="silu"),
        dict(act="hard_swish")]


def case_data(case, seed=0):
    n, c, h, w, k, s = case
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, c, h, w)).astype(np.float32)
    wt = rng.uniform(-1, 1, (k, c, 1, 1)).astype(np.float32)
    b = rng.uniform(-1, 1, k).astype(np.float32)
    return x, wt, b, s


def tol(c):
    return 1e-6 + 2 * np.finfo(np.float32).eps * c


def transposed(case, isa):
    """Whether the plan of case runs the transposed GEMM on isa."""
    x, w, b, s = case_data(case)
    p = conv.Conv2dPlan(x.shape, w, b, stride=s, isa=isa)
    return p.layout == "NCHW-gemm" and bool(p._plan.gemm_t)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_transposed_pointwise_matches_the_reference(isa, case):
    x, w, b, s = case_data(case)
    for kw in ACTS:
        for bias in (b, None):
            want = conv.conv2d_ref(x, w, bias, stride=s, **kw)
            for nth in (1, 2, 3):
                got = conv.conv2d(x, w, bias, stride=s, isa=isa, nth=nth, **kw)
                err = float(np.abs(got - want).max())
                assert err <= tol(case[1]) * max(1.0, float(np.abs(want).max())), \
                    (kw, bias is None, nth, err)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", CASES[:3], ids=lambda c: "x".join(map(str, c)))
def test_the_residual_is_added_before_the_activation(isa, case):
    """hwt_conv_run_part_res: y = relu(conv(x) + b + res), each share
    writing only its own pixels and channels (res read where y is written)."""
    x, w, b, s = case_data(case, seed=1)
    ref = conv.conv2d_ref(x, w, b, stride=s)
    res = np.random.default_rng(2).uniform(-1, 1, ref.shape).astype(np.float32)
    want = np.maximum(ref + res, 0)
    for nth in (1, 2, 3):
        d = conv._desc(x.shape, w.shape, s, 0, True)
        plan = conv._Plan()
        assert lib.hwt_conv_plan_make(ctypes.byref(d), conv.LAYOUTS.index("NCHW"), None,
                                      conv.resolve_isa(isa), nth, ctypes.byref(plan)) == 0
        wp = np.empty(plan.w_floats, np.float32)
        assert lib.hwt_conv_pack_weights(ctypes.byref(plan), _ptr(w), _ptr(wp)) == 0
        y = np.full(ref.shape, np.nan, np.float32)
        for tid in range(nth):  # a workspace of its own per share, as the engine gives
            ws = np.full(plan.ws_floats + 16, np.nan, np.float32)
            ws = ws[(-ws.ctypes.data % 64) // 4:]
            lib.hwt_conv_run_part_res(ctypes.byref(plan), _ptr(x), _ptr(wp), _ptr(b),
                                      _ptr(res), _ptr(y), _ptr(ws), tid, nth)
        assert float(np.abs(y - want).max()) <= tol(case[1]) * 4, nth


def test_avx2_runs_small_images_transposed_and_larger_ones_not():
    """The path is where the variant says: 7x7 on AVX2, not 14x14."""
    if "avx2" not in ISAS:
        pytest.skip("no AVX2 here")
    assert transposed(CASES[0], "avx2") and transposed(CASES[2], "avx2")
    assert not transposed((1, 40, 14, 14, 48, 1), "avx2")
    assert not transposed(CASES[0], "generic")
