"""The daemon: one process owns the store and answers framed requests on a socket.

The I/O is one thread (``memoree.daemon.listener``): it reads each connection's frame within a deadline,
caps open connections and buffered bytes, and writes answers without blocking, so no client can
hold the others up by sending slowly or not at all. A complete frame is admitted (``_admit``: the
Unix socket's caller must be this user or an allowed uid; a TCP caller must present the store's
secret, ``memoree.client.secret``; a backup over TCP may write only below the configured backup folder)
and routed: reads go to the reader pool (``memoree.daemon.readpool``: processes with connections of their
own, one WAL snapshot each), everything else to the single writer thread. The writer groups the
mutations that are waiting, and those that arrive while it writes them (for up to
``GROUP_OPEN_S``), into one transaction and commits once (group commit): small puts
are decided one by one and written together (``Engine.bulk``), every other mutation runs in its
own savepoint; the answers wait for the WAL sync, which a syncer thread does for
every group committed meanwhile while the writer goes on (``memoree.daemon.durability``):
concurrent clients share an fsync, and nothing is answered before it is durable. The writer survives every exception: a request
whose handling fails in any way gets a typed error envelope, and the loop goes on.

Between requests the writer catches the vectors projection up (``memoree.daemon.catchup``: when
idle, and whenever the lag passes its bound); reads meanwhile embed the lagging events in memory.

Folders must be private and this user's (``memoree.client.paths.private_dir``: another user's folder is
refused, never chmod-ed); the Unix socket is 0600 in such a folder; a singleton lock guards each
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
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import msgspec

from memoree import __version__, limits
from memoree.client.transport import Endpoint
from memoree.daemon import catchup
from memoree.daemon.durability import Answer, Immediate, WalSync, durability_for
from memoree.daemon.listener import Listener, Peer
from memoree.daemon.replies import (
    Admission,
    admission_decoder,
    destination_decoder,
    failure_reply,
    group_failure,
    op_of,
    too_large,
    with_request_id,
)
from memoree.daemon.threadname import name_this_thread
from memoree.errors import ConfigError, MemoreeError, TransportError, Unauthorized
from memoree.eventlog.sealing import BATCH_SECONDS, maybe_seal
from memoree.eventlog.sqlite import storage_errors
from memoree.hosts import is_loopback
from memoree.log import logger
from memoree.protocol.ops import OPS
from memoree.service.engine import prepare_data_dir
from memoree.service.service import Service

__all__ = ["Daemon", "serve"]

MAX_GROUP = 64
# How long a group stays open to mutations that arrive while it is being written (they share its
# commit and its sync). Clients answered by one sync come back together while the writer writes
# the next group; without this the pipeline settles into two half-size groups.
GROUP_OPEN_S = 0.003
# (frame, its future, whether its keys were already checked for repeats, whether it mutates)
_Queued = tuple[bytes, "Future[bytes]", bool, bool]
_WAKE = object()  # in the writer's inbox: the embedding worker answered (``catchup.VectorsCatchUp.collect``)
# Lone groups in a row after which the writer syncs a group itself (``WalSync.after_commit``): a
# lone client gains nothing from the pipeline but pays its hand-off.
LONE_GROUPS_TO_SYNC_INLINE = 2
SEAL_CHECK_EVERY = 64  # requests between checks for a full Merkle batch (1,000 events)
LISTEN_BACKLOG = 512
# Request bodies being read at once: as many maximum-size frames as the protocol's concurrency.
MAX_BUFFERED_BYTES = limits.MAX_CONCURRENT_CONNECTIONS * limits.MAX_FRAME_BYTES


def _acquire_lock(path: Path, what: str) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise TransportError(f"another daemon owns {what}") from None
    return fd


class Writer(threading.Thread):
    """The one thread that touches the store; it batches waiting mutations into one commit.

    Group commit: the writer takes the first request that waits, then every other one already
    queued (never waiting for more, so a lone client is not delayed), runs the mutations among
    them in one transaction, takes in the mutations that arrived meanwhile (for up to
    ``GROUP_OPEN_S``, still never waiting) and commits once. A refused request (a stale revision, an idempotency
    conflict) is answered with its own error and the others go on: a put is refused before any of
    it is written, every other mutation runs in its own savepoint. The group's small puts are
    written together, one statement per table (the bulk lane, ``commands.bulk``), so a failure to
    write them (a full disk) fails the whole group, retryably, and stores none of it. The answers then wait in ``durability`` until
    the commit is on disk (``memoree.daemon.durability``): while the disk syncs one group, the next
    one is already being written, and every group committed meanwhile shares the next sync."""

    def __init__(self, service: Any, durability: Immediate | WalSync | None = None) -> None:
        super().__init__(name="memoree-writer", daemon=True)
        self.service = service
        self.durability = durability or Immediate()
        self.inbox: queue.SimpleQueue[_Queued | object | None] = queue.SimpleQueue()
        self.groups = 0
        self.lone_groups = 0  # groups of one request in a row, this one included
        self.grouped_requests = 0
        self._since_seal_check = 0
        # Whether the stop signal, or the embedding worker's wake-up, was taken from the inbox
        # (``_take_queued``) since the writer last looked.
        self.stopping = self.woken = False
        self.held: list[_Queued] = []  # requests taken while a group was open, for after its commit
        self.late: list[_Queued] = []  # the mutations the open group took in, until it is answered
        self.vectors = catchup.VectorsCatchUp(service, lambda: self.durability, wake=lambda: self.inbox.put(_WAKE))

    def submit(self, raw: bytes, *, keys_checked: bool = False, op: object = None) -> Future[bytes]:
        """Queue a frame for the writer. ``op``: the frame's op when the caller has decoded it
        already (``Daemon.submit``, on the I/O thread), so the writer does not decode it again."""
        future: Future[bytes] = Future()
        self.inbox.put((raw, future, keys_checked, _is_mutation(raw if op is None else None, op)))
        return future

    def stop(self) -> None:
        self.inbox.put(None)

    def run(self) -> None:
        name_this_thread("memoree-writer")
        while True:
            lagging = self.vectors.lagging()
            try:
                item = self.inbox.get(timeout=catchup.CATCH_UP_IDLE_S if lagging else BATCH_SECONDS)
            except queue.Empty:
                if not lagging:
                    self._seal(force_age=True)
                    self.vectors.tend_worker()
                # Idle: slice after slice, looking for a request between two.
                while lagging and self.inbox.empty() and self.vectors.slice():
                    pass
                continue
            if item is None:
                self.vectors.close()
                return
            if item is _WAKE:
                # The embedding worker answered; an idle writer goes on with the next slice.
                if self.vectors.collect() and self.inbox.empty() and self.vectors.idle():
                    self.vectors.slice()
                continue
            batch = self._gather(item)
            try:
                answers = self._process(batch)
            except BaseException as exc:  # noqa: BLE001 - the writer survives everything
                batch, self.late, self.held = batch + self.late + self.held, [], []
                answers = [(raw, future, failure_reply(raw, exc)) for raw, future, _, _ in batch]
            # A lone client (lone groups in a row, nothing waiting): the writer may sync it itself.
            self.lone_groups = self.lone_groups + 1 if len(answers) == 1 else 0
            lone = self.lone_groups >= LONE_GROUPS_TO_SYNC_INLINE and self.inbox.empty()
            self.durability.after_commit(answers, more_waiting=self.stopping or not lone)
            if self.stopping:
                self.vectors.close()
                return
            if self.woken:
                self.woken = False
                self.vectors.collect()
            self._since_seal_check += len(answers)
            if self._since_seal_check >= SEAL_CHECK_EVERY:
                self._since_seal_check = 0
                self._seal(force_age=False)
            self.vectors.after_requests(len(answers))

    def _gather(self, first: _Queued) -> list[_Queued]:
        """The first request and every one queued behind it (up to ``MAX_GROUP``)."""
        batch = [first]
        while len(batch) < MAX_GROUP and (extra := self._take_queued()) is not None:
            batch.append(extra)
        return batch

    def _late_mutation(self) -> _Queued | None:
        """A mutation queued while the open group was being written, or None when the inbox holds
        none (never waiting); anything else taken meanwhile is held for after the commit."""
        while (item := self._take_queued()) is not None:
            if item[3]:
                return item
            self.held.append(item)
        return None

    def _take_queued(self) -> _Queued | None:
        """The next queued request, never waiting: None when none is queued or the stop signal
        came (``stopping``); the embedding worker's wake-up is noted (``woken``) and skipped."""
        while not self.stopping:
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                return None
            if item is None:
                self.stopping = True
            elif item is _WAKE:
                self.woken = True
            else:
                return item  # type: ignore[return-value]
        return None

    def _seal(self, *, force_age: bool) -> None:
        """Close a Merkle batch when one is full, or (on idle) when any event is unsealed."""
        try:
            with self.durability.writing():
                maybe_seal(self.service.engine, force_age=force_age)
        except BaseException as exc:  # noqa: BLE001 - sealing must never take the writer down
            logger().error("seal_failed", exc_info=exc)
        finally:
            self.durability.after_commit([])  # what it committed is synced like any answer's

    def _process(self, batch: list[_Queued]) -> list[Answer]:
        """Each request's answer, in arrival order (mutations first, as one group)."""
        mutations = [item for item in batch if item[3]]
        others = [item for item in batch if not item[3]]
        answers: list[Answer] = []
        self.late = []
        if len(mutations) > 1 or (mutations and isinstance(self.durability, WalSync)):
            answers = self._commit_group(mutations)
            others, self.held = others + self.held, []
        else:
            others = mutations + others
        for raw, future, checked, _ in others:
            try:
                with self.durability.writing():  # ops on this thread may write (fact.recall)
                    reply = self.service.handle_bytes(raw, keys_checked=checked).body
            except BaseException as exc:  # noqa: BLE001 - answered, and the next one is served
                reply = failure_reply(raw, exc)
            answers.append((raw, future, reply))
        return answers

    def _commit_group(self, group: list[_Queued]) -> list[Answer]:
        """Write ``group`` in one transaction, adding to it (in place) the mutations that arrive
        before it closes, and commit once; each request's answer, in order."""
        replies: list[bytes] = []
        handler = self.service.engine.handler
        try:
            with self.service.engine.bulk(commit_section=self.durability.commit_section()):
                for raw, _, checked, _ in group:
                    replies.append(self.service.handle_bytes(raw, keys_checked=checked).body)
                closes_at = time.monotonic() + GROUP_OPEN_S
                while len(group) < MAX_GROUP and time.monotonic() < closes_at:
                    late = self._late_mutation()
                    if late is None:
                        break
                    group.append(late)
                    self.late.append(late)
                    replies.append(self.service.handle_bytes(late[0], keys_checked=late[2]).body)
        except BaseException as exc:  # noqa: BLE001 - nothing of the group is durable: say so
            handler.drop_deferred()
            failure = group_failure(exc)
            replies = [with_request_id(raw, failure) for raw, _, _, _ in group]
        else:
            if handler.deferred:  # effects after the commit (a purge erasing files) need it on disk
                self.durability.after_commit([])
                self.durability.settle()
                handler.run_deferred()
        self.groups += 1
        self.grouped_requests += len(group)
        return [(raw, future, reply) for (raw, future, _, _), reply in zip(group, replies)]


def _is_mutation(raw: bytes | None, op: object = None) -> bool:
    """Whether the frame ``raw`` (or, when None, an already decoded ``op``) names a mutation."""
    try:
        spec = OPS.get(op_of(raw) if raw is not None else op)  # type: ignore[arg-type]
    except TypeError:  # an op that is not a string (a list, an object)
        return False
    return spec is not None and spec.mutating


# glibc's mallopt parameter for the number of malloc arenas (M_ARENA_MAX in malloc.h).
_M_ARENA_MAX = -8


def _share_malloc_arenas() -> None:
    """Let the daemon's threads share two malloc arenas (glibc; elsewhere nothing happens).

    Each thread that first allocates gets an arena of its own by default, and an arena keeps its
    high-water mark: a 24 MiB frame answered once by each reader thread would leave one frame's
    worth of heap per thread. Shared arenas bound the daemon's memory by the largest request, not
    by the largest request times the threads."""
    import ctypes

    try:
        this_process = ctypes.CDLL(None)  # its symbols include the C library's
    except OSError:
        return
    if hasattr(this_process, "mallopt"):
        this_process.mallopt(_M_ARENA_MAX, 2)


class Daemon:
    """A listening socket, its locks, the I/O loop, the reader pool and the writer."""

    def __init__(self, service: Any, endpoint: Endpoint, *, lifecycle_owner: str = "external",
                 allow_non_loopback: bool = False, http: tuple[str, int] | None = None,
                 allowed_uids: frozenset[int] = frozenset(), backup_root: Path | None = None) -> None:
        self.service = service
        self.http_address = http  # optional emem REST front (memoree.daemon.rest_host), same routing
        self.http: Any = None
        self.endpoint = endpoint
        self.lifecycle_owner = lifecycle_owner
        self.allow_non_loopback = allow_non_loopback
        self.allowed_uids = frozenset({os.geteuid()}) | allowed_uids
        self.backup_root = backup_root
        self.stopping = threading.Event()
        self.writer: Writer = Writer(service)
        self.readers: Any = None
        self._locks: list[int] = []
        self.listener: socket.socket | None = None
        self.loop: Listener | None = None
        self._secret: tuple[tuple[int, int], str] | None = None

    def start(self) -> None:
        from memoree.daemon.readpool import read_processes, reader_nice, reads_yield_s

        # Refused before anything starts:
        self.read_count, self.read_nice, self.read_yield = read_processes(), reader_nice(), reads_yield_s()
        _share_malloc_arenas()
        for warning in prepare_data_dir(self.service.data_dir):
            logger().warning("data_dir_permissions_tightened", detail=warning)
        self._locks.append(_acquire_lock(self.service.data_dir / "memoreed.lock", f"data dir {self.service.data_dir}"))
        self.service.engine  # open (and if needed rebuild) the store before accepting anyone
        self.service.engine.keys.current()  # the node key exists before readers look at it
        from memoree.client.secret import ensure_secret

        ensure_secret(self.service.data_dir)
        self.service.daemon_info = {
            "running": True, "daemon_pid": os.getpid(), "lifecycle_owner": self.lifecycle_owner,
            "endpoint": str(self.endpoint),
        }
        self.listener = self._listen()
        synchronous = self.service._engine_options.get("synchronous", "FULL")
        self.writer.durability = durability_for(self.service.engine, synchronous)
        self.writer.durability.start()
        self.writer.start()
        if self.http_address is not None:
            from memoree.daemon.rest_host import serve_daemon_http

            self.http = serve_daemon_http(self, *self.http_address,
                                          allow_non_loopback=self.allow_non_loopback)
            self.service.daemon_info["http_endpoint"] = self.http.url
        self._start_readers()

    def _start_readers(self) -> None:
        """Reader processes for the read ops (``memoree.daemon.readpool``), unless the log is a
        shared PostgreSQL one or ``MEMOREE_READ_PROCESSES=0``: then every op stays on the writer."""
        from memoree.daemon.readpool import ReaderPool

        count = self.read_count if self.service.engine.shared is None else 0
        self.service.daemon_info["read_processes"] = count
        self.service.daemon_info["reads_yield_ms"] = round(self.read_yield * 1000) if count else 0
        if count:
            self.readers = ReaderPool(self.service.data_dir, self.service.daemon_info, count, self.read_nice,
                                      settle=self.writer.durability.settle, yield_s=self.read_yield)
            self.readers.start()

    # ------------------------------------------------------------------ routing

    def submit(self, raw: bytes) -> Future[bytes]:
        """Route one admitted request: reads to the reader pool, the rest to the writer."""
        from memoree.daemon.readpool import POOLED_OPS

        op = op_of(raw)
        if self.readers is not None and isinstance(op, str) and op in POOLED_OPS:
            if op in catchup.DENSE_READS:
                self.writer.vectors.saw_dense_read()
            return self.readers.submit(raw)
        # The strict-JSON check (a pure parse, ~15 us per KiB) runs here, on the I/O thread,
        # beside the writer's SQLite work rather than on the writer; a frame that fails it is
        # answered here by the same code that would answer it there (it never reaches the store).
        from memoree.protocol.strictjson import duplicate_key

        if duplicate_key(raw) is not None:
            done: Future[bytes] = Future()
            done.set_result(self.service.handle_bytes(raw).body)
            return done
        future = self.writer.submit(raw, keys_checked=True, op=op)
        if self.readers is not None:
            self.readers.writes.track(future)  # new reads wait for it (``readpool.WritesFirst``)
        return future

    def dispatch(self, raw: bytes, peer: Peer) -> Future[bytes]:
        """Admit a frame from ``peer`` (refusals are answered at once), then route it."""
        refusal = self._refusal(raw, peer)
        if refusal is not None:
            done: Future[bytes] = Future()
            done.set_result(with_request_id(raw, refusal))
            return done
        future = self.submit(raw)
        answered: Future[bytes] = Future()

        def bounded(result: Future[bytes]) -> None:
            try:
                reply = result.result()
            except BaseException as exc:  # noqa: BLE001
                reply = failure_reply(raw, exc)
            answered.set_result(too_large(raw) if len(reply) > limits.MAX_FRAME_BYTES else reply)

        future.add_done_callback(bounded)
        return answered

    def _refusal(self, raw: bytes, peer: Peer) -> MemoreeError | None:
        if peer.transport == "unix":
            if peer.uid not in self.allowed_uids:
                return Unauthorized(f"this daemon serves uid {os.geteuid()} only; the caller is uid {peer.uid}")
            return None
        try:
            admission = admission_decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeDecodeError):
            admission = Admission()
        if not self.secret_matches(admission.auth):
            return Unauthorized("a TCP request must carry the store's secret in `auth`")
        if admission.op == "backup.create":
            return self._backup_refusal(admission.input)
        return None

    def secret_matches(self, presented: object) -> bool:
        """Whether ``presented`` is the store's current secret (re-read when the file changes)."""
        from memoree.client.secret import SECRET_FILENAME, matches, read_secret

        path = self.service.data_dir / SECRET_FILENAME
        try:
            st = os.stat(path)
        except OSError:
            return False
        stamp = (st.st_ino, st.st_mtime_ns)
        if self._secret is None or self._secret[0] != stamp:
            current = read_secret(self.service.data_dir)
            if current is None:
                return False
            self._secret = (stamp, current)
        return matches(presented, self._secret[1])

    def _backup_refusal(self, raw_input: msgspec.Raw) -> MemoreeError | None:
        """Over TCP a backup may be written only below the configured backup folder."""
        if self.backup_root is None:
            return Unauthorized("backup.create over TCP needs a backup folder: start the daemon with "
                                "--backup-dir DIR (or MEMOREE_BACKUP_DIR)")
        try:
            destination = destination_decoder.decode(raw_input).destination
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None  # the service answers the malformed input
        if not isinstance(destination, str) or "\0" in destination:
            return None
        root = self.backup_root.resolve()
        target = Path(os.path.abspath(destination))
        resolved_parent = target.parent.resolve()
        if resolved_parent != root and root not in resolved_parent.parents:
            return Unauthorized(f"over TCP a backup may be written only below {root}")
        return None

    # ------------------------------------------------------------------ listening

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
        sock.listen(LISTEN_BACKLOG)
        return sock

    def _listen_unix(self, path: Path) -> socket.socket:
        from memoree.log import logger
        from memoree.client.paths import ForeignPath, private_dir

        try:
            for warning in private_dir(path.parent, "runtime dir"):
                logger().warning("runtime_dir_permissions_tightened", detail=warning)
        except ForeignPath as exc:
            raise ConfigError(str(exc)) from None
        self._locks.append(_acquire_lock(path.with_name(path.name + ".lock"), f"Unix endpoint {path}"))
        if path.exists() or path.is_symlink():
            st = path.lstat()
            if not stat.S_ISSOCK(st.st_mode):
                raise ConfigError(f"{path} exists and is not a socket; refusing to replace it")
            if st.st_uid != os.geteuid():
                raise ConfigError(f"{path} is a socket of uid {st.st_uid}, not of this user; refusing it")
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
        sock.listen(LISTEN_BACKLOG)
        return sock

    def serve_forever(self) -> None:
        assert self.listener is not None
        self.loop = Listener(self.listener, self.dispatch, max_frame_bytes=limits.MAX_FRAME_BYTES,
                             max_buffered_bytes=MAX_BUFFERED_BYTES, frame_deadline=_frame_deadline())
        watcher = threading.Thread(target=self._stop_when_asked, name="memoree-stop", daemon=True)
        watcher.start()
        try:
            self.loop.serve()
        finally:
            self._shutdown()

    def _stop_when_asked(self) -> None:
        self.stopping.wait()
        if self.loop is not None:
            self.loop.stop()

    def stop(self) -> None:
        self.stopping.set()
        if self.loop is not None:
            self.loop.stop()

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
        if self.readers is not None:
            self.readers.stop()
        self.writer.stop()
        self.writer.join(10)
        self.writer.durability.stop()
        self.service.close()
        for fd in self._locks:
            os.close(fd)


def _frame_deadline() -> float:
    """The per-frame deadline: the protocol's 30 s, or shorter with ``MEMOREE_FRAME_DEADLINE_S``."""
    from memoree.daemon.listener import FRAME_DEADLINE_S

    try:
        chosen = float(os.environ.get("MEMOREE_FRAME_DEADLINE_S", FRAME_DEADLINE_S))
    except ValueError:
        raise ConfigError("MEMOREE_FRAME_DEADLINE_S must be a number of seconds") from None
    return min(FRAME_DEADLINE_S, max(0.1, chosen))


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
          allow_non_loopback: bool = False, http: tuple[str, int] | None = None,
          allowed_uids: frozenset[int] = frozenset(), backup_root: Path | None = None) -> None:
    """Run a daemon until SIGINT or SIGTERM (with the emem REST front when ``http`` is given)."""
    service = Service(data_dir)
    if backup_root is None and os.environ.get("MEMOREE_BACKUP_DIR"):
        backup_root = Path(os.environ["MEMOREE_BACKUP_DIR"])
    daemon = Daemon(service, endpoint, lifecycle_owner=lifecycle_owner, allow_non_loopback=allow_non_loopback,
                    http=http, allowed_uids=allowed_uids, backup_root=backup_root)

    with storage_errors():  # e.g. a full disk: a typed failure, never a traceback
        daemon.start()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: daemon.stop())

    logger().info("daemon_started", pid=os.getpid(), endpoint=str(endpoint), data_dir=str(data_dir),
                  version=__version__)
    daemon.serve_forever()
    # How the writer grouped mutations over the daemon's life (the daemon benchmark reads it).
    logger().info("daemon_stopped", pid=os.getpid(), groups=daemon.writer.groups,
                  grouped_requests=daemon.writer.grouped_requests)
