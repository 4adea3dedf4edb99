"""perf_event_open counters through ctypes (the native package holds every
ctypes binding): hardware cycles and instructions of the calling thread,
for `hwtune check`'s counted figures on machines that expose them."""

from __future__ import annotations

import ctypes
import os
import struct
from typing import Callable, List, Optional, Tuple

# -- perf_event_open ----------------------------------------------------------------
_PERF_TYPE_HARDWARE = 0
_PERF_TYPE_SOFTWARE = 1
HW_EVENTS = {"cycles": 0, "instructions": 1}
SW_TASK_CLOCK = 1  # PERF_COUNT_SW_TASK_CLOCK (tests: a counter every Linux has)
_SYS_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}
_IOC_ENABLE, _IOC_DISABLE, _IOC_RESET = 0x2400, 0x2401, 0x2403


# struct perf_event_attr up to config2 (PERF_ATTR_SIZE_VER1, 72 bytes), a
# kernel struct rather than one of hwtune's (abi.py mirrors those): type,
# size, config, sample_period, sample_type, read_format, the flags bitfield
# word (disabled bit 0, exclude_kernel bit 5, exclude_hv bit 6),
# wakeup_events, bp_type, config1, config2.
_ATTR = struct.Struct("=IIQQQQQIIQQ")


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _open_counter(type_: int, config: int, tid: int) -> int:
    """A disabled user-space counter on thread tid; -errno on failure."""
    nr = _SYS_PERF_EVENT_OPEN.get(os.uname().machine)
    if nr is None:
        return -38  # ENOSYS
    a = ctypes.create_string_buffer(_ATTR.pack(type_, _ATTR.size, config, 0, 0, 0,
                                                (1 << 0) | (1 << 5) | (1 << 6), 0, 0, 0, 0),
                                     _ATTR.size)
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(nr, ctypes.byref(a), tid, -1, -1, 0)
    return int(fd) if fd >= 0 else -ctypes.get_errno()


def hardware_counters() -> Tuple[bool, str]:
    """(available, why not): can this process count its own instructions
    and cycles through perf_event_open?"""
    for name, cfg in HW_EVENTS.items():
        fd = _open_counter(_PERF_TYPE_HARDWARE, cfg, 0)
        if fd < 0:
            return False, (f"perf_event_open({name}) failed: {os.strerror(-fd)} (a VM or "
                           "container that exposes no hardware counters; "
                           "/proc/sys/kernel/perf_event_paranoid may also forbid them)")
        os.close(fd)
    return True, ""


class ThreadCounters:
    """One event counted on every thread of this process (the pool's
    workers included: perf_event_open counts one thread per descriptor),
    summed. Threads started after opening are not counted: open after the
    pool exists."""

    def __init__(self, event: str = "instructions", *, type_: Optional[int] = None,
                 config: Optional[int] = None):
        t = _PERF_TYPE_HARDWARE if type_ is None else type_
        c = HW_EVENTS[event] if config is None else config
        self.fds: List[int] = []
        for tid in sorted(int(x) for x in os.listdir("/proc/self/task")):
            fd = _open_counter(t, c, tid)
            if fd < 0:
                self.close()
                raise OSError(-fd, f"perf_event_open({event}) on thread {tid}: "
                                   f"{os.strerror(-fd)}")
            self.fds.append(fd)

    def _ioctl(self, req: int) -> None:
        libc = _libc()
        for fd in self.fds:
            libc.ioctl(fd, req, 0)

    def count(self, fn: Callable[[], object]) -> int:
        """The event's count over one call of fn, all threads summed."""
        self._ioctl(_IOC_RESET)
        self._ioctl(_IOC_ENABLE)
        try:
            fn()
        finally:
            self._ioctl(_IOC_DISABLE)
        return sum(int.from_bytes(os.read(fd, 8), "little") for fd in self.fds)

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
