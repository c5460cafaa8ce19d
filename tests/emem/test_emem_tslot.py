"""Tests for memoree.factplane.emem.tslot against emem-recall.md §5.3."""

from __future__ import annotations

import pytest

from memoree.factplane.emem import tslot
from memoree.factplane.emem.errors import EmemError

JAN_1_2024 = 1_704_067_200


class TestTslotFor:
    @pytest.mark.parametrize(
        ("tempo", "expected"),
        [
            ("slow", 54),
            ("composite_16day", 1232),
            ("composite_8day", 2465),
            ("medium", 657),
            ("fast", 19723),
            ("ultra_fast", 473352),
            ("static", 0),
        ],
    )
    def test_vectors_for_2024_01_01(self, tempo: str, expected: int) -> None:
        """Each tempo puts unix 1,704,067,200 in the published slot."""
        assert tslot.tslot_for(JAN_1_2024, tempo) == expected

    def test_slow_is_365_days_not_calendar_years(self) -> None:
        """Slow slots are 31,536,000 s from the Unix epoch, so leap days drift them."""
        assert tslot.slot_seconds("slow") == 365 * 86_400
        assert tslot.slot_start(54, "slow") != JAN_1_2024

    def test_pre_epoch_clamps_to_zero(self) -> None:
        """Negative unix seconds land in slot 0."""
        assert tslot.tslot_for(-5, "fast") == 0

    def test_float_seconds_floor(self) -> None:
        """Fractional seconds floor into their slot."""
        assert tslot.tslot_for(86_399.9, "fast") == 0
        assert tslot.tslot_for(86_400.0, "fast") == 1

    def test_slot_start(self) -> None:
        """A slot starts at tslot times the slot length."""
        assert tslot.slot_start(19723, "fast") == 19723 * 86_400

    def test_unknown_tempo(self) -> None:
        """An unknown tempo is an invalid_argument error."""
        with pytest.raises(EmemError) as info:
            tslot.tslot_for(0, "hourly")
        assert info.value.code == "invalid_argument"


class TestTslotText:
    @pytest.mark.parametrize(
        ("value", "text"),
        [(0, "t.aa"), (1, "t.ae"), (26, "t.di"), (1024, "t.qaea"), (19852, "t.rsnqc")],
    )
    def test_vectors(self, value: int, text: str) -> None:
        """The text form is 't.' + base32(LEB128(tslot))."""
        assert tslot.tslot_text(value) == text
        assert tslot.parse_tslot_text(text) == value

    def test_round_trip(self) -> None:
        """Boundary values survive text round trips."""
        for value in (127, 128, 16383, 16384, 2**32, 2**63, tslot.U64_MAX):
            assert tslot.parse_tslot_text(tslot.tslot_text(value)) == value

    def test_rejects_non_canonical(self) -> None:
        """Over-long LEB128, trailing bytes, bad prefixes and u64 overflow are refused."""
        from memoree.factplane.emem import b32

        bad = [
            "t." + b32.encode(b"\x80\x00"),  # zero in a redundant continuation byte
            "t." + b32.encode(b"\x01\x01"),  # trailing byte after the value ends
            "t." + b32.encode(b"\x80"),  # truncated
            "t." + b32.encode(b"\xff" * 9 + b"\x02"),  # 2**64 and above
            "t.",
            "x.aa",
            "t.AA",
        ]
        for text in bad:
            with pytest.raises(EmemError):
                tslot.parse_tslot_text(text)

    def test_rejects_out_of_range(self) -> None:
        """Negative or wider-than-u64 tslots are refused."""
        for value in (-1, 2**64, True):
            with pytest.raises(EmemError):
                tslot.tslot_text(value)
