"""Binding for hwtune/pool.h: a pool of executor teams of (pinned) threads
(named threads, not pool, so it is never taken for the pooling op)."""

import ctypes
import threading
from typing import List, Optional, Sequence

from hwtune.errors import UsageError
from hwtune.native._lib import STATUS, check, lib, sig, status_error
from hwtune.native.abi import mirror
from hwtune.native.handle import Handle


_Config = mirror("hwt_pool_config")


sig("hwt_pool_create", ctypes.c_void_p, ctypes.POINTER(_Config), ctypes.c_char_p,
    ctypes.c_size_t)
sig("hwt_pool_destroy", None, ctypes.c_void_p)
sig("hwt_pool_pinned", ctypes.c_int, ctypes.c_void_p)
sig("hwt_pool_thread_cpu", ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int)
sig("hwt_allowed_cpus", ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.c_int)

# Matches POOL_MAX_THREADS in engine/threads/pool.c.
MAX_THREADS = 4096


def allowed_cpus() -> List[int]:
    """CPUs this process may run on, in topology order (one per core first)."""
    n = check(lib.hwt_allowed_cpus(None, 0), "reading the allowed CPUs")
    buf = (ctypes.c_int * max(n, 1))()
    m = check(lib.hwt_allowed_cpus(buf, n), "reading the allowed CPUs")
    return list(buf[: min(n, m)])


def format_cpus(cpus: Sequence[int]) -> str:
    """Compact CPU list, e.g. "0-3,8"."""
    s = sorted(set(cpus))
    parts, i = [], 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        parts.append(f"{s[i]}-{s[j]}" if j > i else f"{s[i]}")
        i = j + 1
    return ",".join(parts)


def _count(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name}={value!r}: must be an integer >= 1")
    return value


class Pool(Handle):
    """`executors` teams of `threads` threads each, created once.

    With pin=True every thread is bound to its own CPU (topology order, or
    the explicit `cpus` list: team t gets cpus[t*threads:(t+1)*threads]); a
    pin the OS refuses leaves the pool running unpinned, with .pinned False.
    One pool serves one caller at a time (bench functions take its lock).
    """

    _destroy, _what = "hwt_pool_destroy", "thread pool"

    def __init__(self, executors: int = 1, threads: int = 1, pin: bool = True,
                 cpus: Optional[Sequence[int]] = None):
        self._lock = threading.Lock()
        executors = _count("executors", executors)
        threads = _count("threads", threads)
        total = executors * threads
        if total > MAX_THREADS:
            raise UsageError(
                f"executors={executors} x threads={threads} = {total} threads: at most "
                f"{MAX_THREADS}")
        allowed = allowed_cpus()
        if pin:
            if cpus is not None:
                cpus = [int(c) for c in cpus]
                bad = [c for c in cpus if c not in allowed]
                if bad or len(set(cpus)) != len(cpus) or len(cpus) < total:
                    raise UsageError(
                        f"cpus={format_cpus(cpus)} cannot hold executors={executors} x "
                        f"threads={threads}: need {total} distinct CPUs from the allowed "
                        f"{format_cpus(allowed)}")
            elif total > len(allowed):
                raise UsageError(
                    f"executors={executors} x threads={threads} = {total} pinned threads but "
                    f"only {len(allowed)} CPUs are allowed ({format_cpus(allowed)}): lower "
                    f"executors or threads, or disable pinning")
        cfg = _Config(executors, threads, 1 if pin else 0, None, 0)
        if pin and cpus is not None:
            arr = (ctypes.c_int * len(cpus))(*cpus)
            cfg.cpus = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int))
            cfg.n_cpus = len(cpus)
        err = ctypes.create_string_buffer(512)
        h = lib.hwt_pool_create(ctypes.byref(cfg), err, len(err))
        if not h:
            # The usage errors were caught above; what is left is the system.
            raise status_error(STATUS["system call failed"], err.value.decode(),
                               what="cannot create the thread pool")
        self._adopt(h)
        self.executors = executors
        self.threads = threads

    @property
    def pinned(self) -> bool:
        """True only if every thread of the pool is bound to its CPU."""
        return bool(lib.hwt_pool_pinned(self.handle))

    @property
    def cpu_map(self) -> Optional[List[List[int]]]:
        """Each team's CPUs (master first), or None when the pool is unpinned."""
        h = self.handle
        if not lib.hwt_pool_pinned(h):
            return None
        return [[lib.hwt_pool_thread_cpu(h, t, i) for i in range(self.threads)]
                for t in range(self.executors)]

    def close(self) -> None:
        with self._lock:  # destroy only while no measurement runs
            super().close()

    def __repr__(self) -> str:
        state = "closed" if self._h is None else ("pinned" if self.pinned else "unpinned")
        return f"Pool(executors={self.executors}, threads={self.threads}, {state})"
