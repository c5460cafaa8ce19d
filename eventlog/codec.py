"""The one deterministic codec for stored events, and the hash chain over the stored bytes.

An event is encoded exactly once, as compact JSON with keys sorted at every level; those stored
bytes are what the chain hashes (``hash = blake3(prev_hash || stored bytes)``) and what Merkle
leaves cover. Verification always re-hashes stored bytes and never re-encodes decoded objects, so
a future encoder cannot break the chain. Upcasters run after verification, while decoding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from blake3 import blake3

from .events import EVENT_TYPES, Scope

__all__ = [
    "GENESIS_HASH",
    "SCHEMA_V",
    "StoredEnvelope",
    "chain_hash",
    "decode_envelope",
    "decode_payload",
    "encode_event",
    "register_upcaster",
]

SCHEMA_V = 1
GENESIS_HASH = bytes(32)


class _EnvelopeFields(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    commit_seq: int
    event_id: str
    type: str
    schema_v: int
    stream_id: str
    stream_version: int
    at: str
    scope: Scope | None = None
    idempotency_key: str | None = None
    request_digest: str | None = None


class StoredEnvelope(_EnvelopeFields, frozen=True, kw_only=True):
    """What the stored bytes contain; the payload stays raw until its type is known."""

    payload: msgspec.Raw


class _EnvelopeOut(_EnvelopeFields, frozen=True, kw_only=True):
    """The same envelope on the way in, with the typed payload (keys are sorted when encoded)."""

    payload: Any


_encoder = msgspec.json.Encoder(order="sorted")
_envelope_decoder = msgspec.json.Decoder(StoredEnvelope)
_payload_decoders = {name: msgspec.json.Decoder(cls) for name, cls in EVENT_TYPES.items()}
_UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}


def encode_event(
    *,
    commit_seq: int,
    event_id: str,
    type: str,
    stream_id: str,
    stream_version: int,
    at: str,
    scope: Scope | None,
    idempotency_key: str | None,
    request_digest: str | None,
    payload: msgspec.Struct,
) -> bytes:
    """The stored bytes of one event."""
    return _encoder.encode(
        _EnvelopeOut(
            commit_seq=commit_seq, event_id=event_id, type=type, schema_v=SCHEMA_V,
            stream_id=stream_id, stream_version=stream_version, at=at, scope=scope,
            idempotency_key=idempotency_key, request_digest=request_digest, payload=payload,
        )
    )


def chain_hash(prev_hash: bytes, data: bytes) -> bytes:
    """The chained hash of one event's stored bytes."""
    return blake3(prev_hash + data).digest()


def decode_envelope(data: bytes) -> StoredEnvelope:
    """Decode the envelope of stored bytes (the payload stays raw)."""
    return _envelope_decoder.decode(data)


def decode_payload(envelope: StoredEnvelope) -> msgspec.Struct:
    """Decode an envelope's payload into its typed Struct, upcasting older schema versions."""
    if envelope.schema_v != SCHEMA_V:
        raw: dict[str, Any] = msgspec.json.decode(envelope.payload)
        version = envelope.schema_v
        while version < SCHEMA_V:
            raw = _UPCASTERS[(envelope.type, version)](raw)
            version += 1
        return msgspec.convert(raw, EVENT_TYPES[envelope.type])
    return _payload_decoders[envelope.type].decode(envelope.payload)


def register_upcaster(
    type_name: str, from_version: int
) -> Callable[[Callable[[dict[str, Any]], dict[str, Any]]], Callable[[dict[str, Any]], dict[str, Any]]]:
    """Register a function that lifts a payload of ``type_name`` from ``from_version`` by one."""

    def register(fn: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
        _UPCASTERS[(type_name, from_version)] = fn
        return fn

    return register
