"""Backups and restores: consistent copies published atomically, verified by replay first.

``create`` refuses an existing destination (even a dangling symlink), one inside the data dir and
one reached through a symlinked folder; it seals, snapshots the database with SQLite's online
backup, copies the node key and every blob the snapshot references (re-hashing each), opens the
staged copy and verifies it by replay, fsyncs everything and publishes it with an atomic
no-replace rename. Staging is a sibling of the destination, so a crash (even SIGKILL) never leaves
a partial backup at the destination; stale staging folders of dead processes are removed by the
next backup. ``restore`` copies a backup into a new data dir the same way.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from memoree.errors import ConfigError, IntegrityError, InvalidRequest
from memoree.eventlog.cas import digest_hex
from memoree.eventlog.timefmt import now_utc
from memoree.hosts import pid_alive

__all__ = ["create", "restore"]

STAGE_PREFIX = ".memoree-backup-stage-"
RENAME_NOREPLACE = 1
AT_FDCWD = -100


def _rename_noreplace(source: Path, destination: Path) -> None:
    """Atomically rename, failing if the destination appeared meanwhile (Linux renameat2)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        raise ConfigError("atomic no-replace rename is not available on this platform; refusing to publish") from None
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(AT_FDCWD, os.fsencode(source), AT_FDCWD, os.fsencode(destination), RENAME_NOREPLACE) != 0:
        code = ctypes.get_errno()
        if code in (errno.EEXIST, errno.ENOTEMPTY):
            raise ConfigError(f"backup destination already exists: {destination}")
        raise ConfigError(f"could not publish {destination}: {os.strerror(code)}")


def _check_destination(destination: Path, data_dir: Path) -> Path:
    if not destination.is_absolute():
        raise InvalidRequest("backup destination must be an absolute path (the CLI makes relative ones absolute)")
    if "\0" in str(destination):  # the OS would cut the path at the NUL and publish elsewhere
        raise InvalidRequest("backup destination must not contain NUL characters")
    if os.path.lexists(destination):
        raise InvalidRequest(f"backup destination already exists: {destination}")
    parent = destination.parent
    resolved_data = Path(os.path.realpath(data_dir))
    if Path(os.path.realpath(parent)) != Path(os.path.abspath(parent)):
        raise InvalidRequest(f"backup destination {destination} is reached through a symlink; give the real path")
    if destination == resolved_data or resolved_data in destination.parents:
        raise InvalidRequest("backup destination must be outside the data dir")
    return parent


def _remove_stale_stages(parent: Path, prefix: str) -> None:
    for stage in parent.glob(prefix + "*"):
        pid_text = stage.name[len(prefix):].split("-", 1)[0]
        if pid_text.isdigit() and not pid_alive(int(pid_text)):
            shutil.rmtree(stage, ignore_errors=True)


def _fsync_tree(root: Path) -> None:
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            if not path.is_file() or path.is_symlink():
                raise IntegrityError(f"unexpected non-file entry in the staged copy: {path}")
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _snapshot_database(conn: Any, target_path: Path) -> None:
    from memoree.eventlog.db import create_private, sqlite3

    create_private(target_path)
    target = sqlite3.connect(str(target_path))
    try:
        conn.backup(target)
        target.execute("PRAGMA journal_mode = DELETE")
    finally:
        target.close()


def _head_of(db_path: Path) -> int:
    from memoree.eventlog.db import connect

    conn = connect(db_path)
    try:
        return conn.execute("SELECT coalesce(max(commit_seq), 0) FROM events").fetchone()[0]
    finally:
        conn.close()


def _copy_external_blobs(source_blobs: Path, staged_db: Path, staged_blobs: Path) -> int:
    from memoree.eventlog.db import connect
    from memoree.limits import INLINE_BLOB_BYTES

    conn = connect(staged_db)
    try:
        rows = conn.execute("SELECT DISTINCT blob_hash, size_bytes FROM artifact_revisions WHERE size_bytes > ?",
                            (INLINE_BLOB_BYTES,)).fetchall()
    finally:
        conn.close()
    copied = 0
    for digest, size in rows:
        source = source_blobs / digest[:2] / digest[2:4] / digest
        if not source.exists():
            continue  # purged bytes: the staged verify decides whether that is expected
        data = source.read_bytes()
        if len(data) != size or digest_hex(data) != digest:
            raise IntegrityError(f"blob {digest} is damaged in the live store; refusing to back it up")
        target = staged_blobs / digest[:2] / digest[2:4] / digest
        for folder in (staged_blobs, target.parent.parent, target.parent):  # each one 0700 (parents=True would not be)
            folder.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        copied += 1
    return copied


def _verify_staged(stage: Path, expected_seq: int | None) -> dict[str, Any]:
    from memoree.admin import verify as audit
    from memoree.service.engine import Engine

    engine = Engine(stage)
    try:
        report = audit.verify(engine)
        engine.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        engine.close()
    for leftover in ("memoree.sqlite3-wal", "memoree.sqlite3-shm"):
        (stage / leftover).unlink(missing_ok=True)
    if not report["ok"]:
        raise IntegrityError("staged backup verification failed: " + "; ".join(i["message"] for i in report["issues"][:3]),
                             details={"issues": report["issues"]})
    if expected_seq is not None and report["last_commit_seq"] != expected_seq:
        raise IntegrityError(f"staged backup is at commit_seq {report['last_commit_seq']}, expected {expected_seq}")
    return report


def create(engine: Any, destination: Path) -> dict[str, Any]:
    """Publish a verified backup of ``engine`` at ``destination`` (see the module docstring)."""
    from memoree.eventlog import sealing

    parent = _check_destination(destination, engine.data_dir)
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _remove_stale_stages(parent, STAGE_PREFIX)
    if engine.head():
        sealing.seal(engine)
    stage = Path(tempfile.mkdtemp(prefix=f"{STAGE_PREFIX}{os.getpid()}-", dir=parent))
    try:
        os.chmod(stage, 0o700)
        # One backup step copies every page under a read lock: a consistent snapshot. (In the
        # daemon the writer thread runs this, so no write of ours can interleave either.)
        _snapshot_database(engine.conn, stage / "memoree.sqlite3")
        commit_seq = _head_of(stage / "memoree.sqlite3")
        copied = _copy_external_blobs(engine.data_dir / "blobs", stage / "memoree.sqlite3", stage / "blobs")
        if (engine.data_dir / "keys").is_dir():
            shutil.copytree(engine.data_dir / "keys", stage / "keys")
        _verify_staged(stage, commit_seq)
        _fsync_tree(stage)
        _rename_noreplace(stage, destination)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return {"destination": str(destination), "database": str(destination / "memoree.sqlite3"),
            "blobs": str(destination / "blobs"), "commit_seq": commit_seq, "copied_external_blobs": copied,
            "created_at": now_utc()}


def restore(source: Path, data_dir: Path) -> dict[str, Any]:
    """Copy a backup into a new data dir, verifying it before it appears there."""
    if not (source / "memoree.sqlite3").is_file():
        raise InvalidRequest(f"{source} is not a memoree backup (no memoree.sqlite3)")
    if os.path.lexists(data_dir) and (not data_dir.is_dir() or any(data_dir.iterdir())):
        raise InvalidRequest(f"restore target {data_dir} is not empty; choose a new data dir")
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    prefix = ".memoree-restore-stage-"
    _remove_stale_stages(data_dir.parent, prefix)
    stage = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=data_dir.parent))
    try:
        os.chmod(stage, 0o700)
        shutil.copy2(source / "memoree.sqlite3", stage / "memoree.sqlite3")
        os.chmod(stage / "memoree.sqlite3", 0o600)
        for folder in ("blobs", "keys"):
            if (source / folder).is_dir():
                shutil.copytree(source / folder, stage / folder)
        report = _verify_staged(stage, None)
        _fsync_tree(stage)
        if os.path.lexists(data_dir):
            data_dir.rmdir()
        _rename_noreplace(stage, data_dir)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return {"data_dir": str(data_dir), "commit_seq": report["last_commit_seq"], "verified": True}
