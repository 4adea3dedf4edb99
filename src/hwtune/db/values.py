"""Column values as results.db stores them: JSON text (sorted keys, no NaN)
and finite reals (NaN and infinities stored as NULL). Every table's writer
encodes through these, so a value one refuses is refused the same way in
each (one line, UsageError)."""

import json
import math
from typing import Any, Optional

from hwtune.errors import UsageError


def dumps(value: Any, what: str) -> str:
    try:
        return json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{what} is not storable as JSON: {exc}") from None


def real(value: Optional[float], what: str) -> Optional[float]:
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{what} must be a number, got {value!r}") from None
    return value if math.isfinite(value) else None
