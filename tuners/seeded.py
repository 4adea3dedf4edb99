"""Warm start from a fleet: what similar hosts found, measured here first.

Records imported from another host (`hwtune db import/merge`) keep that
host's key, so its tuned result is never used here as it is. But a host
with the same best ISA and the same cache sizes tends to want the same
blocking (the CONV knobs size tiles to the caches and the vector width), so
its best params are worth measuring first: `peer_seeds` finds them and
`SeededSearch` proposes them before the search's own points. They are trials
like any other (stored with search 'peer', checked against the reference,
timed on this host) and win only if they are fastest here.
"""

from __future__ import annotations

from typing import List, Optional

from hwtune.tuners.search import Outcome, Params, Search, Space, key_of

PEER_SEARCH = "peer"  # tuning_trials.search of a seeded trial
# Cache levels whose sizes must match: the ones the CONV blocking targets.
# L1i is left out: code size does not decide a tile.
CACHE_LEVELS = ("L1d", "L2", "L3")


def similarity(fingerprint: dict) -> Optional[tuple]:
    """What two hosts must share for one's tuning to seed the other's: the
    best ISA and the size of each data cache level. None when any of them
    is unknown (nothing can be claimed the same)."""
    isa = fingerprint.get("isa_best")
    caches = fingerprint.get("caches") or {}
    sizes = []
    for level in CACHE_LEVELS:
        c = caches.get(level)
        if not isinstance(c, dict) or not isinstance(c.get("size_bytes"), int):
            return None
        sizes.append(c["size_bytes"])
    if not isa:
        return None
    return (isa, *sizes)


def similar_hosts(db, host_key: str) -> List[str]:
    """Other hosts of db whose similarity() equals this host's."""
    me = db.host(host_key)
    want = similarity(me["fingerprint"]) if me is not None else None
    if want is None:
        return []
    return [h["host_key"] for h in db.hosts()
            if h["host_key"] != host_key and similarity(h["fingerprint"]) == want]


def peer_seeds(db, host_key: str, *, tuner: str, subject: str, isa: str, threads: int,
               space: Space) -> List[Params]:
    """The tuned best params of this subject on similar hosts (same ISA
    variant and thread count), fastest first, inside this search's space."""
    found = []
    for peer in similar_hosts(db, host_key):
        row = db.tuned(peer, tuner=tuner, subject=subject, isa=isa, threads=threads)
        if row is not None and space.contains(row["best_params"]):
            found.append((row["best_s"] if row["best_s"] is not None else float("inf"),
                          row["best_params"]))
    out, seen = [], set()
    for _, params in sorted(found, key=lambda x: x[0]):
        if key_of(params) not in seen:
            seen.add(key_of(params))
            out.append(dict(params))
    return out


class SeededSearch(Search):
    """Proposes `seeds` first, then whatever `inner` proposes; every outcome
    is recorded in both, so the inner search (TPE, grid, ...) learns from
    the seeds and never proposes them again. Seeds count against the inner
    search's trial budget."""

    def __init__(self, inner: Search, seeds: List[Params], seed_name: str = PEER_SEARCH):
        super().__init__(inner.space, seed=inner.seed, max_trials=inner.max_trials)
        self.inner = inner
        self._seeds = [dict(s) for s in seeds]
        self._seed_name = seed_name  # tuning_trials.search of a seed's trial
        self.name = inner.name

    def propose(self) -> Optional[Params]:
        while self._seeds and not self.done():
            p = self._seeds.pop(0)
            if not self.seen(p):
                self.name = self._seed_name
                return p
        self.name = self.inner.name
        return self.inner.propose()

    def record(self, params: Params, outcome: Outcome) -> None:
        super().record(params, outcome)
        self.inner.record(params, outcome)

    def take_skipped(self):
        return self.inner.take_skipped()

    def close(self) -> None:
        self.inner.close()

    def done(self) -> bool:
        return self.inner.done()
