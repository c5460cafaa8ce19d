"""Scale-out: this host's replica of a log shared through PostgreSQL, and how it catches up.

The replica is the same ``events`` rows, byte for byte, copied in order and checked on the way in
(dense positions, ``prev_hash``, chain hash, envelope), plus copies of the no-op idempotency
records and the signed checkpoints. ``catch_up`` copies what the shared log holds beyond the
replica and hands each page to an ``EventSink`` (the host's projections) in the same local
transaction. Both ``SharedLog`` (``memoree.eventlog.shared``) and the background ``Follower``
(``memoree.eventlog.follower``) use these functions; neither imports the other's module for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from memoree.errors import IntegrityError
from memoree.eventlog.checkpoints import insert_checkpoint
from memoree.eventlog.codec import GENESIS_HASH
from memoree.eventlog.postgres import (
    PostgresContentStore,
    PostgresEventStore,
    SharedCounters,
    SharedPage,
    recorded_from_raw,
    redact_url,
)
from memoree.eventlog.sqlite import INSERT_EVENT
from memoree.eventlog.store import ChainBreak, EventSink, LogHead, RawEvent, RecordedEvent, first_chain_break

__all__ = [
    "CATCH_UP_PAGE",
    "READ_WAIT_S",
    "REPLICA_SYNCHRONOUS",
    "behind",
    "catch_up",
    "INSERT_NOOP",
    "PageSink",
    "apply_page",
    "take_page",
    "copy_side_records",
    "local_checkpoints",
    "local_counters",
    "local_noops",
    "has_projections",
    "prefetching_sink",
    "replica_head",
    "require_same_history",
    "store_replica",
    "verified_page",
]

CATCH_UP_PAGE = 500
READ_WAIT_S = 2.0
REPLICA_SYNCHRONOUS = "NORMAL"

INSERT_NOOP = (
    "INSERT INTO idempotency_noops (key, request_digest, operation, commit_seq, result_json, "
    "recorded_at) VALUES (?, ?, ?, ?, ?, ?)"
)


def replica_head(conn: Any) -> LogHead:
    row = conn.execute(
        "SELECT commit_seq, hash FROM events ORDER BY commit_seq DESC LIMIT 1").fetchone()
    return LogHead(0, GENESIS_HASH) if row is None else LogHead(row[0], bytes(row[1]))


def store_replica(conn: Any, events: Sequence[RecordedEvent]) -> None:
    conn.executemany(INSERT_EVENT, [
        (e.commit_seq, e.event_id, e.type, e.stream_id, e.stream_version, e.at,
         e.idempotency_key, e.request_digest, e.data, e.prev_hash, e.hash)
        for e in events
    ])


class PageSink(Protocol):
    """An ``EventSink`` that can be handed what a page read brought along (``SharedPage``)."""

    def __call__(self, conn: Any, events: Sequence[RecordedEvent], page: SharedPage | None = None) -> None: ...


def prefetching_sink(cas: PostgresContentStore, sink: EventSink) -> PageSink:
    """``sink`` with each page's blobs and purges at hand: those its page read brought, else read
    from the shared log in one go first."""

    def apply(conn: Any, events: Sequence[RecordedEvent], page: SharedPage | None = None) -> None:
        with cas.prefetched(events, page):
            sink(conn, events)

    return apply


def has_projections(conn: Any) -> bool:
    """Whether any projector has ever run on this file."""
    table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'projector_checkpoints'").fetchone()
    return table is not None and conn.execute(
        "SELECT 1 FROM projector_checkpoints LIMIT 1").fetchone() is not None


# This host's counts of what the shared head counts beside its position: the no-op records (the
# trigger-kept ``idempotency_noop_count``, never a count of the table) and the checkpoints (their
# numbers are dense: the last one, by the primary key). Each is a look-up of one row.
_NOOPS = "SELECT noops FROM idempotency_noop_count"
_CHECKPOINTS = "SELECT coalesce(max(checkpoint_seq), 0) FROM checkpoints"
_COUNTERS = (
    f"SELECT e.commit_seq, e.hash, c.noops, ({_CHECKPOINTS}) FROM idempotency_noop_count AS c "
    "LEFT JOIN events AS e ON e.commit_seq = (SELECT max(commit_seq) FROM events)"
)


def local_noops(conn: Any) -> int:
    """How many no-op records this host holds."""
    return conn.execute(_NOOPS).fetchone()[0]


def local_checkpoints(conn: Any) -> int:
    """How many signed checkpoints this host holds."""
    return conn.execute(_CHECKPOINTS).fetchone()[0]


def local_counters(conn: Any) -> SharedCounters:
    """This host's replica as the shared head's counters would read it (position, no-op records,
    checkpoints, hash), in one statement."""
    seq, digest, noops, checkpoints = conn.execute(_COUNTERS).fetchone()
    return SharedCounters(0, noops, checkpoints, GENESIS_HASH) if seq is None else \
        SharedCounters(seq, noops, checkpoints, bytes(digest))


def verified_page(head: LogHead, rows: list[RawEvent], shared_seq: int) -> list[RecordedEvent]:
    """Decode rows that must continue ``head`` exactly; a gap or a break is an integrity error."""
    brk = first_chain_break(iter(rows), start_seq=head.commit_seq + 1, start_hash=head.hash)
    if brk is None and not rows:
        brk = ChainBreak(head.commit_seq + 1, f"the shared head is {shared_seq} but no event "
                                              f"follows {head.commit_seq}")
    if brk is not None:
        raise IntegrityError(
            f"the shared log does not continue this host's replica at commit_seq "
            f"{brk.commit_seq}: {brk.problem}",
            details={"commit_seq": brk.commit_seq, "problem": brk.problem},
            hint="A gap or a changed event in the shared log is corruption, not lag: stop writers, "
                 "run `memoree verify`, restore the log from a backup.",
        )
    return [recorded_from_raw(row) for row in rows]


def catch_up(pg: PostgresEventStore, conn: Any, apply: PageSink | None, *,
             max_events: int | None = None, shared: SharedCounters | None = None) -> int:
    """Copy and apply what the shared log holds beyond this host's replica; return the count.

    The caller holds a local write transaction. ``shared`` are the counters read under the
    append lock (else the first page's, read with it). ``apply`` advances this host's projections
    in the same transaction; None copies the replica only (while an engine opens, before its
    projection tables exist). The shared head naming a position that the log does not hold, or a
    replica ahead of it, is an integrity error, never lag.
    """
    head, copied = replica_head(conn), 0
    while max_events is None or copied < max_events:
        want = CATCH_UP_PAGE if shared is None else min(CATCH_UP_PAGE, shared.seq - head.commit_seq)
        if want <= 0:
            break
        page = pg.read_page(head.commit_seq, want, through=None if shared is None else shared.seq)
        shared = shared or page.counters
        if not page.rows:
            break
        head = apply_page(conn, head, page, apply, shared.seq)
        copied += len(page.rows)
    if shared is None:
        shared = pg.counters()
    _refuse_replica_ahead(head, shared)
    if head.commit_seq == shared.seq:
        copy_side_records(pg, conn, shared)
    elif max_events is None or copied < max_events:  # the page ended before the head: a gap
        verified_page(head, [], shared.seq)
    return copied


def apply_page(conn: Any, head: LogHead, page: SharedPage, apply: PageSink | None,
               shared_seq: int) -> LogHead:
    """Store and project the page's rows, which must continue ``head``; return the new head."""
    events = verified_page(head, page.rows, shared_seq)
    store_replica(conn, events)
    if apply is not None:
        apply(conn, events, page)
    return LogHead(events[-1].commit_seq, events[-1].hash)


def take_page(pg: PostgresEventStore, conn: Any, head: LogHead, page: SharedPage,
              apply: PageSink | None) -> LogHead:
    """Apply a page read after ``head`` (this host's replica head) and, once at the page's head,
    copy the side records it counts; return the new head. The caller holds a local write
    transaction."""
    shared = page.counters
    _refuse_replica_ahead(head, shared)
    if head.commit_seq < shared.seq:  # an empty page then is a gap: apply_page refuses it
        head = apply_page(conn, head, page, apply, shared.seq)
    if head.commit_seq == shared.seq:
        copy_side_records(pg, conn, shared)
    return head


def _refuse_replica_ahead(head: LogHead, shared: SharedCounters) -> None:
    if head.commit_seq > shared.seq:
        raise IntegrityError(
            f"this host's replica is at commit_seq {head.commit_seq}, beyond the shared log's "
            f"head {shared.seq}", details={"commit_seq": head.commit_seq},
            hint="The shared log lost events (restored from an older backup?); run `memoree verify`.")


def behind(conn: Any, shared: SharedCounters) -> bool:
    """Whether this host lacks events, no-op records or checkpoints the shared log counts."""
    local = local_counters(conn)
    return local.seq < shared.seq or local.noops < shared.noops or local.checkpoints < shared.checkpoints


def copy_side_records(pg: PostgresEventStore, conn: Any, shared: SharedCounters) -> None:
    """Copy the no-op records and signed checkpoints this host does not hold yet."""
    local = local_counters(conn)
    if shared.noops > local.noops:
        conn.executemany(INSERT_NOOP, pg.noops_after(local.noops))
    if shared.checkpoints > local.checkpoints:
        for checkpoint in pg.list_checkpoints(after=local.checkpoints):
            insert_checkpoint(conn, checkpoint)


def require_same_history(pg: PostgresEventStore, conn: Any) -> None:
    """Refuse a replica that the shared log does not contain (another log, or an unmigrated one)."""
    local = replica_head(conn)
    if local.commit_seq == 0:
        return
    shared = pg.head().commit_seq
    if shared < local.commit_seq:
        raise IntegrityError(
            f"this data dir holds {local.commit_seq} events but the shared log {redact_url(pg.url)} "
            f"holds {shared}",
            hint="Move an existing store with `memoree log migrate --to URL` (with MEMOREE_LOG_URL "
                 "unset), or use a fresh data dir for a new host.")
    if pg.hash_at(local.commit_seq) != local.hash:
        raise IntegrityError(
            f"this data dir's log and the shared log differ at commit_seq {local.commit_seq}",
            details={"commit_seq": local.commit_seq},
            hint="The data dir belongs to another log; use a fresh data dir for this host.")
