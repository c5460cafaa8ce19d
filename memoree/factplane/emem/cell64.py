"""cell64: emem's ~9.5 m geographic cell id and its dotted text form.

Owns the 64-bit layout (mode, resolution, base, lat_q, lng_q), quantisation
of (lat, lng), the 65,536-symbol alphabet that spells each 16-bit lane, wire
validation, decoding back to the grid point and bbox, and pitch helpers.
"""

from __future__ import annotations

import math
import re
from functools import cache
from typing import NamedTuple

from memoree.factplane.emem.errors import InvalidArgument, InvalidCell, NotGeoCell

CODEC_NAME = "cell64-geo-21x22"

GEO_MODE = 0b0001
GEO_RESOLUTION = 21
GEO_BASE = 0xAB
GEO_PREFIX = (GEO_MODE << 60) | (GEO_RESOLUTION << 52) | (GEO_BASE << 44)
GEO_PREFIX_MASK = 0xFFFF_F000_0000_0000
LAT_BITS = 21
LNG_BITS = 22
LAT_MAX = (1 << LAT_BITS) - 1
LNG_MAX = (1 << LNG_BITS) - 1
U64_MAX = (1 << 64) - 1

LAT_PITCH_DEG = 180.0 / LAT_MAX
LNG_PITCH_DEG = 360.0 / LNG_MAX
# Spherical mean Earth radius; reproduces the published lng_axis_metres_at_lat_60 = 4.77.
EARTH_MEAN_RADIUS_M = 6_371_008.8
STRICT_TOLERANCE_DEG = 1e-6

CONSONANTS = "bcdfghjklmnpqrstvwxyz"
VOWELS = "aeiouAEIOU"
CVCV_COUNT = len(CONSONANTS) * len(VOWELS) * len(CONSONANTS) * len(VOWELS)  # 44,100
ALPHABET_SIZE = 1 << 16

# Byte-for-byte the OpenAPI Cell64 pattern. Shape only: z0000..zac43 match it
# but are not alphabet symbols, so validate() also checks membership.
CELL64_PATTERN = (
    r"^(?:(?:[bcdfghjklmnpqrstvwxyz][aeiouAEIOU]){2}|z[0-9a-f]{4})"
    r"(?:\.(?:(?:[bcdfghjklmnpqrstvwxyz][aeiouAEIOU]){2}|z[0-9a-f]{4})){3}$"
)
_CELL64_RE = re.compile(CELL64_PATTERN)


class LatLng(NamedTuple):
    lat: float
    lng: float


class BBox(NamedTuple):
    min_lat: float
    min_lng: float
    max_lat: float
    max_lng: float


def symbol_for(index: int) -> str:
    """The alphabet symbol for a 16-bit lane value."""
    if not 0 <= index < ALPHABET_SIZE:
        raise InvalidArgument(f"lane value {index} is outside 0..65535")
    if index >= CVCV_COUNT:
        return f"z{index:04x}"
    c1, rest = divmod(index, 2100)
    v1, rest = divmod(rest, 210)
    c2, v2 = divmod(rest, 10)
    return CONSONANTS[c1] + VOWELS[v1] + CONSONANTS[c2] + VOWELS[v2]


@cache
def alphabet() -> tuple[str, ...]:
    """All 65,536 symbols, indexed by lane value."""
    return tuple(symbol_for(i) for i in range(ALPHABET_SIZE))


@cache
def _symbol_index() -> dict[str, int]:
    return {symbol: i for i, symbol in enumerate(alphabet())}


def index_of(symbol: str) -> int:
    """The lane value a symbol spells; raises InvalidCell for a non-symbol."""
    try:
        return _symbol_index()[symbol]
    except (KeyError, TypeError):
        raise InvalidCell(f"{symbol!r} is not a cell64 alphabet symbol") from None


def _round_half_away(x: float) -> int:
    # Rust f64::round semantics; Python's round() is banker's rounding and
    # differs on exact .5 ties such as (0, 0).
    floor = math.floor(x)
    return floor + 1 if x - floor >= 0.5 else floor


def _sanitise_lat(lat: float) -> float:
    if not math.isfinite(lat):
        return 0.0
    return min(90.0, max(-90.0, lat))


def _sanitise_lng(lng: float) -> float:
    if not math.isfinite(lng):
        return 0.0
    return ((lng + 180.0) % 360.0) - 180.0


def raw_from_latlng(lat: float, lng: float) -> int:
    """Lenient encode to the 64-bit id: non-finite -> 0, lat clamped, lng wrapped."""
    lat = _sanitise_lat(float(lat))
    lng = _sanitise_lng(float(lng))
    lat_q = _round_half_away((lat + 90.0) / 180.0 * LAT_MAX)
    lng_q = _round_half_away((lng + 180.0) / 360.0 * LNG_MAX)
    if lng_q == LNG_MAX or lat_q in (0, LAT_MAX):
        lng_q = 0  # the dateline column and the pole rows collapse to one cell each
    return GEO_PREFIX | (lat_q << LNG_BITS) | lng_q


def check_latlng(lat: float, lng: float) -> None:
    """Reject coordinates the strict encoder refuses (API input)."""
    lat, lng = float(lat), float(lng)
    if not (math.isfinite(lat) and math.isfinite(lng)):
        raise InvalidArgument("lat and lng must be finite numbers")
    if abs(lat) > 90.0 + STRICT_TOLERANCE_DEG:
        raise InvalidArgument(f"lat {lat} is outside [-90, 90]")
    if abs(lng) > 180.0 + STRICT_TOLERANCE_DEG:
        raise InvalidArgument(f"lng {lng} is outside [-180, 180]")


def raw_to_text(raw: int) -> str:
    """Spell a 64-bit id as four dotted lanes, high lane first."""
    if not 0 <= raw <= U64_MAX:
        raise InvalidArgument("cell64 raw id must be an unsigned 64-bit integer")
    table = alphabet()
    return ".".join(table[(raw >> shift) & 0xFFFF] for shift in (48, 32, 16, 0))


def text_to_raw(text: str) -> int:
    """Parse the dotted wire form to its 64-bit id (any mode, not only geo)."""
    if not isinstance(text, str) or _CELL64_RE.fullmatch(text) is None:
        raise InvalidCell(f"{text!r} is not a cell64 (four dotted alphabet symbols)")
    raw = 0
    for symbol in text.split("."):
        raw = (raw << 16) | index_of(symbol)
    return raw


def encode(lat: float, lng: float) -> str:
    """Lenient (lat, lng) -> cell64 text, as emem's internal callers do."""
    return raw_to_text(raw_from_latlng(lat, lng))


def encode_strict(lat: float, lng: float) -> str:
    """(lat, lng) -> cell64 text, refusing non-finite or out-of-range input."""
    check_latlng(lat, lng)
    return encode(lat, lng)


def is_cell64_shape(text: object) -> bool:
    """True when ``text`` is four dotted alphabet symbols (any mode)."""
    try:
        text_to_raw(text)  # type: ignore[arg-type]
    except InvalidCell:
        return False
    return True


def is_geo_raw(raw: int) -> bool:
    return raw & GEO_PREFIX_MASK == GEO_PREFIX


def validate(text: str) -> str:
    """Return ``text`` if it is a geo cell64; raise InvalidCell/NotGeoCell otherwise."""
    raw = text_to_raw(text)
    if not is_geo_raw(raw):
        raise NotGeoCell(f"{text!r} is not a geo cell (prefix {raw >> 44:#07x})")
    return text


def quantised(text: str) -> tuple[int, int]:
    """The (lat_q, lng_q) grid indices of a geo cell."""
    raw = text_to_raw(validate(text))
    return (raw >> LNG_BITS) & LAT_MAX, raw & LNG_MAX


def decode(text: str) -> LatLng:
    """The cell's grid point (not a computed centre)."""
    lat_q, lng_q = quantised(text)
    return LatLng(lat_q / LAT_MAX * 180.0 - 90.0, lng_q / LNG_MAX * 360.0 - 180.0)


def bbox(text: str) -> BBox:
    """Grid point +/- half a pitch on each axis, lat clipped to the poles."""
    lat, lng = decode(text)
    half_lat = 90.0 / LAT_MAX
    half_lng = 180.0 / LNG_MAX
    return BBox(
        max(-90.0, lat - half_lat),
        lng - half_lng,
        min(90.0, lat + half_lat),
        lng + half_lng,
    )


def metres_per_degree() -> float:
    return math.pi * EARTH_MEAN_RADIUS_M / 180.0


def lat_pitch_m() -> float:
    """North-south size of a cell in metres (spherical approximation)."""
    return LAT_PITCH_DEG * metres_per_degree()


def lng_pitch_m(lat: float) -> float:
    """East-west size of a cell in metres at latitude ``lat``."""
    return LNG_PITCH_DEG * metres_per_degree() * math.cos(math.radians(lat))
