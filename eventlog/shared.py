"""Scale-out: this host's side of a log shared through PostgreSQL.

In shared mode (see ``memoree.service.logconfig``) the PostgreSQL database is the log. Each host keeps,
in its own SQLite file:

- a **replica** of the log: the same ``events`` rows, byte for byte, copied in order and checked
  on the way in (dense positions, ``prev_hash``, chain hash, envelope), so everything that reads
  the log locally (seal, prove, purge bookkeeping, export) keeps working;
- copies of the no-op idempotency records and the signed checkpoints;
- its **projections**, advanced in the same local transaction as the replica.

``SharedLog`` is the event store the engine and the command handler use. A write transaction
first catches the replica and the projections up to the shared head **without** the append lock,
then lets the handler load state and decide against them; the append lock (PostgreSQL's
``log_head`` row) is taken only at the first append, and covers the sequence, the previous hash
and the insert (one pipeline: the head's move, guarded by the head read under the lock, and the
rows). Under the lock the decision is checked optimistically: if the shared head moved
past this host's replica since the catch-up, a creation with fresh ids stands unless one of those
few events took its stream or idempotency key (they are applied first, then it); any other
decision is discarded (``StaleDecision``), the host catches up under the lock and the handler
decides again, so no decision is appended against a stale projection and no host's backlog is
applied while it holds the lock.

A lone creation (``artifact.put``: the handler says it ``decides_on_input``) skips the catch-up
before it: under the lock it needs only the head and an unchanged no-op count, PostgreSQL's unique
keys refuse a stream or idempotency key another host took (the write then decides again, on a
caught-up host, where a retry replays its original result), and its rows, doorbell and commit go
in one round trip. Other hosts' events before it are read after the lock, stored and projected
first, then its own. On a host whose last write found nobody else writing, the put guesses the
head instead of locking (one statement); the host stores and projects its event while PostgreSQL
runs and commits that statement, and learns the outcome before its local commit. A wrong guess
wrote nothing and reported the head: the put is decided again and, with the host's next few puts,
sends the same statement on the head last seen and waits for it (a miss reports the head again),
so the append lock is held only inside that statement; only after ``KNOWN_HEAD_TRIES`` misses
does a put lock first. A host whose writes took other hosts' events in within ``WRITING_S``
does not guess either: they are likely still writing, and a wrong guess is found only after the
put's local work, which is then done again.
Pages of other hosts' events are applied as a batch (``prefetching_sink``: their blobs and purges
in one round trip; the engine's sink indexes a page once). Every append path ends in
``_after_own_append``: what other hosts appended before the put is stored first, then the put's
own events, and the last page of the former is left to the caller (``taken_in``), which projects
it and its own events in one batch (``CommandHandler.project_appended``).

Commit is PostgreSQL first, then local: the replica is always a prefix of the shared log, and a
host that dies between the two simply catches up again. Outside a transaction ``head()`` is this
host's position; when the shared log is ahead (events, no-op records or checkpoints) it catches up
briefly before answering, so a read with ``min_commit_seq`` waits a moment or answers
INDEX_NOT_READY. The background follower (``memoree.eventlog.follower``) keeps idle hosts current.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memoree.errors import ConfigError, IdempotencyConflict, IntegrityError, InternalError, MemoreeError
from memoree.eventlog.checkpoints import Checkpoint, list_checkpoints
from memoree.eventlog.db import sqlite3
from memoree.eventlog.follower import Follower
from memoree.eventlog.codec import GENESIS_HASH
from memoree.eventlog.postgres import (
    HeadMoved,
    PostgresContentStore,
    PostgresEventStore,
    SharedCounters,
    SharedPage,
)
from memoree.eventlog.replica import (
    CATCH_UP_PAGE,
    INSERT_NOOP,
    READ_WAIT_S,
    REPLICA_SYNCHRONOUS,
    PageSink,
    behind,
    catch_up,
    copy_side_records,
    has_projections,
    local_checkpoints,
    local_counters,
    local_noops,
    prefetching_sink,
    replica_head,
    require_same_history,
    store_replica,
    verified_page,
)
from memoree.eventlog.sqlite import savepoint
from memoree.eventlog.store import (
    EventSink,
    IdempotencyHit,
    LogHead,
    NewEvent,
    RawEvent,
    RecordedEvent,
    StaleDecision,
    StreamVersionConflict,
)
from memoree.log import logger

__all__ = ["INDEPENDENT_CREATIONS", "SharedLog", "require_recorded_key"]

# Events whose decision reads no stream but their own, new one (fresh ids; a claim's evidence
# sizes never change): other hosts' appends cannot make them stale, only a taken stream or key.
INDEPENDENT_CREATIONS = frozenset({"artifact.created", "claim.asserted"})
# A host that wrote this recently is writing steadily: its follower leaves other hosts' events
# to the next write (see ``Follower.writing``).
WRITING_S = 0.1
GUESS_BACKOFF_MAX = 64
# A lone creation while other hosts write tries the one-statement append on the head last seen
# this many times (each miss reports the head again, writes nothing and flushes no WAL) before
# it takes the append lock first.
KNOWN_HEAD_TRIES = 4
# At most this many of other hosts' events are read in a lone put's append round trip (under the
# lock, ahead of the append); a longer backlog is read after the commit, page by page. 0: reading
# under the lock lengthened every hold and measured slower with two hosts (quiet machine: 279 /s
# with 16 against 358-411 /s with 0), so the backlog is always read after the commit.
LOCKED_READ_MAX = 0


# ---------------------------------------------------------------------- the store the engine uses


class SharedLog:
    """The event store of a host in shared mode: PostgreSQL log, local replica and projections."""

    def __init__(self, url: str, conn: Any, db_path: Path) -> None:
        self.url = url
        self.conn = conn
        self.db_path = db_path
        self.pg = PostgresEventStore(url)
        self.cas = PostgresContentStore(self.pg, conn, db_path.parent / "blobs")
        self.apply: PageSink | None = None
        self.follower: Any = None
        self._depth = 0
        self._checkpoints_before = 0
        # The append lock: the depth it was taken at (None: not held), the counters read under it,
        # the head it guards, and whether the next transaction takes it first (after a stale
        # decision, so a retry wins).
        self._locked_depth: int | None = None
        self._locked = SharedCounters(0, 0, 0)
        self._shared_head = LogHead(0, GENESIS_HASH)
        self._lock_first = False
        self._lock_taken_at = 0.0
        # A lone creation appends on a guessed head (see ``_append_on_guess``): while no other
        # host writes between this host's writes, the guess holds. A wrong guess costs a round
        # trip and a rollback, so after one the next writes lock first: 1, 2, 4 ... up to
        # GUESS_BACKOFF_MAX of them (``_guess_skip`` left), doubling at each miss in a row.
        self._guess_skip = self._guess_backoff = 0
        self._guess_sent_at: float | None = None  # when this transaction's guessed append went
        # The shared head as a missed one-statement append saw it (ahead of the replica): where
        # the next such append tries (``_append_on_known_head``).
        self._known_head: SharedCounters | None = None
        self.guesses = [0, 0]  # lone creations appended on a guessed head: tried, missed
        # Other hosts' events an append stored ahead of this host's own and left for the caller
        # to project with them (``taken_in``), with the page that read them.
        self._held: tuple[list[RecordedEvent], SharedPage] | None = None
        self._took_in_at = float("-inf")  # monotonic time this host's writes last took some in
        self.last_write = 0.0  # monotonic time of this host's last committed write
        self.lock_holds: deque[float] = deque(maxlen=100_000)  # seconds per write transaction
        # of which the shared commit (a lone creation: the append round trip, which commits)
        self.lock_commits: deque[float] = deque(maxlen=100_000)
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

        self.apply = prefetching_sink(self.cas, apply)
        self.follower = Follower(self.url, self.db_path, make_sink, poll_s=poll_s,
                                 local_lock=self.local_lock, own_sessions=lambda: {self.pg.backend_pid},
                                 writing=self._writing)
        self.follower.start()

    def _writing(self) -> bool:
        """Whether this host committed a write within the last ``WRITING_S``."""
        return time.monotonic() - self.last_write < WRITING_S

    def _others_writing(self) -> bool:
        """Whether this host's writes took in other hosts' events within the last ``WRITING_S``:
        then a guess on its own head would likely miss after its local work (see ``append``)."""
        return time.monotonic() - self._took_in_at < WRITING_S

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
            with self.local_transaction():
                if has_projections(self.conn):
                    return
                if catch_up(self.pg, self.conn, None, max_events=CATCH_UP_PAGE * 10) == 0:
                    return

    @contextmanager
    def local_transaction(self) -> Iterator[Any]:
        """A write transaction on this host's file alone (catch-up, derived rows such as the
        vectors' catch-up): it appends nothing, so no shared transaction goes with it."""
        with self.local_lock:
            self._begin_local()
            try:
                yield self.conn
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
    def transaction(self, *, decides_on_input: bool = False) -> Iterator[Any]:
        """Catch this host up, yield the local connection (the append lock is taken at the first
        append), commit both. Nested use is a savepoint on both sides (group commit relies on it).

        ``decides_on_input``: the decision reads no projection (a creation with fresh ids), so the
        host is not caught up first; whatever other hosts appended meanwhile is taken in, in
        order, after this write's append (see ``append``).
        """
        if self._depth:
            yield from self._savepoint()
            return
        with self.local_lock:
            self._begin_local()
            try:
                self._open_shared(catch_up_first=not decides_on_input)
            except BaseException:
                self.pg.rollback()
                self._rollback_local()
                raise
            self._depth = 1
            try:
                self._checkpoints_before = local_checkpoints(self.conn)
                yield self.conn
                self._require_projected()
                self._settle_guess()
                self._push_checkpoints()
            except BaseException:
                self._depth = 0
                self._guess_sent_at = None
                self._held = None
                self.pg.rollback()
                self._rollback_local()
                self._release_lock()
                raise
            self._depth = 0
            try:
                self._commit_both()
            finally:
                self._release_lock()
            self.last_write = time.monotonic()

    def _require_projected(self) -> None:
        """Other hosts' events left to the caller (``taken_in``) must be projected by now: else
        the replica would hold events its projections skipped."""
        if self._held is not None:
            raise InternalError("other hosts' events taken in at an append were never projected")

    def _open_shared(self, *, catch_up_first: bool) -> None:
        """Catch up outside the append lock (unless told not to), then open the shared
        transaction; after a stale decision, lock first and catch up under the lock instead (the
        retry cannot be stale)."""
        if self._lock_first:
            self._lock_first = False
            locked = self.pg.begin()
            self._hold_lock(locked, depth=1)
            catch_up(self.pg, self.conn, self.apply, shared=locked)
            return
        if catch_up_first:
            catch_up(self.pg, self.conn, self.apply)
        self.pg.begin_unlocked()

    def _hold_lock(self, locked: SharedCounters, *, depth: int) -> None:
        if not self._lock_taken_at:
            self._lock_taken_at = time.perf_counter()
        self._locked_depth, self._locked = depth, locked
        self._shared_head = LogHead(locked.seq, locked.hash)

    def _release_lock(self) -> None:
        if self._lock_taken_at:
            self.lock_holds.append(time.perf_counter() - self._lock_taken_at)
        self._locked_depth, self._lock_taken_at = None, 0.0

    def _lock_for_write(self, events: Sequence[NewEvent] = (), *,
                        lone: bool = False) -> tuple[LogHead, LogHead | None]:
        """Hold the append lock and check the decision optimistically against what other hosts
        appended since this host caught up. Return the shared head, and when other hosts' events
        before it are left for the caller to take in after the lock (``lone``, see ``append``)
        this host's replica head they follow; otherwise (None) they are in the replica and
        projections already."""
        if self._locked_depth is None:
            self._hold_lock(self.pg.lock(), depth=self._depth)
        local = replica_head(self.conn)
        shared_seq = self._shared_head.commit_seq
        if lone:
            # A lone creation with fresh ids reads no other stream: it stays valid unless another
            # host took its stream or its idempotency key, which the shared log's unique keys
            # refuse at the append (``append`` then decides again). No-op records carry keys the
            # events' unique key cannot see: one this host lacks sends the decision round again.
            if local_noops(self.conn) == self._locked.noops:
                return self._shared_head, local if local.commit_seq < shared_seq else None
        elif local.commit_seq == shared_seq:
            return local, None
        window = shared_seq - local.commit_seq
        if not lone and events and all(e.type in INDEPENDENT_CREATIONS for e in events) \
                and window <= CATCH_UP_PAGE:
            # The same for a creation inside a group, which cannot commit early: those few
            # events go first, read under the lock, and are checked here.
            page = self.pg.read_page(local.commit_seq, window, through=shared_seq)
            foreign = verified_page(local, page.rows, shared_seq)
            keys, streams = {e.idempotency_key for e in events}, {e.stream_id for e in events}
            if not any(f.idempotency_key in keys or f.stream_id in streams for f in foreign):
                self._take_in(foreign, page)
                return self._shared_head, None
        self._lock_first = True
        raise StaleDecision("the shared log moved on while this host decided; deciding again",
                            details={"shared_seq": shared_seq})

    def _take_in(self, foreign: list[RecordedEvent], page: SharedPage) -> None:
        """Store other hosts' verified events (read in ``page``) in the replica and project them."""
        if foreign:
            store_replica(self.conn, foreign)
            self._project(foreign, page)

    def _take_in_through(self, head: LogHead, local: LogHead, page: SharedPage | None) -> None:
        """Store, page by page and in order, other hosts' events from this host's replica head
        ``local`` up to ``head`` (the position this host's own append followed), read outside the
        append lock; ``page`` is the first page, when the append read it. Each page is projected
        once the next is read; the last is held for ``taken_in`` (when this host projects at all)."""
        held: tuple[list[RecordedEvent], SharedPage] | None = None
        self._took_in_at = time.monotonic()
        while local.commit_seq < head.commit_seq:
            if held is not None:
                self._project(*held)
            if page is None:
                want = min(CATCH_UP_PAGE, head.commit_seq - local.commit_seq)
                page = self.pg.read_page(local.commit_seq, want, through=head.commit_seq)
            foreign = verified_page(local, page.rows, head.commit_seq)
            store_replica(self.conn, foreign)
            held, page = (foreign, page), None
            local = LogHead(foreign[-1].commit_seq, foreign[-1].hash)
        if local != head:
            raise IntegrityError(
                f"the shared log's event {head.commit_seq} is not the one this host appended after",
                details={"commit_seq": head.commit_seq},
                hint="A changed event in the shared log is corruption: stop writers, run `memoree verify`.")
        if self.apply is not None:
            self._held = held

    def _project(self, events: list[RecordedEvent], page: SharedPage) -> None:
        if self.apply is not None:
            self.apply(self.conn, events, page)

    def prepare_retry(self) -> None:
        """After ``StaleDecision``: inside a group, lock and catch up now (the retry then decides
        on the current head); at the top level the next transaction locks first."""
        if not self._depth:
            return
        if self._locked_depth is None:
            self._hold_lock(self.pg.lock(), depth=self._depth)
        catch_up(self.pg, self.conn, self.apply, shared=self.pg.counters())
        self._shared_head = replica_head(self.conn)
        self._lock_first = False

    def _savepoint(self) -> Iterator[Any]:
        name = f"unit{self._depth}"
        with self.pg.savepoint():
            self._depth += 1
            try:
                with savepoint(self.conn, name):
                    yield self.conn
            except BaseException:
                # A row lock taken or used inside a rolled-back savepoint may be gone with it:
                # take it again (harmlessly, if still held) at the next append.
                self._locked_depth = None
                raise
            finally:
                self._depth -= 1

    def _commit_both(self) -> None:
        try:
            if self.pg.in_transaction:  # not when the append committed it early (see ``append``)
                self._commit_shared()
        except MemoreeError:
            self.pg.rollback()
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

    def _commit_shared(self) -> None:
        """Commit the shared transaction, timing it when it holds the append lock: the lock is
        released only when PostgreSQL's commit (its WAL flush) returns, so that is part of the hold."""
        started = time.perf_counter()
        self.pg.commit()
        if self._lock_taken_at:
            self.lock_commits.append(time.perf_counter() - started)

    def _push_checkpoints(self) -> None:
        """Publish checkpoints sealed in this transaction (the local table holds them first)."""
        newest = local_checkpoints(self.conn)
        if newest > self._checkpoints_before:
            locked = self.pg.lock()  # taken now if no append took it; the counters either way
            if self._locked_depth is None:
                self._hold_lock(locked, depth=self._depth)
            if locked.checkpoints != self._checkpoints_before:
                self._lock_first = True  # another host sealed meanwhile: seal again, locked first
                raise StaleDecision("another host published a checkpoint while this one sealed",
                                    details={"checkpoints": locked.checkpoints})
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
        lone = self._depth == 1 and bool(events) and all(e.type in INDEPENDENT_CREATIONS for e in events)
        if lone and self._locked_depth is None:
            if self._guess_skip or self._others_writing():
                self._guess_skip = max(0, self._guess_skip - 1)
                recorded = self._append_on_known_head(events)
            else:
                recorded = self._append_on_guess(events)
            if recorded is not None:
                return recorded
        head, behind_from = self._lock_for_write(events, lone=lone)
        started = time.perf_counter()
        try:
            # The head is known: one round trip, which for a lone creation commits too (it has
            # nothing else to write to the shared log), so the lock covers the append alone
            # (lock, rows, commit) and not this host storing and projecting its own event and
            # other hosts' new ones; a few of those are read in that round trip (ahead of the
            # append, a read of committed rows), a longer backlog after the commit. A failure
            # after the commit leaves the event durable (a retry with the same key finds it), as
            # a failed local commit always could.
            if lone:
                window = 0 if behind_from is None else head.commit_seq - behind_from.commit_seq
                recorded, page = self.pg.append_and_commit(
                    events, head, read_first=(behind_from.commit_seq, window)
                    if behind_from is not None and window <= LOCKED_READ_MAX else None)
            else:
                recorded = self.pg.append(events, head=head)
        except (IdempotencyConflict, StreamVersionConflict) as exc:
            if behind_from is None:
                raise
            raise self._taken_elsewhere(head.commit_seq) from exc
        if not lone:  # other hosts' events before it are in the replica and projections already
            return self._store_own(recorded)
        self.lock_commits.append(time.perf_counter() - started)
        self._release_lock()
        return self._after_own_append(recorded, behind_from or head, self._locked, page)

    def _append_on_guess(self, events: Sequence[NewEvent]) -> list[RecordedEvent] | None:
        """A lone creation on a host that was current at its last write: append after this host's
        replica head, guessing that it is still the shared head (and that no other host recorded
        a no-op or sealed since), in one round trip that takes the lock, appends and commits.
        None when the guess was wrong: nothing was written and the caller locks first."""
        guessed = local_counters(self.conn)
        local = LogHead(guessed.seq, guessed.hash)
        started = time.perf_counter()
        self.guesses[0] += 1
        try:
            recorded = self.pg.append_on_guess(events, guessed, wait=False)
        except HeadMoved as moved:  # another host is writing: for a while, longer at each miss,
            self._missed_guess(moved)  # append on the head last seen, waiting for the outcome
            return None
        self._guess_sent_at = started
        return self._after_own_append(recorded, local, guessed)

    def _append_on_known_head(self, events: Sequence[NewEvent]) -> list[RecordedEvent] | None:
        """A lone creation while other hosts write: the same one statement, on the head this host
        last saw (its replica's, or the one a missed guess reported when that is further on),
        waiting for the outcome; a miss reports the head again and the next try uses it, up to
        ``KNOWN_HEAD_TRIES``. Other hosts' events before it are then taken in, in order, and
        only then its own. The append lock is held inside that one statement alone. None (the
        caller locks) when the tries ran out or another host recorded a no-op this host lacks."""
        mine = local_counters(self.conn)
        local, known = LogHead(mine.seq, mine.hash), self._known_head
        if known is None or known.seq <= local.commit_seq:
            known = mine
        for attempt in range(KNOWN_HEAD_TRIES):
            if known.noops != mine.noops:
                return None
            self.guesses[0] += 1
            try:
                recorded = self.pg.append_on_guess(events, known)
            except HeadMoved as moved:
                self.guesses[1] += 1
                if moved.current is None:
                    return None
                known = moved.current
                continue
            except (IdempotencyConflict, StreamVersionConflict) as exc:
                if known.seq == local.commit_seq:
                    raise
                raise self._taken_elsewhere(known.seq) from exc
            self._known_head = None
            self._record_hold()
            if attempt == 0 and known.seq == local.commit_seq:  # nobody else wrote: guess again
                self._guess_skip = self._guess_backoff = 0
            return self._after_own_append(recorded, local, known)
        self._known_head = known
        return None

    def _after_own_append(self, recorded: list[RecordedEvent], local: LogHead, shared: SharedCounters,
                          page: SharedPage | None = None) -> list[RecordedEvent]:
        """After a lone creation's append on the shared head ``shared`` (its counters): take in,
        in order, other hosts' events from this host's replica head ``local`` up to it (``page``:
        the first page, when the append read it), and the checkpoints other hosts sealed
        meanwhile, then store this host's own events. The last page taken in is left for the
        caller to project together with its own events (``taken_in``)."""
        head = LogHead(shared.seq, shared.hash)
        if local.commit_seq < head.commit_seq:
            self._take_in_through(head, local, page)
        if shared.checkpoints > self._checkpoints_before:  # none of them is this host's
            copy_side_records(self.pg, self.conn, shared)
            self._checkpoints_before = shared.checkpoints
        return self._store_own(recorded)

    def _store_own(self, recorded: list[RecordedEvent]) -> list[RecordedEvent]:
        store_replica(self.conn, recorded)
        if recorded:
            self._shared_head = LogHead(recorded[-1].commit_seq, recorded[-1].hash)
        return recorded

    def _taken_elsewhere(self, shared_seq: int) -> StaleDecision:
        """The decision of a write whose idempotency key or stream another host appended first,
        unseen by this host (a retry landing here?): the next transaction locks first and decides
        again on a caught-up host, where a retry of the same request replays its original result."""
        self._lock_first = True
        return StaleDecision("another host appended this write's idempotency key or stream; "
                             "deciding again", details={"shared_seq": shared_seq})

    @contextmanager
    def taken_in(self) -> Iterator[list[RecordedEvent]]:
        """Other hosts' events this transaction's append stored ahead of its own and left
        unprojected (see ``_after_own_append``), their blobs and purges at hand meanwhile: the
        caller projects them, then its own events, in one batch (``CommandHandler.project_appended``)."""
        held, self._held = self._held, None
        if held is None:
            yield []
            return
        events, page = held
        with self.cas.prefetched(events, page):
            yield events

    def _record_hold(self) -> None:
        """The append lock's hold in a one-statement append, by PostgreSQL's clock."""
        self.lock_holds.append(self.pg.last_hold_s)
        self.lock_commits.append(self.pg.last_hold_s)  # its commit is inside that statement

    def _missed_guess(self, moved: HeadMoved | None = None) -> None:
        """Another host is writing: the next writes append on the head last seen (``moved``
        reports it), waiting for the outcome, more at each miss in a row."""
        if moved is not None and moved.current is not None:
            self._known_head = moved.current
        self.guesses[1] += 1
        self._guess_backoff = min(GUESS_BACKOFF_MAX, 2 * self._guess_backoff or 1)
        self._guess_skip = self._guess_backoff

    def _settle_guess(self) -> None:
        """Wait for the outcome of a guessed-head append sent in this transaction (its host stored
        and projected the events meanwhile, in the local transaction, not committed yet). A wrong
        guess wrote nothing: the attempt is decided again, on the locked path."""
        started, self._guess_sent_at = self._guess_sent_at, None
        if started is None:
            return
        try:
            self.pg.settle()
        except HeadMoved as exc:
            self._missed_guess(exc)
            self._guess_skip += 1  # the retry waits too, and is not one of the back-off's writes
            raise StaleDecision(
                "the shared log moved on since this host's last write; deciding again",
                details={"shared_seq": self._shared_head.commit_seq}) from exc
        self._guess_backoff = 0
        self._record_hold()

    def record_noop(self, key: str, request_digest: str, operation: str, commit_seq: int,
                    result_json: bytes, at: str) -> None:
        if not self._depth:
            raise InternalError("record_noop outside a write transaction")
        self._lock_for_write()
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
        """Bring this host toward the shared head (events, no-op records and checkpoints: a
        write that decides on its input alone does not catch up first) within ``READ_WAIT_S``;
        never fail a read."""
        deadline = time.monotonic() + READ_WAIT_S
        try:
            shared = self.pg.counters()
            while self.apply is not None and behind(self.conn, shared) and time.monotonic() < deadline:
                with self.local_transaction():
                    catch_up(self.pg, self.conn, self.apply, max_events=CATCH_UP_PAGE, shared=shared)
        except (MemoreeError, sqlite3.Error) as exc:
            logger().warning("shared_log_catch_up_failed", error=getattr(exc, "message", str(exc)))


def require_recorded_key(recorded: dict[int, str], key: Any) -> None:
    """Refuse to sign with a node key that differs from the one the shared log recorded.

    Every host that seals or attests must hold the same node key (copy ``keys/`` from the host
    that recorded the epoch); a host with another key would sign checkpoints nobody can verify.
    """

    if recorded.get(key.epoch) != key.public_b32:
        raise ConfigError(
            f"this host's node key (epoch {key.epoch}) is not the one the shared log recorded",
            hint="Copy the keys/ folder from the host that first recorded the key into this data "
                 "dir, then restart; until then this host neither seals nor attests.")
