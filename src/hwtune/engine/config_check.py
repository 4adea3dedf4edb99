"""The engine's configuration rules, read from the C library: the checks
hwt_engine_create and the stand-alone hwtune-run apply
(engine/exec/config_check.c), so `hwtune run` refuses exactly what they
refuse, in the same words. Callers add which flag or stored row a value
came from."""

import ctypes
from typing import Optional, Tuple

from hwtune.native._lib import lib

OK, SCHEDULER, EXECUTORS, THREADS, PIN, CPUS = 0, 1, 2, 3, 4, 5
OP_THREADS, OP_COST, OP_PRIORITY, OP_CANDIDATES = 6, 7, 8, 9

_INT_MIN, _INT_MAX = -(2 ** 31), 2 ** 31 - 1


def _sig(name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


def _config_type():
    from hwtune.engine.native_engine import _Config
    return _Config


def scheduler_ids():
    """Scheduler name (as EngineConfig spells it) -> the engine's id."""
    from hwtune.engine.native_engine import SCHEDULERS
    return {name.replace("_", "-"): sid for name, sid in SCHEDULERS.items()}


_check = _check_op = None


def _bind():
    global _check, _check_op
    if _check is None:
        cfg_p = ctypes.POINTER(_config_type())
        _check = _sig("hwt_config_check", ctypes.c_int, cfg_p, ctypes.c_int, ctypes.c_char_p,
                      ctypes.c_size_t)
        _check_op = _sig("hwt_config_check_op", ctypes.c_int, cfg_p, ctypes.c_int,
                         ctypes.c_double, ctypes.c_double, ctypes.c_char_p, ctypes.c_size_t)
        _sig("hwt_config_limit", ctypes.c_int, ctypes.c_int)


def _c_int(v: int) -> int:
    """Values beyond a C int reach C as its limit (the message shows the
    real one: see _shown)."""
    return min(max(int(v), _INT_MIN), _INT_MAX)


def _shown(msg: str, given: int) -> str:
    clipped = _c_int(given)
    return msg.replace(f"got {clipped}", f"got {given}") if clipped != given else msg


def c_config(executors: int, threads: int, scheduler_id: int, pin: int):
    _bind()
    cfg = _config_type()()
    lib.hwt_engine_config_init(ctypes.byref(cfg))
    cfg.executors, cfg.threads_per_executor = _c_int(executors), _c_int(threads)
    cfg.scheduler, cfg.pin = _c_int(scheduler_id), _c_int(pin)
    return cfg


def check(executors: int, threads: int, scheduler_id: int, pin: int,
          cpus: Optional[int]) -> Tuple[int, str]:
    """(field, reason) of the first scalar refused, or (OK, ""); cpus: how
    many CPUs the run may use, None for no budget."""
    cfg = c_config(executors, threads, scheduler_id, pin)
    err = ctypes.create_string_buffer(512)
    field = _check(ctypes.byref(cfg), 0 if cpus is None else max(int(cpus), 1), err, len(err))
    msg = err.value.decode(errors="replace")
    for given in (executors, threads, pin):
        msg = _shown(msg, given)
    return field, msg


def check_op(cfg, field: int, value: float, value2: float = 0.0) -> Tuple[int, str]:
    """(field, reason) when a stored per-op value is refused, or (OK, "");
    cfg from c_config."""
    _bind()
    err = ctypes.create_string_buffer(512)
    got = _check_op(ctypes.byref(cfg), field, _real(value), _real(value2), err, len(err))
    return got, err.value.decode(errors="replace")


def _real(v) -> float:
    try:
        return float(v)
    except OverflowError:  # an integer beyond any double: out of every range
        return float("inf")


def limit(which: int) -> int:
    _bind()
    return lib.hwt_config_limit(which)
