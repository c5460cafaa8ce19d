"""Which chunk rows of a few revisions match an FTS5 expression, without a chunk-level index.

This module owns the membership test that citations need: for the chunk rows (title row and
body chunks, ``projections.fts``) of the revisions being cited, which ones hold a unit's words.
The store keeps no word index per chunk (a put would index every word twice); instead the chunk
rows asked about are indexed from the ``artifact_chunk_text`` view into a temporary contentless
FTS5 table of this connection (it keeps the words' positions, not the text), with the word
tokenizer of the stored indexes, and the expression is matched there. A chunk matches or not by
its own text alone (no corpus statistics take part), so the answer is the one an index over
every chunk would give. The temporary table lives in the connection's temp database (memory),
which a read-only connection may write too, and is emptied after each use, so nothing of the
cited text stays there past the query that asked for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from memoree.projections.fts import WORD_TOKENIZER

__all__ = ["PROBE_TABLE", "clear_probe", "fill_probe", "probe_matching"]

PROBE_TABLE = "chunk_probe"


def fill_probe(conn: Any, chunk_ids: Iterable[int]) -> None:
    """Make the connection's probe hold exactly the chunk rows ``chunk_ids`` (others are left out)."""
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{PROBE_TABLE} USING fts5(title, body, "
                 f"content='', tokenize='{WORD_TOKENIZER}')")
    clear_probe(conn)
    ids = sorted(set(chunk_ids))
    if ids:
        conn.execute(f"INSERT INTO temp.{PROBE_TABLE} (rowid, title, body) SELECT chunk_id, title, body "
                     "FROM artifact_chunk_text WHERE chunk_id IN (SELECT value FROM json_each(?))",
                     (msgspec.json.encode(ids).decode(),))


def clear_probe(conn: Any) -> None:
    """Empty the probe (its index is made of stored text): one command, not a delete per row."""
    conn.execute(f"INSERT INTO temp.{PROBE_TABLE}({PROBE_TABLE}) VALUES('delete-all')")


def probe_matching(conn: Any, expression: str, chunk_ids: Iterable[int]) -> set[int]:
    """Which of ``chunk_ids`` (all of them in the probe) match ``expression``."""
    wanted = set(chunk_ids)
    if not wanted:
        return set()
    rows = conn.execute(f"SELECT rowid FROM temp.{PROBE_TABLE} WHERE {PROBE_TABLE} MATCH ?", (expression,))
    return {row[0] for row in rows}.intersection(wanted)
