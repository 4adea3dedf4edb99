"""Locate and load libhwtune.so, declare C signatures, and turn C status
codes into typed errors (the one place that does: every binding raises
through status_error/check)."""

import ctypes
import os
from pathlib import Path
from typing import Optional, Type

from hwtune.errors import HwtuneError, NativeError, UsageError


def _find() -> Path:
    override = os.environ.get("HWTUNE_LIB")
    if override:
        return Path(override)
    here = Path(__file__).resolve().parent.parent
    for name in ("libhwtune.so", "libhwtune.dylib"):
        cand = here / "_lib" / name
        if cand.exists():
            return cand
    raise NativeError(
        f"libhwtune not found under {here / '_lib'}: reinstall hwtune with 'pip install .'"
    )


def _load() -> ctypes.CDLL:
    path = _find()
    try:
        return ctypes.CDLL(str(path))
    except OSError as exc:
        raise NativeError(f"cannot load {path}: {exc}") from None


lib = _load()


def sig(name: str, restype, *argtypes):
    """Declare lib.name's C signature; returns the function."""
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


sig("hwt_abi_enum_name", ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int)
sig("hwt_abi_enum_at", ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
    ctypes.POINTER(ctypes.c_int))


def enum_names(c_type: str) -> dict:
    """name -> value of a C enum, in declaration order, as the library spells
    the names (hwtune/abi.h)."""
    out, value, i = {}, ctypes.c_int(), 0
    while True:
        name = lib.hwt_abi_enum_at(c_type.encode(), i, ctypes.byref(value))
        if name is None:
            break
        out[name.decode()] = value.value
        i += 1
    if not out:
        raise NativeError(f"libhwtune describes no enum {c_type}: the library and the "
                          f"Python package are from different builds (reinstall hwtune)")
    return out


STATUS = enum_names("hwt_status")  # "out of memory" -> -2, ...
# The machine failed, not the caller: out of memory, a refused system call.
_SYSTEM = {STATUS["out of memory"], STATUS["system call failed"]}


def status_error(status: int, detail: str = "", *, what: str = "",
                 usage: Type[UsageError] = UsageError) -> HwtuneError:
    """The typed error of a negative C status: NativeError when the machine
    failed (out of memory, a system call), `usage` (UsageError or a subclass
    naming the component) for everything the caller can fix. The message is
    "what: detail", detail defaulting to the status's own text."""
    text = detail or (lib.hwt_abi_enum_name(b"hwt_status", status) or b"").decode() \
        or f"error {status}"
    msg = f"{what}: {text}" if what else text
    known = lib.hwt_abi_enum_name(b"hwt_status", status) is not None
    return (NativeError if status in _SYSTEM or not known else usage)(msg)


def check(status: int, what: str = "", detail: str = "", *,
          usage: Type[UsageError] = UsageError) -> int:
    """Raise status_error for a negative C status; return it otherwise."""
    if status >= 0:
        return status
    raise status_error(status, detail, what=what, usage=usage)


def message_status(msg: str, otherwise: Optional[int] = None) -> int:
    """The status of a failure a C constructor reported by message only
    (it returned NULL): out of memory when the message says so, else
    `otherwise` (default: invalid argument)."""
    if msg.startswith("out of memory"):
        return STATUS["out of memory"]
    return STATUS["invalid argument"] if otherwise is None else otherwise
