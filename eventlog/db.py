"""The SQLite driver choice and connection setup, with features detected rather than assumed.

The stdlib ``sqlite3`` on our Debian machines links SQLite 3.40, which lacks FTS5
``secure-delete``. ``pysqlite3`` (the
``pysqlite3-binary`` wheel) bundles a current SQLite behind the same DB-API, so it is preferred
when installed; the stdlib module is the fallback.
"""

from __future__ import annotations

import functools
import os
from typing import Any

try:  # pragma: no cover - which branch runs depends on the platform
    import pysqlite3.dbapi2 as sqlite3
except ImportError:  # pragma: no cover
    import sqlite3  # type: ignore[no-redef]

__all__ = ["DB_FILENAME", "Features", "connect", "create_private", "execute_script", "features", "open_throwaway", "sqlite3"]

# How long a writer waits for another to finish. Long enough to outlast the swap of a reindex
# (about 4 s per 100k events) or a backup's snapshot; short of the 30 s a client waits for a reply.
DB_FILENAME = "memoree.sqlite3"  # a store's SQLite file inside its data dir
BUSY_TIMEOUT_MS = 20_000
WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024


def connect(path: str | os.PathLike[str], *, synchronous: str = "FULL", readonly: bool = False) -> Any:
    """Open ``path`` in WAL mode with autocommit off the driver (we issue BEGIN ourselves)."""
    if readonly:
        conn = sqlite3.connect(
            f"file:{os.fspath(path)}?mode=ro", uri=True, isolation_level=None,
            check_same_thread=False,
        )
    else:
        conn = sqlite3.connect(os.fspath(path), isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if not readonly:
        conn.execute("PRAGMA journal_mode = WAL")
        # After a big transaction (a reindex swap, an import) the WAL file shrinks back to this
        # when it is next restarted, instead of keeping its largest size forever.
        conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA temp_store = MEMORY")
    # Purge must really erase: deleted content is overwritten with zeros, not left in free pages.
    conn.execute("PRAGMA secure_delete = ON")
    return conn


def open_throwaway(path: str | os.PathLike[str], *, cache_kib: int = 262_144) -> Any:
    """A connection for a scratch file nobody needs after a crash: no journal, no fsync, a big
    page cache (256 MiB by default), foreign keys off. A new file is created owner-only."""
    create_private(path)
    conn = sqlite3.connect(os.fspath(path), isolation_level=None, check_same_thread=False)
    # secure_delete: a purge replayed into the scratch zeroes the rows it deletes, as in the store.
    for pragma in ("journal_mode = OFF", "synchronous = OFF", f"cache_size = -{cache_kib}",
                   "temp_store = MEMORY", "foreign_keys = OFF", "secure_delete = ON"):
        conn.execute(f"PRAGMA {pragma}")
    return conn


def create_private(path: str | os.PathLike[str]) -> None:
    """Create ``path`` empty with mode 0600 unless it exists (SQLite would use the umask); a
    symbolic link there is refused (ELOOP), never followed."""
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW, 0o600))


class Features:
    """What the linked SQLite can do, probed once on an in-memory database."""

    def __init__(self) -> None:
        probe = sqlite3.connect(":memory:")
        self.sqlite_version: str = sqlite3.sqlite_version
        self.driver: str = sqlite3.__name__.split(".")[0]
        self.fts5 = _creates(probe, "CREATE VIRTUAL TABLE t1 USING fts5(x)")
        self.secure_delete = self.fts5 and _creates(
            probe, "INSERT INTO t1(t1, rank) VALUES('secure-delete', 1)"
        )
        probe.close()

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def _creates(conn: Any, sql: str) -> bool:
    try:
        conn.execute(sql)
    except sqlite3.Error:
        return False
    return True


@functools.cache
def features() -> Features:
    """The linked SQLite's feature set (cached for the process)."""
    return Features()


def execute_script(conn: Any, script: str) -> None:
    """Run a multi-statement script without the driver's implicit COMMIT (unlike executescript)."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            if statement.strip():
                conn.execute(statement)
            statement = ""
    if statement.strip():
        conn.execute(statement)
