"""Baselines: the raw samples of a suite on one host, in results.db (schema
v5, check_baselines) or in a JSON file a user's repository can commit.

A baseline names the host it was measured on; comparing it on another host
is refused (HostMismatch) unless the comparison is relative to the
reference kernel, where the host's overall speed divides out.
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
FILE_VERSION = 1


class HostMismatch(HwtuneError):
    """The baseline was measured on another host (exit 2)."""


@dataclass
class Baseline:
    host_key: str
    suite: str
    figures: Dict[str, FigureResult]
    host: Dict[str, Any] = field(default_factory=dict)  # cpu_model etc., for messages
    suite_doc: Dict[str, Any] = field(default_factory=dict)
    hwtune_version: str = __version__
    created_at: str = field(default_factory=utc_now)
    source: str = ""  # where it was read from, for messages

    def inner_hints(self) -> Dict[str, int]:
        return {n: int(f.params["inner"]) for n, f in self.figures.items()
                if isinstance(f.params.get("inner"), int)}

    def to_json(self) -> Dict[str, Any]:
        return {"format": FILE_FORMAT, "version": FILE_VERSION, "host_key": self.host_key,
                "host": self.host, "suite": self.suite, "suite_config": self.suite_doc,
                "hwtune_version": self.hwtune_version, "created_at": self.created_at,
                "figures": [f.to_json() for f in self.figures.values()]}

    @classmethod
    def from_json(cls, doc: Any, source: str) -> "Baseline":
        if not isinstance(doc, dict) or doc.get("format") != FILE_FORMAT:
            raise UsageError(f"{source} is not an hwtune check baseline (no \"format\": "
                             f"\"{FILE_FORMAT}\"): write one with --update-baseline")
        if not isinstance(doc.get("version"), int) or doc["version"] > FILE_VERSION:
            raise UsageError(f"{source}: baseline format version {doc.get('version')!r} is "
                             f"newer than this hwtune reads ({FILE_VERSION}): upgrade hwtune")
        try:
            figs = [FigureResult.from_json(f) for f in doc["figures"]]
            return cls(host_key=str(doc["host_key"]), suite=str(doc["suite"]),
                       figures={f.name: f for f in figs}, host=dict(doc.get("host") or {}),
                       suite_doc=dict(doc.get("suite_config") or {}),
                       hwtune_version=str(doc.get("hwtune_version", "?")),
                       created_at=str(doc.get("created_at", "?")), source=source)
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"{source}: malformed baseline ({type(exc).__name__}: {exc}): "
                             "record it again with --update-baseline") from None


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
        return (f"baseline {base.source} is from host {base.host_key[:12]} ({where}): "
                "comparing relative to the reference kernel only")
    raise HostMismatch(
        f"baseline {base.source} was measured on host {base.host_key[:12]} ({where}), this is "
        f"host {host_key[:12]}: refusing to compare absolute times across machines; record "
        "one here with --update-baseline, or compare with --relative")


# -- JSON file ---------------------------------------------------------------
def read_file(path) -> Baseline:
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
    return Baseline.from_json(doc, os.fspath(p))


def write_file(base: Baseline, path) -> None:
    """Atomic: a CI job killed mid-write never leaves half a baseline."""
    p = Path(path)
    if not p.parent.is_dir():
        raise UsageError(f"cannot write baseline {p}: directory {p.parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(base.to_json(), f, indent=1, allow_nan=False)
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
                    suite_doc=row["suite_doc"], hwtune_version=row["hwtune_version"],
                    created_at=row["created_at"], source=f"{db.path} (baseline {row['id']})")


def any_db_baseline(db, suite: str) -> Optional[str]:
    """A host key that has a baseline of this suite (for the message when
    this host has none but another one has)."""
    return db.check_baseline_host(suite)
