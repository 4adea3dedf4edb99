"""Which CONV template knobs a run uses, per op, at the thread count it runs.

tune-graph stores the best knobs of each CONV workload per thread count
(tuned_subjects: host, tuner "conv", workload key, ISA, threads), and the
tuned engine config carries the knobs the layout DP chose at the config's
own thread count.

A config without CONV knobs (the default, a user config saved from flags)
runs every CONV with the template's default: stored workload knobs reach a
model only through a config that carries knobs, one the final comparison of
tune-graph kept against the default. Knobs that won per workload in
isolation lost inside whole models (transforms between ops whose blocks
differ, which only the layout DP prices): on a 2-vCPU Zen 4 (avx512), after
`tune-graph --budget 300` kept the default of MobileNetV2, ResNeXt-50 and
ConvNeXt-T, runs that applied the stored workload knobs to the default were
2.5-41% slower than before the tuning (MobileNetV2 8.98 -> 10.87 ms at
1 thread, 5.02 -> 7.10 ms at 2; bench_zoo.py --tune 300).

A run at T threads per executor of a config with knobs takes, for each
conv2d op:

1. the config's own op_params when they were chosen at T (the layout DP
   picked them among the workload's best layouts with the transforms between
   ops priced: better than each workload's best alone); a CONV such a
   config does not name runs the template default, as the config was
   measured;
2. else the workload's tuned knobs at T;
3. else the best point of a search at T that the budget cut ("partial@Tt":
   not stored as tuned, but its best so far was re-measured interleaved with
   the default at T, so it is at least as fast as the default there);
4. else its tuned knobs at the nearest tuned thread count (nearest() below);
5. else the config's op_params chosen at another thread count;
6. else the template's default (the op stays as the model has it).

In cases 2 and 3 at T itself, a 1x1 CONV whose NCHW GEMM kernel
(hwtune.tuners.conv_nchw) measured faster at T than those knobs runs that
kernel instead ("gemm@Tt"): the GEMM has no knobs for the search to store;
so does a few-input-channel CONV whose stem kernel did ("stem@Tt").
So does a training step's CONV (per-run weights) whose untuned plan
measured faster than its knobs ("untuned@Tt"): its per-run rules (Winograd
only above a pixel count) are no point of the search's space.
(Other NCHW default kernels are left to the layout DP, which prices the
transforms a switch of layout costs; the GEMM's margin covers them.)

A tuned row whose knobs no longer fit the template's declared space (a knob
added or its legal values changed: the tuner itself re-tunes such a row) is
ignored with a note. The knobs are applied to the plain model by the layout
pass, which inserts a transform wherever two ops' blocks now differ, so any
mix of sources gives a valid graph.

A training step's stride-1 conv2d_grad_data ops run as forward CONVs of
dy (engine/ops/grad_conv.c) and take the same template knobs: their
workload is that forward CONV's (workloads.conv_workload), chosen here by
the same rules and reported with the same sources.

Weight gradients (conv2d_grad_weight) and the other data gradients (im2col)
take knobs of their own, tuned per workload and thread count by
hwtune.tuners.conv_grad, chosen by the same rules (choose_grad).

Knob names are never listed here: the space is the template's declaration
(hwt_conv_knobs through ConvWorkload.knobs) and the layout pass's KNOBS.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from hwtune.engine.effective import StaleConfig, effective_graph
from hwtune.engine.knob_space import Params, Space, key_of
from hwtune.engine.workloads import (CONFIRM_SEARCH, CONV_TUNER, NCHW_TUNER, conv_workload,
                                     grad_workload, has_own_knobs, nchw_kernel, tuned_op)
from hwtune.errors import UsageError
from hwtune.graph.autodiff import is_training_graph
from hwtune.graph.passes.layout import check_op_params, ensure_validated
from hwtune.measure.result import OK
from hwtune.native.isa import selected_isa


def nearest(counts: Sequence[int], threads: int) -> int:
    """The tuned thread count closest to `threads` by ratio (|log t/T|), a
    tie going to the larger count.

    Ratio, not difference: the knobs size the blocks each thread works on
    and the number of parallel tasks (output-channel blocks x row blocks),
    and a thread's share of the work scales as 1/threads, so 4 is as far
    from 2 as 1 is, and a run at 12 takes 16 (x1.33) over 8 (x1.5). Ties go up:
    knobs tuned for more threads leave at least as many tasks as a smaller
    team can use, while knobs tuned for fewer can leave a bigger team's
    threads idle (a reasoned rule, not a measured one: no machine here has
    more than 2 cores to measure it on).

    Knobs from another count are a guess, not a measurement: on a 2-core
    Zen 3 (AVX2) the ResNet-18 3x3 workloads' knobs tuned at 2 threads ran
    at 1 thread 0.80-1.37x as fast as the template default (0.80x and 0.83x
    where the 1-thread default is Winograd and the 2-thread tuning chose the
    direct template; 0.99x on 256x14x14, 1.19x and 1.37x on the 256->512
    stride-2 and the 512x7x7 layers; measured interleaved), which is
    why tune-graph tunes every count the sweep measures and a search at T,
    even a cut one, comes first."""
    if not counts:
        raise ValueError("no tuned thread counts")
    return min(counts, key=lambda t: (abs(math.log(t / threads)), -t))


@dataclass
class ConvKnobs:
    """The knobs chosen for a run: op_params for the layout pass, and per
    conv2d op where its knobs came from ("config@2t", "tuned@1t",
    "tuned@2t(nearest)", "default")."""
    threads: int
    op_params: Dict[str, dict] = field(default_factory=dict)
    sources: Dict[str, str] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)

    def summary(self) -> str:
        """'conv knobs: tuned@1t for 12 ops, tuned@2t(nearest) for 8' ('' without CONVs)."""
        if not self.sources:
            return ""
        counts = Counter(self.sources.values())  # first-seen order among equals
        parts = [f"{src} for {n} op{'s' if n > 1 else ''}"
                 for src, n in sorted(counts.items(), key=lambda kv: -kv[1])]
        return "conv knobs: " + ", ".join(parts)

    def to_json(self) -> dict:
        return {"threads": self.threads, "sources": dict(self.sources),
                "summary": self.summary(), "notes": list(self.notes)}


def _plain(graph) -> bool:
    """Whether the layout pass may rewrite graph (no blocked op in it yet)."""
    return not any(op.op == "layout_transform" or (op.resolved or {}).get("layout") == "NCHWc"
                   for op in graph.ops)


def _chosen_here(op_params: Mapping[str, dict], params_threads: Optional[int],
                 threads: int) -> bool:
    """Whether the config's knobs were chosen at this count. Such a config
    was measured (tune-graph's final comparison) with every CONV it does
    not name at the default: it runs so, not with workload knobs nobody
    measured beside its own."""
    return bool(op_params) and params_threads == threads


def choose(db, host_key: str, graph, op_params: Mapping[str, dict], *, threads: int,
           params_threads: Optional[int], isa: Optional[str] = None) -> ConvKnobs:
    """The knobs of every conv2d op of the validated plain `graph` for a run
    at `threads` threads per executor. op_params: the config's (chosen at
    params_threads; None: unknown, never taken as chosen at `threads`).
    db None: nothing stored."""
    isa = isa or selected_isa()
    out = ConvKnobs(threads=int(threads))
    # A training graph's backward ops read the forward activations in
    # NCHW: its CONVs keep NCHW with tuned knobs (as tune-graph stores them).
    layout = "NCHW" if is_training_graph(graph) else "NCHWc"
    rows: Dict[str, Dict[int, dict]] = {}
    own_count = _chosen_here(op_params, params_threads, threads)
    partial: Dict[Tuple[str, int], Optional[dict]] = {}
    stale: Dict[str, List[int]] = {}
    for op in graph.ops:
        if not tuned_op(graph, op):  # conv2d, and stride-1 data gradients (forward CONVs)
            continue
        mine, refused = op_params.get(op.name), None
        if mine is not None:
            try:
                mine = check_op_params(graph, {op.name: dict(mine)})[op.name]
            except UsageError as exc:
                mine, refused = None, exc
        wl = conv_workload(graph, op)
        if wl.key not in rows:
            got = {} if db is None else db.tuned_threads(host_key, tuner=CONV_TUNER,
                                                         subject=wl.key, isa=isa)
            space = wl.space(isa)
            rows[wl.key] = {t: r for t, r in got.items()
                            if space.contains(r["best_params"]) and r["best_s"]}
            old = sorted(set(got) - set(rows[wl.key]))
            if old:
                stale[wl.key] = old
        tuned = rows[wl.key]
        keep = "NCHW" if op.op == "conv2d_grad_data" else (mine or {}).get("layout", layout)
        template_s = None
        cut = None
        if threads not in tuned and db is not None and not (mine is not None
                                                           and params_threads == threads):
            if (wl.key, threads) not in partial:
                partial[wl.key, threads] = _partial_best(db, host_key, wl, isa, threads)
            cut = partial[wl.key, threads]
        if mine is not None and params_threads == threads:
            out.op_params[op.name], src = mine, f"config@{threads}t"
        elif own_count and op.name not in op_params:
            src = "default"  # the config, chosen at this count, left it default
        elif threads in tuned or (tuned and cut is None):
            t = threads if threads in tuned else nearest(sorted(tuned), threads)
            out.op_params[op.name] = dict(tuned[t]["best_params"], layout=keep)
            src = f"tuned@{t}t" + ("" if t == threads else "(nearest)")
            template_s = tuned[t]["best_s"] if t == threads else None
        elif cut is not None:
            template_s = cut.get("_seconds")
            out.op_params[op.name] = dict({k: v for k, v in cut.items() if k != "_seconds"},
                                          layout=keep)
            src = f"partial@{threads}t"
        elif mine is not None:
            out.op_params[op.name] = mine
            src = f"config@{params_threads}t" if params_threads else "config"
        else:
            src = "default"
        if src.startswith(("tuned@", "partial@")) and db is not None and template_s:
            # The 1x1 GEMM and the stem kernel have no knobs, so the
            # template's search never weighs them; their own trial at this
            # thread count does (the same harness). Without knobs the NCHW
            # plan is that kernel.
            gemm_s = _gemm_seconds(db, host_key, wl, isa, threads)
            if gemm_s is not None and gemm_s < template_s:
                out.op_params[op.name] = {"layout": "NCHW"}
                src = f"{_knobless(wl) or 'untuned'}@{threads}t"
        out.sources[op.name] = src
        if refused is not None:
            out.notes.append(f"the config's CONV parameters of {op.name} do not apply "
                             f"({refused}): ignored, running "
                             + ("default CONV parameters" if src == "default"
                                else f"the knobs {src}"))
    gw_params, gw_sources = choose_grad(
        db, host_key, graph, threads=threads, isa=isa, op_params=op_params,
        params_threads=params_threads)
    out.op_params.update(gw_params)
    out.sources.update(gw_sources)
    if stale:
        shown = "; ".join(f"{k} at {', '.join(f'{t}t' for t in ts)}"
                          for k, ts in list(stale.items())[:3])
        out.notes.append(f"tuned CONV knobs of {len(stale)} workload(s) no longer fit the "
                         f"template's knobs (stale, ignored; tune-graph re-tunes them): {shown}"
                         + (" ..." if len(stale) > 3 else ""))
    return out


def choose_grad(db, host_key: str, graph, *, threads: int, isa: str,
           op_params=None, params_threads: Optional[int] = None
           ) -> Tuple[Dict[str, dict], Dict[str, str]]:
    """(op_params, sources) for every CONV gradient with knobs of its own of a run at
    `threads` threads per executor, by choose's rules: the config's own
    knobs chosen at `threads`, else the workload's tuned knobs at `threads`,
    else at the nearest tuned count, else the config's from another count,
    else the default (no attributes)."""
    op_params = op_params or {}
    params: Dict[str, dict] = {}
    sources: Dict[str, str] = {}
    rows: Dict[str, Dict[int, dict]] = {}
    for op in graph.ops:
        if not has_own_knobs(graph, op):
            continue
        wl = grad_workload(graph, op)
        if wl.key not in rows:
            got = {} if db is None else db.tuned_threads(host_key, tuner=wl.tuner,
                                                         subject=wl.key, isa=isa)
            space = wl.space()
            rows[wl.key] = {t: r for t, r in got.items()
                            if space.contains(r["best_params"]) and r["best_s"]}
        tuned, mine = rows[wl.key], op_params.get(op.name)
        if mine is not None:
            try:
                mine = check_op_params(graph, {op.name: dict(mine)})[op.name]
            except UsageError:
                mine = None  # a config from another build of the knobs: ignored
        if mine is not None and params_threads == threads:
            params[op.name], sources[op.name] = dict(mine), f"config@{threads}t"
        elif _chosen_here(op_params, params_threads, threads) and op.name not in op_params:
            sources[op.name] = "default"  # the config, chosen at this count, left it default
        elif tuned:
            t = threads if threads in tuned else nearest(sorted(tuned), threads)
            params[op.name] = dict(tuned[t]["best_params"])
            sources[op.name] = f"tuned@{t}t" + ("" if t == threads else "(nearest)")
        elif mine is not None:
            params[op.name] = dict(mine)
            sources[op.name] = f"config@{params_threads}t" if params_threads else "config"
        else:
            sources[op.name] = "default"
    return params, sources


def layout_candidates(rows: List[dict], space: Space, top_k: int) -> List[Tuple[Params, float]]:
    """Best ok trial of each distinct (ic_bn, oc_bn), best first, top_k of
    them. When some rows are re-measurements (CONFIRM_SEARCH), only those
    count, so every candidate time comes from the same interleaved runs; a
    point counts with its latest figure."""
    if any(r["search"] == CONFIRM_SEARCH and r["status"] == OK for r in rows):
        rows = [r for r in rows if r["search"] == CONFIRM_SEARCH]
    latest: Dict[Tuple, dict] = {}
    for r in rows:  # oldest first
        latest[key_of(r["params"])] = r
    best: Dict[Tuple[int, int], Tuple[Params, float]] = {}
    for r in latest.values():
        p, s = r["params"], r["median_s"]
        if r["status"] != OK or s is None or not space.contains(p):
            continue
        lay = (p["ic_bn"], p["oc_bn"])
        if lay not in best or s < best[lay][1]:
            best[lay] = (p, s)
    return sorted(best.values(), key=lambda ps: ps[1])[:max(0, int(top_k))]


def _partial_best(db, host_key: str, wl, isa: str, threads: int) -> Optional[dict]:
    """The best point of a search of wl at `threads` that ended without a
    tuned row (cut by the budget), when its confirmation rounds ran (the
    best points re-measured interleaved with the default); None otherwise
    (an interrupted search's figures were never compared like with like)."""
    trials = db.trials(host_key, tuner=CONV_TUNER, subject=wl.key, isa=isa, threads=threads)
    if not any(r["search"] == CONFIRM_SEARCH and r["status"] == OK for r in trials):
        return None
    best = layout_candidates(trials, wl.space(isa), 1)
    return dict(best[0][0], _seconds=best[0][1]) if best else None


# The NCHW default kernels that have no knobs (so the template's search
# never weighs them) -> the source they are reported as: the 1x1 GEMM, and
# the stem kernel of few-input-channel CONVs (kernels/conv/stem.c).
KNOBLESS = {"NCHW-gemm": "gemm", "NCHW-stem": "stem"}


def _knobless(wl) -> Optional[str]:
    return KNOBLESS.get(nchw_kernel(wl))


def _gemm_seconds(db, host_key: str, wl, isa: str, threads: int) -> Optional[float]:
    """The measured time at `threads` of wl's NCHW default kernel when that
    has no knobs (the 1x1 GEMM, the stem kernel: hwtune.tuners.conv_nchw
    measures it), or for a workload with per-run
    weights (a training step's: the untuned plan, which its per-run rules
    shape, is no point of the template's space either); None otherwise (not
    measured, failed, or another kernel)."""
    if not (wl.per_run_weights or _knobless(wl)):
        return None
    rows = db.trials(host_key, tuner=NCHW_TUNER, subject=wl.key, isa=isa, threads=threads)
    ok = [r for r in rows if r["status"] == OK and r["median_s"]]
    return ok[-1]["median_s"] if ok else None


def for_run(db, host_key: str, graph, cfg, *, params_threads: Optional[int],
            isa: Optional[str] = None) -> Tuple[object, object, ConvKnobs]:
    """(config, graph to run, knobs): cfg with each CONV's knobs for its
    thread count (choose; none from db for a config without knobs) and the
    model rewritten for them. Per-op tables
    (op_cost, op_candidates, ...) that name ops of another rewrite (layout
    transforms the chosen knobs no longer need) lose those entries.
    A graph that is already blocked runs as it is."""
    graph = ensure_validated(graph)
    if not _plain(graph):
        return cfg, effective_graph(graph, cfg), ConvKnobs(threads=cfg.threads)
    if not cfg.op_params:
        db = None  # no config knobs: the template's defaults (module docstring)
    knobs = choose(db, host_key, graph, cfg.op_params, threads=cfg.threads,
                   params_threads=params_threads, isa=isa)
    new = replace(cfg, op_params=knobs.op_params)
    try:
        run_graph = effective_graph(graph, new)
    except StaleConfig as exc:
        # Every op's params were checked on their own: a mix the pass
        # refuses is a rule-table bug, reported, and the run goes on untuned.
        knobs.notes.append(f"{exc}; default CONV parameters")
        knobs.op_params = {}
        knobs.sources = {k: "default" for k in knobs.sources}
        new, run_graph = replace(cfg, op_params={}), graph
    if knobs.op_params != cfg.op_params:
        names = {op.name for op in run_graph.ops}
        new = replace(new, **{f: {k: v for k, v in getattr(new, f).items() if k in names}
                              for f in ("op_threads", "op_priority", "op_cost",
                                        "op_candidates")})
    return new, run_graph, knobs
