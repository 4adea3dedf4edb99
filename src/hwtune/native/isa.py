"""Binding for hwtune/isa.h: CPU features and ISA variant selection."""

import ctypes
import os

from hwtune.errors import UsageError
from hwtune.native._lib import lib, sig
from hwtune.native.abi import mirror

sig("hwt_isa_name", ctypes.c_char_p, ctypes.c_int)
sig("hwt_isa_from_name", ctypes.c_int, ctypes.c_char_p)


def _isa_names() -> tuple:
    """hwt_isa's names in value order (the library's spelling)."""
    names = []
    while True:
        name = lib.hwt_isa_name(len(names)).decode()
        if lib.hwt_isa_from_name(name.encode()) != len(names):  # past HWT_ISA_COUNT
            return tuple(names)
        names.append(name)


ISA_NAMES = _isa_names()  # ("generic", "avx2", "avx512")

_Features = mirror("hwt_cpu_features")


# "sse42", "avx", ..., "os_amx": the feature bits, in C's order.
_FEATURE_FIELDS = [name for name, _ in _Features._fields_]


sig("hwt_cpu_features_get", None, ctypes.POINTER(_Features))
sig("hwt_isa_supported", ctypes.c_int, ctypes.c_int)
sig("hwt_isa_best", ctypes.c_int)
sig("hwt_isa_select", ctypes.c_int)
sig("hwt_version", ctypes.c_char_p)


def cpu_features() -> dict:
    """CPUID feature bits, already masked by what the OS saves (XGETBV)."""
    f = _Features()
    lib.hwt_cpu_features_get(ctypes.byref(f))
    return {name: bool(getattr(f, name)) for name in _FEATURE_FIELDS}


sig("hwt_amx_status", ctypes.c_int, ctypes.c_int)


def amx_status(request: bool = False) -> dict:
    """AMX, detected only (no AMX kernel yet): the CPU has it (CPUID
    amx_tile), the OS saves its state (XCR0), and Linux granted this process
    the tile data (arch_prctl; with request=True it is asked for first)."""
    st = int(lib.hwt_amx_status(int(bool(request))))
    return {"cpuid": bool(st & 1), "os": bool(st & 2), "permitted": bool(st & 4)}


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


sig("hwt_bgemm_variant_for", ctypes.c_int, ctypes.c_int)
sig("hwt_bgemm_variant_name", ctypes.c_char_p, ctypes.c_int)


def bf16_variant(isa=None) -> str:
    """The variant the bf16 kernels (matmul / conv2d precision "bf16") run
    for ISA row isa (None: HWTUNE_ISA, else the best): "avx512_bf16" where
    the CPU has AVX512_BF16, else "generic" (portable C; the AVX2 row has no
    bf16 product, so HWTUNE_ISA=avx2 or generic take it by design). A forced
    HWTUNE_ISA=avx512 on a CPU without AVX512_BF16 is refused rather than
    quietly run ~30x slower in portable C."""
    name = isa if isa is not None else selected_isa()
    idx = isa_index(name)
    forced = isa is not None or bool(os.environ.get("HWTUNE_ISA"))
    if name == "avx512" and not cpu_features()["avx512_bf16"]:
        if forced:
            raise UsageError("ISA variant 'avx512' has no bf16 kernels on this CPU (no "
                             "AVX512_BF16 in CPUID): use HWTUNE_ISA=generic for the portable "
                             "bf16 path, or --precision fp32")
        return "generic"
    return lib.hwt_bgemm_variant_name(lib.hwt_bgemm_variant_for(idx)).decode()
