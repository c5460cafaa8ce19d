"""Tests for memoree.factplane.emem.cbor: the exact bytes of emem-recall.md §2.2."""

from __future__ import annotations

import math

import msgspec
import pytest
from msgspec import UNSET, UnsetType

from memoree.factplane.emem import cbor
from memoree.factplane.emem.errors import EmemError


class TestFloats:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (918.0, "f9632c"),
            (6.0, "f94600"),
            (1.0, "f93c00"),
            (0.0, "f90000"),
            (-0.0, "f98000"),
            (65504.0, "f97bff"),
            (5.960464477539063e-08, "f90001"),  # smallest f16 subnormal
            (math.inf, "f97c00"),
            (-math.inf, "f9fc00"),
            (100000.0, "fa47c35000"),
            (0.42, "fb3fdae147ae147ae1"),
            (1.1, "fb3ff199999999999a"),
        ],
    )
    def test_shortest_lossless_width(self, value: float, expected: str) -> None:
        """Every float takes the narrowest of f16, f32, f64 that holds it bit-exactly."""
        assert cbor.encode(value).hex() == expected

    def test_f32_field(self) -> None:
        """An f32 field is rounded to f32 before shrinking: 0.95f32 is fa3f733333."""
        assert cbor.encode(cbor.F32(0.95)).hex() == "fa3f733333"
        assert cbor.encode(cbor.F32(1.0)).hex() == "f93c00"

    def test_int_and_float_differ(self) -> None:
        """The integer 918 and the float 918.0 are different values with different bytes."""
        assert cbor.encode(918).hex() == "190396"
        assert cbor.encode(918.0).hex() == "f9632c"

    def test_nan_refused(self) -> None:
        """NaN has no agreed encoding and is refused."""
        with pytest.raises(EmemError):
            cbor.encode(math.nan)

    def test_f32_display(self) -> None:
        """The display form of an f32 is its shortest round-tripping decimal."""
        assert cbor.f32_display(cbor.round_to_f32(0.95)) == 0.95
        assert cbor.f32_display(0.1) == 0.1


class TestIntegersAndScalars:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (0, "00"),
            (23, "17"),
            (24, "1818"),
            (255, "18ff"),
            (256, "190100"),
            (65535, "19ffff"),
            (65536, "1a00010000"),
            (2**32, "1b0000000100000000"),
            (2**64 - 1, "1bffffffffffffffff"),
            (-1, "20"),
            (-24, "37"),
            (-25, "3818"),
            (-(2**64), "3bffffffffffffffff"),
        ],
    )
    def test_shortest_heads(self, value: int, expected: str) -> None:
        """Integers use the shortest head; negatives use major type 1."""
        assert cbor.encode(value).hex() == expected

    def test_integer_out_of_range(self) -> None:
        """Integers beyond CBOR's 64-bit range are refused."""
        for value in (2**64, -(2**64) - 1):
            with pytest.raises(EmemError):
                cbor.encode(value)

    def test_simple_values_and_text(self) -> None:
        """null, booleans and UTF-8 text use their standard encodings."""
        assert cbor.encode(None).hex() == "f6"
        assert cbor.encode(True).hex() == "f5"
        assert cbor.encode(False).hex() == "f4"
        assert cbor.encode("é").hex() == "62c3a9"

    def test_bytes_are_uint_arrays(self) -> None:
        """Fixed byte arrays are arrays of uints, never CBOR byte strings."""
        assert cbor.encode(bytes([0, 23, 24, 255])).hex() == "840017181818ff"
        assert cbor.encode(bytes(32))[:2].hex() == "9820"

    def test_unsupported_type(self) -> None:
        """Types with no emem encoding are refused."""
        with pytest.raises(EmemError):
            cbor.encode({1, 2})


class TestMaps:
    def test_insertion_order_not_sorted(self) -> None:
        """Free maps keep their given order rather than RFC 8949 key sorting."""
        assert cbor.encode({"b": 1, "a": 2}).hex() == "a2616201616102"

    def test_sorted_map_is_bytewise(self) -> None:
        """sorted_map orders like a BTreeMap: bytewise, not shortest-key-first."""
        manifest = {"sources_cid": 1, "registry_cid": 2, "bands_cid": 3, "schema_cid": 4}
        assert list(cbor.sorted_map(manifest)) == [
            "bands_cid",
            "registry_cid",
            "schema_cid",
            "sources_cid",
        ]

    def test_struct_declaration_order_with_tag_first(self) -> None:
        """Structs encode fields in declaration order, the tag field first, UNSET fields left out."""

        class Example(msgspec.Struct, kw_only=True, tag_field="kind", tag="ex"):
            zeta: int
            alpha: str | UnsetType = UNSET
            mid: None = None

        expected = cbor.encode({"kind": "ex", "zeta": 1, "mid": None})
        assert cbor.encode(Example(zeta=1)) == expected
        assert cbor.encode(Example(zeta=1, alpha="x"))[:1].hex() == "a4"

    def test_nested_arrays(self) -> None:
        """Lists and tuples are definite-length arrays."""
        assert cbor.encode([1, (2, 3)]).hex() == "8201820203"


class TestDecode:
    def test_round_trip(self) -> None:
        """Values written by encode decode back to equal Python values."""
        value = {"a": [1, -2, 918.0, 0.95, None, True, "t"], "m": {"z": 2**40}}
        assert cbor.decode(cbor.encode(value)) == value
        assert cbor.decode_canonical(cbor.encode(value)) == value

    def test_rejects_non_shortest_heads(self) -> None:
        """An integer written with a longer head than needed is refused."""
        with pytest.raises(EmemError) as info:
            cbor.decode(bytes.fromhex("1817"))
        assert info.value.code == "canonical_encoding_divergence"

    def test_canonical_rejects_wide_float(self) -> None:
        """A float wider than needed decodes, but not canonically."""
        wide = bytes.fromhex("fb408cb00000000000")  # 918.0 as f64
        assert cbor.decode(wide) == 918.0
        with pytest.raises(EmemError) as info:
            cbor.decode_canonical(wide)
        assert info.value.code == "canonical_encoding_divergence"

    @pytest.mark.parametrize(
        "hex_bytes",
        ["4100", "c100", "9fff", "a2616101616102", "a10101", "", "62c3", "01", "f97e00", "f7"],
    )
    def test_rejects_foreign_cbor(self, hex_bytes: str) -> None:
        """Byte strings, tags, indefinite lengths, bad keys, truncation and NaN are refused."""
        data = bytes.fromhex(hex_bytes)
        if hex_bytes == "01":
            data += b"\x00"  # trailing byte
        with pytest.raises(EmemError):
            cbor.decode(data)
