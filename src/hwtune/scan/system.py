"""Facts about the machine that scan needs beyond the fingerprint."""

from __future__ import annotations

from pathlib import Path

# Used only when neither the fingerprint nor sysfs reports cache sizes; sized
# so the out-of-cache triad still exceeds the L3 of large server parts.
_FALLBACK_L2 = 1 << 20
_FALLBACK_L3 = 64 << 20


def _parse_size(text) -> int:
    if isinstance(text, (int, float)):
        return int(text)
    s = str(text).strip().upper()
    for suffix, mult in (("KIB", 1 << 10), ("MIB", 1 << 20), ("K", 1 << 10), ("M", 1 << 20),
                         ("G", 1 << 30)):
        if s.endswith(suffix):
            return int(float(s[: -len(suffix)]) * mult)
    return int(s)


def _sysfs_caches() -> dict:
    out = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for d in sorted(base.glob("index*")):
        try:
            level = int((d / "level").read_text())
            kind = (d / "type").read_text().strip()
            size = _parse_size((d / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Unified", "Data"):
            out[level] = size
    return out


def _from_fingerprint(fp: dict, level: int):
    """Size of one cache instance from fingerprint()['caches']['L2'|'L3']."""
    c = (fp.get("caches") or {}).get(f"L{level}")
    if isinstance(c, dict) and c.get("size_bytes"):
        return int(c["size_bytes"])
    return None


def cache_bytes(fp: dict) -> tuple:
    """(L2 per core, L3 total) in bytes: fingerprint, else sysfs, else fallback."""
    l2 = _from_fingerprint(fp or {}, 2)
    l3 = _from_fingerprint(fp or {}, 3)
    if not l2 or not l3:
        sysfs = _sysfs_caches()
        l2 = l2 or sysfs.get(2) or _FALLBACK_L2
        l3 = l3 or sysfs.get(3) or _FALLBACK_L3
    return int(l2), int(l3)


def blas_info() -> str:
    """'openblas 0.3.31 (Haswell)': which BLAS the numpy reference uses."""
    import numpy  # noqa: F401  (loads the BLAS so threadpoolctl can see it)
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown"
    for info in threadpool_info():
        if info.get("user_api") == "blas":
            arch = info.get("architecture")
            return f"{info.get('internal_api')} {info.get('version')}" + (f" ({arch})" if arch else "")
    return "unknown"
