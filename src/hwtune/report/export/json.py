"""The JSON format: every kind of document, whole (what the other formats
show is a view of it, so --json is complete by construction)."""

import json
import math
from typing import Any

from hwtune.report.export.base import Exporter


def _finite(x):
    """JSON has no inf/NaN: an unmeasurable figure or ratio is null."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def document(data: Any) -> str:
    """data: a JSON-ready dict, or an object with to_json() (CheckReport)."""
    doc = data.to_json() if hasattr(data, "to_json") else data
    return json.dumps(_finite(doc), indent=2, allow_nan=False, default=str) + "\n"


EXPORTER = Exporter("json", {kind: document for kind in ("scan", "report", "check", "tune", "compare", "plan",
                                                   "dynamic", "dynamic-tune", "run")})
