"""``memoree checkpoint`` notes and the ``memoree pending`` quarantine they wait in.

A checkpoint is one bounded (64 KiB) note per session, last write wins, kept in a private
quarantine folder (0700, files 0600) beside the data directory — never inside the store's
database, CAS or indexes — so no read op, index or context bundle can see it. Nothing here talks
to the store: ``pending preview`` hands the note to ``remember``'s read-only preview, and
``pending apply`` is the one explicit boundary where it becomes ordinary ``remember`` mutations,
after which the note is removed (unless a newer checkpoint replaced it meanwhile).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blake3 import blake3

from memoree.errors import InvalidRequest, NotFound

__all__ = [
    "MAX_NOTE_BYTES",
    "Note",
    "drop",
    "list_notes",
    "quarantine_dir",
    "read_note",
    "remove_if_unchanged",
    "write_checkpoint",
]

MAX_NOTE_BYTES = 64 * 1024
MAX_SESSION_BYTES = 256
_SUFFIX = ".json"


@dataclass(frozen=True)
class Note:
    """One session's checkpoint note and the context frozen when it was written."""

    session: str
    text: str
    updated_at: str
    task: str | None = None
    context: dict[str, Any] | None = None
    context_source: str | None = None

    @property
    def size_bytes(self) -> int:
        return len(self.text.encode("utf-8"))

    @property
    def digest(self) -> str:
        return blake3(self.text.encode("utf-8")).hexdigest()

    def to_json(self) -> dict[str, Any]:
        return {"schema": 1, "session": self.session, "task": self.task, "text": self.text,
                "updated_at": self.updated_at, "context": self.context,
                "context_source": self.context_source}

    def listing(self) -> dict[str, Any]:
        """What ``pending list`` shows: everything but the text."""
        return {"session": self.session, "task": self.task, "bytes": self.size_bytes,
                "updated_at": self.updated_at, "context": self.context}


def quarantine_dir(data_dir: Path | None = None) -> Path:
    """``MEMOREE_PENDING_DIR``, else ``<data dir>-pending`` beside the data directory."""
    explicit = os.environ.get("MEMOREE_PENDING_DIR", "")
    if explicit:
        return Path(explicit).expanduser()
    if data_dir is None:
        from memoree.client.paths import data_dir as default_data_dir

        data_dir = default_data_dir()
    data_dir = Path(data_dir).expanduser().absolute()
    return data_dir.parent / f"{data_dir.name}-pending"


def write_checkpoint(folder: Path, session: str, text: str, *, task: str | None,
                     context: dict[str, Any] | None, context_source: str | None) -> tuple[Note, bool]:
    """Store ``text`` as the session's note (replacing any earlier one); report whether it replaced."""
    _check_session(session)
    if not text.strip():
        raise InvalidRequest("checkpoint text must not be empty")
    size = len(text.encode("utf-8"))
    if size > MAX_NOTE_BYTES:
        raise InvalidRequest(f"checkpoint text must not exceed {MAX_NOTE_BYTES} bytes (got {size})")
    from memoree.eventlog.timefmt import now_utc

    note = Note(session=session, text=text, updated_at=now_utc(), task=task, context=context,
                context_source=context_source)
    path = _note_path(_private_dir(folder), session)
    replaced = path.exists()
    _write_private(path, json.dumps(note.to_json(), ensure_ascii=False, indent=1))
    return note, replaced


def read_note(folder: Path, session: str) -> Note:
    """The session's note, or NotFound."""
    _check_session(session)
    path = _note_path(folder, session)
    note = _load(path) if path.is_file() else None
    if note is None or note.session != session:
        raise NotFound(f"no pending checkpoint for session {session!r}")
    return note


def list_notes(folder: Path) -> list[Note]:
    """Every readable note, oldest update first."""
    if not folder.is_dir():
        return []
    notes = [note for path in sorted(folder.glob(f"*{_SUFFIX}")) if (note := _load(path)) is not None]
    return sorted(notes, key=lambda note: (note.updated_at, note.session))


def remove_if_unchanged(folder: Path, note: Note) -> bool:
    """Remove the note ``pending apply`` consumed, unless a newer checkpoint replaced it."""
    try:
        current = read_note(folder, note.session)
    except NotFound:
        return False
    if (current.updated_at, current.digest) != (note.updated_at, note.digest):
        return False
    _note_path(folder, note.session).unlink(missing_ok=True)
    return True


def drop(folder: Path, session: str) -> Note:
    """Discard a session's note without applying it."""
    note = read_note(folder, session)
    _note_path(folder, session).unlink(missing_ok=True)
    return note


def _check_session(session: str) -> None:
    if not session.strip() or len(session.encode("utf-8")) > MAX_SESSION_BYTES:
        raise InvalidRequest(f"session must be 1 to {MAX_SESSION_BYTES} bytes and not blank")
    if any(ord(ch) < 0x20 or ch == "\x7f" for ch in session):
        raise InvalidRequest("session must not contain control characters")


def _note_path(folder: Path, session: str) -> Path:
    # The file name is a digest, so any session id is safe as a name and never escapes the folder.
    return folder / (blake3(session.encode("utf-8")).hexdigest()[:32] + _SUFFIX)


def _private_dir(folder: Path) -> Path:
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise InvalidRequest(f"quarantine {folder} is not a directory")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(folder.stat().st_mode) != 0o700:
        os.chmod(folder, 0o700)
    return folder


def _write_private(path: Path, text: str) -> None:
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(scratch, path)


def _load(path: Path) -> Note | None:
    try:
        document = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(document, dict) or not isinstance(document.get("text"), str):
        return None
    return Note(session=str(document.get("session", "")), text=document["text"],
                updated_at=str(document.get("updated_at", "")), task=document.get("task"),
                context=document.get("context"), context_source=document.get("context_source"))
