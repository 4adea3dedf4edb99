"""Element-wise kernels and probes through the Python binding, against numpy.

The cases run over the C op table (hwtune.native.eltwise.TABLE): every
supported ISA x op x awkward size x thread split x streaming stores, each op
against its numpy reference from the graph layer (graph/ops/eltwise.py), so
a new row of the table is tested here without a new test. Exact ops must
match bit for bit, approximated ones stay within the bound the library
documents for that variant.
"""

import functools

import numpy as np
import pytest

from hwtune.errors import UsageError
from hwtune.graph.ops.eltwise import REFERENCES
from hwtune.native import eltwise as ew
from hwtune.native.isa import supported_isas

ISAS = supported_isas()
SIZES = (0, 1, 15, 16, 17, 31, 97, 1009, 32768, 1_000_003)
NTHS = (1, 2, 3, 7)
SPECIALS = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30, -1e30, 3.4e38, -3.4e38,
                     1e-40, -1e-40, 88.0, -88.0, 100.0, -100.0, 0.625, -0.625], np.float32)


def fma_exact(a, b, c):
    """Correctly rounded float32 a*b+c (numpy has no fused multiply-add).

    a*b is exact in float64; s = a*b + c rounds once more, and TwoSum gives
    the exact remainder err. Rounding s to float32 is then correct except
    when s sits exactly halfway between two float32 values while err != 0:
    there the remainder decides the direction."""
    with np.errstate(all="ignore"):
        p = a.astype(np.float64) * b.astype(np.float64)
        c64 = c.astype(np.float64)
        s = p + c64
        bv = s - p
        err = (p - (s - bv)) + (c64 - bv)
        f = s.astype(np.float32)
        f64 = f.astype(np.float64)
        toward = np.where(s > f64, np.float32(np.inf), np.float32(-np.inf))
        other = np.nextafter(f, toward)
        o64 = other.astype(np.float64)
        tie = (s != f64) & (s == (f64 + o64) / 2)
        return np.where(tie & (err * (o64 - f64) > 0), other, f)


# Numpy references of the kernel-only ops (the model ops' come from the graph
# layer); a kernel-only row of the table needs one here.
KERNEL_ONLY_REFERENCES = {"fma": fma_exact}


def approximate(op):
    """Some variant approximates the op (documents an error bound)."""
    return any(ew.max_abs_error(op, isa) > 0 for isa in ISAS)


def reference(op):
    return REFERENCES[op].fn if op in REFERENCES else KERNEL_ONLY_REFERENCES[op]


def nondefault_attrs(op):
    """Attribute values away from the table's defaults."""
    return {name: (-1.5, 0.25)[i] + default for i, (name, default) in
            enumerate(ew.TABLE[op].attrs)}


@functools.lru_cache(maxsize=None)
def inputs(op, n):
    """Deterministic inputs with specials sprinkled in (read-only)."""
    rng = np.random.default_rng(n * 31 + ew.OPS.index(op))
    arrs = []
    for _ in range(ew.TABLE[op].operands):
        if approximate(op):
            x = rng.uniform(-20.0, 20.0, n).astype(np.float32)
        else:  # wide magnitudes, including denormals
            x = (rng.uniform(-1.0, 1.0, n) * 2.0 ** rng.integers(-140, 60, n)).astype(np.float32)
        if n:
            idx = rng.integers(0, n, max(1, n // 50))
            x[idx] = rng.choice(SPECIALS, idx.size)
        x.setflags(write=False)
        arrs.append(x)
    return tuple(arrs)


def expected(op, arrays, attrs=None):
    """float32 result for exact ops; float64 exact value for approximated ones."""
    attrs = dict(ew.TABLE[op].attrs, **(attrs or {}))
    if approximate(op):
        arrays = [a.astype(np.float64) for a in arrays]
    with np.errstate(all="ignore"):
        r = np.asarray(reference(op)(*arrays, **attrs))
    r.setflags(write=False)
    return r


@functools.lru_cache(maxsize=None)
def expected_default(op, n):
    return expected(op, inputs(op, n))


def assert_matches(op, isa, out, want, x):
    assert out.dtype == np.float32 and out.flags.c_contiguous and out.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(out), nan, err_msg=f"{isa}/{op}: NaN positions")
    got, ref = out[~nan], want[~nan]
    if approximate(op):
        with np.errstate(over="ignore", invalid="ignore"):
            # the table's measure: absolute up to 1, relative above; 0 where
            # the exact value rounds to the result (overflow to inf included)
            err = np.where(ref.astype(np.float32) == got, 0.0,
                           np.abs(got.astype(np.float64) - ref) / np.maximum(1.0, np.abs(ref)))
        bound = ew.max_abs_error(op, isa)
        worst = int(np.argmax(err)) if err.size else 0
        assert not err.size or err[worst] <= bound, (
            f"{isa}/{op}: error {err[worst]:.3g} > bound {bound:.3g} at x={x[~nan][worst]!r}")
    else:
        bad = np.flatnonzero(got.view(np.uint32) != ref.view(np.uint32))
        assert bad.size == 0, (
            f"{isa}/{op}: {bad.size} elements differ, first at {bad[0]}: "
            f"got {got[bad[0]]!r} want {ref[bad[0]]!r}")


@pytest.mark.parametrize("nt", [False, True], ids=["st", "nt"])
@pytest.mark.parametrize("nth", NTHS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", ew.OPS)
@pytest.mark.parametrize("isa", ISAS)
def test_matches_numpy(isa, op, n, nth, nt):
    out = ew.eltwise(op, *inputs(op, n), isa=isa, nth=nth, nt_stores=nt)
    assert_matches(op, isa, out, expected_default(op, n), inputs(op, n)[0])


@pytest.mark.parametrize("op", [op for op in ew.OPS if ew.TABLE[op].attrs])
@pytest.mark.parametrize("isa", ISAS)
def test_attributes(isa, op):
    n, attrs = 1009, nondefault_attrs(op)
    out = ew.eltwise(op, *inputs(op, n), attrs=attrs, isa=isa, nth=3)
    assert_matches(op, isa, out, expected(op, inputs(op, n), attrs), inputs(op, n)[0])


@pytest.mark.parametrize("op", ew.OPS)
@pytest.mark.parametrize("isa", ISAS)
def test_misaligned_views(isa, op):
    """Inputs and output at odd float offsets from a cache line."""
    n = 4099
    src = inputs(op, n + 3)
    views = [np.ascontiguousarray(x)[k + 1: k + 1 + n] for k, x in enumerate(src)]
    assert all(v.ctypes.data % 64 for v in views)
    got = ew.eltwise(op, *views, isa=isa, nth=3)
    if approximate(op):
        assert_matches(op, isa, got, expected(op, views), views[0])
    else:  # exact ops: same bits as the portable variant on aligned copies
        want = ew.eltwise(op, *[v.copy() for v in views], isa="generic")
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("isa", ISAS)
def test_special_values(isa):
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30, -1e30, 90.0, -90.0, 1e-30, -1e-30],
                 np.float32)
    sg = ew.eltwise("sigmoid", x, isa=isa)
    th = ew.eltwise("tanh", x, isa=isa)
    np.testing.assert_array_equal(sg[[0, 1, 3, 4, 5, 6, 7, 8]], [1, 0, 0.5, 0.5, 1, 0, 1, 0])
    np.testing.assert_array_equal(th[[0, 1, 5, 6, 7, 8]], [1, -1, 1, -1, 1, -1])
    assert np.isnan(sg[2]) and np.isnan(th[2])
    assert np.signbit(th[4]) and not np.signbit(th[3]) and th[3] == 0
    assert th[9] == np.float32(1e-30) and th[10] == np.float32(-1e-30)
    relu = ew.eltwise("relu", x, isa=isa)
    # NaN and -0 kept, as ONNX Runtime's Relu (assert_array_equal matches NaN to NaN)
    np.testing.assert_array_equal(relu, np.where(x < 0, np.float32(0), x))
    assert np.isnan(relu[2]) and np.signbit(relu[4]) and relu[0] == np.inf and relu[1] == 0


def test_bounds_are_documented_and_tight():
    assert approximate("sigmoid") and approximate("tanh") and not approximate("relu")
    for isa in ISAS:
        for op in ew.OPS:
            bound = ew.max_abs_error(op, isa)
            assert bound == 0.0 or 0 < bound < 2e-7  # ~1.5 ulp of outputs in [0.5, 1)


def test_fma_exact_oracle_breaks_double_rounding_ties():
    # a*b = 2^-24 - 2^-60, so a*b + c lies just below the float32 midpoint
    # 1 + 3*2^-24: float64 rounds it onto the midpoint, and a second
    # rounding (ties to even) would go up; the fused result goes down.
    a = np.array([2.0 ** -24 * (1 + 2.0 ** -18)], np.float32)
    b = np.array([1 - 2.0 ** -18], np.float32)
    c = np.array([1 + 2.0 ** -23], np.float32)
    naive = (a.astype(np.float64) * b + c).astype(np.float32)
    assert naive[0] == np.float32(1 + 2.0 ** -22)
    assert fma_exact(a, b, c)[0] == np.float32(1 + 2.0 ** -23)
    for isa in ISAS:
        assert ew.eltwise("fma", a, b, c, isa=isa)[0] == np.float32(1 + 2.0 ** -23)


@pytest.mark.parametrize("isa", ISAS)
def test_fma_thread_counts_flops(isa):
    lanes = {"generic": 1, "avx2": 8, "avx512": 16}[isa]
    f = ew.fma_thread(isa, 1000)
    assert f > 0 and f % (1000 * 2 * lanes) == 0
    assert ew.fma_thread(isa, 0) == 0.0
    assert ew.fma_thread(isa, 3000) == 3 * f


@pytest.mark.parametrize("nt", [False, True])
@pytest.mark.parametrize("nth", [1, 3])
@pytest.mark.parametrize("isa", ISAS)
def test_triad(isa, nth, nt):
    rng = np.random.default_rng(5)
    b = rng.standard_normal(10_007).astype(np.float32)
    c = rng.standard_normal(10_007).astype(np.float32)
    got = ew.triad(b, c, 3.0, isa=isa, nth=nth, nt_stores=nt)
    s = np.full_like(b, 3.0)
    want = b + s * c if isa == "generic" else fma_exact(s, c, b)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("call, match", [
    (lambda: ew.eltwise("swish", np.ones(3)), "unknown element-wise op"),
    (lambda: ew.eltwise("add", np.ones(3)), "takes 2 input"),
    (lambda: ew.eltwise("relu", np.ones(3), np.ones(3)), "takes 1 input"),
    (lambda: ew.eltwise("fma", np.ones(3), np.ones(3)), "takes 3 input"),
    (lambda: ew.eltwise("mul", np.ones(3), np.ones(4)), "shape"),
    (lambda: ew.eltwise("mul", np.ones((2, 3)), np.ones(6)), "shape"),
    (lambda: ew.eltwise("relu", np.ones(3), nth=0), "nth"),
    (lambda: ew.eltwise("relu", np.ones(3), nth=True), "nth"),
    (lambda: ew.eltwise("relu", np.ones(3), isa="sse9"), "unknown ISA"),
    (lambda: ew.eltwise("relu", np.array(["x"])), "real numbers"),
    (lambda: ew.max_abs_error("softmax"), "unknown element-wise op"),
    (lambda: ew.eltwise("affine", np.ones(3), attrs={"alpha": 1}), "no attribute 'alpha'"),
    (lambda: ew.eltwise("affine", np.ones(3), attrs={"scale": "2"}), "must be a number"),
    (lambda: ew.fma_thread(None, -1), "iters"),
    (lambda: ew.triad(np.ones(3), np.ones(2), 1.0), "shape"),
])
def test_usage_errors(call, match):
    with pytest.raises(UsageError, match=match):
        call()


def test_shapes_and_dtypes_are_kept_float32():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    out = ew.eltwise("mul", a, a.T.copy().T)  # non-contiguous input is copied
    assert out.shape == (3, 4) and out.dtype == np.float32
    np.testing.assert_array_equal(out, (a * a).astype(np.float32))
    assert ew.eltwise("tanh", np.zeros((0, 5))).shape == (0, 5)
