"""Counting instead of timing: hardware counters through perf_event_open
where the machine exposes them, else valgrind's callgrind (instructions and
simulated cache misses) combined into an estimated-cycles figure.

Counts do not depend on what else the machine runs: the same binary, inputs
and environment give the same instruction count under callgrind (measured
here: identical totals run after run, 1 or 2 pool threads, under load). They
miss what only time shows (fork-join and scheduling overhead, memory
bandwidth, frequency): `hwtune check` keeps the time metric for those.

Estimated cycles (the weights iai-callgrind and CodSpeed use for the same
purpose): L1 hits + 5 x last-level hits + 35 x RAM accesses, where
  L1 hits  = Ir + Dr + Dw - (I1mr + D1mr + D1mw)
  LL hits  = (I1mr + D1mr + D1mw) - (ILmr + DLmr + DLmw)
  RAM      = ILmr + DLmr + DLmw
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

CACHE_EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")
METRICS = ("time", "cycles", "instructions", "estimated-cycles")
COUNTED = ("cycles", "instructions", "estimated-cycles")
# Cycles per access by where it hit (iai-callgrind's and CodSpeed's weights).
LL_HIT_CYCLES, RAM_CYCLES = 5, 35


def estimated_cycles(ev: Dict[str, float]) -> float:
    """The estimated-cycles figure of callgrind event counts."""
    g = lambda k: float(ev.get(k, 0))  # noqa: E731
    l1_miss = g("I1mr") + g("D1mr") + g("D1mw")
    ll_miss = g("ILmr") + g("DLmr") + g("DLmw")
    l1_hits = g("Ir") + g("Dr") + g("Dw") - l1_miss
    return l1_hits + LL_HIT_CYCLES * (l1_miss - ll_miss) + RAM_CYCLES * ll_miss


def metric_value(metric: str, ev: Dict[str, float]) -> float:
    if metric == "estimated-cycles":
        return estimated_cycles(ev)
    if metric == "instructions":
        return float(ev.get("Ir", ev.get("instructions", 0)))
    return float(ev.get("cycles", 0))


# -- callgrind ------------------------------------------------------------------
def valgrind() -> Optional[str]:
    """Path of valgrind, or None."""
    return shutil.which("valgrind")


def valgrind_version() -> str:
    """`valgrind --version` (e.g. 'valgrind-3.19.0'): counts are compared
    across hosts only when the same valgrind took them."""
    try:
        out = subprocess.run([valgrind() or "valgrind", "--version"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    return out.strip() or "?"


def callgrind_argv(out_file: str, toggles: List[str]) -> List[str]:
    """valgrind's arguments to count the marked regions (hwt_count_begin /
    hwt_count_end) of a command, inside the functions `toggles` only (the
    work itself: the pool's spin-waits vary with thread interleaving, the
    work does not)."""
    argv = [valgrind() or "valgrind", "--tool=callgrind", "--cache-sim=yes",
            "--instr-atstart=no", "--collect-atstart=no", "--compress-strings=no",
            "--compress-pos=no", f"--callgrind-out-file={out_file}"]
    argv += [f"--toggle-collect={t}" for t in toggles]
    return argv


@dataclass
class Profile:
    """One callgrind dump: its label, total event counts and every
    function's own (exclusive) counts."""
    label: str
    totals: Dict[str, float]
    functions: Dict[str, Dict[str, float]] = field(default_factory=dict)


def parse_callgrind(text: str) -> Profile:
    """A callgrind output file (written with --compress-strings=no
    --compress-pos=no) as a Profile. Cost lines after `calls=` are the
    callee's inclusive cost and do not count towards the caller's own."""
    events: List[str] = []
    label = ""
    fn = None
    funcs: Dict[str, List[float]] = {}
    totals: Optional[List[float]] = None
    skip_next = False
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("desc: Trigger:"):
            label = line.split("Client Request:", 1)[1].strip() if "Client Request:" in line \
                else line.split(":", 2)[2].strip()
        elif line.startswith("fn="):
            fn = line[3:].strip()
            funcs.setdefault(fn, [0.0] * len(events))
        elif line.startswith("calls="):
            skip_next = True
        elif line.startswith(("summary:", "totals:")):
            totals = [float(x) for x in line.split()[1:]]
        elif line[0].isdigit() or line[0] in "+-*":
            if skip_next:
                skip_next = False
                continue
            if fn is None:
                continue
            parts = line.split()[1:]
            acc = funcs[fn]
            for i, v in enumerate(parts[:len(events)]):
                acc[i] += float(v)
    per_fn = {f: dict(zip(events, c)) for f, c in funcs.items() if any(c)}
    if totals is None:
        totals = [sum(c[i] for c in funcs.values()) for i in range(len(events))]
    tot = dict(zip(events, totals))
    for e in events:
        tot.setdefault(e, 0.0)
    return Profile(label, tot, per_fn)


def read_dumps(out_file: str) -> List[Profile]:
    """Every numbered dump (out_file.1, .2, ...) in order; the final dump at
    exit (out_file itself) holds nothing counted and is left out."""
    out = []
    i = 1
    while os.path.exists(f"{out_file}.{i}"):
        with open(f"{out_file}.{i}", encoding="utf-8", errors="replace") as f:
            out.append(parse_callgrind(f.read()))
        i += 1
    return out


def grew(base: Dict[str, Dict[str, float]], cur: Dict[str, Dict[str, float]], metric: str,
         calls_base: float = 1.0, calls_cur: float = 1.0, top: int = 5
         ) -> List[Tuple[str, float, float]]:
    """The functions whose per-call count changed most, as (function, base
    per call, current per call), largest growth first."""
    names = set(base) | set(cur)
    rows = []
    for n in names:
        b = metric_value(metric, base.get(n, {})) / calls_base
        c = metric_value(metric, cur.get(n, {})) / calls_cur
        if b != c:
            rows.append((n, b, c))
    rows.sort(key=lambda r: -(r[2] - r[1]))
    return rows[:top]


# -- perf_event_open: the ctypes binding lives in the native package ---------------
from hwtune.native.perf_counters import (HW_EVENTS, SW_TASK_CLOCK,  # noqa: E402,F401
                                         ThreadCounters, hardware_counters)
