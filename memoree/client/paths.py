"""Where memoree keeps its data, configuration and runtime files.

``MEMOREE_HOME`` puts everything under one folder (``config.toml``, ``data/``, ``run/``).
Otherwise each location has its own override (``MEMOREE_CONFIG``, ``MEMOREE_DATA_DIR``,
``MEMOREE_RUNTIME_DIR``, ``MEMOREE_SOCKET``) and falls back to the platform's user folders
(XDG on Linux). Standard library plus platformdirs, imported only when a default is needed.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["config_file", "data_dir", "runtime_dir", "socket_path"]

_APP, _AUTHOR = "memoree", "dev"


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name, "")
    return Path(value).expanduser() if value else None


def _home() -> Path | None:
    return _env_path("MEMOREE_HOME")


def config_file() -> Path:
    explicit = _env_path("MEMOREE_CONFIG")
    if explicit:
        return explicit
    home = _home()
    if home:
        return home / "config.toml"
    import platformdirs

    return Path(platformdirs.user_config_dir(_APP, _AUTHOR)) / "config.toml"


def data_dir() -> Path:
    explicit = _env_path("MEMOREE_DATA_DIR")
    if explicit:
        return explicit
    home = _home()
    if home:
        return home / "data"
    import platformdirs

    return Path(platformdirs.user_data_dir(_APP, _AUTHOR))


def runtime_dir() -> Path:
    explicit = _env_path("MEMOREE_RUNTIME_DIR")
    if explicit:
        return explicit
    home = _home()
    if home:
        return home / "run"
    xdg = _env_path("XDG_RUNTIME_DIR")
    if xdg:
        return xdg / _APP
    return data_dir() / "run"


def socket_path() -> Path:
    return _env_path("MEMOREE_SOCKET") or runtime_dir() / "memoree.sock"
