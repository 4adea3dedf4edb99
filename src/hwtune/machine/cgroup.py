"""CPU bandwidth quota of this process's cgroup (v2 cpu.max, v1 CFS quota).

A container limited to 1.5 CPUs still sees every host CPU in its affinity
mask; without the quota, a 2-thread benchmark there measures throttling, not
the kernel. The effective limit is the smallest quota on the path from the
process's cgroup up to the mount root, because every ancestor throttles too.
"""

import math
from pathlib import Path
from typing import List, Optional, Tuple

from hwtune.machine.sysfs import read_text

_V1_DEFAULT_MOUNTS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")


def _proc_cgroups(root: Path) -> Tuple[Optional[str], Optional[str]]:
    """(v2 path, v1 cpu-controller path) from /proc/self/cgroup."""
    text = read_text(root / "proc" / "self" / "cgroup")
    v2 = v1 = None
    for line in (text or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hier, controllers, path = parts
        if hier == "0" and controllers == "":
            v2 = path
        elif "cpu" in controllers.split(","):
            v1 = path
    return v2, v1


def _mounts(root: Path) -> List[Tuple[str, str, str, List[str]]]:
    """(mount root, mount point, fstype, super options) of cgroup mounts."""
    text = read_text(root / "proc" / "self" / "mountinfo")
    mounts = []
    for line in (text or "").splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        if tail[0] in ("cgroup", "cgroup2"):
            mounts.append((fields[3], fields[4], tail[0], tail[2].split(",")))
    return mounts


def _cgroup_dir(root: Path, version: int, cg_path: str) -> Optional[Tuple[Path, Path]]:
    """(directory of the process's cgroup, its mount point) under root."""
    candidates = []
    for mount_root, point, fstype, opts in _mounts(root):
        if version == 2 and fstype == "cgroup2":
            candidates.append((mount_root, point))
        elif version == 1 and fstype == "cgroup" and "cpu" in opts:
            candidates.append((mount_root, point))
    if not candidates:
        base = root / "sys" / "fs" / "cgroup"
        if version == 2:
            points = [base, base / "unified"]
        else:
            points = [base / m for m in _V1_DEFAULT_MOUNTS]
        candidates = [("/", "/" + str(p.relative_to(root))) for p in points if p.is_dir()]
    for mount_root, point in candidates:
        mount_dir = root / point.lstrip("/")
        rel = cg_path
        if mount_root != "/" and (cg_path + "/").startswith(mount_root.rstrip("/") + "/"):
            rel = cg_path[len(mount_root.rstrip("/")):]
        cg_dir = mount_dir / rel.lstrip("/")
        # Without a cgroup namespace a container sees the host's path for its
        # cgroup while its own cgroup is mounted at the root: use the mount.
        if not cg_dir.is_dir():
            cg_dir = mount_dir
        if cg_dir.is_dir():
            return cg_dir, mount_dir
    return None


def _v2_limit(d: Path) -> Optional[float]:
    text = read_text(d / "cpu.max")
    if not text:
        return None
    parts = text.split()
    if parts[0] == "max" or len(parts) != 2:
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _v1_limit(d: Path) -> Optional[float]:
    quota, period = read_text(d / "cpu.cfs_quota_us"), read_text(d / "cpu.cfs_period_us")
    try:
        q, p = int(quota), int(period)
    except (TypeError, ValueError):
        return None
    return q / p if q > 0 and p > 0 else None


def cpu_quota(root: Path = Path("/")) -> dict:
    """{'version': 1|2|None, 'path': cgroup path, 'quota_cpus': float|None}.

    quota_cpus None means unlimited or unknown; both leave the affinity mask
    as the only limit.
    """
    root = Path(root)
    v2, v1 = _proc_cgroups(root)
    # In hybrid v1/v2 hierarchies the cpu controller lives in v1 when a v1
    # line names it; cgroup2 then carries no cpu.max for us.
    if v1 is not None:
        version, cg_path, limit_of = 1, v1, _v1_limit
    elif v2 is not None:
        version, cg_path, limit_of = 2, v2, _v2_limit
    else:
        return {"version": None, "path": None, "quota_cpus": None}
    found = _cgroup_dir(root, version, cg_path)
    if found is None:
        return {"version": version, "path": cg_path, "quota_cpus": None}
    cg_dir, mount_dir = found
    limits = []
    d = cg_dir
    while True:
        limit = limit_of(d)
        if limit is not None:
            limits.append(limit)
        if d == mount_dir or d == d.parent:
            break
        d = d.parent
    return {"version": version, "path": cg_path, "quota_cpus": min(limits) if limits else None}


def usable_cpus(affinity: Optional[int], quota_cpus: Optional[float]) -> Optional[int]:
    """CPUs a benchmark can keep busy: the affinity mask, capped by the quota
    rounded up (1.5 CPUs of quota still lets 2 threads run, throttled)."""
    if affinity is None:
        return None if quota_cpus is None else math.ceil(quota_cpus)
    if quota_cpus is None:
        return affinity
    return min(affinity, math.ceil(quota_cpus))
