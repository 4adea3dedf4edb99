"""Locate and load libhwtune.so, and turn C status codes into typed errors."""

import ctypes
import os
from pathlib import Path

from hwtune.errors import NativeError, UsageError

_STATUS = {
    -1: (UsageError, "invalid argument"),
    -2: (NativeError, "out of memory"),
    -3: (UsageError, "ISA variant not supported on this CPU"),
    -4: (NativeError, "system call failed"),
}


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


def check(status: int, what: str) -> int:
    """Raise the typed error for a negative C status; return it otherwise."""
    if status >= 0:
        return status
    cls, text = _STATUS.get(status, (NativeError, f"error {status}"))
    raise cls(f"{what}: {text}")
