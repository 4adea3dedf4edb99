"""Builds and runs every C test program (tests/c/test_*.c) with
AddressSanitizer + UndefinedBehaviorSanitizer (helpers: c_suite_build.py;
the ThreadSanitizer build is tests/test_c_suite_tsan.py). Every kernel
variant this CPU runs is instrumented."""

import pytest
from c_suite_build import PROGRAMS, build, needs_cc, run_program

pytestmark = needs_cc


@pytest.fixture(scope="module")
def asan_build(tmp_path_factory):
    return build(tmp_path_factory.mktemp("c-suite"), "address,undefined", PROGRAMS)


@pytest.mark.parametrize("name", PROGRAMS)
def test_c_program_asan_ubsan(asan_build, name):
    run_program(asan_build, name)
