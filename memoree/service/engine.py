"""One open store: the data directory, its SQLite file, the log, the CAS and the projections.

Opening a store makes the data directory private (0700; a looser pre-existing one is tightened
with a warning), opens the database (0600) in WAL mode with ``synchronous=FULL``, creates missing
tables, rebuilds any projection whose code version changed and catches every projection up to the
log's head. ``reindex`` drops projections and replays the log into them.

The vectors projection catches up after the writes instead of inside them (``projections.vectors``):
``catch_up_vectors`` embeds what lags, on open (after a crash), before a read that uses the dense
channel, at close, and in the daemon when the writer is idle. A host of a shared log does the same
(``catching_up_vectors``): its engine's projectors and its follower's, which write other hosts'
events beside it, mark the one lag mark in the host's file, and the catch-up embeds every event
after it in a local transaction (the rows are derived: nothing goes to the shared log).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoree.commands.handler import CommandHandler
from memoree.errors import ConfigError, InvalidRequest, MemoreeError
from memoree.eventlog.cas import ContentStore
from memoree.eventlog.codec import decode_envelope, decode_payload
from memoree.eventlog.db import DB_FILENAME, connect, create_private
from memoree.eventlog.events import KeyEpochStarted
from memoree.eventlog.keys import KEY_STREAM, KeyRing, NodeKey
from memoree.eventlog.sqlite import SqliteEventStore, read_events, storage_errors
from memoree.eventlog.store import NewEvent
from memoree.eventlog.timefmt import now_utc
from memoree.ids import new_id
from memoree.log import logger
from memoree.projections import sync_projectors
from memoree.projections.base import (
    Projector,
    apply_events,
    checkpoints,
    deferred_mode,
    ensure_projectors,
    projection_sink,
    reset,
)
from memoree.projections.keys import recorded_epochs
from memoree.service.logconfig import open_shared_log

if TYPE_CHECKING:
    from memoree.projections.vectors import SliceJob

__all__ = ["DB_FILENAME", "Engine", "catching_up_vectors", "prepare_data_dir"]


def prepare_data_dir(path: Path) -> list[str]:
    """Create ``path`` owner-only, or tighten an existing one of this user's; return warnings to
    log. Another user's folder (or one reached through a link) is refused, never chmod-ed."""
    from memoree.client.paths import ForeignPath, private_dir

    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise ConfigError(f"data dir {path} is not a directory")
    try:
        warnings = private_dir(path, "data dir")
    except ForeignPath as exc:
        raise ConfigError(str(exc)) from None
    return warnings


def catching_up_vectors(projectors: list[Projector]) -> list[Projector]:
    """``projectors`` with their vectors projector catching up (``lazy``: a write only marks the
    lag) instead of embedding in each write's transaction."""
    for projector in projectors:
        if projector.name == "vectors":
            projector.lazy = True  # type: ignore[attr-defined]
    return projectors


class Engine:
    """The store behind the service: one writer connection and everything that shares it."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        clock: Callable[[], str] = now_utc,
        id_factory: Callable[[str], str] = new_id,
        synchronous: str = "FULL",
    ) -> None:
        with storage_errors():
            self._open(Path(data_dir), clock, id_factory, synchronous)

    def _open(self, data_dir: Path, clock: Callable[[], str], id_factory: Callable[[str], str],
              synchronous: str) -> None:
        self.data_dir = data_dir
        self.warnings = prepare_data_dir(self.data_dir)
        for warning in self.warnings:
            logger().warning("data_dir_permissions_tightened", detail=warning)
        db_path = self.data_dir / DB_FILENAME
        fresh = not db_path.exists()
        if fresh:
            create_private(db_path)
        self.conn = connect(db_path, synchronous=synchronous)
        self.log = SqliteEventStore(self.conn)
        self.cas = ContentStore(self.conn, self.data_dir / "blobs")
        # Scale-out: with MEMOREE_LOG_URL the log and blobs live in PostgreSQL and this file keeps
        # a verified replica plus the projections (memoree.eventlog.shared); None for the embedded log.

        self.shared = open_shared_log(self.conn, db_path)
        if self.shared is not None:
            self.log, self.cas = self.shared, self.shared.cas
        self.keys = KeyRing(self.data_dir / "keys")
        self.projectors: list[Projector] = catching_up_vectors(sync_projectors(self.cas))
        self.vectors = next(p for p in self.projectors if p.name == "vectors")
        self.handler = CommandHandler(self.log, self.cas, self.projectors, clock=clock, new_id=id_factory,
                                      node_key=self.node_key)
        from memoree.eventlog.copies import scrub_dead_copies

        scrub_dead_copies(self.data_dir)  # scratch and staged copies a killed process left
        self._bring_projections_up_to_date()
        self._finish_purges()
        self._catch_up_or_warn()  # what a crash (or a close that could not) left lagging
        if self.shared is not None:
            # catch-up subscription: the follower feeds projectors of its own, on its own connection
            self.shared.follow(projection_sink(self.projectors),
                               lambda cas: projection_sink(catching_up_vectors(sync_projectors(cas))))

    @property
    def db_path(self) -> Path:
        return self.data_dir / DB_FILENAME

    def projector_names(self) -> list[str]:
        return [p.name for p in self.projectors]

    def reindex(self, names: Sequence[str] | None = None, progress: Callable[[int], None] | None = None,
                phase: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Rebuild the named projections (default: all) beside the live ones, then swap them in.

        The log is replayed into a scratch database while the store stays readable and writable;
        the swap replays what arrived meanwhile and replaces the tables in one transaction
        (``memoree.projections.beside``). Every projector is replayed, because later ones read
        earlier ones; only the chosen ones (and those after them) are swapped.
        """
        with storage_errors():  # e.g. a full disk: the live store is untouched
            return self._reindex_beside(names, progress, phase or (lambda _: None))

    def _reindex_beside(self, names: Sequence[str] | None, progress: Callable[[int], None] | None,
                        say: Callable[[str], None]) -> dict[str, Any]:
        from memoree.projections.beside import ScratchBuild, remove_dead_scratches

        chosen = self._select(names)
        remove_dead_scratches(self.data_dir)
        # The build reads this file's own log (with a shared log: its replica, which the projections
        # follow) through a connection of its own, so it sees committed events only.
        reader = connect(self.db_path, readonly=True)
        try:
            with ScratchBuild(self.data_dir, sync_projectors(self.cas)) as build:
                say("replaying the log")
                build.replay(read_events(reader), progress=progress)
                if any(p.name == "fts" for p in chosen):
                    say("indexing text")
                    build.build_indexes()
                say("catching up")
                build.catch_up(read_events(reader, build.position), progress)
                say("swapping in")
                position = build.swap(self.db_path, chosen, read_events)
                locked = build.lock_seconds
        finally:
            reader.close()
        return {"projections": [p.name for p in chosen], "events_replayed": position,
                "commit_seq": position, "write_lock_seconds": round(locked, 3)}

    @contextmanager
    def group(self, commit_section: Any = None) -> Iterator[Any]:
        """One write transaction for several mutations (each runs in its own savepoint, as a
        nested ``log.transaction()``), with their text indexed and embedded once at the end.
        ``commit_section`` (a context manager) is entered just before the COMMIT and left after
        it (the daemon counts commits there: ``memoree.daemon.durability``)."""
        section = commit_section if commit_section is not None else nullcontext()
        entered = False
        try:
            with storage_errors(), self.log.transaction() as conn:
                with deferred_mode(conn, self.projectors):
                    yield conn
                section.__enter__()
                entered = True
        finally:
            if entered:
                section.__exit__(None, None, None)

    @contextmanager
    def bulk(self, commit_section: Any = None) -> Iterator[Any]:
        """A ``group`` whose small artifact puts are answered one by one and written together
        (``commands.bulk``): what a ``batch`` request and the daemon's group commit run in. A
        shared log's hosts decide each put against the shared head, so there it is a plain group."""
        with self.group(commit_section) as conn:
            with self.handler.bulk() if self.shared is None else nullcontext():
                yield conn

    def node_key(self) -> NodeKey:
        """The current node key, its epoch recorded in the log first (at first use)."""
        key = self.keys.current()
        with self.log.transaction() as conn:
            if key.epoch not in recorded_epochs(conn):
                self._record_epoch(conn, key)
            elif self.shared is not None:
                from memoree.eventlog.shared import require_recorded_key

                require_recorded_key(recorded_epochs(conn), key)
        return key

    def rotate_key(self) -> NodeKey:
        """Start a new node-key epoch; earlier signatures stay valid under their epochs."""
        self.node_key()
        key = self.keys.rotate()
        with self.log.transaction() as conn:
            self._record_epoch(conn, key)
        return key

    def _record_epoch(self, conn: Any, key: NodeKey) -> None:
        events = self.log.append([NewEvent(
            type="key.epoch_started", stream_id=KEY_STREAM, stream_version=key.epoch,
            payload=KeyEpochStarted(epoch=key.epoch, public_key=key.public_b32),
            event_id=new_id("evt"), at=now_utc(),
        )])
        apply_events(conn, self.projectors, events)

    def head(self) -> int:
        return self.log.head().commit_seq

    def vectors_lag(self) -> int:
        """Events the vectors projection has not embedded yet (0 when it is level with the log)."""
        from memoree.projections.vectors import embedded_through

        mark = embedded_through(self.conn)
        return 0 if mark is None else self._local_head() - mark

    def _local_head(self) -> int:
        """The newest event in this file (a shared log's host: its replica's, asked of nobody else)."""
        return self.conn.execute("SELECT coalesce(max(commit_seq), 0) FROM events").fetchone()[0]

    def catch_up_vectors(self, max_events: int | None = None) -> int:
        """Embed the events the vectors projection lags by (at most ``max_events``) in a write
        transaction of its own; returns how many it covered. Inside a caller's transaction, or
        where nothing lags, it does nothing (a read then embeds the lagging events in memory).

        The transaction commits without an fsync (``synchronous=NORMAL`` for it alone): its rows
        are derived, a power cut can lose only them (WAL order: never a write acknowledged after
        them), and the next open catches up again; a killed process loses nothing. A shared log's
        host writes the rows in a transaction of its file alone (``SharedLog.local_transaction``):
        they go nowhere else, and its file never fsyncs on its own anyway."""
        if not getattr(self.vectors, "lazy", False) or self.log.in_transaction or not self.vectors_lag():
            return 0
        with self._derived_rows_transaction() as conn:
            return self.vectors.catch_up(conn, max_events)  # type: ignore[attr-defined]

    def vectors_slice_job(self, max_events: int) -> SliceJob | None:
        """The catch-up's next slice, read for another process to embed (``None`` inside a
        transaction, where nothing lags, or without the model); ``store_vectors_slice`` stores it."""
        if not getattr(self.vectors, "lazy", False) or self.log.in_transaction:
            return None
        from memoree.projections.vectors import slice_job

        with storage_errors():
            return slice_job(self.conn, max_events)

    def store_vectors_slice(self, job: SliceJob, replies: Sequence[tuple[Any, bytes]]) -> int:
        """Store a job's embedded rows as ``catch_up_vectors`` stores its own (same transaction,
        same durability); 0 when the job went stale meanwhile (it stores nothing then)."""
        if self.log.in_transaction:
            return 0
        with self._derived_rows_transaction() as conn:
            return self.vectors.store_slice(conn, job, replies)  # type: ignore[attr-defined]

    @contextmanager
    def _derived_rows_transaction(self) -> Iterator[Any]:
        """A write transaction for derived rows, committed without an fsync (see
        ``catch_up_vectors``)."""
        with storage_errors():
            synchronous = self.conn.execute("PRAGMA synchronous").fetchone()[0]
            self.conn.execute(f"PRAGMA synchronous = {min(int(synchronous), 1)}")
            try:
                transaction = self.log.transaction() if self.shared is None else self.shared.local_transaction()
                with transaction as conn:
                    yield conn
            finally:
                self.conn.execute(f"PRAGMA synchronous = {int(synchronous)}")

    def _catch_up_or_warn(self) -> None:
        """Catch the vectors up where opening or closing: a failure (a damaged log, a full disk)
        must not stop either; reads embed what lags meanwhile, and verify names the damage."""
        try:
            self.catch_up_vectors()
        except MemoreeError as exc:
            logger().warning("vectors_catch_up_failed", detail=exc.message)

    def close(self) -> None:
        self._catch_up_or_warn()
        if self.shared is not None:
            self.shared.close()
        self.conn.close()

    def _select(self, names: Sequence[str] | None) -> list[Projector]:
        if not names:
            return list(self.projectors)
        known = {p.name: p for p in self.projectors}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise InvalidRequest(f"unknown projection {', '.join(unknown)}; known: {', '.join(known)}")
        # Later projectors read earlier ones (idempotency reads entities): rebuild dependents too.
        first = min(self.projectors.index(known[n]) for n in names)
        return self.projectors[first:]

    def _finish_purges(self) -> None:
        """Erase the files of purged blobs again: a crash may have hit between commit and unlink."""
        rows = self.conn.execute("SELECT data FROM events WHERE type = 'artifact.purged'").fetchall()
        for (data,) in rows:
            for digest in decode_payload(decode_envelope(bytes(data))).blob_hashes:
                if not self.cas.stored_again(digest):  # bytes put again later belong to a live artifact
                    self.cas.erase_file(digest)

    def _bring_projections_up_to_date(self) -> None:
        """Create missing projection tables, rebuild stale or inconsistent projections (blue/green,
        as a reindex), and catch the others up to the log's head."""
        with self.log.transaction() as conn:
            stale = ensure_projectors(conn, self.projectors)
            head = self.log.head().commit_seq
            recorded = checkpoints(conn)
            positions = {recorded[p.name][1] for p in self.projectors}
            if len(positions) != 1 or positions == {0} and head:
                stale = list(self.projectors)  # inconsistent, or a log never projected (an import)
            if stale and not head:
                for projector in self.projectors:  # nothing to replay: just fresh tables
                    reset(conn, projector)
                return
            if not stale and min(positions) < head:
                apply_events(conn, self.projectors, list(self.log.read(after=min(positions))))
        if stale:
            self.reindex([self.projectors[min(self.projectors.index(p) for p in stale)].name])
