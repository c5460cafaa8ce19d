"""Where memoree keeps its data, configuration and runtime files.

``MEMOREE_HOME`` puts everything under one folder (``config.toml``, ``data/``, ``run/``).
Otherwise each location has its own override (``MEMOREE_CONFIG``, ``MEMOREE_DATA_DIR``,
``MEMOREE_RUNTIME_DIR``, ``MEMOREE_SOCKET``) and falls back to the platform's user folders
(XDG on Linux). Standard library plus platformdirs, imported only when a default is needed.

The private-directory rule (who may own the folders memoree uses) lives here too, because the
client checks it before it starts a daemon and the daemon before it uses a folder:
``private_dir`` creates a folder 0700, or accepts an existing one only when this user owns it and
it is not a symbolic link (a looser mode is tightened, with a warning), and refuses it when any
folder above it is owned by another ordinary user or writable by others without the sticky bit
(either could swap the folder for one of theirs). ``create_exclusive`` creates a file the way every
file of the store is created: new, 0600, never through a planted link.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["ForeignPath", "config_file", "config_file_str", "create_exclusive", "data_dir", "data_dir_str",
           "open_append_private", "private_dir", "runtime_dir", "socket_path", "socket_path_str",
           "write_private"]

_APP, _AUTHOR = "memoree", "dev"

# Each location is worked out as text (``os.path``) and wrapped in a ``Path`` only for callers
# that want one: ``memoree call`` finds its socket and config file without importing ``pathlib``.


def _as_path(text: str) -> Path:
    from pathlib import Path

    return Path(text)


def _env_path(name: str) -> str | None:
    value = os.environ.get(name, "")
    return os.path.expanduser(value) if value else None


def config_file_str() -> str:
    explicit = _env_path("MEMOREE_CONFIG")
    if explicit:
        return explicit
    home = _env_path("MEMOREE_HOME")
    if home:
        return os.path.join(home, "config.toml")
    import platformdirs

    return os.path.join(platformdirs.user_config_dir(_APP, _AUTHOR), "config.toml")


def data_dir_str() -> str:
    explicit = _env_path("MEMOREE_DATA_DIR")
    if explicit:
        return explicit
    home = _env_path("MEMOREE_HOME")
    if home:
        return os.path.join(home, "data")
    import platformdirs

    return platformdirs.user_data_dir(_APP, _AUTHOR)


def _runtime_dir_str() -> str:
    explicit = _env_path("MEMOREE_RUNTIME_DIR")
    if explicit:
        return explicit
    home = _env_path("MEMOREE_HOME")
    if home:
        return os.path.join(home, "run")
    xdg = _env_path("XDG_RUNTIME_DIR")
    if xdg:
        return os.path.join(xdg, _APP)
    return os.path.join(data_dir_str(), "run")


def socket_path_str() -> str:
    return _env_path("MEMOREE_SOCKET") or os.path.join(_runtime_dir_str(), "memoree.sock")


def config_file() -> Path:
    return _as_path(config_file_str())


def data_dir() -> Path:
    return _as_path(data_dir_str())


def runtime_dir() -> Path:
    return _as_path(_runtime_dir_str())


def socket_path() -> Path:
    return _as_path(socket_path_str())


class ForeignPath(Exception):
    """A folder or file memoree must use is owned by someone else, or reached through a link."""


def _check_ancestors(path: Path) -> None:
    me = os.geteuid()
    for parent in path.absolute().parents:
        try:
            st = parent.stat()
        except OSError:
            continue
        if st.st_uid not in (me, 0):
            raise ForeignPath(f"{parent} (above {path}) is owned by uid {st.st_uid}, not by this user "
                              f"(uid {me}) or root; refusing to use {path}")
        if st.st_mode & 0o002 and not st.st_mode & 0o1000:
            raise ForeignPath(f"{parent} (above {path}) is writable by every user and not sticky; "
                              f"refusing to use {path}")


def private_dir(path: Path, what: str) -> list[str]:
    """Create ``path`` (mode 0700) or accept an existing one this user owns; see the module
    docstring. Returns warnings (a mode that was tightened); raises ``ForeignPath``."""
    import stat

    _check_ancestors(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise ForeignPath(f"{what} {path} is not a directory (a link or a file); refusing it")
    if st.st_uid != os.geteuid():
        raise ForeignPath(f"{what} {path} is owned by uid {st.st_uid}, not by this user "
                          f"(uid {os.geteuid()}); refusing it")
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        os.chmod(path, 0o700)
        return [f"{what} {path} was accessible to other users (mode {mode:o}); set to 0700"]
    return []


def create_exclusive(path: str | os.PathLike[str], flags: int = os.O_WRONLY) -> int:
    """A descriptor of a new file at ``path`` (0600); FileExistsError when anything is there."""
    return os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)


def open_append_private(path: str | os.PathLike[str]) -> int:
    """Open a log file for appending, creating it 0600; a planted link or another user's file is
    refused (``ForeignPath``)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as exc:
        import errno

        if exc.errno == errno.ELOOP:
            raise ForeignPath(f"{path} is a symbolic link; refusing to write through it") from None
        raise
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_nlink > 1:
        os.close(fd)
        raise ForeignPath(f"{path} is owned by uid {st.st_uid} or hard-linked elsewhere; refusing to write to it")
    return fd


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically: a new 0600 temporary file (``O_EXCL`` and
    ``O_NOFOLLOW``, a random name, so a planted file or link is never written through), synced,
    then renamed into place."""
    import secrets

    scratch = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = create_exclusive(scratch)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(scratch, path)
    finally:
        scratch.unlink(missing_ok=True)
