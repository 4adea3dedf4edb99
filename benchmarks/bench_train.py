"""Training-step benchmark (issue #15): hwtune's training step (forward,
loss, backward, SGD update as one graph on the C engine) against PyTorch
eager (loss.backward() + torch.optim.SGD) on the same weights and batch.

Run with the installed package:
    python benchmarks/bench_train.py [--db results.db] [--reps 5] [--threads 2]
        [--only lstm_medium,pathnet_medium,phased_lstm_medium,resnet18] [--resnet-batch 16]
(PyTorch is a benchmark-only dependency: pip install torch)

hwtune runs each training graph with the config `hwtune run --train` would
pick: the tuned config stored in --db for (this host, this training graph)
if there is one (`hwtune tune-graph MODEL --train`) and it fits in --threads
cores, as stored (executors x threads, scheduler, per-op threads, CONV
knobs), else the defaults at 1 executor x --threads with the CONV knobs
tuned in --db; with a tuned config or tuned knobs the default (1 executor x
--threads, no knobs) is timed too (tuned vs default). Both sides first
run one step from the same weights and the losses must agree (else WRONG).
Samples are interleaved (one of each side in turn, medians), so a burst of
load from the other users of a shared machine hits every side.
"""

from __future__ import annotations

import argparse
import os
import sys

from bench_engine import interleaved  # noqa: E402 (benchmarks/ is sys.path[0])
from bench_peers import Store  # noqa: E402

from hwtune.engine.config import default_config
from hwtune.engine.runner import open_engine
from hwtune.engine.train_loop import step_inputs
from hwtune.graph import load_model
from hwtune.graph.autodiff import LOSS_NAME, TrainSpec, training_graph

MODELS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "models")
GOAL_RATIO = 1.0  # issue #15: PyTorch time / hwtune time, after tuning
# Losses of the first step agree within this (float32 sums in other orders).
LOSS_RTOL = 1e-3
MODELS = {  # name: (overrides, loss)
    "lstm_medium": ({}, "mse"),
    "pathnet_medium": ({}, "cross_entropy"),
    # Graphi's PhasedLSTM (its time gate: minimum, maximum, mod)
    "phased_lstm_medium": ({}, "mse"),
    "resnet18": ({"batch": 16}, "cross_entropy"),
}


def engine_step(t, values, cfg, cost=None):
    eng = open_engine(t, cfg, op_cost=cost)
    for name, v in values.items():
        eng.set_input(name, v)
    eng.run()
    return eng


def section(name, overrides, loss, store, threads, reps, lines):
    from hwtune.compare.torch_train import TorchTrainer
    g = load_model(os.path.join(MODELS_DIR, f"{name}.json"), overrides=overrides)
    t = training_graph(g, TrainSpec(loss=loss, optimizer="sgd"))
    values = step_inputs(t)
    # The stored tuned config as `hwtune run --train` runs it (its executors
    # x threads, schedule and per-op threads), when it fits in `threads`
    # cores; else (and with no tuned config) 1 executor x `threads`.
    cfg, run_graph, cost, source = store.config(t, None)
    if not source.startswith(("tuned", "user")) or cfg.executors * cfg.threads > threads:
        cfg, run_graph, cost, source = store.config(t, threads)
    tuned = engine_step(run_graph, values, cfg, cost)
    peer = TorchTrainer(g, t, values, threads=threads)
    ours_loss = float(tuned.output(LOSS_NAME)[0])
    theirs_loss = float(peer.loss().detach())
    ok = abs(ours_loss - theirs_loss) <= LOSS_RTOL * abs(theirs_loss)
    fns, labels = [tuned.run, peer.step], ["hwtune", "pytorch"]
    default = None
    # A tuned config, or tuned CONV knobs applied to the default config
    # (tune-graph --train stores the knobs per workload even when it keeps
    # the default config): the step without them is timed too.
    if source.startswith(("tuned", "user")) or "conv knobs: tuned" in source:
        default = engine_step(t, values, default_config(threads))
        fns.append(default.run)
        labels.append("default")
    meds = dict(zip(labels, interleaved(fns, reps)))
    ratio = meds["pytorch"] / meds["hwtune"]
    verdict = "WRONG" if not ok else ("PASS" if ratio >= GOAL_RATIO else "MISS")
    lines.append(f"{name} {overrides or ''} train step ({loss}, sgd), {threads} threads: "
                 f"hwtune {meds['hwtune'] * 1e3:.1f} ms [{cfg.describe()} {source}], "
                 f"PyTorch {meds['pytorch'] * 1e3:.1f} ms -> {ratio:.2f}x (goal >= "
                 f"{GOAL_RATIO}x: {verdict}; first-step loss {ours_loss:.5f} vs "
                 f"{theirs_loss:.5f})")
    if default is not None:
        lines.append(f"  tuned vs default: {meds['default'] / meds['hwtune']:.2f}x "
                     f"(default {meds['default'] * 1e3:.1f} ms)")
    for eng in (tuned, default):
        if eng is not None:
            eng.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default="results.db")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default=",".join(MODELS))
    ap.add_argument("--resnet-batch", type=int, default=16)
    args = ap.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("PyTorch is not installed: pip install torch", file=sys.stderr)
        return 2
    from hwtune import machine
    from hwtune.native.isa import selected_isa
    fp = machine.fingerprint()
    store = Store(args.db)
    lines = [f"CPU {fp.get('cpu_model') or '?'}, ISA {selected_isa()}, 1-min load "
             f"{os.getloadavg()[0]:.2f} at start"]
    for name in args.only.split(","):
        overrides, loss = MODELS[name]
        if name == "resnet18":
            overrides = {**overrides, "batch": args.resnet_batch}
        section(name, overrides, loss, store, args.threads, args.reps, lines)
        print(lines[-1] if not lines[-1].startswith("  ") else lines[-2] + "\n" + lines[-1],
              flush=True)
    lines.append(f"1-min load {os.getloadavg()[0]:.2f} at end")
    print("\n".join([lines[0], lines[-1]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
