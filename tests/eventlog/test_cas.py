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
