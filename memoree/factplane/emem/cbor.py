"""The CBOR bytes emem emits (ciborium, no canonicalisation), and a strict reader.

Rules, all from emem-recall.md §2.2 and all part of every content id:

* maps are definite-length and keep their given order: struct fields in
  declaration order (a tagged struct puts its tag field first), free dicts in
  insertion order. This is NOT RFC 8949 key sorting; use :func:`sorted_map`
  where Rust used a ``BTreeMap`` (bytewise key order);
* integers take the shortest head; negatives use major type 1;
* every float takes its shortest lossless width, f16 then f32 then f64,
  checked bit-exactly. :class:`F32` marks a Rust ``f32`` field, which is
  rounded to f32 first; an int and an integral float are different values;
* byte sequences (``bytes``) are arrays of unsigned ints, never CBOR byte
  strings, because serde writes ``[u8; N]`` as a sequence;
* msgspec Struct fields set to ``msgspec.UNSET`` are left out.

NaN is refused: JSON cannot carry it and its emem encoding is unverified.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from typing import Any

import msgspec

from memoree.factplane.emem.errors import CanonicalEncodingDivergence, InvalidArgument

U64_MAX = (1 << 64) - 1

_MAJOR_UINT = 0
_MAJOR_NEGINT = 1
_MAJOR_BYTES = 2
_MAJOR_TEXT = 3
_MAJOR_ARRAY = 4
_MAJOR_MAP = 5
_MAJOR_TAG = 6
_MAJOR_SIMPLE = 7

_FALSE, _TRUE, _NULL = 0xF4, 0xF5, 0xF6
_F16, _F32, _F64 = 0xF9, 0xFA, 0xFB
_ARGUMENT_WIDTHS = {24: 1, 25: 2, 26: 4, 27: 8}
_FLOAT_FORMATS = {25: (2, ">e"), 26: (4, ">f"), 27: (8, ">d")}


class F32(float):
    """A float that is a Rust ``f32`` on the wire (e.g. ``confidence``)."""

    __slots__ = ()


def sorted_map(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A copy ordered like a Rust ``BTreeMap<String, _>``: plain bytewise key order."""
    return {key: mapping[key] for key in sorted(mapping, key=lambda k: k.encode("utf-8"))}


def encode(value: Any) -> bytes:
    """Encode ``value`` exactly as emem's ciborium writer would."""
    out = bytearray()
    _encode_into(out, value)
    return bytes(out)


def _head(out: bytearray, major: int, argument: int) -> None:
    prefix = major << 5
    if argument < 24:
        out.append(prefix | argument)
    elif argument <= 0xFF:
        out += bytes((prefix | 24, argument))
    elif argument <= 0xFFFF:
        out.append(prefix | 25)
        out += argument.to_bytes(2, "big")
    elif argument <= 0xFFFF_FFFF:
        out.append(prefix | 26)
        out += argument.to_bytes(4, "big")
    else:
        out.append(prefix | 27)
        out += argument.to_bytes(8, "big")


def _encode_int(out: bytearray, value: int) -> None:
    if 0 <= value <= U64_MAX:
        _head(out, _MAJOR_UINT, value)
    elif -(U64_MAX + 1) <= value < 0:
        _head(out, _MAJOR_NEGINT, -1 - value)
    else:
        raise InvalidArgument(f"integer {value} does not fit CBOR's 64-bit range")


def _encode_float(out: bytearray, value: float) -> None:
    if math.isnan(value):
        raise InvalidArgument("NaN has no agreed emem CBOR encoding")
    if isinstance(value, F32):
        value = round_to_f32(value)
    value = float(value)
    half = _narrowed(value, "<e")
    if half is not None:
        out.append(_F16)
        out += half
        return
    single = _narrowed(value, "<f")
    if single is not None:
        out.append(_F32)
        out += single
        return
    out.append(_F64)
    out += struct.pack(">d", value)


def round_to_f32(value: float) -> float:
    """``value`` rounded to the nearest f32, as a Python float."""
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        raise InvalidArgument(f"{value} does not fit an f32 field") from None


def f32_display(value: float) -> float:
    """The shortest decimal that rounds to the same f32 (what serde_json prints for an f32)."""
    single = round_to_f32(value)
    if not math.isfinite(single):
        return single
    for digits in range(1, 10):
        candidate = float(f"{single:.{digits}g}")
        if round_to_f32(candidate) == single:
            return candidate
    return single


def _narrowed(value: float, fmt: str) -> bytes | None:
    """Big-endian bytes of ``value`` in the narrower format, if that is lossless."""
    try:
        packed = struct.pack(fmt, value)
    except OverflowError:
        return None
    if struct.unpack(fmt, packed)[0] != value:
        return None
    return packed[::-1]  # packed little-endian; CBOR is big-endian


def _encode_text(out: bytearray, value: str) -> None:
    data = value.encode("utf-8")
    _head(out, _MAJOR_TEXT, len(data))
    out += data


def _encode_byte_sequence(out: bytearray, value: bytes | bytearray | memoryview) -> None:
    data = bytes(value)
    _head(out, _MAJOR_ARRAY, len(data))
    for byte in data:
        _head(out, _MAJOR_UINT, byte)


def _encode_map(out: bytearray, items: list[tuple[Any, Any]]) -> None:
    _head(out, _MAJOR_MAP, len(items))
    for key, item in items:
        _encode_into(out, key)
        _encode_into(out, item)


def _struct_items(value: msgspec.Struct) -> list[tuple[str, Any]]:
    config = value.__struct_config__
    items: list[tuple[str, Any]] = []
    if config.tag_field is not None:
        items.append((config.tag_field, config.tag))
    for name in value.__struct_fields__:
        field_value = getattr(value, name)
        if field_value is not msgspec.UNSET:
            items.append((name, field_value))
    return items


def _encode_into(out: bytearray, value: Any) -> None:
    # bool before int: bool is an int subclass.
    if value is None:
        out.append(_NULL)
    elif value is True:
        out.append(_TRUE)
    elif value is False:
        out.append(_FALSE)
    elif isinstance(value, int):
        _encode_int(out, value)
    elif isinstance(value, float):
        _encode_float(out, value)
    elif isinstance(value, str):
        _encode_text(out, value)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        _encode_byte_sequence(out, value)
    elif isinstance(value, (list, tuple)):
        _head(out, _MAJOR_ARRAY, len(value))
        for item in value:
            _encode_into(out, item)
    elif isinstance(value, Mapping):
        _encode_map(out, list(value.items()))
    elif isinstance(value, msgspec.Struct):
        _encode_map(out, _struct_items(value))
    else:
        raise InvalidArgument(f"cannot encode {type(value).__name__} as emem CBOR")


def decode(data: bytes) -> Any:
    """Decode one CBOR item written by :func:`encode`; refuse anything else.

    Definite lengths, shortest integer heads, no tags, no byte strings, no duplicate
    map keys, text keys only. Maps come back as dicts in wire order and
    floats as Python floats. Float widths are not checked here; use
    :func:`decode_canonical` to also require ``encode(decode(b)) == b``.
    """
    reader = _Reader(bytes(data))
    value = reader.item()
    if reader.position != len(reader.data):
        raise InvalidArgument("trailing bytes after the CBOR item")
    return value


def decode_canonical(data: bytes) -> Any:
    """Decode and require that re-encoding reproduces ``data`` byte-for-byte."""
    value = decode(data)
    if encode(value) != bytes(data):
        raise CanonicalEncodingDivergence("CBOR is not in emem's canonical form")
    return value


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def take(self, count: int) -> bytes:
        end = self.position + count
        if end > len(self.data):
            raise InvalidArgument("truncated CBOR")
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def argument(self, info: int) -> int:
        if info < 24:
            return info
        width = _ARGUMENT_WIDTHS.get(info)
        if width is None:
            raise InvalidArgument("indefinite or reserved CBOR length")
        value = int.from_bytes(self.take(width), "big")
        shortest = bytearray()
        _head(shortest, 0, value)
        if len(shortest) != 1 + width:
            raise CanonicalEncodingDivergence("CBOR integer head is not in shortest form")
        return value

    def item(self) -> Any:
        initial = self.take(1)[0]
        major, info = initial >> 5, initial & 0x1F
        if major == _MAJOR_SIMPLE:
            return self.simple(info)
        argument = self.argument(info)
        if major == _MAJOR_UINT:
            return argument
        if major == _MAJOR_NEGINT:
            return -1 - argument
        if major == _MAJOR_TEXT:
            try:
                return self.take(argument).decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidArgument("CBOR text is not UTF-8") from None
        if major == _MAJOR_ARRAY:
            return [self.item() for _ in range(argument)]
        if major == _MAJOR_MAP:
            return self.map(argument)
        kind = "byte strings" if major == _MAJOR_BYTES else "tags"
        raise InvalidArgument(f"emem CBOR carries no {kind}")

    def map(self, count: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for _ in range(count):
            key = self.item()
            if not isinstance(key, str):
                raise InvalidArgument("emem CBOR map keys are text")
            if key in result:
                raise InvalidArgument(f"duplicate CBOR map key {key!r}")
            result[key] = self.item()
        return result

    def simple(self, info: int) -> Any:
        if info == 20:
            return False
        if info == 21:
            return True
        if info == 22:
            return None
        if info not in _FLOAT_FORMATS:
            raise InvalidArgument("unsupported CBOR simple value")
        width, fmt = _FLOAT_FORMATS[info]
        value = struct.unpack(fmt, self.take(width))[0]
        if math.isnan(value):
            raise InvalidArgument("NaN has no agreed emem CBOR encoding")
        return value
