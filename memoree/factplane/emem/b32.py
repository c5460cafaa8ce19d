"""Base32 as emem writes it: RFC 4648 alphabet, lowercase, no padding.

Decoding is strict: only ``[a-z2-7]``, a length that some byte count
produces, and zero pad bits, so every byte string has exactly one text form
and a cid cannot be spelled two ways.
"""

from __future__ import annotations

import base64
import re

from memoree.factplane.emem.errors import InvalidArgument

_B32_TEXT = re.compile(r"[a-z2-7]*")
# Remainders of len % 8 that no whole number of bytes can produce.
_IMPOSSIBLE_TAIL_LENGTHS = frozenset({1, 3, 6})


def encoded_length(nbytes: int) -> int:
    """Number of base32 characters for ``nbytes`` bytes (no padding)."""
    return (nbytes * 8 + 4) // 5


def encode(data: bytes) -> str:
    """Encode bytes as lowercase, unpadded base32."""
    return base64.b32encode(bytes(data)).decode("ascii").rstrip("=").lower()


def decode(text: str) -> bytes:
    """Decode lowercase, unpadded base32, refusing any non-canonical spelling."""
    if not isinstance(text, str) or _B32_TEXT.fullmatch(text) is None:
        raise InvalidArgument("base32 text must be lowercase [a-z2-7] without padding")
    if len(text) % 8 in _IMPOSSIBLE_TAIL_LENGTHS:
        raise InvalidArgument(f"base32 text of length {len(text)} is not a whole number of bytes")
    padded = text.upper() + "=" * (-len(text) % 8)
    data = base64.b32decode(padded)
    # b32decode ignores the unused low bits of the last character; require them to be zero.
    if encode(data) != text:
        raise InvalidArgument("base32 text has non-zero pad bits")
    return data


def decode_exact(text: str, nbytes: int, *, what: str = "value") -> bytes:
    """Decode base32 text that must hold exactly ``nbytes`` bytes."""
    if not isinstance(text, str) or len(text) != encoded_length(nbytes):
        raise InvalidArgument(
            f"{what} must be {encoded_length(nbytes)} base32 characters ({nbytes} bytes)"
        )
    return decode(text)
