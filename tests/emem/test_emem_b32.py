"""Tests for memoree.factplane.emem.b32: lowercase, unpadded, strictly validated base32."""

from __future__ import annotations

import pytest

from memoree.factplane.emem import b32
from memoree.factplane.emem.errors import EmemError


class TestEncode:
    def test_lowercase_without_padding(self) -> None:
        """Encoding is RFC 4648 base32, lowercased, with the '=' padding stripped."""
        assert b32.encode(b"f") == "my"
        assert b32.encode(b"foobar") == "mzxw6ytboi"

    def test_fact_cid_width(self) -> None:
        """32 bytes encode to 52 characters, 16 to 26 and 64 to 103."""
        assert len(b32.encode(bytes(32))) == b32.encoded_length(32) == 52
        assert b32.encoded_length(16) == 26
        assert b32.encoded_length(64) == 103

    def test_round_trip_every_length(self) -> None:
        """Every byte length up to 40 decodes back to the same bytes."""
        for n in range(41):
            data = bytes((i * 37 + 11) % 256 for i in range(n))
            assert b32.decode(b32.encode(data)) == data


class TestDecodeStrict:
    def test_rejects_uppercase(self) -> None:
        """Uppercase is a different spelling and is refused."""
        with pytest.raises(EmemError) as info:
            b32.decode("MY")
        assert info.value.code == "invalid_argument"

    def test_rejects_padding_and_foreign_characters(self) -> None:
        """Padding, digits 0/1/8/9 and punctuation are not in the alphabet."""
        for text in ("my======", "m0", "m1", "m8", "my!"):
            with pytest.raises(EmemError):
                b32.decode(text)

    def test_rejects_impossible_lengths(self) -> None:
        """Lengths 1, 3 and 6 mod 8 cannot come from whole bytes."""
        for text in ("a", "aaa", "aaaaaa"):
            with pytest.raises(EmemError):
                b32.decode(text)

    def test_rejects_nonzero_pad_bits(self) -> None:
        """A last character whose unused low bits are set is a second spelling and is refused."""
        assert b32.decode("my") == b"f"
        with pytest.raises(EmemError):
            b32.decode("mz")

    def test_decode_exact_checks_width(self) -> None:
        """decode_exact refuses text that does not hold exactly the requested byte count."""
        assert b32.decode_exact(b32.encode(bytes(32)), 32) == bytes(32)
        with pytest.raises(EmemError):
            b32.decode_exact(b32.encode(bytes(16)), 32)
