"""The entities projection: artifacts, claims and their immutable revisions and lifecycle.

Rows are written in the mutation's own transaction, so reads see the writer's writes. Every
column derives from the event: ids from its payload, times from its ``at``, positions from its
``commit_seq``. ``claims.status`` holds the lifecycle (active, superseded, retracted); the
``conflicted`` presentation is derived by the conflicts projection.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import msgspec

from memoree.eventlog.store import RecordedEvent

__all__ = ["EntitiesProjector"]

_encode = msgspec.json.Encoder(order="sorted").encode


_INSERT_ARTIFACT = (
    "INSERT INTO artifacts (id, workspace_id, project_id, task_id, component, kind, "
    "current_revision_id, current_revision_number, status, created_at, updated_at, "
    "stream_version) VALUES (?,?,?,?,?,?,?,1,'active',?,?,?)")
_INSERT_ARTIFACT_REVISION = (
    "INSERT INTO artifact_revisions (id, artifact_id, revision_number, title, media_type, "
    "blob_hash, size_bytes, provenance_json, actor, created_at, commit_seq) "
    "VALUES (?,?,?,?,?,?,?,?,?,?,?)")


def _artifact_row(event: RecordedEvent) -> tuple[Any, ...]:
    p, scope = event.payload, event.scope
    return (p.artifact_id, scope.workspace_id, scope.project_id, scope.task_id, scope.component,
            p.kind, p.revision_id, event.at, event.at, event.stream_version)


def _artifact_revision_row(event: RecordedEvent, p: Any, number: int) -> tuple[Any, ...]:
    return (p.revision_id, p.artifact_id, number, p.title, p.media_type, p.blob_hash,
            p.size_bytes, _encode(p.provenance).decode(), p.actor, event.at, event.commit_seq)


class EntitiesProjector:
    name: ClassVar[str] = "entities"
    version: ClassVar[int] = 3
    # Every table is keyed by its id alone (WITHOUT ROWID; ids are time-ordered, so new rows go
    # to the end): a write and a look-up by id touch one b-tree, not a rowid table plus an index
    # of its ids (version 2).
    schema: ClassVar[str] = """
CREATE TABLE IF NOT EXISTS artifacts (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    task_id TEXT,
    component TEXT,
    kind TEXT NOT NULL,
    current_revision_id TEXT NOT NULL,
    current_revision_number INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'forgotten')),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    forgotten_reason TEXT,
    stream_version INTEGER NOT NULL,
    purged_reason TEXT,
    purged_commit_seq INTEGER
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS artifacts_scope ON artifacts(workspace_id, project_id, task_id, status);
CREATE TABLE IF NOT EXISTS artifact_revisions (
    id TEXT PRIMARY KEY,
    artifact_id TEXT NOT NULL,
    revision_number INTEGER NOT NULL CHECK (revision_number > 0),
    title TEXT NOT NULL,
    media_type TEXT NOT NULL,
    blob_hash TEXT NOT NULL,
    size_bytes INTEGER NOT NULL CHECK (size_bytes >= 0),
    provenance_json TEXT NOT NULL,
    actor TEXT,
    created_at TEXT NOT NULL,
    commit_seq INTEGER NOT NULL UNIQUE,
    UNIQUE (artifact_id, revision_number)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS claims (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    task_id TEXT,
    component TEXT,
    claim_type TEXT NOT NULL,
    current_revision_id TEXT NOT NULL,
    current_revision_number INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'superseded', 'retracted', 'conflicted')),
    valid_from TEXT,
    valid_until TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    retraction_reason TEXT,
    stream_version INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS claims_scope ON claims(workspace_id, project_id, task_id, status);
CREATE TABLE IF NOT EXISTS claim_revisions (
    id TEXT PRIMARY KEY,
    claim_id TEXT NOT NULL,
    revision_number INTEGER NOT NULL CHECK (revision_number > 0),
    statement TEXT NOT NULL,
    confidence REAL CHECK (confidence IS NULL OR (confidence >= 0 AND confidence <= 1)),
    evidence_json TEXT NOT NULL,
    actor TEXT,
    created_at TEXT NOT NULL,
    commit_seq INTEGER NOT NULL UNIQUE,
    UNIQUE (claim_id, revision_number)
) STRICT, WITHOUT ROWID;
"""

    def apply(self, conn: Any, event: RecordedEvent) -> None:
        handler = getattr(self, "_" + event.type.replace(".", "_"), None)
        if handler is not None:
            handler(conn, event, event.payload)

    def apply_many(self, conn: Any, events: Sequence[RecordedEvent]) -> None:
        """A batch of new artifacts (``projections.base.BATCHABLE_TYPES``): one statement per table."""
        if any(event.type != "artifact.created" for event in events):
            for event in events:
                self.apply(conn, event)
            return
        conn.executemany(_INSERT_ARTIFACT, [_artifact_row(event) for event in events])
        conn.executemany(_INSERT_ARTIFACT_REVISION, [_artifact_revision_row(event, event.payload, 1)
                                                    for event in events])

    def _artifact_created(self, conn: Any, event: RecordedEvent, p: Any) -> None:
        conn.execute(_INSERT_ARTIFACT, _artifact_row(event))
        self._insert_artifact_revision(conn, event, p, 1)

    def _artifact_revised(self, conn: Any, event: RecordedEvent, p: Any) -> None:
        self._insert_artifact_revision(conn, event, p, p.revision_number)
        conn.execute(
            "UPDATE artifacts SET current_revision_id = ?, current_revision_number = ?, "
            "updated_at = ?, stream_version = ? WHERE id = ?",
            (p.revision_id, p.revision_number, event.at, event.stream_version, p.artifact_id),
        )

    def _artifact_forgotten(self, conn: Any, event: RecordedEvent, p: Any) -> None:
        conn.execute(
            "UPDATE artifacts SET status = 'forgotten', forgotten_reason = ?, updated_at = ?, "
            "stream_version = ? WHERE id = ?",
            (p.reason, event.at, event.stream_version, p.artifact_id),
        )

    def _artifact_purged(self, conn: Any, event: RecordedEvent, p: Any) -> None:
        conn.execute(
            "UPDATE artifacts SET status = 'forgotten', forgotten_reason = coalesce(forgotten_reason, ?), "
            "purged_reason = ?, purged_commit_seq = ?, updated_at = ?, stream_version = ? WHERE id = ?",
            (p.reason, p.reason, event.commit_seq, event.at, event.stream_version, p.artifact_id),
        )

    def _insert_artifact_revision(self, conn: Any, event: RecordedEvent, p: Any, number: int) -> None:
        conn.execute(_INSERT_ARTIFACT_REVISION, _artifact_revision_row(event, p, number))

    def _claim_asserted(self, conn: Any, event: RecordedEvent, p: Any) -> None:
        scope = event.scope
        conn.execute(
            "INSERT INTO claims (id, workspace_id, project_id, task_id, component, claim_type, "
            "current_revision_id, current_revision_number, status, valid_from, valid_until, "
            "created_at, updated_at, stream_version) VALUES (?,?,?,?,?,?,?,1,'active',?,?,?,?,?)",
            (p.claim_id, scope.workspace_id, scope.project_id, scope.task_id, scope.component,
             p.claim_type, p.revision_id, p.valid_from, p.valid_until, event.at, event.at,
             event.stream_version),
        )
        self._insert_claim_revision(conn, event, p, 1)

    def _claim_revised(self, conn: Any, event: RecordedEvent, p: Any) -> None:
        self._insert_claim_revision(conn, event, p, p.revision_number)
        conn.execute(
            "UPDATE claims SET current_revision_id = ?, current_revision_number = ?, "
            "updated_at = ?, stream_version = ? WHERE id = ?",
            (p.revision_id, p.revision_number, event.at, event.stream_version, p.claim_id),
        )

    def _claim_retracted(self, conn: Any, event: RecordedEvent, p: Any) -> None:
        conn.execute(
            "UPDATE claims SET status = 'retracted', retraction_reason = ?, updated_at = ?, "
            "stream_version = ? WHERE id = ?",
            (p.reason, event.at, event.stream_version, p.claim_id),
        )

    def _insert_claim_revision(self, conn: Any, event: RecordedEvent, p: Any, number: int) -> None:
        conn.execute(
            "INSERT INTO claim_revisions (id, claim_id, revision_number, statement, confidence, "
            "evidence_json, actor, created_at, commit_seq) VALUES (?,?,?,?,?,?,?,?,?)",
            (p.revision_id, p.claim_id, number, p.statement, p.confidence,
             _encode(p.evidence).decode(), p.actor, event.at, event.commit_seq),
        )
