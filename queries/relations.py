"""``relation.list`` (one hop around an anchor) and the ``RelationRecord`` shape and loaders.

The anchor must exist and be visible at the request's horizon, or be an artifact the ambient
context pins. Rows are then filtered by the *relation row's* own context (the writer's ambient
context), so a pin never reveals a foreign graph. Pages are newest-first by
``relation_commit_seq`` with an exclusive ``before_commit_seq`` cursor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from memoree import limits
from memoree.errors import NotFound, ScopeViolation
from memoree.eventlog.events import Scope
from memoree.inputs import RelationListInput, check_cursor, check_id, check_limit, check_reason
from memoree.eventlog.scope import describe, visible_at

from memoree.projections.relations import (
    RELATION_COLUMNS,
    RelationMutationResult,
    RelationRecord,
    find_edge,
    relation_from_row,
    relation_record,
)

__all__ = [
    "RelationList",
    "RelationMutationResult",
    "RelationRecord",
    "find_edge",
    "horizon_filter",
    "pinned_artifact_ids",
    "relation_list",
    "relation_record",
]

MAX_RELATION_PAGE_BYTES = 8 * limits.MIB
_NEWEST = 2**62

BROADEN_HINTS = {
    "ambient": "No ambient relations. Retry explicitly with horizon=workspace (and a reason) if "
               "broader graph traversal is needed.",
    "workspace": "No workspace relations. Retry explicitly with horizon=personal (and a reason) "
                 "if broader graph traversal is needed.",
}


class RelationList(msgspec.Struct, kw_only=True, omit_defaults=True):
    entity_type: str
    entity_id: str
    direction: str
    relation: str | None = None
    horizon: str
    relations: list[RelationRecord]
    truncated: bool
    next_before_commit_seq: int | None = None
    broaden_hint: str | None = None


def horizon_filter(alias: str, ambient: Scope, horizon: str) -> tuple[str, tuple[Any, ...]]:
    """SQL (``AND ...``) keeping rows whose owner columns are visible at ``horizon``."""
    if horizon == "personal":
        return "", ()
    if horizon == "workspace":
        return f" AND {alias}.workspace_id = ?", (ambient.workspace_id,)
    return (
        f" AND {alias}.workspace_id = ? AND {alias}.project_id = ? "
        f"AND (? IS NULL OR {alias}.task_id IS NULL OR {alias}.task_id = ?)",
        (ambient.workspace_id, ambient.project_id, ambient.task_id, ambient.task_id),
    )


def pinned_artifact_ids(pins: Sequence[str]) -> set[str]:
    """Artifact ids that pins name: ``ART`` or ``ART@REV``, maybe ``memoree://artifact/``-led."""
    ids = set()
    for pin in pins:
        bare = pin.removeprefix("memoree://artifact/")
        ids.add(bare.split("@", 1)[0])
    return ids


def relation_list(
    conn: Any, ambient: Scope, pins: Sequence[str], inp: RelationListInput
) -> RelationList:
    check_id("entity_id", inp.entity_id)
    check_reason(inp.reason)
    limit = check_limit("limit", inp.limit, limits.MAX_RELATION_LIST_ITEMS)
    before = check_cursor("before_commit_seq", inp.before_commit_seq)
    _check_anchor(conn, ambient, pins, inp)
    rows = _page_rows(conn, ambient, inp, limit, before if before is not None else _NEWEST)
    items, truncated = _fit_page(rows, limit, MAX_RELATION_PAGE_BYTES)
    return RelationList(
        entity_type=inp.entity_type, entity_id=inp.entity_id, direction=inp.direction,
        relation=inp.relation, horizon=inp.horizon, relations=items, truncated=truncated,
        next_before_commit_seq=items[-1].relation_commit_seq if truncated and items else None,
        broaden_hint=None if items else BROADEN_HINTS.get(inp.horizon),
    )


def _anchor_owner(conn: Any, entity_type: str, entity_id: str) -> Scope | None:
    table = "artifacts" if entity_type == "artifact" else "claims"
    row = conn.execute(
        f"SELECT workspace_id, project_id, task_id, component FROM {table} WHERE id = ?",
        (entity_id,),
    ).fetchone()
    return None if row is None else Scope(*row)


def _check_anchor(conn: Any, ambient: Scope, pins: Sequence[str], inp: RelationListInput) -> None:
    owner = _anchor_owner(conn, inp.entity_type, inp.entity_id)
    if owner is None:
        raise NotFound(f"{inp.entity_type} {inp.entity_id}")
    if visible_at(owner, ambient, inp.horizon):
        return
    if inp.entity_type == "artifact" and inp.entity_id in pinned_artifact_ids(pins):
        return
    raise ScopeViolation(
        f"{inp.entity_type} {inp.entity_id} is owned by {describe(owner)}, outside the "
        f"{inp.horizon} horizon of {describe(ambient)}"
    )


def _page_rows(conn: Any, ambient: Scope, inp: RelationListInput, limit: int,
               before: int) -> list[tuple[Any, ...]]:
    outgoing = "(r.source_type = ? AND r.source_id = ?)"
    incoming = "(r.target_type = ? AND r.target_id = ?)"
    anchor = (inp.entity_type, inp.entity_id)
    if inp.direction == "outgoing":
        where, params = outgoing, anchor
    elif inp.direction == "incoming":
        where, params = incoming, anchor
    else:
        where, params = f"({outgoing} OR {incoming})", anchor + anchor
    if inp.relation is not None:
        where += " AND r.relation = ?"
        params += (inp.relation,)
    scope_sql, scope_params = horizon_filter("r", ambient, inp.horizon)
    sql = (f"SELECT {RELATION_COLUMNS} FROM relations r WHERE {where}{scope_sql} "
           "AND r.relation_commit_seq < ? ORDER BY r.relation_commit_seq DESC LIMIT ?")
    return conn.execute(sql, (*params, *scope_params, before, limit + 1)).fetchall()


def _fit_page(
    rows: list[tuple[Any, ...]], limit: int, max_bytes: int
) -> tuple[list[RelationRecord], bool]:
    items: list[RelationRecord] = []
    used = 0
    for row in rows[:limit]:
        item = relation_from_row(row)
        size = len(msgspec.json.encode(item)) + 1
        if items and used + size > max_bytes:
            return items, True
        items.append(item)
        used += size
    return items, len(rows) > limit
