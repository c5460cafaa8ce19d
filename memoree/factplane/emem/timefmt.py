"""Timestamp spellings the fact plane signs: ``YYYY-MM-DDTHH:MM:SSZ``.

Owns formatting of ``signed_at``/``served_at``, checking that shape, and the
normalisation emem applies to an ``as_of.transaction_time`` before hashing it
(UTC spellings collapse to ``...Z``; anything else passes through unchanged).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from memoree.factplane.emem.errors import EmemError

UTC_SECOND_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_UTC_SECOND = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
_UTC_SPELLING = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[T ](?P<time>\d{2}:\d{2}:\d{2})(?:\.\d+)?(?:Z|\+00:00|-00:00)"
)


def format_utc_second(when: datetime | float) -> str:
    """A datetime (naive means UTC) or unix seconds as ``YYYY-MM-DDTHH:MM:SSZ``."""
    if isinstance(when, datetime):
        moment = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    else:
        moment = datetime.fromtimestamp(when, tz=UTC)
    return moment.strftime(UTC_SECOND_FORMAT)


def is_utc_second(text: object) -> bool:
    """True for the exact ``YYYY-MM-DDTHH:MM:SSZ`` shape of a real instant."""
    if not isinstance(text, str) or _UTC_SECOND.fullmatch(text) is None:
        return False
    try:
        datetime.strptime(text, UTC_SECOND_FORMAT)
    except ValueError:
        return False
    return True


def check_utc_second(text: str, *, what: str = "signed_at") -> str:
    """Return ``text`` if it is ``YYYY-MM-DDTHH:MM:SSZ``, else raise."""
    if not is_utc_second(text):
        raise EmemError(
            f"{what} must be YYYY-MM-DDTHH:MM:SSZ, got {text!r}", code="invalid_signed_at_format"
        )
    return text


def normalise_transaction_time(text: str) -> str:
    """Collapse UTC spellings (Z, +00:00, -00:00, fractional seconds, space for T) to ``...Z``.

    Fractional seconds are dropped, not rounded. Non-UTC offsets and anything
    unparseable pass through unchanged, as upstream does.
    """
    match = _UTC_SPELLING.fullmatch(text)
    if match is None:
        return text
    return f"{match['date']}T{match['time']}Z"
