"""Dropping every projection and replaying the log reproduces identical logical rows."""

from __future__ import annotations

from typing import Any

from memoree.service.engine import Engine
from memoree.projections.base import owned_tables
from tests.conftest import CTX, Caller


def snapshot(conn: Any, tables: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    return {table: conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall() for table in tables}


def populate(call: Caller) -> None:
    art = call.put_text("The cache layer uses SQLite with WAL.")
    call.ok("artifact.revise", {"artifact_id": art["artifact_id"], "if_revision": art["revision_id"],
                                "content": {"type": "text", "data": "v2 of the cache notes"}}, key="rev")
    claim = call.ok("claim.assert", {"claim_type": "decision", "statement": "Use WAL", "confidence": 0.5,
                                     "evidence": [{"artifact_id": art["artifact_id"], "revision_id": art["revision_id"],
                                                   "start_byte": 4, "end_byte": 9}],
                                     "valid_from": "2026-01-01T00:00:00Z"}, key="c")["result"]
    call.ok("claim.revise", {"claim_id": claim["claim_id"], "if_revision": claim["revision_id"], "statement": "Use WAL mode"}, key="cr")
    other = call.ok("claim.assert", {"claim_type": "fact", "statement": "temp"}, key="c2", context={**CTX, "task_id": "tsk_x"})["result"]
    call.ok("claim.retract", {"claim_id": other["claim_id"], "reason": "wrong"}, key="x", context={**CTX, "task_id": "tsk_x"})
    call.ok("artifact.forget", {"artifact_id": call.put_text("gone")["artifact_id"], "reason": "obsolete"}, key="f")
    call.service.engine.catch_up_vectors()  # rows compared with a replay's: the vectors level with the log


class TestReindex:
    def test_full_reindex_reproduces_every_projection_row(self, call: Caller) -> None:
        """Rebuilding all projections from the log yields the same rows, ids and times."""
        populate(call)
        engine = call.service.engine
        tables = [t for p in engine.projectors for t in owned_tables(p)]
        before = snapshot(engine.conn, tables)
        with engine.log.transaction() as conn:
            for table in tables:
                conn.execute(f"DELETE FROM {table}")
        assert all(not rows for rows in snapshot(engine.conn, tables).values())
        report = engine.reindex()
        assert engine.head() == report["events_replayed"]
        assert before == snapshot(engine.conn, tables)

    def test_replaying_an_identical_request_after_reindex_still_replays(self, call: Caller) -> None:
        """Idempotency survives a rebuild: the same key and request returns the original commit."""
        body = {"kind": "k", "title": "t", "content": {"type": "text", "data": "x"}}
        first = call.ok("artifact.put", body, key="stable")
        call.service.engine.reindex(["entities"])
        again = call.ok("artifact.put", body, key="stable")
        assert (first["commit_seq"], False) == (again["commit_seq"], again["result"]["created"])

    def test_a_version_bump_rebuilds_on_open(self, call: Caller, tmp_path: Any) -> None:
        """Opening a store whose projector version changed rebuilds that projection."""
        populate(call)
        engine = call.service.engine
        tables = [t for p in engine.projectors for t in owned_tables(p)]
        before = snapshot(engine.conn, tables)
        engine.conn.execute("UPDATE projector_checkpoints SET version = 0 WHERE name = 'entities'")
        engine.conn.execute("DELETE FROM claims")
        call.service.close()
        reopened = Engine(call.service.data_dir)
        assert before == snapshot(reopened.conn, tables)
        reopened.close()

    def test_a_checkpoint_behind_the_log_catches_up_on_open(self, call: Caller) -> None:
        """Projections that lag the log (e.g. after a log import) are caught up when the store opens."""
        populate(call)
        engine = call.service.engine
        head = engine.head()
        call.service.close()
        reopened = Engine(call.service.data_dir)
        assert {head} == {pos for _, pos in reopened.conn.execute("SELECT name, position FROM projector_checkpoints")}
        reopened.close()

    def test_a_store_of_entities_version_two_is_rebuilt_keyed_by_id(self, call: Caller) -> None:
        """Entity tables of version 2 (rowid tables beside an index of their ids) are rebuilt on
        open into tables keyed by id alone, with the same rows."""
        from memoree.projections.entities import EntitiesProjector

        populate(call)
        engine = call.service.engine
        tables = owned_tables(EntitiesProjector())
        before = snapshot(engine.conn, tables)
        for table in tables:
            engine.conn.execute(f"CREATE TABLE old_{table} AS SELECT * FROM {table}")
            engine.conn.execute(f"DROP TABLE {table}")
            engine.conn.execute(f"ALTER TABLE old_{table} RENAME TO {table}")
        engine.conn.execute("UPDATE projector_checkpoints SET version = 2 WHERE name = 'entities'")
        call.service.close()
        reopened = Engine(call.service.data_dir)
        try:
            ddl = dict(reopened.conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
            assert all("WITHOUT ROWID" in ddl[table] for table in tables)
            assert before == snapshot(reopened.conn, tables)
        finally:
            reopened.close()
