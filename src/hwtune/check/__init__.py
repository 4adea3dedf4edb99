"""`hwtune check`: a CI performance-regression gate that decides with
statistics on raw samples (stats), over a suite from ci.toml (suite),
measured interleaved with a reference kernel (measure), against a baseline
in results.db or a JSON file (baseline); gate runs it, output renders it."""

from hwtune.check.baseline import Baseline, HostMismatch
from hwtune.check.gate import MODES, CheckReport, run_check
from hwtune.check.stats import Thresholds, Verdict, compare
from hwtune.check.suite import Figure, Suite, load_suite, parse_suite

__all__ = ["Baseline", "HostMismatch", "MODES", "CheckReport", "run_check", "Thresholds",
           "Verdict", "compare", "Figure", "Suite", "load_suite", "parse_suite"]
