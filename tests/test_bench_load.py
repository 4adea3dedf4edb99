"""benchmarks/bench_load.py: a figure is called quiet only when the 1-minute
load stays below the timed threads + 0.5 before and after the section."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_load as L  # noqa: E402


def test_quiet_below_threads_plus_half():
    assert L.load_note(0.9, 1.4, 1).startswith("quiet (1-min load 0.90 -> 1.40)")
    assert L.load_note(1.2, 2.3, 2).startswith("quiet")


def test_under_load_when_either_end_is_high():
    assert L.load_note(1.6, 0.8, 1).startswith("under load (1-min load 1.60 -> 0.80)")
    assert L.load_note(0.5, 1.5, 1).startswith("under load")
    assert L.load_note(2.5, 1.0, 2).startswith("under load")


def test_load1_is_the_one_minute_average():
    assert L.load1() >= 0.0
