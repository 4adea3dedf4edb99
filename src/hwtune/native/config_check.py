"""The engine's configuration rules, read from the C library: the checks
hwt_engine_create and the stand-alone hwtune-run apply
(engine/exec/config_check.c), so `hwtune run` refuses exactly what they
refuse, in the same words. Callers add which flag or stored row a value
came from."""

import ctypes
from typing import Optional, Tuple

from hwtune.native._lib import enum_names, lib, sig

# hwt_config_field: which field a check refused (the library spells them).
FIELD = enum_names("hwt_config_field")
OK, SCHEDULER, EXECUTORS, THREADS, PIN, CPUS = (FIELD[k] for k in (
    "ok", "scheduler", "executors", "threads", "pin", "cpus"))
OP_THREADS, OP_COST, OP_PRIORITY, OP_CANDIDATES = (FIELD[k] for k in (
    "op_threads", "op_cost", "op_priority", "op_candidates"))

_INT_MIN, _INT_MAX = -(2 ** 31), 2 ** 31 - 1


def _config_type():
    from hwtune.native.engine import _Config  # noqa: the struct the engine binding mirrors
    return _Config


_check = _check_op = None


def _bind():
    global _check, _check_op
    if _check is None:
        cfg_p = ctypes.POINTER(_config_type())
        _check = sig("hwt_config_check", ctypes.c_int, cfg_p, ctypes.c_int, ctypes.c_char_p,
                     ctypes.c_size_t)
        _check_op = sig("hwt_config_check_op", ctypes.c_int, cfg_p, ctypes.c_int,
                        ctypes.c_double, ctypes.c_double, ctypes.c_char_p, ctypes.c_size_t)
        sig("hwt_config_limit", ctypes.c_int, ctypes.c_int)


def _c_int(v: int) -> int:
    """Values beyond a C int reach C as its limit (the message shows the
    real one: see _shown)."""
    return min(max(int(v), _INT_MIN), _INT_MAX)


def _shown(msg: str, given: int) -> str:
    clipped = _c_int(given)
    return msg.replace(f"got {clipped}", f"got {given}") if clipped != given else msg


class CConfig:
    """A C hwt_engine_config holding the scalar fields (it keeps the
    scheduler name's bytes alive while C reads them)."""

    def __init__(self, executors: int, threads: int, scheduler: str, pin: int):
        _bind()
        self._name = scheduler.encode("utf-8", "replace")
        self.c = _config_type()()
        lib.hwt_engine_config_init(ctypes.byref(self.c))
        self.c.executors, self.c.threads_per_executor = _c_int(executors), _c_int(threads)
        self.c.scheduler, self.c.pin = self._name, _c_int(pin)


def check(executors: int, threads: int, scheduler: str, pin: int,
          cpus: Optional[int]) -> Tuple[int, str]:
    """(field, reason) of the first scalar refused, or (OK, ""); cpus: how
    many CPUs the run may use, None for no budget."""
    cfg = CConfig(executors, threads, scheduler, pin)
    err = ctypes.create_string_buffer(512)
    field = _check(ctypes.byref(cfg.c), 0 if cpus is None else max(int(cpus), 1), err,
                   len(err))
    msg = err.value.decode(errors="replace")
    for given in (executors, threads, pin):
        msg = _shown(msg, given)
    return field, msg


def _real(v) -> float:
    try:
        return float(v)
    except OverflowError:  # an integer beyond any double: out of every range
        return float("inf")


def check_op(cfg: CConfig, field: int, value: float, value2: float = 0.0) -> Tuple[int, str]:
    """(field, reason) when a stored per-op value is refused, or (OK, "")."""
    _bind()
    err = ctypes.create_string_buffer(512)
    got = _check_op(ctypes.byref(cfg.c), field, _real(value), _real(value2), err, len(err))
    return got, err.value.decode(errors="replace")


def limit(which: int) -> int:
    _bind()
    return lib.hwt_config_limit(which)
