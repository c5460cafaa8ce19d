"""Browsing what is stored: ``artifact.list`` and ``claim.list``, newest first within a horizon.

Both list current revisions whose *owner* is visible at the request's horizon (pins never widen
a listing: they make artifacts searchable, not browsable). Pages are ordered by the current
revision's ``commit_seq``, descending, with an exclusive ``before_commit_seq`` cursor; a truncated
page carries ``next_before_commit_seq``. Filters are exact: ``title`` is the whole title,
``provenance`` matches top-level scalar fields, ``artifact_id`` keeps claims citing that artifact.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec

from memoree import limits
from memoree.errors import InvalidRequest
from memoree.eventlog.events import Scope
from memoree.inputs import (
    ArtifactListInput,
    ClaimListInput,
    check_cursor,
    check_id,
    check_limit,
    check_optional_text,
    check_reason,
    check_text,
)

from memoree.projections.records import (
    ArtifactRecord,
    ClaimRecord,
    artifact_from_row,
    claim_from_row,
    newest_artifact_rows,
    newest_claim_rows,
)
from .relations import horizon_filter

__all__ = ["ArtifactList", "ClaimList", "artifact_list", "claim_list"]

MAX_LIST_PAGE_BYTES = 8 * limits.MIB
_NEWEST = 2**62
_CLAIM_STATUSES = {
    "current": ("active", "conflicted"), "active": ("active",), "conflicted": ("conflicted",),
    "superseded": ("superseded",), "retracted": ("retracted",),
}


class ArtifactList(msgspec.Struct, kw_only=True, omit_defaults=True):
    horizon: str
    artifacts: list[ArtifactRecord]
    truncated: bool
    next_before_commit_seq: int | None = None


class ClaimList(msgspec.Struct, kw_only=True, omit_defaults=True):
    horizon: str
    claims: list[ClaimRecord]
    truncated: bool
    next_before_commit_seq: int | None = None


def artifact_list(conn: Any, ambient: Scope, inp: ArtifactListInput) -> ArtifactList:
    limit, before = _page(inp)
    where, params = ["r.id = a.current_revision_id", "r.commit_seq < ?"], [before]
    if inp.status != "any":
        where.append("a.status = ?")
        params.append(inp.status)
    if inp.kind is not None:
        where.append("a.kind = ?")
        params.append(check_text("kind", inp.kind, limits.MAX_KIND_BYTES))
    if inp.title is not None:
        where.append("r.title = ?")
        params.append(check_text("title", inp.title, limits.MAX_TITLE_BYTES))
    for key, value in _provenance_filters(inp.provenance):
        where.append(f"json_extract(r.provenance_json, '$.\"{key}\"') = ?")
        params.append(int(value) if isinstance(value, bool) else value)
    items, truncated, cursor = _newest(conn, newest_artifact_rows, artifact_from_row, "a", ambient,
                                       inp.horizon, where, params, limit)
    return ArtifactList(horizon=inp.horizon, artifacts=items, truncated=truncated,
                        next_before_commit_seq=cursor)


def claim_list(conn: Any, ambient: Scope, inp: ClaimListInput) -> ClaimList:
    limit, before = _page(inp)
    where, params = ["r.id = c.current_revision_id", "r.commit_seq < ?"], [before]
    if inp.status != "any":
        statuses = _CLAIM_STATUSES[inp.status]
        where.append(f"c.status IN ({','.join('?' * len(statuses))})")
        params.extend(statuses)
    if inp.claim_type is not None:
        where.append("c.claim_type = ?")
        params.append(inp.claim_type)
    if inp.actor is not None:
        where.append("r.actor = ?")
        params.append(check_text("actor", inp.actor, limits.MAX_ACTOR_BYTES))
    if inp.artifact_id is not None:
        # The evidence column is sorted-key JSON, so a locator naming the artifact contains
        # exactly this fragment.
        fragment = '"artifact_id":' + json.dumps(check_id("artifact_id", inp.artifact_id), ensure_ascii=False)
        where.append("instr(r.evidence_json, ?) > 0")
        params.append(fragment)
    items, truncated, cursor = _newest(conn, newest_claim_rows, claim_from_row, "c", ambient,
                                       inp.horizon, where, params, limit)
    return ClaimList(horizon=inp.horizon, claims=items, truncated=truncated,
                     next_before_commit_seq=cursor)


def _newest(conn: Any, rows_of: Callable[..., list[Any]], record_of: Callable[[Any], Any], alias: str,
            ambient: Scope, horizon: str, where: list[str], params: list[Any],
            limit: int) -> tuple[list[Any], bool, int | None]:
    """One newest-first page: its records, whether more follow, and the cursor to them."""
    scope_sql, scope_params = horizon_filter(alias, ambient, horizon)
    rows = rows_of(conn, f"WHERE {' AND '.join(where)}{scope_sql} ORDER BY r.commit_seq DESC LIMIT ?",
                   (*params, *scope_params, limit + 1))
    items, truncated = _fit([record_of(row) for row in rows[:limit]], len(rows) > limit)
    return items, truncated, items[-1].revision_commit_seq if truncated and items else None


def _page(inp: Any) -> tuple[int, int]:
    check_reason(inp.reason)
    limit = check_limit("limit", inp.limit, limits.MAX_LIST_ITEMS)
    before = check_cursor("before_commit_seq", inp.before_commit_seq)
    return limit, before if before is not None else _NEWEST


def _provenance_filters(provenance: dict[str, Any]) -> list[tuple[str, Any]]:
    if len(provenance) > limits.MAX_LIST_PROVENANCE_KEYS:
        raise InvalidRequest(f"provenance filters must not exceed {limits.MAX_LIST_PROVENANCE_KEYS} keys")
    for key, value in provenance.items():
        check_optional_text("provenance key", key, limits.MAX_ENTITY_ID_BYTES)
        if '"' in key or "\\" in key or any(ord(ch) < 0x20 for ch in key):
            raise InvalidRequest(f"provenance key {key!r} must not contain quotes, backslashes or control characters")
        if isinstance(value, str):
            check_optional_text("provenance value", value, limits.MAX_TITLE_BYTES)
    return sorted(provenance.items())


def _fit(items: list[Any], truncated: bool) -> tuple[list[Any], bool]:
    """The page cut where its serialized size would pass the page bound (at least one item)."""
    used = 0
    for index, item in enumerate(items):
        used += len(msgspec.json.encode(item)) + 1
        if index and used > MAX_LIST_PAGE_BYTES:
            return items[:index], True
    return items, truncated
