"""The rnn op family in C (engine/ops/rnn.c: lstm_cell) against the numpy
reference: awkward shapes, every optional input, x_row, 1/2/3/7 thread
shares, on every ISA variant this CPU supports; and the shape checks of
prepare."""

import ctypes

import numpy as np
import pytest

from hwtune.engine.ops_harness import run_ops
from hwtune.native.ops import find_impl
from hwtune.graph import load_model
from hwtune.graph.reference import run_reference
from hwtune.native.eltwise import max_abs_error
from hwtune.native.isa import supported_isas


def cell_model(batch, hidden, x_rows=None, bias=False, x_row=0):
    """lstm_cell on inputs g [B, 4H], c0 [B, H] (, xg [x_rows, 4H]) (, param b)."""
    tensors = [{"name": "g", "shape": [batch, 4 * hidden]},
               {"name": "c0", "shape": [batch, hidden]}]
    if x_rows:
        tensors.append({"name": "xg", "shape": [x_rows, 4 * hidden]})
    params = [{"name": "b", "shape": [4 * hidden]}] if bias else []
    op = {"name": "cell", "op": "lstm_cell",
          "inputs": [t["name"] for t in tensors + params], "outputs": ["h", "c"]}
    if x_row:
        op["attrs"] = {"x_row": x_row}
    return load_model({"format_version": 1, "name": "one_lstm_cell", "seed": 5,
                       "inputs": tensors, "params": params, "ops": [op],
                       "outputs": ["h", "c"]})


# (batch, hidden, x_gates rows or None, bias, x_row)
CASES = [
    (1, 1, None, False, 0), (3, 5, None, False, 0), (2, 37, 2, False, 0),
    (5, 100, 15, True, 10), (1, 512, 4, True, 3), (64, 512, 320, False, 128),
    (4, 1000, 4, True, 0), (7, 9, 9, False, 2),
]


def _inputs(g):
    rng = np.random.default_rng(9)
    return {t.name: rng.uniform(-4, 4, g.shapes[t.name]).astype(np.float32) for t in g.inputs}


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("case", CASES, ids=lambda c: "b{}-h{}-x{}-bias{}-row{}".format(*c))
def test_lstm_cell_matches_reference(case, isa):
    g = cell_model(*case)
    inputs = _inputs(g)
    want = run_reference(g, inputs=inputs)
    # |c_prev| <= 4: the activation errors reach c through sf c_prev + si tg
    # and h through so tanh(c).
    atol = 6 * (max_abs_error("sigmoid", isa) + max_abs_error("tanh", isa)) + 1e-6
    for nth in (1, 2, 3, 7):
        got = run_ops(g, nth=nth, isa=isa, inputs=inputs)
        for name in ("h", "c"):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=atol,
                                       err_msg=f"{name} nth={nth}")


def test_lstm_cell_is_registered():
    assert find_impl("lstm_cell").type.decode() == "lstm_cell"


@pytest.mark.parametrize("shapes,x_row,message", [
    ([[4, 20], [4, 5], [6, 20]], 3, b"past the rows"),
    ([[4, 20], [4, 6]], 0, b"c_prev must be"),
    ([[4, 18], [4, 4]], 0, b"gates must be"),
    ([[4, 20], [4, 5], [6, 16]], 0, b"x_gates must be"),
    ([[4, 20], [4, 5]], 1, b"x_row needs"),
])
def test_prepare_refuses_bad_shapes(shapes, x_row, message):
    """Graphs the validator would reject, built straight in C: prepare
    reports the problem instead of running off its buffers."""
    from hwtune.native.graph import NativeGraph
    from hwtune.native.ops import OpCtx
    impl = find_impl("lstm_cell")
    with NativeGraph() as ng:
        ins = [ng.add_tensor(f"x{i}", s, "input") for i, s in enumerate(shapes)]
        h = ng.add_tensor("h", [shapes[1][0], shapes[1][1]], "output")
        c = ng.add_tensor("c", [shapes[1][0], shapes[1][1]], "output")
        op = ng.add_op("cell", "lstm_cell", ins, [h, c])
        if x_row:
            ng.set_ints(op, "x_row", [x_row])
        ctx = OpCtx()
        ctx.g, ctx.op, ctx.n_in, ctx.n_out, ctx.max_threads = ng.handle, op, len(ins), 2, 1
        err = ctypes.create_string_buffer(256)
        assert impl.prepare(ctypes.byref(ctx), err, 256) < 0
        assert message in err.value, err.value
