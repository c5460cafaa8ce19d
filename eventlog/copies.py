"""Copies of the store's bytes that live outside its database: where they are, and erasing dead ones.

A reindex or verify builds a scratch database in the data dir (``.rebuild-<pid>-*``); a backup
stages its copy beside its destination (``.memoree-backup-stage-<pid>-*``), which may be anywhere,
so the backup records the stage's path here first (``.copies/<pid>-<random>`` holding the path)
and forgets it when the stage is published or removed. A process killed mid-way leaves its copy
behind, purged bytes included: ``scrub_dead_copies`` deletes every copy whose process is gone. It
runs when the store opens and after every purge commits, so erasure reaches those copies too.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

__all__ = ["COPIES_FOLDER", "SCRATCH_PREFIX", "forget_copy", "record_copy", "scrub_dead_copies"]

COPIES_FOLDER = ".copies"
SCRATCH_PREFIX = ".rebuild-"


def _pid_of(name: str) -> int | None:
    text = name.split("-", 1)[0]
    return int(text) if text.isdigit() else None


def _alive(pid: int) -> bool:
    from memoree.hosts import pid_alive

    return pid_alive(pid)


def record_copy(data_dir: Path, copy: Path, pid: int | None = None) -> Path:
    """Note that this process (or ``pid``) is writing a copy of the store at ``copy``; returns the
    record."""
    folder = data_dir / COPIES_FOLDER
    folder.mkdir(mode=0o700, exist_ok=True)
    record = folder / f"{pid or os.getpid()}-{secrets.token_hex(6)}"
    fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(os.fspath(copy.absolute()))
    return record


def forget_copy(record: Path) -> None:
    record.unlink(missing_ok=True)


def scrub_dead_copies(data_dir: Path) -> list[str]:
    """Delete every copy (scratch or recorded stage) whose process no longer runs; their paths."""
    removed = []
    for folder in data_dir.glob(SCRATCH_PREFIX + "*"):
        pid = _pid_of(folder.name[len(SCRATCH_PREFIX):])
        if pid is not None and not _alive(pid):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(str(folder))
    records = data_dir / COPIES_FOLDER
    for record in records.glob("*") if records.is_dir() else ():
        pid = _pid_of(record.name)
        if pid is None or _alive(pid):
            continue
        try:
            copy = Path(record.read_text(encoding="utf-8").strip())
        except (OSError, UnicodeDecodeError):
            copy = None
        if copy is not None and copy.name.startswith(".memoree-") and not copy.is_symlink():
            shutil.rmtree(copy, ignore_errors=True)
            removed.append(str(copy))
        record.unlink(missing_ok=True)
    return removed
