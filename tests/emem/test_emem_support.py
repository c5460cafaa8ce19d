"""Tests for the small support modules: errors, timefmt, preimage and signing."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memoree.factplane.emem import errors, preimage, signing, timefmt


class TestErrors:
    def test_codes(self) -> None:
        """Each error class carries its emem.error.v1 wire code."""
        assert errors.InvalidArgument("x").code == "invalid_argument"
        assert errors.InvalidCell("x").code == "invalid_cell"
        assert errors.NotGeoCell("x").code == "invalid_cell"
        assert errors.BadSignature("x").code == "bad_signature"
        assert errors.BadMerkleProof("x").code == "bad_merkle_proof"
        assert errors.CanonicalEncodingDivergence("x").code == "canonical_encoding_divergence"

    def test_is_value_error_with_override(self) -> None:
        """EmemError is a ValueError and an instance code can be overridden."""
        error = errors.EmemError("msg", code="invalid_signed_at_format")
        assert isinstance(error, ValueError)
        assert error.code == "invalid_signed_at_format" and error.message == "msg"


class TestTimeFormat:
    def test_format(self) -> None:
        """Datetimes (naive is UTC, aware is converted) and unix seconds format to ...Z."""
        assert timefmt.format_utc_second(0) == "1970-01-01T00:00:00Z"
        assert timefmt.format_utc_second(datetime(2026, 5, 28, 19, 54, 32, 999)) == (
            "2026-05-28T19:54:32Z"
        )
        ist = timezone(timedelta(hours=5, minutes=30))
        assert timefmt.format_utc_second(datetime(2026, 1, 1, 5, 30, tzinfo=ist)) == (
            "2026-01-01T00:00:00Z"
        )

    def test_shape_check(self) -> None:
        """Only real instants in exactly YYYY-MM-DDTHH:MM:SSZ pass."""
        assert timefmt.is_utc_second("2026-05-28T19:54:32Z")
        for text in (
            "2026-05-28T19:54:32",
            "2026-05-28T19:54:32.1Z",
            "2026-02-30T00:00:00Z",
            "2026-05-28 19:54:32Z",
            None,
        ):
            assert not timefmt.is_utc_second(text)

    def test_transaction_time_normalisation(self) -> None:
        """UTC spellings collapse to ...Z; other offsets and garbage pass through."""
        norm = timefmt.normalise_transaction_time
        assert norm("2026-05-29T00:00:00+00:00") == "2026-05-29T00:00:00Z"
        assert norm("2026-05-29 00:00:00.999-00:00") == "2026-05-29T00:00:00Z"
        assert norm("2026-05-29T05:30:00+05:30") == "2026-05-29T05:30:00+05:30"
        assert norm("yesterday") == "yesterday"


class TestPreimage:
    def test_building_blocks(self) -> None:
        """DOMAIN, SEG and LIST are tag/length-prefixed with little-endian u32 lengths."""
        assert preimage.domain("ab") == b"emem.preimage.v1\x00\x02\x00\x00\x00ab"
        assert preimage.segment(7, "xy") == b"\x07\x02\x00\x00\x00xy"
        assert preimage.list_segment(8, []) == b"\x08\x00\x00\x00\x00"
        assert preimage.list_segment(9, ["a", "bc"]) == (
            b"\x09\x02\x00\x00\x00\x01\x00\x00\x00a\x02\x00\x00\x00bc"
        )


class TestSigning:
    def test_sign_and_verify(self, test_seed: bytes) -> None:
        """A digest signed with the seed verifies under its public key and no other."""
        digest = bytes(range(32))
        signature = signing.sign_digest(test_seed, digest)
        assert signing.verify_digest(signing.public_key(test_seed), digest, signature)
        assert not signing.verify_digest(signing.public_key(bytes(32)), digest, signature)
        assert not signing.verify_digest(signing.public_key(test_seed), bytes(32), signature)

    def test_non_canonical_s_rejected(self, test_seed: bytes) -> None:
        """Adding the group order to S yields a non-canonical signature, which is refused."""
        digest = bytes(32)
        signature = signing.sign_digest(test_seed, digest)
        order = 2**252 + 27742317777372353535851937790883648493
        s = int.from_bytes(signature[32:], "little") + order
        malleated = signature[:32] + s.to_bytes(32, "little")
        assert not signing.verify_digest(signing.public_key(test_seed), digest, malleated)

    def test_only_digests_are_signed(self, test_seed: bytes) -> None:
        """Signing anything but a 32-byte digest, or with a bad seed, is refused."""
        with pytest.raises(errors.EmemError):
            signing.sign_digest(test_seed, b"stream")
        with pytest.raises(errors.EmemError):
            signing.public_key(b"short")

    def test_decode_key_and_signature(self, test_seed: bytes) -> None:
        """Base32 keys and signatures decode to their exact widths or raise bad_signature."""
        assert signing.decode_public_key(signing.public_key_b32(test_seed)) == (
            signing.public_key(test_seed)
        )
        with pytest.raises(errors.BadSignature):
            signing.decode_signature("aa")
