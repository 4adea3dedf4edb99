"""Text of tune-graph's precision choice (tune-graph --precision): the
bound, the end-to-end error, and one row per candidate op (op, type,
precision, time fp32 -> chosen, its error alone)."""

from __future__ import annotations

from typing import Any, Dict, List


def _ms(s: float) -> str:
    return f"{s * 1e3:.3f}"


def lines(p: Dict[str, Any]) -> List[str]:
    ops = p.get("ops") or []
    low = [o for o in ops if o["precision"] != "fp32"]
    fp32, chosen = p.get("ops_fp32_s") or 0.0, p.get("ops_chosen_s") or 0.0
    head = (f"precision: {','.join(p['precisions'])} within --max-error {p['max_error']:g}: "
            f"{len(low)} of {len(ops)} candidate op(s) in low precision, end-to-end error "
            f"{p['error']:.3g} on {p['samples']} sample(s); their time {_ms(fp32)} -> "
            f"{_ms(chosen)} ms" + (f" ({fp32 / chosen:.2f}x, per-op profile)" if chosen else ""))
    out = [head]
    if not ops:
        return out
    rows = [("op", "type", "precision", "fp32 ms", "chosen ms", "error alone", "why")]
    for o in ops:
        errs = o.get("errors") or {}
        err = errs.get(o["precision"]) if o["precision"] != "fp32" else \
            (min(errs.values()) if errs else None)
        rows.append((o["op"], o["kind"], o["precision"], _ms(o["fp32_s"]), _ms(o["chosen_s"]),
                     "-" if err is None else f"{err:.2g}", o.get("why") or ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.append("  " + "  ".join(c.ljust(w) if i in (0, 1, 2, 6) else c.rjust(w)
                                    for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    return out
