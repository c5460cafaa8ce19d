"""When the daemon may answer: after the commits an answer depends on are on disk (pipelined sync).

With ``synchronous=FULL`` every COMMIT waits for its WAL ``fdatasync`` on the writer thread, so
the writer can do nothing else while the disk works, and every so many commits it also copies the
WAL back into the database (the auto-checkpoint: two more syncs). ``WalSync`` takes both off the
writer: the writer's connection commits with ``synchronous=NORMAL`` (the WAL is written, not
synced), hands the answers of what it just committed to the **syncer** thread and goes on with
the next group; the syncer ``fdatasync``s the WAL file once for every group waiting (one sync
for many commits) and only then releases their answers, in commit order. A **checkpointer** thread
copies the WAL back into the database on a connection of its own (``PRAGMA
wal_checkpoint(PASSIVE)``, which never blocks the writer), and the writer keeps a distant
auto-checkpoint as a bound for the WAL's size. What is acknowledged is on disk exactly as before
(the power-loss and crash suites check it); a lone client waits for the same sync as before.

An answer computed elsewhere (a reader process) may have seen a commit that is not synced yet:
``settle`` holds such an answer until every commit made before it was computed is durable, so
no answer shows what a power cut could still take away.

A failed sync fails the answers it covered (typed, retryable: what they wrote may be stored, and
a retry with the same idempotency key replays it) and the WAL is checkpointed into the database
(synced there) before any later answer is released; until that succeeds, answers keep failing.
With another ``synchronous`` setting (``NORMAL``, ``OFF``: tests and throwaway stores) nothing is
synced here and answers go out as soon as they are committed (``Immediate``).
"""

from __future__ import annotations

import errno
import os
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from memoree.daemon.replies import with_request_id
from memoree.daemon.threadname import name_this_thread
from memoree.errors import DiskFull, InternalError, MemoreeError

__all__ = ["Answer", "Immediate", "WalSync", "durability_for"]

# The writer's own auto-checkpoint, pages. The checkpointer's passes run beside the writer, so
# they rarely finish between two of its transactions, and only a finished checkpoint lets the
# next transaction restart the WAL from its start; the writer's own (by then nearly nothing left
# to copy) does. 4,000 pages keeps the WAL near 16 MiB (a reader's page lookup scans one WAL
# hash table per 4,096 frames); 16,000 let it grow to 66 MB in the daemon bench.
WRITER_CHECKPOINT_PAGES = 4_000
# Commits between the checkpointer's passes (about the 1,000 WAL pages of SQLite's default).
CHECKPOINT_EVERY = 16
CHECKPOINT_IDLE_S = 1.0

# (raw request, its future, its encoded answer): released once what it depends on is durable.
Answer = tuple[bytes, Future[bytes], bytes]


def _release(answers: Sequence[Answer]) -> None:
    for _, future, reply in answers:
        if not future.done():
            future.set_result(reply)


class Immediate:
    """Answers go out as soon as they are committed (the connection syncs, or nothing does)."""

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def commit_section(self) -> Any:
        return nullcontext()

    def writing(self) -> Any:
        return nullcontext()

    def after_commit(self, answers: Sequence[Answer], *, more_waiting: bool = True) -> None:
        _release(answers)

    def settle(self) -> None:
        pass


class _CommitSection:
    """Around one COMMIT: the commit is counted before anyone can read the count again."""

    def __init__(self, owner: WalSync) -> None:
        self.owner = owner

    def __enter__(self) -> None:
        self.owner.section.acquire()

    def __exit__(self, *_: object) -> None:
        self.owner.committed += 1
        self.owner.section.release()


class _Writing:
    """Before work that may commit anywhere inside it: counted first, so an answer that saw it waits."""

    def __init__(self, owner: WalSync) -> None:
        self.owner = owner

    def __enter__(self) -> None:
        with self.owner.section:
            self.owner.committed += 1

    def __exit__(self, *_: object) -> None:
        return None


class WalSync:
    """The syncer and the checkpointer over one store's WAL (see the module docstring)."""

    def __init__(self, conn: Any, db_path: Path, open_connection: Callable[[], Any]) -> None:
        self.conn = conn
        self.wal_path = Path(f"{db_path}-wal")
        self.open_connection = open_connection
        self.pending: queue.SimpleQueue[tuple[int, list[Answer]] | None] = queue.SimpleQueue()
        # ``committed``: commits made (counted under ``section``); ``durable``: the last one synced.
        self.section = threading.Lock()
        self.committed = 0
        self.durable = 0
        self.changed = threading.Condition()
        self.broken: MemoreeError | None = None  # a failed sync not yet repaired by a checkpoint
        self._since_checkpoint = 0
        self._checkpoint_due = threading.Event()
        self._stopping = threading.Event()
        self._wal_fd = -1
        self._wal_ino: tuple[int, int] | None = None
        self.syncs = 0
        self.inline_syncs = 0  # syncs the writer did itself (``after_commit``)
        # Entries handed to the syncer and not yet released by it (counted under ``_hand_lock``).
        self._hand_lock = threading.Lock()
        self._in_hand = 0
        self._commit_section, self._writing = _CommitSection(self), _Writing(self)
        self.threads = [threading.Thread(target=self._sync_loop, name="memoree-syncer", daemon=True),
                        threading.Thread(target=self._checkpoint_loop, name="memoree-checkpointer", daemon=True)]

    def start(self) -> None:
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.conn.execute(f"PRAGMA wal_autocheckpoint = {WRITER_CHECKPOINT_PAGES}")
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        """After the writer stopped: release what is pending (synced), end both threads."""
        self.pending.put(None)
        self._stopping.set()
        self._checkpoint_due.set()
        for thread in self.threads:
            thread.join(10)
        if self._wal_fd >= 0:
            os.close(self._wal_fd)
            self._wal_fd = -1

    # ------------------------------------------------------------------ the writer's side

    def commit_section(self) -> _CommitSection:
        """Entered by the writer just before a COMMIT and left after it, so ``committed`` never
        lags what a reader's snapshot can show."""
        return self._commit_section

    def writing(self) -> _Writing:
        """Entered before writer-thread work that may commit anywhere inside it (an op that
        materializes, the Merkle sealing)."""
        return self._writing

    def after_commit(self, answers: Sequence[Answer], *, more_waiting: bool = True) -> None:
        """The writer committed what ``answers`` depend on (or failed to): release them, in
        order, once every commit so far is synced. Called on the writer thread only.

        When no more requests wait for the writer (``more_waiting`` false) and the syncer holds
        nothing, the writer syncs and releases them itself: pipelining would gain nothing (no next
        group to write meanwhile) and the hand-off to the syncer costs a thread wake-up on the
        lone client's path. The syncer cannot be syncing then (it holds nothing, and only this
        thread gives it work), so order and the one-sync-at-a-time rule hold."""
        entry = (self.committed, list(answers))
        with self._hand_lock:
            inline = not more_waiting and self._in_hand == 0
            if not inline:
                self._in_hand += 1
        if inline:
            self.inline_syncs += 1
            self._sync_and_release([entry])
        else:
            self.pending.put(entry)

    # ------------------------------------------------------------------ other answers

    def settle(self) -> None:
        """Return once every commit made so far is durable (a reader's answer may have seen it)."""
        with self.section:
            target = self.committed
        if self.durable >= target:
            return
        with self.changed:
            self.changed.wait_for(lambda: self.durable >= target or self._stopping.is_set(), timeout=30)

    # ------------------------------------------------------------------ the syncer

    def _sync_loop(self) -> None:
        name_this_thread("memoree-syncer")
        while True:
            item = self.pending.get()
            batch = [item]
            while True:  # every group committed meanwhile shares this one sync
                try:
                    batch.append(self.pending.get_nowait())
                except queue.Empty:
                    break
            done = [entry for entry in batch if entry is not None]
            if done:
                self._sync_and_release(done)
                with self._hand_lock:
                    self._in_hand -= len(done)
            if None in batch:
                return

    def _sync_and_release(self, batch: list[tuple[int, list[Answer]]]) -> None:
        failure = self._sync()
        ticket = max(entry[0] for entry in batch)
        for _, answers in batch:
            if failure is None:
                _release(answers)
            else:
                _release([(raw, future, with_request_id(raw, failure)) for raw, future, _ in answers])
        with self.changed:
            self.durable = ticket
            self.changed.notify_all()
        self._since_checkpoint += len(batch)
        if self._since_checkpoint >= CHECKPOINT_EVERY:
            self._since_checkpoint = 0
            self._checkpoint_due.set()

    def _sync(self) -> MemoreeError | None:
        """Sync the WAL (repairing an earlier failure first); the error to answer with, or None."""
        try:
            if self.broken is not None:
                self._repair()
            os.fdatasync(self._wal())
            self.syncs += 1
            return None
        except OSError as exc:
            self.broken = _sync_failure(exc)
            self._close_wal()
            return self.broken
        except MemoreeError as exc:
            return exc

    def _repair(self) -> None:
        """After a failed sync the kernel may have dropped the unsynced pages: copy the whole WAL
        into the database (which a checkpoint syncs) before trusting a sync again."""
        from memoree.log import logger

        conn = self.open_connection()
        try:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(FULL)").fetchone()
        except Exception as exc:  # noqa: BLE001 - still broken: the answers keep failing
            raise self.broken or _sync_failure(OSError(errno.EIO, str(exc))) from None
        finally:
            conn.close()
        if busy:
            raise self.broken or InternalError("the store could not be synced", retryable=True)
        logger().warning("wal_sync_repaired")
        self.broken = None

    def _wal(self) -> int:
        """A descriptor of the WAL file as it is now (SQLite may have replaced the file)."""
        st = os.stat(self.wal_path)
        if self._wal_fd < 0 or self._wal_ino != (st.st_dev, st.st_ino):
            self._close_wal()
            self._wal_fd = os.open(self.wal_path, os.O_RDONLY | os.O_CLOEXEC)
            fst = os.fstat(self._wal_fd)
            self._wal_ino = (fst.st_dev, fst.st_ino)
        return self._wal_fd

    def _close_wal(self) -> None:
        if self._wal_fd >= 0:
            os.close(self._wal_fd)
        self._wal_fd, self._wal_ino = -1, None

    # ------------------------------------------------------------------ the checkpointer

    def _checkpoint_loop(self) -> None:
        from memoree.log import logger

        name_this_thread("memoree-checkpt")

        conn = None
        try:
            while not self._stopping.is_set():
                self._checkpoint_due.wait(CHECKPOINT_IDLE_S)
                self._checkpoint_due.clear()
                if self._stopping.is_set():
                    return
                try:
                    conn = conn or self.open_connection()
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                except Exception as exc:  # noqa: BLE001 - the writer's own checkpoint still bounds the WAL
                    logger().warning("wal_checkpoint_failed", detail=str(exc))
                    if conn is not None:
                        conn.close()
                    conn = None
        finally:
            if conn is not None:
                conn.close()


def _sync_failure(exc: OSError) -> MemoreeError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull("the store could not be synced (disk full): this request may have been stored; "
                        "retry it with the same idempotency key")
    return InternalError(f"the store could not be synced ({exc.strerror or exc}): this request may have "
                         "been stored; retry it with the same idempotency key", retryable=True)


def durability_for(engine: Any, synchronous: str) -> Immediate | WalSync:
    """``WalSync`` for a store opened with ``synchronous=FULL`` (or EXTRA) and a log of its own;
    ``Immediate`` otherwise (no sync is asked for, or a shared log syncs in PostgreSQL)."""
    if synchronous.upper() not in ("FULL", "EXTRA") or engine.shared is not None:
        return Immediate()
    from memoree.eventlog.db import connect

    db_path = engine.db_path
    return WalSync(engine.conn, db_path, lambda: connect(db_path, synchronous="FULL"))
