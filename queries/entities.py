"""Exact, globally readable lookups: ``artifact.get``, ``artifact.history``, ``claim.get``,
``claim.history``. They need no ambient context and are never scope-checked (spec §2.9).

History pages are newest-first with an exclusive ``before_revision_number`` cursor; when a page
is truncated, ``next_before_revision_number`` is the last returned revision number.
"""

from __future__ import annotations

from typing import Any

import msgspec

from memoree import limits
from memoree.errors import NotFound
from memoree.eventlog.cas import ContentStore
from memoree.inputs import (
    ArtifactGetInput,
    ArtifactHistoryInput,
    ClaimGetInput,
    ClaimHistoryInput,
    check_cursor,
    check_id,
    check_limit,
)

from memoree.projections.records import (
    ArtifactRecord,
    ClaimRecord,
    artifact_from_row,
    artifact_record,
    artifact_rows,
    claim_from_row,
    claim_record,
    claim_rows,
    content_for_output,
)

__all__ = ["ArtifactHistory", "ClaimHistory", "artifact_get", "artifact_history", "claim_get", "claim_history"]


class ArtifactHistory(msgspec.Struct, omit_defaults=True):
    revisions: list[ArtifactRecord]
    truncated: bool
    next_before_revision_number: int | None = None


class ClaimHistory(msgspec.Struct, omit_defaults=True):
    revisions: list[ClaimRecord]
    truncated: bool
    next_before_revision_number: int | None = None


def artifact_get(conn: Any, cas: ContentStore, inp: ArtifactGetInput) -> ArtifactRecord:
    check_id("artifact_id", inp.artifact_id)
    if inp.revision_id is not None:
        check_id("revision_id", inp.revision_id)
    record = artifact_record(conn, inp.artifact_id, inp.revision_id)
    purged = conn.execute("SELECT purged_commit_seq, purged_reason FROM artifacts WHERE id = ?",
                          (inp.artifact_id,)).fetchone()
    if purged and purged[0] is not None:
        record.physically_erased = True
        if inp.include_content:
            raise NotFound(
                f"artifact {inp.artifact_id} bytes were purged at commit_seq {purged[0]} ({purged[1]})",
                details={"artifact_id": inp.artifact_id, "purged": True, "purge_commit_seq": purged[0]},
                hint="Purged bytes are gone for good; read metadata with include_content=false.",
            )
    if inp.include_content:
        data = cas.get(record.blob_hash, record.size_bytes)
        record.content = content_for_output(record.media_type, data)
    return record


def _page(inp: Any) -> tuple[int, int]:
    limit = check_limit("limit", inp.limit, limits.MAX_HISTORY_ITEMS)
    before = check_cursor("before_revision_number", inp.before_revision_number)
    return limit, before if before is not None else 2**62


def artifact_history(conn: Any, inp: ArtifactHistoryInput) -> ArtifactHistory:
    check_id("artifact_id", inp.artifact_id)
    limit, before = _page(inp)
    if conn.execute("SELECT 1 FROM artifacts WHERE id = ?", (inp.artifact_id,)).fetchone() is None:
        raise NotFound(f"artifact {inp.artifact_id}")
    rows = artifact_rows(
        conn, "WHERE a.id = ? AND r.revision_number < ? ORDER BY r.revision_number DESC LIMIT ?",
        (inp.artifact_id, before, limit + 1),
    )
    items = [artifact_from_row(row) for row in rows[:limit]]
    truncated = len(rows) > limit
    return ArtifactHistory(items, truncated, items[-1].revision_number if truncated else None)


def claim_get(conn: Any, inp: ClaimGetInput) -> ClaimRecord:
    check_id("claim_id", inp.claim_id)
    if inp.revision_id is not None:
        check_id("revision_id", inp.revision_id)
    return claim_record(conn, inp.claim_id, inp.revision_id)


def claim_history(conn: Any, inp: ClaimHistoryInput) -> ClaimHistory:
    check_id("claim_id", inp.claim_id)
    limit, before = _page(inp)
    if conn.execute("SELECT 1 FROM claims WHERE id = ?", (inp.claim_id,)).fetchone() is None:
        raise NotFound(f"claim {inp.claim_id}")
    rows = claim_rows(
        conn, "WHERE c.id = ? AND r.revision_number < ? ORDER BY r.revision_number DESC LIMIT ?",
        (inp.claim_id, before, limit + 1),
    )
    items = [claim_from_row(row) for row in rows[:limit]]
    truncated = len(rows) > limit
    return ClaimHistory(items, truncated, items[-1].revision_number if truncated else None)
