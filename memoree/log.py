"""Structured diagnostics on stderr, configured only when something is first logged.

``memoree call`` must stay fast, so structlog is imported lazily: a clean call never loads it.
Event names are snake_case facts (``request_failed``, ``projection_rebuilt``).

Writing a diagnostic never raises: stderr may be a file on a full disk, a closed pipe or a
terminal that went away, and a daemon that cannot log must still answer (a diagnostic that cannot
be written is dropped).
"""

from __future__ import annotations

import functools
import sys
from typing import Any

__all__ = ["logger"]


class _NeverRaises:
    """A logger whose every method swallows its own failures (see the module docstring)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)

        def guarded(*args: Any, **kwargs: Any) -> None:
            try:
                method(*args, **kwargs)
            except Exception:  # noqa: BLE001 - a diagnostic that cannot be written is dropped
                pass

        return guarded


@functools.cache
def logger() -> Any:
    return _NeverRaises(_structlog_logger())


def _structlog_logger() -> Any:
    import structlog

    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    return structlog.get_logger("memoree")
