"""Building a scratch replay's full-text indexes at once, on two cores when there are two.

The trigram indexes are about as much work as all the word indexes together, and SQLite lets only
one connection write a database file at a time. So the trigram indexes are built on a second
thread into a side file holding a copy of their content tables, while this connection builds the
word indexes; the side file's index pages (FTS5 shadow tables) are then copied in. The caller must
reopen its connection afterwards: FTS5 caches an index's structure per connection.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from memoree.eventlog.db import create_private, features, open_throwaway

from .fts import FTS_INDEXES, trigram_tokenizer

__all__ = ["BULK_HASH_BYTES", "build_text_indexes", "rebuild_index"]

BULK_HASH_BYTES = 64 * 1024 * 1024
DEFAULT_HASH_BYTES = 1024 * 1024  # FTS5's own default
# index -> (content table, indexed columns), exactly as fts_schema() declares them.
SIDE_INDEXES = {
    "artifact_trigram_fts": ("artifact_search_text", ("title", "body")),
    "claim_trigram_fts": ("claim_search_text", ("statement",)),
}
INDEX_PAGES = ("data", "idx", "docsize")


def rebuild_index(conn: Any, index: str) -> None:
    """Index every content row at once. A term buffer bigger than the 1 MiB default writes fewer,
    larger segments and so merges far less (about half the build time); the default returns after."""
    conn.execute(f"INSERT INTO {index}({index}, rank) VALUES('hashsize', ?)", (BULK_HASH_BYTES,))
    conn.execute(f"INSERT INTO {index}({index}) VALUES('rebuild')")
    conn.execute(f"INSERT INTO {index}({index}, rank) VALUES('hashsize', ?)", (DEFAULT_HASH_BYTES,))


def build_text_indexes(conn: Any, scratch_path: Path) -> None:
    """Build every FTS5 index of the scratch database behind ``conn`` (content tables committed)."""
    if (os.cpu_count() or 1) < 2:
        conn.execute("BEGIN")
        for index in FTS_INDEXES:
            rebuild_index(conn, index)
        conn.execute("COMMIT")
        return
    side = scratch_path.with_name("trigram.sqlite3")
    _prepare_side(conn, side)
    failures: list[BaseException] = []
    worker = threading.Thread(target=_build_side, args=(side, failures), name="memoree-trigram-build")
    worker.start()
    try:
        conn.execute("BEGIN")
        for index in FTS_INDEXES:
            if index not in SIDE_INDEXES:
                rebuild_index(conn, index)
        conn.execute("COMMIT")
    finally:
        worker.join()
    if failures:
        raise failures[0]
    _merge_side(conn, side)
    side.unlink()


def _prepare_side(conn: Any, side: Path) -> None:
    create_private(side)
    conn.execute("ATTACH DATABASE ? AS side", (os.fspath(side),))
    try:
        conn.execute("BEGIN")
        for index, (content, columns) in SIDE_INDEXES.items():
            names = ", ".join(columns)
            conn.execute(f"CREATE TABLE side.{content} (doc_id INTEGER PRIMARY KEY, "
                         + ", ".join(f"{c} TEXT NOT NULL" for c in columns) + ")")
            conn.execute(f"INSERT INTO side.{content} SELECT doc_id, {names} FROM main.{content}")
            conn.execute(f"CREATE VIRTUAL TABLE side.{index} USING fts5({names}, content='{content}', "
                         f"content_rowid='doc_id', tokenize='{trigram_tokenizer()}')")
            if features().secure_delete:
                conn.execute(f"INSERT INTO side.{index}({index}, rank) VALUES('secure-delete', 1)")
        conn.execute("COMMIT")
    finally:
        conn.execute("DETACH DATABASE side")


def _build_side(side: Path, failures: list[BaseException]) -> None:
    try:
        conn = open_throwaway(side)
        try:
            conn.execute("BEGIN")
            for index in SIDE_INDEXES:
                rebuild_index(conn, index)
            conn.execute("COMMIT")
        finally:
            conn.close()
    except BaseException as exc:  # handed to the main thread, which raises it
        failures.append(exc)


def _merge_side(conn: Any, side: Path) -> None:
    conn.execute("ATTACH DATABASE ? AS side", (os.fspath(side),))
    try:
        conn.execute("BEGIN")
        for index in SIDE_INDEXES:
            for suffix in INDEX_PAGES:
                conn.execute(f"DELETE FROM main.{index}_{suffix}")
                conn.execute(f"INSERT INTO main.{index}_{suffix} SELECT * FROM side.{index}_{suffix}")
        conn.execute("COMMIT")
    finally:
        conn.execute("DETACH DATABASE side")
