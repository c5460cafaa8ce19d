"""``conflict.list``: the actionable queue of open (optionally stale) conflict cases.

Cases are visible when their contradiction relation's context is visible at the horizon; pages
are newest-first by ``case_sequence`` with an exclusive ``before_case_sequence`` cursor. Each side
shows the frozen revision and the claim's current one (both with the claim's current lifecycle),
and whether they are still the same revision. Resolved cases are never listed.
"""

from __future__ import annotations

from typing import Any

import msgspec

from memoree import limits
from memoree.eventlog.events import Scope
from memoree.inputs import ConflictListInput, check_cursor, check_limit, check_reason

from memoree.projections.records import ClaimRecord, OwnerContext, claim_record
from .relations import horizon_filter

__all__ = ["ConflictCase", "ConflictList", "ConflictSide", "conflict_list"]

MAX_CONFLICT_PAGE_BYTES = 12 * limits.MIB
_NEWEST = 2**62

BROADEN_HINTS = {
    "ambient": "No actionable ambient conflicts. Retry explicitly with horizon=workspace (and a "
               "reason) only if broader reconciliation is needed.",
    "workspace": "No actionable workspace conflicts. Retry explicitly with horizon=personal (and "
                 "a reason) only if broader reconciliation is needed.",
}


class ConflictSide(msgspec.Struct, kw_only=True):
    claim_id: str
    frozen: ClaimRecord
    current: ClaimRecord
    frozen_is_current: bool


class ConflictCase(msgspec.Struct, kw_only=True, omit_defaults=True):
    case_id: str
    relation_id: str
    state: str
    source: ConflictSide
    target: ConflictSide
    metadata: dict[str, Any]
    context: OwnerContext
    opened_at: str
    updated_at: str
    state_reason: str | None = None
    opened_commit_seq: int
    case_sequence: int


class ConflictList(msgspec.Struct, kw_only=True, omit_defaults=True):
    horizon: str
    include_stale: bool
    conflicts: list[ConflictCase]
    truncated: bool
    next_before_case_sequence: int | None = None
    broaden_hint: str | None = None


_CASE_SQL = (
    "SELECT c.case_sequence, c.case_id, c.relation_id, c.state, c.source_claim_id, "
    "c.source_revision_id, c.target_claim_id, c.target_revision_id, c.opened_at, c.updated_at, "
    "c.state_reason, c.opened_commit_seq, r.metadata_json, r.workspace_id, r.project_id, "
    "r.task_id, r.component FROM conflict_cases c JOIN relations r ON r.id = c.relation_id "
)


def conflict_list(conn: Any, ambient: Scope, inp: ConflictListInput) -> ConflictList:
    check_reason(inp.reason)
    limit = check_limit("limit", inp.limit, limits.MAX_CONFLICT_LIST_ITEMS)
    before = check_cursor("before_case_sequence", inp.before_case_sequence)
    states = ("open", "stale") if inp.include_stale else ("open",)
    scope_sql, scope_params = horizon_filter("r", ambient, inp.horizon)
    rows = conn.execute(
        _CASE_SQL + f"WHERE c.state IN ({','.join('?' * len(states))}){scope_sql} "
        "AND c.case_sequence < ? ORDER BY c.case_sequence DESC LIMIT ?",
        (*states, *scope_params, before if before is not None else _NEWEST, limit + 1),
    ).fetchall()
    items, truncated = _fit_page(conn, rows, limit)
    return ConflictList(
        horizon=inp.horizon, include_stale=inp.include_stale, conflicts=items, truncated=truncated,
        next_before_case_sequence=items[-1].case_sequence if truncated and items else None,
        broaden_hint=None if items else BROADEN_HINTS.get(inp.horizon),
    )


def _side(conn: Any, claim_id: str, frozen_revision_id: str) -> ConflictSide:
    frozen = claim_record(conn, claim_id, frozen_revision_id)
    current = claim_record(conn, claim_id)
    return ConflictSide(claim_id=claim_id, frozen=frozen, current=current,
                        frozen_is_current=frozen.revision_id == current.revision_id)


def _case_from_row(conn: Any, row: tuple[Any, ...]) -> ConflictCase:
    (sequence, case_id, relation_id, state, source_id, source_rev, target_id, target_rev,
     opened_at, updated_at, reason, opened_seq, metadata, ws, prj, task, component) = row
    return ConflictCase(
        case_id=case_id, relation_id=relation_id, state=state,
        source=_side(conn, source_id, source_rev), target=_side(conn, target_id, target_rev),
        metadata=msgspec.json.decode(metadata),
        context=OwnerContext(workspace_id=ws, project_id=prj, task_id=task, component=component,
                             pins=[]),
        opened_at=opened_at, updated_at=updated_at, state_reason=reason,
        opened_commit_seq=opened_seq, case_sequence=sequence,
    )


def _fit_page(
    conn: Any, rows: list[tuple[Any, ...]], limit: int
) -> tuple[list[ConflictCase], bool]:
    items: list[ConflictCase] = []
    used = 0
    for row in rows[:limit]:
        item = _case_from_row(conn, row)
        size = len(msgspec.json.encode(item)) + 1
        if items and used + size > MAX_CONFLICT_PAGE_BYTES:
            return items, True
        items.append(item)
        used += size
    return items, len(rows) > limit
