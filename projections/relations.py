"""The relations projection: one immutable row per ``relation.added`` event (graph adjacency).

A row keeps the typed endpoints, the relation, its metadata, the writer's ambient context (which
decides who may see the row) and the event's ``at`` and ``commit_seq``. Rows are never updated or
deleted, so other projectors may read them "as of" a position by filtering on
``relation_commit_seq``. ``RelationRecord`` is how a row reads back; the command handler, the
idempotency records and ``relation.list`` share it and its loaders.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import msgspec

from memoree.errors import NotFound
from memoree.eventlog.store import RecordedEvent

from .records import OwnerContext

__all__ = [
    "RELATION_COLUMNS", "RelationMutationResult", "RelationRecord", "RelationsProjector", "find_edge",
    "relation_from_row", "relation_record",
]

_encode = msgspec.json.Encoder(order="sorted").encode


class RelationsProjector:
    name: ClassVar[str] = "relations"
    version: ClassVar[int] = 1
    schema: ClassVar[str] = """
CREATE TABLE IF NOT EXISTS relations (
    id TEXT PRIMARY KEY,
    source_type TEXT NOT NULL CHECK (source_type IN ('artifact', 'claim')),
    source_id TEXT NOT NULL,
    relation TEXT NOT NULL CHECK (relation IN ('derived_from', 'supports', 'contradicts',
                                               'supersedes', 'references', 'duplicates')),
    target_type TEXT NOT NULL CHECK (target_type IN ('artifact', 'claim')),
    target_id TEXT NOT NULL,
    metadata_json TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    task_id TEXT,
    component TEXT,
    created_at TEXT NOT NULL,
    relation_commit_seq INTEGER NOT NULL UNIQUE,
    UNIQUE (source_type, source_id, relation, target_type, target_id)
) STRICT;
CREATE INDEX IF NOT EXISTS relations_by_source
    ON relations(source_type, source_id, relation_commit_seq);
CREATE INDEX IF NOT EXISTS relations_by_target
    ON relations(target_type, target_id, relation_commit_seq);
"""

    def apply(self, conn: Any, event: RecordedEvent) -> None:
        if event.type != "relation.added":
            return
        p, scope = event.payload, event.scope
        conn.execute(
            "INSERT INTO relations (id, source_type, source_id, relation, target_type, target_id, "
            "metadata_json, workspace_id, project_id, task_id, component, created_at, "
            "relation_commit_seq) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (p.relation_id, p.source_type, p.source_id, p.relation, p.target_type, p.target_id,
             _encode(p.metadata).decode(), scope.workspace_id, scope.project_id, scope.task_id,
             scope.component, event.at, event.commit_seq),
        )


# --- how a row reads back (shared by the command handler, the idempotency records and relation.list)


class RelationRecord(msgspec.Struct, kw_only=True):
    relation_id: str
    source_type: str
    source_id: str
    relation: str
    target_type: str
    target_id: str
    metadata: dict[str, Any]
    context: OwnerContext
    created_at: str
    relation_commit_seq: int


class RelationMutationResult(RelationRecord, kw_only=True):
    commit_seq: int
    created: bool


RELATION_COLUMNS = (
    "id, source_type, source_id, relation, target_type, target_id, metadata_json, "
    "workspace_id, project_id, task_id, component, created_at, relation_commit_seq"
)
RELATION_SQL = f"SELECT {RELATION_COLUMNS} FROM relations "


def relation_from_row(row: Sequence[Any]) -> RelationRecord:
    (relation_id, source_type, source_id, relation, target_type, target_id, metadata, ws, prj,
     task, component, created_at, commit_seq) = row
    return RelationRecord(
        relation_id=relation_id, source_type=source_type, source_id=source_id, relation=relation,
        target_type=target_type, target_id=target_id, metadata=msgspec.json.decode(metadata),
        context=OwnerContext(workspace_id=ws, project_id=prj, task_id=task, component=component,
                             pins=[]),
        created_at=created_at, relation_commit_seq=commit_seq,
    )


def relation_record(conn: Any, relation_id: str) -> RelationRecord:
    row = conn.execute(RELATION_SQL + "WHERE id = ?", (relation_id,)).fetchone()
    if row is None:
        raise NotFound(f"relation {relation_id}")
    return relation_from_row(row)


def find_edge(conn: Any, source_type: str, source_id: str, relation: str, target_type: str,
              target_id: str) -> RelationRecord | None:
    """The relation with exactly this directed 5-tuple, if one exists."""
    row = conn.execute(
        RELATION_SQL + "WHERE source_type = ? AND source_id = ? AND relation = ? "
        "AND target_type = ? AND target_id = ?",
        (source_type, source_id, relation, target_type, target_id),
    ).fetchone()
    return None if row is None else relation_from_row(row)
