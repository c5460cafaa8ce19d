"""Pages bounded by bytes as well as by count, so that a read's answer always fits in a frame."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec

__all__ = ["fit_by_bytes"]

Item = TypeVar("Item")


def fit_by_bytes(rows: Sequence[Any], limit: int, max_bytes: int,
                 convert: Callable[[Any], Item]) -> tuple[list[Item], bool]:
    """The first rows (at most ``limit``) whose encoded items fit in ``max_bytes`` (always at
    least one), and whether more remain (``rows`` holds ``limit + 1`` when there are more)."""
    items: list[Item] = []
    used = 0
    for row in rows[:limit]:
        item = convert(row)
        size = len(msgspec.json.encode(item)) + 1
        if items and used + size > max_bytes:
            return items, True
        items.append(item)
        used += size
    return items, len(rows) > limit
