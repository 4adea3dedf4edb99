"""Builds and runs the pool's programs (test_pool*), the schedulers'
random-DAG stress test and the other multithreaded C programs with
ThreadSanitizer: that is where a missing happens-before would show
(helpers: c_suite_build.py). Every kernel variant this CPU runs is
instrumented: the drivers split an op's output between threads by the
variant's block sizes, so each variant's shares are checked."""

import pytest
from c_suite_build import TSAN_PROGRAMS, build, needs_cc, run_program

pytestmark = needs_cc


@pytest.fixture(scope="module")
def tsan_build(tmp_path_factory):
    return build(tmp_path_factory.mktemp("c-suite"), "thread", TSAN_PROGRAMS)


@pytest.mark.parametrize("name", TSAN_PROGRAMS)
def test_c_program_tsan(tsan_build, name):
    run_program(tsan_build, name)
