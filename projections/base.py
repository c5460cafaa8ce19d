"""The projector contract and the runner that applies events with their checkpoints.

A projector has a ``name``, a ``version``, the DDL of the tables it owns and ``apply(conn,
event)``. It is a pure function of the log: every id or time it writes derives from the event
(its ``commit_seq``, ids recorded in its payload, its ``at``), never from the clock or a fresh
id, so a rebuild reproduces the same rows. The runner advances each projector's checkpoint in the
same transaction as the rows it covers and refuses a gap: a missing position is corruption, not
something to wait for. A version change rebuilds that projector from the log. A batch of events
that read nothing of each other (``BATCHABLE_TYPES``) is applied projector by projector, through
a projector's ``apply_many`` where it has one, with the same rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, ClassVar, Protocol

from memoree.errors import IntegrityError
from memoree.eventlog.db import execute_script
from memoree.eventlog.store import EventSink, RecordedEvent

__all__ = [
    "BATCHABLE_TYPES",
    "CHECKPOINT_SCHEMA",
    "Projector",
    "apply_events",
    "bulk_mode",
    "checkpoints",
    "deferred_mode",
    "ensure_projectors",
    "projection_sink",
    "reset",
]

CHECKPOINT_SCHEMA = """
CREATE TABLE IF NOT EXISTS projector_checkpoints (
    name     TEXT PRIMARY KEY,
    version  INTEGER NOT NULL,
    position INTEGER NOT NULL
) STRICT;
"""


# Events whose projection reads nothing another event of the same batch writes (a new artifact:
# its rows come from its own event and bytes): a batch made only of them is applied projector by
# projector, each projector writing the whole batch at once (``apply_many``), instead of event by
# event, and leaves the same rows.
BATCHABLE_TYPES = frozenset({"artifact.created"})


class Projector(Protocol):
    name: ClassVar[str]
    version: ClassVar[int]
    schema: ClassVar[str]

    def apply(self, conn: Any, event: RecordedEvent) -> None: ...


def owned_tables(projector: Projector) -> list[str]:
    """Tables (and virtual tables) that a projector's DDL creates, in creation order."""
    return re.findall(r"CREATE (?:VIRTUAL )?TABLE IF NOT EXISTS (\w+)", projector.schema)


def checkpoints(conn: Any) -> dict[str, tuple[int, int]]:
    """``name -> (version, position)`` for every projector that has run."""
    rows = conn.execute("SELECT name, version, position FROM projector_checkpoints").fetchall()
    return {name: (version, position) for name, version, position in rows}


def ensure_projectors(conn: Any, projectors: Sequence[Projector]) -> list[Projector]:
    """Create missing projection tables; return projectors whose stored version is stale."""
    execute_script(conn, CHECKPOINT_SCHEMA)
    known = checkpoints(conn)
    stale = []
    for projector in projectors:
        execute_script(conn, projector.schema)
        state = known.get(projector.name)
        if state is None:
            conn.execute(
                "INSERT INTO projector_checkpoints (name, version, position) VALUES (?, ?, 0)",
                (projector.name, projector.version),
            )
            stale.append(projector)
        elif state[0] != projector.version:
            stale.append(projector)
    return stale


def apply_events(conn: Any, projectors: Sequence[Projector], events: Sequence[RecordedEvent]) -> None:
    """Apply events to every projector and advance their checkpoints, refusing any gap.

    Inside a ``deferred_mode`` block over the same projectors, the block advances the
    checkpoints once, at its end (one UPDATE per group, not per request); a skipped position is
    refused here all the same."""
    if not events:
        return
    if len(events) > 1 and all(event.type in BATCHABLE_TYPES for event in events):
        for projector in projectors:
            _apply_batch(conn, projector, events)
    else:
        for event in events:
            for projector in projectors:
                projector.apply(conn, event)
    names = tuple(p.name for p in projectors)
    deferred = _deferred_checkpoints.get(id(conn))
    if deferred is not None and deferred.names == names:
        deferred.applied(events[0].commit_seq, events[-1].commit_seq)
        return
    _advance_checkpoints(conn, names, events[0].commit_seq - 1, events[-1].commit_seq)


def _apply_batch(conn: Any, projector: Projector, events: Sequence[RecordedEvent]) -> None:
    """Every event of a batch of ``BATCHABLE_TYPES`` to one projector: through its
    ``apply_many(conn, events)`` (a statement per table for the batch) where it has one."""
    apply_many = getattr(projector, "apply_many", None)
    if apply_many is not None:
        apply_many(conn, events)
        return
    for event in events:
        projector.apply(conn, event)


def _advance_checkpoints(conn: Any, names: Sequence[str], start: int, end: int) -> None:
    """Move the named checkpoints from ``start`` to ``end``; a checkpoint elsewhere is a gap."""
    marks = ",".join("?" * len(names))
    moved = conn.execute(
        f"UPDATE projector_checkpoints SET position = ? WHERE position = ? AND name IN ({marks})",
        (end, start, *names),
    ).rowcount
    if moved != len(names):
        raise _gap(start + 1)


def _gap(commit_seq: int) -> IntegrityError:
    return IntegrityError(f"projection checkpoint gap before commit_seq {commit_seq}",
                          details={"commit_seq": commit_seq},
                          hint="Run `memoree reindex` to rebuild the projections.")


class _DeferredCheckpoints:
    """What a ``deferred_mode`` block needs to advance checkpoints at its end."""

    def __init__(self, conn: Any, names: tuple[str, ...]) -> None:
        self.names = names
        row = conn.execute("SELECT position FROM projector_checkpoints WHERE name = ?",
                           (names[0],)).fetchone() if names else None
        self.start = 0 if row is None else row[0]
        self.last: int | None = None  # the newest event applied in the block

    def applied(self, first: int, last: int) -> None:
        # Positions at or below the newest applied one are those a rolled-back request freed.
        if first > (self.start if self.last is None else self.last) + 1:
            raise _gap(first)
        self.last = last

    def advance(self, conn: Any) -> None:
        if self.last is None:
            return
        # A request rolled back to its savepoint after its events were applied took them with it:
        # the log's head says where the applied events that stayed end.
        head = conn.execute("SELECT coalesce(max(commit_seq), 0) FROM events").fetchone()[0]
        end = min(self.last, head)
        if end != self.start:
            _advance_checkpoints(conn, self.names, self.start, end)


def projection_sink(projectors: Sequence[Projector]) -> EventSink:
    """An ``EventSink`` that applies events to ``projectors`` (how a shared log's replica feeds
    them). A page of several events is applied in ``deferred_mode``: its text is indexed and
    embedded once for the page, as a group's is, instead of once per event."""
    chosen = list(projectors)

    def sink(conn: Any, events: Sequence[RecordedEvent]) -> None:
        if len(events) < 2:
            apply_events(conn, chosen, events)
            return
        with deferred_mode(conn, chosen):
            apply_events(conn, chosen, events)

    return sink


def reset(conn: Any, projector: Projector) -> None:
    """Drop a projector's tables, recreate them empty and zero its checkpoint."""
    for table in reversed(owned_tables(projector)):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    execute_script(conn, projector.schema)
    conn.execute(
        "INSERT INTO projector_checkpoints (name, version, position) VALUES (?, ?, 0) "
        "ON CONFLICT(name) DO UPDATE SET version = excluded.version, position = 0",
        (projector.name, projector.version),
    )


# Connections (by id) whose checkpoints an outer ``deferred_mode`` advances at its end: the
# projector names it covers and the log position they were at when it began.
_deferred_checkpoints: dict[int, _DeferredCheckpoints] = {}


@contextmanager
def deferred_mode(conn: Any, projectors: Sequence[Projector]) -> Iterator[None]:
    """A group of mutations in one transaction: projectors that can (FTS, vectors) do their
    per-text work once, at the group's end, through their own ``deferred(conn)``, and the
    checkpoints move once, from where they stood to the newest event applied in the block that
    the log still holds (a request rolled back to its savepoint took its events and rows with
    it); the move refuses a gap as each request's would. Nested use defers to the outermost
    block. Nothing moves when the block raises: the transaction is being rolled back anyway."""
    with ExitStack() as stack:
        for projector in projectors:
            deferred = getattr(projector, "deferred", None)
            if deferred is not None:  # re-entrant: an inner block joins the outer deferral
                stack.enter_context(deferred(conn))
        if id(conn) in _deferred_checkpoints:
            yield
            return
        deferred = _DeferredCheckpoints(conn, tuple(p.name for p in projectors))
        _deferred_checkpoints[id(conn)] = deferred
        try:
            yield
        finally:
            del _deferred_checkpoints[id(conn)]
        deferred.advance(conn)


@contextmanager
def bulk_mode(conn: Any, projectors: Sequence[Projector]) -> Iterator[None]:
    """Replaying a whole log into fresh tables: projectors that can (e.g. FTS) skip per-row index
    work, which the caller then builds at once (``projections.fts_bulk``)."""
    bulky = [p for p in projectors if hasattr(p, "begin_bulk")]
    for projector in bulky:
        projector.begin_bulk(conn)  # type: ignore[attr-defined]
    try:
        yield
        for projector in bulky:  # work left to the end of a replay that went through
            finish = getattr(projector, "finish_bulk", None)
            if finish is not None:
                finish(conn)
    finally:
        for projector in bulky:
            projector.end_bulk(conn)  # type: ignore[attr-defined]
