"""The store's secret: what a TCP or HTTP client must present to reach the daemon.

One random token per data dir, in ``<data_dir>/auth.secret`` (0600, created new and never through
a link, at the daemon's first start; ``memoree secret rotate`` replaces it, and a running daemon
accepts only the new one from its next request on). TCP clients send it in the request frame's
``auth`` field; HTTP clients as ``Authorization: Bearer <secret>``. The Unix socket does not use
it: there the kernel's peer credentials say who is calling.

Clients find it in ``MEMOREE_SECRET``, else in the file ``MEMOREE_SECRET_FILE``, else in the data
dir's ``auth.secret``. Standard library only (``memoree call`` reads it).
"""

from __future__ import annotations

import hmac
import os
import secrets

__all__ = ["SECRET_FILENAME", "client_secret", "ensure_secret", "matches", "read_secret", "rotate_secret"]

SECRET_FILENAME = "auth.secret"
_TOKEN_BYTES = 32


def _path(data_dir: str | os.PathLike[str]) -> str:
    return os.path.join(data_dir, SECRET_FILENAME)


def read_secret(data_dir: str | os.PathLike[str]) -> str | None:
    """The data dir's secret, or None when it has none yet (or it is unreadable)."""
    try:
        fd = os.open(_path(data_dir), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        text = handle.read(256).decode("ascii", "replace").strip()
    return text or None


def _write_new(data_dir: str | os.PathLike[str]) -> str:
    """Write a fresh secret under a temporary name and rename it into place (atomic)."""
    from memoree.client.paths import create_exclusive

    token = secrets.token_urlsafe(_TOKEN_BYTES)
    tmp = os.path.join(data_dir, f".{SECRET_FILENAME}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = create_exclusive(tmp)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(token.encode("ascii") + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, _path(data_dir))
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass  # renamed into place
    return token


def ensure_secret(data_dir: str | os.PathLike[str]) -> str:
    """The data dir's secret, created at first use."""
    return read_secret(data_dir) or _write_new(data_dir)


def rotate_secret(data_dir: str | os.PathLike[str]) -> str:
    """Replace the secret; clients holding the old one are refused from now on."""
    return _write_new(data_dir)


def client_secret(data_dir: str | os.PathLike[str] | None) -> str | None:
    """What a client sends: ``MEMOREE_SECRET``, ``MEMOREE_SECRET_FILE`` or the data dir's file."""
    explicit = os.environ.get("MEMOREE_SECRET", "").strip()
    if explicit:
        return explicit
    file = os.environ.get("MEMOREE_SECRET_FILE", "")
    if file:
        try:
            with open(file, encoding="ascii") as handle:
                return handle.read().strip() or None
        except (OSError, UnicodeDecodeError):
            return None
    if data_dir is None:
        from memoree.client.paths import data_dir_str

        data_dir = data_dir_str()
    return read_secret(data_dir)


def matches(presented: object, expected: str) -> bool:
    """Constant-time comparison of a presented secret with the store's."""
    if not isinstance(presented, str) or not presented:
        return False
    return hmac.compare_digest(presented.encode("utf-8", "replace"), expected.encode("ascii"))
