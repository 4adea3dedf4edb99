"""Typed ctypes binding to the bundled C library (libhwtune).

Each submodule binds one C header: isa, gemm, eltwise, pool, bench.
"""

from hwtune.native._lib import lib, check  # noqa: F401
