"""Bounded per-process memories of read-path results that depend on a text alone.

Some work a read repeats question after question depends only on the text it is given, never on
the query or the store: a line's embedding, a chunk's lines cut and folded, a non-ASCII excerpt's
risk signals. ``DigestMemo`` remembers such results by a digest of the text (``text_digest``; the
text itself is not kept), so no write can make an entry wrong and no invalidation is needed. A
full memory is cleared rather than grown: the next requests refill it with what they use.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["DigestMemo", "text_digest"]

V = TypeVar("V")


def text_digest(text: str | bytes) -> bytes:
    """A 16-byte BLAKE2b digest of ``text`` (a str as UTF-8, lone surrogates kept)."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).digest()


class DigestMemo(Generic[V]):
    """At most ``limit`` remembered values, keyed by digests (alone or in a tuple)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._values: dict[Hashable, V] = {}

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: Hashable) -> V | None:
        return self._values.get(key)

    def put(self, key: Hashable, value: V) -> V:
        """Remember ``value`` under ``key`` (clearing the memory first when it is full)."""
        if len(self._values) >= self.limit:
            self._values.clear()
        self._values[key] = value
        return value
