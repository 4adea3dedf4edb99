"""Precision per op within an end-to-end error bound (tune-graph
--precision fp32,int8[,bf16] --max-error E).

1. Calibrate: run the fp32 graph (fused, as the engine runs it) on the
   samples; the fp32 outputs are the reference, the inputs of the int8
   candidates give their activation ranges (calibrate.py).
2. Time: the graph with every candidate op in one precision is profiled
   against the fp32 graph, interleaved run by run (per-op events of the
   engine, as `run --trace` and the hill climber measure them; each op's
   least time over the runs, PROFILE_RUNS); an op's
   time in int8 counts its helper ops (the activation's quantize_u8, shared
   evenly by the int8 ops that read it; a residual add or ReLU6 it can no
   longer fuse). Gain = fp32 time - that time; ops that do not gain stay
   fp32.
3. Error: each gaining (op, precision) alone, end to end; one alone above
   the bound is dropped.
4. Choose: per op its largest gain among what is left; ops by gain, the
   longest prefix whose end-to-end error stays within the bound (binary
   search over the prefix length: errors of int8 ops add up, so a longer
   prefix errs more; the set chosen is one that was measured, so the bound
   holds on the samples whatever the order).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from hwtune.graph.model import Graph
from hwtune.precision import calibrate as cal
from hwtune.graph.passes.op_precision import apply_precision, candidates, weight_values

# Profiled runs of each whole-graph variant for the per-op times (as
# engine/runner.py's PROFILE_RUNS), and each op's figure is its minimum
# over them: load only adds time, and on the loaded 2-vCPU dev box a
# preempted worker put the median of single ResNet-50 convs at ~60 ms
# against ~1-3 ms for their neighbours (tune-graph r50.onnx --precision
# fp32,int8, 5 runs), which ranked the ops by the load, not by int8.
PROFILE_RUNS = 5


@dataclass
class OpChoice:
    op: str
    kind: str
    fp32_s: float
    times: Dict[str, float] = field(default_factory=dict)    # precision -> seconds
    errors: Dict[str, float] = field(default_factory=dict)   # precision -> alone, e2e
    precision: str = "fp32"
    why: str = ""

    @property
    def chosen_s(self) -> float:
        return self.times.get(self.precision, self.fp32_s)

    def to_json(self) -> Dict[str, Any]:
        return {"op": self.op, "kind": self.kind, "precision": self.precision,
                "fp32_s": self.fp32_s, "chosen_s": self.chosen_s,
                "error": self.errors.get(self.precision, 0.0), "times": dict(self.times),
                "errors": dict(self.errors), "why": self.why}


@dataclass
class PrecisionChoice:
    max_error: float
    precisions: List[str]
    op_precision: Dict[str, Dict[str, Any]]
    ops: List[OpChoice]
    error: float                 # end to end, of the chosen set
    samples: int
    evaluations: int = 0
    lines: List[str] = field(default_factory=list)

    @property
    def fp32_s(self) -> float:
        return sum(c.fp32_s for c in self.ops)

    @property
    def chosen_s(self) -> float:
        return sum(c.chosen_s for c in self.ops)

    def to_json(self) -> Dict[str, Any]:
        return {"max_error": self.max_error, "precisions": list(self.precisions),
                "error": self.error, "samples": self.samples,
                "evaluations": self.evaluations,
                "ops_fp32_s": self.fp32_s, "ops_chosen_s": self.chosen_s,
                "op_precision": self.op_precision, "ops": [c.to_json() for c in self.ops]}


def _entry(prec: str, act: Optional[tuple]) -> Dict[str, Any]:
    if prec == "int8":
        return {"precision": "int8", "a_scale": act[0], "a_zero": act[1]}
    return {"precision": prec}


def _op_times(graphs: Dict[str, Graph], threads: int, runs: int) -> Dict[str, Dict[str, float]]:
    """precision -> op name -> least seconds over the runs (PROFILE_RUNS),
    the variants' engines run in turn (one profiled run each per round) so
    that load hits all alike."""
    from hwtune.engine.runner import native_engine
    engines = {p: native_engine().NativeEngine(g, executors=1, threads=threads)
               for p, g in graphs.items()}
    try:
        samples: Dict[str, Dict[str, List[float]]] = {p: {} for p in graphs}
        for e in engines.values():
            e.run()  # warm-up: page faults, thread wake-up
        for _ in range(runs):
            for p, e in engines.items():
                e.run(profile=True)
                ops = graphs[p].ops
                for ev in e.events():
                    samples[p].setdefault(ops[ev.op].name, []).append(ev.end_s - ev.start_s)
        return {p: {k: min(v) for k, v in d.items()} for p, d in samples.items()}
    finally:
        for e in engines.values():
            e.close()


def _attributed(graph: Graph, times: Dict[str, float], names: Sequence[str]) -> Dict[str, float]:
    """op -> its time plus its helpers' (ops named `op@...`) and an even
    share of each quantize_u8 feeding it."""
    readers: Dict[str, List[str]] = {}
    for op in graph.ops:
        for t in op.inputs:
            readers.setdefault(t, []).append(op.name)
    wanted = set(names)
    out = {n: times.get(n, 0.0) for n in names}
    for op in graph.ops:
        base = op.name.split("@", 1)[0]
        if op.name in wanted:
            continue
        if base in wanted and "@" in op.name:
            out[base] += times.get(op.name, 0.0)
        elif op.op == "quantize_u8":
            users = [r for r in readers.get(op.outputs[0], []) if r in wanted]
            for r in users:
                out[r] += times.get(op.name, 0.0) / len(users)
    return out


def choose_precision(fused: Graph, run_graph: Callable[[Dict[str, Dict[str, Any]]], Graph],
                     precisions: Sequence[str], max_error: float, samples: List[cal.Sample],
                     *, threads: int, runs: int = PROFILE_RUNS,
                     progress: Callable[[str], None] = lambda s: None) -> PrecisionChoice:
    """fused: the fp32 graph as the engine runs it without layout rewrites
    (calibration, errors); run_graph(op_precision): the graph the tuned
    config runs with that table (per-op times, with the config's layouts)."""
    lowp = [p for p in precisions if p != "fp32"]
    cands = {p: candidates(fused, p) for p in lowp}
    kinds = {op.name: op.op for op in fused.ops}
    all_ops = list(dict.fromkeys(n for p in lowp for n in cands[p]))
    int8_x = {n: next(op.inputs[0] for op in fused.ops if op.name == n) for n in cands.get(
        "int8", [])}
    progress(f"calibrating on {len(samples)} sample(s): {len(all_ops)} candidate op(s)")
    ref = cal.run_samples(fused, samples, threads, extra=set(int8_x.values()))
    acts = cal.activation_params(ref, set(int8_x.values()))
    values = weight_values(fused, list({op.inputs[1] for op in fused.ops
                                        if op.name in int8_x}))

    def entry(name, prec):
        return _entry(prec, acts.get(int8_x.get(name)))

    def rewritten(table):
        return apply_precision(fused, table, values=values)

    evals = [0]

    def error(table) -> float:
        evals[0] += 1
        got = cal.run_samples(rewritten(table), samples, threads)
        return cal.output_error(got, ref, fused.outputs)

    progress("timing each op in " + ", ".join(["fp32"] + lowp) + " (interleaved)")
    graphs = {"fp32": run_graph({})}
    for p in lowp:
        if cands[p]:
            graphs[p] = run_graph({n: entry(n, p) for n in cands[p]})
    times = _op_times(graphs, threads, runs)
    fp32 = _attributed(graphs["fp32"], times["fp32"], all_ops)
    per = {p: _attributed(graphs[p], times[p], cands[p]) for p in lowp if p in graphs}
    choices = {n: OpChoice(n, kinds[n], fp32[n]) for n in all_ops}
    for p, t in per.items():
        for n, s in t.items():
            choices[n].times[p] = s

    for n, c in choices.items():
        paying = [p for p in lowp if p in c.times and c.times[p] < c.fp32_s]
        if not paying:
            c.why = "no gain"
            continue
        for p in paying:
            progress(f"error of {n} in {p} alone")
            c.errors[p] = error({n: entry(n, p)})
        ok = [p for p in paying if c.errors[p] <= max_error]
        if not ok:
            c.why = "error above the bound alone"
            continue
        c.precision = max(ok, key=lambda p: c.fp32_s - c.times[p])

    order = sorted((c for c in choices.values() if c.precision != "fp32"),
                   key=lambda c: c.fp32_s - c.chosen_s, reverse=True)

    def table(k):
        return {c.op: entry(c.op, c.precision) for c in order[:k]}

    lo, err_lo = 0, 0.0
    if order:
        progress(f"end-to-end error of all {len(order)} gaining op(s)")
        e = error(table(len(order)))
        if e <= max_error:
            lo, err_lo = len(order), e
        hi = len(order)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            progress(f"end-to-end error of the {mid} largest gains")
            e_mid = error(table(mid))
            if e_mid <= max_error:
                lo, err_lo = mid, e_mid
            else:
                hi = mid
    for c in order[lo:]:
        c.why, c.precision = "the bound, with the larger gains in low precision", "fp32"
    for c in order[:lo]:
        c.why = "gains within the bound"
    chosen = table(lo)
    ops = sorted(choices.values(), key=lambda c: c.fp32_s - c.chosen_s, reverse=True)
    return PrecisionChoice(max_error=max_error, precisions=list(precisions),
                           op_precision=chosen, ops=ops, error=err_lo, samples=len(samples),
                           evaluations=evals[0])
