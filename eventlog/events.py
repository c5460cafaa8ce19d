"""Event payload types: one frozen msgspec Struct per event type, keyed by a stable dotted name.

Names are past tense and never reused, never a Python path. Payloads evolve only by adding fields
with defaults; anything else is a new type (or an upcaster registered in ``codec``). Event structs
do not forbid unknown fields, so an older binary can still read newer records.

A projector derives every id and time it needs from the event (ids are minted by the handler and
recorded here; times come from the envelope's ``at``).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "EVENT_TYPES",
    "ArtifactCreated",
    "ArtifactForgotten",
    "ArtifactPurged",
    "ArtifactRevised",
    "BandFile",
    "BandRegistered",
    "ClaimAsserted",
    "ClaimRetracted",
    "ClaimRevised",
    "EvidenceRef",
    "FactAttestationRecord",
    "FactAttested",
    "FactProofRecord",
    "FactReceiptSeal",
    "FactScope",
    "KeyEpochStarted",
    "RelationAdded",
    "Scope",
    "event_type_name",
]


class Scope(msgspec.Struct, frozen=True, omit_defaults=True):
    """The ambient owner of a write: workspace, project, optional task and component."""

    workspace_id: str
    project_id: str
    task_id: str | None = None
    component: str | None = None


class EvidenceRef(msgspec.Struct, frozen=True, omit_defaults=True):
    """A claim's citation of an artifact revision, optionally a half-open byte span of it."""

    artifact_id: str
    revision_id: str
    start_byte: int | None = None
    end_byte: int | None = None


class _Payload(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    pass


class ArtifactCreated(_Payload, kw_only=True):
    artifact_id: str
    revision_id: str
    kind: str
    title: str
    media_type: str
    blob_hash: str
    size_bytes: int
    provenance: dict[str, Any] = {}
    actor: str | None = None


class ArtifactRevised(_Payload, kw_only=True):
    artifact_id: str
    revision_id: str
    revision_number: int
    previous_revision_id: str
    title: str
    media_type: str
    blob_hash: str
    size_bytes: int
    provenance: dict[str, Any] = {}
    actor: str | None = None


class ArtifactForgotten(_Payload, kw_only=True):
    artifact_id: str
    revision_id: str
    reason: str
    actor: str | None = None


class ClaimAsserted(_Payload, kw_only=True):
    claim_id: str
    revision_id: str
    claim_type: str
    statement: str
    evidence: list[EvidenceRef] = []
    confidence: float | None = None
    valid_from: str | None = None
    valid_until: str | None = None
    actor: str | None = None


class ClaimRevised(_Payload, kw_only=True):
    claim_id: str
    revision_id: str
    revision_number: int
    previous_revision_id: str
    statement: str
    evidence: list[EvidenceRef] = []
    confidence: float | None = None
    actor: str | None = None


class ClaimRetracted(_Payload, kw_only=True):
    claim_id: str
    revision_id: str
    reason: str
    actor: str | None = None


class RelationAdded(_Payload, kw_only=True):
    relation_id: str
    source_type: str
    source_id: str
    relation: str
    target_type: str
    target_id: str
    metadata: dict[str, Any] = {}
    actor: str | None = None


class ArtifactPurged(_Payload, kw_only=True):
    """An artifact's bytes are erased: ``blob_hashes`` lists the CAS objects removed (those no other
    live revision shares). Titles and every other logged field stay in the log."""

    artifact_id: str
    revision_id: str
    reason: str
    blob_hashes: list[str] = []
    actor: str | None = None


class KeyEpochStarted(_Payload, kw_only=True):
    """A node-key epoch begins: its public key (base32) is what later signatures name."""

    epoch: int
    public_key: str
    algorithm: str = "ed25519"


# The signed fact plane (emem): bands and attested facts. See memoree/factplane.py.


class BandFile(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A CSV file band's data, kept in the log itself so a replay (or an auditor) needs nothing else."""

    dataset_id: str
    csv: bytes
    sha256: str
    sample_count: int
    radius_m: float
    captured_at: str | None = None


class BandRegistered(_Payload, kw_only=True):
    """A band (a named, typed reading) becomes known: its unit, tempo and provenance class."""

    band: str
    unit: str
    tempo: str
    provenance_class: str
    source_kind: str  # "attested" (agents attest values) or "file" (materialized from a CSV)
    privacy_class: str = "public"
    description: str | None = None
    file: BandFile | None = None
    actor: str | None = None


class FactScope(msgspec.Struct, frozen=True, omit_defaults=True):
    """emem's multi-tenant four-tuple a fact was written under (an index hint, never signed)."""

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    org_id: str | None = None


class FactAttestationRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The single-fact attestation: batch root, attester key and its epoch, cids, signature."""

    batch_root: bytes
    attester: bytes
    attester_key_epoch: int
    registry_cid: str
    schema_cid: str
    signature: bytes
    preimage_version: int = 1


class FactProofRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The fact's inclusion proof in its attestation batch (empty path for a single fact)."""

    leaf_index: int
    path: list[bytes] = []
    root: bytes
    version: int = 1


class FactReceiptSeal(msgspec.Struct, frozen=True, kw_only=True):
    """What a fact's attestation receipt needs beyond the fact and its proof (it is rebuilt on replay)."""

    request_id: str
    served_at: str
    primitive: str
    source_versions: dict[str, str]
    responder_key_epoch: int
    signature: bytes


class FactAttested(_Payload, kw_only=True):
    """One signed fact (primary or absence), by its exact canonical CBOR bytes.

    ``fact_cid`` is ``base32(blake3(fact_cbor))``; the projector re-derives and checks it, so a
    replay reproduces the exact cid. ``origin`` is ``attested`` (``fact.attest``) or
    ``materialized`` (a recall filled a cold band).
    """

    fact_cid: str
    fact_cbor: bytes
    band: str
    provenance_class: str
    origin: str
    attestation: FactAttestationRecord
    proof: FactProofRecord
    receipt: FactReceiptSeal
    scope: FactScope | None = None
    materializer: str | None = None
    reason_text: str | None = None
    actor: str | None = None


EVENT_TYPES: dict[str, type[msgspec.Struct]] = {
    "artifact.created": ArtifactCreated,
    "artifact.revised": ArtifactRevised,
    "artifact.forgotten": ArtifactForgotten,
    "claim.asserted": ClaimAsserted,
    "claim.revised": ClaimRevised,
    "claim.retracted": ClaimRetracted,
    "relation.added": RelationAdded,
    "key.epoch_started": KeyEpochStarted,
    "artifact.purged": ArtifactPurged,
    "band.registered": BandRegistered,
    "fact.attested": FactAttested,
}

_NAME_BY_TYPE = {cls: name for name, cls in EVENT_TYPES.items()}


def event_type_name(payload: msgspec.Struct) -> str:
    """The stable dotted name of a payload's event type."""
    return _NAME_BY_TYPE[type(payload)]
