"""A tuning's one verdict in words, the same in every format (tune-graph's
summary, `hwtune report` in terminal, Markdown and HTML): the config
`hwtune run` uses with its own figure under the word "tuned" (or none: the
default), and a gain that held in one process but not across fresh
processes as "not confirmed", never as tuned. The data is
tuners.verdict.summary(); tunings stored before it existed get one derived
from their default, tuned and speedup (legacy())."""

from typing import List, Optional, Tuple

from hwtune.report.fmt import config, seconds

# Prefixes of the pipeline's `why` lines that the verdict lines restate
# (final.py's comparison, confirm.py's processes): shown once, in the verdict.
RESTATED = ("final: ", "confirm: ")


def legacy(default: dict, tuned: dict, speedup: Optional[float]) -> dict:
    """A verdict for a tune summary stored without one (older hwtune)."""
    uses = "default" if not tuned or tuned.get("label") == "default" else "tuned"
    return {"uses": uses, "default": default or {}, "tuned": None if uses == "default" else tuned,
            "speedup": None if speedup is None else {"median": speedup, "low": None,
                                                     "high": None, "level": None},
            "measured_over": "one process", "pairs": None, "not_confirmed": None,
            "best_other": None, "config_id": None}


def _interval(r: dict) -> str:
    if r.get("low") is None or r.get("level") is None:
        return ""
    return f"{r['level']:.0%} interval {r['low']:.2f}-{r['high']:.2f}x"


def _where(v: dict) -> str:
    if v.get("measured_over") == "processes" and v.get("pairs"):
        return f"over {v['pairs']} pairs of fresh processes, as `hwtune run` runs"
    return "in one process, interleaved"


def lines(v: dict) -> List[Tuple[str, str]]:
    """(label, text) lines: 'tuned', then 'not confirmed' or 'no gain'."""
    out: List[Tuple[str, str]] = []
    sp = v.get("speedup") or {}
    if v["uses"] == "default":
        out.append(("tuned", "none: `hwtune run` uses the default config (nothing is stored "
                             "as tuned)"))
    else:
        t = v["tuned"] or {}
        kept = "the stored tuned config, kept; " if v["uses"] == "stored" else ""
        gain = ""
        d = v.get("default") or {}
        if sp.get("median") is None and d.get("median_s") and t.get("median_s"):
            sp = {"median": d["median_s"] / t["median_s"], "low": None, "level": None}
        if sp.get("median") is not None:
            inner = "; ".join(x for x in (_interval(sp), _where(v)) if x)
            gain = f"; {sp['median']:.2f}x the default's speed ({inner})"
        out.append(("tuned", f"{seconds(t.get('median_s'))} +- {seconds(t.get('mad_s'))} "
                             f"({kept}{config(t.get('config'))}){gain}"))
    nc = v.get("not_confirmed")
    keep = "default kept" if v["uses"] == "default" else (
        "stored tuned config kept" if v["uses"] == "stored" else "")
    if nc:
        first = f"'{nc['label']}' {nc['in_process']['median']:.2f}x in one process"
        pr = nc.get("processes")
        if pr:
            second = (f"{pr['low']:.2f}-{pr['high']:.2f}x over {nc['pairs']} pairs of fresh "
                      f"processes")
        else:
            second = "no time left in --budget to measure it across fresh processes"
        out.append(("not confirmed", f"{first}, {second}; {keep}" if keep
                    else f"{first}, {second}"))
    bo = v.get("best_other")
    if bo:
        r = bo["in_process"]
        out.append(("no gain", f"the fastest other candidate, '{bo['label']}', ran "
                               f"{r['median']:.2f}x ({_interval(r)}) against {bo['against']} "
                               f"in one process" + (f"; {keep}" if keep else "")))
    return out


def stored_line(v: dict, run_id, db: str) -> str:
    """What the database now holds for this graph on this host."""
    if v["uses"] == "default":
        return (f"nothing named tuned (`hwtune run` uses the default); run {run_id} in {db}")
    if v["uses"] == "stored":
        return f"the stored tuned config {v.get('config_id')} stays; run {run_id} in {db}"
    return f"tuned config {v.get('config_id')}, run {run_id} in {db}"


def why_shown(why: List[str]) -> List[str]:
    """The pipeline's reasons, without those the verdict lines restate."""
    return [w for w in why if not w.startswith(RESTATED)
            or any(k in w for k in ("left out", "failed", "does not apply"))]
