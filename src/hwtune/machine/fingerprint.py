"""The machine fingerprint stored with every result, and the host key that
groups results from the same hardware."""

import hashlib
import json
import os
import platform
import re
from pathlib import Path
from typing import Iterable, Optional

from hwtune.machine.cgroup import cpu_quota, usable_cpus
from hwtune.machine.cpuinfo import ISA_KEYS, isa_from_flags, parse_cpuinfo
from hwtune.machine.topology import topology

FINGERPRINT_VERSION = 1

# Fields that identify the hardware a result is valid for. Clock (cpu MHz),
# bogomips, microcode and kernel release drift on one machine and stay out.
_KEY_FIELDS = (
    "arch", "vendor", "cpu_model", "family", "model", "stepping", "arm_id", "isa",
    "sockets", "physical_cores", "threads_per_core", "logical_cpus", "numa_nodes",
    "affinity_size", "cpu_quota",
)


def _native_isa():
    """(CPUID features masked by OS state, hwtune kernel variants) or Nones
    when the C library cannot be loaded."""
    try:
        from hwtune.native import isa as native
    except Exception:  # NativeError or a broken build: record unknown, keep going
        return None, None
    return native.cpu_features(), native.supported_isas()


def _arch(machine: str) -> Optional[str]:
    m = machine.lower()
    if m in ("x86_64", "amd64", "i686", "i386"):
        return "x86_64" if "64" in m else "x86"
    if m in ("aarch64", "arm64"):
        return "aarch64"
    return m or None


def _merge_isa(cpuid: Optional[dict], flags: Optional[dict]):
    """CPUID (what dispatch uses) wins; cpuinfo fills keys CPUID lacks and
    any disagreement is recorded so a masked feature is visible."""
    if cpuid is None and flags is None:
        return {key: None for key in ISA_KEYS}, None, None
    merged, mismatch = {}, []
    for key in ISA_KEYS:
        a = cpuid.get(key) if cpuid else None
        b = flags.get(key) if flags else None
        merged[key] = a if a is not None else b
        if a is not None and b is not None and a != b:
            mismatch.append(key)
    source = "cpuid" if cpuid is not None else "cpuinfo"
    return merged, source, (mismatch if cpuid is not None and flags is not None else None)


def fingerprint(root="/", *, affinity: Optional[Iterable[int]] = None,
                cpuid: Optional[dict] = None, kernel_variants: Optional[list] = None,
                machine: Optional[str] = None) -> dict:
    """Describe this machine as a JSON-serialisable dict (None = unknown).

    With the default root the live system is read (CPUID via the C library,
    the affinity mask, uname). With another root (a fixture /proc + /sys tree)
    only files under it are read; the live-only sources stay unknown unless
    passed explicitly.
    """
    root = Path(root)
    live = root.resolve() == Path("/")
    if live:
        if cpuid is None and kernel_variants is None:
            cpuid, kernel_variants = _native_isa()
        if affinity is None and hasattr(os, "sched_getaffinity"):
            affinity = os.sched_getaffinity(0)
        if machine is None:
            machine = platform.machine()

    info = parse_cpuinfo(root)
    topo = topology(root)
    quota = cpu_quota(root)
    isa, isa_source, mismatch = _merge_isa(cpuid, isa_from_flags(info["flags"]))
    affinity_list = sorted(affinity) if affinity is not None else None
    if machine is not None:
        arch = _arch(machine)
    else:
        arch = {"x86": "x86_64", "arm": "aarch64"}.get(info["arch_hint"])
    allowed = len(affinity_list) if affinity_list is not None else topo["logical_cpus"]

    fp = {
        "fingerprint_version": FINGERPRINT_VERSION,
        "arch": arch,
        "vendor": info["vendor"],
        "vendor_id": info["vendor_id"],
        "cpu_model": info["model_name"],
        "family": info["family"],
        "model": info["model"],
        "stepping": info["stepping"],
        "arm_id": info["arm_id"],
        "isa": isa,
        "isa_source": isa_source,
        "isa_cpuinfo_mismatch": mismatch,
        "kernel_variants": kernel_variants,
        "isa_best": kernel_variants[-1] if kernel_variants else None,
        "sockets": topo["sockets"],
        "physical_cores": topo["physical_cores"],
        "threads_per_core": topo["threads_per_core"],
        "logical_cpus": topo["logical_cpus"],
        "online_cpus": topo["online_cpus"],
        "smt_siblings": topo["smt_siblings"],
        "numa_nodes": topo["numa_nodes"],
        "numa_node_cpus": topo["numa_node_cpus"],
        "caches": topo["caches"],
        "cgroup": quota,
        "cpu_quota": quota["quota_cpus"],
        "affinity": affinity_list,
        "affinity_size": allowed,
        "usable_cpus": usable_cpus(allowed, quota["quota_cpus"]),
        "kernel_release": platform.release() if live else None,
        "volatile": info["volatile"],
    }
    fp["host_key"] = host_key(fp)
    return fp


def _stable_subset(fp: dict) -> dict:
    stable = {key: fp.get(key) for key in _KEY_FIELDS}
    # Present/unknown feature names rather than the whole dict, so teaching
    # hwtune a new feature (False on older hosts) does not re-key every host.
    isa = fp.get("isa") or {}
    stable["isa"] = {
        "has": sorted(k for k, v in isa.items() if v),
        "unknown": sorted(k for k, v in isa.items() if v is None),
    }
    caches = fp.get("caches") or {}
    stable["caches"] = {
        name: (None if c is None else {
            "size_bytes": c.get("size_bytes"),
            "groups": [[g["cpus"], g["size_bytes"]] for g in c["groups"]]
            if c.get("groups") is not None else None,
        })
        for name, c in sorted(caches.items())
    }
    return stable


def _slug(text: Optional[str]) -> str:
    """'Intel(R) Xeon(R) Platinum 8280 CPU @ 2.70GHz' -> 'xeon-platinum-8280'."""
    if not text:
        return ""
    text = re.sub(r"\(r\)|\(tm\)|@.*$", " ", text.lower())
    drop = {"intel", "amd", "cpu", "processor", "core", "with", "radeon", "graphics"}
    words = [w for w in re.split(r"[^a-z0-9]+", text) if w and w not in drop]
    words = [w for w in words if not re.fullmatch(r"\d+-?core", w)]
    return "-".join(words[:3])


def host_key(fp: dict) -> str:
    """Readable slug + 12 hex of a hash over the stable fields only, e.g.
    'intel-xeon-2c-1a2b3c4d5e6f'. Same hardware and limits -> same key."""
    digest = hashlib.sha256(
        json.dumps(_stable_subset(fp), sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()[:12]
    parts = [fp.get("vendor") or "unknown", _slug(fp.get("cpu_model"))]
    cores = fp.get("physical_cores")
    parts.append(f"{cores}c" if cores is not None else "")
    return "-".join(p for p in parts if p) + "-" + digest
