"""Binding for hwtune/isa.h: CPU features and ISA variant selection."""

import ctypes
import os

from hwtune.errors import UsageError
from hwtune.native._lib import lib
from hwtune.native.abi import CStruct

lib.hwt_isa_name.argtypes = [ctypes.c_int]
lib.hwt_isa_name.restype = ctypes.c_char_p
lib.hwt_isa_from_name.argtypes = [ctypes.c_char_p]
lib.hwt_isa_from_name.restype = ctypes.c_int


def _isa_names() -> tuple:
    """hwt_isa's names in value order (the library's spelling)."""
    names = []
    while True:
        name = lib.hwt_isa_name(len(names)).decode()
        if lib.hwt_isa_from_name(name.encode()) != len(names):  # past HWT_ISA_COUNT
            return tuple(names)
        names.append(name)


ISA_NAMES = _isa_names()  # ("generic", "avx2", "avx512")

_FEATURE_FIELDS = [
    "sse42", "avx", "avx2", "fma",
    "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "avx512_vnni",
    "amx_tile", "amx_bf16", "amx_int8",
    "neon",
    "os_avx", "os_avx512", "os_amx",
]


class _Features(CStruct):
    _c_name_ = "hwt_cpu_features"
    _fields_ = [(name, ctypes.c_int) for name in _FEATURE_FIELDS]


lib.hwt_cpu_features_get.argtypes = [ctypes.POINTER(_Features)]
lib.hwt_cpu_features_get.restype = None
lib.hwt_isa_supported.argtypes = [ctypes.c_int]
lib.hwt_isa_supported.restype = ctypes.c_int
lib.hwt_isa_best.restype = ctypes.c_int
lib.hwt_isa_select.restype = ctypes.c_int
lib.hwt_version.restype = ctypes.c_char_p


def cpu_features() -> dict:
    """CPUID feature bits, already masked by what the OS saves (XGETBV)."""
    f = _Features()
    lib.hwt_cpu_features_get(ctypes.byref(f))
    return {name: bool(getattr(f, name)) for name in _FEATURE_FIELDS}


def supported_isas() -> list:
    return [name for i, name in enumerate(ISA_NAMES) if lib.hwt_isa_supported(i)]


def isa_index(name: str) -> int:
    if name not in ISA_NAMES:
        raise UsageError(f"unknown ISA variant {name!r}: choose one of {', '.join(ISA_NAMES)}")
    idx = ISA_NAMES.index(name)
    if not lib.hwt_isa_supported(idx):
        raise UsageError(
            f"ISA variant {name!r} is not supported on this CPU (supported: "
            f"{', '.join(supported_isas())})"
        )
    return idx


def resolve_isa(isa=None) -> int:
    """Index of a variant name, or of the selected variant when isa is None."""
    if isa is None:
        isa = selected_isa()
    if not isinstance(isa, str):
        raise UsageError(f"isa must be a variant name ({', '.join(ISA_NAMES)}), got {isa!r}")
    return isa_index(isa)


def selected_isa() -> str:
    """The variant kernels use: HWTUNE_ISA if set (validated), else the best."""
    env = os.environ.get("HWTUNE_ISA")
    if env:
        isa_index(env)  # raises a clear error when unknown or unsupported
        return env
    return ISA_NAMES[lib.hwt_isa_best()]


def library_version() -> str:
    return lib.hwt_version().decode()
