"""Baselines: the raw samples of a suite on one host, in results.db (schema
v5, check_baselines) or in a JSON file a user's repository can commit.

A baseline names the host it was measured on; comparing it on another host
is refused (HostMismatch) unless the comparison is relative to the
reference kernel, where the host's overall speed divides out.

A baseline file holds one entry per host (format version 2; version 1 files,
one host, are read as a file with one entry): CI runs on whichever machine
it gets, so a file committed from one host must not stop another host from
recording its own entry beside it.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional

from hwtune import __version__
from hwtune.check.measure import FigureResult
from hwtune.db.timestamps import utc_now
from hwtune.errors import HwtuneError, UsageError

FILE_FORMAT = "hwtune-check-baseline"
FILE_VERSION = 2


class HostMismatch(HwtuneError):
    """The baseline was measured on another host (exit 2)."""


@dataclass
class Baseline:
    host_key: str
    suite: str
    figures: Dict[str, FigureResult]
    host: Dict[str, Any] = field(default_factory=dict)  # cpu_model etc., for messages
    isa: str = ""  # the kernel ISA the figures ran with (HWTUNE_ISA or the best)
    suite_doc: Dict[str, Any] = field(default_factory=dict)
    hwtune_version: str = __version__
    created_at: str = field(default_factory=utc_now)
    source: str = ""  # where it was read from, for messages

    def inner_hints(self) -> Dict[str, int]:
        return {n: int(f.params["inner"]) for n, f in self.figures.items()
                if isinstance(f.params.get("inner"), int)}

    def to_json(self) -> Dict[str, Any]:
        """One host's entry of a baseline file."""
        return {"host_key": self.host_key, "host": self.host, "isa": self.isa,
                "suite": self.suite, "suite_config": self.suite_doc,
                "hwtune_version": self.hwtune_version, "created_at": self.created_at,
                "figures": [f.to_json() for f in self.figures.values()]}

    @classmethod
    def from_json(cls, doc: Any, source: str) -> "Baseline":
        try:
            figs = [FigureResult.from_json(f) for f in doc["figures"]]
            host = dict(doc.get("host") or {})
            return cls(host_key=str(doc["host_key"]), suite=str(doc["suite"]),
                       figures={f.name: f for f in figs}, host=host,
                       isa=str(doc.get("isa") or host.get("isa_best") or ""),
                       suite_doc=dict(doc.get("suite_config") or {}),
                       hwtune_version=str(doc.get("hwtune_version", "?")),
                       created_at=str(doc.get("created_at", "?")), source=source)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UsageError(f"{source}: malformed baseline ({type(exc).__name__}: {exc}): "
                             "record it again with --update-baseline") from None


def entries_from_json(doc: Any, source: str) -> Dict[str, Baseline]:
    """host_key -> Baseline of a baseline file's document (any version)."""
    if not isinstance(doc, dict) or doc.get("format") != FILE_FORMAT:
        raise UsageError(f"{source} is not an hwtune check baseline (no \"format\": "
                         f"\"{FILE_FORMAT}\"): write one with --update-baseline")
    if not isinstance(doc.get("version"), int) or doc["version"] > FILE_VERSION:
        raise UsageError(f"{source}: baseline format version {doc.get('version')!r} is "
                         f"newer than this hwtune reads ({FILE_VERSION}): upgrade hwtune")
    if doc["version"] == 1:
        base = Baseline.from_json(doc, source)
        return {base.host_key: base}
    hosts = doc.get("hosts")
    if not isinstance(hosts, list):
        raise UsageError(f"{source}: malformed baseline (no \"hosts\" list): record it "
                         "again with --update-baseline")
    out: Dict[str, Baseline] = {}
    for entry in hosts:
        if not isinstance(entry, dict):
            raise UsageError(f"{source}: malformed baseline (a host entry is not an "
                             "object): record it again with --update-baseline")
        base = Baseline.from_json(entry, source)
        out[base.host_key] = base
    return out


def other_host(entries: Dict[str, Baseline], host_key: str,
               isa: str) -> Optional[Baseline]:
    """The newest entry of another host whose figures ran with the same
    kernel ISA (the closest stand-in for this host), or None."""
    same = [b for k, b in entries.items() if k != host_key and b.isa == isa]
    return max(same, key=lambda b: b.created_at) if same else None


def host_summary(fp: Dict[str, Any]) -> Dict[str, Any]:
    return {k: fp.get(k) for k in ("cpu_model", "isa_best", "physical_cores", "logical_cpus",
                                   "sockets")}


def check_host(base: Baseline, host_key: str, relative: bool) -> Optional[str]:
    """None when the hosts match; a notice when they differ in relative
    mode; HostMismatch otherwise."""
    if base.host_key == host_key:
        return None
    where = base.host.get("cpu_model") or "another machine"
    if relative:
        return (f"baseline {base.source} is from host {base.host_key} ({where}): "
                "comparing relative to the reference kernel only")
    raise HostMismatch(
        f"baseline {base.source} was measured on host {base.host_key} ({where}), this is "
        f"host {host_key}: refusing to compare absolute times across machines; record "
        "one here with --update-baseline, or compare with --relative")


# -- JSON file ---------------------------------------------------------------
def read_file(path, host_key: Optional[str] = None) -> Baseline:
    """This host's entry of the file (host_key None: the only or newest
    entry); HostMismatch when the file has none for host_key."""
    entries = read_entries(path)
    if host_key is None or host_key in entries:
        return entries[host_key] if host_key else max(entries.values(),
                                                      key=lambda b: b.created_at)
    newest = max(entries.values(), key=lambda b: b.created_at)
    check_host(newest, host_key, relative=False)
    return newest  # not reached: check_host raised


def read_entries(path) -> Dict[str, Baseline]:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"baseline file {p} does not exist: record one with "
                         f"hwtune check --update-baseline --baseline {p}")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read baseline {p}: {exc}") from None
    except ValueError as exc:
        raise UsageError(f"baseline {p} is not valid JSON ({exc}): record it again with "
                         "--update-baseline") from None
    entries = entries_from_json(doc, os.fspath(p))
    if not entries:
        raise UsageError(f"baseline {p} has no host entries: record one with "
                         "--update-baseline")
    return entries


def write_file(base: Baseline, path) -> None:
    """Write this host's entry, keeping every other host's entry of the file
    (a file this hwtune cannot read is replaced: --update-baseline asked
    for it). Atomic: a CI job killed mid-write never leaves half a
    baseline."""
    p = Path(path)
    entries: Dict[str, Baseline] = {}
    if p.is_file():
        try:
            entries = read_entries(p)
        except UsageError:
            entries = {}
    entries[base.host_key] = base
    doc = {"format": FILE_FORMAT, "version": FILE_VERSION, "suite": base.suite,
           "hosts": [b.to_json() for b in sorted(entries.values(),
                                                 key=lambda b: b.host_key)]}
    if not p.parent.is_dir():
        raise UsageError(f"cannot write baseline {p}: directory {p.parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, allow_nan=False)
            f.write("\n")
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# -- results.db (schema v5) ---------------------------------------------------
def save_db(db, base: Baseline, run_id: Optional[int] = None) -> int:
    return db.add_check_baseline(
        base.host_key, base.suite, run_id=run_id, suite_doc=base.suite_doc,
        hwtune_version=base.hwtune_version, created_at=base.created_at,
        figures=[{"figure": f.name, "kind": f.kind, "unit": f.unit,
                  "higher_is_better": f.higher_is_better, "params": f.params,
                  "samples": f.samples, "ref": f.ref} for f in base.figures.values()])


def load_db(db, host_key: str, suite: str) -> Optional[Baseline]:
    """The latest baseline of suite on host_key, or None."""
    row = db.check_baseline(host_key, suite)
    if row is None:
        return None
    figs = {r["figure"]: FigureResult(r["figure"], r["kind"], r["params"], r["unit"],
                                      r["higher_is_better"], r["samples"], r["ref"])
            for r in row["figures"]}
    host = db.host(host_key) or {}
    return Baseline(host_key=host_key, suite=suite, figures=figs,
                    host=host_summary(host.get("fingerprint") or {}),
                    isa=str((host.get("fingerprint") or {}).get("isa_best") or ""),
                    suite_doc=row["suite_doc"], hwtune_version=row["hwtune_version"],
                    created_at=row["created_at"], source=f"{db.path} (baseline {row['id']})")


def any_db_baseline(db, suite: str) -> Optional[str]:
    """A host key that has a baseline of this suite (for the message when
    this host has none but another one has)."""
    return db.check_baseline_host(suite)
