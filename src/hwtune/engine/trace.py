"""Per-op profile events as a Chrome trace (Trace Event Format), which
chrome://tracing and ui.perfetto.dev open directly: one row per executor,
one box per op."""

import json
import math
import os
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Union

from hwtune.errors import UsageError
from hwtune.measure.stats import median

PID = 1


class OpEvent(NamedTuple):
    op_name: str
    op_type: str
    executor: int
    threads: int
    start_s: float
    end_s: float


def as_events(items: Iterable[Union[OpEvent, Mapping[str, Any], tuple]]) -> List[OpEvent]:
    """Accept OpEvents, plain tuples in OpEvent order, or dicts with its
    field names (run_traces rows); reject what no viewer could draw."""
    out = []
    for i, item in enumerate(items):
        try:
            ev = OpEvent(**{f: item[f] for f in OpEvent._fields}) if isinstance(item, Mapping) \
                else OpEvent(*item)
        except (KeyError, TypeError) as exc:
            raise UsageError(f"trace event {i} is not (op_name, op_type, executor, threads, "
                             f"start_s, end_s): {exc}") from None
        start, end = float(ev.start_s), float(ev.end_s)
        if not (math.isfinite(start) and math.isfinite(end)) or end < start:
            raise UsageError(f"trace event {i} ({ev.op_name}) has bad times "
                             f"start {start!r}, end {end!r}")
        out.append(OpEvent(str(ev.op_name), str(ev.op_type), int(ev.executor), int(ev.threads),
                           start, end))
    return out


def _us(seconds: float) -> float:
    # Perfetto keeps fractional microseconds; 3 decimals = ns, the clock's grain.
    return round(seconds * 1e6, 3)


def chrome_trace(events, *, process_name: str = "hwtune",
                 metadata: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The trace as a JSON-ready dict. Times start at 0 at the first op;
    tid = executor id; each X event's args carry the op type and threads."""
    evs = sorted(as_events(events), key=lambda e: (e.start_s, e.executor))
    t0 = evs[0].start_s if evs else 0.0
    out: List[Dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": PID, "tid": 0,
         "args": {"name": process_name}},
    ]
    for ex in sorted({e.executor for e in evs}):
        out.append({"name": "thread_name", "ph": "M", "pid": PID, "tid": ex,
                    "args": {"name": f"executor {ex}"}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": ex,
                    "args": {"sort_index": ex}})
    for e in evs:
        out.append({"name": e.op_name, "cat": e.op_type, "ph": "X", "pid": PID,
                    "tid": e.executor, "ts": _us(e.start_s - t0),
                    "dur": _us(e.end_s - e.start_s),
                    "args": {"op_type": e.op_type, "threads": e.threads}})
    doc = {"traceEvents": out, "displayTimeUnit": "ms"}
    if metadata:
        doc["otherData"] = dict(metadata)
    return doc


def write_chrome_trace(path: Union[str, os.PathLike], events, **kwargs) -> int:
    """Write the trace to path (atomically: a viewer never sees half a file);
    returns the number of op events."""
    doc = chrome_trace(events, **kwargs)
    path = os.fspath(path)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, allow_nan=False)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise UsageError(f"cannot write --trace {path}: {exc.strerror}") from None
    return sum(1 for e in doc["traceEvents"] if e["ph"] == "X")


def summary(events) -> Dict[str, Any]:
    """Makespan and per-executor busy fraction of one profiled iteration."""
    evs = as_events(events)
    if not evs:
        return {"ops": 0, "makespan_s": 0.0, "busy": {}}
    span = max(e.end_s for e in evs) - min(e.start_s for e in evs)
    busy: Dict[int, float] = {}
    for e in evs:
        busy[e.executor] = busy.get(e.executor, 0.0) + (e.end_s - e.start_s)
    return {"ops": len(evs), "makespan_s": span,
            "busy": {ex: (b / span if span > 0 else 0.0) for ex, b in sorted(busy.items())}}


def profiled_runs(engine, graph, runs: int, warmup: int = 0) -> list:
    """`runs` profiled runs of a prepared engine (after `warmup` plain
    ones): per run, the engine's event of every op that ran, as OpEvents
    named after graph's ops (the per-op costs Graphi's profiler feeds the
    critical-path levels, and hwtune run --trace's timeline)."""
    for _ in range(warmup):
        engine.run()
    out = []
    for _ in range(runs):
        engine.run(profile=True)
        out.append([OpEvent(graph.ops[ev.op].name, graph.ops[ev.op].op, ev.executor,
                            ev.threads, ev.start_s, ev.end_s) for ev in engine.events()])
    return out


def op_medians(runs: list) -> dict:
    """op name -> median seconds over profiled runs (profiled_runs())."""
    durations: dict = {}
    for events in runs:
        for ev in events:
            durations.setdefault(ev.op_name, []).append(ev.end_s - ev.start_s)
    return {name: median(xs) for name, xs in durations.items()}
