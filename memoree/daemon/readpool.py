"""The daemon's reader pool: reads answered by reader processes, off the writer and its GIL.

The daemon starts ``MEMOREE_READ_PROCESSES`` reader processes (default 3: with the one writer
that is the protocol's 4-connection envelope; 0 keeps every read on the writer thread). Each is a
fresh interpreter (``memoree.daemon.reader``) with a read-only SQLite connection of its own, so
reads run on their own cores beside the writer and beside each other; the query layer being
Python, threads in one process could not (they shared one GIL with each other and the writer).

``MEMOREE_READER_NICE`` (0-19 or ``idle``; default 0) runs the readers at a lower CPU priority
than the writer, for machines whose cores the reads fill.

**Writes first** (``WritesFirst``): while a request routed to the writer is unanswered (and for
``WRITE_LINGER_S`` after: writes come in bursts), at most as many reads run at once as the
daemon may use cores less one (at least one), so the writer keeps a core; a read past that waits
for a running read to end or the writes to be answered, for at most ``MEMOREE_READS_YIELD_MS``
(default 100 ms; 0 turns the rule off) after it arrived, then goes regardless. Reads are never starved and never
interrupted; the daemon counts each request it routes to the writer (``Daemon.submit``).

Requests wait in one queue; one relay thread per reader takes the next, writes it down that
reader's socketpair and waits (GIL released) for the answer, which goes back to the listener like
any other once every commit it could have seen is synced (``settle``: a syncer thread syncs the
writer's commits, ``memoree.daemon.durability``, so a snapshot may be one sync ahead of the
disk). Each reader answers one request at a time, in order, so every request gets exactly
one answer. Admission stays in the listener: a reader never sees a client.

* **A reader that dies** (killed, out of memory, a crash in a C extension) turns the request it
  held into a typed, retryable ``INTERNAL_ERROR`` for that request only; once that is answered,
  its relay starts a fresh reader and goes on. One found dead while idle is replaced before the
  next request reaches it; when none can be started, the request is answered the same way.
* **Shutdown**: the channels close (idle readers end), then the life pipe closes, which ends the
  busy ones too; the relays reap them, killing any that lingers. The daemon dying any other way
  (``kill -9``) closes the life pipe as well: no reader outlives its daemon.

With a shared PostgreSQL log every op stays on the writer (the daemon starts no pool).
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from memoree import limits

__all__ = ["POOLED_OPS", "READ_PROCESSES", "WRITE_LINGER_S", "ReaderPool", "WritesFirst", "read_processes",
           "reader_nice", "reads_yield_s"]

READ_PROCESSES = limits.MAX_CONCURRENT_CONNECTIONS - 1  # 3 readers + 1 writer
PROCESSES_ENV = "MEMOREE_READ_PROCESSES"
NICE_ENV = "MEMOREE_READER_NICE"
YIELD_ENV = "MEMOREE_READS_YIELD_MS"
READS_YIELD_MS = 100  # the longest a read is held back for the writes in flight (default)
MAX_READS_YIELD_MS = 1000
# Writes come in bursts (an agent stores what it learned, one put after another): the writes count
# as going on this long after the last one was answered, so the next write of a burst, sent
# as soon as its client has the answer, does not find every reader busy with a read let go between.
WRITE_LINGER_S = 0.005
START_TIMEOUT_S = 60.0  # a reader's interpreter start and store open, on a loaded machine
REAP_TIMEOUT_S = 5.0
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


def read_processes() -> int:
    """How many reader processes to start: ``MEMOREE_READ_PROCESSES``, 0..3 (default 3)."""
    from memoree.errors import ConfigError

    chosen = os.environ.get(PROCESSES_ENV, "").strip()
    if not chosen:
        return READ_PROCESSES
    try:
        count = int(chosen)
    except ValueError:
        raise ConfigError(f"{PROCESSES_ENV} must be a whole number from 0 to {READ_PROCESSES}") from None
    if not 0 <= count <= READ_PROCESSES:
        raise ConfigError(f"{PROCESSES_ENV} must be from 0 to {READ_PROCESSES} (readers plus the writer "
                          f"fit the {limits.MAX_CONCURRENT_CONNECTIONS}-connection envelope); got {count}")
    return count


def reader_nice() -> int | str:
    """How much lower the readers' CPU priority is than the writer's: ``MEMOREE_READER_NICE``,
    0..19 (default 0, the same) or ``idle`` (Linux ``SCHED_IDLE``: a reader runs when nothing else
    of this session wants the core, and any waking writer preempts it). On a machine whose cores
    the reads fill, a lower priority keeps more of the writer's rate at the cost of the reads'."""
    from memoree.errors import ConfigError

    chosen = os.environ.get(NICE_ENV, "").strip().lower() or "0"
    if chosen == "idle" and hasattr(os, "SCHED_IDLE"):
        return "idle"
    try:
        nice = int(chosen)
    except ValueError:
        nice = -1
    if not 0 <= nice <= 19:
        raise ConfigError(f"{NICE_ENV} must be a whole number from 0 to 19 or `idle`; got {chosen!r}")
    return nice


def reads_yield_s() -> float:
    """How long a new read may be held back while writes are in flight, in seconds:
    ``MEMOREE_READS_YIELD_MS``, 0..1000 (default 100; 0 sends every read at once)."""
    from memoree.errors import ConfigError

    chosen = os.environ.get(YIELD_ENV, "").strip()
    if not chosen:
        return READS_YIELD_MS / 1000
    try:
        held = int(chosen)
    except ValueError:
        held = -1
    if not 0 <= held <= MAX_READS_YIELD_MS:
        raise ConfigError(f"{YIELD_ENV} must be a whole number of milliseconds from 0 to "
                          f"{MAX_READS_YIELD_MS}; got {chosen!r}")
    return held / 1000


class WritesFirst:
    """Writes before reads: while any request routed to the writer is unanswered, at most
    ``beside`` reads run in the readers at once (by default one core fewer than this process may
    use, so the writer keeps a core); a read past that waits for the writes to be answered (and
    ``WRITE_LINGER_S`` more) or a running read to end, for at most ``hold_s`` after it arrived,
    and then goes regardless.

    A write is short (a few ms) and its client waits for the acknowledgement; a search costs a
    reader several ms of CPU, so on a machine whose cores the readers fill every read started
    beside a write takes CPU the write needs. Reads already running are never interrupted, with
    no write in flight reads run as many at once as there are readers, and a read is delayed at
    most ``hold_s`` whatever the writes do: reads are never starved."""

    def __init__(self, hold_s: float, beside: int | None = None) -> None:
        self.hold_s = hold_s
        self.beside = max(1, _usable_cores() - 1) if beside is None else beside
        self.changed = threading.Condition()
        self.in_flight = 0  # requests routed to the writer and not answered yet
        self.running = 0  # reads sent to a reader and not answered yet
        self.quiet_at = 0.0  # monotonic time the writes count as over (``WRITE_LINGER_S`` after the last)
        self.held = 0  # reads that waited for a write (operators and tests look)

    def track(self, answered: Future[bytes]) -> None:
        """Count ``answered`` (a request the writer will answer) until it is done."""
        if self.hold_s <= 0:
            return
        with self.changed:
            self.in_flight += 1
        answered.add_done_callback(self._answered)

    def _answered(self, _: Future[bytes]) -> None:
        with self.changed:
            self.in_flight -= 1
            if not self.in_flight:
                self.quiet_at = time.monotonic() + WRITE_LINGER_S
                self.changed.notify_all()  # held reads wait on until the quiet time

    def _writing(self, now: float) -> bool:
        return self.in_flight > 0 or now < self.quiet_at

    def begin_read(self, arrived: float) -> None:
        """Wait for this read's turn (``arrived``: when it came, monotonic), then count it running."""
        deadline = arrived + self.hold_s
        with self.changed:
            now = time.monotonic()
            if self.running >= self.beside and self._writing(now) and now < deadline:
                self.held += 1
                while self.running >= self.beside and self._writing(now) and now < deadline:
                    # Woken by a read's end; else at the writes' quiet time or the deadline.
                    self.changed.wait(min(deadline, self.quiet_at if not self.in_flight else deadline) - now)
                    now = time.monotonic()
            self.running += 1

    def end_read(self) -> None:
        with self.changed:
            self.running -= 1
            self.changed.notify_all()


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class ReaderGone(Exception):
    """The reader process ended (or never started) while it held a request."""


class _Slot:
    """One reader process and its end of the channel; touched only by its relay thread."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.proc: subprocess.Popen[bytes] | None = None
        self.channel: socket.socket | None = None
        self.pid: int | None = None
        self.starts = 0


class ReaderPool:
    """Reader processes behind one request queue (see the module docstring)."""

    def __init__(self, data_dir: Any, daemon_info: dict[str, Any], processes: int = READ_PROCESSES,
                 nice: int | str = 0, settle: Callable[[], None] = lambda: None,
                 yield_s: float = READS_YIELD_MS / 1000) -> None:
        self.data_dir = data_dir
        self.settle = settle  # returns once what a reader's snapshot may show is durable
        self.daemon_info = daemon_info
        self.count = processes
        self.nice = nice
        self.writes = WritesFirst(yield_s)  # the daemon tracks what it routes to the writer here
        self.inbox: queue.Queue[tuple[bytes, Future[bytes], float] | None] = queue.Queue()
        self.slots = [_Slot(n) for n in range(processes)]
        self.threads: list[threading.Thread] = []
        self.stopping = threading.Event()
        self.restarts = 0  # readers started again after one ended
        self._life_r, self._life_w = os.pipe()  # readers hold the read end; only we the write end

    def start(self) -> None:
        for slot in self.slots:
            thread = threading.Thread(target=self._relay, args=(slot,), name=f"memoree-relay-{slot.index}",
                                      daemon=True)
            self.threads.append(thread)
            thread.start()

    def submit(self, raw: bytes) -> Future[bytes]:
        future: Future[bytes] = Future()
        self.inbox.put((raw, future, time.monotonic()))
        return future

    def pids(self) -> list[int]:
        """The reader processes running now (operators and tests look them up)."""
        return [slot.pid for slot in self.slots if slot.pid is not None]

    def stop(self) -> None:
        self.stopping.set()
        for _ in self.threads:
            self.inbox.put(None)
        self._close_life_pipe()  # ends readers still busy with a request
        for thread in self.threads:
            thread.join(REAP_TIMEOUT_S * 2)
        os.close(self._life_r)

    # ------------------------------------------------------------------ one relay per reader

    def _relay(self, slot: _Slot) -> None:
        from memoree.daemon.threadname import name_this_thread

        name_this_thread(f"memoree-relay-{slot.index}")
        try:
            self._try_start(slot)  # at once, so the first reads find their readers ready
            while True:
                item = self.inbox.get()
                if item is None:
                    return
                raw, future, arrived = item
                self.writes.begin_read(arrived)
                try:
                    reply = self._exchange(slot, raw)
                finally:
                    self.writes.end_read()
                self.settle()
                future.set_result(reply)
                if slot.channel is None:
                    self._try_start(slot)  # after the answer, so its client does not wait for it
        finally:
            self._end(slot)

    def _exchange(self, slot: _Slot, raw: bytes) -> bytes:
        """Send ``raw`` to the slot's reader and return its answer; a typed error if it died."""
        from memoree.daemon.replies import failure_reply
        from memoree.errors import InternalError
        from memoree.protocol.framing import FrameTruncated, read_frame, write_frame

        try:
            if slot.proc is not None and slot.proc.poll() is not None:
                self._end(slot)  # it ended while idle: this request never reached it
            if slot.channel is None and not self._try_start(slot):
                return failure_reply(raw, InternalError(
                    "no reader process could be started for this read", retryable=True))
            assert slot.channel is not None
            write_frame(slot.channel, raw)
            return read_frame(slot.channel, limits.MAX_FRAME_BYTES + (1 << 16))
        except (FrameTruncated, OSError) as exc:
            from memoree.log import logger

            logger().error("reader_process_failed", reader=slot.index, pid=slot.pid, detail=str(exc))
            self._end(slot, kill=True)
            return failure_reply(raw, InternalError(
                "the reader process answering this read ended before it answered; a new one is started",
                retryable=True))
        except BaseException as exc:  # noqa: BLE001 - a relay answers, whatever happens
            self._end(slot, kill=True)  # the channel may hold half a frame: never reuse it
            return failure_reply(raw, exc)

    def _try_start(self, slot: _Slot) -> bool:
        if self.stopping.is_set():
            return False
        try:
            self._start(slot)
        except (OSError, ValueError, subprocess.SubprocessError, ReaderGone) as exc:
            from memoree.log import logger

            logger().error("reader_process_start_failed", reader=slot.index, detail=str(exc))
            self._end(slot, kill=True)
            return False
        return True

    def _start(self, slot: _Slot) -> None:
        from memoree.protocol.framing import FrameTruncated, read_frame, write_frame

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            slot.proc = subprocess.Popen(
                [sys.executable, "-m", "memoree.daemon.reader", str(theirs.fileno()), str(self._life_r)],
                pass_fds=(theirs.fileno(), self._life_r), stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        slot.channel = ours
        slot.starts += 1
        if slot.starts > 1:
            self.restarts += 1
        hello = {"data_dir": str(self.data_dir), "daemon_info": self.daemon_info, "nice": self.nice}
        ours.settimeout(START_TIMEOUT_S)
        try:
            write_frame(ours, json.dumps(hello).encode())
            ready = json.loads(read_frame(ours, 1 << 16))
        except (FrameTruncated, OSError, ValueError) as exc:
            raise ReaderGone(f"the reader process did not start: {exc}") from None
        ours.settimeout(None)
        slot.pid = int(ready["pid"])

    def _end(self, slot: _Slot, *, kill: bool = False) -> None:
        """Close the slot's channel and reap its process: at once with ``kill`` (it failed; a
        reader holds nothing worth waiting for), else after it ends (killed if it lingers)."""
        if slot.channel is not None:
            slot.channel.close()
            slot.channel = None
        proc, slot.proc, slot.pid = slot.proc, None, None
        if proc is None:
            return
        if kill:
            proc.kill()
        try:
            proc.wait(REAP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(REAP_TIMEOUT_S)

    def _close_life_pipe(self) -> None:
        if self._life_w >= 0:
            os.close(self._life_w)
            self._life_w = -1
