"""Receipt preimages (v0, v1, v2), digests, Ed25519 signing and diagnostic verification.

A receipt binds what a responder served. New receipts are signed under
``preimage_version`` 2: a domain-separated segment stream (see
:mod:`memoree.factplane.emem.preimage`) whose last segment 0x0b always binds the
Merkle proof for ``fact_cids[0]``, or a signed ABSENT marker when there is
none, so a proof stripped in transit cannot pass for "never had one".
Versions 1 (no 0x0b) and 0 (``|``-joined text) are verify-only. Ed25519
signs the 32-byte blake3 digest of the stream.

Segment order: 0x01 request_id, 0x02 served_at, 0x03 scope, 0x04 as_of,
0x05 edges, 0x06 manifest (source_versions), 0x07 primitive, 0x08 cells,
0x09 fact_cids, 0x0a field, 0x0b merkle. 0x03-0x06 and 0x0a appear only when
non-empty; each carries the 64-char hex of a blake3 digest as ASCII.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from memoree.factplane.emem import b32, cbor, preimage, signing, timefmt
from memoree.factplane.emem.batch_merkle import MerkleProof, check_proof, proof_from_json, proof_to_json
from memoree.factplane.emem.errors import BadMerkleProof, BadSignature, EmemError, InvalidArgument
from memoree.factplane.emem.facts import parse_fact_cid
from memoree.factplane.emem.ids import blake3_digest

if TYPE_CHECKING:
    from nacl.signing import SigningKey

CURRENT_PREIMAGE_VERSION = 2
PREIMAGE_VERSIONS = (0, 1, 2)
RECEIPT_DOMAIN = "receipt"
MERKLE_DOMAIN = "merkle"
FIELD_DOMAIN = "field"

SEG_REQUEST_ID = 0x01
SEG_SERVED_AT = 0x02
SEG_SCOPE = 0x03
SEG_AS_OF = 0x04
SEG_EDGES = 0x05
SEG_MANIFEST = 0x06
SEG_PRIMITIVE = 0x07
SEG_CELLS = 0x08
SEG_FACT_CIDS = 0x09
SEG_FIELD = 0x0A
SEG_MERKLE = 0x0B

MERKLE_SEG_ROOT = 1
MERKLE_SEG_LEAF_INDEX = 2
MERKLE_SEG_PATH = 3
MERKLE_SEG_VERSION = 4
MERKLE_SEG_ABSENT = 5

SCOPE_FIELDS = ("user_id", "agent_id", "run_id", "org_id")

REASON_SIGNATURE_INVALID = "signature_invalid"
REASON_MERKLE_PROOF_INVALID = "merkle_proof_invalid"
REASON_RESHAPED = "receipt_reshaped_after_signing"


class Scope(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    org_id: str | None = None

    def is_empty(self) -> bool:
        return all(getattr(self, name) is None for name in SCOPE_FIELDS)


class AsOf(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    valid_time: int | None = None
    transaction_time: str | None = None  # kept raw; normalised only inside the digest

    def is_empty(self) -> bool:
        return self.valid_time is None and self.transaction_time is None


class FieldRef(msgspec.Struct, kw_only=True, frozen=True):
    aoi_cid: str
    derivation_cid: str


class Receipt(msgspec.Struct, kw_only=True, frozen=True):
    """A receipt in Python types (keys and signature as bytes)."""

    request_id: str
    served_at: str
    primitive: str
    cells: tuple[str, ...] = ()
    fact_cids: tuple[str, ...] = ()
    schema_cid: str = ""
    registry_cid: str = ""
    source_versions: dict[str, str] = msgspec.field(default_factory=dict)
    scope: Scope | None = None
    as_of: AsOf | None = None
    edge_cids: tuple[str, ...] = ()
    field: FieldRef | None = None
    merkle_proof: MerkleProof | None = None
    intent: str | None = None
    cost: dict[str, Any] | None = None  # unsigned; passed through verbatim
    preimage_version: int = 0
    responder: bytes = b""
    responder_key_epoch: int = 0
    signature: bytes = b""


class ReceiptVerdict(NamedTuple):
    """What verification found. ``failed_check`` names the first check that failed."""

    valid: bool
    signature_valid: bool
    merkle_proof_valid: bool | None  # None: the receipt carries no proof
    reason: str | None  # signature_invalid | merkle_proof_invalid | receipt_reshaped_after_signing
    failed_check: str | None  # public_key | preimage_version | signature | merkle_proof
    failure_detail: str | None
    preimage_version: int
    digest_hex: str | None
    signer_pubkey_b32: str | None


def _hex_digest(data: bytes) -> str:
    return blake3_digest(data).hex()


def scope_digest_hex(scope: Scope | None) -> str | None:
    """blake3 hex of the CBOR map of the scope fields that are set; None for no scope."""
    if scope is None or scope.is_empty():
        return None
    fields = {
        name: getattr(scope, name) for name in SCOPE_FIELDS if getattr(scope, name) is not None
    }
    return _hex_digest(cbor.encode(fields))


def as_of_digest_hex(as_of: AsOf | None) -> str | None:
    """blake3 hex of ``{valid_time?, transaction_time?}``; transaction_time normalised to ``Z``."""
    if as_of is None or as_of.is_empty():
        return None
    bound: dict[str, Any] = {}
    if as_of.valid_time is not None:
        bound["valid_time"] = as_of.valid_time
    if as_of.transaction_time is not None:
        bound["transaction_time"] = timefmt.normalise_transaction_time(as_of.transaction_time)
    return _hex_digest(cbor.encode(bound))


def edges_digest_hex(edge_cids: Sequence[str]) -> str | None:
    """blake3 hex of the CBOR array of edge cids, sorted; None when there are none."""
    if not edge_cids:
        return None
    return _hex_digest(cbor.encode(sorted(edge_cids, key=lambda cid: cid.encode("utf-8"))))


def manifest_digest_hex(source_versions: Mapping[str, str]) -> str | None:
    """blake3 hex of the CBOR map of source_versions in bytewise key order."""
    if not source_versions:
        return None
    return _hex_digest(cbor.encode(cbor.sorted_map(source_versions)))


def field_digest_hex(field: FieldRef | None) -> str | None:
    if field is None:
        return None
    return _hex_digest(
        preimage.domain(FIELD_DOMAIN)
        + preimage.segment(1, field.aoi_cid)
        + preimage.segment(2, field.derivation_cid)
    )


def merkle_binding_v2(proof: MerkleProof | None) -> bytes:
    """The 32-byte digest segment 0x0b carries: the proof, or the signed ABSENT marker."""
    stream = preimage.domain(MERKLE_DOMAIN)
    if proof is None:
        return blake3_digest(stream + preimage.segment(MERKLE_SEG_ABSENT, b""))
    if not 0 <= proof.version <= 0xFF:
        raise InvalidArgument("merkle_proof.version must fit a byte")
    return blake3_digest(
        stream
        + preimage.segment(MERKLE_SEG_ROOT, proof.root)
        + preimage.segment(MERKLE_SEG_LEAF_INDEX, preimage.u32le(proof.leaf_index))
        + preimage.segment(MERKLE_SEG_PATH, b"".join(proof.path))
        + preimage.segment(MERKLE_SEG_VERSION, bytes((proof.version,)))
    )


def preimage_stream_v1(
    *,
    request_id: str,
    served_at: str,
    primitive: str,
    cells: Sequence[str],
    fact_cids: Sequence[str],
    scope_hex: str | None = None,
    as_of_hex: str | None = None,
    edges_hex: str | None = None,
    manifest_hex: str | None = None,
    field_hex: str | None = None,
) -> bytes:
    """The v1 segment stream from already-computed optional digests."""
    parts = [
        preimage.domain(RECEIPT_DOMAIN),
        preimage.segment(SEG_REQUEST_ID, request_id),
        preimage.segment(SEG_SERVED_AT, served_at),
    ]
    for tag, hex_digest in (
        (SEG_SCOPE, scope_hex),
        (SEG_AS_OF, as_of_hex),
        (SEG_EDGES, edges_hex),
        (SEG_MANIFEST, manifest_hex),
    ):
        if hex_digest:
            parts.append(preimage.segment(tag, hex_digest))
    parts += [
        preimage.segment(SEG_PRIMITIVE, primitive),
        preimage.list_segment(SEG_CELLS, cells),
        preimage.list_segment(SEG_FACT_CIDS, fact_cids),
    ]
    if field_hex:
        parts.append(preimage.segment(SEG_FIELD, field_hex))
    return b"".join(parts)


def preimage_stream_v2(*, merkle_hex: str, **fields: Any) -> bytes:
    """The v2 stream: the v1 stream plus segment 0x0b, which is always present."""
    return preimage_stream_v1(**fields) + preimage.segment(SEG_MERKLE, merkle_hex)


def preimage_text_v0(
    *,
    request_id: str,
    served_at: str,
    primitive: str,
    cells: Sequence[str],
    fact_cids: Sequence[str],
    scope_hex: str | None = None,
    as_of_hex: str | None = None,
    edges_hex: str | None = None,
    manifest_hex: str | None = None,
) -> bytes:
    """The legacy ``|``-joined preimage; every list item carries a trailing comma."""
    head = [request_id, served_at]
    head += [h for h in (scope_hex, as_of_hex, edges_hex, manifest_hex) if h]
    text = (
        "|".join([*head, primitive])
        + "|"
        + "".join(f"{cell}," for cell in cells)
        + "|"
        + "".join(f"{cid}," for cid in fact_cids)
    )
    return text.encode("utf-8")


def _version_of(receipt: Receipt, version: int | None) -> int:
    chosen = receipt.preimage_version if version is None else version
    if chosen not in PREIMAGE_VERSIONS:
        raise InvalidArgument(f"unknown preimage_version {chosen!r}")
    return chosen


def receipt_preimage(receipt: Receipt, version: int | None = None) -> bytes:
    """The exact bytes hashed under ``version`` (default: the receipt's own field)."""
    version = _version_of(receipt, version)
    common = {
        "request_id": receipt.request_id,
        "served_at": receipt.served_at,
        "primitive": receipt.primitive,
        "cells": receipt.cells,
        "fact_cids": receipt.fact_cids,
        "scope_hex": scope_digest_hex(receipt.scope),
        "as_of_hex": as_of_digest_hex(receipt.as_of),
        "edges_hex": edges_digest_hex(receipt.edge_cids),
        "manifest_hex": manifest_digest_hex(receipt.source_versions),
    }
    if version == 0:
        return preimage_text_v0(**common)
    common["field_hex"] = field_digest_hex(receipt.field)
    if version == 1:
        return preimage_stream_v1(**common)
    return preimage_stream_v2(merkle_hex=merkle_binding_v2(receipt.merkle_proof).hex(), **common)


def receipt_digest(receipt: Receipt, version: int | None = None) -> bytes:
    """blake3 of the preimage: the 32 bytes Ed25519 signs."""
    return blake3_digest(receipt_preimage(receipt, version))


def sign_receipt(receipt: Receipt, key: SigningKey | bytes, *, key_epoch: int = 0) -> Receipt:
    """Sign under preimage v2 with the node key (SigningKey or 32-byte seed) at ``key_epoch``."""
    if not 0 <= key_epoch <= 0xFFFF_FFFF:
        raise InvalidArgument("key_epoch must be a u32")
    unsigned = msgspec.structs.replace(
        receipt,
        preimage_version=CURRENT_PREIMAGE_VERSION,
        responder=signing.public_key(key),
        responder_key_epoch=key_epoch,
        signature=b"",
    )
    digest = receipt_digest(unsigned)
    return msgspec.structs.replace(unsigned, signature=signing.sign_digest(key, digest))


def _resolve_public_key(receipt: Receipt, override: bytes | str | None) -> bytes:
    if override is None:
        public = receipt.responder
    elif isinstance(override, str):
        public = signing.decode_public_key(override)
    else:
        public = bytes(override)
    if len(public) != signing.PUBLIC_KEY_BYTES:
        raise BadSignature("responder public key must be 32 bytes")
    return public


def _proof_check(receipt: Receipt) -> tuple[bool | None, str | None]:
    proof = receipt.merkle_proof
    if proof is None:
        return None, None
    if not receipt.fact_cids:
        return False, "merkle_proof present but fact_cids is empty"
    try:
        check_proof(parse_fact_cid(receipt.fact_cids[0]), proof)
    except (BadMerkleProof, InvalidArgument) as exc:
        return False, f"merkle_proof for fact_cids[0]: {exc}"
    return True, None


def _reshape_detail(receipt: Receipt, recorded: MerkleProof) -> str:
    changes = []
    if receipt.preimage_version != CURRENT_PREIMAGE_VERSION:
        changes.append(
            f"preimage_version is {receipt.preimage_version or 'absent'}, signed as "
            f"{CURRENT_PREIMAGE_VERSION}"
        )
    if receipt.merkle_proof is None:
        changes.append("merkle_proof was removed")
    elif receipt.merkle_proof != recorded:
        changes.append("merkle_proof differs from the one recorded at signing")
    return "; ".join(changes) or "receipt was reshaped after signing"


def verify_receipt(
    receipt: Receipt,
    *,
    public_key: bytes | str | None = None,
    recorded_proof: MerkleProof | None = None,
) -> ReceiptVerdict:
    """Check signature and proof, and say which check failed.

    ``recorded_proof`` is the proof the responder stored for ``fact_cids[0]``;
    when given and the signature fails, a receipt that verifies again once
    that proof and ``preimage_version: 2`` are restored (and nothing else
    changed) is reported as ``receipt_reshaped_after_signing``. It is still
    invalid. Without it, reshaping cannot be told from forgery.
    """
    version = receipt.preimage_version
    proof_valid, proof_detail = _proof_check(receipt)
    verdict = ReceiptVerdict(
        valid=False,
        signature_valid=False,
        merkle_proof_valid=proof_valid,
        reason=REASON_SIGNATURE_INVALID,
        failed_check=None,
        failure_detail=None,
        preimage_version=version,
        digest_hex=None,
        signer_pubkey_b32=None,
    )
    try:
        public = _resolve_public_key(receipt, public_key)
    except (BadSignature, InvalidArgument) as exc:
        return verdict._replace(failed_check="public_key", failure_detail=str(exc))
    verdict = verdict._replace(signer_pubkey_b32=b32.encode(public))
    if version not in PREIMAGE_VERSIONS:
        detail = f"unknown preimage_version {version!r}"
        return verdict._replace(failed_check="preimage_version", failure_detail=detail)
    digest = receipt_digest(receipt)
    verdict = verdict._replace(digest_hex=digest.hex())
    if not signing.verify_digest(public, digest, receipt.signature):
        verdict = verdict._replace(failed_check="signature")
        if recorded_proof is not None and _verifies_when_restored(receipt, public, recorded_proof):
            detail = _reshape_detail(receipt, recorded_proof)
            return verdict._replace(reason=REASON_RESHAPED, failure_detail=detail)
        detail = f"signature does not verify under preimage v{version}"
        return verdict._replace(failure_detail=detail)
    verdict = verdict._replace(signature_valid=True)
    if proof_valid is False:
        return verdict._replace(
            reason=REASON_MERKLE_PROOF_INVALID,
            failed_check="merkle_proof",
            failure_detail=proof_detail,
        )
    return verdict._replace(valid=True, reason=None)


def _verifies_when_restored(receipt: Receipt, public: bytes, recorded: MerkleProof) -> bool:
    restored = msgspec.structs.replace(
        receipt, merkle_proof=recorded, preimage_version=CURRENT_PREIMAGE_VERSION
    )
    return signing.verify_digest(public, receipt_digest(restored), receipt.signature)


def receipt_to_json(receipt: Receipt) -> dict[str, Any]:
    """The OpenAPI wire shape: responder and signature as base32 strings, proof bytes as ints.

    Optional blocks are omitted when empty; ``preimage_version`` when 0.
    """
    view: dict[str, Any] = {
        "request_id": receipt.request_id,
        "served_at": receipt.served_at,
        "primitive": receipt.primitive,
    }
    if receipt.intent is not None:
        view["intent"] = receipt.intent
    view["cells"] = list(receipt.cells)
    view["fact_cids"] = list(receipt.fact_cids)
    view["schema_cid"] = receipt.schema_cid
    view["registry_cid"] = receipt.registry_cid
    view["source_versions"] = cbor.sorted_map(receipt.source_versions)
    if receipt.merkle_proof is not None:
        view["merkle_proof"] = proof_to_json(receipt.merkle_proof)
    if receipt.scope is not None and not receipt.scope.is_empty():
        view["scope"] = msgspec.to_builtins(receipt.scope)
    if receipt.as_of is not None and not receipt.as_of.is_empty():
        view["as_of"] = msgspec.to_builtins(receipt.as_of)
    if receipt.edge_cids:
        view["edge_cids"] = list(receipt.edge_cids)
    if receipt.field is not None:
        view["field"] = msgspec.to_builtins(receipt.field)
    if receipt.cost is not None:
        view["cost"] = receipt.cost
    responder_b32 = b32.encode(receipt.responder) if receipt.responder else ""
    view["responder"] = responder_b32
    view["responder_pubkey_b32"] = responder_b32
    view["responder_key_epoch"] = receipt.responder_key_epoch
    view["signature"] = b32.encode(receipt.signature) if receipt.signature else ""
    if receipt.preimage_version:
        view["preimage_version"] = receipt.preimage_version
    return view


def receipt_from_json(obj: Any) -> Receipt:
    """Parse a receipt as a client holds it; unknown (unsigned) keys are ignored.

    ``responder``/``signature`` may be base32 strings (OpenAPI) or int arrays
    (emem's serde form); ``responder_pubkey_b32``/``signature_b32`` are
    fallbacks. A missing ``preimage_version`` means 0.
    """
    if not isinstance(obj, dict):
        raise InvalidArgument("a receipt must be a JSON object")
    body = {name: obj[name] for name in Receipt.__struct_fields__ if name in obj}
    body["responder"] = _wire_bytes(
        obj.get("responder") or obj.get("responder_pubkey_b32"), "responder"
    )
    body["signature"] = _wire_bytes(obj.get("signature") or obj.get("signature_b32"), "signature")
    if body.get("merkle_proof") is not None:
        body["merkle_proof"] = proof_from_json(body["merkle_proof"])
    for optional in ("scope", "as_of", "field", "intent", "cost", "merkle_proof"):
        if body.get(optional) is None:
            body.pop(optional, None)
    try:
        return msgspec.convert(body, Receipt)
    except msgspec.ValidationError as exc:
        raise InvalidArgument(f"not a receipt: {exc}") from None


def _wire_bytes(value: Any, what: str) -> bytes:
    if value is None or value == "":
        return b""
    if isinstance(value, str):
        try:
            return b32.decode(value)
        except EmemError:
            raise BadSignature(f"{what} is not valid base32") from None
    if isinstance(value, list) and all(
        isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255 for b in value
    ):
        return bytes(value)
    raise BadSignature(f"{what} must be a base32 string or a list of byte values")
