"""Builds the C test programs (tests/c/test_*.c) under a sanitizer and runs
them: the helpers of tests/test_c_suite.py (AddressSanitizer +
UndefinedBehaviorSanitizer) and tests/test_c_suite_tsan.py
(ThreadSanitizer). Two files, so that pytest-xdist's --dist loadfile gives
the two builds, each minutes of compiling, to two workers. Needs a C
compiler plus the cmake and ninja PyPI packages of the test extra.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = sorted(p.stem for p in (ROOT / "tests" / "c").glob("test_*.c"))
# The pool's programs, the schedulers' random-DAG stress test, the op
# bench (ops forked on a pool team the caller keeps), and the dynamic
# executor (teams claiming batches, ops forked inside them).
TSAN_PROGRAMS = [p for p in PROGRAMS
                 if p.startswith("test_pool") or p in ("test_engine_sched", "test_engine_fold",
                                                       "test_op_bench", "test_dynamic")]
CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")

needs_cc = pytest.mark.skipif(not CC, reason="no C compiler (cc, gcc or clang) on PATH")

# Sanitizer reports must fail the program, not just print.
_ENV = {
    "ASAN_OPTIONS": "abort_on_error=0:detect_leaks=1",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
    "TSAN_OPTIONS": "halt_on_error=1:second_deadlock_stack=1",
}
# Per program; the stress tests take well under 10 s even under TSan.
_TIMEOUT = 120


def _tool(name: str) -> str:
    """cmake/ninja from the PyPI packages sit next to this interpreter."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} not found: pip install '.[test]' provides it")
    return found


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def build(root: Path, sanitize: str, targets) -> Path:
    """Configures and builds `targets` with -fsanitize=`sanitize`. Only the
    kernel variants this CPU runs are instrumented; the others compile
    uninstrumented, as they never execute here (kernels/kernels.cmake)."""
    bdir = root / sanitize.replace(",", "-")
    from hwtune.native.isa import supported_isas
    isas = supported_isas()
    # -O1, as the sanitizers recommend: -O3 makes instrumented SIMD kernels
    # compile many times slower for little extra coverage. -g1: the line
    # tables a sanitizer report needs; -g's variable information made the
    # instrumented avx2 CONV body compile in 62 s instead of 37 s (Zen 1,
    # load 3.5).
    _run([_tool("cmake"), "-S", ROOT, "-B", bdir, "-G", "Ninja",
          f"-DCMAKE_MAKE_PROGRAM={_tool('ninja')}", f"-DCMAKE_C_COMPILER={CC}",
          "-DCMAKE_BUILD_TYPE=Debug", "-DCMAKE_C_FLAGS_DEBUG=-O1 -g1",
          "-DHWTUNE_TESTS=ON", "-DHWTUNE_WERROR=ON", f"-DHWTUNE_SANITIZE={sanitize}",
          f"-DHWTUNE_SANITIZE_ISAS={';'.join(isas)}"])
    _run([_tool("ninja"), "-C", bdir, *targets])
    return bdir


def run_program(bdir: Path, name: str) -> None:
    env = {**os.environ, **_ENV}
    try:
        r = subprocess.run([bdir / name], capture_output=True, text=True, env=env,
                           timeout=_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{name} timed out after {_TIMEOUT} s\n{e.stdout}\n{e.stderr}")
    if r.returncode != 0:
        pytest.fail(f"{name} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
