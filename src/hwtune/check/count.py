"""Run counted figures' work: `python -m hwtune.check.count SPEC OUT`.

`hwtune check` starts this program under valgrind's callgrind (metrics
instructions and estimated-cycles where the machine has no hardware
counters) or on its own (perf_event_open counters), with the interpreter of
the build being measured. SPEC (JSON) lists the figures; each figure's
`reps` calls run between hwt_count_begin() and hwt_count_end(name), so
callgrind writes one dump per figure and counts nothing else (the
`--toggle-collect` functions of counting.TOGGLES limit it further to the
kernels' own work). OUT receives, per figure, the calls made and, with
perf counters, the counts.

perf counters cannot be limited to functions: they count everything the
process does while enabled, and one call of the figure's loop also
allocates and fills its operands (under callgrind, for the element-wise
figure of configs/ci.toml, 6.8M instructions of set-up against 0.14M of
kernel: a kernel twice as slow would have grown the count by 2%). So the
perf path counts one C call of 2 x reps kernel calls and one of reps, with
the same set-up, and keeps the difference: reps kernel calls, set-up and
Python subtracted. Each figure's wall seconds (pool, set-up and counted
calls, under valgrind's slowdown when there) go to OUT as wall_s.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable, Dict

from hwtune.measure import clock

# The functions whose calls are counted, per figure kind: the kernels' own
# work. The fork-join around them spins for as long as the other thread
# takes (under valgrind: however the scheduler interleaves them), so it is
# left out; a regression there shows in time, not in counts.
TOGGLES = {"gemm": "hwt_gemm_run_part", "eltwise": "hwt_eltwise_run_part"}


def work(fig: Dict[str, Any], pool, isa, reps: int, one_call: bool = False
         ) -> Callable[[], object]:
    """One call runs the figure's kernel `reps` times (fresh operands are
    allocated and filled first, outside the counted functions); one_call:
    all of them in one C call, after one set-up."""
    from hwtune.native import bench
    p = fig["params"]
    r, k = (1, reps) if one_call else (reps, 1)
    if fig["kind"] == "gemm":
        return lambda: bench.gemm_samples(pool, p["threads"], p["M"], p["K"], p["N"], isa=isa,
                                          warmup=0, reps=r, inner=k)
    if fig["kind"] == "eltwise":
        regions = int(p.get("regions", 1))
        return lambda: bench.eltwise_samples(pool, p["threads"], p["op"], p["n"], isa=isa,
                                             warmup=0, reps=r, inner=k, regions=regions)
    raise ValueError(f"figure kind {fig['kind']!r} cannot be counted")


def perf_count(metric: str, fig: Dict[str, Any], pool, isa, reps: int) -> int:
    """The counter's count of `reps` kernel calls alone: a C call of 2 x
    reps calls minus one of reps calls (the same set-up in both)."""
    from hwtune.measure.counting import ThreadCounters
    short = work(fig, pool, isa, reps, one_call=True)
    long_ = work(fig, pool, isa, 2 * reps, one_call=True)
    short()  # warm: pages, caches, the pool's threads awake
    ctr = ThreadCounters(metric)
    try:
        return ctr.count(long_) - ctr.count(short)
    finally:
        ctr.close()


def main(argv=None) -> int:
    from hwtune.native import bench
    from hwtune.native.threads import Pool

    spec_path, out_path = (argv or sys.argv[1:])[:2]
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    reps, metric, isa = int(spec["reps"]), spec["metric"], spec.get("isa")
    out: Dict[str, Any] = {"marks": bench.count_marks(), "figures": {}}
    for fig in spec["figures"]:
        threads = int(fig["params"].get("threads", 1))
        start = clock.monotonic()
        with Pool(executors=1, threads=threads, pin=False) as pool:
            if metric in ("cycles", "instructions") and spec.get("counter") == "perf":
                got = perf_count(metric, fig, pool, isa, reps)
                out["figures"][fig["name"]] = {"calls": reps, "counts": {metric: got}}
            else:
                # Callgrind: shares in thread order on this thread and
                # operands at fixed cache sets, so its one simulated cache
                # sees the same accesses every run.
                bench.counting_mode(True)
                run = work(fig, pool, isa, reps)
                bench.count_begin()
                run()
                bench.count_end(fig["name"])
                out["figures"][fig["name"]] = {"calls": reps}
        out["figures"][fig["name"]]["wall_s"] = clock.monotonic() - start
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
