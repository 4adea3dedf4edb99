"""Machine fingerprint: parsers on fake /proc + /sys trees, host key
stability, and sanity of the live machine's fingerprint."""

import json
import os
import re
from pathlib import Path

import pytest

from hwtune.machine import fingerprint, host_key
from hwtune.machine.cgroup import cpu_quota, usable_cpus
from hwtune.machine.cpuinfo import parse_cpuinfo
from hwtune.machine.sysfs import parse_cpulist, parse_size
from hwtune.machine.topology import topology

X86_FLAGS = "fpu sse sse2 sse4_1 sse4_2 avx avx2 fma avx512f avx512bw avx512vl avx512dq"


def _w(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _cpuinfo(root: Path, n_cpus: int, *, mhz="2100.000", bogomips="4200.00",
             model="Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz", flags=X86_FLAGS) -> None:
    blocks = []
    for cpu in range(n_cpus):
        blocks.append("\n".join([
            f"processor\t: {cpu}", "vendor_id\t: GenuineIntel", "cpu family\t: 6",
            "model\t\t: 85", f"model name\t: {model}", "stepping\t: 7",
            "microcode\t: 0x5003302", f"cpu MHz\t\t: {mhz}", f"flags\t\t: {flags}",
            f"bogomips\t: {bogomips}",
        ]))
    _w(root / "proc" / "cpuinfo", "\n\n".join(blocks))


def _cache(cpu_dir: Path, index: int, level: int, kind: str, size: str, shared: str) -> None:
    d = cpu_dir / "cache" / f"index{index}"
    _w(d / "level", str(level))
    _w(d / "type", kind)
    _w(d / "size", size)
    _w(d / "shared_cpu_list", shared)


def two_socket_smt_tree(root: Path, cores_per_socket: int = 4, mhz="2100.000",
                        bogomips="4200.00") -> Path:
    """2 sockets x N cores x 2 threads; cpu i and i+cores are SMT siblings
    (Linux's usual numbering); pairs of cores share an L2 tile; one L3 and
    one NUMA node per socket."""
    cores = 2 * cores_per_socket
    n = 2 * cores
    _cpuinfo(root, n, mhz=mhz, bogomips=bogomips)
    sysd = root / "sys" / "devices" / "system"
    _w(sysd / "cpu" / "online", f"0-{n - 1}")
    for cpu in range(n):
        core = cpu % cores
        sock = core // cores_per_socket
        tile = core // 2
        d = sysd / "cpu" / f"cpu{cpu}"
        _w(d / "topology" / "physical_package_id", str(sock))
        _w(d / "topology" / "core_id", str(core % cores_per_socket))
        _w(d / "topology" / "thread_siblings_list", f"{core},{core + cores}")
        _cache(d, 0, 1, "Data", "48K", f"{core},{core + cores}")
        _cache(d, 1, 1, "Instruction", "32K", f"{core},{core + cores}")
        _cache(d, 2, 2, "Unified", "2048K", f"{2 * tile}-{2 * tile + 1},"
                                              f"{2 * tile + cores}-{2 * tile + 1 + cores}")
        lo = sock * cores_per_socket
        hi = lo + cores_per_socket - 1
        _cache(d, 3, 3, "Unified", "30M", f"{lo}-{hi},{lo + cores}-{hi + cores}")
    for sock in range(2):
        lo = sock * cores_per_socket
        hi = lo + cores_per_socket - 1
        _w(sysd / "node" / f"node{sock}" / "cpulist", f"{lo}-{hi},{lo + cores}-{hi + cores}")
    _w(sysd / "node" / "online", "0-1")
    return root


def cgroup_v2_tree(root: Path, leaf: str, parent: str = "max 100000") -> Path:
    _w(root / "proc" / "self" / "cgroup", "0::/user.slice/job.scope")
    _w(root / "proc" / "self" / "mountinfo",
       "24 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate")
    cg = root / "sys" / "fs" / "cgroup"
    _w(cg / "cgroup.controllers", "cpu memory")
    _w(cg / "user.slice" / "cpu.max", parent)
    _w(cg / "user.slice" / "job.scope" / "cpu.max", leaf)
    return root


def test_parse_helpers():
    assert parse_cpulist("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpulist("") == []
    assert parse_cpulist("x-1") is None
    assert parse_size("32K") == 32 << 10 and parse_size("30M") == 30 << 20
    assert parse_size("36608K") == 36608 << 10 and parse_size("512") == 512
    assert parse_size("") is None and parse_size("big") is None


def test_two_socket_smt_topology(tmp_path):
    topo = topology(two_socket_smt_tree(tmp_path))
    assert topo["logical_cpus"] == 16 and topo["sockets"] == 2
    assert topo["physical_cores"] == 8 and topo["threads_per_core"] == 2
    assert topo["smt_siblings"][0] == [0, 8]
    assert topo["numa_nodes"] == 2
    assert topo["numa_node_cpus"]["1"] == [4, 5, 6, 7, 12, 13, 14, 15]
    c = topo["caches"]
    assert c["L1d"]["size_bytes"] == 48 << 10 and c["L1i"]["size_bytes"] == 32 << 10
    assert c["L2"]["size_bytes"] == 2 << 20 and c["L3"]["size_bytes"] == 30 << 20
    assert [g["cpus"] for g in c["L2"]["groups"]] == [
        [0, 1, 8, 9], [2, 3, 10, 11], [4, 5, 12, 13], [6, 7, 14, 15]]
    assert [g["cpus"] for g in c["L3"]["groups"]] == [
        [0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]]
    assert len(c["L1d"]["groups"]) == 8


def test_missing_cache_and_topology_info_is_none(tmp_path):
    sysd = tmp_path / "sys" / "devices" / "system" / "cpu"
    _w(sysd / "online", "0-3")
    for cpu in range(4):
        (sysd / f"cpu{cpu}").mkdir(parents=True)
    _w(sysd / "cpu0" / "cache" / "index0" / "level", "1")  # partial: no type or size
    topo = topology(tmp_path)
    assert topo["logical_cpus"] == 4
    assert topo["sockets"] is None and topo["physical_cores"] is None
    assert topo["threads_per_core"] is None and topo["numa_nodes"] is None
    assert topo["caches"] == {"L1d": None, "L1i": None, "L2": None, "L3": None}
    assert parse_cpuinfo(tmp_path)["model_name"] is None  # no /proc/cpuinfo at all


def test_nothing_readable_is_all_unknown(tmp_path):
    fp = fingerprint(tmp_path)
    assert fp["logical_cpus"] is None and fp["usable_cpus"] is None
    assert fp["vendor"] is None and fp["cpu_quota"] is None
    assert set(fp["isa"].values()) == {None}
    assert re.fullmatch(r"unknown-[0-9a-f]{12}", fp["host_key"])
    json.dumps(fp)


def test_heterogeneous_l2_size_is_not_guessed(tmp_path):
    root = two_socket_smt_tree(tmp_path)
    _w(root / "sys/devices/system/cpu/cpu15/cache/index2/size", "1024K")
    l2 = topology(root)["caches"]["L2"]
    assert l2["size_bytes"] is None
    assert {g["size_bytes"] for g in l2["groups"]} == {1 << 20, 2 << 20}


@pytest.mark.parametrize("leaf,parent,expected", [
    ("150000 100000", "max 100000", 1.5),
    ("max 100000", "max 100000", None),
    ("400000 100000", "100000 100000", 1.0),  # a tighter ancestor wins
])
def test_cgroup_v2_quota(tmp_path, leaf, parent, expected):
    q = cpu_quota(cgroup_v2_tree(tmp_path, leaf, parent))
    assert q == {"version": 2, "path": "/user.slice/job.scope", "quota_cpus": expected}


def test_cgroup_v1_quota_and_container_without_namespace(tmp_path):
    _w(tmp_path / "proc/self/cgroup", "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/")
    _w(tmp_path / "proc/self/mountinfo",
       "30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct")
    mount = tmp_path / "sys/fs/cgroup/cpu,cpuacct"
    # The container sees the host path /docker/abc, but its own cgroup is the mount root.
    _w(mount / "cpu.cfs_quota_us", "200000")
    _w(mount / "cpu.cfs_period_us", "100000")
    assert cpu_quota(tmp_path)["quota_cpus"] == 2.0
    _w(mount / "cpu.cfs_quota_us", "-1")
    assert cpu_quota(tmp_path) == {"version": 1, "path": "/docker/abc", "quota_cpus": None}


def test_cgroup_v2_without_mountinfo_uses_default_mount(tmp_path):
    cgroup_v2_tree(tmp_path, "250000 100000")
    (tmp_path / "proc/self/mountinfo").unlink()
    assert cpu_quota(tmp_path)["quota_cpus"] == 2.5


def test_usable_cpus():
    assert usable_cpus(16, 1.5) == 2
    assert usable_cpus(2, 8.0) == 2
    assert usable_cpus(4, None) == 4
    assert usable_cpus(None, None) is None


def test_fixture_fingerprint(tmp_path):
    root = cgroup_v2_tree(two_socket_smt_tree(tmp_path), "150000 100000")
    fp = fingerprint(root)
    assert fp["vendor"] == "intel" and fp["cpu_model"].startswith("Intel(R) Xeon(R) Gold")
    assert (fp["family"], fp["model"], fp["stepping"]) == (6, 85, 7)
    assert fp["arch"] == "x86_64"
    assert fp["isa_source"] == "cpuinfo" and fp["isa"]["avx512f"] and not fp["isa"]["amx_tile"]
    assert fp["isa"]["sse42"] and fp["isa_cpuinfo_mismatch"] is None
    assert fp["kernel_variants"] is None and fp["isa_best"] is None  # no live CPUID here
    assert fp["cpu_quota"] == 1.5 and fp["affinity"] is None and fp["usable_cpus"] == 2
    assert fp["volatile"]["cpu_mhz"] == 2100.0
    assert re.fullmatch(r"intel-xeon-gold-6230-8c-[0-9a-f]{12}", fp["host_key"])
    json.dumps(fp)


def test_cpuid_and_cpuinfo_cross_check(tmp_path):
    root = two_socket_smt_tree(tmp_path)
    cpuid = {"avx2": True, "avx512f": False, "avx512bw": False}
    fp = fingerprint(root, cpuid=cpuid, kernel_variants=["generic", "avx2"])
    assert fp["isa_source"] == "cpuid" and fp["isa"]["avx512f"] is False
    assert fp["isa"]["sse42"] is True  # not in the CPUID dict: cpuinfo fills it
    assert fp["isa_cpuinfo_mismatch"] == ["avx512f", "avx512bw"]
    assert fp["isa_best"] == "avx2"


def test_arm_cpuinfo(tmp_path):
    _w(tmp_path / "proc/cpuinfo", "\n".join([
        "processor\t: 0", "BogoMIPS\t: 243.75",
        "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics sve",
        "CPU implementer\t: 0x41", "CPU architecture: 8", "CPU variant\t: 0x1",
        "CPU part\t: 0xd40", "CPU revision\t: 1"]))
    fp = fingerprint(tmp_path)
    assert fp["arch"] == "aarch64" and fp["vendor"] == "arm" and fp["cpu_model"] is None
    assert fp["arm_id"] == {"implementer": 0x41, "part": 0xD40, "variant": 1, "revision": 1}
    assert fp["isa"]["neon"] and fp["isa"]["sve"] and not fp["isa"]["sve2"]
    assert not fp["isa"]["avx2"] and fp["family"] is None
    assert fp["volatile"]["bogomips"] == 243.75


def test_host_key_stable_fields_only(tmp_path):
    a = fingerprint(two_socket_smt_tree(tmp_path / "a"))
    b = fingerprint(two_socket_smt_tree(tmp_path / "b", mhz="3900.123", bogomips="7800.00"))
    assert a["volatile"] != b["volatile"]
    assert a["host_key"] == b["host_key"] == host_key(a) == host_key(b)
    assert host_key(dict(a, kernel_release="6.9", affinity=None)) == a["host_key"]
    # Same model, fewer cores: another host.
    c = fingerprint(two_socket_smt_tree(tmp_path / "c", cores_per_socket=2))
    assert c["host_key"] != a["host_key"] and "-4c-" in c["host_key"]
    # Any stable fact changes the key.
    assert host_key(dict(a, cpu_quota=1.5)) != a["host_key"]
    assert host_key(dict(a, affinity_size=4)) != a["host_key"]
    assert host_key(dict(a, isa=dict(a["isa"], avx512_vnni=True))) != a["host_key"]
    l3 = dict(a["caches"]["L3"], size_bytes=1)
    assert host_key(dict(a, caches=dict(a["caches"], L3=l3))) != a["host_key"]


def test_live_machine_fingerprint_is_sane():
    from hwtune.native.isa import cpu_features, supported_isas

    fp = fingerprint()
    json.dumps(fp)
    assert fp["host_key"] == fingerprint()["host_key"]
    affinity = sorted(os.sched_getaffinity(0))
    assert fp["affinity"] == affinity
    assert 1 <= fp["usable_cpus"] <= len(affinity)
    assert fp["logical_cpus"] == len(fp["online_cpus"]) >= len(affinity)
    assert 1 <= fp["physical_cores"] <= fp["logical_cpus"]
    assert fp["sockets"] >= 1 and fp["threads_per_core"] >= 1
    assert fp["physical_cores"] * fp["threads_per_core"] == fp["logical_cpus"]
    assert fp["kernel_variants"] == supported_isas() and fp["isa_best"] == supported_isas()[-1]
    assert fp["isa_source"] == "cpuid"
    feats = cpu_features()
    assert all(fp["isa"][k] == v for k, v in feats.items() if k in fp["isa"])
    assert isinstance(fp["isa_cpuinfo_mismatch"], list)
    if Path("/sys/devices/system/cpu/cpu0/cache/index0").exists():
        assert fp["caches"]["L1d"]["size_bytes"] >= 4096
        assert fp["caches"]["L2"]["size_bytes"] >= fp["caches"]["L1d"]["size_bytes"]
    assert re.fullmatch(r"[a-z0-9-]+-[0-9a-f]{12}", fp["host_key"])
