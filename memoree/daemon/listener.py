"""The daemon's front door: one I/O thread reads every request frame and writes every answer.

No connection can hold the daemon's resources for long, whoever opens it:

* a **per-frame deadline**: a request frame must arrive whole within ``FRAME_DEADLINE_S`` of the
  connection's accept, and its answer must be taken within ``WRITE_DEADLINE_S``; a trickle of
  bytes does not extend either (a slowloris connection is closed at its deadline, unanswered);
* a **cap on open connections** (``MAX_OPEN_CONNECTIONS``): at the cap, the connection that has
  waited longest without delivering its frame is closed to make room, so idle connections never
  lock out a client that sends its request at once;
* the cap stays below the process's descriptor limit (``RLIMIT_NOFILE`` less ``FD_RESERVE`` for
  the store's own files); **EMFILE/ENFILE** on accept (the limit was lowered, or other files took
  the room) closes the oldest incomplete connections, lowers the cap below what is open and
  pauses accepting for a moment, so the store's threads get descriptors again; it never ends the
  daemon;
* a **memory budget** for frames being read: the declared lengths in flight sum to at most
  ``MAX_BUFFERED_BYTES``; a frame that does not fit, or that declares more than the frame limit,
  is closed before its body is read.

A complete frame goes to ``dispatch(raw, peer)``, which returns a future of the answer's bytes
(the writer or the reader pool computes it); the loop writes it without blocking. ``Peer`` says
who is on the other end: the Unix socket's ``SO_PEERCRED`` credentials, or ``tcp``.
"""

from __future__ import annotations

import errno
import selectors
import socket
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from memoree.protocol.framing import peer_credentials

__all__ = ["FRAME_DEADLINE_S", "Listener", "MAX_OPEN_CONNECTIONS", "Peer", "peer_credentials"]

FRAME_DEADLINE_S = 30.0  # the protocol's 30 s; MEMOREE_FRAME_DEADLINE_S may shorten it
WRITE_DEADLINE_S = 30.0
MAX_OPEN_CONNECTIONS = 256
EMFILE_PAUSE_S = 0.05
FD_RESERVE = 64  # descriptors kept free for the store (database, WAL, blobs, keys, logs)
EMFILE_EVICTIONS = 32
# Answers up to this size are sent by the thread that computed them (one non-blocking send).
DIRECT_REPLY_BYTES = 64 * 1024
_HEADER = struct.Struct(">I")


@dataclass(frozen=True)
class Peer:
    """Who sent a request: over a Unix socket the kernel's credentials, over TCP nothing known."""

    transport: str  # "unix" or "tcp"
    pid: int | None = None
    uid: int | None = None


def _descriptor_room() -> int:
    """How many connections fit under the descriptor limit with ``FD_RESERVE`` left over."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_OPEN_CONNECTIONS
    return max(8, soft - FD_RESERVE)


class _Connection:
    __slots__ = ("sock", "peer", "deadline", "header", "body", "declared", "reply", "sent", "charged", "watched")

    def __init__(self, sock: socket.socket, peer: Peer, deadline: float) -> None:
        self.sock, self.peer = sock, peer
        self.deadline = deadline
        self.header = bytearray()
        self.body: bytearray | None = None
        self.declared = 0
        self.reply: memoryview | None = None
        self.sent = 0
        self.charged = 0
        self.watched = False  # registered with the selector for reading


class Listener:
    """The I/O loop over one listening socket (see the module docstring)."""

    def __init__(self, listener: socket.socket, dispatch: Callable[[bytes, Peer], Future[bytes]], *,
                 max_frame_bytes: int, max_buffered_bytes: int,
                 max_open: int = MAX_OPEN_CONNECTIONS, frame_deadline: float = FRAME_DEADLINE_S) -> None:
        self.listener = listener
        self.frame_deadline = frame_deadline
        self.dispatch = dispatch
        self.max_frame_bytes = max_frame_bytes
        self.max_buffered_bytes = max_buffered_bytes
        self.max_open = max_open
        self.unix = listener.family == socket.AF_UNIX
        self.selector = selectors.DefaultSelector()
        self.reading: OrderedDict[socket.socket, _Connection] = OrderedDict()  # oldest first
        self.working: set[_Connection] = set()
        self.writing: dict[socket.socket, _Connection] = {}
        self.buffered = 0
        self.stopping = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._done: list[tuple[_Connection, bytes]] = []
        self._done_lock = threading.Lock()
        self._accept_paused_until = 0.0
        self.dropped = 0  # connections closed unanswered (deadline, cap, budget, oversize)

    # ------------------------------------------------------------------ the loop

    def serve(self) -> None:
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        try:
            while not self.stopping.is_set():
                self._tick()
        finally:
            self._close_all()

    def stop(self) -> None:
        self.stopping.set()
        self._wake()

    def open_connections(self) -> int:
        return len(self.reading) + len(self.working) + len(self.writing)

    def _tick(self) -> None:
        now = time.monotonic()
        if self._accept_paused_until and now >= self._accept_paused_until:
            self._accept_paused_until = 0.0
            self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        for key, mask in self.selector.select(timeout=self._next_timeout(now)):
            if key.data == "accept":
                self._accept()
            elif key.data == "wake":
                self._drain_wake()
            elif mask & selectors.EVENT_READ and key.fileobj in self.reading:
                self._read(self.reading[key.fileobj])  # type: ignore[index]
            elif mask & selectors.EVENT_WRITE and key.fileobj in self.writing:
                self._write(self.writing[key.fileobj])  # type: ignore[index]
        self._take_finished()
        self._expire(time.monotonic())

    def _next_timeout(self, now: float) -> float:
        deadlines = [c.deadline for c in self.reading.values()] + [c.deadline for c in self.writing.values()]
        if self._accept_paused_until:
            deadlines.append(self._accept_paused_until)
        return max(0.0, min(min(deadlines, default=now + 0.5), now + 0.5) - now)

    # ------------------------------------------------------------------ accepting

    def _accept(self) -> None:
        for _ in range(64):  # a burst at a time, so reading and writing keep their turn
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self._out_of_descriptors()
                    return
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EPERM):
                    continue
                if self.stopping.is_set():
                    return
                raise
            if self.open_connections() >= self.max_open and not self._evict_oldest():
                self._drop(sock)
                continue
            self._admit(sock)

    def _admit(self, sock: socket.socket) -> None:
        try:
            sock.setblocking(False)
            if self.unix:
                pid, uid, _ = peer_credentials(sock)
                peer = Peer("unix", pid=pid, uid=uid)
            else:
                peer = Peer("tcp")
            connection = _Connection(sock, peer, time.monotonic() + self.frame_deadline)
        except OSError:
            self._drop(sock)
            return
        self.reading[sock] = connection
        # A client sends its frame right after connecting: it is usually here already, and
        # then the connection never needs the selector for reading.
        self._read(connection)
        if sock in self.reading:
            try:
                self.selector.register(sock, selectors.EVENT_READ, "conn")
            except (OSError, ValueError):
                self._close_reading(connection)
                return
            connection.watched = True

    def _out_of_descriptors(self) -> None:
        """Free descriptors for the store's threads: close the oldest idle connections, keep the
        cap below what remains open, and stop accepting for a moment."""
        for _ in range(EMFILE_EVICTIONS):
            if not self._evict_oldest():
                break
        self.max_open = max(1, min(self.max_open, self.open_connections()))
        self._pause_accepting()

    def _pause_accepting(self) -> None:
        self._accept_paused_until = time.monotonic() + EMFILE_PAUSE_S
        self.selector.unregister(self.listener)

    def _evict_oldest(self) -> bool:
        """Close the connection that has waited longest without delivering its frame."""
        if not self.reading:
            return False
        _, oldest = next(iter(self.reading.items()))
        self._close_reading(oldest)
        return True

    # ------------------------------------------------------------------ reading

    def _read(self, conn: _Connection) -> None:
        """Read what has arrived: the header, then (its length charged first) as much of the
        body as is there, until the frame is whole or the socket has nothing more for now."""
        try:
            if conn.body is None:
                chunk = conn.sock.recv(_HEADER.size - len(conn.header))
                if not chunk:
                    return self._close_reading(conn)
                conn.header += chunk
                if len(conn.header) < _HEADER.size or not self._start_body(conn):
                    return None
            while conn.body is not None and len(conn.body) < conn.declared:
                chunk = conn.sock.recv(min(conn.declared - len(conn.body), 1 << 20))
                if not chunk:
                    return self._close_reading(conn)
                conn.body += chunk
            if conn.body is not None:
                self._frame_complete(conn)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close_reading(conn)

    def _start_body(self, conn: _Connection) -> bool:
        """Charge the declared length to the budget; False when it was refused (and closed)."""
        (declared,) = _HEADER.unpack(bytes(conn.header))
        if declared > self.max_frame_bytes or self.buffered + declared > self.max_buffered_bytes:
            self._close_reading(conn)  # before a single body byte is read
            return False
        conn.declared, conn.body = declared, bytearray()
        conn.charged = declared
        self.buffered += declared
        return True

    def _frame_complete(self, conn: _Connection) -> None:
        del self.reading[conn.sock]
        if conn.watched:
            self.selector.unregister(conn.sock)
            conn.watched = False
        self.working.add(conn)
        raw = bytes(conn.body or b"")
        conn.body = None
        self._uncharge(conn)
        try:
            future = self.dispatch(raw, conn.peer)
        except Exception:  # noqa: BLE001 - dispatch answers; a failure of its own drops the request
            self.working.discard(conn)
            self._drop(conn.sock)
            return
        future.add_done_callback(lambda done: self._finished(conn, done))

    def _finished(self, conn: _Connection, done: Future[bytes]) -> None:
        """Called on the thread that computed the answer: send it from here when the socket
        takes it whole at once (a small answer nearly always fits its buffer), else hand the rest
        to the loop. The connection is in no selector and no other thread's hands meanwhile."""
        try:
            reply = done.result()
        except BaseException:  # noqa: BLE001 - answered by the loop: closed unanswered
            reply = b""
        if reply and len(reply) <= DIRECT_REPLY_BYTES and not self.stopping.is_set():
            framed = _HEADER.pack(len(reply)) + reply
            try:
                sent = conn.sock.send(framed)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:  # the client went away: nothing to answer
                sent = len(framed)
            if sent == len(framed):
                self.working.discard(conn)
                conn.sock.close()
                return
            conn.reply, conn.sent = memoryview(framed), sent
        with self._done_lock:
            self._done.append((conn, reply))
        self._wake()

    def _take_finished(self) -> None:
        with self._done_lock:
            done, self._done = self._done, []
        for conn, reply in done:
            self.working.discard(conn)
            if not reply:
                self._drop(conn.sock)
                continue
            if conn.reply is None:
                conn.reply = memoryview(_HEADER.pack(len(reply)) + reply)
            conn.deadline = time.monotonic() + WRITE_DEADLINE_S
            try:
                self.selector.register(conn.sock, selectors.EVENT_WRITE, "conn")
            except (OSError, ValueError):
                self._drop(conn.sock)
                continue
            self.writing[conn.sock] = conn
            self._write(conn)

    # ------------------------------------------------------------------ writing

    def _write(self, conn: _Connection) -> None:
        assert conn.reply is not None
        try:
            while conn.sent < len(conn.reply):
                conn.sent += conn.sock.send(conn.reply[conn.sent:conn.sent + (1 << 20)])
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            pass  # the client went away: nothing to answer
        self._close_writing(conn)

    # ------------------------------------------------------------------ endings

    def _expire(self, now: float) -> None:
        for conn in [c for c in self.reading.values() if c.deadline <= now]:
            self._close_reading(conn)
        for conn in [c for c in self.writing.values() if c.deadline <= now]:
            self._close_writing(conn)

    def _uncharge(self, conn: _Connection) -> None:
        self.buffered -= conn.charged
        conn.charged = 0

    def _close_reading(self, conn: _Connection) -> None:
        self.reading.pop(conn.sock, None)
        self._uncharge(conn)
        self._unregister(conn.sock)
        self._drop(conn.sock)

    def _close_writing(self, conn: _Connection) -> None:
        self.writing.pop(conn.sock, None)
        self._unregister(conn.sock)
        conn.sock.close()

    def _unregister(self, sock: socket.socket) -> None:
        try:
            self.selector.unregister(sock)
        except (KeyError, ValueError):
            pass

    def _drop(self, sock: socket.socket) -> None:
        self.dropped += 1
        try:
            sock.close()
        except OSError:
            pass

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass  # a wake-up is already pending (or the loop has ended)

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _close_all(self) -> None:
        for conn in list(self.reading.values()):
            self._close_reading(conn)
        for conn in list(self.writing.values()):
            self._close_writing(conn)
        self.selector.close()
        self._wake_r.close()
        self._wake_w.close()
