"""`hwtune plan --validate --from-cores K`: the inputs of a plan taken on K
of this host's CPUs, so that the validation measures how the prediction
does on cores those inputs never saw.

The process's CPU affinity is restricted to K CPUs (as `taskset` would:
every thread the process starts meanwhile inherits the mask, and the
engine's pools place their threads among the CPUs the mask allows), and,
under it, the quick scan, the plan calibration, the model's 1-thread
profiles and its order factors are measured into a scratch database,
never the user's: a K-core scan must not replace the host's real one. The
mask is then restored, and the Predictor, made from those inputs alone as
`hwtune plan` makes one (this host's CPU with more cores:
inputs.scaled_host), predicts configurations of all the host's CPUs."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from typing import Callable, Iterator, List, Optional, Tuple

from hwtune.errors import UsageError

Progress = Callable[[str], None]


def allowed() -> List[int]:
    """CPUs this process may run on (sorted)."""
    return sorted(os.sched_getaffinity(0))


def pick(k: int) -> List[int]:
    """The K CPUs the inputs are taken on: one per core first (the engine's
    topology order, hwtune.native.threads.allowed_cpus), so that K = 2 on a
    host with SMT does not measure two hyperthreads of one core."""
    from hwtune.native.threads import allowed_cpus
    cpus = list(allowed_cpus()) or allowed()
    if not 1 <= k <= len(cpus):
        raise UsageError(f"invalid --from-cores {k}: this process may use {len(cpus)} CPUs "
                         f"(1..{len(cpus)})")
    return sorted(cpus[:k])


@contextmanager
def restricted(cpus: List[int]) -> Iterator[List[int]]:
    """The calling thread (and every thread it starts meanwhile) runs on
    `cpus` only; the mask before is restored on exit. Linux only."""
    if not hasattr(os, "sched_setaffinity"):
        raise UsageError("--from-cores needs a CPU affinity mask (Linux)")
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(cpus))
    try:
        yield sorted(os.sched_getaffinity(0))
    finally:
        os.sched_setaffinity(0, before)


@contextmanager
def scratch_scan(k: int, *, progress: Optional[Progress] = None, keep: Optional[str] = None,
                 host_cores: Optional[int] = None) -> Iterator[Tuple[object, str, dict, List[int]]]:
    """(scratch database, its host key, the K-CPU fingerprint, the mask)
    with a quick scan taken on K CPUs in it (at `keep` when given, else a
    temporary file removed afterwards). The body runs under the mask; it is
    restored on exit."""
    from hwtune import machine as machine_info
    from hwtune.db import ResultsDB
    from hwtune.scan.runner import run_scan
    from hwtune.scan.steps import ScanOptions
    progress = progress or (lambda m: None)
    cpus = pick(k)
    with tempfile.TemporaryDirectory(prefix="hwtune-from-cores-") as tmp:
        path = keep or os.path.join(tmp, "inputs.db")
        with restricted(cpus) as mask:
            fp = machine_info.fingerprint()
            if int(fp.get("usable_cpus") or 0) != k:
                raise UsageError(f"--from-cores {k}: the restricted process sees "
                                 f"{fp.get('usable_cpus')} usable CPUs (a CPU quota?)")
            db = ResultsDB.open(path)
            with db:
                hk = db.upsert_host(fp)
                of = f" of {host_cores}" if host_cores else ""
                progress(f"inputs on {k}{of} CPUs (CPU {', '.join(map(str, mask))})"
                         f": quick scan into a scratch database")
                run_scan(db, ScanOptions(quick=True))
                yield db, hk, fp, mask


def inputs_on(k: int, graph, graph_hash: str, rows, *, host_cores: int,
              progress: Optional[Progress] = None, keep: Optional[str] = None
              ) -> Tuple[object, list, dict]:
    """(Predictor for this host's CPU with host_cores cores, its fits, what
    was measured) from a quick scan, a calibration, 1-thread profiles and
    order factors all taken on K CPUs into a scratch database (at `keep`
    when given, else a temporary file removed afterwards)."""
    from hwtune.planner import inputs
    progress = progress or (lambda m: None)
    with scratch_scan(k, progress=progress, keep=keep, host_cores=host_cores) as (db, hk, fp,
                                                                                   mask):
        run = db.start_run(hk, "plan", {"model": graph.name, "graph_hash": graph_hash,
                                        "from_cores": k})
        p, fits = inputs.build(db, hk, fp, graph, run_id=run, max_cores=host_cores,
                               data="scan", fresh=True, progress=progress)
        try:
            p.order = inputs.order_scales(db, hk, run, p, graph_hash, rows,
                                          fresh=True, progress=progress)
        except BaseException:
            p.close()
            raise
        db.finish_run(run, "complete")
    info = {"from_cores": k, "cpus": mask, "host_cores": host_cores,
            "inputs_db": keep, "host_key": hk, "isa": p.scan.isa if p.scan else None}
    return p, fits, info
