"""A scratch replay's full-text indexes built at once answer like row-by-row ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memoree.projections import sync_projectors
from memoree.projections.beside import ScratchBuild
from memoree.projections.fts import FTS_INDEXES
from tests.conftest import Caller
from tests.projections.test_reindex import populate

QUERIES = {"artifact_fts": "cache", "claim_fts": "wal"}


def answers(conn: Any) -> dict[str, list[tuple[Any, ...]]]:
    return {index: conn.execute(f"SELECT rowid, round(bm25({index}), 9) FROM {index} WHERE {index} MATCH ? "
                                "ORDER BY rowid", (query,)).fetchall()
            for index, query in QUERIES.items()}


def test_bulk_built_indexes_match_the_live_row_by_row_ones(call: Caller, tmp_path: Path) -> None:
    """Every index built at once passes FTS5's integrity check and answers each query with the
    same rows and scores as the live index."""
    populate(call)
    engine = call.service.engine
    with ScratchBuild(tmp_path, sync_projectors(engine.cas)) as build:
        build.replay(engine.log.read())
        build.build_indexes()
        for index in FTS_INDEXES:
            build.conn.execute(f"INSERT INTO {index}({index}, rank) VALUES('integrity-check', 1)")
        assert answers(build.conn) == answers(engine.conn)
        assert all(answers(engine.conn).values())
