"""Domain-separated, length-prefixed preimage building blocks (``PreimageV1``).

Every signed digest in the fact plane (receipts v1/v2, the merkle binding,
the field digest, attestations v1) is blake3 over a stream of:

    DOMAIN(d)  = "emem.preimage.v1" 0x00 || u32le(len(d)) || d
    SEG(t, b)  = u8 t || u32le(len(b)) || b
    LIST(t, L) = u8 t || u32le(count(L)) || for s in L: u32le(len(s)) || s

Length prefixes make segment boundaries unambiguous, and the domain keeps a
receipt digest from ever equalling an attestation digest.
"""

from __future__ import annotations

from collections.abc import Iterable

from memoree.factplane.emem.errors import InvalidArgument

DOMAIN_MAGIC = b"emem.preimage.v1\x00"
U32_MAX = 0xFFFF_FFFF


def u32le(value: int) -> bytes:
    if not 0 <= value <= U32_MAX:
        raise InvalidArgument(f"{value} does not fit a u32")
    return value.to_bytes(4, "little")


def as_bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def domain(name: str) -> bytes:
    data = as_bytes(name)
    return DOMAIN_MAGIC + u32le(len(data)) + data


def segment(tag: int, body: str | bytes) -> bytes:
    data = as_bytes(body)
    return bytes((tag,)) + u32le(len(data)) + data


def list_segment(tag: int, items: Iterable[str | bytes]) -> bytes:
    encoded = [as_bytes(item) for item in items]
    parts = [bytes((tag,)), u32le(len(encoded))]
    for item in encoded:
        parts += [u32le(len(item)), item]
    return b"".join(parts)
