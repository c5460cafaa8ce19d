"""One fixed-width, lexicographically ordered UTC timestamp format for every stored time.

Stored times look like ``2026-11-29T23:30:53.123456Z`` (always six fractional digits), so SQL
string comparisons order them correctly. Input may be any RFC 3339 instant with an offset.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

__all__ = ["format_instant", "now_utc", "parse_rfc3339"]

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))$"
)


def now_utc() -> str:
    """The current instant in the stored format."""
    ns = time.time_ns()
    seconds, micros = divmod(ns // 1000, 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{micros:06d}Z"


def format_instant(dt: datetime) -> str:
    """Format an aware datetime in the stored format."""
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(text: str) -> str:
    """Normalize an RFC 3339 instant to the stored format; raise ValueError when malformed.

    Sub-microsecond digits are truncated (the stored format has microsecond resolution).
    """
    match = _RFC3339.match(text)
    if not match:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    year, month, day, hour, minute, second, frac, zulu, sign, off_h, off_m = match.groups()
    micros = int((frac or "0")[:6].ljust(6, "0"))
    try:
        dt = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micros,
            tzinfo=timezone.utc,
        )
    except ValueError as exc:
        raise ValueError(f"not a valid RFC 3339 timestamp: {text!r}") from exc
    if not zulu:
        offset = timedelta(hours=int(off_h), minutes=int(off_m))
        dt = dt - offset if sign == "+" else dt + offset
    return format_instant(dt)
