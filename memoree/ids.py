"""Identifier minting: ``<prefix>_<ULID>`` (26 Crockford base32 characters, time-ordered).

Ids are opaque everywhere; they are never ranking tie-breakers. Deciders receive ``new_id`` from
the handler rather than calling this themselves.
"""

from __future__ import annotations

from ulid import ULID

__all__ = ["new_id"]


def new_id(prefix: str) -> str:
    return f"{prefix}_{ULID()}"
