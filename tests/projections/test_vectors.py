"""The vectors projection: passage windows, read-your-writes, byte-identical replay, purge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memoree.projections import embedding
from memoree.projections.vectors import MODEL_VERSION, PASSAGE_BYTES, passage_spans
from memoree.service.service import Service
from tests.conftest import Caller

TABLES = ("artifact_vectors", "claim_vectors", "vector_state")


def rows(conn: Any) -> dict[str, list[tuple[Any, ...]]]:
    return {table: conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall() for table in TABLES}


def populate(call: Caller) -> dict[str, Any]:
    made = call.put_text("The weekly sync moved to Tuesday.\n\nDeploys leave on Friday afternoons.\n" * 3,
                         title="team rhythm")
    call.ok("artifact.revise", {"artifact_id": made["artifact_id"], "if_revision": made["revision_id"],
                                "content": {"type": "text", "data": "Deploys now leave on Thursdays."}}, key="rev")
    call.ok("claim.assert", {"claim_type": "decision", "statement": "Deploys happen on Thursdays",
                             "evidence": []}, key="c1")
    return made


class TestPassages:
    """Passages are whole lines packed into bounded windows with exact byte offsets."""

    def test_windows_are_bounded_exact_and_cover_every_non_blank_line(self) -> None:
        """Every non-blank line lies inside one window; windows never exceed the limit."""
        text = ("short line\n\n" + "é" * 700 + "\n" + "word " * 300 + "\nlast").encode("utf-8")
        spans = passage_spans(text)
        assert all(0 < end - start <= PASSAGE_BYTES for start, end in spans)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        for start, end in spans:
            text[start:end].decode("utf-8")  # never splits a character
        covered = b"".join(text[s:e] for s, e in spans)
        assert covered.replace(b"\n", b"") == text.replace(b"\n", b"")


class TestProjection:
    """One vector per artifact title and passage and per claim revision, written with the mutation."""

    def test_a_write_has_its_vectors_at_its_own_commit(self, call: Caller) -> None:
        """The put's transaction already holds the title vector and one per passage."""
        made = call.put_text("first line\nsecond line", title="two lines")
        found = call.service.engine.conn.execute(
            "SELECT start_byte, end_byte, length(vector) FROM artifact_vectors WHERE revision_id = ? "
            "ORDER BY vec_id", (made["revision_id"],)).fetchall()
        assert [(None, None, embedding.DIMENSIONS), (0, 22, embedding.DIMENSIONS)] == found

    def test_replay_rebuilds_the_same_bytes(self, call: Caller) -> None:
        """Reindexing the vectors projection (and everything) reproduces every row byte for byte."""
        populate(call)
        engine = call.service.engine
        before = rows(engine.conn)
        assert before["artifact_vectors"] and before["claim_vectors"]
        engine.reindex(["vectors"])
        assert before == rows(engine.conn)
        engine.reindex()
        assert before == rows(engine.conn)

    def test_a_purged_artifact_keeps_no_passage_vectors(self, call: Caller) -> None:
        """Purge removes the vectors of every revision's text, also after a replay; titles stay."""
        made = populate(call)
        call.ok("artifact.purge", {"artifact_id": made["artifact_id"], "reason": "erasure"}, key="purge")
        engine = call.service.engine

        def left() -> list[tuple[Any, ...]]:
            return engine.conn.execute("SELECT start_byte FROM artifact_vectors WHERE artifact_id = ?",
                                       (made["artifact_id"],)).fetchall()

        assert [(None,), (None,)] == left()
        before = rows(engine.conn)
        engine.reindex()
        assert [(None,), (None,)] == left() and before == rows(engine.conn)

    def test_a_store_opened_without_the_model_stays_empty_and_is_rebuilt_once_it_is_there(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without the model the projection writes nothing (version 0); with it, the next open rebuilds it."""
        monkeypatch.setenv(embedding.DISABLE_ENV, "off")
        embedding._probe.cache_clear()
        try:
            service = Service(tmp_path / "data")
            populate(Caller(service))
            assert not any(rows(service.engine.conn)[t] for t in ("artifact_vectors", "claim_vectors"))
            service.close()
        finally:
            monkeypatch.delenv(embedding.DISABLE_ENV)
            embedding._probe.cache_clear()
        service = Service(tmp_path / "data")
        try:
            conn = service.engine.conn
            assert conn.execute("SELECT count(*) FROM claim_vectors").fetchone()[0] == 1
            assert conn.execute("SELECT version FROM projector_checkpoints WHERE name = 'vectors'").fetchone()[0] == MODEL_VERSION
        finally:
            service.close()



def id_free_rows(conn: Any) -> dict[str, list[tuple[Any, ...]]]:
    """The vector rows without the random revision and artifact ids (two stores never share those)."""
    return {"artifact_vectors": conn.execute("SELECT vec_id, doc_id, start_byte, end_byte, vector "
                                             "FROM artifact_vectors ORDER BY 1").fetchall(),
            "claim_vectors": conn.execute("SELECT doc_id, vector FROM claim_vectors ORDER BY 1").fetchall(),
            "vector_state": conn.execute("SELECT * FROM vector_state ORDER BY 1").fetchall()}


class TestGroupedEmbedding:
    """Engine.group embeds a group's texts once, at its end, leaving the rows one-by-one writes leave."""

    def test_a_group_leaves_the_vectors_one_by_one_writes_would(self, call: Caller, tmp_path: Path) -> None:
        """Puts, a revision, a claim, a unit rolled back and a purge inside one group give the same
        vector rows as the surviving requests written one by one."""
        def write(caller: Caller, engine: Any, grouped: bool) -> None:
            populate(caller)
            doomed = caller.put_text("A passage about the quokka that a purge erases.", key="doomed")
            if grouped:
                try:
                    with engine.log.transaction():
                        caller.put_text("This unit is rolled back to its savepoint.", key="rolled")
                        raise RuntimeError("the unit fails after writing")
                except RuntimeError:
                    pass
            caller.ok("artifact.purge", {"artifact_id": doomed["artifact_id"], "reason": "erasure"}, key="purge")
            caller.put_text("A later note about bilbies.", key="later")

        single = Caller(Service(tmp_path / "one-by-one"))
        write(single, single.service.engine, grouped=False)
        engine = call.service.engine
        with engine.group():
            write(call, engine, grouped=True)
        grouped = id_free_rows(engine.conn)
        assert grouped == id_free_rows(single.service.engine.conn)
        assert grouped["claim_vectors"] and len(grouped["artifact_vectors"]) > 4
        before = rows(engine.conn)
        engine.reindex(["vectors"])
        assert before == rows(engine.conn)
        single.service.close()

    def test_a_failed_group_embeds_nothing(self, call: Caller) -> None:
        """When the group's block raises, no vector row is left behind."""
        engine = call.service.engine
        try:
            with engine.group():
                call.put_text("never committed echidna")
                raise RuntimeError("the group fails")
        except RuntimeError:
            pass
        assert not any(rows(engine.conn)[table] for table in ("artifact_vectors", "claim_vectors"))
