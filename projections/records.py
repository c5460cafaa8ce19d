"""The records that reads and mutation acknowledgements return, and their loaders.

``ArtifactRecord`` and ``ClaimRecord`` are the protocol's shapes (spec §1.2); mutation results add
``commit_seq`` and ``created``. Loaders read the entities projection; they never touch the log.
"""

from __future__ import annotations

import base64
from typing import Any, Literal

import msgspec

from memoree.errors import NotFound
from memoree.eventlog.events import EvidenceRef
from memoree.limits import MAX_ENCODED_CONTENT_BYTES

__all__ = [
    "ArtifactMutationResult",
    "ArtifactRecord",
    "ClaimMutationResult",
    "ClaimRecord",
    "OwnerContext",
    "TextContent",
    "Base64Content",
    "artifact_record",
    "claim_record",
    "content_for_output",
]

RETENTION_NOTICE = (
    "Retrieval is disabled for this artifact. Its bytes are retained on disk: exact reads by id "
    "still return them, and claims may keep citing them. Use `memoree purge` to erase the bytes."
)


class OwnerContext(msgspec.Struct, omit_defaults=True):
    """The context that owns an entity; ``pins`` is always present (and always empty here)."""

    workspace_id: str
    project_id: str
    pins: list[str]
    task_id: str | None = None
    component: str | None = None


class TextContent(msgspec.Struct, tag="text", tag_field="type"):
    data: str


class Base64Content(msgspec.Struct, tag="base64", tag_field="type"):
    data: str


class ArtifactRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    artifact_id: str
    revision_id: str
    revision_number: int
    kind: str
    title: str
    media_type: str
    content: TextContent | Base64Content | None = None
    blob_hash: str
    size_bytes: int
    status: Literal["active", "forgotten"]
    physically_erased: bool | None = None
    retention_notice: str | None = None
    context: OwnerContext
    provenance: dict[str, Any]
    actor: str | None = None
    created_at: str
    revision_created_at: str
    revision_commit_seq: int
    forgotten_reason: str | None = None


class ArtifactMutationResult(ArtifactRecord, kw_only=True):
    commit_seq: int
    created: bool


class ClaimRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    claim_id: str
    revision_id: str
    revision_number: int
    claim_type: str
    status: Literal["active", "conflicted", "superseded", "retracted"]
    statement: str
    confidence: float | None = None
    evidence: list[EvidenceRef]
    valid_from: str | None = None
    valid_until: str | None = None
    context: OwnerContext
    actor: str | None = None
    created_at: str
    revision_created_at: str
    revision_commit_seq: int
    retraction_reason: str | None = None


class ClaimMutationResult(ClaimRecord, kw_only=True):
    commit_seq: int
    created: bool


_evidence_decoder = msgspec.json.Decoder(list[EvidenceRef])
_ARTIFACT_SQL = (
    "SELECT a.id, r.id, r.revision_number, a.kind, r.title, r.media_type, r.blob_hash, "
    "r.size_bytes, a.status, a.workspace_id, a.project_id, a.task_id, a.component, "
    "r.provenance_json, r.actor, a.created_at, r.created_at, r.commit_seq, a.forgotten_reason "
    "FROM artifacts a JOIN artifact_revisions r ON r.artifact_id = a.id "
)
_CLAIM_SQL = (
    "SELECT c.id, r.id, r.revision_number, c.claim_type, c.status, r.statement, r.confidence, "
    "r.evidence_json, c.valid_from, c.valid_until, c.workspace_id, c.project_id, c.task_id, "
    "c.component, r.actor, c.created_at, r.created_at, r.commit_seq, c.retraction_reason "
    "FROM claims c JOIN claim_revisions r ON r.claim_id = c.id "
)


def artifact_rows(conn: Any, where: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    return conn.execute(_ARTIFACT_SQL + where, params).fetchall()


def artifact_from_row(row: tuple[Any, ...], cls: type[ArtifactRecord] = ArtifactRecord,
                      **extra: Any) -> ArtifactRecord:
    (art_id, rev_id, number, kind, title, media_type, blob_hash, size, status, ws, prj, task,
     component, provenance, actor, created, rev_created, rev_seq, forgotten_reason) = row
    return cls(
        artifact_id=art_id, revision_id=rev_id, revision_number=number, kind=kind, title=title,
        media_type=media_type, blob_hash=blob_hash, size_bytes=size, status=status,
        context=OwnerContext(workspace_id=ws, project_id=prj, task_id=task, component=component, pins=[]),
        provenance=msgspec.json.decode(provenance), actor=actor, created_at=created,
        revision_created_at=rev_created, revision_commit_seq=rev_seq,
        forgotten_reason=forgotten_reason, **extra,
    )


def artifact_record(conn: Any, artifact_id: str, revision_id: str | None = None,
                    cls: type[ArtifactRecord] = ArtifactRecord, **extra: Any) -> ArtifactRecord:
    """One artifact at its head (or at ``revision_id``); NOT_FOUND when absent."""
    if revision_id is None:
        rows = artifact_rows(conn, "WHERE a.id = ? AND r.id = a.current_revision_id", (artifact_id,))
        if not rows:
            raise NotFound(f"artifact {artifact_id}")
    else:
        rows = artifact_rows(conn, "WHERE a.id = ? AND r.id = ?", (artifact_id, revision_id))
        if not rows:
            raise NotFound(f"artifact {artifact_id} revision {revision_id}")
    return artifact_from_row(rows[0], cls, **extra)


def claim_rows(conn: Any, where: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    return conn.execute(_CLAIM_SQL + where, params).fetchall()


def claim_from_row(row: tuple[Any, ...], cls: type[ClaimRecord] = ClaimRecord,
                   **extra: Any) -> ClaimRecord:
    (claim_id, rev_id, number, claim_type, status, statement, confidence, evidence, valid_from,
     valid_until, ws, prj, task, component, actor, created, rev_created, rev_seq, reason) = row
    return cls(
        claim_id=claim_id, revision_id=rev_id, revision_number=number, claim_type=claim_type,
        status=status, statement=statement, confidence=confidence,
        evidence=_evidence_decoder.decode(evidence), valid_from=valid_from,
        valid_until=valid_until,
        context=OwnerContext(workspace_id=ws, project_id=prj, task_id=task, component=component, pins=[]),
        actor=actor, created_at=created, revision_created_at=rev_created,
        revision_commit_seq=rev_seq, retraction_reason=reason, **extra,
    )


def claim_record(conn: Any, claim_id: str, revision_id: str | None = None,
                 cls: type[ClaimRecord] = ClaimRecord, **extra: Any) -> ClaimRecord:
    """One claim at its head (or at ``revision_id``) with its current lifecycle; NOT_FOUND when absent."""
    if revision_id is None:
        rows = claim_rows(conn, "WHERE c.id = ? AND r.id = c.current_revision_id", (claim_id,))
        if not rows:
            raise NotFound(f"claim {claim_id}")
    else:
        rows = claim_rows(conn, "WHERE c.id = ? AND r.id = ?", (claim_id, revision_id))
        if not rows:
            raise NotFound(f"claim {claim_id} revision {revision_id}")
    return claim_from_row(rows[0], cls, **extra)


def content_for_output(media_type: str, data: bytes) -> TextContent | Base64Content:
    """Text only for ``text/*`` media types holding valid UTF-8 that fits; base64 otherwise."""
    if media_type.strip().lower().startswith("text/"):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            if len(msgspec.json.encode(text)) <= MAX_ENCODED_CONTENT_BYTES:
                return TextContent(data=text)
    return Base64Content(data=base64.b64encode(data).decode("ascii"))
