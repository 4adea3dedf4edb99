"""CPU topology from /sys: sockets, cores, SMT, NUMA nodes, caches and who
shares them (L2 tiles, L3 domains).

Sharing matters more than size to hwtune: co-running executors on CPUs that
share an L2 tile or L3 slice compete for it, so the co-run search needs the
groups, not just the per-core capacity.
"""

from pathlib import Path
from typing import Dict, List, Optional

from hwtune.machine.sysfs import (
    numbered_dirs, parse_size, read_cpulist, read_int, read_text,
)

CACHE_NAMES = ("L1d", "L1i", "L2", "L3")


def _cpu_root(root: Path) -> Path:
    return Path(root) / "sys" / "devices" / "system" / "cpu"


def online_cpus(root: Path = Path("/")) -> Optional[List[int]]:
    cpu_dir = _cpu_root(root)
    cpus = read_cpulist(cpu_dir / "online")
    if cpus is None:
        cpus = numbered_dirs(cpu_dir, "cpu") or None
    return cpus


def _cpu_topology(cpu_dir: Path, cpus: List[int]) -> dict:
    packages, siblings = {}, {}
    for cpu in cpus:
        topo = cpu_dir / f"cpu{cpu}" / "topology"
        pkg = read_int(topo / "physical_package_id")
        # Some arm64 kernels report -1 when firmware gives no socket id.
        packages[cpu] = pkg if pkg is not None and pkg >= 0 else None
        sib = read_cpulist(topo / "thread_siblings_list")
        if sib is None:
            sib = read_cpulist(topo / "core_cpus_list")
        siblings[cpu] = tuple(sib) if sib else None

    sockets = None
    if all(p is not None for p in packages.values()):
        sockets = len(set(packages.values()))
    physical_cores = threads_per_core = smt_siblings = None
    # A core is its set of SMT siblings: core_id alone repeats across dies
    # and sockets, the sibling set never does.
    if all(s is not None for s in siblings.values()):
        physical_cores = len(set(siblings.values()))
        threads_per_core = max(len(s) for s in siblings.values())
        smt_siblings = [list(s) for s in sorted(set(siblings.values()))]
    return {
        "sockets": sockets,
        "physical_cores": physical_cores,
        "threads_per_core": threads_per_core,
        "logical_cpus": len(cpus),
        "smt_siblings": smt_siblings,
    }


def _numa(root: Path) -> dict:
    node_dir = Path(root) / "sys" / "devices" / "system" / "node"
    if not node_dir.is_dir():
        return {"numa_nodes": None, "numa_node_cpus": None}
    nodes = read_cpulist(node_dir / "online")
    if nodes is None:
        nodes = numbered_dirs(node_dir, "node")
    if not nodes:
        return {"numa_nodes": None, "numa_node_cpus": None}
    node_cpus = {str(n): read_cpulist(node_dir / f"node{n}" / "cpulist") for n in nodes}
    return {"numa_nodes": len(nodes), "numa_node_cpus": node_cpus}


def _cache_name(level: Optional[int], kind: Optional[str]) -> Optional[str]:
    if level is None or kind is None:
        return None
    suffix = {"Data": "d", "Instruction": "i", "Unified": ""}.get(kind)
    return None if suffix is None else f"L{level}{suffix}"


def _caches(cpu_dir: Path, cpus: List[int]) -> Dict[str, Optional[dict]]:
    """Per cache name: uniform size (None if unknown or heterogeneous, e.g.
    hybrid P/E cores) and its distinct sharing groups with their sizes."""
    found: Dict[str, dict] = {}
    for cpu in cpus:
        cache_dir = cpu_dir / f"cpu{cpu}" / "cache"
        for idx in numbered_dirs(cache_dir, "index"):
            d = cache_dir / f"index{idx}"
            name = _cache_name(read_int(d / "level"), read_text(d / "type"))
            if name is None:
                continue
            shared = read_cpulist(d / "shared_cpu_list")
            entry = found.setdefault(name, {"sizes": set(), "groups": {}, "complete": True})
            size = parse_size(read_text(d / "size"))
            entry["sizes"].add(size)
            if shared is None:
                entry["complete"] = False
            else:
                entry["groups"][tuple(shared)] = size
    out: Dict[str, Optional[dict]] = {}
    for name in sorted(set(CACHE_NAMES) | set(found)):
        entry = found.get(name)
        if entry is None:
            out[name] = None
            continue
        sizes = entry["sizes"]
        groups = None
        if entry["complete"]:
            groups = [{"cpus": list(cpus_), "size_bytes": size}
                      for cpus_, size in sorted(entry["groups"].items())]
        out[name] = {
            "size_bytes": next(iter(sizes)) if len(sizes) == 1 else None,
            "groups": groups,
        }
    return out


def topology(root: Path = Path("/")) -> dict:
    """Topology facts for the online CPUs; None for whatever /sys lacks."""
    cpu_dir = _cpu_root(root)
    cpus = online_cpus(root)
    if cpus is None:
        result = {"online_cpus": None, "sockets": None, "physical_cores": None,
                  "threads_per_core": None, "logical_cpus": None, "smt_siblings": None,
                  "caches": {name: None for name in CACHE_NAMES}}
    else:
        result = {"online_cpus": cpus, **_cpu_topology(cpu_dir, cpus),
                  "caches": _caches(cpu_dir, cpus)}
    result.update(_numa(root))
    return result
