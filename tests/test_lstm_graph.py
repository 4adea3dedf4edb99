"""The DeepCPU form of the LSTM graphs (fused gate matmul, hoisted input
projection): same function as the Graphi form and a hand-written cell, on
the numpy reference and on the C engine; the bundled files and the
generator agree; the structure is what DeepCPU prescribes."""

import os

import numpy as np
import pytest

from hwtune.graph import load_model, run_reference
from hwtune.graph.generators import lstm, phased_lstm

MODELS = os.path.join(os.path.dirname(__file__), "..", "configs", "models")


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_numpy(xs, params, layers, hidden):
    """Textbook LSTM, float64, gates i, f, g, o."""
    seq_in = [x.astype(np.float64) for x in xs]
    for layer in range(1, layers + 1):
        w, u = params[f"W{layer}"].astype(np.float64), params[f"U{layer}"].astype(np.float64)
        h = np.zeros((xs[0].shape[0], hidden))
        c = np.zeros_like(h)
        out = []
        for x in seq_in:
            i, f, g, o = np.split(x @ w + h @ u + params[f"b{layer}"], 4, axis=1)
            c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
            h = sigmoid(o) * np.tanh(c)
            out.append(h)
        seq_in = out
    return seq_in


# (seq, hoist): whole sequence, chunks that divide it, a ragged last chunk,
# one step per chunk, and a sequence above the 64-input concat limit.
CHUNKINGS = [(5, 0), (6, 3), (7, 3), (4, 1), (70, 0)]


@pytest.mark.parametrize("seq,hoist", CHUNKINGS)
def test_fused_graph_computes_the_textbook_lstm(seq, hoist):
    g = lstm.generate(batch=3, seq=seq, hidden=5, input=6, layers=2, fused=True, hoist=hoist,
                      seed=7)
    v = run_reference(g, keep_all=True)
    want = lstm_numpy([v[f"h0.{t}"] for t in range(1, seq + 1)], v, 2, 5)
    for t in range(1, seq + 1):
        np.testing.assert_allclose(v[f"h2.{t}"], want[t - 1], rtol=1e-5, atol=1e-6)


def _matmuls(g, suffix=""):
    return [(g.shapes[op.inputs[0]], g.shapes[op.inputs[1]]) for op in g.ops
            if op.op == "matmul" and op.name.endswith(suffix)]


def test_fused_structure_is_deepcpus():
    batch, seq, hidden, inp, layers, hoist = 4, 7, 8, 6, 3, 3
    g = lstm.generate(batch=batch, seq=seq, hidden=hidden, input=inp, layers=layers,
                      fused=True, hoist=hoist)
    # One fused gate matmul per step, and it is the only per-step matmul.
    assert _matmuls(g, ".hw") == [((batch, hidden), (hidden, 4 * hidden))] * (layers * seq)
    assert len(_matmuls(g)) == layers * seq + layers * 3
    # Per layer the input projections: chunks of 3, 3 and 1 steps, on [I, 4H].
    want = [((rows * batch, n_in), (n_in, 4 * hidden))
            for n_in in [inp] + [hidden] * (layers - 1) for rows in (3, 3, 1)]
    assert [m for op, m in zip([o for o in g.ops if o.op == "matmul"], _matmuls(g))
            if op.name.startswith("XW")] == want
    # Same multiply-adds as the Graphi form: hoisting moves work, adds none.
    graphi = lstm.generate(batch=batch, seq=seq, hidden=hidden, input=inp, layers=layers)

    def macs(graph):
        return sum(a[0] * a[1] * b[1] for a, b in _matmuls(graph))

    assert macs(g) == macs(graphi)
    # A layer's projection reads only the layer below, never its own recurrence.
    for op in g.ops:
        if op.op == "concat":
            layer = int(op.name[1:].split(".")[0])
            assert all(t.startswith(f"h{layer - 1}.") for t in op.inputs)


def test_chunks_never_exceed_the_engines_op_inputs():
    g = lstm.generate(batch=1, seq=130, hidden=4, layers=1, fused=True)
    sizes = [len(op.inputs) for op in g.ops if op.op == "concat"]
    assert sizes == [64, 64, 2]


@pytest.mark.parametrize("overrides", [{}, {"fused": False}, {"seq": 7, "hoist": 3},
                                       {"seq": 70, "batch": 1}, {"fused_cell": False}])
def test_fused_template_equals_the_generator(overrides):
    g = load_model(os.path.join(MODELS, "templates", "lstm_fused.json"), overrides=overrides)
    sizes = {**dict(batch=64, seq=20, hidden=128, layers=4, fused=True, hoist=0), **overrides}
    want = lstm.generate(**sizes)
    assert [(o.name, o.op, o.inputs, o.outputs, o.resolved) for o in g.ops] == \
        [(o.name, o.op, o.inputs, o.outputs, o.resolved) for o in want.ops]
    assert [t.name for t in g.inputs] == [t.name for t in want.inputs]


@pytest.mark.parametrize("fused_cell", [True, False])
def test_graphi_form_of_the_fused_template_is_the_plain_template(fused_cell):
    a = load_model(os.path.join(MODELS, "templates", "lstm_fused.json"),
                   overrides={"fused": False, "fused_cell": fused_cell})
    b = load_model(os.path.join(MODELS, "templates", "lstm.json"),
                   overrides={"fused_cell": fused_cell})
    assert [(o.name, o.op, o.inputs) for o in a.ops] == [(o.name, o.op, o.inputs) for o in b.ops]


@pytest.mark.parametrize("name", ["lstm_medium", "lstm_large", "phased_lstm_medium",
                                  "deepcpu_lstm_i64_h64", "deepcpu_lstm_i1024_h1024"])
def test_bundled_medium_large_and_deepcpu_models_are_fused(name):
    g = load_model(os.path.join(MODELS, f"{name}.json"), overrides={"seq": 3})
    kinds = {op.name: op.op for op in g.ops}
    assert kinds["XW1.1"] == "matmul"
    if name.startswith("phased"):
        assert kinds["L1.1.xw"] == "slice"
    else:  # the fused cell reads its rows of XW in place
        assert kinds["L1.1.cell"] == "lstm_cell" and "L1.1.xw" not in kinds


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("fused_cell", [False, True])
def test_every_form_computes_the_textbook_lstm(fused, fused_cell):
    g = lstm.generate(batch=3, seq=7, hidden=5, input=6, layers=2, fused=fused, hoist=3,
                      fused_cell=fused_cell, seed=7)
    v = run_reference(g, keep_all=True)
    want = lstm_numpy([v[f"h0.{t}"] for t in range(1, 8)], v, 2, 5)
    for t in range(1, 8):
        np.testing.assert_allclose(v[f"h2.{t}"], want[t - 1], rtol=1e-5, atol=1e-6)


def test_fused_cell_step_is_two_ops():
    """A DeepCPU step with the fused cell: the recurrent matmul and one
    lstm_cell reading its rows of the hoisted projection (x_row) in place."""
    batch, seq, hoist = 4, 7, 3
    g = lstm.generate(batch=batch, seq=seq, hidden=8, input=6, layers=1, fused=True,
                      hoist=hoist)
    step = [op for op in g.ops if op.name.startswith("L1.5.")]
    assert [op.op for op in step] == ["matmul", "lstm_cell"]
    cell = step[1]
    assert cell.inputs == ["L1.5.hw", "c1.4", "XW1.2"] and cell.outputs == ["h1.5", "c1.5"]
    assert cell.resolved["x_row"] == (5 - 1) % hoist * batch
    unfused = lstm.generate(batch=batch, seq=seq, hidden=8, input=6, layers=1, fused=True,
                            hoist=hoist, fused_cell=False)
    # 13 ops a step: slice, matmul, add, split, sigmoid x3, tanh x2, mul x3, add.
    assert len(unfused.ops) - len(g.ops) == seq * (13 - 2)


@pytest.mark.parametrize("overrides", [{"fused_cell": False}, {"fused": False, "fused_cell": False},
                                       {"fused": False}])
def test_unfused_cell_templates_equal_the_generator(overrides):
    sizes = {**dict(batch=64, seq=3, hidden=128, layers=4, fused=True, hoist=2), **overrides}
    want = lstm.generate(**sizes)
    g = load_model(os.path.join(MODELS, "templates", "lstm_fused.json"),
                   overrides={**overrides, "seq": 3, "hoist": 2})
    assert [(o.name, o.op, o.inputs, o.outputs, o.resolved) for o in g.ops] == \
        [(o.name, o.op, o.inputs, o.outputs, o.resolved) for o in want.ops]


def test_phased_fused_matches_phased_graphi():
    kw = dict(batch=4, seq=5, hidden=6, input=3, layers=2, r_on=0.5, seed=3)
    plain = run_reference(phased_lstm.generate(**kw))
    fused = run_reference(phased_lstm.generate(fused=True, hoist=2, **kw))
    for name, arr in plain.items():
        np.testing.assert_allclose(fused[name], arr, rtol=1e-5, atol=1e-6)


def test_phased_fused_template_equals_the_generator():
    g = load_model(os.path.join(MODELS, "templates", "phased_lstm_fused.json"), overrides={"seq": 4,
                                                                               "hoist": 3})
    want = phased_lstm.generate(seq=4, fused=True, hoist=3)
    assert [(o.name, o.op, o.inputs, o.resolved) for o in g.ops] == \
        [(o.name, o.op, o.inputs, o.resolved) for o in want.ops]


@pytest.mark.parametrize("scheduler,executors,threads", [("sequential", 1, 2),
                                                         ("critical-path", 2, 1)])
def test_engine_runs_the_fused_graph_like_the_reference(scheduler, executors, threads):
    from hwtune.engine.instance import NativeEngine
    from hwtune.native.threads import allowed_cpus
    if executors * threads > len(allowed_cpus()):
        pytest.skip("needs 2 CPUs")
    g = lstm.generate(batch=8, seq=9, hidden=32, input=16, layers=2, fused=True, hoist=4,
                      seed=1)
    ref = run_reference(g)
    with NativeEngine(g, executors=executors, threads=threads, scheduler=scheduler) as eng:
        eng.run()
        out = eng.outputs()
    for name, arr in ref.items():
        np.testing.assert_allclose(out[name], arr, rtol=1e-4, atol=1e-5)


def _peer_case():
    """bench_peers (imported from benchmarks/) and a small fused LSTM."""
    import sys
    bench_dir = os.path.join(os.path.dirname(__file__), "..", "benchmarks")
    if bench_dir not in sys.path:
        sys.path.insert(0, bench_dir)
    import bench_peers
    g = lstm.generate(batch=3, seq=4, hidden=5, input=6, layers=2, fused=True, hoist=3, seed=2)
    v = run_reference(g, keep_all=True)
    xs = np.stack([v[f"h0.{t}"] for t in range(1, 5)]).astype(np.float32)
    want = {f"h2.{t}": v[f"h2.{t}"] for t in range(1, 5)}
    return bench_peers, v, xs, want


def test_peer_benchmarks_onnx_lstm_is_the_same_model():
    # The peer benchmark's claim rests on ONNX's gate order (i, o, f, c)
    # being mapped from hwtune's (i, f, g, o) correctly.
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    bench_peers, v, xs, want = _peer_case()
    model = bench_peers.onnx_lstm(v, 4, 3, 6, 2, 5)
    _, out = bench_peers.ort_runner(model, {"X": xs}, 1)
    y = out()["H2"]
    ok, err = bench_peers.agree(want, {f"h2.{t + 1}": y[t] for t in range(4)})
    assert ok, err


def test_peer_benchmarks_torch_lstm_is_the_same_model():
    pytest.importorskip("torch")
    bench_peers, v, xs, want = _peer_case()
    _, out = bench_peers.torch_lstm_runner(v, xs, 2, 5, 1)
    ok, err = bench_peers.agree(want, out())
    assert ok, err
