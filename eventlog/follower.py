"""The catch-up subscription: a thread that keeps this host's replica and projections current.

The cycle (design decision 5): ``LISTEN``, read from this host's checkpoint until caught up,
wait for a notification **or** the poll interval, read again. A notification is only a doorbell:
its payload is ignored and a lost one costs at most one poll interval, because polling is the
truth. Any failure (PostgreSQL gone, the local file busy) drops both connections and starts the
cycle again from the checkpoint after a short backoff. A gap or a break in the shared log is an
integrity error: it is logged and retried, and nothing past it is ever applied.

The follower has its own PostgreSQL connections and its own SQLite connection, so it never
shares a transaction with the engine's writer; each page of events is one local transaction,
which keeps the local write lock short, and is applied as one batch (its blobs read in one query,
its text indexed and embedded once: ``prefetching_sink`` and ``projection_sink``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoree.errors import ConfigError, MemoreeError
from memoree.eventlog.db import connect, sqlite3
from memoree.eventlog.postgres import (
    NOTIFY_CHANNEL,
    DriverError,
    PostgresContentStore,
    PostgresEventStore,
    SharedPage,
    connect_pg,
)
from memoree.eventlog.replica import (
    CATCH_UP_PAGE,
    REPLICA_SYNCHRONOUS,
    PageSink,
    behind,
    catch_up,
    prefetching_sink,
    replica_head,
    take_page,
)
from memoree.eventlog.store import EventSink
from memoree.log import logger

__all__ = ["Follower", "gather_window_s"]

MAX_BACKOFF_S = 5.0
GATHER_MS = 5.0
WRITING_NAP_S = 0.02
# While only this host's engine rings (it writes, nobody else does) there is nothing to answer:
# the follower wakes this seldom to drain those rings.
OWN_WRITES_NAP_S = 0.1


def gather_window_s() -> float:
    """How long the follower waits after another host's doorbell, in seconds:
    ``MEMOREE_FOLLOW_GATHER_MS`` (0 to 1000 ms), else ``GATHER_MS``."""
    raw = os.environ.get("MEMOREE_FOLLOW_GATHER_MS")
    if raw is None:
        return GATHER_MS / 1000
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1000:  # NaN fails too
        raise ConfigError(f"MEMOREE_FOLLOW_GATHER_MS must be a number of milliseconds from 0 to 1000, "
                          f"not {raw!r}")
    return value / 1000


class Follower(threading.Thread):
    """Follows the shared log into one host's SQLite file until stopped."""

    def __init__(self, url: str, db_path: Path, make_sink: Callable[[Any], EventSink], *,
                 poll_s: float = 0.5, local_lock: Any = None,
                 own_sessions: Callable[[], set[int]] = set,
                 writing: Callable[[], bool] = lambda: False) -> None:
        super().__init__(name="memoree-follower", daemon=True)
        self.url = url
        self.db_path = db_path
        self.make_sink = make_sink
        self.poll_s = poll_s
        self.local_lock = local_lock or threading.Lock()
        # PostgreSQL session ids whose appends this host stores itself (its engine's): their
        # doorbells are not this follower's business.
        self.own_sessions = own_sessions
        # Whether this host's engine is writing steadily: then each of its writes takes in what
        # other hosts appended before it (a batch), and the follower only polls (reads that need
        # freshness catch up on their own).
        self.writing = writing
        self.gather_s = gather_window_s()
        self.applied = 0
        self.rounds = 0  # pages applied
        self.woken = 0  # doorbells of other sessions answered
        self.last_error: str | None = None
        self._stopping = threading.Event()
        self._listen: Any = None
        self._store: PostgresEventStore | None = None
        self._local: Any = None
        self._apply: PageSink | None = None

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the cycle to end and wait for it (it closes its own connections)."""
        self._stopping.set()
        if self.is_alive():
            self.join(timeout)

    def run(self) -> None:
        backoff = 0.1
        while not self._stopping.is_set():
            try:
                self._connect()
                self._catch_up()
                self.last_error, backoff = None, 0.1
                self._wait_for_doorbell()
            except Exception as exc:  # the follower outlives any one failure; each is logged
                self._report(exc)
                self._disconnect()
                self._stopping.wait(backoff)
                backoff = min(MAX_BACKOFF_S, backoff * 2)
        self._disconnect()

    def _connect(self) -> None:
        """Open what is missing: LISTEN first, so no append after the next read goes unrung."""
        if self._listen is None:
            self._listen = connect_pg(self.url)
            self._listen.execute(f"LISTEN {NOTIFY_CHANNEL}")
        if self._store is None:
            self._store = PostgresEventStore(self.url)
        if self._local is None:
            self._local = connect(self.db_path, synchronous=REPLICA_SYNCHRONOUS)
            cas = PostgresContentStore(self._store, self._local)
            self._apply = prefetching_sink(cas, self.make_sink(cas))

    def _catch_up(self) -> None:
        """Apply pages until this host holds the shared head, one local transaction per page.

        Each page is read in one round trip (with the head's counters, its blobs and purges)
        before the local write lock is taken, and the lock only when the page holds something
        this host lacks (often the engine's own append got there first), so an idle check never
        blocks a writer.
        """
        assert self._store is not None
        while not self._stopping.is_set():
            after = replica_head(self._local).commit_seq
            page = self._store.read_page(after, CATCH_UP_PAGE)
            # Caught up to that reading when a page was not full: anything appended since rang
            # the doorbell (LISTEN came first), so the next round starts from there.
            if not behind(self._local, page.counters) or self._apply_page(after, page) < CATCH_UP_PAGE:
                return

    def _apply_page(self, after: int, page: SharedPage) -> int:
        """One page (read after ``after``, before the local lock) in one local transaction;
        return how many events it applied."""
        with self.local_lock:
            self._local.execute("BEGIN IMMEDIATE")
            try:
                head = replica_head(self._local)
                if head.commit_seq == after:
                    take_page(self._store, self._local, head, page, self._apply)
                    copied = len(page.rows)
                else:  # the engine's own write took this host into or past the page meanwhile
                    toward = page.counters if head.commit_seq <= page.counters.seq else None
                    copied = catch_up(self._store, self._local, self._apply, max_events=CATCH_UP_PAGE,
                                      shared=toward)
            except BaseException:
                if self._local.in_transaction:
                    self._local.execute("ROLLBACK")
                raise
            self._local.execute("COMMIT")
        self.applied += copied
        self.rounds += 1
        return copied

    def _wait_for_doorbell(self) -> None:
        """Block until another session's notification (one already queued returns at once) or
        the poll interval. The engine's own appends are in this host's replica already, so their
        doorbells wake nobody: while it writes steadily the follower naps (``OWN_WRITES_NAP_S``)
        instead of waking at each of them, and the rings queued meanwhile are drained, so many
        cost one round. While the engine writes steadily, its writes take other hosts' events in:
        the follower then naps (``WRITING_NAP_S``) instead of waking at every ring, and answers
        once the writing stops."""
        deadline = time.monotonic() + self.poll_s
        while (remaining := deadline - time.monotonic()) > 0:
            rung = [n.pid for n in self._listen.notifies(timeout=remaining, stop_after=1)]
            if not rung:
                return
            rung += self._drain()
            if all(pid in self.own_sessions() for pid in rung):
                # The engine's own write: nothing to do. While it writes steadily, nap instead of
                # waking at each of its rings (their queue is drained at the next wait).
                if self.writing() and self._stopping.wait(OWN_WRITES_NAP_S):
                    return
                continue
            while self.writing():
                if time.monotonic() >= deadline or self._stopping.wait(WRITING_NAP_S):
                    return  # the poll interval is over: catch up as after any poll
                self._drain()
            self.woken += 1
            self._gather()
            return

    def _drain(self) -> list[int]:
        """The sessions of the notifications queued now, which are consumed."""
        return [n.pid for n in self._listen.notifies(timeout=0)]

    def _gather(self) -> None:
        """Let appends that follow close behind the one that rang join this round's page (one
        local transaction, its text indexed and embedded once), and drain their rings."""
        if self.gather_s > 0:
            self._stopping.wait(self.gather_s)
            self._drain()

    def _disconnect(self) -> None:
        for resource in (self._listen, self._store, self._local):
            try:
                if resource is not None:
                    resource.close()
            except Exception:  # closing a broken connection must not stop the cycle
                pass
        self._listen = self._store = self._local = None

    def _report(self, exc: Exception) -> None:
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        if message != self.last_error:
            expected = isinstance(exc, MemoreeError | DriverError | sqlite3.Error)
            logger().warning("shared_log_follow_failed", error=message,
                             exc_info=None if expected else exc)
        self.last_error = message
