"""Identifier minting: ``<prefix>_<ULID>`` (26 Crockford base32 characters, time-ordered).

A ULID is 48 bits of Unix milliseconds followed by 80 random bits, written big-endian in
Crockford's base32. It is encoded here rather than imported: the python-ulid package pulls in
``importlib.metadata`` at import (about 15 ms), a tenth of an in-process ``memoree call``.
Ids are opaque everywhere and never ranking tie-breakers; deciders receive ``new_id`` from the
handler rather than calling this themselves.
"""

from __future__ import annotations

import base64
import os
import time

__all__ = ["new_id", "ulid_from_bytes", "ulid_text"]

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# The standard base32 alphabet, letter for letter, onto Crockford's: the C encoder does the work.
_FROM_RFC4648 = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", _CROCKFORD.encode())


def ulid_from_bytes(raw: bytes) -> str:
    """The 26-character text of a 16-byte ULID."""
    if len(raw) != 16:
        raise ValueError("a ULID is 16 bytes")
    # 26 characters are 130 bits: two zero bits, then the 128. Shifted left by 30 in 20 bytes,
    # they are the first 26 of the 32 characters standard base32 writes for those bytes.
    padded = (int.from_bytes(raw, "big") << 30).to_bytes(20, "big")
    return base64.b32encode(padded)[:26].translate(_FROM_RFC4648).decode("ascii")


def ulid_text(millis: int | None = None) -> str:
    """A fresh ULID for ``millis`` (default: now)."""
    stamp = int(time.time() * 1000) if millis is None else millis
    return ulid_from_bytes(stamp.to_bytes(6, "big") + os.urandom(10))


def new_id(prefix: str) -> str:
    return f"{prefix}_{ulid_text()}"
