"""`hwtune tune-graph MODEL --inputs FILE`: a dynamic model (a vertex
function F over per-sample input graphs) tuned at the shapes the batched
executor actually runs, on the user's samples, at one policy and batch.

1. executors  batch-level executors (teams, each evaluating whole batches)
              x threads per team, x the chunk (most rows one op call takes):
              one pass over the samples per sample, every candidate
              interleaved with the others, outputs checked against the
              numpy reference (a wrong answer is stored as such and cannot
              win). Trials: tuner 'dyn-executors', subject the model hash,
              samples digest, policy and batch.
2. op-threads the histogram of rows per op call of one pass at the chosen
              config (the executor's dry walk at prepare: each call is a
              piece prepared for a power-of-two row count), then for each
              row count with calls, F's ops called at it as a static graph
              of that many rows, each op's thread count inside the team
              hill-climbed alone (hwtune.tuners.hillclimb, the static
              tuner's 'op-threads' trials and results: a workload tuned at
              those shapes before is reused, from any model).
Then the default (1 team x every usable CPU, chunk 256, the engine's own
per-op counts), the executor stage's best and the tuned config are measured
interleaved and checked; the fastest is stored as the model's tuned config
for that policy and batch (dynamic_configs), which `hwtune run --inputs`
uses. Every trial is committed as it finishes; a rerun after Ctrl-C reuses
them."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from hwtune.db.lifecycle import finishing
from hwtune.dynamic.executor import DynamicEngine, DynConfig
from hwtune.dynamic.measure import measure
from hwtune.errors import HwtuneError, UsageError
from hwtune.measure import clock
from hwtune.tuners.context import Progress, TuneContext
from hwtune.tuners.search import ERROR, OK, WRONG_ANSWER, ListSearch, Outcome

TUNER = "dyn-executors"
# The engine's default chunk and a factor of 4 either side: a chunk above
# the largest group changes nothing (the histogram shows the row counts a
# pass runs at), and a smaller one trades op-call overhead for pieces that
# fit the caches. Not yet measured across models: the sweep measures each.
CHUNKS = (64, 256, 1024)
# Interleaved passes per candidate in the final comparison (the static
# tuner's FINAL_REPS: 15 samples gave a median within ~2-4% under the usual
# load of the 2-core dev VM).
FINAL_REPS = 15
MIN_FINAL_REPS = 3
# With --budget, the executor stage gets at most this share of it and the
# final comparison is reserved its passes at the measured pass time; the
# op-thread climbs get the rest. A first split, not yet measured.
EXECUTOR_SHARE = 0.4


@dataclass
class DynTuneOptions:
    batch: int = 64
    policy: str = "batched"
    budget_s: Optional[float] = None
    reps: int = 5
    strategy: int = 1
    seed: int = 0

    def check(self) -> "DynTuneOptions":
        from hwtune.native.dynamic import POLICIES
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < 1:
            raise UsageError(f"invalid --batch {self.batch!r}: one integer >= 1")
        if self.policy not in POLICIES:
            raise UsageError(f"invalid --policy {self.policy!r}: one of {', '.join(POLICIES)}")
        if self.budget_s is not None and not self.budget_s > 0:
            raise UsageError(f"invalid --budget {self.budget_s!r}: must be > 0 seconds")
        if not 1 <= self.reps <= 1000:
            raise UsageError(f"invalid --reps {self.reps}: expected 1..1000")
        if self.strategy not in (1, 2):
            raise UsageError(f"invalid --strategy {self.strategy}: 1 (per op) or 2 (per op type)")
        return self


def candidates(n_cpus: int, n_batches: int) -> List[Dict[str, int]]:
    """executors x threads (the static sweep's symmetric splits, executors
    capped at the batch count: a team without a batch idles) x CHUNKS."""
    from hwtune.tuners.executor_sweep import candidates as splits
    pairs = [(e, t) for e, t in splits(n_cpus) if e <= max(1, n_batches)]
    return [{"executors": e, "threads": t, "chunk": c} for e, t in pairs for c in CHUNKS]


def _config(opts: DynTuneOptions, p: Dict[str, Any]) -> DynConfig:
    return DynConfig(policy=opts.policy, batch=opts.batch, executors=p["executors"],
                     threads=p["threads"], chunk=p["chunk"],
                     op_threads=p.get("op_threads") or None)


def _outcome(r) -> Outcome:
    if r.check is not None and not r.check["ok"]:
        return Outcome(WRONG_ANSWER, samples=list(r.seconds),
                       note=f"max |engine - numpy| = {r.check['rel']:.2g} x max|numpy| on "
                            f"{r.check['output']}")
    return Outcome(OK, r.median_s, list(r.seconds))


class _PassMeasure:
    """The executor stage's measure: batch(params) times one pass over the
    samples per sample for every given config, interleaved, checked against
    the reference; a config the engine refuses fails alone."""

    def __init__(self, model, samples, opts: DynTuneOptions, reps: int, reference):
        self.model, self.samples, self.opts = model, samples, opts
        self.reps, self.reference = reps, reference

    def __call__(self, params) -> Outcome:
        return self.batch([params])[0]

    def batch(self, params_list) -> List[Outcome]:
        cfgs = [_config(self.opts, p) for p in params_list]
        try:
            got = measure(self.model, self.samples, cfgs, reps=self.reps, check=True,
                          reference=self.reference)
        except HwtuneError as exc:
            if len(params_list) > 1:  # find which one: each alone
                return [self.batch([p])[0] for p in params_list]
            return [Outcome(ERROR, note=str(exc))]
        return [_outcome(r) for r in got]


def rows_graph(model, rows: int, op_names: Sequence[str]):
    """F's ops named, as a static graph whose row tensors have `rows` rows
    (what the executor's bucket of that size runs): params keep their
    shapes and values, every other input an op reads that no named op
    writes becomes a graph input."""
    from hwtune.graph.generators.builder import Builder
    g = model.graph
    params = {t.name: t for t in g.params}
    wanted = set(op_names)
    b = Builder(f"{g.name}@{rows}rows", seed=g.seed)
    declared: set = set()
    outputs: List[str] = []
    for i in g.order:
        op = g.ops[i]
        if op.name not in wanted:
            continue
        for name in op.inputs:
            if name in declared:
                continue
            declared.add(name)
            if name in params:
                b.param(name, g.shapes[name], **params[name].init)
            else:
                b.input(name, [rows] + list(g.shapes[name][1:]))
        b.op(op.name, op.op, op.inputs, None if op.outputs == [op.name] else op.outputs,
             **op.attrs)
        declared.update(op.outputs)
        outputs += op.outputs
    b.output(*outputs)
    return b.build()


def _stage_executors(ctx: TuneContext, model, samples, opts: DynTuneOptions, subject: str,
                     reference) -> Tuple[Optional[Dict[str, Any]], Optional[float],
                                         Optional[Dict[str, Any]], dict]:
    """(best params, its seconds, the best params with teams of 2+ threads,
    the stage's report)."""
    from hwtune.tuners.loop import run_search
    n_batches = -(-samples.count // opts.batch)
    points = candidates(len(ctx.cpus), n_batches)
    store = ctx.store(tuner=TUNER, subject=subject, threads=None)
    watch = clock.Stopwatch()
    ctx.progress("executors", f"{len(points)} configs (executors x threads x chunk), "
                              f"{ctx.reps} interleaved passes each")
    res = run_search(ListSearch(points, name="grid"), _PassMeasure(model, samples, opts,
                                                                    ctx.reps, reference),
                     store, deadline=ctx.deadline)
    best = res.best_params
    summary = ("nothing measured (budget)" if best is None else
               f"best {best['executors']}x{best['threads']} c{best['chunk']} at "
               f"{res.best_s * 1e3:.2f} ms a pass, of {len(points)} configs")
    looked = [store.lookup(p) for p in points]
    failed = sum(1 for o in looked if o is not None and o.status != OK)
    if failed:
        summary += f" ({failed} failed or wrong)"
    wide = min(((o.seconds, i) for i, o in enumerate(looked)
                if o is not None and o.status == OK and points[i]["threads"] >= 2),
               default=None)
    return best, res.best_s, None if wide is None else points[wide[1]], {
        "summary": summary, "trials": res.trials, "measured": res.measured,
        "reused": res.reused, "seconds": watch.elapsed(), "stopped": res.stopped}


def _stage_op_threads(ctx: TuneContext, model, hist: Dict[str, Dict[int, int]], team: int
                      ) -> Tuple[Dict[str, Dict[int, int]], dict, List[str]]:
    """op name -> {rows: threads} from a climb per row count with calls."""
    from hwtune.tuners import hillclimb
    watch = clock.Stopwatch()
    info = {"trials": 0, "measured": 0, "reused": 0, "stopped": "done"}
    why: List[str] = []
    if team < 2:
        info.update(summary="skipped: teams of 1 thread have no per-op count to choose",
                    seconds=0.0)
        return {}, info, why
    by_rows: Dict[int, List[str]] = {}
    for name, calls in hist.items():
        for rows in calls:
            by_rows.setdefault(int(rows), []).append(name)
    # Heaviest first (rows x calls over its ops), so a budget cut leaves the light ones.
    weight = {r: sum(r * hist[n][r] for n in names) for r, names in by_rows.items()}
    out: Dict[str, Dict[int, int]] = {}
    workloads = 0
    for rows in sorted(by_rows, key=lambda r: (-weight[r], r)):
        if ctx.out_of_time():
            info["stopped"] = "deadline"
            why.append(f"op-threads: the budget ran out before the {rows}-row calls")
            break
        ctx.progress("op-threads", f"{len(by_rows[rows])} ops at {rows} rows")
        try:
            g = rows_graph(model, rows, by_rows[rows])
        except HwtuneError as exc:
            why.append(f"op-threads: F's ops at {rows} rows do not build alone: {exc}")
            continue
        res = hillclimb.tune_op_threads(ctx, g, team_threads=team)
        info["measured"] += res.measured
        info["reused"] += res.reused
        if res.stopped == "deadline":
            info["stopped"] = "deadline"
        for grp in res.groups:
            workloads += 1
            if grp.status in ("tuned", "reused") and grp.best_threads:
                for name in grp.ops:
                    out.setdefault(name, {})[rows] = int(grp.best_threads)
    info["trials"] = info["measured"] + info["reused"]
    fewer = sum(1 for by in out.values() for t in by.values() if t < team)
    info["summary"] = (f"{workloads} workloads at {len(by_rows)} row counts climbed inside a "
                       f"{team}-thread team; {fewer} (op, rows) run best on fewer threads")
    info["seconds"] = watch.elapsed()
    return out, info, why


def _cfg_json(r) -> dict:
    return {"executors": r.config.executors, "threads": r.threads, "chunk": r.config.chunk,
            "pin": r.config.pin, "op_threads": r.config.op_threads or {}}


def _side(r) -> dict:
    import math
    rel = r.check["rel"]
    return {"config": _cfg_json(r), "median_s": r.median_s, "samples_per_s": r.samples_per_s,
            "check": {"ok": r.check["ok"], "rel": rel if math.isfinite(rel) else None},
            "seconds": list(r.seconds)}


def tune_dynamic(db, host_key: str, model, samples, opts: DynTuneOptions, *, inputs: str,
                 model_path: str, cpus: Sequence[int], cpu_model: Optional[str] = None,
                 progress: Optional[Progress] = None) -> dict:
    """Tune, store and describe; returns the "dynamic-tune" document."""
    from hwtune.dynamic.model import model_hash
    from hwtune.dynamic.reference import run_reference
    from hwtune.dynamic.sources import samples_digest
    from hwtune.graph.reference import init_params
    from hwtune.native.isa import selected_isa

    opts.check()
    mhash, digest = model_hash(model), samples_digest(inputs)
    subject = f"dyn|{mhash}|{digest}|{opts.policy}|b{opts.batch}"
    deadline = clock.deadline_after(opts.budget_s)
    ctx = TuneContext(db, None, host_key, cpus=list(cpus), progress=progress or (lambda s, m: None),
                      reps=opts.reps, seed=opts.seed, strategy=opts.strategy)
    run_id = db.start_run(host_key, "tune", {
        "model": model_path, "model_hash": mhash, "inputs": inputs, "samples_digest": digest,
        "policy": opts.policy, "batch": opts.batch, "budget_s": opts.budget_s,
        "reps": opts.reps, "strategy": opts.strategy, "dynamic": True})
    ctx.run_id = run_id
    watch = clock.Stopwatch()
    with finishing(db, run_id, "tuning run", kept="every finished trial is kept and the next "
                   "tune-graph resumes from them"):
        ctx.progress("reference", f"numpy reference of {samples.count} samples")
        reference = run_reference(model, samples.arrays(), init_params(model.graph))["readouts"]
        stages: Dict[str, dict] = {}
        why: List[str] = []
        if opts.budget_s is not None:
            ctx.deadline = clock.deadline_after(opts.budget_s * EXECUTOR_SHARE)
        best, best_s, wide, stages["executors"] = _stage_executors(ctx, model, samples, opts,
                                                                   subject, reference)
        default = DynConfig(policy=opts.policy, batch=opts.batch)
        swept = _config(opts, best) if best else default
        # Per-op counts need a team to choose in: when 1-thread teams won,
        # the ops are climbed in the best team of 2+ threads, a third
        # candidate for the final comparison to decide.
        climbed = swept
        if best is not None and best["threads"] < 2 and wide is not None:
            climbed = _config(opts, wide)
            why.append(f"op-threads: climbed in {wide['executors']}x{wide['threads']} "
                       f"c{wide['chunk']}, the best config with teams of 2+ threads (the "
                       "executors' best has 1-thread teams)")
        if deadline is not None:
            # leave the final comparison its passes (3 candidates)
            pass_s = best_s or 0.0
            ctx.deadline = deadline - 3 * MIN_FINAL_REPS * 2 * pass_s
        with DynamicEngine(model, samples, climbed) as e:
            hist, team, hist_chunk = e.histogram(), e.threads, e.chunk
        op_threads, stages["op-threads"], lines = _stage_op_threads(ctx, model, hist, team)
        why += lines
        tuned = replace(climbed, op_threads=op_threads or None)
        cands = [default, swept] + ([tuned] if op_threads else [])
        reps = FINAL_REPS
        if deadline is not None and best_s:
            left = max(0.0, deadline - clock.monotonic())
            reps = max(MIN_FINAL_REPS, min(FINAL_REPS, int(left / (len(cands) * best_s * 2))))
        ctx.progress("final", f"default vs tuned: {reps} interleaved passes each")
        load_before = os.getloadavg()[0]
        got = measure(model, samples, cands, reps=reps, check=True, reference=reference)
        load_after = os.getloadavg()[0]
        if not got[0].check["ok"]:
            raise HwtuneError(f"the default config of {model.name} computed outputs that differ "
                              f"from the numpy reference ({got[0].check['rel']:.2g} x "
                              "max|numpy|): a bug, nothing stored")
        labels = ["default", "executors", "tuned"][:len(got)]
        ok = [(r.median_s, i) for i, r in enumerate(got) if r.check["ok"]]
        for i, r in enumerate(got):
            if not r.check["ok"]:
                why.append(f"final: '{labels[i]}' left out (wrong answer: "
                           f"{r.check['rel']:.2g} x max|numpy|)")
        _, win = min(ok)
        chosen = got[win]
        why.append(f"final: {labels[win]} is the fastest of "
                   + ", ".join(f"{labels[i]} {r.median_s * 1e3:.2f} ms" for i, r in enumerate(got))
                   + " (medians of interleaved passes)")
        cfg = _cfg_json(chosen)
        config_id = db.put_dynamic_config(
            host_key, mhash, model=model.name, policy=opts.policy, batch=opts.batch,
            executors=cfg["executors"], threads=cfg["threads"], chunk=cfg["chunk"],
            pin=cfg["pin"], op_threads=cfg["op_threads"], samples_digest=digest,
            source="tuned", run_id=run_id)
        doc = {"model": model.name, "model_hash": mhash, "model_path": model_path,
               "ops": len(model.graph.ops), "inputs": inputs, "samples": samples.count,
               "samples_digest": digest, "policy": opts.policy, "batch": opts.batch,
               "cpu": cpu_model, "isa": selected_isa(), "cpus": len(cpus),
               "histogram": {op: {str(r): c for r, c in by.items()} for op, by in hist.items()},
               "histogram_chunk": hist_chunk,
               "stages": stages, "default": _side(got[0]), "tuned": _side(chosen),
               "chosen": labels[win], "chosen_config": cfg,
               "candidates": [dict(_side(r), label=labels[i],
                                   speedup=got[0].median_s / r.median_s)
                              for i, r in enumerate(got)],
               "speedup": got[0].median_s / chosen.median_s, "reps": reps,
               "load": [load_before, load_after], "why": why, "config_id": config_id,
               "run_id": run_id, "db": str(db.path), "tuning_s": watch.elapsed()}
        db.add_fact(run_id, "dynamic_tune_summary", {k: v for k, v in doc.items()
                                                     if k not in ("db",)})
        return doc
