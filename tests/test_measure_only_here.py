"""Only the measurement layer (src/hwtune/measure/) reads a clock to time
something: scan, check, run, the tuners and the benchmarks time through it,
so there is one sampling loop, one warm-up rule and one place to change
them. Every other module is scanned for Python's clocks and the C bench
timer's binding; a use that measures nothing is allow-listed with its reason.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = [ROOT / "src" / "hwtune", ROOT / "cli", ROOT / "tuners", ROOT / "benchmarks"]
LAYER = ROOT / "src" / "hwtune" / "measure"

# Python's clocks (the time module) and the C loops' clock as bound in Python.
CLOCKS = {"perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns",
          "process_time", "process_time_ns", "thread_time", "thread_time_ns",
          "clock_gettime", "clock_gettime_ns"}
C_TIMER = "hwt_now"
C_WRAPPER_MODULE = "hwtune.native.bench"  # its now() wraps hwt_now

# (file relative to the repository, what it uses): why that is not a measurement.
ALLOWED = {
    ("src/hwtune/db/connect.py", "time.monotonic"):
        "the retry deadline of a locked database while switching it to WAL mode",
    ("src/hwtune/native/bench.py", C_TIMER):
        "the binding of the C loops' clock itself (bench.now(), for their tests)",
    ("benchmarks/fuzz_models.py", "time.monotonic"):
        "the fuzzer's elapsed wall time in its summary; it times no model",
    ("benchmarks/fuzz_onnx.py", "time.monotonic"):
        "the ONNX fuzzer's hang deadlines per mutant and its summary's wall time; it times "
        "no model",
}


def uses(source: str):
    """(line, what) of every clock use in Python source."""
    tree = ast.parse(source)
    time_names, bench_names, out = set(), set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "time":
                    time_names.add(a.asname or "time")
                elif a.name == "timeit":
                    out.append((node.lineno, "timeit"))
                elif a.name == C_WRAPPER_MODULE and a.asname:
                    bench_names.add(a.asname)
        elif isinstance(node, ast.ImportFrom):
            if node.module == "time":
                out += [(node.lineno, f"time.{a.name}") for a in node.names if a.name in CLOCKS]
            elif node.module == "timeit":
                out.append((node.lineno, "timeit"))
            elif node.module == C_WRAPPER_MODULE:
                out += [(node.lineno, "bench.now") for a in node.names if a.name == "now"]
            elif node.module == "hwtune.native":
                bench_names |= {a.asname or a.name for a in node.names if a.name == "bench"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in time_names and node.attr in CLOCKS:
                out.append((node.lineno, f"time.{node.attr}"))
            elif node.value.id in bench_names and node.attr == "now":
                out.append((node.lineno, "bench.now"))
        if isinstance(node, ast.Attribute) and node.attr == C_TIMER:
            out.append((node.lineno, C_TIMER))
        elif isinstance(node, ast.Name) and node.id == C_TIMER:
            out.append((node.lineno, C_TIMER))
    return sorted(set(out))


def scanned_files():
    for top in SCANNED:
        for path in sorted(top.rglob("*.py")):
            if LAYER not in path.parents:
                yield path


def test_nothing_outside_the_measurement_layer_reads_a_clock():
    found, allowed_seen = [], set()
    for path in scanned_files():
        rel = path.relative_to(ROOT).as_posix()
        for line, what in uses(path.read_text()):
            if (rel, what) in ALLOWED:
                allowed_seen.add((rel, what))
                continue
            found.append(f"{rel}:{line}: {what}")
    assert not found, ("time through hwtune.measure (clock, sides, interleave) instead of "
                       "reading a clock here, or allow-list a use that measures nothing:\n  "
                       + "\n  ".join(found))
    stale = set(ALLOWED) - allowed_seen
    assert not stale, f"allow-list entries no longer used: {sorted(stale)}"


def test_the_measurement_layer_is_scanned_around_not_missed():
    files = list(scanned_files())
    names = {p.relative_to(ROOT).as_posix() for p in files}
    assert "tuners/conv_local.py" in names and "src/hwtune/scan/runner.py" in names
    assert "benchmarks/bench_tuners.py" in names and "cli/main.py" in names
    assert not any(n.startswith("src/hwtune/measure/") for n in names)
    # The layer itself does read the clocks the scan looks for.
    assert uses((LAYER / "clock.py").read_text())


@pytest.mark.parametrize("source, what", [
    ("import time\nt0 = time.perf_counter()\n", "time.perf_counter"),
    ("import time as t\nt.monotonic()\n", "time.monotonic"),
    ("from time import perf_counter_ns\n", "time.perf_counter_ns"),
    ("import time\nx = time.time()\n", "time.time"),
    ("import time\ntime.thread_time_ns()\n", "time.thread_time_ns"),
    ("import timeit\n", "timeit"),
    ("from hwtune.native import bench\nbench.now()\n", "bench.now"),
    ("from hwtune.native.bench import now\n", "bench.now"),
    ("from hwtune.native._lib import lib\nlib.hwt_now()\n", C_TIMER),
])
def test_the_scan_catches_each_way_of_reading_a_clock(source, what):
    assert what in [w for _, w in uses(source)]


def test_sleeping_and_timestamps_are_not_measuring():
    src = ("import time\nimport datetime\ntime.sleep(0.1)\n"
           "datetime.datetime.now(datetime.timezone.utc)\n")
    assert uses(src) == []
