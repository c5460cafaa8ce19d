"""One reader process: answers the daemon's read requests on a read-only connection of its own.

The daemon (``memoree.daemon.readpool``) starts each reader as ``python -m memoree.daemon.reader
CHANNEL_FD LIFE_FD``: a fresh interpreter (never a fork of the threaded daemon), so it has a
GIL of its own and reads run beside the writer and beside each other on as many cores as there
are readers. Over the channel (one end of a Unix socketpair) the daemon sends a first frame
saying which store and which daemon this is, the reader answers ``ready`` once its connection is
open, then each frame is one admitted request and each answer one reply envelope, strictly in
turn. The reader never sees a client: admission (peer credentials, the TCP secret) stays in the
daemon's listener.

Each request runs inside one read transaction (one WAL snapshot) that begins after the request
was received, so a write acknowledged before the request was sent is always visible
(``min_commit_seq`` and read-your-writes hold). The connection is opened ``mode=ro`` and only
``POOLED_OPS`` are answered: a reader cannot write the store. It ends when the channel closes
(the daemon stopped it) or when ``LIFE_FD``, a pipe whose write end only the daemon holds, reaches
end of file (the daemon died, even by ``kill -9``): no reader outlives its daemon.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from memoree import limits
from memoree.daemon.readpool import OWN_SNAPSHOT_OPS, POOLED_OPS
from memoree.daemon.replies import failure_reply, op_of, too_large
from memoree.errors import InternalError
from memoree.eventlog.cas import ContentStore
from memoree.eventlog.db import DB_FILENAME, connect
from memoree.eventlog.keys import KeyRing
from memoree.eventlog.sqlite import read_events, read_raw_events
from memoree.eventlog.timefmt import now_utc
from memoree.ids import new_id
from memoree.protocol.framing import FrameTruncated, read_frame, write_frame

__all__ = ["ReadView", "main"]

# A request is a frame the listener accepted; the first frame (the store's description) is small.
REQUEST_LIMIT = limits.MAX_FRAME_BYTES
WARM_UP_REQUEST = json.dumps({
    "v": 1, "request_id": "req_reader_warm_up", "op": "search", "input": {"query": "reader warm up"},
    "context": {"workspace_id": "wsp_reader_warm_up", "project_id": "prj_reader_warm_up"},
}).encode()


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


class _Clock:
    """What reads use of the command handler: the time and fresh ids (receipts). No ``execute``."""

    clock = staticmethod(now_utc)
    new_id = staticmethod(new_id)


class ReadView:
    """An engine-shaped, read-only view of the store on one connection of its own: the
    attributes the queries use (``conn``, ``cas``, ``log``, ``head()``, ``keys``,
    ``handler.clock``)."""

    shared = None

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.db_path = data_dir / DB_FILENAME
        self.keys = KeyRing(data_dir / "keys")
        self.handler = _Clock()
        self.conn = connect(self.db_path, readonly=True)
        self.cas = ContentStore(self.conn, data_dir / "blobs")
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


class Reader:
    """The request loop of one reader process (see the module docstring)."""

    def __init__(self, data_dir: Path, daemon_info: dict[str, Any]) -> None:
        from memoree.service.service import Service

        self.data_dir = data_dir
        self.service = Service(data_dir)
        self.service.daemon_info = daemon_info
        self.view: ReadView | None = ReadView(data_dir)

    def warm_up(self) -> None:
        """Load what reads need (the query modules, the embedding model, the store's vectors) with
        one search in a context nobody uses, so the first client's read pays none of it."""
        self.answer(WARM_UP_REQUEST)

    def serve(self, channel: socket.socket) -> None:
        write_frame(channel, json.dumps({"ready": True, "pid": os.getpid()}).encode())
        while True:
            try:
                raw = read_frame(channel, REQUEST_LIMIT)
            except (FrameTruncated, OSError):
                return  # the daemon closed the channel: this reader is done
            try:
                write_frame(channel, self.answer(raw))
            except OSError:
                return  # the daemon went away while this reader answered

    def answer(self, raw: bytes) -> bytes:
        """The reply envelope for one request (never raises)."""
        op = op_of(raw)
        if not isinstance(op, str) or op not in POOLED_OPS:
            return failure_reply(raw, InternalError(f"a reader process does not answer {op!r}"))
        try:
            if self.view is None:
                self.view = ReadView(self.data_dir)
            view = self.view
            if op in OWN_SNAPSHOT_OPS:
                reply = self.service.reading_through(view, lambda: self._reply(raw))
            else:
                reply = self.service.reading_through(view, lambda: view.snapshot(lambda: self._reply(raw)))
        except BaseException as exc:  # noqa: BLE001 - a reader answers, whatever happens
            self._drop_view()  # a fresh connection for the next request
            return failure_reply(raw, exc)
        return reply

    def _reply(self, raw: bytes) -> bytes:
        reply = self.service.handle_bytes(raw).body
        return too_large(raw) if len(reply) > limits.MAX_FRAME_BYTES else reply

    def _drop_view(self) -> None:
        if self.view is not None:
            try:
                self.view.close()
            except Exception:  # noqa: BLE001 - the connection is being replaced anyway
                pass
            self.view = None


def _end_with_the_daemon(life_fd: int) -> None:
    """Block until the daemon's end of the life pipe closes, then end this process at once."""

    def watch() -> None:
        while True:
            try:
                if not os.read(life_fd, 64):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        os._exit(0)

    threading.Thread(target=watch, name="memoree-reader-life", daemon=True).start()


def _lower_priority(nice: int | str) -> None:
    """Run below the writer: ``idle`` is ``SCHED_IDLE``, a number is a nice increment."""
    if nice == "idle":
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    else:
        os.nice(int(nice))


def main(argv: list[str]) -> int:
    channel_fd, life_fd = int(argv[0]), int(argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is the daemon's to handle
    _end_with_the_daemon(life_fd)
    channel = socket.socket(fileno=channel_fd)
    try:
        hello = json.loads(read_frame(channel, 1 << 20))
    except (FrameTruncated, OSError, ValueError):
        return 1
    _lower_priority(hello.get("nice") or 0)
    reader = Reader(Path(hello["data_dir"]), hello.get("daemon_info") or {})
    reader.warm_up()
    reader.serve(channel)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
