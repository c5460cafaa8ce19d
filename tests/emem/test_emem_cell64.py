"""Tests for memoree.factplane.emem.cell64 against the vectors of emem-recall.md §1."""

from __future__ import annotations

import math
import random

import pytest

from memoree.factplane.emem import cell64
from memoree.factplane.emem.errors import EmemError, InvalidCell, NotGeoCell

PUBLISHED_VECTORS = [
    (12.971641, 77.594609, "defi.zb493.xoso.zcb6a"),
    (40.7229, -73.9987, "defi.zb5cf.nura.zd83c"),
    (31.2304, 121.4737, "defi.zb563.noxo.xAvu"),
    (30.9090157, 75.851601, "defi.zb55f.zaced.tehE"),
    (33.4484367, -112.074141, "defi.zb57c.wIma.dore"),
    (25.7929198, -80.1353006, "defi.zb525.sAmA.zc0f4"),
    (41.6612561, -91.5299106, "defi.zb5da.boto.zba5f"),
    (19.076, 72.8777, "defi.zb4d9.cojE.zf4be"),
    (35.6764, 139.65, "defi.zb595.zeaf8.zd3a0"),
    (12.971899, 77.593665, "defi.zb493.xuqA.zcb5f"),
]

DERIVED_VECTORS = [
    (0.0, 0.0, "defi.zb400.bafi.baba"),
    (0.0, 180.0, "defi.zb400.baba.baba"),
    (0.0, -180.0, "defi.zb400.baba.baba"),
    (0.0, 179.99999999, "defi.zb400.baba.baba"),
    (90.0, 0.0, "defi.zb7ff.zffc0.baba"),
    (90.0, -123.4, "defi.zb7ff.zffc0.baba"),
    (-90.0, 0.0, "defi.zb000.baba.baba"),
    (-90.0, 77.7, "defi.zb000.baba.baba"),
]


class TestEncodeVectors:
    @pytest.mark.parametrize(("lat", "lng", "expected"), PUBLISHED_VECTORS)
    def test_published_vectors(self, lat: float, lng: float, expected: str) -> None:
        """Each cell64 found in upstream files encodes from its (lat, lng)."""
        assert cell64.encode(lat, lng) == expected

    @pytest.mark.parametrize(("lat", "lng", "expected"), DERIVED_VECTORS)
    def test_derived_vectors(self, lat: float, lng: float, expected: str) -> None:
        """Origin, dateline and pole cells match the vectors derived from the code rules."""
        assert cell64.encode(lat, lng) == expected

    def test_origin_raw_id(self) -> None:
        """(0, 0) is the exact .5 tie that needs half-away-from-zero rounding."""
        assert cell64.raw_from_latlng(0.0, 0.0) == 0x115AB40000200000

    def test_geo_prefix_constant(self) -> None:
        """The geo prefix is 0x115AB000..., so every geo cell starts with 'defi.'."""
        assert cell64.GEO_PREFIX == 0x115A_B000_0000_0000
        assert cell64.symbol_for(cell64.GEO_PREFIX >> 48) == "defi"


class TestDecode:
    def test_decode_vector(self) -> None:
        """The §1.6 decode vector gives its grid indices and exact grid point."""
        assert cell64.quantised("defi.zb493.xuqA.zcb5f") == (1_199_709, 3_001_183)
        assert cell64.decode("defi.zb493.xuqA.zcb5f") == (12.971898542355802, 77.59366454927073)

    def test_origin_has_no_exact_zero(self) -> None:
        """Because LAT_MAX is odd, (0, 0) decodes to about (4.29e-5, 4.29e-5)."""
        lat, lng = cell64.decode(cell64.encode(0.0, 0.0))
        assert lat == pytest.approx(4.29e-5, abs=1e-7)
        assert lng == pytest.approx(4.29e-5, abs=1e-7)

    def test_bbox_is_half_pitch_around_grid_point(self) -> None:
        """The bbox is the grid point plus or minus half a pitch on each axis."""
        lat, lng = cell64.decode("defi.zb493.xuqA.zcb5f")
        box = cell64.bbox("defi.zb493.xuqA.zcb5f")
        assert box.min_lat == pytest.approx(lat - 90.0 / cell64.LAT_MAX)
        assert box.max_lat == pytest.approx(lat + 90.0 / cell64.LAT_MAX)
        assert box.min_lng == pytest.approx(lng - 180.0 / cell64.LNG_MAX)
        assert box.max_lng == pytest.approx(lng + 180.0 / cell64.LNG_MAX)

    def test_bbox_clipped_at_pole(self) -> None:
        """The north pole cell's bbox does not go past 90 degrees."""
        assert cell64.bbox(cell64.encode(90.0, 0.0)).max_lat == 90.0

    def test_round_trip_within_half_pitch(self) -> None:
        """Random points re-encode to the cell of their own decoded grid point, within half a pitch."""
        rng = random.Random(6)
        for _ in range(2000):
            lat, lng = rng.uniform(-89.9, 89.9), rng.uniform(-179.9, 179.9)
            text = cell64.encode(lat, lng)
            glat, glng = cell64.decode(text)
            assert abs(glat - lat) <= 90.0 / cell64.LAT_MAX + 1e-12
            assert abs(glng - lng) <= 180.0 / cell64.LNG_MAX + 1e-12
            assert cell64.encode(glat, glng) == text

    def test_raw_text_round_trip(self) -> None:
        """Any u64 spells to text and parses back unchanged."""
        rng = random.Random(7)
        for raw in [0, cell64.U64_MAX, *(rng.getrandbits(64) for _ in range(500))]:
            assert cell64.text_to_raw(cell64.raw_to_text(raw)) == raw


class TestValidation:
    def test_legacy_res12_is_not_geo(self) -> None:
        """A legacy res-12 string parses to its raw id but is refused as a geo cell."""
        assert cell64.text_to_raw("damO.zb000.xUti.zde78") == 0x10CAB0009BA2DE78
        with pytest.raises(NotGeoCell) as info:
            cell64.decode("damO.zb000.xUti.zde78")
        assert info.value.code == "invalid_cell"

    def test_wrong_doc_example_is_not_geo(self) -> None:
        """The upstream doc's (0,0) example 'dedi.zaf00.bafi.baba' fails with NotGeoCell."""
        with pytest.raises(NotGeoCell):
            cell64.validate("dedi.zaf00.bafi.baba")

    def test_unknown_symbol(self) -> None:
        """'z0000' matches the OpenAPI pattern's shape but is not an alphabet symbol."""
        assert cell64._CELL64_RE.fullmatch("defi.z0000.baba.baba")
        assert not cell64.is_cell64_shape("defi.z0000.baba.baba")
        with pytest.raises(InvalidCell):
            cell64.validate("defi.z0000.baba.baba")

    def test_case_matters(self) -> None:
        """'A' and 'a' are different vowels, so case changes the cell."""
        assert cell64.text_to_raw("defi.zb493.xuqA.zcb5f") != cell64.text_to_raw(
            "defi.zb493.xuqa.zcb5f"
        )
        assert not cell64.is_cell64_shape("DEFI.zb493.xuqA.zcb5f")

    def test_malformed_shapes(self) -> None:
        """Wrong part counts, empty parts, non-strings and padding are refused."""
        for text in (
            "",
            "defi.zb400.bafi",
            "defi.zb400.bafi.baba.baba",
            "defi..bafi.baba",
            " defi.zb400.bafi.baba",
            "defi.zb400.bafi.baba\n",
            None,
            42,
        ):
            assert not cell64.is_cell64_shape(text)

    def test_valid_cells_pass(self) -> None:
        """Every published vector validates and is returned unchanged."""
        for _, _, text in PUBLISHED_VECTORS:
            assert cell64.validate(text) == text


class TestAlphabet:
    def test_size_and_uniqueness(self) -> None:
        """The alphabet has 65,536 distinct symbols."""
        table = cell64.alphabet()
        assert len(table) == 65_536
        assert len(set(table)) == 65_536

    def test_landmarks(self) -> None:
        """Index 0 is baba, 42000 zaba, 44099 zUzU, 44100 zac44 and 65535 zffff."""
        assert cell64.symbol_for(0) == "baba"
        assert cell64.symbol_for(42_000) == "zaba"
        assert cell64.symbol_for(44_099) == "zUzU"
        assert cell64.symbol_for(44_100) == "zac44"
        assert cell64.symbol_for(65_535) == "zffff"

    def test_index_formula(self) -> None:
        """CVCV index is c1*2100 + v1*210 + c2*10 + v2."""
        c, v = cell64.CONSONANTS, cell64.VOWELS
        assert cell64.index_of(c[3] + v[7] + c[11] + v[2]) == 3 * 2100 + 7 * 210 + 11 * 10 + 2

    def test_every_symbol_matches_wire_pattern(self) -> None:
        """Each symbol is either a CVCV quad or z + four lowercase hex digits."""
        import re

        part = re.compile(r"(?:[bcdfghjklmnpqrstvwxyz][aeiouAEIOU]){2}|z[0-9a-f]{4}")
        assert all(part.fullmatch(symbol) for symbol in cell64.alphabet())

    def test_lane_out_of_range(self) -> None:
        """Lane values outside 0..65535 are refused."""
        with pytest.raises(EmemError):
            cell64.symbol_for(65_536)


class TestQuantisation:
    def test_one_metre_apart_same_cell(self) -> None:
        """Two points 9 micro-degrees (~1 m) apart land in the same cell."""
        here = cell64.encode(12.9718985, 77.5936645)
        assert cell64.encode(12.9718985 + 9e-6, 77.5936645) == here

    def test_twelve_metres_apart_distinct(self) -> None:
        """Two points 1.08e-4 degrees (~12 m) apart land in different cells."""
        assert cell64.encode(30.0, 75.0) != cell64.encode(30.0 + 1.08e-4, 75.0)
        assert cell64.encode(30.0, 75.0) != cell64.encode(30.0, 75.0 + 1.08e-4)

    def test_lenient_sanitises(self) -> None:
        """The lenient encoder maps NaN/inf to 0, clamps lat and wraps lng."""
        assert cell64.encode(math.nan, math.inf) == cell64.encode(0.0, 0.0)
        assert cell64.encode(95.0, 10.0) == cell64.encode(90.0, 10.0)
        assert cell64.encode(10.0, 370.0) == cell64.encode(10.0, 10.0)
        assert cell64.encode(10.0, -190.0) == cell64.encode(10.0, 170.0)

    def test_strict_rejects(self) -> None:
        """The strict encoder refuses non-finite and out-of-range input."""
        for lat, lng in ((math.nan, 0.0), (0.0, math.inf), (90.01, 0.0), (0.0, -180.01)):
            with pytest.raises(EmemError) as info:
                cell64.encode_strict(lat, lng)
            assert info.value.code == "invalid_argument"

    def test_strict_tolerance(self) -> None:
        """The strict encoder accepts values within 1e-6 of the limits."""
        assert cell64.encode_strict(90.0000005, 180.0000005) == cell64.encode(90.0, 180.0)


class TestResolution:
    def test_pitch_in_degrees(self) -> None:
        """Both axes are about 8.583e-5 degrees per step (scale 2^n - 1)."""
        assert pytest.approx(8.583e-5, rel=1e-3) == cell64.LAT_PITCH_DEG
        assert pytest.approx(8.583e-5, rel=1e-3) == cell64.LNG_PITCH_DEG

    def test_pitch_in_metres(self) -> None:
        """Cells are about 9.5 m square at the equator and 4.77 m wide at 60 degrees."""
        assert cell64.lat_pitch_m() == pytest.approx(9.54, abs=0.01)
        assert cell64.lng_pitch_m(0.0) == pytest.approx(9.55, abs=0.015)
        assert round(cell64.lng_pitch_m(60.0), 2) == 4.77

    def test_codec_name(self) -> None:
        """The codec names itself as emem's /v1/grid_info does."""
        assert cell64.CODEC_NAME == "cell64-geo-21x22"
