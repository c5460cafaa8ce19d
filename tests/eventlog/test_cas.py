"""The content store addresses bytes by BLAKE3, verifies every read and keeps files private."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from memoree.errors import IntegrityError
from memoree.eventlog.cas import ContentStore, digest_hex
from memoree.eventlog.db import connect
from memoree.limits import INLINE_BLOB_BYTES


@pytest.fixture
def cas(tmp_path: Path) -> ContentStore:
    return ContentStore(connect(tmp_path / "db.sqlite3"), tmp_path / "blobs")


class TestContentStore:
    def test_small_blobs_live_inline_and_read_back(self, cas: ContentStore) -> None:
        """A blob at the inline threshold is stored in the database, not as a file."""
        data = b"x" * INLINE_BLOB_BYTES
        digest = cas.put(data)
        assert data == cas.get(digest, len(data))
        assert not cas.path_for(digest).exists()

    def test_large_blobs_are_private_files_in_fanout_folders(self, cas: ContentStore) -> None:
        """A larger blob becomes a 0600 file under blobs/<h0h1>/<h2h3>/ in 0700 folders."""
        data = b"y" * (INLINE_BLOB_BYTES + 1)
        digest = cas.put(data)
        path = cas.path_for(digest)
        assert path.parent.name == digest[2:4] and path.parent.parent.name == digest[:2]
        assert 0o600 == stat.S_IMODE(path.stat().st_mode)
        assert 0o700 == stat.S_IMODE(path.parent.stat().st_mode)
        assert data == cas.get(digest, len(data))
        assert [] == list((cas.root / ".tmp").iterdir())

    def test_identical_bytes_are_stored_once(self, cas: ContentStore) -> None:
        """Putting the same large bytes twice leaves one object."""
        data = b"z" * (INLINE_BLOB_BYTES * 2)
        assert cas.put(data) == cas.put(data)
        assert 1 == sum(1 for p in cas.root.rglob("*") if p.is_file())

    def test_a_damaged_blob_is_an_integrity_error(self, cas: ContentStore) -> None:
        """Reading bytes that no longer match their digest fails loudly."""
        data = b"w" * (INLINE_BLOB_BYTES + 10)
        digest = cas.put(data)
        path = cas.path_for(digest)
        path.chmod(0o600)
        path.write_bytes(b"W" + data[1:])
        with pytest.raises(IntegrityError):
            cas.get(digest, len(data))

    def test_a_missing_blob_is_an_integrity_error(self, cas: ContentStore) -> None:
        """A digest with no stored object is reported, not returned empty."""
        with pytest.raises(IntegrityError):
            cas.get(digest_hex(b"never stored" * 5000), 60000)


class TestInlineLayout:
    def test_inline_objects_are_appended_rows_that_fit_their_page(self, cas: ContentStore) -> None:
        """Inline objects live in a rowid table (appended in put order) with the digest in a unique index."""
        first, second = cas.put(b"a" * 1024), cas.put(b"b" * 1024)
        cas.put(b"a" * 1024)
        rows = cas.conn.execute("SELECT hash FROM cas_inline ORDER BY rowid").fetchall()
        assert [(first,), (second,)] == rows

    def test_a_store_of_the_keyed_layout_is_converted_when_it_opens(self, tmp_path: Path) -> None:
        """An earlier store's WITHOUT ROWID table is rewritten to the appended layout, every object kept."""
        conn = connect(tmp_path / "old.sqlite3")
        conn.execute("CREATE TABLE cas_inline (hash TEXT PRIMARY KEY, size INTEGER NOT NULL, "
                     "data BLOB NOT NULL) STRICT, WITHOUT ROWID")
        blobs = [bytes([i]) * (100 + i) for i in range(5)]
        conn.executemany("INSERT INTO cas_inline VALUES (?, ?, ?)", [(digest_hex(b), len(b), b) for b in blobs])
        cas = ContentStore(conn, tmp_path / "blobs")
        schema = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'cas_inline'").fetchone()[0]
        assert "WITHOUT ROWID" not in schema.upper()
        assert blobs == [cas.get(digest_hex(b), len(b)) for b in blobs]

    def test_a_read_only_connection_reads_the_keyed_layout_as_it_is(self, tmp_path: Path) -> None:
        """A reader opening an unconverted store neither fails nor converts it: the writer does."""
        path = tmp_path / "old.sqlite3"
        conn = connect(path)
        conn.execute("CREATE TABLE cas_inline (hash TEXT PRIMARY KEY, size INTEGER NOT NULL, "
                     "data BLOB NOT NULL) STRICT, WITHOUT ROWID")
        conn.execute("INSERT INTO cas_inline VALUES (?, 3, ?)", (digest_hex(b"abc"), b"abc"))
        reader = ContentStore(connect(path, readonly=True), tmp_path / "blobs")
        assert b"abc" == reader.get(digest_hex(b"abc"), 3)
        schema = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'cas_inline'").fetchone()[0]
        assert "WITHOUT ROWID" in schema.upper()
