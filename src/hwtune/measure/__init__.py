"""The measurement layer: the only code in hwtune that times anything.

    clock.py       the clocks (samples, deadlines, elapsed stage time)
    settling.py    wait for other thread pools (OpenBLAS, onnxruntime) to park
    stats.py       median, MAD, relative spread
    noise.py       re-measure a noisy figure, keep the quietest attempt
    result.py      Measurement: status (ok/error/wrong_answer/timeout), raw samples
    policy.py      how many samples, round by round (fixed N; the seam for
                   adaptive policies)
    sides.py       what is timed: Python callables, C measurement loops
    engine.py      engine runs and one op's profiled time; the interleaved
                   comparison of prepared engines
    op.py          one op on the engine's pool and kernels (hwt_bench_op)
    output_check.py  outputs against a reference
    sampling.py    the one sampling loop: warm-up, check, limit, rotated rounds,
                   deadline
    processes.py   engine samples in fresh worker processes, pair by pair (the
                   level `hwtune run` repeats at)

Scan, check, run, every tuner stage and the benchmarks time through here
(tests/test_measure_only_here.py holds every other module to that).
"""

from hwtune.measure.clock import Stopwatch, deadline_after, passed  # noqa: F401
from hwtune.measure.sampling import interleave  # noqa: F401
from hwtune.measure.policy import FixedSampling, SamplingPolicy  # noqa: F401
from hwtune.measure.result import (ERROR, OK, TIMEOUT, WRONG_ANSWER,  # noqa: F401
                                   Measurement)
from hwtune.measure.settling import settle  # noqa: F401
