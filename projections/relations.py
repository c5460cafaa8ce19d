"""The relations projection: one immutable row per ``relation.added`` event (graph adjacency).

A row keeps the typed endpoints, the relation, its metadata, the writer's ambient context (which
decides who may see the row) and the event's ``at`` and ``commit_seq``. Rows are never updated or
deleted, so other projectors may read them "as of" a position by filtering on
``relation_commit_seq``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from memoree.eventlog.store import RecordedEvent

__all__ = ["RelationsProjector"]

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
