"""Blue/green projection builds: replay the log into a scratch database beside the live one, then swap.

``ScratchBuild`` replays events into a fresh SQLite file in a private folder (inside the data
directory for a reindex: same filesystem, owner-only). The scratch is a throwaway, so it runs
unjournaled and unsynced with a large page cache, and its full-text indexes are built once at the
end instead of row by row (``projections.fts_bulk``). The live projections stay
readable and writable meanwhile.

``swap`` then opens its own connection to the live database, takes the write lock, replays into
the scratch whatever the log gained during the build, and copies the rebuilt tables over the live
ones in that one transaction (an FTS5 index is copied as its shadow tables, so nothing is
tokenized twice): readers see the old projections or the new ones, never a mix, and a crash at any
point leaves the live store as it was. The swap uses a connection of its own because FTS5 caches
an index's structure per connection; every other connection notices the commit and reloads it.

A build that dies leaves its folder behind; the next build removes folders whose process is gone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from memoree.eventlog.db import connect, execute_script, open_throwaway
from memoree.eventlog.store import RecordedEvent
from memoree.hosts import pid_alive

from .base import (
    CHECKPOINT_SCHEMA,
    Projector,
    apply_events,
    bulk_mode,
    ensure_projectors,
    owned_tables,
)
from .fts_bulk import build_text_indexes

__all__ = ["SCRATCH_PREFIX", "ScratchBuild", "remove_dead_scratches"]

SCRATCH_PREFIX = ".rebuild-"
SCRATCH_CACHE_KIB = 262_144  # 256 MiB of page cache: the build touches every page it writes
BATCH_EVENTS = 2000
FTS5_SHADOWS = ("data", "idx", "docsize", "config", "content")


def remove_dead_scratches(parent: Path) -> None:
    """Delete scratch folders in ``parent`` left by builds whose process no longer runs."""
    for folder in parent.glob(SCRATCH_PREFIX + "*"):
        pid = folder.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


class ScratchBuild:
    """One scratch database holding a replay of the log up to ``position``."""

    def __init__(self, parent: Path, projectors: Sequence[Projector]) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=parent))
        self.path = self.folder / "scratch.sqlite3"
        self.projectors = list(projectors)
        self.position = 0
        self.lock_seconds = 0.0
        try:
            self.conn = open_throwaway(self.path, cache_kib=SCRATCH_CACHE_KIB)
            self.conn.execute("BEGIN")
            ensure_projectors(self.conn, self.projectors)
            self.conn.execute("COMMIT")
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def __enter__(self) -> ScratchBuild:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def replay(self, events: Iterable[RecordedEvent], *, progress: Callable[[int], None] | None = None) -> int:
        """Bulk-replay ``events`` (the log from its start) into the rows; the full-text index pages
        come from ``build_indexes`` (verify, which compares rows, does without them)."""
        self.conn.execute("BEGIN")
        with bulk_mode(self.conn, self.projectors):
            count = self._apply(events, progress)
        self.conn.execute("COMMIT")
        return count

    def build_indexes(self) -> None:
        """Index the replayed text at once (``projections.fts_bulk``)."""
        if not any(p.name == "fts" for p in self.projectors):
            return
        build_text_indexes(self.conn)

    def catch_up(self, events: Iterable[RecordedEvent], progress: Callable[[int], None] | None = None) -> int:
        """Apply events the log gained since the replay, row by row as a mutation would."""
        self.conn.execute("BEGIN")
        count = self._apply(events, progress)
        self.conn.execute("COMMIT")
        return count

    def _apply(self, events: Iterable[RecordedEvent], progress: Callable[[int], None] | None) -> int:
        pending: list[RecordedEvent] = []
        count = 0
        for event in events:
            pending.append(event)
            if len(pending) >= BATCH_EVENTS:
                count += self._flush(pending, progress)
        count += self._flush(pending, progress)
        return count

    def _flush(self, pending: list[RecordedEvent], progress: Callable[[int], None] | None) -> int:
        if not pending:
            return 0
        apply_events(self.conn, self.projectors, pending)
        self.position = pending[-1].commit_seq
        count = len(pending)
        pending.clear()
        if progress:
            progress(self.position)
        return count

    def swap(self, live_path: Path, chosen: Sequence[Projector],
             events_after: Callable[[Any, int], Iterable[RecordedEvent]]) -> int:
        """Replace ``chosen`` projections in the live database with this build, atomically.

        ``events_after(conn, position)`` reads the live log through ``conn`` (which holds the
        write lock), so the build ends exactly at the live head. Returns that position;
        ``lock_seconds`` is then how long writers were held off.
        """
        live = connect(live_path)
        live.execute("PRAGMA foreign_keys = OFF")  # rows are copied verbatim from a consistent build
        # The old projection pages hold nothing a purge left behind (purge erases in place, with
        # secure-delete), so they need not be zeroed on the way out; that halves the swap's writes.
        live.execute("PRAGMA secure_delete = OFF")
        # The copy passes through the WAL; it is checkpointed after the commit, not inside it, so
        # writers wait only for the copy itself.
        live.execute("PRAGMA wal_autocheckpoint = 0")
        try:
            started = time.perf_counter()
            live.execute("BEGIN IMMEDIATE")
            try:
                self.catch_up(events_after(live, self.position))
                self._replace(live, chosen)
                live.execute("COMMIT")
            except BaseException:
                live.execute("ROLLBACK")
                raise
            self.lock_seconds = time.perf_counter() - started
            live.execute("DETACH DATABASE scratch")
            # Alongside writers; the next writer to restart the WAL shrinks the file
            # (journal_size_limit). A TRUNCATE here could hold writers off behind slow readers.
            live.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            live.close()
        return self.position

    def _replace(self, live: Any, chosen: Sequence[Projector]) -> None:
        execute_script(live, CHECKPOINT_SCHEMA)
        for projector in chosen:
            _drop_live_tables(live, projector)
            execute_script(live, projector.schema)
        live.execute("ATTACH DATABASE ? AS scratch", (os.fspath(self.path),))
        for projector in chosen:
            for table in owned_tables(projector):
                _copy_table(live, table)
            live.execute(
                "INSERT INTO main.projector_checkpoints (name, version, position) VALUES (?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET version = excluded.version, position = excluded.position",
                (projector.name, projector.version, self.position),
            )


def _is_virtual(conn: Any, schema: str, table: str) -> bool:
    row = conn.execute(f"SELECT sql FROM {schema}.sqlite_master WHERE type = 'table' AND name = ?",
                       (table,)).fetchone()
    return row is not None and row[0].upper().startswith("CREATE VIRTUAL TABLE")


def _drop_live_tables(live: Any, projector: Projector) -> None:
    # Qualified names: nothing else is attached yet, but a bare DROP must never reach another schema.
    for table in reversed(owned_tables(projector)):
        live.execute(f"DROP TABLE IF EXISTS main.{table}")


def _copy_table(live: Any, table: str) -> None:
    if not _is_virtual(live, "scratch", table):
        # The fresh table's own indexes are built after the copy, each in one sorted pass,
        # instead of one random insert per row (a table's rows arrive in rowid order).
        indexes = live.execute("SELECT name, sql FROM main.sqlite_master WHERE type = 'index' "
                               "AND tbl_name = ? AND sql IS NOT NULL", (table,)).fetchall()
        for name, _ in indexes:
            live.execute(f"DROP INDEX main.{name}")
        live.execute(f"INSERT INTO main.{table} SELECT * FROM scratch.{table}")
        for _, sql in indexes:
            live.execute(sql)
        return
    # An FTS5 index is its shadow tables; the live virtual table was just created empty over them.
    for suffix in FTS5_SHADOWS:
        shadow = f"{table}_{suffix}"
        exists = live.execute("SELECT 1 FROM scratch.sqlite_master WHERE type = 'table' AND name = ?",
                              (shadow,)).fetchone()
        if exists:
            live.execute(f"DELETE FROM main.{shadow}")
            live.execute(f"INSERT INTO main.{shadow} SELECT * FROM scratch.{shadow}")
    # Build-time tuning stays with the build.
    live.execute(f"DELETE FROM main.{table}_config WHERE k = 'hashsize'")
