"""The daemon: one process owns the store and answers framed requests on a socket.

Connections are handled by at most four threads (a fifth is closed at once, without a response);
each reads one frame (a declared length over the limit is refused before the body is read), hands
it to the single writer thread and writes the answer back. The writer groups the mutations that
are waiting into one transaction, each request in its own savepoint, and acknowledges them only
after the one COMMIT (group commit): concurrent clients share an fsync, and nothing is answered
before it is durable. Reads run between groups, never inside an open one, so no read sees an
unacknowledged write.

The Unix socket lives in an owner-only directory with mode 0600; a singleton lock guards each
socket path and each data dir; a stale socket from a dead daemon is removed; TCP binds loopback
only unless deliberately overridden. SIGINT and SIGTERM stop it cleanly.
"""

from __future__ import annotations

import fcntl
import os
import queue
import signal
import socket
import stat
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import msgspec

from memoree import __version__, limits
from memoree.client.transport import Endpoint
from memoree.errors import ConfigError, ContentTooLarge, InternalError, MemoreeError, TransportError
from memoree.hosts import is_loopback
from memoree.protocol.framing import FrameTooLarge, FrameTruncated, read_frame, write_frame
from memoree.protocol.envelope import error_envelope

__all__ = ["Daemon", "serve"]

IO_TIMEOUT_S = 30.0
MAX_GROUP = 64


class _OpOnly(msgspec.Struct):
    op: str = ""


_op_decoder = msgspec.json.Decoder(_OpOnly)


def _acquire_lock(path: Path, what: str) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise TransportError(f"another daemon owns {what}") from None
    return fd


class Writer(threading.Thread):
    """The one thread that touches the store; it batches waiting mutations into one commit."""

    def __init__(self, service: Any) -> None:
        super().__init__(name="memoree-writer", daemon=True)
        self.service = service
        self.inbox: queue.Queue[tuple[bytes, Future[bytes]] | None] = queue.Queue()
        self.groups = 0
        self.grouped_requests = 0

    def submit(self, raw: bytes) -> Future[bytes]:
        future: Future[bytes] = Future()
        self.inbox.put((raw, future))
        return future

    def stop(self) -> None:
        self.inbox.put(None)

    def run(self) -> None:
        from memoree.eventlog.sealing import BATCH_SECONDS

        while True:
            try:
                item = self.inbox.get(timeout=BATCH_SECONDS)
            except queue.Empty:
                self._seal(force_age=True)
                continue
            if item is None:
                return
            batch = [item]
            while len(batch) < MAX_GROUP:
                try:
                    extra = self.inbox.get_nowait()
                except queue.Empty:
                    break
                if extra is None:
                    self.inbox.put(None)
                    break
                batch.append(extra)
            self._process(batch)
            self._seal(force_age=False)

    def _seal(self, *, force_age: bool) -> None:
        """Close a Merkle batch when one is full, or (on idle) when any event is unsealed."""
        from memoree.eventlog.sealing import maybe_seal

        try:
            maybe_seal(self.service.engine, force_age=force_age)
        except Exception as exc:  # sealing must never take the writer down
            from memoree.log import logger

            logger().error("seal_failed", exc_info=exc)

    def _process(self, batch: list[tuple[bytes, Future[bytes]]]) -> None:
        mutations = [(raw, fut) for raw, fut in batch if self._is_mutation(raw)]
        reads = [(raw, fut) for raw, fut in batch if not self._is_mutation(raw)]
        if len(mutations) > 1:
            self._commit_group(mutations)
        else:
            reads = mutations + reads
        for raw, future in reads:
            future.set_result(self.service.handle_bytes(raw).body)

    def _is_mutation(self, raw: bytes) -> bool:
        from memoree.protocol.ops import OPS

        try:
            spec = OPS.get(_op_decoder.decode(raw).op)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return False
        return spec is not None and spec.mutating

    def _commit_group(self, group: list[tuple[bytes, Future[bytes]]]) -> None:
        replies: list[bytes] = []
        try:
            with self.service.engine.group():
                for raw, _ in group:
                    replies.append(self.service.handle_bytes(raw).body)
        except MemoreeError as exc:
            self.service.engine.handler.drop_deferred()
            failure = InternalError(f"the group commit failed, nothing was written: {exc.message}",
                                    retryable=True)
            replies = [_with_request_id(raw, failure) for raw, _ in group]
        else:
            self.service.engine.handler.run_deferred()
        self.groups += 1
        self.grouped_requests += len(group)
        for (_, future), reply in zip(group, replies):
            future.set_result(reply)


def _with_request_id(raw: bytes, error: MemoreeError) -> bytes:
    from memoree.service.service import _salvage_request_id

    return error_envelope(_salvage_request_id(raw, "req_transport"), error.to_body())


class Daemon:
    """A listening socket, its locks, the connection threads and the writer."""

    def __init__(self, service: Any, endpoint: Endpoint, *, lifecycle_owner: str = "external",
                 allow_non_loopback: bool = False, http: tuple[str, int] | None = None) -> None:
        self.service = service
        self.http_address = http  # optional emem REST front (memoree.daemon.rest_host), same writer
        self.http: Any = None
        self.endpoint = endpoint
        self.lifecycle_owner = lifecycle_owner
        self.allow_non_loopback = allow_non_loopback
        self.slots = threading.BoundedSemaphore(limits.MAX_CONCURRENT_CONNECTIONS)
        self.stopping = threading.Event()
        self.writer = Writer(service)
        self._locks: list[int] = []
        self.listener: socket.socket | None = None

    def start(self) -> None:
        from memoree.service.engine import prepare_data_dir

        for warning in prepare_data_dir(self.service.data_dir):
            from memoree.log import logger

            logger().warning("data_dir_permissions_tightened", detail=warning)
        self._locks.append(_acquire_lock(self.service.data_dir / "memoreed.lock", f"data dir {self.service.data_dir}"))
        self.service.engine  # open (and if needed rebuild) the store before accepting anyone
        self.service.daemon_info = {
            "running": True, "daemon_pid": os.getpid(), "lifecycle_owner": self.lifecycle_owner,
            "endpoint": str(self.endpoint),
        }
        self.listener = self._listen()
        self.writer.start()
        if self.http_address is not None:
            from memoree.daemon.rest_host import serve_daemon_http

            self.http = serve_daemon_http(self, *self.http_address,
                                          allow_non_loopback=self.allow_non_loopback)
            self.service.daemon_info["http_endpoint"] = self.http.url

    def _listen(self) -> socket.socket:
        if self.endpoint.kind == "unix":
            return self._listen_unix(Path(str(self.endpoint.address)))
        host, port = self.endpoint.address  # type: ignore[misc]
        if not self.allow_non_loopback and not is_loopback(host):
            raise ConfigError(f"refusing to listen on non-loopback {host}; pass --dangerously-allow-non-loopback-tcp to override")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(64)
        return sock

    def _listen_unix(self, path: Path) -> socket.socket:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if stat.S_IMODE(path.parent.stat().st_mode) & 0o077:
            os.chmod(path.parent, 0o700)
        self._locks.append(_acquire_lock(path.with_name(path.name + ".lock"), f"Unix endpoint {path}"))
        if path.exists() or path.is_symlink():
            if not stat.S_ISSOCK(path.lstat().st_mode):
                raise ConfigError(f"{path} exists and is not a socket; refusing to replace it")
            if _answers(path):
                raise TransportError(f"a daemon is already accepting connections on {path}")
            path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            sock.bind(str(path))
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        sock.listen(64)
        return sock

    def serve_forever(self) -> None:
        assert self.listener is not None
        self.listener.settimeout(0.2)
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self.stopping.is_set():
                    break
                raise
            if not self.slots.acquire(blocking=False):
                conn.close()  # over the connection limit: dropped without a response
                continue
            threading.Thread(target=self._serve_connection, args=(conn,), daemon=True).start()
        self._shutdown()

    def stop(self) -> None:
        self.stopping.set()

    def _serve_connection(self, conn: socket.socket) -> None:
        released = False
        try:
            conn.settimeout(IO_TIMEOUT_S)
            try:
                raw = read_frame(conn, limits.MAX_FRAME_BYTES)
            except (FrameTooLarge, FrameTruncated, OSError):
                return  # oversize, truncated or timed out: closed without a response
            reply = self.writer.submit(raw).result()
            if len(reply) > limits.MAX_FRAME_BYTES:
                reply = _with_request_id(raw, ContentTooLarge("content exceeds the configured size limit: the response is larger than a frame"))
            # The work is done: free the slot before the client can read the answer and reconnect.
            self.slots.release()
            released = True
            try:
                write_frame(conn, reply)
            except OSError:
                pass
        finally:
            conn.close()
            if not released:
                self.slots.release()

    def _shutdown(self) -> None:
        if self.http is not None:
            self.http.stop()  # before the writer stops, so no HTTP request waits on it forever
        if self.listener is not None:
            self.listener.close()
        if self.endpoint.kind == "unix":
            try:
                Path(str(self.endpoint.address)).unlink()
            except FileNotFoundError:
                pass
        self.writer.stop()
        self.writer.join(10)
        self.service.close()
        for fd in self._locks:
            os.close(fd)


def _answers(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError:
        return True  # a timeout or another error: do not assume the socket is stale
    finally:
        probe.close()
    return True


def serve(data_dir: Path, endpoint: Endpoint, *, lifecycle_owner: str = "external",
          allow_non_loopback: bool = False, http: tuple[str, int] | None = None) -> None:
    """Run a daemon until SIGINT or SIGTERM (with the emem REST front when ``http`` is given)."""
    from memoree.service.service import Service

    service = Service(data_dir)
    daemon = Daemon(service, endpoint, lifecycle_owner=lifecycle_owner, allow_non_loopback=allow_non_loopback,
                    http=http)
    from memoree.eventlog.sqlite import storage_errors

    with storage_errors():  # e.g. a full disk: a typed failure, never a traceback
        daemon.start()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: daemon.stop())
    from memoree.log import logger

    logger().info("daemon_started", pid=os.getpid(), endpoint=str(endpoint), data_dir=str(data_dir),
                  version=__version__)
    daemon.serve_forever()
    logger().info("daemon_stopped", pid=os.getpid())
