"""tslot: the per-tempo time slot of a fact, and its ``t.`` text form.

``tslot = floor(max(unix_seconds, 0) / slot_seconds)``, anchored at the Unix
epoch (not calendar years, not the abandoned 2026 "emem epoch"); ``static``
bands always use slot 0. The text form is ``"t." + base32(LEB128(tslot))``.
"""

from __future__ import annotations

import math

from memoree.factplane.emem import b32
from memoree.factplane.emem.errors import InvalidArgument

U64_MAX = (1 << 64) - 1
TEXT_PREFIX = "t."

SLOT_SECONDS: dict[str, int] = {
    "static": 0,
    "slow": 31_536_000,  # 365 days, not calendar years
    "composite_16day": 1_382_400,
    "composite_8day": 691_200,
    "medium": 2_592_000,
    "fast": 86_400,
    "ultra_fast": 3_600,
}
TEMPOS = tuple(SLOT_SECONDS)


def slot_seconds(tempo: str) -> int:
    """Length of one slot of ``tempo`` in seconds (0 for ``static``)."""
    try:
        return SLOT_SECONDS[tempo]
    except (KeyError, TypeError):
        raise InvalidArgument(f"unknown tempo {tempo!r}; expected one of {TEMPOS}") from None


def tslot_for(unix_seconds: float, tempo: str) -> int:
    """The slot that ``unix_seconds`` falls in for ``tempo``; pre-1970 clamps to 0."""
    seconds = slot_seconds(tempo)
    if seconds == 0:
        return 0
    if isinstance(unix_seconds, float):
        if math.isnan(unix_seconds):
            raise InvalidArgument("unix_seconds must be a number")
        unix_seconds = math.floor(unix_seconds) if math.isfinite(unix_seconds) else 0
    return max(int(unix_seconds), 0) // seconds


def slot_start(tslot: int, tempo: str) -> int:
    """Unix seconds at which slot ``tslot`` of ``tempo`` begins."""
    check_tslot(tslot)
    return tslot * slot_seconds(tempo)


def check_tslot(tslot: int) -> int:
    """Return ``tslot`` if it is a u64, else raise."""
    if isinstance(tslot, bool) or not isinstance(tslot, int) or not 0 <= tslot <= U64_MAX:
        raise InvalidArgument(f"tslot must be an unsigned 64-bit integer, got {tslot!r}")
    return tslot


def leb128(value: int) -> bytes:
    """Unsigned LEB128, the shortest form."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def parse_leb128(data: bytes) -> int:
    """Decode unsigned LEB128 that must be exactly one shortest-form u64."""
    value = 0
    for position, byte in enumerate(data):
        value |= (byte & 0x7F) << (7 * position)
        if not byte & 0x80:
            if position != len(data) - 1:
                raise InvalidArgument("trailing bytes after LEB128 value")
            if position and byte == 0:
                raise InvalidArgument("LEB128 value is not in shortest form")
            if value > U64_MAX:
                raise InvalidArgument("LEB128 value exceeds u64")
            return value
    raise InvalidArgument("truncated LEB128 value")


def tslot_text(tslot: int) -> str:
    """``t.`` + lowercase base32 of the LEB128 bytes: 0 -> ``t.aa``, 1024 -> ``t.qaea``."""
    return TEXT_PREFIX + b32.encode(leb128(check_tslot(tslot)))


def parse_tslot_text(text: str) -> int:
    """Inverse of :func:`tslot_text`, refusing any non-canonical spelling."""
    if not isinstance(text, str) or not text.startswith(TEXT_PREFIX):
        raise InvalidArgument(f"tslot text must start with {TEXT_PREFIX!r}")
    return parse_leb128(b32.decode(text[len(TEXT_PREFIX) :]))
