"""Where a model's time goes, per op class, in hwtune and in ONNX Runtime.

    python benchmarks/op_breakdown.py MODEL.onnx [--threads 1] [--runs 5]
        [--db scratch.db] [--shape x=1x3x224x224] [--nodes 'conv 1x1']
        [--stat least|median]

hwtune: `hwtune run MODEL --trace` (per-op engine events of one profiled
run after 5 untimed ones), repeated --runs times in fresh processes, each
op's least time (load only adds time; --stat median: its median, what a
run sees with the caches the ops before it left). ORT: the same model in
one session with `enable_profiling`, --runs runs after 3 warm-ups, each
node's least (or median) time. Ops are grouped into classes a kernel owner can act on: conv by form
(depthwise, grouped, 1x1, KxK, the stem's first conv), matmul, element-wise
by op, and the rest by op type. hwtune's fused ops (a conv with its
activation) count in the conv's class; ORT's fused nodes (FusedConv) too.
Classes differ in what they hold (ORT fuses other chains): compare totals
first, classes second. Prints ms per class, each side's share and total.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict

import numpy as np

HWTUNE = os.path.join(os.path.dirname(sys.executable), "hwtune")


def conv_class(group: int, cin: int, k: tuple, first: bool) -> str:
    if first:
        return "conv stem"
    if group > 1 and group == cin:
        return f"conv depthwise {k[0]}x{k[1]}"
    if group > 1:
        return "conv grouped"
    return "conv 1x1" if k == (1, 1) else f"conv {k[0]}x{k[1]}"


def reduce_times(samples: dict, stat: str) -> dict:
    """name -> its samples' least ("least": load only adds time) or median
    ("median": what a typical run sees, cache misses included)."""
    f = min if stat == "least" else (lambda xs: float(np.median(xs)))
    return {k: f(v) for k, v in samples.items()}


def hwtune_classes(path: str, threads: int, runs: int, db: str, shapes,
                   stat: str = "least") -> dict:
    from hwtune.sources import load_any
    graph, _ = load_any(path, {}, shapes)
    # The engine's op names are the imported graph's, plus the rewrites'
    # (layout transforms, fused ops keep the name of the op they absorb).
    meta = {}
    convs = ("conv2d", "qconv2d")  # int8 (QDQ) convs by the same forms
    first = next((op.name for op in graph.ops if op.op in convs), None)
    for op in graph.ops:
        if op.op in convs:
            w = graph.shapes[op.inputs[1]]
            g = int(op.attrs.get("group") or op.attrs.get("groups") or 1)
            meta[op.name] = conv_class(g, w[1] * g, tuple(w[2:]), op.name == first)
    samples: dict = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            trace = os.path.join(tmp, f"t{i}.json")
            cmd = [HWTUNE, "run", path, "--db", db, "--threads", str(threads), "--reps", "1",
                   "--warmup", "5", "--trace", trace]
            for s in shapes:
                cmd += ["--shape", s]
            subprocess.run(cmd, check=True, capture_output=True)
            ev = json.load(open(trace))
            ev = ev["traceEvents"] if isinstance(ev, dict) else ev
            for e in ev:
                if e.get("ph") == "X":
                    key = e["name"]
                    samples[key].append(e["dur"])
                    meta.setdefault(key, e["args"].get("op_type", e.get("cat", "?")))
    out = defaultdict(float)
    nodes = {}
    for name, us in reduce_times(samples, stat).items():
        out[meta.get(name, "?")] += us / 1e3
        nodes[name] = (meta.get(name, "?"), us)
    return dict(out), nodes, {op.name: graph.shapes[op.inputs[1]] for op in graph.ops
                              if op.op in convs}


def ort_classes(path: str, threads: int, runs: int, stat: str = "least") -> dict:
    import onnx
    import onnxruntime as ort
    model = onnx.load(path, load_external_data=False)
    inits = {i.name: tuple(i.dims) for i in model.graph.initializer}
    # ORT names a node of its optimised graph by the original node, or by
    # the output of the chain it fused ("<output>_nchwc" for the blocked
    # convs): both are keys here; an activation's output takes its conv's.
    meta, first, by_out, alias = {}, None, {}, {}
    # a QDQ conv's weight is a DequantizeLinear of the constant
    for n in model.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in inits:
            inits[n.output[0]] = inits[n.input[0]]
    for n in model.graph.node:
        cls = None
        if n.op_type == "Conv" and n.input[1] in inits:
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            w = inits[n.input[1]]
            g = int(attrs.get("group", 1))
            cls = conv_class(g, w[1] * g, tuple(w[2:]), first is None)
            first = first or n.name
        elif n.op_type in ("Clip", "Relu", "Sigmoid", "HardSigmoid") and n.input[0] in by_out:
            cls = by_out[n.input[0]]
        if cls:
            meta[n.name] = cls
            for o in n.output:
                by_out[o] = meta[o] = cls
        # --nodes joins by hwtune's op name, the conv's output: ORT names a
        # node by itself, or by the output of the chain it fused
        if n.op_type == "Conv":
            alias[n.name] = alias[n.output[0]] = n.output[0]
        elif n.op_type in ("Clip", "Relu", "Sigmoid", "HardSigmoid") and n.input[0] in alias:
            alias[n.output[0]] = alias[n.input[0]]
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.enable_profiling = True
    tmp = tempfile.mkdtemp()
    so.profile_file_prefix = os.path.join(tmp, "ort")
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = {}
    rng = np.random.default_rng(0)
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        if "int64" in i.type:
            feeds[i.name] = rng.integers(0, 100, size=shape).astype(np.int64)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    for _ in range(3 + runs):
        sess.run(None, feeds)
    prof = sess.end_profiling()
    ev = json.load(open(prof))
    samples: dict = defaultdict(list)
    kinds: dict = {}
    for e in ev:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            node = e["args"].get("node_name") or e["name"][:-len("_kernel_time")]
            if node.endswith("_nchwc"):
                node = node[:-len("_nchwc")]
            samples[node].append(e["dur"])
            kinds[node] = e["args"].get("op_name", "?")
    out = defaultdict(float)
    nodes = {}
    for node, us in reduce_times(samples, stat).items():
        cls = meta.get(node)
        if cls is None:  # a fused node keeps the first node's name, or prefixes it
            hit = [m for m in meta if node.startswith(m) or m.startswith(node)]
            cls = meta[hit[0]] if hit else kinds[node]
        out[cls] += us / 1e3
        key = alias.get(node, node)
        nodes[key] = (cls, nodes.get(key, (cls, 0))[1] + us)
    for f in glob.glob(os.path.join(tmp, "*")):
        os.remove(f)
    return dict(out), nodes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--db", default=os.path.join(tempfile.gettempdir(), "op_breakdown.db"))
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--nodes", metavar="CLASS",
                    help="also list the ops of one class (e.g. 'conv 1x1') node by node, "
                         "hwtune's op against ORT's node of the same name, with the weight shape")
    ap.add_argument("--stat", choices=("least", "median"), default="least",
                    help="each op's least time over the runs (its speed alone) or its median "
                         "(what a run sees, with the caches the ops before it left)")
    a = ap.parse_args()
    h, hn, wshapes = hwtune_classes(a.model, a.threads, a.runs, a.db, a.shape, a.stat)
    o, on = ort_classes(a.model, a.threads, a.runs, a.stat)
    th, to = sum(h.values()), sum(o.values())
    print(f"{os.path.basename(a.model)} at {a.threads} thread(s); per-op {a.stat} of {a.runs} runs"
          f" (sums of op times, not end-to-end latency)")
    print(f"{'class':28s} {'hwtune ms':>10s} {'share':>6s} {'ORT ms':>9s} {'share':>6s}")
    for k in sorted(set(h) | set(o), key=lambda k: -(h.get(k, 0) + o.get(k, 0))):
        hv, ov = h.get(k, 0.0), o.get(k, 0.0)
        print(f"{k:28s} {hv:10.3f} {hv / th:6.1%} {ov:9.3f} {ov / to:6.1%}")
    print(f"{'total':28s} {th:10.3f} {'':6s} {to:9.3f}")
    if a.nodes:
        print(f"\n{a.nodes}, node by node (us; weight shape; ORT / hwtune)")
        for name, (cls, us) in hn.items():
            if cls != a.nodes:
                continue
            ort_us = on.get(name, (None, None))[1]
            ratio = f"{ort_us / us:6.2f}" if ort_us else "     -"
            ort_txt = f"{ort_us:9.1f}" if ort_us else "        -"
            print(f"{name[:48]:48s} {str(tuple(wshapes.get(name, ()))):22s} {us:9.1f} {ort_txt} {ratio}")


if __name__ == "__main__":
    main()
