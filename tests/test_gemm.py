"""hwtune.native.gemm against numpy (float64) for every ISA variant, awkward
shapes, every thread count of the partition, transposes, beta and bias."""

import ctypes

import numpy as np
import pytest

from hwtune.errors import UsageError
from hwtune.native import gemm as g
from hwtune.native.isa import supported_isas

ISAS = supported_isas()
# M, K, N: ones, primes, M <= 6 (GEMV path), non-multiples of every tile
# (4x8, 6x16, 12x32) and of the cache blocks (kc ~256, nc ~512), one large;
# N = 1030: rows of B longer than a page, packed before the kernels instead
# of by them (gemm.c).
SHAPES = [
    (1, 1, 1), (1, 7, 13), (1, 512, 97), (2, 13, 31), (4, 97, 7), (5, 1, 1), (6, 33, 65),
    (7, 13, 31), (13, 97, 33), (31, 1, 97), (97, 31, 13), (37, 515, 200), (20, 300, 1030),
    (300, 1100, 700),
    # a few rows over B wider than a page: the kernels read B where it lies
    # (gemm.c: run_tiles_direct), the partial last strip packed
    (16, 32, 1100),
    # ... with full row panels after the first, which read the copy of each
    # strip the first panel's kernel wrote (ukr_pack), K odd
    (23, 37, 2050),
    # shallow and wide (blocking.c: two micro-panels of rows at a time), M
    # not a multiple of any tile
    (50, 20, 8200),
]
NTHS = [1, 2, 3, 7]
EPS32 = float(np.finfo(np.float32).eps)


def _operands(M, K, N, trans_a, trans_b, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((K, M) if trans_a else (M, K)).astype(np.float32)
    b = rng.standard_normal((N, K) if trans_b else (K, N)).astype(np.float32)
    c = rng.standard_normal((M, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    return a, b, c, bias


def _reference(a, b, trans_a, trans_b, beta, c, bias):
    A = (a.T if trans_a else a).astype(np.float64)
    B = (b.T if trans_b else b).astype(np.float64)
    out = A @ B
    if beta:
        out += beta * c.astype(np.float64)
    if bias is not None:
        out += bias.astype(np.float64)
    return out


def _tolerance(a, b, trans_a, trans_b, K):
    # Float32 rounding of a length-K dot product: at most ~K*eps times the sum
    # of |a||b| (blocked accumulation is usually far better, sqrt(K)), plus the
    # rounding of beta*C + bias; |A||B| per element keeps the bound tight.
    A = np.abs((a.T if trans_a else a).astype(np.float64))
    B = np.abs((b.T if trans_b else b).astype(np.float64))
    return 2 * (K + 2) * EPS32 * (A @ B) + 8 * EPS32


TRANS = [(False, False), (True, False), (False, True), (True, True)]


def _cases():
    # The large shape takes the plain and both-transposed layouts only (they
    # exercise all four packers) with 1 and 7 threads, to keep the suite short.
    for M, K, N in SHAPES:
        big = M * K * N > 10**7
        for nth in NTHS:
            for ta, tb in TRANS:
                if big and (ta != tb or nth not in (1, 7)):
                    continue
                yield M, K, N, nth, ta, tb


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("M,K,N,nth,trans_a,trans_b", list(_cases()))
def test_gemm_matches_numpy(isa, M, K, N, nth, trans_a, trans_b):
    a, b, c0, bias = _operands(M, K, N, trans_a, trans_b, seed=M * 7 + K * 3 + N)
    tol = _tolerance(a, b, trans_a, trans_b, K) + 4 * EPS32 * (np.abs(c0) + np.abs(bias))
    for beta, use_bias in ((0.0, False), (0.5, True), (1.0, False), (0.0, True)):
        c = c0.copy()
        if beta == 0.0:
            c[...] = np.nan  # beta == 0 must never read C
        out = g.gemm(a, b, trans_a=trans_a, trans_b=trans_b, beta=beta,
                     c=c if beta else None, bias=bias if use_bias else None, isa=isa, nth=nth)
        ref = _reference(a, b, trans_a, trans_b, beta, c0, bias if use_bias else None)
        assert out.shape == (M, N) and out.dtype == np.float32
        err = np.abs(out.astype(np.float64) - ref)
        assert np.all(err <= tol), (
            f"beta={beta} bias={use_bias}: max err {np.nanmax(err)} (tol {tol.max()})")
        if beta:
            assert out is c  # updated in place


@pytest.mark.parametrize("isa", ISAS)
def test_integer_inputs_are_exact(isa):
    # Small integers: every partial sum is exact in float32, so any blocking,
    # order or partition must reproduce numpy bit for bit.
    rng = np.random.default_rng(1)
    for M, K, N in ((1, 300, 70), (29, 700, 65), (64, 512, 96)):
        a = rng.integers(-3, 4, (M, K)).astype(np.float32)
        b = rng.integers(-3, 4, (K, N)).astype(np.float32)
        c = rng.integers(-3, 4, (M, N)).astype(np.float32)
        bias = rng.integers(-3, 4, N).astype(np.float32)
        ref = a.astype(np.float64) @ b + 0.5 * c + bias
        for nth in (1, 5):
            out = g.gemm(a, b, beta=0.5, c=c.copy(), bias=bias, isa=isa, nth=nth)
            np.testing.assert_array_equal(out, ref.astype(np.float32))


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("nth", [1, 2, 3, 7, 64, 256])
def test_partition_is_disjoint_and_complete(isa, nth):
    # beta = 1 on C = 0: a tile computed by two shares comes out doubled and
    # a tile no share computed stays 0; also no thread idles while there are
    # at least 4 tiles per thread.
    for M, K, N in ((100, 3, 300), (2, 3, 3000), (500, 3, 20)):
        a = np.ones((M, K), np.float32)
        b = np.ones((K, N), np.float32)
        c = np.zeros((M, N), np.float32)
        desc = g.make_desc(M, K, N, beta=1.0)
        p = g.make_plan(desc, isa, nth)
        ws = g.workspace(p.ws_floats)
        idle = 0
        for tid in range(nth):
            before = np.count_nonzero(c)
            g.lib.hwt_gemm_run_part(ctypes.byref(p), g._ptr(a), g._ptr(b), g._ptr(c), None,
                                    g._ptr(ws), tid, nth)
            idle += np.count_nonzero(c) == before
        np.testing.assert_array_equal(c, np.full((M, N), K, np.float32))
        tiles = -(-N // 16) if M <= 6 else -(-M // p.mr) * -(-N // p.nr)
        if tiles >= 4 * nth:
            assert idle == 0, f"{idle} idle threads for [{M},{K}]x[{K},{N}] nth={nth}"


@pytest.mark.parametrize("isa", ISAS)
def test_plan_fields(isa):
    p = g.plan(256, 1024, 1024, isa=isa)
    assert p["isa"] == isa and p["nth"] == 1
    assert p["mr"] > 0 and p["nr"] > 0
    assert p["mc"] % p["mr"] == 0 and p["nc"] % p["nr"] == 0
    assert 0 < p["kc"] <= 1024
    # Workspace holds one packed A block and one packed B block.
    assert p["ws_floats"] >= p["mc"] * p["kc"] + p["kc"] * p["nc"]
    # Prepacked B: one kc x (N rounded up to nr) block per depth block.
    assert p["packed_b_floats"] >= 1024 * (-(-1024 // p["nr"]) * p["nr"])
    # GEMV plans keep an A block for run_part_packed, which always packs A.
    q = g.plan(1, 512, 2048, isa=isa)
    assert q["ws_floats"] >= q["mr"] * q["kc"]
    assert q["packed_b_floats"] >= 512 * 2048
    assert g.plan(3, 5, 7, trans_a=True, isa=isa)["ws_floats"] >= 15


def test_c_side_caches_are_the_fingerprints():
    """The blocking's cache sizes (read in C) are the ones the fingerprint
    stores for this host, wherever the fingerprint knows them."""
    from hwtune.machine import fingerprint
    caches = fingerprint()["caches"]
    c = g.host_caches()
    for key, name in (("l1d", "L1d"), ("l2", "L2"), ("l3", "L3")):
        known = (caches.get(name) or {}).get("size_bytes")
        if known:
            assert c[key] == known, (key, c, caches)
    groups = (caches.get("L3") or {}).get("groups")
    if c["l3"] and groups:
        assert c["l3_cpus"] == len(groups[0]["cpus"])


@pytest.mark.parametrize("isa", ISAS)
def test_blocking_follows_the_caches(isa):
    """Bigger caches give bigger blocks; the blocks stay whole micro-tiles;
    unknown caches (0) take the documented fallback."""
    small = g.plan(2000, 2000, 3000, isa=isa, caches={"l1d": 16 << 10, "l2": 256 << 10,
                                                      "l3": 4 << 20, "l3_cpus": 4})
    big = g.plan(2000, 2000, 3000, isa=isa, caches={"l1d": 64 << 10, "l2": 2 << 20,
                                                    "l3": 64 << 20, "l3_cpus": 4})
    assert small["kc"] <= big["kc"] and small["mc"] < big["mc"] and small["nc"] < big["nc"]
    for p in (small, big):
        assert p["mc"] % p["mr"] == 0 and p["nc"] % p["nr"] == 0
    unknown = g.plan(2000, 2000, 3000, isa=isa, caches={"l1d": 0, "l2": 0, "l3": 0})
    assert unknown["kc"] >= 64 and unknown["mc"] >= unknown["mr"]
    assert g.plan(2000, 2000, 3000, isa=isa) == g.plan(2000, 2000, 3000, isa=isa,
                                                        caches=g.host_caches())
    with pytest.raises(UsageError, match="unknown cache field"):
        g.plan(8, 8, 8, isa=isa, caches={"l4": 1})
    with pytest.raises(UsageError, match="integers >= 0"):
        g.plan(8, 8, 8, isa=isa, caches={"l2": -1})


@pytest.mark.parametrize("isa", ISAS)
def test_shallow_wide_gemms_take_two_panels_of_rows(isa):
    """K <= 32 over C rows of 32 KiB or more: the A block is two
    micro-panels of rows on the B-panel order (AVX2's 6x16); outside
    either bound, for the few rows of the direct path, or on the A-panel
    order (AVX-512's 12x32, the portable 4x8: one panel's rows at a time
    already), it is sized by the caches."""
    caches = {"l1d": 32 << 10, "l2": 512 << 10, "l3": 32 << 20, "l3_cpus": 8}
    shallow = g.plan(96, 16, 12544, isa=isa, caches=caches)
    deep = g.plan(96, 64, 12544, isa=isa, caches=caches)
    short = g.plan(96, 16, 4096, isa=isa, caches=caches)
    # a few rows read B where it lies (gemm.c's direct path): one A block
    few = g.plan(16, 32, 12544, isa=isa, caches=caches)
    assert deep["mc"] == short["mc"] == 96 and few["mc"] >= 16
    assert shallow["mc"] == (2 * shallow["mr"] if isa == "avx2" else 96)


def test_default_isa_honours_env(monkeypatch):
    monkeypatch.setenv("HWTUNE_ISA", "generic")
    assert g.plan(8, 8, 8)["isa"] == "generic"
    monkeypatch.setenv("HWTUNE_ISA", "nonsense")
    with pytest.raises(UsageError):
        g.plan(8, 8, 8)


def test_unknown_and_unsupported_isa_are_usage_errors():
    with pytest.raises(UsageError, match="unknown ISA"):
        g.plan(4, 4, 4, isa="sse9")
    with pytest.raises(UsageError):
        g.gemm(np.ones((2, 2)), np.ones((2, 2)), isa="avx1024")
    with pytest.raises(UsageError):
        g.plan(4, 4, 4, isa=2)  # an index is not a name
    # An ISA index the C library has no variant for is refused by the C side.
    p = g.GemmPlan()
    desc = g.make_desc(4, 4, 4)
    status = g.lib.hwt_gemm_plan_make(ctypes.byref(desc), len(g.ISA_NAMES), 1, ctypes.byref(p))
    with pytest.raises(UsageError, match="not supported"):
        g.check(status, "plan")


@pytest.mark.parametrize("call", [
    lambda: g.gemm(np.ones((2, 3)), np.ones((4, 5))),               # K mismatch
    lambda: g.gemm(np.ones(3), np.ones((3, 2))),                    # not 2-D
    lambda: g.gemm(np.ones((2, 3)), np.ones((3, 2)), beta=1.0),     # beta without c
    lambda: g.gemm(np.ones((2, 3)), np.ones((3, 2)), bias=np.ones(3)),
    lambda: g.gemm(np.ones((2, 3)), np.ones((3, 2)), c=np.ones((2, 2))),  # float64 c
    lambda: g.gemm(np.ones((2, 3)), np.ones((3, 2)), nth=0),
    lambda: g.gemm(np.ones((2, 3)), np.ones((3, 2)), nth=257),
    lambda: g.plan(-1, 2, 2),
    lambda: g.plan(2, 2, 2**31),
    lambda: g.gemm(np.array([["a"]]), np.ones((1, 1))),
])
def test_bad_arguments_are_usage_errors(call):
    with pytest.raises(UsageError):
        call()


def test_empty_dimensions():
    out = g.gemm(np.ones((0, 3), np.float32), np.ones((3, 4), np.float32))
    assert out.shape == (0, 4)
    bias = np.arange(4, dtype=np.float32)
    out = g.gemm(np.ones((5, 0), np.float32), np.ones((0, 4), np.float32), bias=bias, nth=3)
    np.testing.assert_array_equal(out, np.tile(bias, (5, 1)))  # K = 0: bias only


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("M,K,N,nth,trans_a,trans_b", [
    c for c in _cases() if c[0] * c[1] * c[2] <= 10**7 and c[3] in (1, 3)])
def test_prepacked_b_matches_numpy(isa, M, K, N, nth, trans_a, trans_b):
    # B packed once, then reused for two different A (weights in a graph):
    # every share must find its columns in the shared packed layout, also on
    # the GEMV shapes (M <= 6), which take the packed path here.
    a, b, c0, bias = _operands(M, K, N, trans_a, trans_b, seed=M + K + N)
    pg = g.PackedGemm(b, M, trans_a=trans_a, trans_b=trans_b, beta=0.5, isa=isa, nth=nth)
    for rep in range(2):
        a_rep = a * (1 + rep)
        c = c0.copy()
        out = pg(a_rep, c=c, bias=bias)
        ref = _reference(a_rep, b, trans_a, trans_b, 0.5, c0, bias)
        tol = _tolerance(a_rep, b, trans_a, trans_b, K) + 4 * EPS32 * (np.abs(c0) + np.abs(bias))
        assert out is c
        err = np.abs(out.astype(np.float64) - ref)
        assert np.all(err <= tol), f"rep {rep}: max err {err.max()} (tol {tol.max()})"


@pytest.mark.parametrize("isa", ISAS)
def test_prepacked_b_never_reads_c_with_beta0_and_is_exact(isa):
    rng = np.random.default_rng(3)
    M, K, N = 64, 700, 200  # several kc blocks, an N edge panel
    a = rng.integers(-3, 4, (M, K)).astype(np.float32)
    b = rng.integers(-3, 4, (K, N)).astype(np.float32)
    pg = g.PackedGemm(b, M, isa=isa, nth=2)
    c = np.full((M, N), np.nan, np.float32)
    np.testing.assert_array_equal(pg(a, c=c), (a.astype(np.float64) @ b).astype(np.float32))
    with pytest.raises(UsageError):
        pg(np.ones((M + 1, K), np.float32))
