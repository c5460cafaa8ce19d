"""The SQLite event-log backend: WAL, ``synchronous=FULL``, ``BEGIN IMMEDIATE``, one writer.

``commit_seq`` is assigned inside the append transaction as the last position plus one (an explicit
column, never SQLite's own rowid choice), so positions are dense and follow commit order. The
unique ``(stream_id, stream_version)`` gives optimistic concurrency; the unique namespaced
``idempotency_key`` makes retries durable. Triggers make stored events immutable. This module is
the one place that translates ``sqlite3`` errors into the error tree.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from memoree.errors import ContentTooLarge, DiskFull, IdempotencyConflict, InternalError, MemoreeError

from .codec import GENESIS_HASH, chain_hash, decode_envelope, decode_payload, encode_event
from .checkpoints import CHECKPOINT_SCHEMA
from .db import execute_script, sqlite3
from .store import (
    IdempotencyHit,
    LogHead,
    NewEvent,
    RawEvent,
    RecordedEvent,
    StreamVersionConflict,
    paged_raw_events,
)

__all__ = ["INSERT_EVENT", "LOG_SCHEMA", "SqliteEventStore", "count_noops_once", "savepoint", "translate_sqlite_error"]

LOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    commit_seq      INTEGER PRIMARY KEY,
    event_id        TEXT NOT NULL UNIQUE,
    type            TEXT NOT NULL,
    stream_id       TEXT NOT NULL,
    stream_version  INTEGER NOT NULL CHECK (stream_version > 0),
    at              TEXT NOT NULL,
    idempotency_key TEXT UNIQUE,
    request_digest  TEXT,
    data            BLOB NOT NULL,
    prev_hash       BLOB NOT NULL,
    hash            BLOB NOT NULL,
    UNIQUE (stream_id, stream_version)
) STRICT;
-- Only purges are ever looked up by type (is this blob, this artifact's, purged?), so only they
-- are indexed: an append of any other event touches no index page for it. Earlier stores had an
-- index of every event by type; it goes when they open.
DROP INDEX IF EXISTS events_by_type;
CREATE INDEX IF NOT EXISTS events_purges ON events(stream_id) WHERE type = 'artifact.purged';
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
-- No-op outcomes (e.g. an identical relation edge) commit no event but still record their key:
-- an authoritative, append-only record beside the log, never a projection (reindex keeps it).
CREATE TABLE IF NOT EXISTS idempotency_noops (
    key            TEXT PRIMARY KEY,
    request_digest TEXT NOT NULL,
    operation      TEXT NOT NULL,
    commit_seq     INTEGER NOT NULL REFERENCES events(commit_seq),
    result_json    BLOB NOT NULL,
    recorded_at    TEXT NOT NULL
) STRICT, WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS idempotency_noops_no_update BEFORE UPDATE ON idempotency_noops
    BEGIN SELECT RAISE(ABORT, 'no-op idempotency records are append-only'); END;
CREATE TRIGGER IF NOT EXISTS idempotency_noops_no_delete BEFORE DELETE ON idempotency_noops
    BEGIN SELECT RAISE(ABORT, 'no-op idempotency records are append-only'); END;
-- How many no-op records there are, counted by a trigger in the transaction that records one: a
-- shared log's host compares it with the shared head's count at its writes, where count(*) would
-- read every record ever made. A store from before the count gets its row at open
-- (``count_noops_once``), after the trigger exists, so no record is missed or counted twice.
CREATE TABLE IF NOT EXISTS idempotency_noop_count (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    noops     INTEGER NOT NULL CHECK (noops >= 0)
) STRICT;
CREATE TRIGGER IF NOT EXISTS idempotency_noops_counted AFTER INSERT ON idempotency_noops
    BEGIN UPDATE idempotency_noop_count SET noops = noops + 1; END;
"""

INSERT_EVENT = (
    "INSERT INTO events (commit_seq, event_id, type, stream_id, stream_version, at, "
    "idempotency_key, request_digest, data, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
)


def count_noops_once(conn: Any) -> None:
    """Give a store from before ``idempotency_noop_count`` its row: one count of the records, taken
    after the trigger that keeps it exists (a record made in between is in the count, and its
    trigger found no row to move). Nothing is written when the row is there (a read-only
    snapshot, such as a migration's, stays one); two processes racing keep the first row."""
    if conn.execute("SELECT 1 FROM idempotency_noop_count").fetchone() is None:
        conn.execute("INSERT OR IGNORE INTO idempotency_noop_count (singleton, noops) "
                     "SELECT 1, count(*) FROM idempotency_noops")


class SqliteEventStore:
    """The event log in an SQLite database whose connection the projections share."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._depth = 0
        # Inside a write transaction: the head after this store's last append, so the next append
        # (a group's next request) does not read it back. Forgotten at every transaction's end
        # and whenever a savepoint rolls back (which may take appended events with it).
        self._head: LogHead | None = None
        execute_script(conn, LOG_SCHEMA)
        execute_script(conn, CHECKPOINT_SCHEMA)
        count_noops_once(conn)

    @contextmanager
    def transaction(self, *, decides_on_input: bool = False) -> Iterator[Any]:
        """One write transaction (``BEGIN IMMEDIATE``).

        Nested use becomes a savepoint inside the outer transaction: a failure rolls back only
        the inner unit, and nothing is durable until the outermost transaction commits. Group
        commit relies on this: several requests, each in its own savepoint, one COMMIT.
        ``decides_on_input`` (a hint for a shared log: nothing to catch up first) changes nothing
        here, where this file is the whole log.
        """
        if self._depth:
            yield from self._savepoint()
            return
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise translate_sqlite_error(exc) from exc
        self._depth, self._head = 1, None
        try:
            yield self.conn
        except BaseException:
            self._depth, self._head = 0, None
            self.conn.execute("ROLLBACK")
            raise
        self._depth, self._head = 0, None
        try:
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise translate_sqlite_error(exc) from exc

    def _savepoint(self) -> Iterator[Any]:
        self._depth += 1
        try:
            with savepoint(self.conn, f"unit{self._depth - 1}"):
                yield self.conn
        except BaseException:
            self._head = None  # the rollback may have taken appended events with it
            raise
        finally:
            self._depth -= 1

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    def append(self, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        """Append events at the next positions; must run inside ``transaction()``."""
        if not self._depth:
            raise InternalError("append outside a write transaction")
        head = self._head if self._head is not None else self.head()
        seq, prev = head.commit_seq, head.hash
        recorded: list[RecordedEvent] = []
        for event in events:
            seq += 1
            data = encode_event(
                commit_seq=seq, event_id=event.event_id, type=event.type,
                stream_id=event.stream_id, stream_version=event.stream_version, at=event.at,
                scope=event.scope, idempotency_key=event.idempotency_key,
                request_digest=event.request_digest, payload=event.payload,
            )
            digest = chain_hash(prev, data)
            recorded.append(RecordedEvent(
                commit_seq=seq, event_id=event.event_id, type=event.type,
                stream_id=event.stream_id, stream_version=event.stream_version, at=event.at,
                scope=event.scope, idempotency_key=event.idempotency_key,
                request_digest=event.request_digest, payload=event.payload, data=data,
                prev_hash=prev, hash=digest,
            ))
            prev = digest
        self._insert(recorded)
        self._head = LogHead(seq, prev)
        return recorded

    def _insert(self, recorded: Sequence[RecordedEvent]) -> None:
        """The rows of appended events, in one statement (a batch's events go in together)."""
        rows = [(e.commit_seq, e.event_id, e.type, e.stream_id, e.stream_version, e.at,
                 e.idempotency_key, e.request_digest, e.data, e.prev_hash, e.hash) for e in recorded]
        before = self.conn.total_changes
        try:
            if len(rows) == 1:
                self.conn.execute(INSERT_EVENT, rows[0])
            else:
                self.conn.executemany(INSERT_EVENT, rows)
        except sqlite3.IntegrityError as exc:
            # The rows before the refused one went in (each changes one row): it is the next.
            refused = recorded[min(self.conn.total_changes - before, len(recorded) - 1)]
            raise _append_conflict(exc, refused) from exc
        except sqlite3.Error as exc:
            raise translate_sqlite_error(exc) from exc

    def head(self) -> LogHead:
        row = self.conn.execute(
            "SELECT commit_seq, hash FROM events ORDER BY commit_seq DESC LIMIT 1"
        ).fetchone()
        return LogHead(0, GENESIS_HASH) if row is None else LogHead(row[0], bytes(row[1]))

    def read(self, after: int = 0, limit: int | None = None) -> Iterator[RecordedEvent]:
        """Yield events after position ``after`` in order, decoded from their stored bytes."""
        return read_events(self.conn, after, limit)

    def read_raw(self, after: int = 0, limit: int | None = None) -> Iterator[RawEvent]:
        return read_raw_events(self.conn, after, limit)

    def find_idempotency_key(self, key: str) -> IdempotencyHit | None:
        row = self.conn.execute(
            "SELECT commit_seq, request_digest, type FROM events WHERE idempotency_key = ?", (key,)
        ).fetchone()
        return None if row is None else IdempotencyHit(row[0], row[1] or "", row[2])

    def known_keys(self, keys: Sequence[str]) -> set[str]:
        """Which of ``keys`` the log (or its no-op table) has recorded, in one look-up."""
        rows = self.conn.execute(
            "SELECT idempotency_key FROM events WHERE idempotency_key IN (SELECT value FROM json_each(?1)) "
            "UNION ALL SELECT key FROM idempotency_noops WHERE key IN (SELECT value FROM json_each(?1))",
            (json.dumps(list(keys)),))
        return {key for (key,) in rows}

    def record_noop(self, key: str, request_digest: str, operation: str, commit_seq: int,
                    result_json: bytes, at: str) -> None:
        """Record the key of a mutation that committed nothing; must run inside ``transaction()``."""
        if not self._depth:
            raise InternalError("record_noop outside a write transaction")
        try:
            self.conn.execute(
                "INSERT INTO idempotency_noops (key, request_digest, operation, commit_seq, "
                "result_json, recorded_at) VALUES (?, ?, ?, ?, ?, ?)",
                (key, request_digest, operation, commit_seq, result_json, at),
            )
        except sqlite3.IntegrityError as exc:
            if "idempotency_noops.key" in str(exc):
                raise IdempotencyConflict(key, details={"idempotency_key": key}) from exc
            raise translate_sqlite_error(exc) from exc
        except sqlite3.Error as exc:
            raise translate_sqlite_error(exc) from exc

    def find_noop(self, key: str) -> tuple[str, str, int, bytes] | None:
        """``(request_digest, operation, commit_seq, result_json)`` of a recorded no-op key."""
        row = self.conn.execute(
            "SELECT request_digest, operation, commit_seq, result_json FROM idempotency_noops "
            "WHERE key = ?", (key,),
        ).fetchone()
        return None if row is None else (row[0], row[1], row[2], bytes(row[3]))

    def stream_version(self, stream_id: str) -> int:
        row = self.conn.execute(
            "SELECT max(stream_version) FROM events WHERE stream_id = ?", (stream_id,)
        ).fetchone()
        return row[0] or 0


@contextmanager
def savepoint(conn: Any, name: str) -> Iterator[Any]:
    """A nested unit inside the connection's open transaction: a failure rolls back only it."""
    if not conn.in_transaction:
        # SQLite rolled the enclosing transaction back on its own (e.g. a full disk mid-group):
        # a savepoint now would quietly start and commit a transaction of its own.
        raise InternalError("the enclosing transaction was rolled back; nothing was written",
                            retryable=True)
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield conn
    except BaseException:
        conn.execute(f"ROLLBACK TO {name}")
        conn.execute(f"RELEASE {name}")
        raise
    conn.execute(f"RELEASE {name}")


def _append_conflict(exc: Exception, event: NewEvent | RecordedEvent) -> MemoreeError:
    text = str(exc)
    if "stream_id" in text or "stream_version" in text:
        return StreamVersionConflict(
            f"stream {event.stream_id} already has version {event.stream_version}",
            details={"stream_id": event.stream_id, "stream_version": event.stream_version},
        )
    if "idempotency_key" in text:
        return IdempotencyConflict(
            event.idempotency_key or "", details={"idempotency_key": event.idempotency_key}
        )
    return translate_sqlite_error(exc)


def read_events(conn: Any, after: int = 0, limit: int | None = None) -> Iterator[RecordedEvent]:
    """The events of this file's log after position ``after``, in order, decoded from their stored
    bytes, read through ``conn`` (any connection to the file, read-only ones included)."""
    for raw in read_raw_events(conn, after, limit):
        envelope = decode_envelope(raw.data)
        yield RecordedEvent(
            commit_seq=raw.commit_seq, event_id=envelope.event_id, type=envelope.type,
            stream_id=envelope.stream_id, stream_version=envelope.stream_version,
            at=envelope.at, scope=envelope.scope, idempotency_key=envelope.idempotency_key,
            request_digest=envelope.request_digest, payload=decode_payload(envelope),
            data=raw.data, prev_hash=raw.prev_hash, hash=raw.hash,
        )


def read_raw_events(conn: Any, after: int = 0, limit: int | None = None) -> Iterator[RawEvent]:
    return paged_raw_events(lambda start, take: conn.execute(
        "SELECT commit_seq, type, data, prev_hash, hash FROM events "
        "WHERE commit_seq > ? ORDER BY commit_seq LIMIT ?", (start, take)).fetchall(), after, limit)


@contextmanager
def storage_errors() -> Iterator[None]:
    """Turn a failure of the disk under the store (an OS or SQLite error) into a typed error."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:  # e.g. a full disk: a typed error, never a traceback
        raise translate_storage_error(exc) from None


def translate_storage_error(exc: Exception) -> MemoreeError:
    """A typed error for a failure of the disk under the store: an OS error or a SQLite one."""
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return DiskFull(f"{exc.strerror or exc}")
        return InternalError(f"I/O error: {exc}", hint="Check the data dir's disk (free space, permissions) and try again.")
    return translate_sqlite_error(exc)


def translate_sqlite_error(exc: Exception) -> MemoreeError:
    """Map a driver error onto the error tree (disk full, busy, corruption, anything else)."""
    text = str(exc)
    lowered = text.lower()
    if "disk is full" in lowered or "database or disk is full" in lowered:
        return DiskFull(text)
    if "locked" in lowered or "busy" in lowered:
        return InternalError(f"database error: {text}", retryable=True,
                             hint="Another writer holds the database; retry shortly.")
    if "too big" in lowered:
        return ContentTooLarge(f"content exceeds the configured size limit: {text}")
    if "malformed" in lowered or "not a database" in lowered:
        return InternalError(f"database error: {text}", hint="Run `memoree verify`; restore from a backup if it reports damage.")
    return InternalError(f"database error: {text}")
