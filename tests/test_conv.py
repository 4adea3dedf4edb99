"""CONV2D kernels (the NCHW[x]c template on NCHW and blocked tensors, the
direct NCHW kernel) vs a float64 numpy reference, on every supported ISA;
the direct fallback; layout transforms; knob declaration and its agreement
with the graph op's validation."""

import itertools

import numpy as np
import pytest

from hwtune.errors import UsageError
from hwtune.graph.ops import OpError
from hwtune.native import conv
from hwtune.native.isa import supported_isas

ISAS = supported_isas()
# Input channels the stem kernel takes (HWT_CONV_STEM_MAX_C, conv_internal.h).
STEM_MAX_C = 4

# (N, C, H, W, K, R, S, stride, pad): 1x1/3x3/5x5, stride 1/2, pad 0/1/2, odd
# sizes, channel counts that are not multiples of 16, batch 1 and 2, and an
# output row wider than one register block (OW 37 > 28); unpadded stride_w 1
# cases, whose NCHW input the template reads without staging.
CASES = [
    (1, 3, 9, 9, 8, 1, 1, 1, 0),
    (2, 5, 7, 10, 7, 3, 3, 1, 1),
    (1, 20, 11, 13, 24, 3, 3, 2, 1),
    (1, 6, 12, 9, 10, 5, 5, 1, 2),
    (2, 17, 8, 8, 33, 5, 5, 2, 2),
    (1, 16, 15, 15, 32, 3, 3, 1, 0),
    (1, 32, 6, 6, 48, 1, 1, 2, 0),
    (1, 9, 5, 37, 18, 3, 3, 1, 1),
    (2, 4, 6, 7, 40, 3, 1, (2, 1), (1, 0)),
    (2, 8, 9, 10, 16, 3, 3, (2, 1), 0),  # NCHW read in place: unpadded, stride_w 1
    (1, 16, 9, 40, 24, 3, 3, 2, 1),  # stride-2 phases of 20 floats: the shuffle path
    (1, 8, 7, 50, 16, 3, 3, 3, 1),   # stride 3: the gather path
]


def ref_conv(x, w, b, stride, pad, relu):
    """float64 numpy reference: sum over taps of shifted, strided windows."""
    sh, sw = stride if isinstance(stride, tuple) else (stride, stride)
    ph, pw = pad if isinstance(pad, tuple) else (pad, pad)
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    w = w.astype(np.float64)
    n, c, hp, wp = x.shape
    k, _, r, s = w.shape
    oh, ow = (hp - r) // sh + 1, (wp - s) // sw + 1
    y = np.zeros((n, k, oh, ow))
    for i in range(r):
        for j in range(s):
            win = x[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
            y += np.einsum("nchw,kc->nkhw", win, w[:, :, i, j])
    if b is not None:
        y += b.astype(np.float64)[None, :, None, None]
    return np.maximum(y, 0) if relu else y


def tolerance(c, r, s):
    # Inputs in [-1, 1]: float32 accumulation of c*r*s products drifts by
    # about eps * sqrt(terms) typically and eps * terms at worst.
    return 1e-6 + 2 * np.finfo(np.float32).eps * c * r * s


def make(case, seed=0, x_range=1.0, b_range=1.0):
    """A case's seeded input, weight and bias (inputs in [-x_range, x_range],
    weights in [-1, 1], bias in [-b_range, b_range]), stride and pad."""
    n, c, h, w, k, r, s, stride, pad = case
    rng = np.random.default_rng(seed)
    x = rng.uniform(-x_range, x_range, (n, c, h, w)).astype(np.float32)
    wt = rng.uniform(-1, 1, (k, c, r, s)).astype(np.float32)
    b = rng.uniform(-b_range, b_range, k).astype(np.float32)
    return x, wt, b, stride, pad


def kernel_paths(case, isa):
    """(layout, params) of every kernel path the case runs on isa: direct,
    the GEMM path, the template at its defaults and at other legal knobs,
    Winograd F(2,3) in both layouts where the case is eligible, and the
    stem kernel where the input has few channels."""
    x, w, _, stride, pad = make(case)
    kn = conv.knobs(x.shape, w.shape, stride=stride, pad=pad, isa=isa)
    runs = [("NCHW-direct", None), ("NCHW", None), ("NCHWc", None),
            ("NCHWc", dict(ic_bn=kn["ic_bn"][0], oc_bn=kn["oc_bn"][-1], reg_n=kn["reg_n"][-1],
                           unroll_ker=1, reg_h=kn["reg_h"][-1]))]
    if 2 in kn["winograd"]:
        runs += [(lay, dict(conv.default_params(x.shape, w.shape, stride=stride, pad=pad,
                                                isa=isa), winograd=2))
                 for lay in ("NCHW", "NCHWc")]
    if x.shape[1] <= STEM_MAX_C:
        runs.append(("NCHW-stem", None))
    return runs


def param_sets(case, isa):
    """Default params plus legal combinations spanning each knob's range."""
    x, w, _, stride, pad = make(case)
    kn = conv.knobs(x.shape, w.shape, stride=stride, pad=pad, isa=isa)
    ic, oc, rn = kn["ic_bn"], kn["oc_bn"], kn["reg_n"]
    rh = kn["reg_h"][-1]
    sets = [None,
            dict(ic_bn=ic[0], oc_bn=oc[-1], reg_n=rn[-1], unroll_ker=1),
            dict(ic_bn=ic[-1], oc_bn=oc[0], reg_n=rn[0], unroll_ker=0, reg_h=rh),
            dict(ic_bn=ic[len(ic) // 2], oc_bn=oc[len(oc) // 2], reg_n=rn[len(rn) // 2],
                 unroll_ker=1, reg_h=rh)]
    return sets


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:7])) +
                         f"_s{c[7]}_p{c[8]}")
def test_conv_matches_numpy(isa, case):
    x, w, b, stride, pad = make(case)
    c, r, s = case[1], case[5], case[6]
    for relu, use_bias in ((False, True), (True, True), (False, False)):
        bias = b if use_bias else None
        want = ref_conv(x, w, bias, stride, pad, relu)
        tol = tolerance(c, r, s)
        runs = [("NCHW-direct", None)] + [(lay, p) for p in param_sets(case, isa)
                                          for lay in ("NCHW", "NCHWc")]
        for (layout, params), nth in itertools.product(runs, (1, 2, 3)):
            got = conv.conv2d(x, w, bias, stride=stride, pad=pad, relu=relu, layout=layout,
                              params=params, isa=isa, nth=nth)
            assert got.shape == want.shape
            err = np.abs(got - want).max()
            assert err <= tol, (layout, params, nth, relu, use_bias, err, tol)


@pytest.mark.parametrize("isa", ISAS)
def test_every_reg_n_and_oc_tail(isa):
    """Every declared reg_n (tails, blocks split to fit the registers) and
    output-channel blocks with masked tails (oc_bn 3, 12, 24, 40, 60)."""
    case = (1, 8, 4, 33, 120, 3, 3, 1, 1)
    x, w, b, stride, pad = make(case, seed=1)
    want = ref_conv(x, w, b, stride, pad, False)
    kn = conv.knobs(x.shape, w.shape, stride=stride, pad=pad, isa=isa)
    assert kn["reg_n"][-1] == 32
    for reg_n in kn["reg_n"]:
        for oc_bn in (3, 12, 24, 40, 60):
            assert oc_bn in kn["oc_bn"]
            got = conv.conv2d(x, w, b, stride=1, pad=1, layout="NCHWc", isa=isa,
                              params=dict(ic_bn=4, oc_bn=oc_bn, reg_n=reg_n, unroll_ker=reg_n % 2,
                                          reg_h=1 + (oc_bn + reg_n) % 2))
            assert np.abs(got - want).max() <= tolerance(8, 3, 3), (reg_n, oc_bn)


@pytest.mark.parametrize("isa", ISAS)
def test_reference_agrees(isa):
    x, w, b, stride, pad = make(CASES[4])
    got = conv.conv2d_ref(x, w, b, stride=stride, pad=pad, relu=True)
    assert np.abs(got - ref_conv(x, w, b, stride, pad, True)).max() <= 1e-6


def test_knob_declaration():
    x_shape, w_shape = (1, 64, 56, 56), (96, 64, 3, 3)
    for isa in ISAS:
        kn = conv.knobs(x_shape, w_shape, stride=1, pad=1, isa=isa)
        assert kn["ic_bn"] == [d for d in range(1, 65) if 64 % d == 0]
        assert kn["oc_bn"] == [d for d in range(1, 97) if 96 % d == 0]
        assert kn["reg_n"] == [1, 2, 4, 7, 8, 14, 16, 28, 32]
        assert kn["unroll_ker"] == [0, 1]
        assert kn["reg_h"] == [1, 2]
        dp = conv.default_params(x_shape, w_shape, stride=1, pad=1, isa=isa)
        assert all(dp[name] in kn[name] for name in conv.KNOBS)
    if "avx512" in ISAS:
        dp = conv.default_params(x_shape, w_shape, stride=1, pad=1, isa="avx512")
        assert dp == dict(ic_bn=32, oc_bn=32, reg_n=14, unroll_ker=0, reg_h=1, winograd=2)
    if "avx2" in ISAS:
        dp = conv.default_params(x_shape, w_shape, stride=1, pad=1, isa="avx2")
        # Two vectors per pixel (6 pixels x 2 ymm accumulators); reg_n 28
        # splits into 5 register blocks of 5-6 pixels per 56-pixel row.
        assert dp["oc_bn"] == 16 and dp["reg_n"] == 28
        # A 7-pixel row leaves blocks of 4 and 3 pixels (8 and 6 ymm
        # accumulators, under the 8 FMA chains in flight): two rows per block.
        dp = conv.default_params((1, 512, 7, 7), (512, 512, 3, 3), stride=1, pad=1, isa="avx2")
        assert dp["oc_bn"] == 16 and dp["reg_h"] == 2
    if "avx512" in ISAS:  # one 7-pixel x 2-zmm block already covers the latency
        dp = conv.default_params((1, 512, 7, 7), (512, 512, 3, 3), stride=1, pad=1, isa="avx512")
        assert dp["reg_h"] == 1


def test_default_on_awkward_channels():
    # K = 7 (prime): the only SIMD-friendly choice is unavailable; the default
    # still has to be legal and correct.
    case = (1, 7, 6, 29, 7, 3, 3, 1, 1)
    x, w, b, stride, pad = make(case)
    for isa in ISAS:
        dp = conv.default_params(x.shape, w.shape, stride=1, pad=1, isa=isa)
        assert dp["oc_bn"] == 7 and dp["ic_bn"] == 7
        got = conv.conv2d(x, w, b, stride=1, pad=1, layout="NCHWc", isa=isa)
        assert np.abs(got - ref_conv(x, w, b, 1, 1, False)).max() <= tolerance(7, 3, 3)


@pytest.mark.parametrize("bad", [
    dict(ic_bn=3, oc_bn=16, reg_n=8, unroll_ker=0),    # 3 does not divide C=64
    dict(ic_bn=16, oc_bn=0, reg_n=8, unroll_ker=0),
    dict(ic_bn=16, oc_bn=20, reg_n=8, unroll_ker=0),   # 20 does not divide K=32
    dict(ic_bn=16, oc_bn=16, reg_n=33, unroll_ker=0),
    dict(ic_bn=16, oc_bn=16, reg_n=13, unroll_ker=0),  # neither divides OW=14 nor 2^k
    dict(ic_bn=16, oc_bn=16, reg_n=0, unroll_ker=0),
    dict(ic_bn=16, oc_bn=16, reg_n=7, unroll_ker=2),
    dict(ic_bn=-16, oc_bn=16, reg_n=7, unroll_ker=0),
    dict(ic_bn=16, oc_bn=16, reg_n=7, unroll=1),       # unknown knob name
])
def test_illegal_params_rejected(bad):
    x = np.zeros((1, 64, 14, 14), np.float32)
    w = np.zeros((32, 64, 3, 3), np.float32)
    with pytest.raises(UsageError):
        conv.conv2d(x, w, stride=1, pad=1, layout="NCHWc", params=bad)


def test_bad_arguments_rejected():
    x = np.zeros((1, 8, 5, 5), np.float32)
    w = np.zeros((4, 8, 3, 3), np.float32)
    with pytest.raises(UsageError):
        conv.conv2d(x, np.zeros((4, 7, 3, 3), np.float32))   # channel mismatch
    with pytest.raises(UsageError):
        conv.conv2d(x, np.zeros((4, 8, 7, 7), np.float32))   # empty output
    with pytest.raises(UsageError):
        conv.conv2d(x, w, stride=0)
    with pytest.raises(UsageError):
        conv.conv2d(x, w, pad=-1)
    with pytest.raises(UsageError):
        conv.conv2d(x, w, layout="NHWC")
    with pytest.raises(UsageError):
        conv.conv2d(x, w, nth=0)
    with pytest.raises(UsageError):
        conv.conv2d(x, w, np.zeros(5, np.float32))           # bias of the wrong size
    with pytest.raises(UsageError):
        conv.conv2d(x, w, isa="sse9")


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("shape,blocks,rechunks", [
    ((2, 24, 5, 7), (1, 3, 8, 24), (2, 6, 12)),
    ((1, 96, 13, 11), (4, 16, 32, 96), (12, 32, 48))])
def test_activation_layout_round_trips(isa, shape, blocks, rechunks):
    """Every ISA's transposes against numpy's reshape: blocks under and over
    8 lanes, pixel counts off multiples of 8, several 64-pixel tiles."""
    rng = np.random.default_rng(3)
    n, c, h, w = shape
    x = rng.standard_normal(shape).astype(np.float32)
    for bn in blocks:
        xc = conv.to_nchwc(x, bn, nth=3, isa=isa)
        want = x.reshape(n, c // bn, bn, h, w).transpose(0, 1, 3, 4, 2)
        assert np.array_equal(xc, want)
        assert np.array_equal(conv.from_nchwc(xc, nth=2, isa=isa), x)
        for bn2 in rechunks:
            assert np.array_equal(conv.rechunk_nchwc(xc, bn2, nth=2, isa=isa),
                                  conv.to_nchwc(x, bn2))
    with pytest.raises(UsageError):
        conv.to_nchwc(x, 5)
    with pytest.raises(UsageError):
        conv.to_nchwc(x, 0 - 1)


def test_weight_layout_round_trips():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((12, 6, 3, 5)).astype(np.float32)
    for ib, ob in ((1, 1), (2, 4), (6, 12), (3, 6)):
        wb = conv.to_blocked_weights(w, ib, ob)
        want = w.reshape(12 // ob, ob, 6 // ib, ib, 3, 5).transpose(0, 2, 4, 5, 3, 1)
        assert np.array_equal(wb, want)
        assert np.array_equal(conv.from_blocked_weights(wb), w)
    with pytest.raises(UsageError):
        conv.to_blocked_weights(w, 4, 4)


def test_chained_convs_with_different_blocks():
    """Two chained convs whose blocks differ (oc_bn 16 -> ic_bn 16 -> oc_bn 8)."""
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (1, 16, 9, 9)).astype(np.float32)
    w1 = rng.uniform(-1, 1, (32, 16, 3, 3)).astype(np.float32)
    w2 = rng.uniform(-1, 1, (16, 32, 1, 1)).astype(np.float32)
    y1 = conv.conv2d(x, w1, pad=1, relu=True, layout="NCHWc",
                     params=dict(ic_bn=8, oc_bn=16, reg_n=8, unroll_ker=0))
    y2 = conv.conv2d(y1, w2, layout="NCHWc",
                     params=dict(ic_bn=16, oc_bn=8, reg_n=9, unroll_ker=1))
    want = ref_conv(ref_conv(x, w1, None, 1, 1, True).astype(np.float32), w2, None, 1, 0, False)
    assert np.abs(y2 - want).max() <= tolerance(32, 1, 1) + tolerance(16, 3, 3) * 32


@pytest.mark.parametrize("isa", ISAS)
def test_plan_runs_in_blocked_layout(isa):
    """Conv2dPlan reads NCHW[ic_bn]c and writes NCHW[oc_bn]c directly, and
    rerunning into the same output gives the same result."""
    case = (2, 12, 7, 9, 24, 3, 3, 1, 1)
    x, w, b, stride, pad = make(case, seed=6)
    params = dict(ic_bn=4, oc_bn=8, reg_n=9, unroll_ker=1, reg_h=2, winograd=0)
    plan = conv.Conv2dPlan(x.shape, w, b, pad=1, relu=True, layout="NCHWc", params=params,
                           isa=isa, nth=2)
    assert plan.params == params
    assert plan.in_shape == (2, 3, 7, 9, 4) and plan.out_shape == (2, 3, 7, 9, 8)
    y = plan.run(conv.to_nchwc(x, 4))
    want = ref_conv(x, w, b, 1, 1, True)
    assert np.abs(conv.from_nchwc(y) - want).max() <= tolerance(12, 3, 3)
    y2 = plan.run(conv.to_nchwc(x, 4), out=np.full_like(y, np.nan))
    assert np.array_equal(y, y2)
    with pytest.raises(UsageError):
        plan.run(x)  # NCHW input to an NCHWc plan


@pytest.mark.parametrize("isa", ISAS)
def test_nchw_runs_the_template_and_falls_back_to_direct(isa):
    """NCHW plans use the template (default or given params) unless the
    kernel is wider than the template takes; then the direct kernel runs."""
    x, w, b, _, _ = make((1, 16, 6, 30, 24, 3, 3, 1, 1), seed=7)
    plan = conv.Conv2dPlan(x.shape, w, b, pad=1, isa=isa, nth=2)
    assert plan.layout == "NCHW"
    assert plan.params == conv.default_params(x.shape, w.shape, pad=1, isa=isa)
    assert np.abs(plan.run(x) - ref_conv(x, w, b, 1, 1, False)).max() <= tolerance(16, 3, 3)
    params = dict(ic_bn=8, oc_bn=12, reg_n=10, unroll_ker=1, reg_h=2, winograd=0)
    plan = conv.Conv2dPlan(x.shape, w, b, pad=1, relu=True, params=params, isa=isa, nth=3)
    assert plan.params == params and plan.layout == "NCHW"
    assert np.abs(plan.run(x) - ref_conv(x, w, b, 1, 1, True)).max() <= tolerance(16, 3, 3)
    wide = np.ones((2, 2, 1, 65), np.float32)
    xw = np.ones((1, 2, 2, 70), np.float32)
    plan = conv.Conv2dPlan(xw.shape, wide, pad=(0, 1), isa=isa)
    assert plan.layout == "NCHW-direct" and plan.params is None
    assert np.abs(plan.run(xw) - ref_conv(xw, wide, None, 1, (0, 1), False)).max() <= 1e-4
    with pytest.raises(UsageError):
        conv.Conv2dPlan(xw.shape, wide, pad=(0, 1), isa=isa,
                        params=dict(ic_bn=1, oc_bn=1, reg_n=1, unroll_ker=0))


def test_graph_op_knobs_are_the_c_declaration():
    """The graph op's conv2d_knobs is the C template's declaration, so a
    reg_n the kernel takes is legal in model.json and one it refuses is not."""
    from hwtune.graph.ops import get as get_op
    from hwtune.graph.ops.conv import conv2d_knobs
    spec = get_op("conv2d")
    for x_shape, w_shape, stride, pad in (((1, 12, 14, 14), (16, 12, 3, 3), 1, 1),
                                          ((1, 9, 5, 37), (18, 9, 3, 3), 1, 1),
                                          ((1, 20, 11, 13), (24, 20, 3, 3), 2, 1)):
        attrs = spec.normalize_attrs({"padding": pad, "stride": stride})
        kn = conv2d_knobs([x_shape, w_shape], attrs)
        c = conv.knobs(x_shape, w_shape, stride=stride, pad=pad)
        assert kn["ic_bn"] == c["ic_bn"] and kn["oc_bn"] == c["oc_bn"]
        assert kn["reg_n"] == c["reg_n"]
        assert kn["unroll_ker"] == [False, True]
    attrs = spec.normalize_attrs({"padding": 1, "reg_n": 4})  # power of two, OW 14
    assert spec.infer([(1, 12, 14, 14), (16, 12, 3, 3)], attrs, 1) == [(1, 16, 14, 14)]
    bad = spec.normalize_attrs({"padding": 1, "reg_n": 13})
    with pytest.raises(OpError, match="13 is not legal here"):
        spec.infer([(1, 12, 14, 14), (16, 12, 3, 3)], bad, 1)


@pytest.mark.parametrize("isa", ISAS)
def test_engine_runs_nchw_convs_through_the_template(isa):
    """The engine's NCHW conv2d: default params, every knob given as an
    attribute (reg_h included), and an unpadded conv whose input the
    template reads in place, against the numpy reference on 1-3 threads."""
    from hwtune.engine.instance import NativeEngine
    from hwtune.graph import load_model, run_reference
    from hwtune.native.isa import isa_index
    knobs = {"ic_bn": 4, "oc_bn": 12, "reg_n": 4, "unroll_ker": True, "reg_h": 2}
    model = {
        "format_version": 1, "name": "nchw-template", "seed": 11,
        "inputs": [{"name": "x", "shape": [2, 8, 9, 11]}],
        "params": [{"name": "w1", "shape": [24, 8, 3, 3]}, {"name": "b1", "shape": [24]},
                   {"name": "w2", "shape": [24, 24, 3, 3]},
                   {"name": "w3", "shape": [16, 24, 1, 1]}, {"name": "b3", "shape": [16]}],
        "ops": [{"name": "c1", "op": "conv2d", "inputs": ["x", "w1", "b1"],
                 "attrs": {"padding": 1}},
                {"name": "c2", "op": "conv2d", "inputs": ["c1", "w2"],
                 "attrs": dict(knobs, padding=1, stride=[2, 1])},
                {"name": "c3", "op": "conv2d", "inputs": ["c2", "w3", "b3"]}],
        "outputs": ["c1", "c2", "c3"]}
    graph = load_model(model)
    want = run_reference(graph)
    for threads in (1, 2, 3):
        with NativeEngine(graph, threads=threads, isa=isa_index(isa)) as eng:
            eng.run()
            got = eng.outputs()
        for name, c in (("c1", 8 * 9), ("c2", 24 * 9), ("c3", 24)):
            tol = 1e-5 + 2 * np.finfo(np.float32).eps * c * 8
            err = np.abs(got[name] - want[name]).max()
            assert err <= tol, (name, threads, err)
