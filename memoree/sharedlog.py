"""Scale-out: this host's side of a log shared through PostgreSQL.

In shared mode (see ``memoree.logconfig``) the PostgreSQL database is the log. Each host keeps,
in its own SQLite file:

- a **replica** of the log: the same ``events`` rows, byte for byte, copied in order and checked
  on the way in (dense positions, ``prev_hash``, chain hash, envelope), so everything that reads
  the log locally (seal, prove, purge bookkeeping, export) keeps working;
- copies of the no-op idempotency records and the signed checkpoints;
- its **projections**, advanced in the same local transaction as the replica.

``SharedLog`` is the event store the engine and the command handler use. A write transaction
takes the append lock in PostgreSQL first, then the local write lock, catches the replica and
the projections up to the shared head, and only then lets the handler load state and decide
(lock, catch up, decide, append): no decision is made against a stale projection. Commit is
PostgreSQL first, then local: the replica is always a prefix of the shared log, and a host that
dies between the two simply catches up again. Outside a transaction ``head()`` is this host's
position; when the shared log is ahead it catches up briefly before answering, so a read with
``min_commit_seq`` waits a moment or answers INDEX_NOT_READY. The background follower
(``memoree.follower``) keeps idle hosts current.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memoree.errors import IntegrityError, InternalError, MemoreeError
from memoree.eventlog.checkpoints import Checkpoint, insert_checkpoint, list_checkpoints
from memoree.eventlog.codec import GENESIS_HASH
from memoree.eventlog.db import sqlite3
from memoree.eventlog.sqlite import savepoint
from memoree.eventlog.postgres import (
    PostgresContentStore,
    PostgresEventStore,
    SharedCounters,
    recorded_from_raw,
    redact_url,
)
from memoree.eventlog.store import (
    ChainBreak,
    IdempotencyHit,
    LogHead,
    NewEvent,
    RawEvent,
    RecordedEvent,
    first_chain_break,
)
from memoree.projections.base import Projector, apply_events

__all__ = [
    "CATCH_UP_PAGE",
    "READ_WAIT_S",
    "REPLICA_SYNCHRONOUS",
    "SharedLog",
    "behind",
    "catch_up",
    "copy_side_records",
    "replica_head",
    "require_recorded_key",
    "require_same_history",
    "store_replica",
    "verified_page",
]

CATCH_UP_PAGE = 500
READ_WAIT_S = 2.0
REPLICA_SYNCHRONOUS = "NORMAL"

_INSERT_REPLICA = (
    "INSERT INTO events (commit_seq, event_id, type, stream_id, stream_version, at, "
    "idempotency_key, request_digest, data, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
)
_INSERT_NOOP = (
    "INSERT INTO idempotency_noops (key, request_digest, operation, commit_seq, result_json, "
    "recorded_at) VALUES (?, ?, ?, ?, ?, ?)"
)


# ---------------------------------------------------------------------- the local replica


def replica_head(conn: Any) -> LogHead:
    row = conn.execute(
        "SELECT commit_seq, hash FROM events ORDER BY commit_seq DESC LIMIT 1").fetchone()
    return LogHead(0, GENESIS_HASH) if row is None else LogHead(row[0], bytes(row[1]))


def store_replica(conn: Any, events: Sequence[RecordedEvent]) -> None:
    conn.executemany(_INSERT_REPLICA, [
        (e.commit_seq, e.event_id, e.type, e.stream_id, e.stream_version, e.at,
         e.idempotency_key, e.request_digest, e.data, e.prev_hash, e.hash)
        for e in events
    ])


def _has_projections(conn: Any) -> bool:
    """Whether any projector has ever run on this file."""
    table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'projector_checkpoints'").fetchone()
    return table is not None and conn.execute(
        "SELECT 1 FROM projector_checkpoints LIMIT 1").fetchone() is not None


def _local_counts(conn: Any) -> tuple[int, int]:
    noops = conn.execute("SELECT count(*) FROM idempotency_noops").fetchone()[0]
    checkpoints = conn.execute("SELECT coalesce(max(checkpoint_seq), 0) FROM checkpoints").fetchone()[0]
    return noops, checkpoints


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


def catch_up(pg: PostgresEventStore, conn: Any, projectors: Sequence[Projector] | None, *,
             max_events: int | None = None, shared: SharedCounters | None = None) -> int:
    """Copy and apply what the shared log holds beyond this host's replica; return the count.

    The caller holds a local write transaction. ``shared`` are the counters read under the
    append lock (read here when not given). ``projectors`` None copies the replica only (while an
    engine opens, before its projection tables exist). The shared head naming a position that
    the log does not hold, or a replica ahead of it, is an integrity error, never lag.
    """
    shared = shared or pg.counters()
    head, copied = replica_head(conn), 0
    if head.commit_seq > shared.seq:
        raise IntegrityError(
            f"this host's replica is at commit_seq {head.commit_seq}, beyond the shared log's "
            f"head {shared.seq}", details={"commit_seq": head.commit_seq},
            hint="The shared log lost events (restored from an older backup?); run `memoree verify`.")
    while head.commit_seq < shared.seq and (max_events is None or copied < max_events):
        want = min(CATCH_UP_PAGE, shared.seq - head.commit_seq)
        rows = list(pg.read_raw(after=head.commit_seq, limit=want))
        events = verified_page(head, rows, shared.seq)
        store_replica(conn, events)
        if projectors is not None:
            apply_events(conn, projectors, events)
        head, copied = LogHead(events[-1].commit_seq, events[-1].hash), copied + len(events)
    if head.commit_seq == shared.seq:
        copy_side_records(pg, conn, shared)
    return copied


def behind(conn: Any, shared: SharedCounters) -> bool:
    """Whether this host lacks events, no-op records or checkpoints the shared log counts."""
    noops, checkpoints = _local_counts(conn)
    return (replica_head(conn).commit_seq < shared.seq or noops < shared.noops
            or checkpoints < shared.checkpoints)


def copy_side_records(pg: PostgresEventStore, conn: Any, shared: SharedCounters) -> None:
    """Copy the no-op records and signed checkpoints this host does not hold yet."""
    local_noops, local_checkpoints = _local_counts(conn)
    if shared.noops > local_noops:
        conn.executemany(_INSERT_NOOP, pg.noops_after(local_noops))
    if shared.checkpoints > local_checkpoints:
        for checkpoint in pg.list_checkpoints(after=local_checkpoints):
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


# ---------------------------------------------------------------------- the store the engine uses


class SharedLog:
    """The event store of a host in shared mode: PostgreSQL log, local replica and projections."""

    def __init__(self, url: str, conn: Any, db_path: Path) -> None:
        self.url = url
        self.conn = conn
        self.db_path = db_path
        self.pg = PostgresEventStore(url)
        self.cas = PostgresContentStore(self.pg, conn, db_path.parent / "blobs")
        self.projectors: list[Projector] | None = None
        self.follower: Any = None
        self._depth = 0
        self._checkpoints_before = 0
        # Serializes this process's local writers (the engine and its follower) without SQLite's
        # sleeping busy handler; other processes on the same file still meet SQLite's own lock.
        self.local_lock = threading.Lock()
        # PostgreSQL makes every write durable; this file is rebuilt from it by catch-up after a
        # crash, so its commits need not fsync on their own.
        conn.execute(f"PRAGMA synchronous = {REPLICA_SYNCHRONOUS}")
        try:
            require_same_history(self.pg, conn)
            self._prefill_replica()
        except BaseException:
            self.pg.close()
            raise

    # -------------------------------------------------------------- lifecycle

    def follow(self, projectors: Sequence[Projector],
               make_projectors: Callable[[Any], list[Projector]], *, poll_s: float = 0.5) -> None:
        """Attach the engine's projectors (kept current in every transaction) and start following."""
        from memoree.follower import Follower

        self.projectors = list(projectors)
        self.follower = Follower(self.url, self.db_path, make_projectors, poll_s=poll_s,
                                 local_lock=self.local_lock)
        self.follower.start()

    def close(self) -> None:
        if self.follower is not None:
            self.follower.stop()
            self.follower = None
        self.pg.close()

    def _prefill_replica(self) -> None:
        """Copy the bulk of a long log without the append lock, so opening holds it only briefly.

        Only a file without projections is prefilled: elsewhere the replica and the projections
        must advance together, or a writer would decide against projections behind its replica.
        """
        while True:
            with self._local_write():
                if _has_projections(self.conn):
                    return
                if catch_up(self.pg, self.conn, None, max_events=CATCH_UP_PAGE * 10) == 0:
                    return

    @contextmanager
    def _local_write(self) -> Iterator[None]:
        with self.local_lock:
            self._begin_local()
            try:
                yield
            except BaseException:
                self._rollback_local()
                raise
            self.conn.execute("COMMIT")

    def _begin_local(self) -> None:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise InternalError(f"this host's replica is busy: {exc}", retryable=True) from exc

    def _rollback_local(self) -> None:
        """Roll the local transaction back unless SQLite already did (after I/O errors it may)."""
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    # -------------------------------------------------------------- transactions

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """Lock the shared log, catch this host up, yield the local connection; commit both.

        Nested use is a savepoint on both sides (group commit in the daemon relies on it).
        """
        if self._depth:
            yield from self._savepoint()
            return
        locked = self.pg.begin()
        with self.local_lock:
            try:
                self._begin_local()
            except BaseException:
                self.pg.rollback()
                raise
            self._depth = 1
            try:
                catch_up(self.pg, self.conn, self.projectors, shared=locked)
                self._checkpoints_before = locked.checkpoints
                yield self.conn
                self._push_checkpoints()
            except BaseException:
                self._depth = 0
                self.pg.rollback()
                self._rollback_local()
                raise
            self._depth = 0
            self._commit_both()

    def _savepoint(self) -> Iterator[Any]:
        name = f"unit{self._depth}"
        with self.pg.savepoint():
            self._depth += 1
            try:
                with savepoint(self.conn, name):
                    yield self.conn
            finally:
                self._depth -= 1

    def _commit_both(self) -> None:
        try:
            self.pg.commit()
        except MemoreeError:
            self._rollback_local()
            raise
        try:
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback_local()
            raise InternalError(
                f"the shared log committed but this host's replica did not: {exc}", retryable=True,
                hint="The host catches up on its own; retry with the same idempotency key to get "
                     "the original result.") from exc

    def _push_checkpoints(self) -> None:
        """Publish checkpoints sealed in this transaction (the local table holds them first)."""
        newest = _local_counts(self.conn)[1]
        if newest > self._checkpoints_before:
            for checkpoint in list_checkpoints(self.conn)[self._checkpoints_before:]:
                self.pg.insert_checkpoint(checkpoint)

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    # -------------------------------------------------------------- appends and records

    def append(self, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        """Append to the shared log and to this host's replica, inside ``transaction()``."""
        if not self._depth:
            raise InternalError("append outside a write transaction")
        recorded = self.pg.append(events)
        store_replica(self.conn, recorded)
        return recorded

    def record_noop(self, key: str, request_digest: str, operation: str, commit_seq: int,
                    result_json: bytes, at: str) -> None:
        if not self._depth:
            raise InternalError("record_noop outside a write transaction")
        self.pg.record_noop(key, request_digest, operation, commit_seq, result_json, at)
        self.conn.execute(_INSERT_NOOP, (key, request_digest, operation, commit_seq, result_json, at))

    def find_noop(self, key: str) -> tuple[str, str, int, bytes] | None:
        """Inside a transaction the caught-up replica answers; outside, the shared log does."""
        if not self._depth:
            return self.pg.find_noop(key)
        row = self.conn.execute(
            "SELECT request_digest, operation, commit_seq, result_json FROM idempotency_noops "
            "WHERE key = ?", (key,)).fetchone()
        return None if row is None else (row[0], row[1], row[2], bytes(row[3]))

    def find_idempotency_key(self, key: str) -> IdempotencyHit | None:
        return self.pg.find_idempotency_key(key)

    def stream_version(self, stream_id: str) -> int:
        return self.pg.stream_version(stream_id)

    def list_checkpoints(self) -> list[Checkpoint]:
        return self.pg.list_checkpoints()

    # -------------------------------------------------------------- reads

    def read(self, after: int = 0, limit: int | None = None) -> Iterator[RecordedEvent]:
        """The shared log's events (inside a transaction: identical to the caught-up replica)."""
        return self.pg.read(after, limit)

    def read_raw(self, after: int = 0, limit: int | None = None) -> Iterator[RawEvent]:
        return self.pg.read_raw(after, limit)

    def head(self) -> LogHead:
        """This host's position; outside a transaction, caught up briefly first when behind."""
        if not self._depth and not self.conn.in_transaction:
            self._catch_up_for_read()
        return replica_head(self.conn)

    def _catch_up_for_read(self) -> None:
        """Bring this host toward the shared head within ``READ_WAIT_S``; never fail a read."""
        deadline = time.monotonic() + READ_WAIT_S
        try:
            shared = self.pg.head().commit_seq
            while replica_head(self.conn).commit_seq < shared and time.monotonic() < deadline:
                if self.projectors is None:
                    return
                with self._local_write():
                    if catch_up(self.pg, self.conn, self.projectors, max_events=CATCH_UP_PAGE) == 0:
                        return
        except (MemoreeError, sqlite3.Error) as exc:
            from memoree.log import logger

            logger().warning("shared_log_catch_up_failed", error=getattr(exc, "message", str(exc)))


def require_recorded_key(recorded: dict[int, str], key: Any) -> None:
    """Refuse to sign with a node key that differs from the one the shared log recorded.

    Every host that seals or attests must hold the same node key (copy ``keys/`` from the host
    that recorded the epoch); a host with another key would sign checkpoints nobody can verify.
    """
    from memoree.errors import ConfigError

    if recorded.get(key.epoch) != key.public_b32:
        raise ConfigError(
            f"this host's node key (epoch {key.epoch}) is not the one the shared log recorded",
            hint="Copy the keys/ folder from the host that first recorded the key into this data "
                 "dir, then restart; until then this host neither seals nor attests.")
