"""The eltwise, pool, norm and movement op families, and the convolutions
(conv2d's dilated and asymmetric forms, conv_transpose2d), in C (engine/ops/)
against the numpy reference, one-op models driven through ops_harness with
nth in {1, 2, 3} shares, on every ISA variant this CPU supports."""

import math

import numpy as np
import pytest

from hwtune.engine.ops_harness import run_ops
from hwtune.graph import load_model
from hwtune.graph.reference import run_reference
from hwtune.native import eltwise as ew
from hwtune.native.eltwise import max_abs_error
from hwtune.native.isa import supported_isas
from hwtune.native.ops import find_impl

EXACT, ARITH = "exact", "arith"
# Float accumulation over K against the float64 reference: sums of K products of
# |x| <= 3 cancel to small results; 1e-5 absolute holds with ~7x margin at K=9.
GEMM = "gemm"
# Convolutions sum C*KH*KW (<= 256 here) products of |x| <= 3 in float:
# 2 eps per term at worst relative to the sum of |terms| (tests/test_conv.py).
CONV = "conv"


def model(op, in_shapes, attrs=None, n_out=1, params=()):
    """A one-op model: inputs x0, x1, ... (params named in `params` are
    weights instead), outputs y0, y1, ..."""
    tensors = [{"name": f"x{i}", "shape": list(s)} for i, s in enumerate(in_shapes)]
    outs = [f"y{i}" for i in range(n_out)]
    o = {"name": "op", "op": op, "inputs": [t["name"] for t in tensors], "outputs": outs}
    if attrs:
        o["attrs"] = attrs
    return load_model({
        "format_version": 1, "name": f"one_{op}", "seed": 7,
        "inputs": [t for t in tensors if t["name"] not in params],
        "params": [t for t in tensors if t["name"] in params],
        "ops": [o], "outputs": outs})


BCAST = [  # (a shape, b shape): same, scalar, row, column, 4-D channel
    ((4, 37), (4, 37)), ((4, 37), ()), ((), (5, 3)), ((4, 37), (37,)), ((4, 37), (4, 1)),
    ((2, 5, 3, 7), (1, 5, 1, 1)), ((5, 1, 1), (2, 5, 3, 7)), ((3, 1, 7), (1, 4, 1)),
    ((1000,), (1000,)),
]
# The element-wise family, from the C op table: a new row is covered here
# without a new case. Tolerance: the variant's documented bound (0: exact).
EW_GRAPH_OPS = [op for op in ew.TABLE.values() if op.graph_op]
BINARY = [op.name for op in EW_GRAPH_OPS if op.kind == "binary"]
UNARY = [op.name for op in EW_GRAPH_OPS if op.kind == "unary"]
NARY = [op.name for op in EW_GRAPH_OPS if op.kind == "nary"]


def _attr_cases(op):
    """Defaults, and for ops with attributes values away from them (a bound
    that defaults to infinity, clip's, becomes the offset itself)."""
    attrs = ew.TABLE[op].attrs
    away = (-1.5, 0.25)
    return [{}] + ([{name: (default if math.isfinite(default) else 0.0) + away[i]
                     for i, (name, default) in enumerate(attrs)}] if attrs else [])


CASES = [(op, [a, b], attrs, 1, op) for op in BINARY for a, b in BCAST
         for attrs in _attr_cases(op)]
CASES += [(op, shapes, {}, 1, op) for op in NARY
          for shapes in ([(4, 37), (37,), (4, 1)], [(2, 3, 5, 5)] * 5)]
CASES += [(op, [(3, 333)], attrs, 1, op) for op in UNARY for attrs in _attr_cases(op)]
CASES += [
    ("pool2d", [(2, 3, 9, 11)], {"mode": "max", "kernel": 3, "stride": 2}, 1, EXACT),
    ("pool2d", [(2, 3, 9, 11)], {"mode": "max", "kernel": 3, "stride": 2, "padding": 1,
                                 "ceil_mode": True}, 1, EXACT),
    ("pool2d", [(2, 3, 8, 8)], {"mode": "avg", "kernel": [3, 2], "stride": [2, 1],
                                "padding": [1, 1]}, 1, ARITH),
    ("pool2d", [(1, 4, 7, 7)], {"mode": "avg", "kernel": 3, "stride": 2, "padding": 1,
                                "ceil_mode": True, "count_include_pad": True}, 1, ARITH),
    ("pool2d", [(1, 2, 6, 6, 8)], {"mode": "max", "kernel": 2, "layout": "NCHWc"}, 1, EXACT),
    # Same-size stride-1 max windows (GoogLeNet's 3x3/1 pad 1) run whole
    # chunks of rows; 40 x 16-channel rows give 6-row chunks, so 13 rows end
    # in a partial chunk and the thread shares cut chunks.
    ("pool2d", [(2, 3, 9, 11)], {"mode": "max", "kernel": 3, "stride": 1, "padding": 1}, 1,
     EXACT),
    ("pool2d", [(1, 2, 13, 40, 16)], {"mode": "max", "kernel": 3, "stride": 1, "padding": 1,
                                      "layout": "NCHWc"}, 1, EXACT),
    ("pool2d", [(1, 2, 13, 40, 16)], {"mode": "max", "kernel": 5, "stride": 1, "padding": 2,
                                      "layout": "NCHWc"}, 1, EXACT),
    ("pool2d", [(1, 3, 8, 9, 4)], {"mode": "max", "kernel": 3, "stride": 2, "padding": 1,
                                   "layout": "NCHWc"}, 1, EXACT),
    ("pool2d", [(1, 3, 5, 6)], {"mode": "max", "kernel": 1, "stride": 1}, 1, EXACT),
    ("pool2d", [(1, 2, 7, 6, 4)], {"mode": "avg", "kernel": 3, "stride": 2, "padding": 1,
                                   "layout": "NCHWc"}, 1, ARITH),
    # Asymmetric padding (padding_end): TF "same" windows (stride 1: the
    # kernels' flat multi-row path with more padding after than before).
    ("pool2d", [(2, 3, 9, 11)], {"mode": "max", "kernel": 2, "stride": 1,
                                 "padding_end": 1}, 1, EXACT),
    ("pool2d", [(2, 3, 8, 10)], {"mode": "avg", "kernel": 3, "stride": 2,
                                 "padding_end": 1}, 1, ARITH),
    ("pool2d", [(1, 3, 8, 9)], {"mode": "avg", "kernel": 3, "stride": 2, "padding": [1, 0],
                                "padding_end": [0, 1], "count_include_pad": True,
                                "ceil_mode": True}, 1, ARITH),
    ("pool2d", [(1, 2, 6, 7, 8)], {"mode": "max", "kernel": 3, "stride": 2, "padding": 0,
                                   "padding_end": 1, "layout": "NCHWc"}, 1, EXACT),
    # The vector kernels' odd shapes: channel blocks off the vector width
    # (3, 24) and of one or two vectors (8, 16), W = 1, H below the window,
    # same-size averages (their flat multi-row path) both ways of counting.
    ("pool2d", [(1, 2, 7, 9, 3)], {"mode": "max", "kernel": 3, "stride": 1, "padding": 1,
                                   "layout": "NCHWc"}, 1, EXACT),
    ("pool2d", [(1, 1, 9, 7, 24)], {"mode": "avg", "kernel": 3, "stride": 2, "padding": 1,
                                    "ceil_mode": True, "layout": "NCHWc"}, 1, ARITH),
    ("pool2d", [(1, 2, 6, 5, 16)], {"mode": "avg", "kernel": 3, "stride": 1, "padding": 1,
                                    "count_include_pad": True, "layout": "NCHWc"}, 1, ARITH),
    ("pool2d", [(2, 3, 7, 1)], {"mode": "max", "kernel": 3, "stride": 1, "padding": 1}, 1, EXACT),
    ("pool2d", [(1, 3, 2, 9)], {"mode": "avg", "kernel": 3, "stride": 1, "padding": 1}, 1, ARITH),
    ("pool2d", [(1, 3, 2, 9, 8)], {"mode": "max", "kernel": 3, "stride": 2, "padding": 1,
                                   "ceil_mode": True, "layout": "NCHWc"}, 1, EXACT),
    ("pool2d", [(2, 4, 28, 28)], {"mode": "avg", "kernel": 3, "stride": 1, "padding": 1,
                                  "count_include_pad": True}, 1, ARITH),
    ("pool2d", [(2, 4, 28, 28)], {"mode": "avg", "kernel": 3, "stride": 1, "padding": 1}, 1,
     ARITH),
    ("global_pool2d", [(2, 5, 7, 7)], {"mode": "avg"}, 1, ARITH),
    ("global_pool2d", [(2, 5, 7, 7)], {"mode": "max"}, 1, EXACT),
    ("global_pool2d", [(2, 2, 3, 3, 8)], {"mode": "avg", "layout": "NCHWc"}, 1, ARITH),
    # The accumulator chains: NCHW planes with a tail past the 8 chains
    # (13x13), NCHWc blocks wider than the 16 lanes done at once (40) and
    # shares that start and end inside a block (nth 2, 3).
    ("global_pool2d", [(1, 6, 13, 13)], {"mode": "avg"}, 1, ARITH),
    ("global_pool2d", [(1, 6, 13, 13)], {"mode": "max"}, 1, EXACT),
    ("global_pool2d", [(1, 3, 5, 5, 40)], {"mode": "avg", "layout": "NCHWc"}, 1, ARITH),
    ("global_pool2d", [(1, 3, 5, 5, 40)], {"mode": "max", "layout": "NCHWc"}, 1, EXACT),
    ("batch_norm", [(2, 6, 5, 5), (6,), (6,), (6,), (6,)], {"epsilon": 1e-3}, 1, ARITH),
    ("batch_norm", [(3, 6)] + [(6,)] * 4, "bn_params", 1, ARITH),
    ("batch_norm", [(2, 2, 3, 3, 8)] + [(16,)] * 4, {"layout": "NCHWc"}, 1, ARITH),
    ("softmax", [(4, 37)], {}, 1, ARITH),
    # attention (q, kt, v): 12 heads of ViT's 197 tokens (4 row blocks a
    # head, the last one shorter) and 5 heads of 70, shared at nth 1, 2, 3.
    ("attention", [(12, 197, 16), (12, 16, 197), (12, 197, 8)], {"scale": 0.25}, 1, GEMM),
    ("attention", [(5, 70, 8), (5, 8, 70), (5, 70, 12)], {"scale": 0.5}, 1, GEMM),
    ("softmax", [(3, 5, 7)], {"axis": 1}, 1, ARITH),
    ("softmax", [(3, 5, 7)], {"axis": 0}, 1, ARITH),
    ("concat", [(2, 3, 4), (2, 5, 4), (2, 1, 4)], {"axis": 1}, 1, EXACT),
    ("concat", [(3, 17), (3, 40)], {"axis": -1}, 1, EXACT),
    ("concat", [(2, 3), (4, 3)], {"axis": 0}, 1, EXACT),
    ("split", [(2, 9, 4)], {"axis": 1}, 3, EXACT),
    ("split", [(5, 40)], {"axis": -1, "sizes": [7, 30, 3]}, 3, EXACT),
    ("slice", [(4, 10, 3)], {"axis": 1, "begin": 2, "end": -3}, 1, EXACT),
    ("slice", [(40, 3)], {"axis": 0, "begin": -17}, 1, EXACT),
    ("reshape", [(4, 6, 5)], {"shape": [-1, 10]}, 1, EXACT),
    ("flatten", [(2, 3, 4, 5)], {"axis": 2}, 1, EXACT),
    ("transpose", [(2, 3, 4, 5)], {"perm": [0, 2, 1, 3]}, 1, EXACT),
    ("transpose", [(3, 1, 7)], {}, 1, EXACT),
    ("transpose", [(5, 17)], {"perm": [1, 0]}, 1, EXACT),
    ("transpose", [(2, 3, 4, 5)], {"perm": [3, 0, -2, 1]}, 1, EXACT),
    # The tiled form (movement.c): a batch of matrix transposes once size-1
    # axes drop and neighbouring axes merge. NCHW <-> NHWC with tile edges
    # (17 x 35 = 595 pixels, 19 channels), size-1 axes inside, a batch of
    # 3, plain 2-D, a rotation (two merged axes against one), and a perm
    # that only looks alike (no two axes merge: it stays a row gather).
    ("transpose", [(2, 19, 17, 35)], {"perm": [0, 2, 3, 1]}, 1, EXACT),
    ("transpose", [(2, 17, 35, 19)], {"perm": [0, 3, 1, 2]}, 1, EXACT),
    ("transpose", [(1, 33, 1, 40)], {"perm": [0, 3, 2, 1]}, 1, EXACT),
    ("transpose", [(3, 1, 24, 9, 1)], {"perm": [1, 0, 4, 3, 2]}, 1, EXACT),
    ("transpose", [(48, 16)], {"perm": [1, 0]}, 1, EXACT),
    ("transpose", [(9, 40, 20)], {"perm": [2, 0, 1]}, 1, EXACT),
    ("transpose", [(4, 20, 3, 24)], {"perm": [0, 3, 2, 1]}, 1, EXACT),
    # pad: every axis, only outer axes (whole rows of value), only the last,
    # a 1-D tensor, rows fewer than threads.
    ("pad", [(2, 3, 5, 7)], {"pads": [0, 1, 2, 1, 1, 0, 3, 2], "value": -1.5}, 1, EXACT),
    ("pad", [(3, 5, 7)], {"pads": [2, 1, 0, 0, 3, 0]}, 1, EXACT),
    ("pad", [(3, 17)], {"pads": [0, 5, 0, 11], "value": 2.0}, 1, EXACT),
    ("pad", [(9,)], {"pads": [3, 4], "value": 0.5}, 1, EXACT),
    ("pad", [(1, 1)], {"pads": [0, 0, 1, 0]}, 1, EXACT),
    # gather: repeats, reversed and negative indices, the last axis (rows of
    # one float), the first (whole blocks)
    ("gather", [(2, 7, 5)], {"axis": 1, "indices": [6, 0, 0, -2, 3]}, 1, EXACT),
    ("gather", [(4, 9)], {"axis": -1, "indices": [8, 6, 4, 2, 0]}, 1, EXACT),
    ("gather", [(5, 3, 4)], {"indices": [4, 1]}, 1, EXACT),
    ("layer_norm", [(2, 5, 16), (16,), (16,)], {}, 1, ARITH),
    ("layer_norm", [(3, 4, 5), (4, 5)], {"axis": 1, "epsilon": 1e-3}, 1, ARITH),
    # the kernel's vector rows with a masked tail, and ConvNeXt's rows of 96 with bias
    ("layer_norm", [(5, 33), (33,), (33,)], {"axis": 1, "epsilon": 1e-5}, 1, ARITH),
    ("layer_norm", [(1, 7, 96), (96,), (96,)], {"axis": 2, "epsilon": 1e-6}, 1, ARITH),
    ("layer_norm", [(7, 1), (1,), (1,)], {}, 1, ARITH),
    ("batch_matmul", [(2, 3, 5, 9), (2, 3, 9, 4)], {}, 1, GEMM),
    ("batch_matmul", [(2, 1, 5, 9), (3, 9, 4)], {}, 1, GEMM),
    ("batch_matmul", [(1, 9), (2, 3, 9, 7)], {}, 1, GEMM),
    ("batch_matmul", [(3, 17, 9), (9, 33)], {}, 1, GEMM),
    # conv2d's template with dilation and asymmetric padding, NCHW (staged
    # and read in place) and NCHW[x]c; conv_transpose2d's col2im GEMM.
    ("conv2d", [(1, 4, 9, 10), (6, 4, 3, 3), (6,)], {"dilation": 2, "padding": 2}, 1, CONV),
    ("conv2d", [(2, 3, 11, 9), (5, 3, 3, 2)], {"dilation": [2, 3], "stride": 2,
                                               "padding": [1, 2], "padding_end": [0, 1]},
     1, CONV),
    ("conv2d", [(1, 5, 8, 8), (4, 5, 2, 2)], {"padding_end": 1}, 1, CONV),
    ("conv2d", [(1, 6, 10, 12), (8, 6, 3, 3)], {"dilation": [1, 3]}, 1, CONV),
    ("conv2d", [(1, 2, 9, 9, 4), (2, 2, 3, 3, 4, 4)], {"layout": "NCHWc", "dilation": 2,
                                                       "padding": [2, 1],
                                                       "padding_end": [1, 2]}, 1, CONV),
    ("conv_transpose2d", [(2, 4, 5, 6), (4, 3, 3, 3), (3,)],
     {"stride": 2, "padding": 1, "output_padding": 1}, 1, CONV),
    ("conv_transpose2d", [(1, 3, 4, 5), (3, 5, 4, 3)],
     {"stride": [2, 3], "dilation": [2, 1], "padding": [1, 0], "padding_end": [0, 2]}, 1,
     CONV),
    ("conv_transpose2d", [(1, 6, 7, 7), (6, 2, 1, 1)], {}, 1, CONV),
    ("conv_transpose2d", [(1, 16, 6, 6), (16, 8, 4, 4), (8,)], {"stride": 2, "padding": 1},
     1, CONV),
]


def _id(case):
    op, shapes, attrs, n_out, _ = case
    return f"{op}-{'-'.join('x'.join(map(str, s)) or 'scalar' for s in shapes)}" + (
        f"-{attrs}" if attrs and attrs != "bn_params" else "")


def _build(case):
    op, shapes, attrs, n_out, _ = case
    if op == "batch_norm":
        params = ("x1", "x2", "x3", "x4")
        g = model(op, shapes, None if attrs == "bn_params" else attrs, n_out, params)
        # var must be positive: the reference's default init is symmetric.
        rng = np.random.default_rng(3)
        pv = {"x4": rng.uniform(0.5, 2.0, shapes[4]).astype(np.float32)}
        return g, pv
    return model(op, shapes, attrs, n_out), {}


def _inputs(case, g):
    """Inputs with no b near 0 for div/mod (the quotient is ill-conditioned
    there: one ulp in b moves a floored mod by a whole b)."""
    rng = np.random.default_rng(11)
    out = {}
    for t in g.inputs:
        a = rng.uniform(-3, 3, g.shapes[t.name]).astype(np.float32)
        if case[0] in ("div", "mod") and t.name == "x1":
            a = np.where(np.abs(a) < 0.25, np.float32(0.5), a).astype(np.float32)
        out[t.name] = a
    return out


def _tolerance(kind, isa):
    if kind == EXACT:
        return 0.0, 0.0
    if kind == ARITH:
        return 1e-6, 1e-6
    if kind == GEMM:
        return 1e-5, 1e-5
    if kind == CONV:
        return 1e-5, 1e-3
    # An element-wise op: its variant's documented bound (absolute up to 1,
    # relative above), plus the reference's float rounding.
    bound = max_abs_error(kind, isa)
    return (0.0, 0.0) if bound == 0 else (bound + 1e-7, bound + 1e-7)


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_op_matches_reference(case, isa):
    g, params = _build(case)
    inputs = _inputs(case, g)
    want = run_reference(g, inputs=inputs, params=params)
    rtol, atol = _tolerance(case[4], isa)
    for nth in (1, 2, 3):
        got = run_ops(g, nth=nth, isa=isa, inputs=inputs, params=params)
        for name in g.outputs:
            assert got[name].shape == want[name].shape
            if rtol == atol == 0.0:
                np.testing.assert_array_equal(got[name], want[name], err_msg=f"nth={nth}")
            else:
                np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol,
                                           err_msg=f"nth={nth}")


def test_thread_shares_are_disjoint_and_cover():
    """Any share count gives bit-identical outputs, and every element is
    written (the harness fills outputs with NaN first)."""
    g = model("add", [(3, 1000), (1000,)])
    inputs = _inputs(("add",), g)
    ref = run_ops(g, nth=1, inputs=inputs)["y0"]
    for nth in (2, 3, 5, 8):
        got = run_ops(g, nth=nth, inputs=inputs)["y0"]
        assert not np.isnan(got).any()
        np.testing.assert_array_equal(got, ref)


def test_floored_mod_sign_follows_divisor():
    g = model("mod", [(4,), (4,)])
    a = np.array([-7.0, 7.0, -6.0, 5.5], np.float32)
    b = np.array([3.0, -3.0, 3.0, -5.5], np.float32)
    got = run_ops(g, inputs={"x0": a, "x1": b})["y0"]
    np.testing.assert_array_equal(got, np.mod(a, b))
    assert np.signbit(got[3]) and np.signbit(np.mod(a, b)[3])


def test_every_family_op_type_is_registered():
    for op in BINARY + NARY + UNARY + ["pool2d", "global_pool2d", "batch_norm", "softmax",
                                       "concat", "split", "slice", "reshape", "flatten"]:
        assert find_impl(op).type.decode() == op


def test_prepare_refuses_bad_shapes():
    """A graph the model validator would reject, built straight in C: the
    op reports the problem instead of running off its buffers."""
    from hwtune.native.graph import NativeGraph
    from hwtune.native.ops import OpCtx
    import ctypes
    impl = find_impl("add")
    with NativeGraph() as ng:
        a = ng.add_tensor("a", [4, 3], "input")
        b = ng.add_tensor("b", [4, 2], "input")
        y = ng.add_tensor("y", [4, 3], "output")
        op = ng.add_op("bad", "add", [a, b], [y])
        ctx = OpCtx()
        ctx.g, ctx.op, ctx.n_in, ctx.n_out, ctx.max_threads = ng.handle, op, 2, 1, 1
        err = ctypes.create_string_buffer(256)
        assert impl.prepare(ctypes.byref(ctx), err, 256) < 0
        assert b"broadcast" in err.value


@pytest.mark.parametrize("op,shapes,attrs", [
    ("maximum", [(2, 9), (9,)], {}),
    ("minimum", [(2, 9), (2, 9)], {}),
    ("pool2d", [(1, 2, 6, 6)], {"mode": "max", "kernel": 3, "stride": 2, "padding": 1}),
    ("pool2d", [(1, 1, 6, 6, 8)], {"mode": "max", "kernel": 2, "layout": "NCHWc"}),
    ("global_pool2d", [(1, 3, 4, 4)], {"mode": "max"}),
    ("global_pool2d", [(1, 3, 13, 13)], {"mode": "max"}),
    ("global_pool2d", [(1, 2, 3, 3, 40)], {"mode": "max", "layout": "NCHWc"}),
])
def test_nan_propagates_like_numpy(op, shapes, attrs):
    g = model(op, shapes, attrs)
    inputs = _inputs((op,), g)
    for a in inputs.values():
        a.reshape(-1)[::7] = np.nan
    want = run_reference(g, inputs=inputs)["y0"]
    assert np.isnan(want).any()
    for nth in (1, 3):
        np.testing.assert_array_equal(run_ops(g, nth=nth, inputs=inputs)["y0"], want)


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("shape,attrs", [
    ((1, 4, 6, 7), {}), ((1, 1, 6, 7, 4), {"layout": "NCHWc"}),
    ((1, 4, 6, 7), {"stride": 2}),
])
def test_max_pool_propagates_nan(isa, shape, attrs):
    """A NaN makes every window that holds it NaN, as np.maximum does; the
    same-size path finds it and redoes those rows with the propagating max."""
    g = model("pool2d", [shape], dict({"mode": "max", "kernel": 3, "stride": 1, "padding": 1},
                                      **attrs))
    x = np.random.default_rng(5).uniform(-3, 3, shape).astype(np.float32)
    x[0, 0, 2, 4] = np.nan
    want = run_reference(g, inputs={"x0": x})["y0"]
    assert np.isnan(want).any()
    for nth in (1, 2):
        got = run_ops(g, nth=nth, isa=isa, inputs={"x0": x})["y0"]
        np.testing.assert_array_equal(got, want)
