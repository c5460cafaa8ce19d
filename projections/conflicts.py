"""The conflict-case projection (spec §4): cases over frozen revision pairs, their change log, and
the derived ``conflicted`` / ``superseded`` claim statuses.

A ``contradicts`` relation opens a case that freezes both claims' current revisions. Revising
either claim makes its open cases ``stale`` and opens a fresh case over the current revisions of
every live contradiction touching it (so at most one case per relation is open); retraction or
supersession resolves. Stale and resolved are terminal; cases are never deleted; every change
appends a ``conflict_events`` row. A live claim is ``conflicted`` iff an open case holds its
current revision, else ``active``; terminal statuses are never recomputed.

Determinism: ``case_sequence`` and ``event_sequence`` count up from the rows already projected,
and ids derive from the event's ``at`` and ``commit_seq`` plus an ordinal within the event, so a
replay reproduces every row. The projector reads only the log's own facts as of the event it
applies: its mirror of claim heads and lifecycle (``conflict_claim_heads``) and immutable relation
rows up to that position, never a table another projector may have moved further ahead.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar, NamedTuple

from blake3 import blake3
from memoree.ids import ulid_from_bytes

from memoree.errors import IntegrityError
from memoree.eventlog.store import RecordedEvent

__all__ = [
    "ConflictsProjector",
    "OPENED_REASON",
    "REASSESSED_REASON",
    "RETRACTED_REASON",
    "STALE_REASON",
    "SUPERSEDED_REASON",
    "derived_id",
]

OPENED_REASON = "contradiction relation created"
REASSESSED_REASON = "automatically reassessed after claim revision"
STALE_REASON = "claim revision changed"
RETRACTED_REASON = "claim retracted"
SUPERSEDED_REASON = "claim superseded"

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MILLISECOND = timedelta(milliseconds=1)


def derived_id(prefix: str, at: str, commit_seq: int, ordinal: int) -> str:
    """A ULID-shaped id: the event's ``at`` in milliseconds, then 80 bits hashed from position."""
    instant = datetime.fromisoformat(at.replace("Z", "+00:00"))
    millis = max(0, (instant - _EPOCH) // _MILLISECOND) & ((1 << 48) - 1)
    tail = blake3(f"{prefix}\0{commit_seq}\0{ordinal}".encode()).digest()[:10]
    return f"{prefix}_{ulid_from_bytes(millis.to_bytes(6, 'big') + tail)}"


class _Case(NamedTuple):
    case_id: str
    source_claim_id: str
    source_revision_id: str
    target_claim_id: str
    target_revision_id: str


class _EventPass:
    """What one event does to the cases; ids it mints are numbered within the event."""

    def __init__(self, conn: Any, event: RecordedEvent) -> None:
        self.conn = conn
        self.event = event
        self.ordinals: dict[str, int] = {}
        self.affected: set[str] = set()

    def mint(self, prefix: str) -> str:
        ordinal = self.ordinals.get(prefix, 0)
        self.ordinals[prefix] = ordinal + 1
        return derived_id(prefix, self.event.at, self.event.commit_seq, ordinal)

    def head(self, claim_id: str) -> tuple[str, str | None] | None:
        """``(current revision, terminal status or None)`` of a claim as of this event."""
        return self.conn.execute(
            "SELECT revision_id, terminal FROM conflict_claim_heads WHERE claim_id = ?", (claim_id,)
        ).fetchone()

    def add_head(self, claim_id: str, revision_id: str) -> None:
        self.conn.execute(
            "INSERT INTO conflict_claim_heads (claim_id, revision_id) VALUES (?, ?)",
            (claim_id, revision_id),
        )

    def move_head(self, claim_id: str, revision_id: str) -> None:
        self.conn.execute(
            "UPDATE conflict_claim_heads SET revision_id = ? WHERE claim_id = ?",
            (revision_id, claim_id),
        )

    def end_life(self, claim_id: str, status: str) -> None:
        self.conn.execute(
            "UPDATE conflict_claim_heads SET terminal = ? WHERE claim_id = ? AND terminal IS NULL",
            (status, claim_id),
        )
        if status == "superseded":
            self.conn.execute(
                "UPDATE claims SET status = 'superseded' "
                "WHERE id = ? AND status IN ('active', 'conflicted')",
                (claim_id,),
            )

    def contradictions_touching(self, claim_id: str) -> list[tuple[str, str, str]]:
        """``(relation_id, source claim, target claim)`` of earlier contradictions, oldest first."""
        return self.conn.execute(
            "SELECT id, source_id, target_id FROM relations WHERE relation = 'contradicts' "
            "AND ((source_type = 'claim' AND source_id = ?) "
            "OR (target_type = 'claim' AND target_id = ?)) "
            "AND relation_commit_seq < ? ORDER BY relation_commit_seq",
            (claim_id, claim_id, self.event.commit_seq),
        ).fetchall()

    def open_case(self, relation_id: str, source_claim_id: str, target_claim_id: str,
                  reason: str) -> None:
        """Open a case over both claims' current revisions, unless one is terminal or it is open."""
        source, target = self.head(source_claim_id), self.head(target_claim_id)
        if source is None or target is None or source[1] or target[1]:
            return
        existing = self.conn.execute(
            "SELECT case_id, state FROM conflict_cases WHERE relation_id = ? "
            "AND source_revision_id = ? AND target_revision_id = ?",
            (relation_id, source[0], target[0]),
        ).fetchone()
        if existing is not None:
            if existing[1] == "open":
                return
            raise IntegrityError(
                f"conflict case {existing[0]} over these revisions is already {existing[1]}",
                details={"case_id": existing[0], "commit_seq": self.event.commit_seq},
                hint="Run `memoree verify`; the conflict projection disagrees with the log.",
            )
        case_id = self.mint("ccase")
        self.conn.execute(
            "INSERT INTO conflict_cases (case_sequence, case_id, relation_id, source_claim_id, "
            "source_revision_id, target_claim_id, target_revision_id, state, opened_at, "
            "updated_at, state_reason, opened_commit_seq) VALUES ((SELECT "
            "coalesce(max(case_sequence), 0) + 1 FROM conflict_cases), ?, ?, ?, ?, ?, ?, 'open', "
            "?, ?, ?, ?)",
            (case_id, relation_id, source_claim_id, source[0], target_claim_id, target[0],
             self.event.at, self.event.at, reason, self.event.commit_seq),
        )
        case = _Case(case_id, source_claim_id, source[0], target_claim_id, target[0])
        self.record(case, "opened", reason)

    def close_open_cases(self, claim_id: str, state: str, reason: str) -> None:
        """Move every open case involving ``claim_id`` to ``state`` (stale or resolved)."""
        rows = self.conn.execute(
            "SELECT case_id, source_claim_id, source_revision_id, target_claim_id, "
            "target_revision_id FROM conflict_cases WHERE state = 'open' "
            "AND (source_claim_id = ? OR target_claim_id = ?) ORDER BY case_sequence",
            (claim_id, claim_id),
        ).fetchall()
        for case in map(_Case._make, rows):
            self.conn.execute(
                "UPDATE conflict_cases SET state = ?, state_reason = ?, updated_at = ? "
                "WHERE case_id = ?",
                (state, reason, self.event.at, case.case_id),
            )
            self.record(case, state, reason)

    def record(self, case: _Case, event_type: str, reason: str) -> None:
        self.conn.execute(
            "INSERT INTO conflict_events (event_sequence, event_id, case_id, event_type, "
            "source_revision_id, target_revision_id, reason, operation_commit_seq, created_at) "
            "VALUES ((SELECT coalesce(max(event_sequence), 0) + 1 FROM conflict_events), "
            "?, ?, ?, ?, ?, ?, ?, ?)",
            (self.mint("cevt"), case.case_id, event_type, case.source_revision_id,
             case.target_revision_id, reason, self.event.commit_seq, self.event.at),
        )
        self.affected.update((case.source_claim_id, case.target_claim_id))

    def recompute_statuses(self) -> None:
        """``conflicted`` iff an open case holds the claim's current revision; live claims only."""
        for claim_id in sorted(self.affected):
            head = self.head(claim_id)
            if head is None or head[1] is not None:
                continue
            conflicted = self.conn.execute(
                "SELECT EXISTS (SELECT 1 FROM conflict_cases WHERE state = 'open' AND "
                "((source_claim_id = ?1 AND source_revision_id = ?2) "
                "OR (target_claim_id = ?1 AND target_revision_id = ?2)))",
                (claim_id, head[0]),
            ).fetchone()[0]
            self.conn.execute(
                "UPDATE claims SET status = ? WHERE id = ? AND status IN ('active', 'conflicted')",
                ("conflicted" if conflicted else "active", claim_id),
            )


def _on_claim_asserted(run: _EventPass, p: Any) -> None:
    run.add_head(p.claim_id, p.revision_id)


def _on_claim_revised(run: _EventPass, p: Any) -> None:
    run.move_head(p.claim_id, p.revision_id)
    run.close_open_cases(p.claim_id, "stale", STALE_REASON)
    for relation_id, source_id, target_id in run.contradictions_touching(p.claim_id):
        run.open_case(relation_id, source_id, target_id, REASSESSED_REASON)
    run.affected.add(p.claim_id)
    run.recompute_statuses()


def _on_claim_retracted(run: _EventPass, p: Any) -> None:
    run.end_life(p.claim_id, "retracted")
    run.close_open_cases(p.claim_id, "resolved", RETRACTED_REASON)
    run.recompute_statuses()


def _on_relation_added(run: _EventPass, p: Any) -> None:
    if p.source_type != "claim" or p.target_type != "claim":
        return
    if p.relation == "contradicts":
        run.open_case(p.relation_id, p.source_id, p.target_id, OPENED_REASON)
    elif p.relation == "supersedes":
        run.end_life(p.target_id, "superseded")
        run.close_open_cases(p.target_id, "resolved", SUPERSEDED_REASON)
        run.affected.update((p.source_id, p.target_id))
    run.recompute_statuses()


_STEPS: dict[str, Callable[[_EventPass, Any], None]] = {
    "claim.asserted": _on_claim_asserted,
    "claim.revised": _on_claim_revised,
    "claim.retracted": _on_claim_retracted,
    "relation.added": _on_relation_added,
}


class ConflictsProjector:
    name: ClassVar[str] = "conflicts"
    version: ClassVar[int] = 1
    schema: ClassVar[str] = """
CREATE TABLE IF NOT EXISTS conflict_claim_heads (
    claim_id TEXT PRIMARY KEY,
    revision_id TEXT NOT NULL,
    terminal TEXT CHECK (terminal IS NULL OR terminal IN ('retracted', 'superseded'))
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS conflict_cases (
    case_sequence INTEGER PRIMARY KEY,
    case_id TEXT NOT NULL UNIQUE,
    relation_id TEXT NOT NULL,
    source_claim_id TEXT NOT NULL,
    source_revision_id TEXT NOT NULL,
    target_claim_id TEXT NOT NULL,
    target_revision_id TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('open', 'stale', 'resolved')),
    opened_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    state_reason TEXT,
    opened_commit_seq INTEGER NOT NULL,
    UNIQUE (relation_id, source_revision_id, target_revision_id)
) STRICT;
CREATE UNIQUE INDEX IF NOT EXISTS conflict_cases_one_open ON conflict_cases(relation_id)
    WHERE state = 'open';
CREATE INDEX IF NOT EXISTS conflict_cases_by_source
    ON conflict_cases(source_claim_id, state, case_sequence DESC);
CREATE INDEX IF NOT EXISTS conflict_cases_by_target
    ON conflict_cases(target_claim_id, state, case_sequence DESC);
CREATE INDEX IF NOT EXISTS conflict_cases_by_state ON conflict_cases(state, case_sequence DESC);
CREATE TRIGGER IF NOT EXISTS conflict_cases_no_delete BEFORE DELETE ON conflict_cases
    BEGIN SELECT RAISE(ABORT, 'conflict cases are never deleted'); END;
CREATE TABLE IF NOT EXISTS conflict_events (
    event_sequence INTEGER PRIMARY KEY,
    event_id TEXT NOT NULL UNIQUE,
    case_id TEXT NOT NULL REFERENCES conflict_cases(case_id),
    event_type TEXT NOT NULL CHECK (event_type IN ('opened', 'stale', 'resolved')),
    source_revision_id TEXT NOT NULL,
    target_revision_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    operation_commit_seq INTEGER NOT NULL,
    created_at TEXT NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS conflict_events_by_case ON conflict_events(case_id, event_sequence);
CREATE TRIGGER IF NOT EXISTS conflict_events_no_update BEFORE UPDATE ON conflict_events
    BEGIN SELECT RAISE(ABORT, 'conflict events are immutable'); END;
CREATE TRIGGER IF NOT EXISTS conflict_events_no_delete BEFORE DELETE ON conflict_events
    BEGIN SELECT RAISE(ABORT, 'conflict events are immutable'); END;
"""

    def apply(self, conn: Any, event: RecordedEvent) -> None:
        step = _STEPS.get(event.type)
        if step is not None:
            step(_EventPass(conn, event), event.payload)
