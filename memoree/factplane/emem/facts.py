"""The fact shape, its canonical CBOR, and its content id (fact_cid).

A fact is one of three tagged structs (``kind`` = ``primary``,
``derivative`` or ``absence``) whose field order is part of the hash.
``fact_cid = base32(blake3(cbor(fact)))`` over the full 32 bytes (52
characters); the same 32 bytes are the fact's batch Merkle leaf. The hash
covers ``signer`` and ``signed_at``, so a fact_cid names one signed
attestation, not an observation.

Absences are signed "we don't have this here" facts. Their body (bytes) is
emem's ``NegativeFact``; their JSON view follows the OpenAPI: ``value: null``
and a typed ``absence_reason`` from the OpenAPI enum.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal, NamedTuple

import msgspec
from msgspec import UNSET, UnsetType

from memoree.factplane.emem import b32, cbor, cell64, ids, timefmt
from memoree.factplane.emem.errors import EmemError, InvalidArgument

FACT_CID_BYTES = 32
FACT_CID_CHARS = 52
FACT_CID_PATTERN = re.compile(r"[a-z2-7]{52}")
KEY_BYTES = 32
ABSENCE_CONFIDENCE = 1.0

AbsenceReason = Literal[
    "unavailable_capability",
    "outside_coverage",
    "archetype_seed_unavailable",
    "gpu_unavailable",
    "upstream_error",
    "upstream_timeout",
]
ABSENCE_REASONS: tuple[str, ...] = AbsenceReason.__args__  # type: ignore[attr-defined]
# In the OpenAPI enum, but a transport failure is a skip note, never a signed absence (§5.4).
TRANSIENT_ABSENCE_REASONS = frozenset({"upstream_error", "upstream_timeout"})

# Unsigned keys recall JSON adds beside a fact; dropped before rebuilding the body.
JSON_ENRICHMENT_KEYS = frozenset(
    {
        "fact_cid",
        "memory_token",
        "signer_pubkey_b32",
        "provenance",
        "band_metadata",
        "value_decoded",
        "value_verbatim",
        "observed_at",
        "absence_reason",
        "reason_text",
        "receipt",
    }
)


class Source(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    scheme: str
    id: str
    cid: str | UnsetType = UNSET
    hash: bytes | UnsetType = UNSET  # SHA-256 of the source bytes
    captured_at: str | UnsetType = UNSET
    url: str | UnsetType = UNSET

    def __post_init__(self) -> None:
        if self.hash is not UNSET:
            _check_width(self.hash, 32, "Source.hash")


class Derivation(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    fn_key: str
    args: Any | UnsetType = UNSET


class Uncertainty(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    family: str
    params: Any


class ServedVia(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    tier: str
    model: str
    device: str
    fallback_reason: str | UnsetType = UNSET
    model_blake2b_hex: str | UnsetType = UNSET


class _FactBase(
    msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True, tag_field="kind"
):
    def __post_init__(self) -> None:
        cell64.validate(self.cell)  # type: ignore[attr-defined]
        _check_confidence(self.confidence)  # type: ignore[attr-defined]
        # confidence is an f32 on the wire; hold the f32 value so decode(encode(f)) == f.
        confidence = cbor.round_to_f32(float(self.confidence))  # type: ignore[attr-defined]
        msgspec.structs.force_setattr(self, "confidence", confidence)
        _check_width(self.signer, KEY_BYTES, "signer")  # type: ignore[attr-defined]
        timefmt.check_utc_second(self.signed_at)  # type: ignore[attr-defined]


class PrimaryFact(_FactBase, kw_only=True, tag="primary"):
    cell: str
    band: str
    tslot: int
    value: Any
    unit: str | UnsetType = UNSET
    confidence: float
    uncertainty: Uncertainty | UnsetType = UNSET
    sources: list[Source]
    derivation: Derivation
    privacy_class: str
    schema_cid: str
    signer: bytes
    signed_at: str
    served_via: ServedVia | UnsetType = UNSET

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_u64(self.tslot, "tslot")


class DerivativeFact(_FactBase, kw_only=True, tag="derivative"):
    cell: str
    band: str
    tslot_window: tuple[int, int]
    op: str
    parents: list[str]
    value: Any
    confidence: float
    derivation: Derivation
    schema_cid: str
    signer: bytes
    signed_at: str

    def __post_init__(self) -> None:
        super().__post_init__()
        for tslot in self.tslot_window:
            _check_u64(tslot, "tslot_window")


class AbsenceFact(_FactBase, kw_only=True, tag="absence"):
    cell: str
    band: str
    tslot: int
    reason_cid: str
    confidence: float
    sources: list[Source]
    schema_cid: str
    signer: bytes
    signed_at: str

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_u64(self.tslot, "tslot")


Fact = PrimaryFact | DerivativeFact | AbsenceFact


class Absence(NamedTuple):
    """An absence fact with the reason it carries (the text is what reason_cid hashes)."""

    fact: AbsenceFact
    absence_reason: str
    reason_text: str


def _check_width(data: object, width: int, what: str) -> None:
    if not isinstance(data, bytes) or len(data) != width:
        raise InvalidArgument(f"{what} must be {width} bytes")


def _check_u64(value: object, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 64:
        raise InvalidArgument(f"{what} must be an unsigned 64-bit integer")


def _check_confidence(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument("confidence must be a number")
    if not math.isfinite(value):
        raise InvalidArgument("confidence must be finite")


def fact_cbor(fact: Fact) -> bytes:
    """The canonical CBOR body: declaration order, ``kind`` first, ``confidence`` as f32."""
    wire = msgspec.structs.replace(fact, confidence=cbor.F32(fact.confidence))
    return cbor.encode(wire)


def fact_digest(fact: Fact) -> bytes:
    """blake3 of the fact's CBOR: the 32-byte digest that is also its Merkle leaf."""
    return ids.blake3_digest(fact_cbor(fact))


def fact_cid(fact: Fact) -> str:
    """The fact's 52-character content id."""
    return b32.encode(fact_digest(fact))


def fact_cid_of_cbor(body: bytes) -> str:
    """The content id of stored CBOR bytes, without decoding them."""
    return b32.encode(ids.blake3_digest(body))


def is_fact_cid(text: object) -> bool:
    """True for a well-formed 52-character fact_cid."""
    try:
        parse_fact_cid(text)  # type: ignore[arg-type]
    except EmemError:
        return False
    return True


def parse_fact_cid(text: str) -> bytes:
    """The 32-byte digest (Merkle leaf) a fact_cid spells; refuses any other shape."""
    if not isinstance(text, str) or FACT_CID_PATTERN.fullmatch(text) is None:
        raise InvalidArgument(f"fact_cid must match [a-z2-7]{{{FACT_CID_CHARS}}}, got {text!r}")
    return b32.decode_exact(text, FACT_CID_BYTES, what="fact_cid")


def fact_from_cbor(body: bytes) -> Fact:
    """Rebuild a fact from its stored CBOR, refusing bytes it would not re-emit exactly."""
    fact = fact_from_builtins(cbor.decode_canonical(body))
    if fact_cbor(fact) != bytes(body):
        raise InvalidArgument("CBOR does not round-trip through the fact shape")
    return fact


def fact_from_builtins(obj: dict[str, Any]) -> Fact:
    """Build a fact from decoded CBOR or recall JSON (enrichment keys are dropped).

    ``signer`` may be 32 ints or a base32 string; ``Source.hash`` 32 ints.
    Ints and floats keep their types, which the fact_cid depends on.
    """
    if not isinstance(obj, dict):
        raise InvalidArgument("a fact must be a map")
    body = {key: value for key, value in obj.items() if key not in JSON_ENRICHMENT_KEYS}
    if body.get("kind") == "absence" and body.get("value", UNSET) is None:
        del body["value"]  # the OpenAPI view's value: null is not part of the body
    body = _without_null_optionals(body, _FACT_TYPES.get(body.get("kind")))
    if "signer" in body:
        body["signer"] = _bytes_from_wire(body["signer"], "signer")
    if isinstance(body.get("sources"), list):
        body["sources"] = [_source_from_wire(source) for source in body["sources"]]
    for name, struct_type in (("derivation", Derivation), ("served_via", ServedVia)):
        body[name] = _without_null_optionals(body.get(name, UNSET), struct_type)
    body = {key: value for key, value in body.items() if value is not UNSET}
    try:
        return msgspec.convert(body, Fact)
    except msgspec.ValidationError as exc:
        raise InvalidArgument(f"not a fact: {exc}") from None


_FACT_TYPES: dict[Any, type[msgspec.Struct]] = {
    "primary": PrimaryFact,
    "derivative": DerivativeFact,
    "absence": AbsenceFact,
}


def _without_null_optionals(obj: Any, struct_type: type[msgspec.Struct] | None) -> Any:
    # serde reads JSON null for an Option field as None, which is then omitted
    # from the CBOR; only required fields (like `value`) keep a literal null.
    if not isinstance(obj, dict) or struct_type is None:
        return obj
    optional = {f.name for f in msgspec.structs.fields(struct_type) if f.default is UNSET}
    return {key: value for key, value in obj.items() if not (value is None and key in optional)}


def _source_from_wire(source: Any) -> Any:
    source = _without_null_optionals(source, Source)
    if isinstance(source, dict) and "hash" in source:
        return {**source, "hash": _bytes_from_wire(source["hash"], "Source.hash")}
    return source


def _bytes_from_wire(value: Any, what: str) -> bytes:
    if isinstance(value, str):
        return b32.decode(value)
    if isinstance(value, list) and all(
        isinstance(byte, int) and not isinstance(byte, bool) and 0 <= byte <= 255 for byte in value
    ):
        return bytes(value)
    raise InvalidArgument(f"{what} must be a list of byte values or a base32 string")


def absence_reason_text(reason: str, detail: str) -> str:
    """The reason text an absence's reason_cid hashes: ``"<reason>: <detail>"``."""
    return f"{reason}: {detail}" if detail else reason


def absence_reason_of(reason_text: str) -> str | None:
    """The OpenAPI absence_reason a reason text starts with, if any."""
    prefix = reason_text.split(":", 1)[0].strip()
    return prefix if prefix in ABSENCE_REASONS else None


def absence_fact(
    *,
    cell: str,
    band: str,
    tslot: int,
    reason: str,
    detail: str,
    sources: list[Source],
    schema_cid: str,
    signer: bytes,
    signed_at: str,
) -> Absence:
    """Build a signable absence with a typed reason and confidence 1.0.

    Only an upstream that *answered* "no data" earns an absence; transient
    reasons (timeout, upstream error) are refused because they are skips.
    """
    if reason not in ABSENCE_REASONS:
        raise InvalidArgument(f"absence_reason must be one of {ABSENCE_REASONS}, got {reason!r}")
    if reason in TRANSIENT_ABSENCE_REASONS:
        raise InvalidArgument(f"{reason} is a transient failure: emit a skip note, not an absence")
    text = absence_reason_text(reason, detail)
    fact = AbsenceFact(
        cell=cell,
        band=band,
        tslot=tslot,
        reason_cid=ids.reason_cid(text),
        confidence=ABSENCE_CONFIDENCE,
        sources=sources,
        schema_cid=schema_cid,
        signer=signer,
        signed_at=signed_at,
    )
    return Absence(fact, reason, text)


def fact_json(fact: Fact, *, reason_text: str | None = None) -> dict[str, Any]:
    """The recall JSON view (OpenAPI ``Fact`` plus unsigned enrichments).

    Body fields keep declaration order; ``signer`` is a base32 string (keys
    are base32 on the wire); ``Source.hash`` stays a list of ints. An absence
    gets ``value: null`` and, when its reason text names one, ``absence_reason``.
    """
    view: dict[str, Any] = {"kind": type(fact).__struct_config__.tag}
    for name in fact.__struct_fields__:
        value = getattr(fact, name)
        if value is not UNSET:
            view[name] = _json_value(value)
    view["confidence"] = cbor.f32_display(fact.confidence)
    signer_b32 = b32.encode(fact.signer)
    view["signer"] = signer_b32
    cid = fact_cid(fact)
    view["fact_cid"] = cid
    view["signer_pubkey_b32"] = signer_b32
    view["memory_token"] = ids.fact_token(fact.cell, cid)
    if isinstance(fact, AbsenceFact):
        view["value"] = None
        reason = absence_reason_of(reason_text) if reason_text is not None else None
        if reason is not None:
            view["absence_reason"] = reason
        if reason_text is not None:
            view["reason_text"] = reason_text
    return view


def _json_value(value: Any) -> Any:
    if isinstance(value, msgspec.Struct):
        return {
            name: _json_value(getattr(value, name))
            for name in value.__struct_fields__
            if getattr(value, name) is not UNSET
        }
    if isinstance(value, bytes):
        return list(value)
    if isinstance(value, (list, tuple)):
        return [_json_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _json_value(item) for key, item in value.items()}
    return value
