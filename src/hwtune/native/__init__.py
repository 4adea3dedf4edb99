"""Every ctypes binding to the bundled C library (libhwtune), one module
per C header: isa, gemm, eltwise, conv, threads (hwtune/pool.h: the thread
pool, not the pooling op), bench (kernels and the thread pool), graph, plan,
ops, engine, sched, dynamic, simulate (the graph engine).

Shared by all of them: _lib (loading, signatures, the one mapping of C
status codes to typed errors), handle (the life cycle of a C object owned
from Python), abi (struct mirrors built from and checked against the
compiler's layout).
"""

from hwtune.native._lib import check, lib  # noqa: F401
