"""Backward CONVs of a training step, tuned vs default knobs, per workload
(issue #15): each stride-1 conv2d_grad_data (the CONV template's knobs), the
other (im2col) data gradients and each conv2d_grad_weight (their own knobs), as one op on the
engine's pool and kernels (hwt_bench_op), with the knobs `hwtune run
--train` would apply from --db (hwtune.engine.conv_knobs) against the same op
without knob attributes (the untuned rules). Samples interleaved round-robin,
each on a fresh instance (fresh buffers), medians; the two outputs must
agree (else WRONG).

Run with the installed package:
    python benchmarks/bench_backward_convs.py --db /tmp/x.db [--model resnet18]
        [--set batch=16] [--threads 2] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from hwtune.graph import load_model
from hwtune.graph.autodiff import TrainSpec, training_graph

MODELS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "models")
KNOBS_OF = ("conv2d_grad_data", "conv2d_grad_weight")


def one_op(graph, op, knobs):
    """The op alone, its inputs graph inputs, with `knobs` as attributes."""
    from hwtune.graph.generators.builder import Builder
    b = Builder(f"bench-{op.op}")
    ins = [b.input(f"in{i}", tuple(graph.shapes[t])) for i, t in enumerate(op.inputs)]
    attrs = {k: v for k, v in op.attrs.items()}
    attrs.update({k: v for k, v in knobs.items() if k != "layout"})
    b.output(b.op("op", op.op, ins, **attrs))
    return b.build()


def side(pool, threads, g, inputs, isa):
    from hwtune.engine.lower import lower_graph
    from hwtune.measure.op import OpSide
    from hwtune.native.op_bench import OpBench

    def make():
        y = np.full(tuple(g.shapes[g.ops[0].outputs[0]]), np.nan, np.float32)
        ng = lower_graph(g)
        try:
            return OpBench(pool, threads, ng, 0, [a.copy() for a in inputs], [y], isa=isa), \
                {"y": y}
        except BaseException:
            ng.close()
            raise
    return OpSide(make, fresh=True, sample_s=0.002)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--set", action="append", default=None,
                    help="model variable, NAME=VALUE (default batch=16)")
    ap.add_argument("--loss", default="cross_entropy")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    from hwtune import machine
    from hwtune.db import ResultsDB
    from hwtune.graph.passes.layout import check_op_params
    from hwtune.measure import FixedSampling, interleave
    from hwtune.native.isa import resolve_isa, selected_isa
    from hwtune.native.threads import Pool
    from hwtune.engine import conv_knobs
    from hwtune.tuners.conv_grad import workload as gw_workload
    from hwtune.tuners.conv_local import conv_workload, tuned_op

    overrides = dict(s.split("=", 1) for s in (args.set if args.set is not None else
                                                ["batch=16"]) if s)
    overrides = {k: int(v) if v.lstrip("-").isdigit() else v for k, v in overrides.items()}
    path = args.model if args.model.endswith(".json") else \
        os.path.join(MODELS_DIR, f"{args.model}.json")
    g = load_model(path, overrides=overrides)
    t = training_graph(g, TrainSpec(loss=args.loss))
    isa = selected_isa()
    fp = machine.fingerprint()
    with ResultsDB.open(args.db) as db:
        host = db.upsert_host(fp)
        knobs = conv_knobs.choose(db, host, t, {}, threads=args.threads, params_threads=None,
                                  isa=isa)
    print(f"CPU {fp.get('cpu_model') or '?'}, ISA {isa}, {args.threads} threads, 1-min load "
          f"{os.getloadavg()[0]:.2f} at start; {args.model} {overrides} training step")
    seen = {}
    for op in t.ops:
        if op.op not in KNOBS_OF:
            continue
        key = (conv_workload(t, op) if tuned_op(t, op) else gw_workload(t, op)).key
        seen.setdefault(key, [op, 0])[1] += 1
    pool = Pool(executors=1, threads=args.threads, pin=False)
    rng = np.random.default_rng(0)
    tot = {"default": 0.0, "tuned": 0.0}
    try:
        for key, (op, count) in seen.items():
            mine = knobs.op_params.get(op.name)
            src = knobs.sources.get(op.name, "default")
            if not mine or src == "default":
                print(f"{op.op} {key.split('|', 1)[1]} x{count}: not tuned ({src})")
                continue
            mine = check_op_params(t, {op.name: mine})[op.name]  # as the layout pass applies them
            inputs = [rng.uniform(-1, 1, t.shapes[n]).astype(np.float32) for n in op.inputs]
            sides = [side(pool, args.threads, one_op(t, op, {}), inputs, resolve_isa(isa)),
                     side(pool, args.threads, one_op(t, op, mine), inputs, resolve_isa(isa))]
            try:
                got = interleave(sides, FixedSampling(args.rounds), warmup=1, raise_errors=True)
                y0, y1 = (s.outputs()["y"] for s in sides)
                scale = float(np.abs(y0).max()) or 1.0
                ok = float(np.abs(y0 - y1).max()) <= 1e-4 * scale
            finally:
                for s in sides:
                    s.close()
            d, tu = got[0].median, got[1].median
            tot["default"] += d * count
            tot["tuned"] += tu * count
            shown = {k: v for k, v in mine.items() if k != "layout"}
            # the same plan on both sides: what the noise alone gives
            same = not shown or (not tuned_op(t, op) and
                                 gw_workload(t, op).default_params() == shown)
            print(f"{op.op} {key.split('|', 1)[1]} x{count}: default {d * 1e3:.2f} ms, tuned "
                  f"{tu * 1e3:.2f} ms -> {d / tu:.2f}x ({src} {shown})"
                  + (" [same plan]" if same else "") + ("" if ok else " WRONG"), flush=True)
    finally:
        pool.close()
    if tot["tuned"]:
        print(f"sum over the step's tuned backward ops: default {tot['default'] * 1e3:.1f} ms, "
              f"tuned {tot['tuned'] * 1e3:.1f} ms -> {tot['default'] / tot['tuned']:.2f}x")
    print(f"1-min load {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
