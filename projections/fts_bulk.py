"""Building a scratch replay's full-text indexes at once, after the content tables are filled.

One FTS5 'rebuild' per index reads every content row and writes the index in a few large
segments, far cheaper than indexing row by row as a replay goes.
"""

from __future__ import annotations

from typing import Any

from .fts import FTS_INDEXES

__all__ = ["BULK_HASH_BYTES", "build_text_indexes", "rebuild_index"]

BULK_HASH_BYTES = 64 * 1024 * 1024
DEFAULT_HASH_BYTES = 1024 * 1024  # FTS5's own default


def rebuild_index(conn: Any, index: str) -> None:
    """Index every content row at once. A term buffer bigger than the 1 MiB default writes fewer,
    larger segments and so merges far less (about half the build time); the default returns after."""
    conn.execute(f"INSERT INTO {index}({index}, rank) VALUES('hashsize', ?)", (BULK_HASH_BYTES,))
    conn.execute(f"INSERT INTO {index}({index}) VALUES('rebuild')")
    conn.execute(f"INSERT INTO {index}({index}, rank) VALUES('hashsize', ?)", (DEFAULT_HASH_BYTES,))


def build_text_indexes(conn: Any) -> None:
    """Build every FTS5 index of the scratch database behind ``conn`` (content tables committed)."""
    conn.execute("BEGIN")
    for index in FTS_INDEXES:
        rebuild_index(conn, index)
    conn.execute("COMMIT")
