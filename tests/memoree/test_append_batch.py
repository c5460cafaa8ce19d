"""artifact.append (old bytes + appended bytes, checked against the current revision) and batch
(several mutations, one transaction, each its own event, all or nothing)."""

from __future__ import annotations

import base64

from tests.conftest import Caller

OTHER = {"workspace_id": "wsp_test", "project_id": "prj_other"}


def text_of(call: Caller, artifact_id: str, revision_id: str | None = None) -> str:
    payload = {"artifact_id": artifact_id, **({"revision_id": revision_id} if revision_id else {})}
    return call.ok("artifact.get", payload, context=None)["result"]["content"]["data"]


class TestAppend:
    def test_a_new_revision_holds_the_old_bytes_then_the_new(self, call: Caller) -> None:
        """Appending makes revision 2 = revision 1's bytes + the appended bytes; revision 1 is unchanged."""
        first = call.ok("artifact.put", {"kind": "log", "title": "journal", "provenance": {"from": "test"},
                                         "content": {"type": "text", "data": "day 1\n"}}, key="p")["result"]
        appended = call.ok("artifact.append", {"artifact_id": first["artifact_id"], "if_revision": first["revision_id"],
                                               "content": {"type": "text", "data": "day 2 — ok\n"}}, key="a")
        result = appended["result"]
        assert (2, "journal", {"from": "test"}, len("day 1\nday 2 — ok\n".encode())) == (
            result["revision_number"], result["title"], result["provenance"], result["size_bytes"])
        assert "day 1\nday 2 — ok\n" == text_of(call, first["artifact_id"])
        assert "day 1\n" == text_of(call, first["artifact_id"], first["revision_id"])
        assert appended["commit_seq"] == call.head()

    def test_a_stale_revision_is_a_conflict_and_a_retry_replays(self, call: Caller) -> None:
        """A retry of an applied append replays it; a new append on the old revision is REVISION_CONFLICT."""
        first = call.put_text("a")
        payload = {"artifact_id": first["artifact_id"], "if_revision": first["revision_id"],
                   "content": {"type": "base64", "data": base64.b64encode(b"b").decode()}}
        done = call.ok("artifact.append", payload, key="a1")
        again = call.ok("artifact.append", payload, key="a1")
        assert (done["result"]["revision_id"], False, done["commit_seq"]) == (
            again["result"]["revision_id"], again["result"]["created"], again["commit_seq"])
        stale = call("artifact.append", {**payload, "content": {"type": "text", "data": "c"}}, key="a2")
        assert ("REVISION_CONFLICT", done["result"]["revision_id"]) == (
            stale["error"]["code"], stale["error"]["details"]["current_revision"])
        assert "ab" == text_of(call, first["artifact_id"])

    def test_append_checks_scope_and_lifecycle(self, call: Caller) -> None:
        """Appending from another project is SCOPE_VIOLATION; to a forgotten artifact INVALID_REQUEST; empty content too."""
        first = call.put_text("a")
        payload = {"artifact_id": first["artifact_id"], "if_revision": first["revision_id"],
                   "content": {"type": "text", "data": "more"}}
        assert "SCOPE_VIOLATION" == call("artifact.append", payload, key="x", context=OTHER)["error"]["code"]
        empty = call("artifact.append", {**payload, "content": {"type": "text", "data": ""}}, key="e")
        assert "INVALID_REQUEST" == empty["error"]["code"]
        call.ok("artifact.forget", {"artifact_id": first["artifact_id"], "reason": "done"}, key="f")
        forgotten = call("artifact.append", payload, key="y")
        assert ("INVALID_REQUEST", True) == (forgotten["error"]["code"], "forgotten" in forgotten["error"]["message"])


def put_item(title: str, text: str) -> dict:
    return {"op": "artifact.put", "input": {"kind": "note", "title": title, "content": {"type": "text", "data": text}}}


class TestBatch:
    def test_each_item_is_its_own_event_in_one_request(self, call: Caller) -> None:
        """Three items: three events, results in order, the envelope's commit_seq the last one's."""
        before = call.head()
        target = call.put_text("cited text")
        claim = {"op": "claim.assert", "input": {"claim_type": "fact", "statement": "cited",
                                                 "evidence": [{"artifact_id": target["artifact_id"],
                                                               "revision_id": target["revision_id"],
                                                               "start_byte": 0, "end_byte": 5}]}}
        envelope = call.ok("batch", {"items": [put_item("a", "alpha"), claim, put_item("b", "beta")]}, key="b")
        results = envelope["result"]["results"]
        assert ["artifact.put", "claim.assert", "artifact.put"] == [r["op"] for r in results]
        assert [before + 2, before + 3, before + 4] == [r["commit_seq"] for r in results]
        assert (before + 4, before + 4, True) == (envelope["commit_seq"], call.head(), envelope["result"]["created"])
        assert "cited" == results[1]["result"]["statement"]

    def test_a_failing_item_rolls_back_the_whole_batch(self, call: Caller) -> None:
        """The second item cites a missing artifact: NOT_FOUND naming item 1, and the first put is not kept."""
        before = call.head()
        bad = {"op": "claim.assert", "input": {"claim_type": "fact", "statement": "x",
                                               "evidence": [{"artifact_id": "art_missing", "revision_id": "arev_missing"}]}}
        failed = call("batch", {"items": [put_item("a", "alpha"), bad]}, key="b")
        assert ("NOT_FOUND", 1, "claim.assert") == (failed["error"]["code"], failed["error"]["details"]["item"],
                                                    failed["error"]["details"]["op"])
        assert before == call.head()
        listed = call.ok("artifact.list", {})["result"]["artifacts"]
        assert [] == listed

    def test_retry_replays_and_a_changed_batch_conflicts(self, call: Caller) -> None:
        """The same batch under the same key replays every item; changed items under it are IDEMPOTENCY_CONFLICT."""
        items = [put_item("a", "alpha"), put_item("b", "beta")]
        first = call.ok("batch", {"items": items}, key="b")
        head = call.head()
        again = call.ok("batch", {"items": items}, key="b")
        assert (head, first["commit_seq"], False) == (call.head(), again["commit_seq"], again["result"]["created"])
        changed = call("batch", {"items": [items[0], put_item("b", "gamma")]}, key="b")
        assert ("IDEMPOTENCY_CONFLICT", 1) == (changed["error"]["code"], changed["error"]["details"]["item"])

    def test_bad_batches_are_invalid(self, call: Caller) -> None:
        """An empty batch, an op that cannot be batched and a missing key are INVALID_REQUEST."""
        assert "INVALID_REQUEST" == call("batch", {"items": []}, key="b")["error"]["code"]
        assert "INVALID_REQUEST" == call("batch", {"items": [{"op": "search", "input": {}}]}, key="b")["error"]["code"]
        assert "INVALID_REQUEST" == call("batch", {"items": [put_item("a", "x")]})["error"]["code"]
        assert "INVALID_REQUEST" == call("batch", {"items": [put_item("a", "x")] * 101}, key="b")["error"]["code"]


def test_new_mutations_are_advertised(call: Caller) -> None:
    """artifact.append and batch are mutations needing context and a key, in capabilities and schema."""
    operations = {op["operation"]: op for op in call.ok("capabilities", {}, context=None)["result"]["operations"]}
    schema = call.ok("schema", {}, context=None)["result"]
    for name in ("artifact.append", "batch"):
        assert (True, True, True) == (operations[name]["mutating"], operations[name]["needs_context"],
                                      operations[name]["requires_idempotency_key"])
        assert name in schema["operation_inputs"] and name in schema["result_types"]
