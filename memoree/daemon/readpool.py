"""The daemon's reader pool: reads on connections of their own, off the writer thread.

A few threads, each with a read-only SQLite connection to the store's file, answer the ops that
only read. Each request runs inside one read transaction (one WAL snapshot): the head it checks
``min_commit_seq`` against and every row it reads come from the same moment. A write is
acknowledged only after its COMMIT, and a read begins its snapshot after it was received, so a
client that saw its write acknowledged always reads it back. A slow read (a typo channel, a large
``context.build``, a ``verify``) holds one reader, never the writer or the other readers.

``ReadView`` is what the readers see instead of the engine: the same attributes the queries use
(``conn``, ``cas``, ``log``, ``head()``, ``keys``, ``handler.clock``), bound to the reader's
connection. With a shared PostgreSQL log every op stays on the writer (``pooled`` says no).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

from memoree.eventlog.db import connect
from memoree.eventlog.sqlite import read_events, read_raw_events

__all__ = ["POOLED_OPS", "READ_THREADS", "ReadView", "ReaderPool"]

READ_THREADS = 3
# Ops that only read the store's file (or nothing at all). Ops that may write (fact.recall
# materializes, receipt.verify and fact.identity record the key epoch at first use) or copy the
# store (backup.create) stay on the writer.
POOLED_OPS = frozenset({
    "capabilities", "instructions", "schema", "doctor", "context.resolve", "verify",
    "artifact.get", "artifact.history", "claim.get", "claim.history", "relation.list",
    "conflict.list", "search", "memory.recall", "context.build", "memory.probe",
    "memory.retrieve", "citation.get", "band.list",
})
# Ops that open their own snapshot (verify reads one, then runs FTS5's check on its own connection).
OWN_SNAPSHOT_OPS = frozenset({"verify"})


class _ReadLog:
    """The log as a reader sees it: head and ordered reads through the reader's connection."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def head(self) -> Any:
        from memoree.eventlog.sqlite import GENESIS_HASH, LogHead

        row = self.conn.execute(
            "SELECT commit_seq, hash FROM events ORDER BY commit_seq DESC LIMIT 1").fetchone()
        return LogHead(0, GENESIS_HASH) if row is None else LogHead(row[0], bytes(row[1]))

    def read(self, after: int = 0, limit: int | None = None) -> Iterator[Any]:
        return read_events(self.conn, after, limit)

    def read_raw(self, after: int = 0, limit: int | None = None) -> Iterator[Any]:
        return read_raw_events(self.conn, after, limit)


class ReadView:
    """An engine-shaped, read-only view of the store on one connection of its own."""

    shared = None

    def __init__(self, engine: Any) -> None:
        from memoree.eventlog.cas import ContentStore

        self.data_dir = engine.data_dir
        self.db_path = engine.db_path
        self.keys = engine.keys
        self.handler = engine.handler  # the clock only: readers never execute commands
        self.projectors = engine.projectors
        self.conn = connect(engine.db_path, readonly=True)
        self.cas = ContentStore(self.conn, engine.data_dir / "blobs")
        self.log = _ReadLog(self.conn)

    def head(self) -> int:
        return self.log.head().commit_seq

    def snapshot(self, work: Callable[[], Any]) -> Any:
        """Run ``work`` inside one read transaction (one WAL snapshot)."""
        self.conn.execute("BEGIN")
        try:
            return work()
        finally:
            if self.conn.in_transaction:
                self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


class ReaderPool:
    """``READ_THREADS`` threads answering read requests, each through its own ``ReadView``."""

    def __init__(self, service: Any, answer: Callable[[bytes], bytes], threads: int = READ_THREADS) -> None:
        self.service = service
        self.answer = answer  # raw request -> envelope bytes (never raises)
        self.inbox: queue.Queue[tuple[bytes, Future[bytes]] | None] = queue.Queue()
        self.count = threads
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        # Each reader's connection is opened now, not at its first request: a daemon short of
        # file descriptors later (a flood of connections) still has its readers.
        for n in range(self.count):
            thread = threading.Thread(target=self._run, args=(ReadView(self.service.engine),),
                                      name=f"memoree-reader-{n}", daemon=True)
            self.threads.append(thread)
            thread.start()

    def submit(self, raw: bytes) -> Future[bytes]:
        future: Future[bytes] = Future()
        self.inbox.put((raw, future))
        return future

    def stop(self) -> None:
        for _ in self.threads:
            self.inbox.put(None)
        for thread in self.threads:
            thread.join(10)

    def _run(self, first_view: ReadView) -> None:
        view: ReadView | None = first_view
        try:
            while True:
                item = self.inbox.get()
                if item is None:
                    return
                raw, future = item
                try:
                    if view is None:
                        view = ReadView(self.service.engine)
                    reply = self._answer_through(view, raw)
                except BaseException as exc:  # noqa: BLE001 - a reader answers, whatever happens
                    reply = self.answer_failure(raw, exc)
                    if view is not None:
                        view.close()
                        view = None  # a fresh connection for the next request
                future.set_result(reply)
        finally:
            if view is not None:
                view.close()

    def _answer_through(self, view: ReadView, raw: bytes) -> bytes:
        from memoree.daemon.replies import op_of

        if op_of(raw) in OWN_SNAPSHOT_OPS:
            return self.service.reading_through(view, lambda: self.answer(raw))
        return self.service.reading_through(view, lambda: view.snapshot(lambda: self.answer(raw)))

    def answer_failure(self, raw: bytes, exc: BaseException) -> bytes:
        from memoree.daemon.replies import failure_reply

        return failure_reply(raw, exc)
