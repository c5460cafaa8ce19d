"""artifact.append: a new revision holding the old bytes then the appended bytes, checked
against the current revision."""

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


def test_append_is_advertised(call: Caller) -> None:
    """artifact.append is a mutation needing context and a key, in capabilities and schema."""
    operations = {op["operation"]: op for op in call.ok("capabilities", {}, context=None)["result"]["operations"]}
    schema = call.ok("schema", {}, context=None)["result"]
    for name in ("artifact.append",):
        assert (True, True, True) == (operations[name]["mutating"], operations[name]["needs_context"],
                                      operations[name]["requires_idempotency_key"])
        assert name in schema["operation_inputs"] and name in schema["result_types"]
