"""A scratch replay's full-text indexes built at once (two cores or one) answer like row-by-row ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memoree.projections import fts_bulk, sync_projectors
from memoree.projections.beside import ScratchBuild
from memoree.projections.fts import FTS_INDEXES
from tests.conftest import Caller
from tests.projections.test_reindex import populate

QUERIES = {"artifact_fts": "cache", "artifact_trigram_fts": '"cac"', "artifact_chunk_fts": "notes",
           "claim_fts": "wal", "claim_trigram_fts": '"mod"'}


def answers(conn: Any) -> dict[str, list[tuple[Any, ...]]]:
    return {index: conn.execute(f"SELECT rowid, round(bm25({index}), 9) FROM {index} WHERE {index} MATCH ? "
                                "ORDER BY rowid", (query,)).fetchall()
            for index, query in QUERIES.items()}


@pytest.mark.parametrize("cores", [1, 2])
def test_bulk_built_indexes_match_the_live_row_by_row_ones(call: Caller, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch, cores: int) -> None:
    """With one core (serial) or two (trigram on a side thread), every index passes FTS5's
    integrity check and answers each query with the same rows and scores as the live index."""
    populate(call)
    engine = call.service.engine
    monkeypatch.setattr(fts_bulk.os, "cpu_count", lambda: cores)
    with ScratchBuild(tmp_path, sync_projectors(engine.cas)) as build:
        build.replay(engine.log.read())
        build.build_indexes()
        for index in FTS_INDEXES:
            build.conn.execute(f"INSERT INTO {index}({index}, rank) VALUES('integrity-check', 1)")
        assert answers(build.conn) == answers(engine.conn)
        assert all(answers(engine.conn).values())
        assert not (build.folder / "trigram.sqlite3").exists()
