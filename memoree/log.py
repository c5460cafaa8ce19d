"""Structured diagnostics on stderr, configured only when something is first logged.

``memoree call`` must stay fast, so structlog is imported lazily: a clean call never loads it.
Event names are snake_case facts (``request_failed``, ``projection_rebuilt``).
"""

from __future__ import annotations

import functools
import sys
from typing import Any

__all__ = ["logger"]


@functools.cache
def logger() -> Any:
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
