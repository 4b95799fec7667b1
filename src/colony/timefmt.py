"""Kubernetes timestamps: one parser and one formatter for the whole operator.

Pure (no I/O): usable from `api/`, `scheduling/`, `status/`, controllers and the CLI alike.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

RFC3339 = "%Y-%m-%dT%H:%M:%SZ"


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as written in status (`...Z`), or None."""
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def parse_time_lenient(value: Any) -> datetime | None:
    """Like `parse_time`, but None for unparsable text and UTC for a timestamp without offset."""
    try:
        parsed = parse_time(value)
    except ValueError:
        return None
    if parsed is None:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(moment: datetime) -> str:
    """RFC 3339 with seconds, UTC, as Kubernetes writes it."""
    return moment.strftime(RFC3339)


def now_rfc3339() -> str:
    """The current time as RFC 3339 (seconds precision, UTC), as Kubernetes writes timestamps."""
    return format_time(datetime.now(UTC))
