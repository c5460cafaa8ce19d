"""Which log a store uses: the embedded SQLite file, or a PostgreSQL log shared by many hosts.

``MEMOREE_LOG_URL=postgresql://...`` (or ``url`` in the ``[log]`` section of the config file)
switches an engine to shared mode (``memoree.eventlog.shared``). Nothing PostgreSQL-related is imported
unless a URL is configured, so the embedded default pays nothing for scale-out.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from memoree.errors import ConfigError

__all__ = ["log_url", "open_shared_log"]


def log_url(config_path: Path | None = None) -> str | None:
    """The shared log's URL: ``MEMOREE_LOG_URL``, else ``[log] url`` in the config file, else None."""
    url = os.environ.get("MEMOREE_LOG_URL", "").strip() or _configured_url(config_path)
    if url and not url.startswith(("postgresql://", "postgres://")):
        shown = re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)
        raise ConfigError(f"the log URL must start with postgresql://, got {shown!r}")
    return url or None


def _configured_url(config_path: Path | None) -> str | None:
    import tomllib

    from memoree.client.paths import config_file

    path = config_path or config_file()
    try:
        document = tomllib.loads(path.read_text("utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    section = document.get("log")
    url = section.get("url") if isinstance(section, dict) else None
    if url is not None and not isinstance(url, str):
        raise ConfigError(f"[log] url in {path} must be a string")
    return url.strip() if url else None


def open_shared_log(conn: Any, db_path: Path) -> Any:
    """The shared log for an engine's local database, or None when no log URL is configured."""
    url = log_url()
    if url is None:
        return None
    from memoree.eventlog.shared import SharedLog

    return SharedLog(url, conn, db_path)
