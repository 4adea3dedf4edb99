"""Training steps of the bundled models on the C engine: parameter
gradients against PyTorch autograd (float64) on the same weights and
inputs, the same step under every scheduler, and 20 SGD steps against
PyTorch's loss curve."""

import numpy as np
import pytest

from hwtune.engine.train_loop import step_inputs, train_steps
from hwtune.graph import load_model
from hwtune.graph.autodiff import TrainSpec, training_graph
from hwtune.engine.instance import NativeEngine

torch = pytest.importorskip("torch")
from hwtune.compare.torch_train import TorchTrainer  # noqa: E402

MODELS = [  # name, overrides (small enough for a test), loss, batch_norm statistics
    ("lstm_small", {"seq": 5}, "mse", "batch"),
    ("phased_lstm_small", {"seq": 4, "layers": 2, "batch": 16}, "mse", "batch"),
    ("pathnet_small", {"batch": 16}, "cross_entropy", "batch"),
    # training mode (PyTorch's model.train()), and the running statistics
    # of model.eval() kept fixed
    ("resnet18", {"batch": 2, "image": 64}, "cross_entropy", "batch"),
    ("resnet18", {"batch": 2, "image": 64}, "cross_entropy", "running"),
]


def engine_outputs(t, values, **cfg):
    with NativeEngine(t, **cfg) as eng:
        for name, v in values.items():
            eng.set_input(name, v)
        eng.run()
        return eng.outputs()


def check_against_autograd(g, t):
    """Training step t of model g on the engine against PyTorch autograd of
    g in float64 on the same weights and inputs: the loss within 1e-4, every
    parameter's gradient within 1e-4 of its scale. (engine outputs, PyTorch's
    running statistics after its one model.train() pass)."""
    values = step_inputs(t)
    got = engine_outputs(t, values, threads=2, scheduler="sequential")
    peer = TorchTrainer(g, t, values, threads=1, dtype="float64")
    want = peer.gradients()
    stats = {n: w.numpy().copy() for n, w in peer.stats.items()}
    assert float(got["loss"][0]) == pytest.approx(float(peer.loss().detach()), rel=1e-4)
    assert set(want) == {o[:-len(".grad")] for o in t.outputs if o.endswith(".grad")}
    for p, w in want.items():
        scale = max(float(np.abs(w).max()), 1e-12)
        err = float(np.abs(got[f"{p}.grad"] - w).max()) / scale
        assert err <= 1e-4, f"{p}: max error {err:.2e} of the gradient's scale"
    return got, stats


@pytest.mark.parametrize("name,overrides,loss,bn", MODELS,
                         ids=[m[0] + ("-bn-running" if m[3] == "running" else "")
                              for m in MODELS])
def test_gradients_match_pytorch_autograd(name, overrides, loss, bn):
    g = load_model(f"configs/models/{name}.json", overrides=overrides)
    t = training_graph(g, TrainSpec(loss=loss, optimizer="none", batch_norm=bn))
    if any(o.op == "batch_norm" for o in g.ops):
        assert any(o.op == ("batch_norm_train" if bn == "batch" else "batch_norm_grad")
                   for o in t.ops)
    got, stats = check_against_autograd(g, t)
    for n, w in stats.items():  # the running statistics the step leaves
        if f"{n}.new" in got:
            assert float(np.abs(got[f"{n}.new"] - w).max()) <= 1e-5 * float(np.abs(w).max()), n


@pytest.mark.parametrize("bn", ["batch", "running"])
def test_blocked_resnet18_gradients_match_pytorch_autograd(bn):
    """ResNet-18 with every CONV in NCHW[x]c (the layout pass: its pools and
    batch norms follow into the blocks), differentiated as it stands: the
    blocked ops' gradients (their NCHW rules between layout transforms) and
    the weights' transforms back to OIHW give PyTorch's gradients of the
    plain model."""
    from hwtune.graph.passes.layout import apply_op_params
    g = load_model("configs/models/resnet18.json", overrides={"batch": 2, "image": 64})
    blocks = {}
    for op in g.ops:
        if op.op == "conv2d":
            ic, oc = g.shapes[op.inputs[0]][1], g.shapes[op.inputs[1]][0]
            blocks[op.name] = {"layout": "NCHWc", "ic_bn": 8 if ic % 8 == 0 else ic,
                               "oc_bn": 16 if oc % 16 == 0 else oc}
    b = apply_op_params(g, blocks)
    assert {"conv2d", "batch_norm", "pool2d", "global_pool2d"} <= {
        o.op for o in b.ops if (o.resolved or {}).get("layout") == "NCHWc"}
    check_against_autograd(g, training_graph(b, TrainSpec(loss="cross_entropy",
                                                          optimizer="none", batch_norm=bn)))


@pytest.mark.parametrize("sched,ex,th", [("sequential", 1, 2), ("shared-queue", 2, 1),
                                         ("critical-path", 2, 1), ("corun", 2, 1)])
def test_a_step_runs_under_every_scheduler(sched, ex, th):
    g = load_model("configs/models/pathnet_small.json", overrides={"batch": 4, "image": 16})
    t = training_graph(g, TrainSpec(loss="cross_entropy", optimizer="adam"))
    values = step_inputs(t)
    want = engine_outputs(t, values, scheduler="sequential")
    got = engine_outputs(t, values, executors=ex, threads=th, scheduler=sched)
    for n in t.outputs:
        scale = max(float(np.abs(want[n]).max()), 1e-12)
        assert float(np.abs(got[n] - want[n]).max()) <= 1e-5 * scale, n


@pytest.mark.parametrize("name,overrides,loss,opt", [
    ("lstm_small", {"seq": 4, "layers": 2, "batch": 16}, "mse", "sgd"),
    ("phased_lstm_small", {"seq": 4, "layers": 2, "batch": 16}, "mse", "sgd"),
    ("pathnet_small", {"batch": 8, "image": 16}, "cross_entropy", "sgd"),
    ("pathnet_small", {"batch": 8, "image": 16}, "cross_entropy", "adam"),
])
def test_twenty_steps_follow_pytorch(name, overrides, loss, opt):
    g = load_model(f"configs/models/{name}.json", overrides=overrides)
    t = training_graph(g, TrainSpec(loss=loss, optimizer=opt))
    values = step_inputs(t)
    with NativeEngine(t, threads=2) as eng:
        ours = train_steps(eng, t, 20, values)
    theirs = TorchTrainer(g, t, values).curve(20)
    assert ours[-1] < ours[0]
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert a == pytest.approx(b, rel=1e-2), f"step {k}: {a} vs PyTorch {b}"


def test_run_train_of_phased_lstm_checks_its_outputs(tmp_path):
    """`hwtune run phased_lstm_small --train`: the step (minimum, maximum and
    mod differentiated) runs on the engine and its outputs match the
    reference (--check)."""
    import json
    import subprocess
    import sys
    proc = subprocess.run(
        [sys.executable, "-m", "hwtune.cli.main", "run", "phased_lstm_small", "--train",
         "--set", "seq=3", "--set", "layers=2", "--set", "batch=8", "--check",
         "--iterations", "2", "--json", "--db", str(tmp_path / "r.db")],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["model"] == "phased-lstm-small.train" and doc["check"]["ok"] is True


def test_one_value_per_channel_is_refused_with_the_flag_that_fixes_it(tmp_path):
    """Batch statistics of one value per channel (resnet18's last stage at
    batch 1, 32x32) are refused as PyTorch refuses them; --batch-norm
    running trains on the model's statistics instead."""
    import subprocess
    import sys
    args = [sys.executable, "-m", "hwtune.cli.main", "run", "resnet18", "--train", "--set",
            "batch=1", "--set", "image=32", "--iterations", "1", "--db", str(tmp_path / "r.db")]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "one value per channel" in proc.stderr and "--batch-norm running" in proc.stderr
    proc = subprocess.run(args + ["--batch-norm", "running"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
