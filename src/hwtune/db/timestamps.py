"""ISO-8601 UTC timestamps as stored in results.db ('2026-11-21T20:28:03.123456Z')."""

from datetime import datetime, timezone

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime(_FORMAT)


def parse(text: str) -> datetime:
    return datetime.strptime(text, _FORMAT).replace(tzinfo=timezone.utc)
