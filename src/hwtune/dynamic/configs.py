"""Which executor config a dynamic model runs with, per (policy, batch):
the flags, over the config `hwtune tune-graph MODEL --inputs` stored for
that policy and batch on this host, over the default (1 executor x every
usable CPU, chunk 256, the engine's own per-op thread counts). The same
order as static models (hwtune.engine.config.resolve)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence

from hwtune.dynamic.executor import DynConfig
from hwtune.errors import UsageError

FLAGS = ("executors", "threads", "chunk", "pin")


@dataclass
class Resolved:
    config: DynConfig
    source: str                # default | tuned, with "+flags" when flags changed it
    notice: Optional[str] = None


def from_row(row: dict, policy: str, batch: int) -> DynConfig:
    """A stored dynamic_configs row as the config it describes."""
    return DynConfig(policy=policy, batch=batch, chunk=int(row["chunk"]),
                     executors=int(row["executors"]), threads=int(row["threads"]),
                     pin=bool(row["pin"]),
                     op_threads={op: {int(r): int(t) for r, t in by.items()}
                                 for op, by in (row.get("op_threads") or {}).items()} or None)


def check_flags(flags: Dict[str, object], cpus: Sequence[int]) -> None:
    e, t, c = flags.get("executors"), flags.get("threads"), flags.get("chunk")
    if e is not None and not 1 <= e <= 64:
        raise UsageError(f"invalid --executors {e}: 1..64 for dynamic models")
    if t is not None and t < 1:
        raise UsageError(f"invalid --threads {t}: must be >= 1")
    if c is not None and (c < 1 or c & (c - 1) or c > 4096):
        raise UsageError(f"invalid --chunk {c}: a power of two 1..4096")
    if (e or 1) * (t or 1) > len(cpus):
        raise UsageError(f"--executors {e or 1} x --threads {t or 1} needs "
                         f"{(e or 1) * (t or 1)} CPUs; this process may use {len(cpus)}")


def resolve(db, host_key: Optional[str], model_hash: str, policy: str, batch: int,
            flags: Dict[str, object], *, cpus: Sequence[int], use_stored: bool = True
            ) -> Resolved:
    """The config of one (policy, batch). flags: FLAGS given on the command
    line (None: not given); db None or use_stored False: nothing stored is
    used (`hwtune run --untuned`)."""
    given = {k: v for k, v in flags.items() if v is not None and k in FLAGS}
    base, source, notice = DynConfig(policy=policy, batch=batch), "default", None
    rows: List[dict] = []
    if db is not None and use_stored:
        rows = db.dynamic_configs(host_key, model_hash, "tuned")
    row = next((r for r in rows if r["policy"] == policy and r["batch"] == batch), None)
    if row is not None and row["executors"] * row["threads"] > len(cpus):
        notice = (f"the tuned config of policy {policy} at batch {batch} needs "
                  f"{row['executors'] * row['threads']} CPUs, this process may use "
                  f"{len(cpus)}: running the default")
        row = None
    if row is not None:
        base, source = from_row(row, policy, batch), "tuned"
    elif rows and notice is None:
        tuned = sorted({(r["policy"], r["batch"]) for r in rows})
        notice = (f"no tuned config for policy {policy} at batch {batch} (tuned: "
                  f"{', '.join(f'{p} at {b}' for p, b in tuned)}): running the default; "
                  f"hwtune tune-graph MODEL --inputs FILE --batch {batch} tunes it")
    if given:
        cfg = replace(base, **given)
        if source == "tuned" and ("threads" in given or "executors" in given) and \
                (cfg.threads, cfg.executors) != (base.threads, base.executors):
            # Per-op counts were chosen inside the tuned team size.
            cfg = replace(cfg, op_threads=None)
        return Resolved(cfg, source + "+flags", notice)
    return Resolved(base, source, notice)
