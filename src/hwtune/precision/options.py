"""tune-graph's precision options, checked before anything is measured."""

from __future__ import annotations

import math
from typing import List, Optional, Sequence

from hwtune.errors import UsageError
from hwtune.graph.passes.op_precision import PRECISIONS


def parse_precisions(text: str) -> List[str]:
    """"fp32,int8" -> ["fp32", "int8"] (fp32 first: it is every op's
    fallback, given or not); UsageError names a bad value."""
    items = [s.strip().lower() for s in text.split(",")]
    if not any(items):
        raise UsageError(f"invalid --precision {text!r}: name precisions separated by commas, "
                         f"e.g. fp32,int8 (known: {', '.join(PRECISIONS)})")
    bad = [s for s in items if s not in PRECISIONS]
    if bad:
        raise UsageError(f"invalid --precision {bad[0]!r}: choose from "
                         f"{', '.join(PRECISIONS)} (comma list, e.g. fp32,int8)")
    return ["fp32"] + [p for p in dict.fromkeys(items) if p != "fp32"]


def check_precision(precisions: Sequence[str], max_error: Optional[float]) -> None:
    bad = [p for p in precisions if p not in PRECISIONS]
    if bad:
        raise UsageError(f"invalid --precision {bad[0]!r}: choose from {', '.join(PRECISIONS)}")
    low = [p for p in precisions if p != "fp32"]
    if low and max_error is None:
        raise UsageError(f"--precision {','.join(precisions)} needs --max-error E, the largest "
                         "end-to-end error (relative to the output's scale) to accept, e.g. "
                         "--max-error 1e-2")
    if max_error is not None:
        if not low:
            raise UsageError("--max-error bounds the error of low-precision ops: give "
                             "--precision fp32,int8 (or bf16) with it")
        if isinstance(max_error, bool) or not isinstance(max_error, (int, float)) or \
                not math.isfinite(max_error) or max_error <= 0:
            raise UsageError(f"invalid --max-error {max_error!r}: must be a number > 0, e.g. "
                             "1e-2")
