"""Chunk membership through the temporary probe answers as a word index over every chunk would."""

from __future__ import annotations

import random
from typing import Any

from memoree.eventlog.db import connect
from memoree.projections.fts import WORD_TOKENIZER
from memoree.queries.chunk_probe import fill_probe, probe_matching
from tests.conftest import Caller

EXPRESSIONS = ('cache', '"write ahead"', 'cach*', 'cache OR kernel', 'title : notes', '{title body} : wal',
               'cafe', 'résumé', 'cache NOT kernel', '"sqlite wal" OR paging')


def populate(call: Caller) -> None:
    """Artifacts whose bodies split into several chunks, with the probe words spread over them."""
    words = ["cache", "kernel", "write ahead", "wal", "paging", "sqlite wal", "café", "Résumé"]
    rng = random.Random(5)
    for i in range(12):
        sections = [f"# Section {s}\n\n" + " ".join(rng.choice(words) + " filler text here" for _ in range(30))
                    for s in range(rng.randint(1, 5))]
        call.ok("artifact.put", {"kind": "note", "title": rng.choice(["cache notes", "notes", "kernel"]),
                                 "content": {"type": "text", "data": "\n\n".join(sections)}}, key=f"k{i}")


def reference(conn: Any) -> dict[str, set[int]]:
    """What a word index over every chunk row answers (as the store's chunk index did)."""
    conn.execute(f"CREATE VIRTUAL TABLE temp.every_chunk USING fts5(title, body, tokenize='{WORD_TOKENIZER}')")
    conn.execute("INSERT INTO temp.every_chunk (rowid, title, body) SELECT chunk_id, title, body FROM artifact_chunk_text")
    found = {e: {row[0] for row in conn.execute("SELECT rowid FROM every_chunk WHERE every_chunk MATCH ?", (e,))}
             for e in EXPRESSIONS}
    conn.execute("DROP TABLE temp.every_chunk")
    return found


def test_any_subset_of_chunks_matches_as_the_full_index_would(call: Caller) -> None:
    """For random subsets of chunk rows (several revisions' titles and bodies), the probe says
    which match each expression exactly as an index over all chunk rows, restricted to the subset."""
    populate(call)
    conn = call.service.engine.conn
    every = [row[0] for row in conn.execute("SELECT chunk_id FROM artifact_chunks")]
    assert len(every) > 30
    expected = reference(conn)
    assert all(expected[e] for e in ("cache", '"write ahead"', "cafe", "title : notes"))
    rng = random.Random(9)
    for _ in range(10):
        subset = rng.sample(every, rng.randint(1, len(every)))
        fill_probe(conn, subset)
        for expression in EXPRESSIONS:
            assert probe_matching(conn, expression, subset) == expected[expression] & set(subset), expression


def test_the_probe_works_on_a_read_only_connection(call: Caller) -> None:
    """A reader's read-only connection, inside its snapshot, can fill and ask the probe."""
    populate(call)
    reader = connect(call.service.engine.db_path, readonly=True)
    try:
        reader.execute("BEGIN")
        ids = [row[0] for row in reader.execute("SELECT chunk_id FROM artifact_chunks")]
        fill_probe(reader, ids)
        assert probe_matching(reader, "cache", ids) == reference(reader)["cache"]
        reader.execute("COMMIT")
    finally:
        reader.close()


def test_a_search_leaves_no_chunk_text_in_the_probe(call: Caller) -> None:
    """After a search has cited its hits, the connection's probe holds no rows."""
    populate(call)
    hits = call.ok("search", {"query": "cache"})["result"]["hits"]
    assert hits and all(hit["citation"] for hit in hits)
    conn = call.service.engine.conn
    assert conn.execute("SELECT count(*) FROM temp.chunk_probe").fetchone()[0] == 0
