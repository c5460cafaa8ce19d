"""The idempotency projection answers every keyed mutation with the document it answered first."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec

from memoree.projections.idempotency import (
    EVENT_RESULTS,
    IdempotencyProjector,
    RESULT_BUILDERS,
    stored_result,
)
from memoree.service.engine import Engine
from tests.conftest import CTX, Caller

PUTS = [
    ({"kind": "note", "title": "plain", "content": {"type": "text", "data": "hello"}}, CTX),
    ({"kind": "spec", "title": "Überblick — ünïcode", "media_type": "text/markdown",
      "content": {"type": "text", "data": "# Titel\n\nmit Umlauten"},
      "provenance": {"zeta": 1, "alpha": {"y": [1, 2.5, None], "b": "x"}, "mid": True},
      "actor": "agent-7"}, {**CTX, "task_id": "tsk_a", "component": "parser"}),
    ({"kind": "blob", "title": "bytes", "media_type": "application/octet-stream",
      "content": {"type": "base64", "data": base64.b64encode(bytes(range(256))).decode()}},
     {**CTX, "component": "io"}),
]


def keyed_events(engine: Engine, event_type: str) -> list[Any]:
    return [e for e in engine.log.read() if e.type == event_type and e.idempotency_key]


class TestResults:
    def test_a_new_artifacts_result_built_from_its_event_is_the_projections_record(self, call: Caller) -> None:
        """``artifact.put``'s document, built from the event alone, is byte for byte what the
        entities projection reads back for the new artifact (provenance keys sorted, owner
        context, times and positions), for text, unicode, nested provenance and binary puts."""
        answered = [call.ok("artifact.put", body, key=f"p{i}", context=context)["result"]
                    for i, (body, context) in enumerate(PUTS)]
        engine = call.service.engine
        events = keyed_events(engine, "artifact.created")
        assert len(events) == len(PUTS)
        encode = msgspec.json.Encoder().encode
        for event, live in zip(events, answered):
            from_rows = encode(RESULT_BUILDERS["artifact.created"](engine.conn, event))
            assert encode(EVENT_RESULTS["artifact.created"](event)) == from_rows
            # the live reply was built from the request's own payload: same keys, same order
            assert json.dumps(live) == json.dumps(json.loads(from_rows))

    def test_a_replay_answers_the_first_document_with_created_false(self, call: Caller) -> None:
        """Repeating a put, a revise and a forget returns the first reply's result (``created``
        false) and commit, whether the document was stored or built from the event."""
        body, context = PUTS[1]
        first_put = call.ok("artifact.put", body, key="put", context=context)
        revise = {"artifact_id": first_put["result"]["artifact_id"], "if_revision": first_put["result"]["revision_id"],
                  "content": {"type": "text", "data": "second"}}
        first_revise = call.ok("artifact.revise", revise, key="rev", context=context)
        forget = {"artifact_id": first_put["result"]["artifact_id"], "reason": "done"}
        first_forget = call.ok("artifact.forget", forget, key="fgt", context=context)
        for op, payload, key, first in (("artifact.put", body, "put", first_put),
                                        ("artifact.revise", revise, "rev", first_revise),
                                        ("artifact.forget", forget, "fgt", first_forget)):
            again = call.ok(op, payload, key=key, context=context)
            assert again["commit_seq"] == first["commit_seq"]
            assert again["result"] == {**first["result"], "created": False}

    def test_only_results_that_need_the_projections_are_stored(self, call: Caller) -> None:
        """A put stores no row (its event is its result); a revise stores its document, keyed by
        the event's position only, and the key finds it through the log."""
        put = call.put_text("one", key="k1")
        call.ok("artifact.revise", {"artifact_id": put["artifact_id"], "if_revision": put["revision_id"],
                                    "content": {"type": "text", "data": "two"}}, key="k2")
        conn = call.service.engine.conn
        rows = conn.execute("SELECT commit_seq FROM idempotency_results").fetchall()
        revised = keyed_events(call.service.engine, "artifact.revised")
        assert rows == [(revised[0].commit_seq,)]
        assert stored_result(conn, "never-used") is None
        digest, operation, commit_seq, _ = stored_result(conn, revised[0].idempotency_key)
        assert (digest, operation, commit_seq) == (revised[0].request_digest, "artifact.revise", revised[0].commit_seq)

    def test_a_store_of_version_two_rebuilds_and_replays_the_same_bytes(self, call: Caller) -> None:
        """A store whose idempotency rows are of version 2 (key, digest and operation beside each
        document) is rebuilt on open into version 3, and every earlier key replays the same bytes."""
        for i, (body, context) in enumerate(PUTS):
            call.ok("artifact.put", body, key=f"p{i}", context=context)
        put = call.put_text("to revise", key="base")
        call.ok("artifact.revise", {"artifact_id": put["artifact_id"], "if_revision": put["revision_id"],
                                    "content": {"type": "text", "data": "revised"}}, key="rev")
        engine = call.service.engine
        keys = [e.idempotency_key for e in engine.log.read() if e.idempotency_key]
        before = {key: stored_result(engine.conn, key) for key in keys}
        engine.conn.execute("DROP TABLE idempotency_results")
        engine.conn.execute("CREATE TABLE idempotency_results (key TEXT NOT NULL UNIQUE, request_digest TEXT "
                            "NOT NULL, operation TEXT NOT NULL, commit_seq INTEGER PRIMARY KEY, "
                            "result_json BLOB NOT NULL) STRICT")
        engine.conn.execute("UPDATE projector_checkpoints SET version = 2 WHERE name = 'idempotency'")
        call.service.close()
        reopened = Engine(call.service.data_dir)
        try:
            columns = [row[1] for row in reopened.conn.execute("PRAGMA table_info(idempotency_results)")]
            version = reopened.conn.execute(
                "SELECT version FROM projector_checkpoints WHERE name = 'idempotency'").fetchone()[0]
            assert (columns, version) == (["commit_seq", "result_json"], IdempotencyProjector.version)
            assert {key: stored_result(reopened.conn, key) for key in keys} == before
        finally:
            reopened.close()
