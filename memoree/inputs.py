"""Typed inputs of every protocol operation, and the byte-bound checks msgspec cannot express.

Every input Struct forbids unknown fields at every level. ``check_*`` helpers enforce the
protocol's UTF-8 byte bounds and non-empty-after-trim rules and raise ``InvalidRequest`` with a
message that names the field.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import msgspec

from memoree import limits
from memoree.errors import InvalidRequest

__all__ = [
    "ArtifactForgetInput",
    "ArtifactGetInput",
    "ArtifactHistoryInput",
    "ArtifactPutInput",
    "ArtifactReviseInput",
    "Base64ContentIn",
    "ClaimAssertInput",
    "ClaimGetInput",
    "ClaimHistoryInput",
    "ClaimRetractInput",
    "ClaimReviseInput",
    "ClaimType",
    "EmptyInput",
    "EvidenceLocator",
    "InstructionsInput",
    "TextContentIn",
    "check_id",
    "check_optional_text",
    "check_text",
]

ClaimType = Literal["fact", "decision", "constraint", "preference", "procedure", "observation"]
DEFAULT_MEDIA_TYPE = "text/plain; charset=utf-8"


class _Input(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    pass


class EmptyInput(_Input, kw_only=True):
    """Operations that take no input still require an empty object."""


class TextContentIn(msgspec.Struct, tag="text", tag_field="type", forbid_unknown_fields=True):
    data: str


class Base64ContentIn(msgspec.Struct, tag="base64", tag_field="type", forbid_unknown_fields=True):
    data: str


ArtifactContent = TextContentIn | Base64ContentIn


class EvidenceLocator(_Input, kw_only=True):
    artifact_id: str
    revision_id: str
    start_byte: int | None = None
    end_byte: int | None = None


class InstructionsInput(_Input, kw_only=True):
    format: Literal["markdown", "json", "agents-md", "claude-md"] = "markdown"


class ArtifactPutInput(_Input, kw_only=True):
    kind: str
    title: str
    media_type: str = DEFAULT_MEDIA_TYPE
    content: ArtifactContent
    provenance: dict[str, Any] = {}
    actor: str | None = None


class ArtifactGetInput(_Input, kw_only=True):
    artifact_id: str
    revision_id: str | None = None
    include_content: bool = True


class ArtifactReviseInput(_Input, kw_only=True):
    artifact_id: str
    if_revision: str
    title: str | None = None
    media_type: str | None = None
    content: ArtifactContent
    provenance: dict[str, Any] = {}
    actor: str | None = None


class ArtifactHistoryInput(_Input, kw_only=True):
    artifact_id: str
    limit: int = limits.DEFAULT_HISTORY_ITEMS
    before_revision_number: int | None = None


class ArtifactForgetInput(_Input, kw_only=True):
    artifact_id: str
    reason: str
    actor: str | None = None


class ClaimAssertInput(_Input, kw_only=True):
    claim_type: ClaimType
    statement: str
    confidence: float | None = None
    evidence: list[EvidenceLocator] = []
    valid_from: str | None = None
    valid_until: str | None = None
    actor: str | None = None


class ClaimGetInput(_Input, kw_only=True):
    claim_id: str
    revision_id: str | None = None


class ClaimHistoryInput(_Input, kw_only=True):
    claim_id: str
    limit: int = limits.DEFAULT_HISTORY_ITEMS
    before_revision_number: int | None = None


class ClaimReviseInput(_Input, kw_only=True):
    claim_id: str
    if_revision: str
    statement: str
    confidence: float | None = None
    evidence: list[EvidenceLocator] = []
    actor: str | None = None


class ClaimRetractInput(_Input, kw_only=True):
    claim_id: str
    reason: str
    actor: str | None = None


def utf8_len(text: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidRequest("text must be valid Unicode (lone surrogates are not allowed)") from None


def check_text(name: str, value: str, max_bytes: int) -> str:
    """A required string: non-empty after trimming and at most ``max_bytes`` UTF-8 bytes."""
    if not value.strip():
        raise InvalidRequest(f"{name} must not be empty")
    size = utf8_len(value)
    if size > max_bytes:
        raise InvalidRequest(f"{name} must not exceed {max_bytes} bytes (got {size})")
    return value


def check_optional_text(name: str, value: str | None, max_bytes: int) -> str | None:
    return None if value is None else check_text(name, value, max_bytes)


_CONTROL_CHARS = re.compile("[\x00-\x1f\x7f]")


def check_id(name: str, value: str) -> str:
    """An opaque identifier: non-empty, bounded, no control characters."""
    check_text(name, value, limits.MAX_ENTITY_ID_BYTES)
    if _CONTROL_CHARS.search(value) or value != value.strip():
        raise InvalidRequest(f"{name} is not a valid identifier")
    return value


def check_json_object(name: str, value: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    size = len(msgspec.json.encode(value))
    if size > max_bytes:
        raise InvalidRequest(f"{name} must not exceed {max_bytes} bytes as serialized JSON (got {size})")
    return value


def check_limit(name: str, value: int, maximum: int, minimum: int = 1) -> int:
    if not minimum <= value <= maximum:
        raise InvalidRequest(f"{name} must be between {minimum} and {maximum}")
    return value


def check_cursor(name: str, value: int | None) -> int | None:
    if value is not None and value <= 0:
        raise InvalidRequest(f"{name} must be greater than 0")
    return value


# Relations and conflict cases (relation.put, relation.list, conflict.list).

EntityType = Literal["artifact", "claim"]
RelationType = Literal["derived_from", "supports", "contradicts", "supersedes", "references", "duplicates"]
HorizonName = Literal["ambient", "workspace", "personal"]


class RelationPutInput(_Input, kw_only=True):
    source_type: EntityType
    source_id: str
    relation: RelationType
    target_type: EntityType
    target_id: str
    metadata: dict[str, Any] = {}


class RelationListInput(_Input, kw_only=True):
    entity_type: EntityType
    entity_id: str
    direction: Literal["incoming", "outgoing", "both"] = "both"
    relation: RelationType | None = None
    horizon: HorizonName = "ambient"
    reason: str | None = None
    limit: int = limits.MAX_RELATION_LIST_ITEMS
    before_commit_seq: int | None = None


class ConflictListInput(_Input, kw_only=True):
    horizon: HorizonName = "ambient"
    reason: str | None = None
    include_stale: bool = False
    limit: int = limits.MAX_CONFLICT_LIST_ITEMS
    before_case_sequence: int | None = None


def check_reason(value: str | None) -> str | None:
    """A read's broadening reason: only its size is checked here (the service requires it non-blank
    for broadened horizons, and an ambient read accepts and ignores any reason)."""
    if value is not None and utf8_len(value) > limits.MAX_REASON_BYTES:
        raise InvalidRequest(f"reason must not exceed {limits.MAX_REASON_BYTES} bytes")
    return value


__all__ += [
    "ConflictListInput", "EntityType", "HorizonName", "RelationListInput", "RelationPutInput",
    "RelationType", "check_reason",
]


# Retrieval (search, memory.recall, context.build, citation.get, memory.probe, memory.retrieve).


class RecencyInput(_Input, kw_only=True):
    """The bounded recency nudge (`bounded_recency_v1`); disabling it gives pure lexical order."""

    enabled: bool = True


class SemanticInput(_Input, kw_only=True):
    """The dense channel (`local_dense_context_v3`); disabling it gives the lexical answer."""

    enabled: bool = True


class SearchInput(_Input, kw_only=True):
    query: str
    horizon: HorizonName = "ambient"
    reason: str | None = None
    limit: int = 10
    include_historical: bool = False
    min_commit_seq: int | None = None
    recency: RecencyInput = msgspec.field(default_factory=RecencyInput)
    semantic: SemanticInput = msgspec.field(default_factory=SemanticInput)


class RecallInput(_Input, kw_only=True):
    query: str
    horizon: HorizonName = "ambient"
    reason: str | None = None
    max_claims: int = 5
    max_artifact_refs: int = 3
    max_excerpt_bytes: int = 320
    max_candidate_claims: int = 0
    max_candidate_artifact_refs: int = 0
    min_commit_seq: int | None = None
    recency: RecencyInput = msgspec.field(default_factory=RecencyInput)
    semantic: SemanticInput = msgspec.field(default_factory=SemanticInput)


class ContextBuildInput(SearchInput, kw_only=True):
    max_bytes: int = 16384


class CitationGetInput(_Input, kw_only=True):
    citation: str
    max_bytes: int = 8192


class ProbeInput(_Input, kw_only=True):
    query: str
    original_query: str | None = None
    horizon: HorizonName = "ambient"
    reason: str | None = None
    max_leads: int = 8
    min_commit_seq: int | None = None
    recency: RecencyInput = msgspec.field(default_factory=RecencyInput)
    semantic: SemanticInput = msgspec.field(default_factory=SemanticInput)


__all__ += [
    "CitationGetInput", "ContextBuildInput", "ProbeInput", "RecallInput", "RecencyInput",
    "SearchInput", "SemanticInput",
]


# The signed fact plane (emem): band.register, band.list, fact.attest, fact.recall,
# receipt.verify, fact.identity. The emem scope four-tuple is always given explicitly here, never
# derived from the ambient context.

ProvenanceClassName = Literal["direct_sensor", "deterministic_index", "estimator",
                              "attested_execution", "model_output", "human_curated", "unclassified"]
TempoName = Literal["static", "slow", "composite_16day", "composite_8day", "medium", "fast",
                    "ultra_fast"]


class FactScopeInput(_Input, kw_only=True):
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    org_id: str | None = None


class FactSourceInput(_Input, kw_only=True):
    scheme: str
    id: str
    url: str | None = None
    captured_at: str | None = None


class BandFileInput(_Input, kw_only=True):
    """A CSV file band: ``lat,lng,value`` rows; recall reads the nearest sample within ``radius_m``."""

    csv: str
    dataset_id: str
    radius_m: float = 100.0
    captured_at: str | None = None


class BandRegisterInput(_Input, kw_only=True):
    band: str
    unit: str
    tempo: TempoName = "static"
    provenance_class: ProvenanceClassName = "human_curated"
    description: str | None = None
    file: BandFileInput | None = None
    actor: str | None = None


class FactAttestInput(_Input, kw_only=True):
    cell: str
    band: str
    value: int | float | str | list[int | float]
    tslot: int | None = None
    observed_at: str | None = None
    unit: str | None = None
    confidence: float = 1.0
    source: FactSourceInput | None = None
    scope: FactScopeInput | None = None
    actor: str | None = None


class FactRecallInput(_Input, kw_only=True):
    """emem's RecallReq (``band`` is merged first into ``bands``; ``bands: []`` means every band)."""

    cell: str
    band: str | None = None
    bands: list[str] | None = None
    tslot: int | None = None
    as_of_tslot: int | None = None
    as_of_signed_at: str | None = None
    scope: FactScopeInput | None = None
    provenance: list[ProvenanceClassName] | None = None
    deterministic: bool | None = None


class ReceiptVerifyInput(_Input, kw_only=True):
    receipt: dict[str, Any]
    pubkey_b32: str | None = None


__all__ += [
    "BandFileInput", "BandRegisterInput", "FactAttestInput", "FactRecallInput", "FactScopeInput",
    "FactSourceInput", "ProvenanceClassName", "ReceiptVerifyInput", "TempoName",
]


class BatchInput(_Input, kw_only=True):
    """``batch``: complete mutation requests (each with its own context and idempotency key)."""

    requests: list[msgspec.Raw]


class BackupCreateInput(_Input, kw_only=True):
    """``backup.create``: an absolute destination that must not exist yet."""

    destination: str


class RetrieveInput(_Input, kw_only=True):
    query: str
    reformulation: str | None = None
    horizon: HorizonName = "ambient"
    reason: str | None = None
    max_claims: int = 5
    max_artifact_refs: int = 3
    max_excerpt_bytes: int = 320
    max_recovery_leads: int = 8
    max_recovery_bytes: int = 12288
    min_commit_seq: int | None = None
    recency: RecencyInput = msgspec.field(default_factory=RecencyInput)
    semantic: SemanticInput = msgspec.field(default_factory=SemanticInput)
    profile: bool = False


__all__ += ["RetrieveInput"]


class ArtifactPurgeInput(_Input, kw_only=True):
    """``artifact.purge``: erase an artifact's bytes from the CAS and the index (reason required)."""

    artifact_id: str
    reason: str
    actor: str | None = None


# Browsing what is stored (artifact.list, claim.list): newest first within the horizon.

ListStatus = Literal["active", "forgotten", "any"]
ClaimListStatus = Literal["current", "active", "conflicted", "superseded", "retracted", "any"]
ProvenanceValue = str | int | bool


class ArtifactListInput(_Input, kw_only=True):
    """``artifact.list``: artifacts whose owner is visible at the horizon, newest revision first."""

    horizon: HorizonName = "ambient"
    reason: str | None = None
    kind: str | None = None
    title: str | None = None
    provenance: dict[str, ProvenanceValue] = {}
    status: ListStatus = "active"
    limit: int = limits.DEFAULT_LIST_ITEMS
    before_commit_seq: int | None = None


class ClaimListInput(_Input, kw_only=True):
    """``claim.list``: claims whose owner is visible at the horizon, newest revision first."""

    horizon: HorizonName = "ambient"
    reason: str | None = None
    claim_type: ClaimType | None = None
    status: ClaimListStatus = "current"
    artifact_id: str | None = None
    actor: str | None = None
    limit: int = limits.DEFAULT_LIST_ITEMS
    before_commit_seq: int | None = None


__all__ += ["ArtifactListInput", "ClaimListInput"]


class ArtifactAppendInput(_Input, kw_only=True):
    """``artifact.append``: a new revision holding the current bytes followed by ``content``."""

    artifact_id: str
    if_revision: str
    content: ArtifactContent
    title: str | None = None
    provenance: dict[str, Any] | None = None
    actor: str | None = None


__all__ += ["ArtifactAppendInput"]
