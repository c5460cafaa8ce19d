"""Strict JSON: a document whose objects repeat a key is refused, never read as "last one wins".

Two parsers on one path (``memoree call``, the daemon, the REST front, the MCP server) could
otherwise disagree about which ``op`` or field a request carries. Standard library only: the call
client uses it.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: ``typing`` is not on ``memoree call``'s import path
    from typing import Any

__all__ = ["DuplicateKey", "duplicate_key", "loads"]


class DuplicateKey(ValueError):
    """An object in the document names the same key twice."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            raise DuplicateKey(f"duplicate key {key!r} in a JSON object")
        document[key] = value
    return document


def loads(data: str | bytes | bytearray) -> Any:
    """``json.loads`` that raises ``DuplicateKey`` for a repeated key (``ValueError`` otherwise)."""
    return json.loads(data, object_pairs_hook=_pairs)


def duplicate_key(data: str | bytes | bytearray) -> str | None:
    """The message naming the first repeated key in ``data``, or None (also for invalid JSON,
    which the caller's own parser reports)."""
    if isinstance(data, (bytes, bytearray)) and data.find(b'"') < 0:
        return None
    try:
        loads(data)
    except DuplicateKey as exc:
        return str(exc)
    except (ValueError, RecursionError):
        return None
    return None
