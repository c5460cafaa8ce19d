"""The PostgreSQL event-log backend: one shared log that many hosts append to, and its blobs.

Every write transaction starts by locking the one row of ``log_head`` (``SELECT ... FOR UPDATE``):
that row is the append lock. An append advances the counter with ``UPDATE log_head SET seq = seq
+ n RETURNING seq`` in the same transaction, so ``commit_seq`` is dense, gapless and equal to
commit order (a rollback undoes the increment; the row lock orders the commits). There is no
sequence object anywhere. The unique ``(stream_id, stream_version)`` gives optimistic
concurrency across hosts, the unique namespaced ``idempotency_key`` makes a retry on any host find
the original, triggers make events, no-op records and checkpoints immutable, and a transaction
that appended sends exactly one ``NOTIFY`` (a doorbell for followers; it carries nothing they
rely on). Content bytes live in the ``blobs`` table, so every host can serve them.

This module is the one place that translates ``psycopg`` errors into the error tree.
"""

from __future__ import annotations

import functools
import os
import re
import select
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from memoree.errors import (
    ConfigError,
    IdempotencyConflict,
    IntegrityError,
    InternalError,
    MemoreeError,
    MissingExtra,
)

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg import pq
except ImportError as exc:  # the driver is the optional extra memoree[postgres]
    raise MissingExtra("postgres", "the shared PostgreSQL log (MEMOREE_LOG_URL, log migrate)") from exc

DriverError = psycopg.Error  # the base of every driver error, for callers that log and carry on

from .cas import ContentStore, digest_hex
from .checkpoints import Checkpoint
from .pg_schema import PG_SCHEMA
from .codec import GENESIS_HASH, chain_hash, decode_envelope, decode_payload, encode_event
from .store import (
    IdempotencyHit,
    LogHead,
    NewEvent,
    RawEvent,
    RecordedEvent,
    StreamVersionConflict,
    paged_raw_events,
)

__all__ = [
    "DriverError",
    "HeadMoved",
    "NOTIFY_CHANNEL",
    "PG_SCHEMA",
    "PostgresContentStore",
    "PostgresEventStore",
    "SharedCounters",
    "SharedPage",
    "connect_pg",
    "redact_url",
    "translate_pg_error",
]

NOTIFY_CHANNEL = "memoree_log"
SCHEMA_VERSION = "2"  # 2: memoree_head_now
LOCK_TIMEOUT_S = 30
_SCHEMA_LOCK_ID = 0x6D656D6F72656501  # an advisory lock that serializes schema creation

_INSERT_EVENT = (
    "INSERT INTO events (commit_seq, event_id, type, stream_id, stream_version, at, "
    "idempotency_key, request_digest, data, prev_hash, hash) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)

_CHECKPOINT_COLUMNS = "checkpoint_seq, tree_size, root, key_epoch, signed_at, note, signature"



# Parameter types of the one-statement append (``_append_on_guess_statement``), by row, as
# PostgreSQL's type oids: it is sent through libpq directly (``_send_prepared``).
_TEXT, _INT8, _BYTEA = 25, 20, 17
_BLOB_TYPES = (_TEXT, _INT8, _BYTEA)
_GUARD_TYPES = (_INT8, _BYTEA, _INT8, _INT8, _INT8, _BYTEA)
_EVENT_TYPES = (_INT8, _TEXT, _TEXT, _TEXT, _INT8, _TEXT, _TEXT, _TEXT, _BYTEA, _BYTEA, _BYTEA)


def _append_on_guess_statement(events: int, blobs: int) -> tuple[str, tuple[int, ...]]:
    """A whole lone write in one statement (``PostgresEventStore.append_on_guess``): the head's
    move, guarded by the guessed counters, then (only when it moved) its blobs, its rows and the
    doorbell; and its parameters' types. A wrong guess matches no head row, so nothing is written
    and the transaction stays read-only (no WAL flush). The one row it returns says whether it
    wrote and, only when it did not, the head as a snapshot taken after the move saw it
    (``memoree_head_now``, not called after a write: a head committed while the move waited for
    the row included; what the next guess can use) and, from PostgreSQL's clock, how long the
    head row was locked before the last row went in. Rows are
    VALUES lists of scalar parameters, numbered in the order they are sent."""
    types = _GUARD_TYPES + _BLOB_TYPES * blobs + _EVENT_TYPES * events
    numbers = iter(range(1, 1 + len(types)))

    def row(types: tuple[int, ...]) -> str:
        return "(" + ", ".join(f"${next(numbers)}" for _ in types) + ")"

    seq, digest, noops, checkpoints, to_seq, to_digest = (f"${next(numbers)}" for _ in _GUARD_TYPES)
    blob_rows = ", ".join(row(_BLOB_TYPES) for _ in range(blobs))
    writes_blobs = (f"blob AS (INSERT INTO blobs (hash, size, data) SELECT b.* FROM (VALUES {blob_rows}) "
                    "AS b, head ON CONFLICT (hash) DO NOTHING), ") if blobs else ""
    event_rows = ", ".join(row(_EVENT_TYPES) for _ in range(events))
    sql = (
        f"WITH head AS (UPDATE log_head SET seq = {to_seq}, hash = {to_digest} WHERE singleton "
        f"AND seq = {seq} AND hash = {digest} AND noops = {noops} AND checkpoints = {checkpoints} "
        "RETURNING clock_timestamp() AS locked_at), "
        f"{writes_blobs}"
        f"bell AS (SELECT pg_notify('{NOTIFY_CHANNEL}', '') FROM head), "
        "appended AS (INSERT INTO events (commit_seq, event_id, type, stream_id, stream_version, at, "
        "idempotency_key, request_digest, data, prev_hash, hash) "
        f"SELECT r.* FROM (VALUES {event_rows}) AS r, head, bell RETURNING clock_timestamp() AS done) "
        "SELECT w.written, n.seq, n.noops, n.checkpoints, encode(n.hash, 'hex'), "
        "extract(epoch FROM (SELECT max(done) FROM appended) - (SELECT locked_at FROM head)) "
        "FROM (SELECT EXISTS (SELECT FROM head) AS written) AS w "
        "LEFT JOIN LATERAL (SELECT * FROM memoree_head_now(w.written) WHERE NOT w.written) AS n ON true"
    )
    return sql, types


def _outcome(results: list[Any]) -> tuple[bool, SharedCounters | None, float]:
    """What the one-statement append's row says (text format; the hash as hex text, whatever the
    server's ``bytea_output``): whether it wrote; when it did, the seconds it held the head row's
    lock before its last row went in, else the head its snapshot saw."""
    result = next(r for r in results if r.status == pq.ExecStatus.TUPLES_OK)
    if result.get_value(0, 0) == b"t":
        held = result.get_value(0, 5)
        return True, None, float(held) if held is not None else 0.0
    seq, noops, checkpoints, digest = (result.get_value(0, column) for column in range(1, 5))
    return False, _counters((int(seq), int(noops), int(checkpoints), bytes.fromhex(digest.decode()))), 0.0


def _wire(values: Sequence[Any], types: tuple[int, ...]) -> list[bytes | None]:
    """Parameters as libpq sends them: bytea in binary, numbers and text as text."""
    return [value if value is None or oid == _BYTEA else (str(value) if oid == _INT8 else value).encode()
            for value, oid in zip(values, types, strict=True)]


@functools.cache
def _wire_formats(types: tuple[int, ...]) -> list[Any]:
    """Each parameter's format on the wire (bytea binary, the rest text), per statement shape."""
    return [pq.Format.BINARY if oid == _BYTEA else pq.Format.TEXT for oid in types]


_APPEND_ON_GUESS: dict[tuple[int, int], tuple[str, tuple[int, ...]]] = {}


class SharedCounters(NamedTuple):
    """What the head row counts: events (the head position), no-op records, checkpoints; and the
    hash of the event at the head (the genesis hash for an empty log)."""

    seq: int
    noops: int
    checkpoints: int
    hash: bytes = GENESIS_HASH


_HEAD_COLUMNS = "seq, noops, checkpoints, hash"


def _counters(row: Sequence[Any]) -> SharedCounters:
    seq, noops, checkpoints, digest = row
    return SharedCounters(seq, noops, checkpoints, bytes(digest) if seq else GENESIS_HASH)


class _InFlight(NamedTuple):
    """A lone write's statement sent and not waited for yet: what it appends, and what sending it
    again takes (its prepared statement's name, text, parameter types and parameters)."""

    events: list[NewEvent]
    name: str
    sql: str
    types: tuple[int, ...]
    params: list[Any]


class HeadMoved(Exception):
    """An append on a guessed head found another one (``append_on_guess``): nothing was written.
    ``current``: the head as that attempt saw it, when it could tell (a guess for the next one)."""

    def __init__(self, message: str, current: SharedCounters | None = None) -> None:
        super().__init__(message)
        self.current = current


class SharedPage(NamedTuple):
    """A page of the shared log read in one statement (one snapshot): the head's counters, the
    rows after a position, and what projecting them reads back from the shared log: the blobs of
    its revisions (by hash) and, for each revision's stream, the stored bytes of its purge events."""

    counters: SharedCounters
    rows: list[RawEvent]
    blobs: dict[str, bytes]
    purges: dict[str, list[bytes]]


_REVISION_TYPES = frozenset({"artifact.created", "artifact.revised"})
_IS_REVISION = "e.type IN ('artifact.created', 'artifact.revised')"
# A revision's blob hash, cut from its stored bytes without decoding them (any server encoding):
# keys are sorted, so the first '"blob_hash":"' is the payload's own (a string value cannot hold
# an unescaped quote, and ``provenance``, which may, sorts after it). A wrong cut only misses the
# blob, which is then read by itself.
_BLOB_HASH_OF_E = "encode(substring(e.data FROM position('\"blob_hash\":\"'::bytea IN e.data) + 13 FOR 64), 'escape')"
_READ_PAGE = (  # each revision's blob and purges are index lookups, whatever the store's size
    f"SELECT h.seq, h.noops, h.checkpoints, h.hash, "
    f"e.commit_seq, e.type, e.data, e.prev_hash, e.hash, e.stream_id, r.blob_hash, "
    f"(SELECT b.data FROM blobs b WHERE b.hash = r.blob_hash), "
    f"(SELECT array_agg(x.data ORDER BY x.commit_seq) FROM events x "
    f"WHERE r.blob_hash IS NOT NULL AND x.type = 'artifact.purged' AND x.stream_id = e.stream_id) "
    f"FROM log_head h LEFT JOIN LATERAL ("
    f"SELECT commit_seq, type, data, prev_hash, hash, stream_id FROM events "
    f"WHERE commit_seq > %s AND commit_seq <= least(h.seq, %s) ORDER BY commit_seq LIMIT %s) e ON true "
    f"LEFT JOIN LATERAL (SELECT {_BLOB_HASH_OF_E} AS blob_hash WHERE {_IS_REVISION}) r ON true "
    f"WHERE h.singleton ORDER BY e.commit_seq"
)
_NO_BOUND = 2 ** 62


def _page_from(rows: Sequence[Sequence[Any]]) -> SharedPage:
    counters = _counters(rows[0][:4])
    page = SharedPage(counters, [], {}, {})
    for row in rows:
        seq, type_, data, prev, digest, stream_id, blob_hash, blob, purges = row[4:]
        if seq is None:  # the head's row alone: nothing after the position
            continue
        page.rows.append(RawEvent(seq, type_, bytes(data), bytes(prev), bytes(digest)))
        if blob is not None:
            page.blobs[blob_hash] = bytes(blob)
        if type_ in _REVISION_TYPES:
            page.purges[stream_id] = [bytes(p) for p in purges or ()]
    return page


def redact_url(url: str) -> str:
    """``url`` with any password replaced, fit for messages and logs."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def connect_pg(url: str) -> Any:
    """An autocommit connection (transactions are issued explicitly) to the log's database.

    JIT compilation is off for the session: every statement here is a short look-up or append,
    and the planner's row guess for the one-row head table lets a page read of a few hundred
    rows cross the JIT cost threshold, which then spends ~200 ms compiling a 3 ms query.
    """
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10, application_name="memoree")
        conn.execute("SET jit = off")
        return conn
    except psycopg.Error as exc:
        raise translate_pg_error(exc, url=url) from exc


def ensure_schema(conn: Any) -> None:
    """Create the log's tables once; concurrent first openers serialize on an advisory lock."""
    if _schema_current(conn):
        return
    try:
        conn.execute("BEGIN")
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_ID,))
        if not _schema_current(conn):
            conn.execute(PG_SCHEMA)
            conn.execute(
                "INSERT INTO log_meta (key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (SCHEMA_VERSION,))
        conn.execute("COMMIT")
    except psycopg.Error as exc:
        _rollback_quietly(conn)
        raise translate_pg_error(exc) from exc


def _schema_current(conn: Any) -> bool:
    try:
        found = conn.execute("SELECT to_regclass('log_meta') IS NOT NULL").fetchone()[0]
        if not found:
            return False
        row = conn.execute("SELECT value FROM log_meta WHERE key = 'schema_version'").fetchone()
    except psycopg.Error as exc:
        raise translate_pg_error(exc) from exc
    return row is not None and row[0] == SCHEMA_VERSION


def _rollback_quietly(conn: Any) -> None:
    try:
        if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
    except psycopg.Error:
        pass


class PostgresEventStore:
    """The shared event log in one PostgreSQL database, through one connection."""

    def __init__(self, url: str, *, lock_timeout_s: int = LOCK_TIMEOUT_S) -> None:
        self.url = url
        self.lock_timeout_s = lock_timeout_s
        self.conn = self._connect()
        self._depth = 0
        self._appended = False
        # Statements of the open transaction not sent yet (its BEGIN, blob rows): they travel in
        # one pipeline with the transaction's next statement.
        self._pending: list[tuple[str, Sequence[Any] | None]] = []
        # A lone write sent and not waited for yet (``append_on_guess(wait=False)``): its events,
        # and a failure found while another use of the connection settled it.
        self._in_flight: _InFlight | None = None
        self._unsettled: Exception | None = None
        # Seconds the last one-statement append held the head row's lock, by PostgreSQL's clock
        # (from the lock to its last row; the commit's WAL flush, still under it, comes after).
        self.last_hold_s = 0.0
        ensure_schema(self.conn)

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One write transaction holding the append lock; nested use becomes a savepoint."""
        if self._depth:
            with self.savepoint():
                yield self.conn
            return
        self.begin()
        try:
            yield self.conn
        except BaseException:
            self.rollback()
            raise
        self.commit()

    def begin_unlocked(self) -> None:
        """Open a write transaction without the append lock (``lock()`` takes it when it must).

        The BEGIN travels with the transaction's first statement, so it costs no round trip of
        its own, and a transaction that sends nothing costs none at all.
        """
        if self._depth:
            raise InternalError("a write transaction is already open on this connection")
        self._pending = [("BEGIN", None)]
        self._depth, self._appended = 1, False

    def execute_soon(self, sql: str, params: Sequence[Any]) -> None:
        """Queue a write whose result nobody reads (a blob row) to go with the next statement."""
        self._require_transaction("execute_soon")
        self._pending.append((sql, params))

    def lock(self) -> SharedCounters:
        """Take the append lock inside the open transaction; return the counters it guards."""
        self._require_transaction("lock")
        return _counters(self._execute(
            f"SELECT {_HEAD_COLUMNS} FROM log_head WHERE singleton FOR UPDATE").fetchone())

    def begin(self) -> SharedCounters:
        """Open the write transaction and take the append lock; return the locked counters."""
        if self._depth:
            raise InternalError("a write transaction is already open on this connection")
        try:  # one round trip; on an idle connection found dead, _execute reconnects once
            cursor = self._execute(
                f"BEGIN; SELECT {_HEAD_COLUMNS} FROM log_head WHERE singleton FOR UPDATE")
            while cursor.nextset():
                pass
            row = cursor.fetchone()
        except BaseException:
            _rollback_quietly(self.conn)
            raise
        self._depth, self._appended = 1, False
        return _counters(row)

    def commit(self) -> None:
        """Ring the doorbell once if anything was appended, then commit."""
        self._settle_first()
        pending, self._pending = self._pending, []
        if pending == [("BEGIN", None)]:  # nothing reached the server: nothing to commit
            self._depth, self._appended = 0, False
            return
        try:
            if pending:
                self._pipeline([*pending, *self._commit_statements()])
            else:
                self.conn.execute(f"NOTIFY {NOTIFY_CHANNEL}; COMMIT" if self._appended else "COMMIT")
        except psycopg.Error as exc:
            raise self._commit_failure(exc) from exc
        finally:
            self._depth, self._appended = 0, False

    def _commit_statements(self) -> list[tuple[str, None]]:
        return [(f"NOTIFY {NOTIFY_CHANNEL}", None)] * self._appended + [("COMMIT", None)]

    def _commit_failure(self, exc: Exception) -> MemoreeError:
        _rollback_quietly(self.conn)
        failure = translate_pg_error(exc, url=self.url)
        if failure.retryable:
            failure.hint = ("The commit's outcome is unknown; retry with the same idempotency "
                            "key, which returns the original result if it committed.")
        return failure

    def rollback(self) -> None:
        self._settle_first()
        self._unsettled = None  # the outcome of an abandoned write in flight: nothing to report
        pending, self._pending = self._pending, []
        self._depth, self._appended = 0, False
        if pending[:1] != [("BEGIN", None)]:  # else nothing reached the server
            _rollback_quietly(self.conn)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested unit inside the open transaction: a failure rolls back only this unit."""
        name = f"unit{self._depth}"
        self._execute(f"SAVEPOINT {name}")
        self._depth += 1
        try:
            yield
        except BaseException:
            self._depth -= 1
            self._execute(f"ROLLBACK TO SAVEPOINT {name}")
            self._execute(f"RELEASE SAVEPOINT {name}")
            raise
        self._depth -= 1
        self._execute(f"RELEASE SAVEPOINT {name}")

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    def close(self) -> None:
        self._settle_first()
        try:
            self.conn.close()
        except psycopg.Error:
            pass

    def _connect(self) -> Any:
        conn = connect_pg(self.url)
        self._prepared: set[bytes] = set()  # statements this session prepared through libpq
        try:
            conn.execute(f"SET lock_timeout = '{int(self.lock_timeout_s)}s'")
        except psycopg.Error as exc:
            raise translate_pg_error(exc, url=self.url) from exc
        self.backend_pid: int = conn.info.backend_pid  # the session's id, as notifications name it
        return conn

    def _reconnect_if_broken(self) -> None:
        if self.conn.closed or self.conn.broken:
            self.conn = self._connect()

    def _execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """Run one statement; outside a transaction a dead connection is replaced and retried once.

        Statements run outside a transaction are reads or idempotent blob writes, so running
        one again on a fresh session is safe; inside a transaction a lost session is an error,
        unless its BEGIN had not been sent yet (then nothing of it reached the server).
        """
        self._settle_first()
        if self._pending:
            return self._execute_with_pending(sql, params)
        if not self._depth:
            self._reconnect_if_broken()
        try:
            return self.conn.execute(sql, params)
        except psycopg.OperationalError as exc:
            if self._depth or not self.conn.broken:
                raise translate_pg_error(exc, url=self.url) from exc
            failure: Exception = exc
        except psycopg.Error as exc:
            raise translate_pg_error(exc, url=self.url) from exc
        try:
            self.conn = self._connect()
            return self.conn.execute(sql, params)
        except psycopg.Error as exc:
            raise translate_pg_error(exc, url=self.url) from failure

    def _execute_with_pending(self, sql: str, params: Sequence[Any] | None) -> Any:
        """Send the queued statements and this one in one pipeline; return this one's cursor."""
        statements = [*self._pending, (sql, params)]
        unsent = self._pending[0] == ("BEGIN", None)
        try:
            cursor = self._pipeline(statements)
        except psycopg.OperationalError as exc:
            if not (unsent and self.conn.broken):
                raise translate_pg_error(exc, url=self.url) from exc
            failure: Exception = exc
        except psycopg.Error as exc:
            raise translate_pg_error(exc, url=self.url) from exc
        else:
            self._pending = []
            return cursor
        try:
            self.conn = self._connect()
            cursor = self._pipeline(statements)
        except psycopg.Error as exc:
            raise translate_pg_error(exc, url=self.url) from failure
        self._pending = []
        return cursor

    def _pipeline(self, statements: Sequence[tuple[str, Sequence[Any] | None]]) -> Any:
        """Run statements in one round trip; return the last one's cursor (results fetched)."""
        self._settle_first()
        with self.conn.pipeline():
            cursors = [self.conn.execute(sql, params) for sql, params in statements]
        return cursors[-1]

    def fetch_at_once(self, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Any]]:
        """The rows of several reads, sent in one round trip (with any queued statements)."""
        self._settle_first()
        if not self._depth:
            self._reconnect_if_broken()
        try:
            with self.conn.pipeline():
                cursors = [self.conn.execute(sql, params) for sql, params in [*self._take_pending(), *queries]]
            return [cursor.fetchall() for cursor in cursors[len(cursors) - len(queries):]]
        except psycopg.Error as exc:
            raise translate_pg_error(exc, url=self.url) from exc

    def _take_pending(self) -> list[tuple[str, Sequence[Any] | None]]:
        pending, self._pending = self._pending, []
        return pending

    def _require_transaction(self, what: str) -> None:
        if not self._depth:
            raise InternalError(f"{what} outside a write transaction")

    # ------------------------------------------------------------------ appends

    def append(self, events: Sequence[NewEvent], *, head: LogHead | None = None,
               commit: bool = False) -> list[RecordedEvent]:
        """Append events at the next positions; must run inside ``transaction()``.

        A caller holding the append lock that already knows the head (``head``: the position and
        hash read under the lock) saves a round trip: the head's move and the rows travel in one
        pipeline, the move guarded by that head, so a wrong one is an integrity error that
        writes nothing instead of forking the chain. With ``commit`` (and ``head``) the doorbell
        and the commit travel in that pipeline too: the transaction ends with the append.
        """
        return self._append(events, head, commit and head is not None, None)[0]

    def append_and_commit(self, events: Sequence[NewEvent], head: LogHead, *,
                          read_first: tuple[int, int] | None = None,
                          ) -> tuple[list[RecordedEvent], SharedPage | None]:
        """``append(events, head=head, commit=True)``; with ``read_first`` (``after``, ``limit``)
        also the page of the log after ``after`` up to ``head`` (what other hosts appended before
        these events, all committed: this transaction holds the lock), read in the same round
        trip, ahead of the append. Keep ``limit`` small: the read runs under the lock."""
        return self._append(events, head, True, read_first)

    def append_on_guess(self, events: Sequence[NewEvent], guess: SharedCounters, *,
                        wait: bool = True) -> list[RecordedEvent]:
        """Append after a head this connection has not locked, and commit, in one round trip.

        ``guess`` is what the caller believes the head row holds (position, hash, no-op and
        checkpoint counts: its replica's). The head's move takes the append lock and is guarded
        by all four, so when another host appended, recorded a no-op or sealed since, nothing is
        written: the transaction is rolled back, left open as it was (its queued statements
        kept for the next attempt), and ``HeadMoved`` raised.

        ``wait=False``: when the transaction holds only blob rows (a lone write's), return the
        events as soon as the one statement is sent, so the caller stores and projects them
        while PostgreSQL runs and commits it; ``settle()`` then waits and raises what this call
        would have (after ``HeadMoved`` there the transaction is over: nothing is kept). Any
        other use of the connection settles first.
        """
        self._require_transaction("append_on_guess")
        queued = list(self._pending)
        try:
            if queued[:1] == [("BEGIN", None)] and all(sql == _INSERT_BLOB for sql, _ in queued[1:]):
                blobs = [row for _, row in queued[1:]]
                recorded = self._send_in_one_statement(events, guess, blobs)
                if wait:
                    self.settle()
                return recorded
            return self._append(events, LogHead(guess.seq, guess.hash), True, None, guard=guess)[0]
        except HeadMoved:
            self._pending, self._depth = queued, 1
            raise

    def _send_in_one_statement(self, events: Sequence[NewEvent], guess: SharedCounters,
                               blobs: list[Sequence[Any]]) -> list[RecordedEvent]:
        """The transaction so far is only blob rows, not sent yet: the blobs, the head's guarded
        move, the rows and the doorbell are one statement, which commits on its own (the
        connection is in autocommit; nothing was begun on the server). Sent through libpq
        as a prepared statement, without waiting for its outcome (``settle``)."""
        if not events:
            return []
        recorded: list[RecordedEvent] = []
        seq, prev = guess.seq, guess.hash
        for event in events:
            seq += 1
            recorded.append(_record(event, seq, prev))
            prev = recorded[-1].hash
        params: list[Any] = [guess.seq, guess.hash, guess.noops, guess.checkpoints,
                             recorded[-1].commit_seq, recorded[-1].hash]
        params += [value for row in blobs for value in row]
        for r in recorded:
            params += [r.commit_seq, r.event_id, r.type, r.stream_id, r.stream_version, r.at,
                       r.idempotency_key, r.request_digest, r.data, r.prev_hash, r.hash]
        shape = (len(recorded), len(blobs))
        statement = _APPEND_ON_GUESS.get(shape) or _APPEND_ON_GUESS.setdefault(
            shape, _append_on_guess_statement(*shape))
        self._pending = []
        self._depth, self._appended = 0, False
        sending = _InFlight(list(events), f"memoree_append_{shape[0]}_{shape[1]}", *statement, params)
        self._reconnect_if_broken()  # nothing of this transaction reached the server yet
        try:
            self._send_prepared(sending)
        except psycopg.Error as exc:
            raise self._commit_failure(exc) from exc
        self._in_flight = sending
        return recorded

    def _send_prepared(self, statement: _InFlight) -> None:
        """Send one prepared statement (prepared on this session the first time) without reading
        its result; psycopg's own per-statement work (cursor, adaptation, its prepared-statement
        bookkeeping) is skipped on this path."""
        pgconn, types = self.conn.pgconn, statement.types
        key = statement.name.encode()
        if key not in self._prepared:
            prepared = pgconn.prepare(key, statement.sql.encode(), types)
            if prepared.status != pq.ExecStatus.COMMAND_OK:
                raise pg_errors.error_from_result(prepared, encoding=self.conn.info.encoding)
            self._prepared.add(key)
        pgconn.send_query_prepared(key, _wire(statement.params, types), _wire_formats(types))
        while pgconn.flush():  # a non-blocking connection: the rest once the socket takes it
            select.select([], [pgconn.socket], [])

    def settle(self) -> None:
        """Wait for the statement ``append_on_guess(wait=False)`` sent, if one is in flight:
        ``HeadMoved`` when the guess was wrong, a conflict when another host holds a key, a
        retryable failure when the outcome is unknown."""
        statement, self._in_flight = self._in_flight, None
        failure, self._unsettled = self._unsettled, None
        if failure is not None:
            raise failure
        if statement is None:
            return
        try:
            results = self._results()
            failed = self._failure_of(results)
            if isinstance(failed, pg_errors.InvalidSqlStatementName):
                # psycopg deallocates every prepared statement of the session after a ROLLBACK
                # (its own cache's rule): the statement ran nowhere; prepare it again and resend.
                self._prepared.clear()
                self._send_prepared(statement)
                results = self._results()
                failed = self._failure_of(results)
        except psycopg.Error as exc:
            raise self._commit_failure(exc) from exc
        if isinstance(failed, pg_errors.UniqueViolation):
            raise _append_conflict(failed, _conflicting(failed, statement.events)) from failed
        if failed is not None:
            raise self._commit_failure(failed) from failed
        written, seen, held = _outcome(results)
        if not written:
            raise HeadMoved("the shared head moved since the guess; nothing was written", seen)
        self.last_hold_s = held

    def _failure_of(self, results: list[Any]) -> Exception | None:
        """The error the first failed result reports, as psycopg would raise it."""
        for result in results:
            if result.status == pq.ExecStatus.FATAL_ERROR:
                return pg_errors.error_from_result(result, encoding=self.conn.info.encoding)
        return None

    def _results(self) -> list[Any]:
        """Every result of the statement in flight, read as the socket delivers them."""
        pgconn, results = self.conn.pgconn, []
        while True:
            pgconn.consume_input()
            while pgconn.is_busy():
                select.select([pgconn.socket], [], [])
                pgconn.consume_input()
            result = pgconn.get_result()
            if result is None:
                return results
            results.append(result)

    def _settle_first(self) -> None:
        """Before any other use of the connection: take in the outcome of a statement in flight;
        a failure is kept for ``settle`` to raise."""
        if self._in_flight is not None:
            try:
                self.settle()
            except (HeadMoved, MemoreeError) as exc:
                self._unsettled = exc

    def _append(self, events: Sequence[NewEvent], head: LogHead | None, commit: bool,
                read_first: tuple[int, int] | None, *, guard: SharedCounters | None = None,
                ) -> tuple[list[RecordedEvent], SharedPage | None]:
        self._require_transaction("append")
        if not events:
            return [], None
        seq, prev = self._advance_head(len(events)) if head is None else (head.commit_seq, head.hash)
        recorded: list[RecordedEvent] = []
        for event in events:
            seq += 1
            recorded.append(_record(event, seq, prev))
            prev = recorded[-1].hash
        self._appended = True
        read = None if read_first is None or head is None else (read_first[0], head.commit_seq, read_first[1])
        page = self._insert(recorded, events, moved_from=head, commit=commit, read_first=read, guard=guard)
        return recorded, page

    def append_recorded(self, events: Sequence[RecordedEvent]) -> None:
        """Store already-recorded events verbatim at their own positions (migration by replay).

        Each must continue the log exactly: the next position, the head's hash as ``prev_hash``
        and a chain hash that matches its stored bytes.
        """
        self._require_transaction("append_recorded")
        if not events:
            return
        first, prev = self._advance_head(len(events))
        for offset, event in enumerate(events, start=1):
            if event.commit_seq != first + offset or event.prev_hash != prev \
                    or chain_hash(prev, event.data) != event.hash:
                raise IntegrityError(f"event {event.commit_seq} does not continue the target log",
                                     details={"commit_seq": event.commit_seq})
            prev = event.hash
        self._insert(events, events)
        self._appended = True

    def _advance_head(self, count: int) -> tuple[int, bytes]:
        """Move the counter by ``count`` under the append lock; return the old head."""
        last, digest = self._execute(
            "UPDATE log_head SET seq = seq + %s WHERE singleton RETURNING seq, hash", (count,)
        ).fetchone()
        return last - count, bytes(digest)

    def _insert(self, records: Sequence[RecordedEvent], events: Sequence[Any], *,
                moved_from: LogHead | None = None, commit: bool = False,
                read_first: tuple[int, int, int] | None = None,
                guard: SharedCounters | None = None) -> SharedPage | None:
        """Insert the rows and move the head's hash to the last one, in one round trip; with
        ``moved_from`` the head's position moves too, from exactly that head or not at all (with
        ``guard``, a head not locked before: from exactly those no-op and checkpoint counts too,
        else ``HeadMoved``); with ``commit`` the transaction commits in the same round trip, and
        ``read_first`` (after, through, limit) reads a page ahead of the rest, still in that round
        trip."""
        self._settle_first()
        rows = [(r.commit_seq, r.event_id, r.type, r.stream_id, r.stream_version, r.at,
                 r.idempotency_key, r.request_digest, r.data, r.prev_hash, r.hash) for r in records]
        page = None
        try:
            with self.conn.pipeline():
                pending = self._take_pending()
                if read_first is not None:  # prepared only when nothing before it can fail
                    page = self.conn.execute(_READ_PAGE, read_first, prepare=False if pending else None)
                for sql, params in pending:
                    self.conn.execute(sql, params)
                if moved_from is None:
                    self.conn.execute("UPDATE log_head SET hash = %s WHERE singleton", (records[-1].hash,))
                elif guard is None:  # another head sets seq to -1: the CHECK fails before any row goes in
                    self.conn.execute(
                        "UPDATE log_head SET seq = CASE WHEN seq = %s AND hash = %s THEN %s ELSE -1 END, "
                        "hash = %s WHERE singleton",
                        (moved_from.commit_seq, moved_from.hash, records[-1].commit_seq, records[-1].hash))
                else:
                    self.conn.execute(
                        "UPDATE log_head SET seq = CASE WHEN seq = %s AND hash = %s AND noops = %s "
                        "AND checkpoints = %s THEN %s ELSE -1 END, hash = %s WHERE singleton",
                        (guard.seq, guard.hash, guard.noops, guard.checkpoints, records[-1].commit_seq,
                         records[-1].hash))
                # No statement after one that may fail (the guard, a unique key) is prepared: the
                # server skips the Parse messages of a failed pipeline, which psycopg would still
                # count as prepared ("prepared statement ... does not exist" later).
                if guard is None:
                    self.conn.cursor().executemany(_INSERT_EVENT, rows)
                else:
                    for row in rows:
                        self.conn.execute(_INSERT_EVENT, row, prepare=False)
                if commit:  # a failed statement above makes the server skip these
                    for sql, params in self._commit_statements():
                        self.conn.execute(sql, params, prepare=False)
        except pg_errors.CheckViolation as exc:
            if guard is not None:
                _rollback_quietly(self.conn)
                raise HeadMoved("the shared head moved since the guess; nothing was written") from exc
            raise IntegrityError("the shared log's head is not the one this host appended after",
                                 details={"commit_seq": moved_from.commit_seq if moved_from else None}) from exc
        except pg_errors.UniqueViolation as exc:
            raise _append_conflict(exc, _conflicting(exc, events)) from exc
        except psycopg.Error as exc:
            raise (self._commit_failure(exc) if commit else translate_pg_error(exc, url=self.url)) from exc
        finally:
            if commit:  # committed, or to be rolled back by the caller (``rollback`` still works)
                self._depth, self._appended = 0, False
        return None if page is None else _page_from(page.fetchall())

    # ------------------------------------------------------------------ reads

    def head(self) -> LogHead:
        seq, digest = self._execute("SELECT seq, hash FROM log_head WHERE singleton").fetchone()
        return LogHead(seq, bytes(digest)) if seq else LogHead(0, GENESIS_HASH)

    def read(self, after: int = 0, limit: int | None = None) -> Iterator[RecordedEvent]:
        """Yield events after position ``after`` in order, decoded from their stored bytes."""
        for raw in self.read_raw(after, limit):
            yield recorded_from_raw(raw)

    def read_page(self, after: int, limit: int, *, through: int | None = None) -> SharedPage:
        """Up to ``limit`` events after ``after`` (none past ``through``), with the head's counters
        and the blobs and purges projecting them reads, in one round trip."""
        return _page_from(self._execute(_READ_PAGE, (after, _NO_BOUND if through is None else through,
                                                      limit)).fetchall())

    def read_raw(self, after: int = 0, limit: int | None = None) -> Iterator[RawEvent]:
        return paged_raw_events(lambda start, take: self._execute(
            "SELECT commit_seq, type, data, prev_hash, hash FROM events "
            "WHERE commit_seq > %s ORDER BY commit_seq LIMIT %s", (start, take)).fetchall(), after, limit)

    def hash_at(self, commit_seq: int) -> bytes | None:
        row = self._execute("SELECT hash FROM events WHERE commit_seq = %s", (commit_seq,)).fetchone()
        return None if row is None else bytes(row[0])

    def find_idempotency_key(self, key: str) -> IdempotencyHit | None:
        row = self._execute(
            "SELECT commit_seq, request_digest, type FROM events WHERE idempotency_key = %s", (key,)
        ).fetchone()
        return None if row is None else IdempotencyHit(row[0], row[1] or "", row[2])

    def stream_version(self, stream_id: str) -> int:
        row = self._execute(
            "SELECT max(stream_version) FROM events WHERE stream_id = %s", (stream_id,)).fetchone()
        return row[0] or 0

    def counters(self) -> SharedCounters:
        """Events (the head position), no-op records and checkpoints, as the head row counts them."""
        return _counters(self._execute(
            f"SELECT {_HEAD_COLUMNS} FROM log_head WHERE singleton").fetchone())

    # ------------------------------------------------------------------ no-op idempotency records

    def record_noop(self, key: str, request_digest: str, operation: str, commit_seq: int,
                    result_json: bytes, at: str) -> int:
        """Record the key of a mutation that committed nothing; return its record number."""
        self._require_transaction("record_noop")
        (noop_seq,) = self._execute(
            "UPDATE log_head SET noops = noops + 1 WHERE singleton RETURNING noops").fetchone()
        try:
            self.conn.execute(
                "INSERT INTO idempotency_noops (noop_seq, key, request_digest, operation, "
                "commit_seq, result_json, recorded_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (noop_seq, key, request_digest, operation, commit_seq, result_json, at),
            )
        except pg_errors.UniqueViolation as exc:
            raise IdempotencyConflict(key, details={"idempotency_key": key}) from exc
        except psycopg.Error as exc:
            raise translate_pg_error(exc, url=self.url) from exc
        return noop_seq

    def find_noop(self, key: str) -> tuple[str, str, int, bytes] | None:
        """``(request_digest, operation, commit_seq, result_json)`` of a recorded no-op key."""
        row = self._execute(
            "SELECT request_digest, operation, commit_seq, result_json FROM idempotency_noops "
            "WHERE key = %s", (key,)).fetchone()
        return None if row is None else (row[0], row[1], row[2], bytes(row[3]))

    def noops_after(self, noop_seq: int) -> list[tuple[str, str, str, int, bytes, str]]:
        """No-op records numbered after ``noop_seq``, in order, as the SQLite table holds them."""
        rows = self._execute(
            "SELECT key, request_digest, operation, commit_seq, result_json, recorded_at "
            "FROM idempotency_noops WHERE noop_seq > %s ORDER BY noop_seq", (noop_seq,)).fetchall()
        return [(k, d, op, seq, bytes(res), at) for k, d, op, seq, res, at in rows]

    # ------------------------------------------------------------------ signed checkpoints

    def list_checkpoints(self, after: int = 0) -> list[Checkpoint]:
        rows = self._execute(
            f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE checkpoint_seq > %s "
            "ORDER BY checkpoint_seq", (after,)).fetchall()
        return [Checkpoint(checkpoint_seq=r[0], tree_size=r[1], root=bytes(r[2]), key_epoch=r[3],
                           signed_at=r[4], note=bytes(r[5]), signature=bytes(r[6])) for r in rows]

    def insert_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Record the next signed checkpoint; must run inside ``transaction()``."""
        self._require_transaction("insert_checkpoint")
        (count,) = self._execute(
            "UPDATE log_head SET checkpoints = checkpoints + 1 WHERE singleton RETURNING checkpoints"
        ).fetchone()
        if count != checkpoint.checkpoint_seq:
            raise IntegrityError(
                f"checkpoint {checkpoint.checkpoint_seq} is not the next one (expected {count})",
                details={"checkpoint_seq": checkpoint.checkpoint_seq})
        self._execute(
            f"INSERT INTO checkpoints ({_CHECKPOINT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (checkpoint.checkpoint_seq, checkpoint.tree_size, checkpoint.root,
             checkpoint.key_epoch, checkpoint.signed_at, checkpoint.note, checkpoint.signature))


def _record(event: NewEvent, seq: int, prev: bytes) -> RecordedEvent:
    data = encode_event(
        commit_seq=seq, event_id=event.event_id, type=event.type, stream_id=event.stream_id,
        stream_version=event.stream_version, at=event.at, scope=event.scope,
        idempotency_key=event.idempotency_key, request_digest=event.request_digest,
        payload=event.payload,
    )
    return RecordedEvent(
        commit_seq=seq, event_id=event.event_id, type=event.type, stream_id=event.stream_id,
        stream_version=event.stream_version, at=event.at, scope=event.scope,
        idempotency_key=event.idempotency_key, request_digest=event.request_digest,
        payload=event.payload, data=data, prev_hash=prev, hash=chain_hash(prev, data),
    )


def recorded_from_raw(raw: RawEvent) -> RecordedEvent:
    """A stored row decoded into its envelope fields and typed payload."""
    envelope = decode_envelope(raw.data)
    return RecordedEvent(
        commit_seq=raw.commit_seq, event_id=envelope.event_id, type=envelope.type,
        stream_id=envelope.stream_id, stream_version=envelope.stream_version, at=envelope.at,
        scope=envelope.scope, idempotency_key=envelope.idempotency_key,
        request_digest=envelope.request_digest, payload=decode_payload(envelope),
        data=raw.data, prev_hash=raw.prev_hash, hash=raw.hash,
    )


def _conflicting(exc: Any, events: Sequence[Any]) -> Any:
    """The event a unique violation names (its detail quotes the key), else the first one."""
    detail = getattr(exc.diag, "message_detail", None) or ""
    for event in events:
        if f"({event.stream_id}, {event.stream_version})" in detail or (
                event.idempotency_key and f"({event.idempotency_key})" in detail):
            return event
    return events[0]


def _append_conflict(exc: Any, event: Any) -> MemoreeError:
    constraint = getattr(exc.diag, "constraint_name", None) or ""
    if constraint == "events_stream_version_unique":
        return StreamVersionConflict(
            f"stream {event.stream_id} already has version {event.stream_version}",
            details={"stream_id": event.stream_id, "stream_version": event.stream_version},
        )
    if constraint == "events_idempotency_key_unique":
        return IdempotencyConflict(
            event.idempotency_key or "", details={"idempotency_key": event.idempotency_key})
    return translate_pg_error(exc)


def translate_pg_error(exc: Exception, *, url: str | None = None) -> MemoreeError:
    """Map a driver error onto the error tree: unreachable, lock timeout, immutability, other."""
    where = f" at {redact_url(url)}" if url else ""
    text = str(exc).strip()
    if isinstance(exc, pg_errors.LockNotAvailable | pg_errors.QueryCanceled):
        return InternalError(f"the shared log's append lock was not granted in time: {text}",
                             retryable=True, hint="Another host holds the append lock; retry shortly.")
    if isinstance(exc, pg_errors.SerializationFailure | pg_errors.DeadlockDetected):
        return InternalError(f"shared log transaction conflict: {text}", retryable=True)
    if isinstance(exc, pg_errors.RestrictViolation):
        return IntegrityError(f"the shared log refused a change to immutable rows: {text}")
    if isinstance(exc, pg_errors.InvalidCatalogName | pg_errors.InvalidAuthorizationSpecification
                  | pg_errors.InvalidPassword):
        return ConfigError(f"cannot open the shared log{where}: {text}")
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return InternalError(f"the shared log{where} is unreachable: {text}", retryable=True,
                             hint="Check that PostgreSQL is running and MEMOREE_LOG_URL is right; "
                                  "nothing was written.")
    return InternalError(f"shared log error: {text}")


_INSERT_BLOB = "INSERT INTO blobs (hash, size, data) VALUES (%s, %s, %s) ON CONFLICT (hash) DO NOTHING"


class _PageOfRevisions(NamedTuple):
    """What ``PostgresContentStore.prefetched`` read for a page: blobs by hash, the artifacts it
    asked about, and their purge events' stored bytes."""

    blobs: dict[str, bytes]
    artifacts: set[str]
    purges: dict[str, list[bytes]]


class PostgresContentStore(ContentStore):
    """The CAS with its bytes in the shared database's ``blobs`` table, so every host serves them.

    Every blob is a row, whatever its size (the content limit keeps rows small), written in the
    mutation's transaction when one is open. It is the embedded ``ContentStore`` with its storage
    swapped: questions about the host's own projections (``stored_again``) and the WAL truncation
    after a purge run on the host's SQLite file (``replica_conn``), as they do in embedded mode;
    whether bytes were purged is asked of the whole shared log. The parent's constructor is not
    called: it would create the embedded inline table and blob folder, which are not used here.
    """

    def __init__(self, store: PostgresEventStore, replica_conn: Any | None = None,
                 root: Path | None = None) -> None:
        self.store = store
        self.conn = replica_conn
        self.root = root or Path(os.devnull)
        self._page: _PageOfRevisions | None = None

    def put(self, data: bytes, digest: str | None = None) -> str:
        """Store the row in the open transaction (sent with its next statement), else at once."""
        digest = digest or digest_hex(data)
        row = (digest, len(data), data)
        if self.store.in_transaction:
            self.store.execute_soon(_INSERT_BLOB, row)
        else:
            self.store._execute(_INSERT_BLOB, row)
        # The projections read these bytes back in the same transaction: hand them over directly.
        self._just_stored = (digest, data)
        return digest

    @contextmanager
    def prefetched(self, events: Sequence[RecordedEvent], page: SharedPage | None = None) -> Iterator[None]:
        """While a page of events is applied: their revisions' blobs and the purges of their
        artifacts, as ``page`` read them with the events, else in one round trip for the page (two
        revisions or more) instead of two per revision."""
        revisions = [e for e in events if e.type in _REVISION_TYPES]
        if page is not None:
            # A purge names its artifact as its stream: the page's purges are by stream.
            artifacts = {e.payload.artifact_id for e in revisions
                         if e.payload.artifact_id == e.stream_id and e.stream_id in page.purges}
            self._page = _PageOfRevisions(page.blobs, artifacts, page.purges)
        elif len(revisions) < 2:
            yield
            return
        else:
            self._page = self._fetch_for(revisions)
        try:
            yield
        finally:
            self._page = None

    def _fetch_for(self, revisions: Sequence[RecordedEvent]) -> _PageOfRevisions:
        artifacts = {r.payload.artifact_id for r in revisions}
        blobs, purges = self.store.fetch_at_once([
            ("SELECT hash, data FROM blobs WHERE hash = ANY(%s)", ([r.payload.blob_hash for r in revisions],)),
            ("SELECT stream_id, data FROM events WHERE type = 'artifact.purged' AND stream_id = ANY(%s)",
             (list(artifacts),)),
        ])
        fetched = _PageOfRevisions({digest: bytes(data) for digest, data in blobs}, artifacts, {})
        for stream_id, data in purges:
            fetched.purges.setdefault(stream_id, []).append(bytes(data))
        return fetched

    def _read(self, digest: str, size: int) -> bytes:
        page = self._page
        if page is not None and digest in page.blobs:
            return page.blobs[digest]
        row = self.store._execute("SELECT data FROM blobs WHERE hash = %s", (digest,)).fetchone()
        if row is None:
            raise IntegrityError(f"blob {digest} is missing from the content store",
                                 details={"blob_hash": digest})
        return bytes(row[0])

    def erase_inline(self, digest: str) -> None:
        """Delete a blob's row (inside the purge's transaction)."""
        self.store._execute("DELETE FROM blobs WHERE hash = %s", (digest,))

    def erase_file(self, digest: str) -> None:
        """Blobs are rows here: erasing again after the purge commits deletes any row left."""
        self.erase_inline(digest)

    def finish_erasure(self, digests: list[str]) -> None:
        """After a purge commits: the parent's erasure, then the table's dead rows reclaimed."""
        super().finish_erasure(digests)
        if not self.store.in_transaction:
            self.store._execute("VACUUM blobs")

    def _purge_events(self) -> Any:
        """Asked of the shared log, as ``is_purged`` is."""
        return self.store._execute("SELECT stream_id, data FROM events WHERE type = 'artifact.purged'").fetchall()

    def is_purged(self, digest: str, artifact_id: str | None = None) -> bool:
        """Whether the shared log records a purge of ``digest`` (of ``artifact_id``'s, if given).

        Asked of the whole shared log, not of a host's replica: a host catching up past an
        artifact's creation must know about a purge that comes later, whose row is already gone.
        Bytes this host put in the open transaction are at hand, so they need not be asked about:
        they are indexed as an embedded store indexes a new revision, and a purge that follows
        erases them from the projections when it is applied.
        """
        just_stored = self._just_stored
        if just_stored is not None and just_stored[0] == digest and self.conn is not None \
                and self.conn.in_transaction:
            return False
        page = self._page
        if page is not None and artifact_id in page.artifacts:
            return any(digest.encode() in data for data in page.purges.get(artifact_id, ()))
        sql = "SELECT 1 FROM events WHERE type = 'artifact.purged' AND position(%s::bytea IN data) > 0"
        params: tuple[Any, ...] = (digest.encode(),)
        if artifact_id is not None:
            sql, params = sql + " AND stream_id = %s", (*params, artifact_id)
        return self.store._execute(sql + " LIMIT 1", params).fetchone() is not None
