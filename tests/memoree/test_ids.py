"""Minted ids are prefixed ULIDs: 26 Crockford base32 characters, time-ordered."""

from __future__ import annotations

import re

from memoree.ids import new_id, ulid_from_bytes, ulid_text


class TestIds:
    def test_ids_have_the_prefix_and_ulid_shape(self) -> None:
        """new_id gives <prefix>_ followed by 26 Crockford base32 characters."""
        assert re.fullmatch(r"art_[0-9A-HJKMNP-TV-Z]{26}", new_id("art"))

    def test_known_bytes_encode_to_the_known_text(self) -> None:
        """All-zero and all-one 16-byte values give the ULID spec's boundary texts."""
        assert "0" * 26 == ulid_from_bytes(bytes(16))
        assert "7" + "Z" * 25 == ulid_from_bytes(b"\xff" * 16)

    def test_later_milliseconds_sort_later(self) -> None:
        """The time prefix orders ids by creation millisecond."""
        assert ulid_text(1_000) < ulid_text(2_000)


def test_ulid_text_is_the_crockford_base32_of_its_128_bits() -> None:
    """Random 16-byte values are written as the 26 Crockford characters of their bits (two zero
    bits first), checked against a character-by-character reference."""
    import os

    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    for raw in [os.urandom(16) for _ in range(2000)] + [bytes(16), b"\xff" * 16, b"\x80" + bytes(15)]:
        value = int.from_bytes(raw, "big")
        assert ulid_from_bytes(raw) == "".join(alphabet[value >> (5 * (25 - i)) & 31] for i in range(26))
