"""Times as operators type them, read in one place for the CLI and the console: milliseconds
since the epoch, or ISO 8601, in UTC unless the text names its zone."""

from __future__ import annotations

from datetime import UTC, datetime

from rocketspark.errors import InvalidParameterError


def parse_time(text: str, option: str = "--timestamp") -> int:
    """Milliseconds since the epoch, or an ISO 8601 time: UTC unless it names its zone
    (``2026-11-26T11:33:49``, ``2026-11-26T12:33:49+01:00``, ``2026-11-26T11:33:49Z``)."""
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidParameterError(
            f"{option} {text!r} is neither milliseconds since the epoch nor an ISO 8601 time such as "
            "2026-11-23T08:00:00 (UTC) or 2026-11-23T09:00:00+01:00"
        ) from None
    return int((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp() * 1000)
