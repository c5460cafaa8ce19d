"""Content-addressed storage for artifact bytes, keyed by the lowercase hex BLAKE3 digest.

Small blobs (at most ``INLINE_BLOB_BYTES``) live in the ``cas_inline`` table of the log's database
and commit in the mutation's own transaction: one fsync covers both. Larger blobs are files under
``blobs/<h0h1>/<h2h3>/<digest>``, written to ``blobs/.tmp``, fsynced and linked into place without
clobbering before the transaction that references them commits. Files are 0600 in 0700 folders.
Every read re-verifies size and digest; a name is never trusted. The CAS is authoritative (it is
not a projection): reindex never touches it, backups copy it.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from blake3 import blake3

from memoree.errors import IntegrityError, NotFound
from memoree.limits import INLINE_BLOB_BYTES

from .db import execute_script, sqlite3

__all__ = ["CAS_SCHEMA", "ContentStore", "digest_hex"]

# A rowid table with the digest in a unique index: rows are appended in put order, and a 1 KiB
# row fits its leaf page, where a WITHOUT ROWID row keyed by the digest (an index b-tree, whose
# rows spill past about 1,000 bytes) wrote an overflow page and split random leaves: about 6 WAL
# pages per put against about 2 now. Stores of the earlier layout are converted when they open.
CAS_SCHEMA = """
CREATE TABLE IF NOT EXISTS cas_inline (
    hash TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL,
    data BLOB NOT NULL
) STRICT;
"""
_CONVERT_KEYED_LAYOUT = """
CREATE TABLE cas_inline_appended (
    hash TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL,
    data BLOB NOT NULL
) STRICT;
INSERT INTO cas_inline_appended (hash, size, data) SELECT hash, size, data FROM cas_inline ORDER BY hash;
DROP TABLE cas_inline;
ALTER TABLE cas_inline_appended RENAME TO cas_inline;
"""


def digest_hex(data: bytes) -> str:
    """The CAS address of ``data``."""
    return blake3(data).hexdigest()


class ContentStore:
    """Blob storage beside an SQLite connection (inline rows) and a ``blobs/`` folder (files)."""

    # The last object put() received (digest, bytes), handed to readers in the same transaction.
    _just_stored: tuple[str, bytes] | None = None
    # The objects the last put_inline_many() received, by digest, until forget_batch().
    _batch_stored: dict[str, bytes] = {}

    def __init__(self, conn: Any, root: Path) -> None:
        self.conn = conn
        self.root = root
        execute_script(conn, CAS_SCHEMA)
        _convert_keyed_layout(conn)

    def put(self, data: bytes, digest: str | None = None) -> str:
        """Store ``data`` (idempotently) and return its digest; call inside the write transaction."""
        digest = digest or digest_hex(data)
        # The projections read these bytes back in the same transaction: hand them over directly.
        self._just_stored = (digest, data)
        if len(data) <= INLINE_BLOB_BYTES:
            self.conn.execute(
                "INSERT OR IGNORE INTO cas_inline (hash, size, data) VALUES (?, ?, ?)",
                (digest, len(data), data),
            )
        else:
            self._write_file(digest, data)
        return digest

    def put_inline_many(self, blobs: Sequence[tuple[bytes, str]]) -> None:
        """Store small ``(data, digest)`` objects (each at most ``INLINE_BLOB_BYTES``) in one
        statement, in order, as ``put`` one by one would; call inside the write transaction. The
        projections read them back in the same transaction: ``get`` hands them over (without reading
        them back) until ``forget_batch``."""
        self.conn.executemany("INSERT OR IGNORE INTO cas_inline (hash, size, data) VALUES (?, ?, ?)",
                              [(digest, len(data), data) for data, digest in blobs])
        self._batch_stored = {digest: data for data, digest in blobs}

    def forget_batch(self) -> None:
        """Drop what ``put_inline_many`` handed over and nobody read (it stays in the table)."""
        self._batch_stored = {}

    def get(self, digest: str, size: int) -> bytes:
        """The verified bytes for ``digest``; INTEGRITY_ERROR when missing or damaged."""
        just_stored = self._just_stored
        if (just_stored is not None and just_stored[0] == digest and len(just_stored[1]) == size
                and self.conn.in_transaction):
            self._just_stored = None
            return just_stored[1]  # put() received them with their digest a moment ago
        batch_stored = self._batch_stored.get(digest)
        if batch_stored is not None and len(batch_stored) == size and self.conn.in_transaction:
            return batch_stored
        data = self._read(digest, size)
        if len(data) != size or digest_hex(data) != digest:
            raise IntegrityError(f"blob {digest} does not match its digest or size",
                                 details={"blob_hash": digest})
        return data

    def contains(self, digest: str, size: int) -> bool:
        try:
            self.get(digest, size)
        except (IntegrityError, NotFound):
            return False
        return True

    def erase_inline(self, digest: str) -> None:
        """Delete an inline object (inside the purge's transaction)."""
        self.conn.execute("DELETE FROM cas_inline WHERE hash = ?", (digest,))

    def erase_file(self, digest: str) -> None:
        """Delete an object's file (after the purge commits; repeated at open if a crash intervened)."""
        self.path_for(digest).unlink(missing_ok=True)

    def finish_erasure(self, digests: list[str]) -> None:
        """After a purge commits: unlink its files and truncate the WAL, which still holds the
        pages the erased rows once occupied."""
        for digest in digests:
            if not self.stored_again(digest):
                self.erase_file(digest)
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        from .copies import scrub_dead_copies

        scrub_dead_copies(self.root.parent)  # copies a killed reindex, verify or backup left

    def stored_again(self, digest: str) -> bool:
        """Whether an artifact that is not purged holds ``digest``: the same bytes put again after
        the purge that erased them (or committed in the same group). Its file must stay."""
        return self.conn.execute(
            "SELECT 1 FROM artifact_revisions r JOIN artifacts a ON a.id = r.artifact_id "
            "WHERE r.blob_hash = ? AND a.purged_commit_seq IS NULL LIMIT 1", (digest,),
        ).fetchone() is not None

    def is_purged(self, digest: str, artifact_id: str | None = None) -> bool:
        """Whether the log records a purge of ``digest`` (of ``artifact_id``'s revisions, when
        given: the same bytes in another artifact are not purged; replays index such bodies as
        empty)."""
        if artifact_id is None:
            return self.conn.execute(
                "SELECT 1 FROM events WHERE type = 'artifact.purged' AND instr(data, ?) > 0 LIMIT 1",
                (digest.encode(),),
            ).fetchone() is not None
        return self.conn.execute(
            "SELECT 1 FROM events WHERE type = 'artifact.purged' AND stream_id = ? AND instr(data, ?) > 0 LIMIT 1",
            (artifact_id, digest.encode()),
        ).fetchone() is not None

    def purges_by_artifact(self) -> dict[str, list[bytes]]:
        """Every purge event's stored bytes, by artifact: ``is_purged`` for a whole replay at once."""
        return _by_artifact(self._purge_events())

    def purges_of(self, artifact_ids: Sequence[str]) -> dict[str, list[bytes]]:
        """``purges_by_artifact`` for the given artifacts only (one look-up in the purge index)."""
        rows = self.conn.execute(
            "SELECT stream_id, data FROM events WHERE type = 'artifact.purged' AND stream_id IN "
            "(SELECT value FROM json_each(?))", (json.dumps(list(artifact_ids)),))
        return _by_artifact(rows)

    def _purge_events(self) -> Any:
        """``(artifact_id, stored bytes)`` of every purge event in the log."""
        return self.conn.execute("SELECT stream_id, data FROM events WHERE type = 'artifact.purged'")

    def path_for(self, digest: str) -> Path:
        return self.root / digest[0:2] / digest[2:4] / digest

    def _read(self, digest: str, size: int) -> bytes:
        if size <= INLINE_BLOB_BYTES:
            row = self.conn.execute("SELECT data FROM cas_inline WHERE hash = ?", (digest,)).fetchone()
            if row is not None:
                return bytes(row[0])
        try:
            return self.path_for(digest).read_bytes()
        except FileNotFoundError:
            raise IntegrityError(f"blob {digest} is missing from the content store",
                                 details={"blob_hash": digest}) from None

    def _write_file(self, digest: str, data: bytes) -> None:
        final = self.path_for(digest)
        if final.exists():
            existing = final.read_bytes()
            if digest_hex(existing) == digest:
                return
            final.unlink()  # a damaged object under the right name: replace it with good bytes
        tmp_dir = self.root / ".tmp"
        for folder in (self.root, tmp_dir, final.parent.parent, final.parent):
            folder.mkdir(mode=0o700, exist_ok=True)
        tmp = tmp_dir / f"{digest}.{secrets.token_hex(6)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(tmp, final)
            except FileExistsError:
                pass
        finally:
            tmp.unlink(missing_ok=True)
        _fsync_dir(final.parent)


def _convert_keyed_layout(conn: Any) -> None:
    """Move an earlier store's inline objects into the appended layout, in one transaction (a
    crash leaves the old table whole). A read-only connection leaves that to the writer: the
    statements here read both layouts alike."""
    row = conn.execute("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'cas_inline'").fetchone()
    if row is None or "WITHOUT ROWID" not in row[0].upper() or conn.in_transaction:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        execute_script(conn, _CONVERT_KEYED_LAYOUT)
    except sqlite3.OperationalError as exc:
        conn.execute("ROLLBACK")
        if "readonly" in str(exc):
            return  # a reader's connection: the writer converts the file when it opens
        raise
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _by_artifact(purge_rows: Any) -> dict[str, list[bytes]]:
    """``(artifact_id, stored bytes)`` rows of purge events, grouped by artifact."""
    purges: dict[str, list[bytes]] = {}
    for stream_id, data in purge_rows:
        purges.setdefault(stream_id, []).append(bytes(data))
    return purges
