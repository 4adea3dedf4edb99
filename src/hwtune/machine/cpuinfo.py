"""Parse /proc/cpuinfo: CPU identity, ISA flags, and the volatile clock fields.

The kernel's flag list is masked by what it enabled (e.g. it drops avx512*
when XSAVE does not cover the ZMM state), so it is the cross-check for the
CPUID bits hwtune's own dispatch reads.
"""

from pathlib import Path
from typing import Dict, Optional

from hwtune.machine.sysfs import read_text

# hwtune feature name -> /proc/cpuinfo flag (x86 "flags", ARM "Features").
X86_FLAGS = {
    "sse42": "sse4_2",
    "avx": "avx",
    "avx2": "avx2",
    "fma": "fma",
    "avx512f": "avx512f",
    "avx512bw": "avx512bw",
    "avx512vl": "avx512vl",
    "avx512dq": "avx512dq",
    "avx512_bf16": "avx512_bf16",
    "avx512_vnni": "avx512_vnni",
    "amx_tile": "amx_tile",
    "amx_bf16": "amx_bf16",
    "amx_int8": "amx_int8",
}
ARM_FLAGS = {"neon": "asimd", "sve": "sve", "sve2": "sve2"}
ISA_KEYS = tuple(X86_FLAGS) + tuple(ARM_FLAGS)

_X86_VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd", "HygonGenuine": "hygon"}
# MIDR implementer codes (Arm ARM, "Main ID Register") for the server parts
# hwtune is likely to meet; anything else stays the raw hex code.
_ARM_IMPLEMENTERS = {
    0x41: "arm", 0x42: "broadcom", 0x43: "cavium", 0x46: "fujitsu", 0x48: "hisilicon",
    0x4E: "nvidia", 0x51: "qualcomm", 0x61: "apple", 0xC0: "ampere",
}


def _first_block(text: str) -> Dict[str, str]:
    """Fields of the first processor block, plus the file-wide blocks that
    have no 'processor' line (ARM puts 'Hardware' after the per-CPU blocks)."""
    fields: Dict[str, str] = {}
    seen_cpu = False
    for block in text.split("\n\n"):
        pairs = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                pairs.setdefault(key.strip(), value.strip())
        if "processor" in pairs:
            if seen_cpu:
                continue
            seen_cpu = True
        for key, value in pairs.items():
            fields.setdefault(key, value)
    return fields


def _to_int(value: Optional[str], base: int = 10) -> Optional[int]:
    if value is None:
        return None
    try:
        return int(value, base)
    except ValueError:
        return None


def _to_float(value: Optional[str]) -> Optional[float]:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def parse_cpuinfo(root: Path = Path("/")) -> dict:
    """Identity and flags of CPU 0 as the kernel reports them; None = unknown."""
    text = read_text(Path(root) / "proc" / "cpuinfo")
    if text is None:
        return {"available": False, "vendor": None, "vendor_id": None, "model_name": None,
                "family": None, "model": None, "stepping": None, "arm_id": None,
                "flags": None, "arch_hint": None, "volatile": {}}
    f = _first_block(text)
    out = {"available": True, "arm_id": None}
    if "vendor_id" in f or "flags" in f:
        vendor_id = f.get("vendor_id")
        out.update(
            arch_hint="x86",
            vendor_id=vendor_id,
            vendor=_X86_VENDORS.get(vendor_id, vendor_id.lower() if vendor_id else None),
            model_name=f.get("model name"),
            family=_to_int(f.get("cpu family")),
            model=_to_int(f.get("model")),
            stepping=_to_int(f.get("stepping")),
            flags=sorted(set(f["flags"].split())) if "flags" in f else None,
        )
    else:
        implementer = _to_int(f.get("CPU implementer"), 16)
        out.update(
            arch_hint="arm" if implementer is not None or "Features" in f else None,
            vendor_id=f.get("CPU implementer"),
            vendor=(_ARM_IMPLEMENTERS.get(implementer, f"0x{implementer:02x}")
                    if implementer is not None else None),
            model_name=f.get("model name"),
            family=None,
            model=None,
            stepping=None,
            flags=sorted(set(f["Features"].split())) if "Features" in f else None,
        )
        if implementer is not None:
            out["arm_id"] = {
                "implementer": implementer,
                "part": _to_int(f.get("CPU part"), 16),
                "variant": _to_int(f.get("CPU variant"), 16),
                "revision": _to_int(f.get("CPU revision")),
            }
    # Clock and microcode change with turbo, governors and updates: kept for
    # the record, never used in the host key.
    out["volatile"] = {
        "cpu_mhz": _to_float(f.get("cpu MHz")),
        "bogomips": _to_float(f.get("bogomips") or f.get("BogoMIPS")),
        "microcode": f.get("microcode"),
    }
    return out


def isa_from_flags(flags) -> Optional[Dict[str, bool]]:
    """hwtune ISA features from a cpuinfo flag list (None if no flags)."""
    if flags is None:
        return None
    have = set(flags)
    table = {**X86_FLAGS, **ARM_FLAGS}
    return {key: table[key] in have for key in ISA_KEYS}
