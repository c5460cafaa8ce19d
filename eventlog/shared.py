"""Scale-out: this host's side of a log shared through PostgreSQL.

In shared mode (see ``memoree.service.logconfig``) the PostgreSQL database is the log. Each host keeps,
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
(``memoree.eventlog.follower``) keeps idle hosts current.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memoree.errors import InternalError, MemoreeError
from memoree.eventlog.checkpoints import Checkpoint, list_checkpoints
from memoree.eventlog.db import sqlite3
from memoree.eventlog.postgres import PostgresContentStore, PostgresEventStore
from memoree.eventlog.replica import (
    INSERT_NOOP,
    local_counts,
    store_replica,
    CATCH_UP_PAGE,
    READ_WAIT_S,
    REPLICA_SYNCHRONOUS,
    catch_up,
    has_projections,
    replica_head,
    require_same_history,
)
from memoree.eventlog.sqlite import savepoint
from memoree.eventlog.store import EventSink, IdempotencyHit, LogHead, NewEvent, RawEvent, RecordedEvent

__all__ = ["SharedLog", "require_recorded_key"]


# ---------------------------------------------------------------------- the store the engine uses


class SharedLog:
    """The event store of a host in shared mode: PostgreSQL log, local replica and projections."""

    def __init__(self, url: str, conn: Any, db_path: Path) -> None:
        self.url = url
        self.conn = conn
        self.db_path = db_path
        self.pg = PostgresEventStore(url)
        self.cas = PostgresContentStore(self.pg, conn, db_path.parent / "blobs")
        self.apply: EventSink | None = None
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

    def follow(self, apply: EventSink, make_sink: Callable[[Any], EventSink], *,
               poll_s: float = 0.5) -> None:
        """Attach the engine's projections (``apply``, kept current in every transaction) and start
        following; ``make_sink(cas)`` builds the follower's own projections on its own connection."""
        from memoree.eventlog.follower import Follower

        self.apply = apply
        self.follower = Follower(self.url, self.db_path, make_sink, poll_s=poll_s,
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
                if has_projections(self.conn):
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
                catch_up(self.pg, self.conn, self.apply, shared=locked)
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
        newest = local_counts(self.conn)[1]
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
        self.conn.execute(INSERT_NOOP, (key, request_digest, operation, commit_seq, result_json, at))

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
                if self.apply is None:
                    return
                with self._local_write():
                    if catch_up(self.pg, self.conn, self.apply, max_events=CATCH_UP_PAGE) == 0:
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
