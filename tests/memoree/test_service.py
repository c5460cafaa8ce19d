"""The protocol surface behaves as spec/memoree-protocol.md says, end to end on a real store."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from memoree import limits
from memoree.eventlog.store import first_chain_break
from tests.conftest import CTX, Caller

OTHER = {"workspace_id": "wsp_test", "project_id": "prj_other"}


def claim_input(artifact: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"claim_type": "fact", "statement": "The sky is blue",
            "evidence": [{"artifact_id": artifact["artifact_id"], "revision_id": artifact["revision_id"],
                          "start_byte": 0, "end_byte": 3}], **extra}


class TestArtifacts:
    def test_put_then_get_returns_the_same_bytes(self, call: Caller) -> None:
        """A stored text artifact reads back byte for byte with its metadata."""
        put = call.put_text("hello world", title="greeting")
        got = call.ok("artifact.get", {"artifact_id": put["artifact_id"]}, context=None)["result"]
        assert {"type": "text", "data": "hello world"} == got["content"]
        assert (put["revision_id"], "greeting", 11, "active") == (
            got["revision_id"], got["title"], got["size_bytes"], got["status"])
        assert "context" not in call("artifact.get", {"artifact_id": put["artifact_id"]}, context=None)

    def test_binary_and_non_text_media_types_come_back_as_base64(self, call: Caller) -> None:
        """Bytes that are not text/* UTF-8 are returned base64-encoded."""
        data = bytes(range(256)) * 100
        put = call.ok("artifact.put", {"kind": "blob", "title": "bin", "media_type": "application/octet-stream",
                                       "content": {"type": "base64", "data": base64.b64encode(data).decode()}},
                      key="bin")["result"]
        got = call.ok("artifact.get", {"artifact_id": put["artifact_id"]})["result"]
        assert "base64" == got["content"]["type"]
        assert data == base64.b64decode(got["content"]["data"])

    def test_mutation_ack_omits_content_and_reports_created(self, call: Caller) -> None:
        """artifact.put answers metadata without content, created:true and the commit_seq."""
        envelope = call.ok("artifact.put", {"kind": "k", "title": "t", "content": {"type": "text", "data": "x"}}, key="a")
        assert "content" not in envelope["result"]
        assert (True, 1, 1) == (envelope["result"]["created"], envelope["commit_seq"], envelope["result"]["commit_seq"])

    def test_revise_and_exact_revision_reads(self, call: Caller) -> None:
        """Revising adds revision 2; the old revision stays readable by its id."""
        put = call.put_text("v1")
        rev = call.ok("artifact.revise", {"artifact_id": put["artifact_id"], "if_revision": put["revision_id"],
                                          "content": {"type": "text", "data": "v2"}}, key="rev")["result"]
        assert (2, put["title"]) == (rev["revision_number"], rev["title"])
        old = call.ok("artifact.get", {"artifact_id": put["artifact_id"], "revision_id": put["revision_id"]})["result"]
        assert "v1" == old["content"]["data"]
        history = call.ok("artifact.history", {"artifact_id": put["artifact_id"]})["result"]
        assert [2, 1] == [r["revision_number"] for r in history["revisions"]]

    def test_stale_if_revision_is_revision_conflict(self, call: Caller) -> None:
        """A revise from an old revision fails with both revision ids and writes nothing."""
        put = call.put_text("v1")
        body = {"artifact_id": put["artifact_id"], "if_revision": put["revision_id"], "content": {"type": "text", "data": "v2"}}
        call.ok("artifact.revise", body, key="r1")
        head = call.head()
        stale = call("artifact.revise", {**body, "content": {"type": "text", "data": "v3"}}, key="r2")
        assert "REVISION_CONFLICT" == stale["error"]["code"]
        assert put["revision_id"] == stale["error"]["details"]["requested_revision"]
        assert head == call.head()

    def test_retry_of_an_applied_revise_replays_instead_of_conflicting(self, call: Caller) -> None:
        """Re-sending an applied revise with its key returns the original success."""
        put = call.put_text("v1")
        body = {"artifact_id": put["artifact_id"], "if_revision": put["revision_id"], "content": {"type": "text", "data": "v2"}}
        first = call.ok("artifact.revise", body, key="r1")
        again = call.ok("artifact.revise", body, key="r1")
        assert (first["commit_seq"], False) == (again["commit_seq"], again["result"]["created"])

    def test_forget_requires_reason_and_keeps_exact_reads(self, call: Caller) -> None:
        """Forget needs a reason, tombstones the artifact, and the bytes stay readable."""
        put = call.put_text("secret-ish")
        assert "INVALID_REQUEST" == call("artifact.forget", {"artifact_id": put["artifact_id"], "reason": " "}, key="f0")["error"]["code"]
        forgotten = call.ok("artifact.forget", {"artifact_id": put["artifact_id"], "reason": "obsolete"}, key="f1")["result"]
        assert ("forgotten", False) == (forgotten["status"], forgotten["physically_erased"])
        assert forgotten["retention_notice"]
        got = call.ok("artifact.get", {"artifact_id": put["artifact_id"]})["result"]
        assert ("forgotten", "obsolete", "secret-ish") == (got["status"], got["forgotten_reason"], got["content"]["data"])
        again = call("artifact.forget", {"artifact_id": put["artifact_id"], "reason": "again"}, key="f2")
        assert "INVALID_REQUEST" == again["error"]["code"]

    def test_unknown_artifact_is_not_found(self, call: Caller) -> None:
        """Reading or revising an unknown id is NOT_FOUND with exit code 3."""
        envelope, code = call.raw({"request_id": "r", "op": "artifact.get", "input": {"artifact_id": "art_missing"}})
        assert ("NOT_FOUND", 3) == (envelope["error"]["code"], code)


class TestIdempotency:
    def test_identical_replay_returns_original_result_and_commit_seq(self, call: Caller) -> None:
        """The same key and request returns the first result, created:false, and writes nothing."""
        body = {"kind": "k", "title": "t", "content": {"type": "text", "data": "x"}}
        first = call.ok("artifact.put", body, key="same")
        head = call.head()
        again = call.ok("artifact.put", body, key="same")
        assert first["commit_seq"] == again["commit_seq"]
        assert first["result"]["artifact_id"] == again["result"]["artifact_id"]
        assert (True, False) == (first["result"]["created"], again["result"]["created"])
        assert head == call.head()

    def test_same_key_different_request_is_idempotency_conflict(self, call: Caller) -> None:
        """Reusing a key for another request is refused, naming the namespaced key."""
        call.ok("artifact.put", {"kind": "k", "title": "t", "content": {"type": "text", "data": "x"}}, key="same")
        envelope, code = call.raw({"request_id": "r", "op": "artifact.put", "idempotency_key": "same", "context": CTX,
                                   "input": {"kind": "k", "title": "t", "content": {"type": "text", "data": "y"}}})
        assert ("IDEMPOTENCY_CONFLICT", 4) == (envelope["error"]["code"], code)
        assert envelope["error"]["details"]["idempotency_key"].endswith(":same")

    def test_defaults_sent_explicitly_fingerprint_differently(self, call: Caller) -> None:
        """The fingerprint covers the raw input, so spelling out a default is another request."""
        call.ok("artifact.put", {"kind": "k", "title": "t", "content": {"type": "text", "data": "x"}}, key="k1")
        explicit = call("artifact.put", {"kind": "k", "title": "t", "content": {"type": "text", "data": "x"},
                                         "media_type": "text/plain; charset=utf-8"}, key="k1")
        assert "IDEMPOTENCY_CONFLICT" == explicit["error"]["code"]

    def test_keys_are_namespaced_by_project(self, call: Caller) -> None:
        """The same caller key in another project is a different logical mutation."""
        body = {"kind": "k", "title": "t", "content": {"type": "text", "data": "x"}}
        first = call.ok("artifact.put", body, key="k")
        other = call.ok("artifact.put", body, key="k", context=OTHER)
        assert (1, 2) == (first["commit_seq"], other["commit_seq"])

    def test_retry_after_failure_executes(self, call: Caller) -> None:
        """A failed mutation records nothing, so retrying its key runs it for real."""
        put = call.put_text("v1")
        bad = {"artifact_id": put["artifact_id"], "if_revision": "arev_wrong", "content": {"type": "text", "data": "v2"}}
        assert "REVISION_CONFLICT" == call("artifact.revise", bad, key="retry")["error"]["code"]
        good = call.ok("artifact.revise", {**bad, "if_revision": put["revision_id"]}, key="retry")
        assert good["result"]["created"]


class TestScope:
    def test_writes_outside_the_ambient_project_are_scope_violations(self, call: Caller) -> None:
        """Revising, forgetting or retracting another project's entity fails and writes nothing."""
        put = call.put_text("mine")
        claim = call.ok("claim.assert", claim_input(put), key="c")["result"]
        head = call.head()
        attempts = [
            ("artifact.revise", {"artifact_id": put["artifact_id"], "if_revision": put["revision_id"], "content": {"type": "text", "data": "x"}}),
            ("artifact.forget", {"artifact_id": put["artifact_id"], "reason": "x"}),
            ("claim.revise", {"claim_id": claim["claim_id"], "if_revision": claim["revision_id"], "statement": "x"}),
            ("claim.retract", {"claim_id": claim["claim_id"], "reason": "x"}),
        ]
        for index, (op, body) in enumerate(attempts):
            envelope, code = call.raw({"request_id": "r", "op": op, "idempotency_key": f"s{index}", "context": OTHER, "input": body})
            assert ("SCOPE_VIOLATION", 7) == (envelope["error"]["code"], code), op
            assert "mine" not in envelope["error"]["message"]
        assert head == call.head()

    def test_task_context_may_write_project_level_entities_but_not_another_task(self, call: Caller) -> None:
        """A task writes its own and project-level rows; another task's rows are out of scope."""
        task_a, task_b = {**CTX, "task_id": "tsk_a"}, {**CTX, "task_id": "tsk_b"}
        project_level = call.put_text("p")
        in_a = call.put_text("a", context=task_a)
        revise = lambda art, ctx, key: call("artifact.revise", {"artifact_id": art["artifact_id"], "if_revision": art["revision_id"], "content": {"type": "text", "data": "n"}}, key=key, context=ctx)  # noqa: E731
        assert revise(project_level, task_b, "x1")["ok"]
        assert "SCOPE_VIOLATION" == revise(in_a, task_b, "x2")["error"]["code"]
        assert revise(in_a, CTX, "x3")["ok"]

    def test_mutations_need_an_ambient_context(self, call: Caller) -> None:
        """A mutation without a context is NO_AMBIENT_CONTEXT with exit code 5."""
        envelope, code = call.raw({"request_id": "r", "op": "artifact.put", "idempotency_key": "k",
                                   "input": {"kind": "k", "title": "t", "content": {"type": "text", "data": "x"}}})
        assert ("NO_AMBIENT_CONTEXT", 5, "r") == (envelope["error"]["code"], code, envelope["request_id"])


class TestClaims:
    def test_assert_get_and_history(self, call: Caller) -> None:
        """A claim cites exact evidence bytes and its revisions read newest-first."""
        art = call.put_text("The sky is blue")
        claim = call.ok("claim.assert", claim_input(art, confidence=0.9), key="c1")["result"]
        assert ("active", 0.9, 3) == (claim["status"], claim["confidence"], claim["evidence"][0]["end_byte"])
        revised = call.ok("claim.revise", {"claim_id": claim["claim_id"], "if_revision": claim["revision_id"],
                                           "statement": "The sky is often blue"}, key="c2")["result"]
        assert ([], None) == (revised["evidence"], revised.get("confidence"))
        got = call.ok("claim.get", {"claim_id": claim["claim_id"], "revision_id": claim["revision_id"]}, context=None)["result"]
        assert ("The sky is blue", 0.9) == (got["statement"], got["confidence"])

    def test_evidence_spans_are_checked_against_the_cited_bytes(self, call: Caller) -> None:
        """A span beyond the cited revision's size is refused and writes nothing."""
        art = call.put_text("short")
        head = call.head()
        bad = claim_input(art)
        bad["evidence"][0]["end_byte"] = 6
        assert "INVALID_REQUEST" == call("claim.assert", bad, key="c")["error"]["code"]
        missing = claim_input(art)
        missing["evidence"][0]["revision_id"] = "arev_missing"
        assert "NOT_FOUND" == call("claim.assert", missing, key="c")["error"]["code"]
        assert head == call.head()

    def test_retracted_claim_keeps_history_and_refuses_revision(self, call: Caller) -> None:
        """Retraction records its reason on every history item and blocks revision."""
        claim = call.ok("claim.assert", {"claim_type": "decision", "statement": "use sqlite"}, key="c")["result"]
        call.ok("claim.revise", {"claim_id": claim["claim_id"], "if_revision": claim["revision_id"], "statement": "use SQLite"}, key="r")
        retracted = call.ok("claim.retract", {"claim_id": claim["claim_id"], "reason": "changed mind"}, key="x")["result"]
        history = call.ok("claim.history", {"claim_id": claim["claim_id"]})["result"]["revisions"]
        assert [("retracted", "changed mind")] * 2 == [(r["status"], r["retraction_reason"]) for r in history]
        blocked = call("claim.revise", {"claim_id": claim["claim_id"], "if_revision": retracted["revision_id"], "statement": "x"}, key="y")
        assert "INVALID_REQUEST" == blocked["error"]["code"]

    def test_history_pages_with_an_exclusive_cursor(self, call: Caller) -> None:
        """Pages of two walk every revision once; a cursor at 1 yields an empty final page."""
        claim = call.ok("claim.assert", {"claim_type": "fact", "statement": "v1"}, key="c")["result"]
        for n in range(2, 6):
            claim = call.ok("claim.revise", {"claim_id": claim["claim_id"], "if_revision": claim["revision_id"], "statement": f"v{n}"}, key=f"r{n}")["result"]
        seen, cursor = [], None
        while True:
            page = call.ok("claim.history", {"claim_id": claim["claim_id"], "limit": 2, **({"before_revision_number": cursor} if cursor else {})})["result"]
            seen += [r["revision_number"] for r in page["revisions"]]
            if not page["truncated"]:
                assert "next_before_revision_number" not in page
                break
            cursor = page["next_before_revision_number"]
        assert [5, 4, 3, 2, 1] == seen
        assert [] == call.ok("claim.history", {"claim_id": claim["claim_id"], "before_revision_number": 1})["result"]["revisions"]
        too_many = call("claim.history", {"claim_id": claim["claim_id"], "limit": limits.MAX_HISTORY_ITEMS + 1})
        assert "INVALID_REQUEST" == too_many["error"]["code"]


class TestLog:
    def test_each_mutation_advances_commit_seq_by_one_and_the_chain_verifies(self, call: Caller) -> None:
        """Five mutations give commit_seq 1..5 and a verifying hash chain."""
        art = call.put_text("abcdef")
        seqs = [1]
        claim = call.ok("claim.assert", claim_input(art), key="c")
        seqs.append(claim["commit_seq"])
        seqs.append(call.ok("claim.revise", {"claim_id": claim["result"]["claim_id"], "if_revision": claim["result"]["revision_id"], "statement": "s2"}, key="r")["commit_seq"])
        seqs.append(call.ok("claim.retract", {"claim_id": claim["result"]["claim_id"], "reason": "x"}, key="x")["commit_seq"])
        seqs.append(call.ok("artifact.forget", {"artifact_id": art["artifact_id"], "reason": "x"}, key="f")["commit_seq"])
        assert [1, 2, 3, 4, 5] == seqs
        assert first_chain_break(call.service.engine.log.read_raw()) is None


GOOD_PUT = {"kind": "k", "title": "t", "content": {"type": "text", "data": "x"}}


def _request(**overrides: Any) -> dict[str, Any]:
    document = {"v": 1, "request_id": "req_bad", "op": "artifact.put", "idempotency_key": "k", "context": CTX, "input": GOOD_PUT}
    document.update(overrides)
    return document


BAD_REQUESTS = [
    ("malformed JSON", b'{"v":1, "op": ', "INVALID_REQUEST", 2),
    ("not an object", b"[1,2]", "INVALID_REQUEST", 2),
    ("invalid UTF-8", b'{"request_id":"\xff"}', "INVALID_REQUEST", 2),
    ("unknown top-level field", _request(extra=1), "INVALID_REQUEST", 2),
    ("unknown input field", _request(input={**GOOD_PUT, "colour": "red"}), "INVALID_REQUEST", 2),
    ("unknown nested field", _request(input={**GOOD_PUT, "content": {"type": "text", "data": "x", "z": 1}}), "INVALID_REQUEST", 2),
    ("wrong type", _request(input={**GOOD_PUT, "title": 5}), "INVALID_REQUEST", 2),
    ("null input", _request(input=None), "INVALID_REQUEST", 2),
    ("missing idempotency key", {k: v for k, v in _request().items() if k != "idempotency_key"}, "INVALID_REQUEST", 2),
    ("blank idempotency key", _request(idempotency_key="  "), "INVALID_REQUEST", 2),
    ("oversize idempotency key", _request(idempotency_key="k" * 513), "INVALID_REQUEST", 2),
    ("oversize content", _request(input={**GOOD_PUT, "content": {"type": "text", "data": "x" * (limits.MAX_ARTIFACT_BYTES + 1)}}), "CONTENT_TOO_LARGE", 2),
    ("invalid base64", _request(input={**GOOD_PUT, "content": {"type": "base64", "data": "@@@"}}), "INVALID_REQUEST", 2),
    ("unknown content tag", _request(input={**GOOD_PUT, "content": {"type": "hex", "data": "00"}}), "INVALID_REQUEST", 2),
    ("unknown op", _request(op="artifact.explode"), "INVALID_REQUEST", 2),
    ("unsupported version", _request(v=2), "UNSUPPORTED_VERSION", 2),
    ("blank request id", _request(request_id=""), "INVALID_REQUEST", 2),
    ("oversize title", _request(input={**GOOD_PUT, "title": "é" * 2049}), "INVALID_REQUEST", 2),
    ("bad id", _request(op="artifact.forget", input={"artifact_id": "a\nb", "reason": "x"}), "INVALID_REQUEST", 2),
    ("empty id", _request(op="artifact.forget", input={"artifact_id": "", "reason": "x"}), "INVALID_REQUEST", 2),
    ("huge integer", b'{"request_id":"r","op":"claim.history","input":{"claim_id":"c","limit":1' + b"0" * 5000 + b"}}", "INVALID_REQUEST", 2),
    ("NaN literal", b'{"request_id":"r","op":"claim.assert","idempotency_key":"k","context":{"workspace_id":"w","project_id":"p"},"input":{"claim_type":"fact","statement":"s","confidence":NaN}}', "INVALID_REQUEST", 2),
    ("deep nesting", b'{"request_id":"r","op":"artifact.put","idempotency_key":"k","context":{"workspace_id":"w","project_id":"p"},"input":{"kind":"k","title":"t","content":{"type":"text","data":"x"},"provenance":' + b'{"a":' * 5000 + b"1" + b"}" * 5001 + b"}", "INVALID_REQUEST", 2),
    ("bad claim type", _request(op="claim.assert", input={"claim_type": "rumour", "statement": "x"}), "INVALID_REQUEST", 2),
    ("bad context", _request(context={"workspace_id": "", "project_id": "p"}), "INVALID_REQUEST", 2),
]


class TestBadInput:
    @pytest.mark.parametrize("name,document,code,exit_code", BAD_REQUESTS, ids=[b[0] for b in BAD_REQUESTS])
    def test_bad_input_gets_a_typed_error_and_writes_nothing(self, call: Caller, name: str, document: Any, code: str, exit_code: int) -> None:
        """Each malformed request answers its spec error code and exit code; the log head stays."""
        call.put_text("seed")
        head = call.head()
        raw = document if isinstance(document, bytes) else json.dumps(document).encode()
        envelope, got_exit = call.raw(raw)
        assert (False, code, exit_code) == (envelope["ok"], envelope["error"]["code"], got_exit)
        assert envelope["error"]["message"]
        assert head == call.head()

    def test_malformed_frames_answer_with_the_transport_request_id(self, call: Caller) -> None:
        """Unparseable JSON is answered with request_id req_transport."""
        envelope, _ = call.raw(b"{nope")
        assert "req_transport" == envelope["request_id"]


class TestDiscovery:
    def test_capabilities_report_limits_and_implemented_ops(self, call: Caller) -> None:
        """capabilities reports the size limits and every registered op as available."""
        caps = call.ok("capabilities", {}, context=None)["result"]
        assert (limits.MAX_ARTIFACT_BYTES, limits.MAX_ENCODED_CONTENT_BYTES) == (caps["max_artifact_bytes"], caps["max_encoded_content_bytes"])
        ops = {o["operation"]: o for o in caps["operations"]}
        assert ops["artifact.put"]["requires_idempotency_key"] and not ops["artifact.get"]["mutating"]

    def test_schema_bundle_has_an_independent_root_per_op(self, call: Caller) -> None:
        """Every op input and the envelopes are JSON Schema 2020-12 roots with their own $defs."""
        bundle = call.ok("schema", {}, context=None)["result"]
        caps = call.ok("capabilities", {}, context=None)["result"]
        assert {o["operation"] for o in caps["operations"]} == set(bundle["operation_inputs"])
        for schema in [bundle["request"], bundle["response"], *bundle["operation_inputs"].values()]:
            assert "https://json-schema.org/draft/2020-12/schema" == schema["$schema"]
        put = bundle["operation_inputs"]["artifact.put"]["$defs"]["ArtifactPutInput"]
        assert put["additionalProperties"] is False

    def test_instructions_in_markdown_and_json(self, call: Caller) -> None:
        """instructions renders Markdown by default and a structured document as json."""
        assert "# memoree" in call.ok("instructions", {}, context=None)["result"]["content"]
        document = call.ok("instructions", {"format": "json"}, context=None)["result"]["content"]
        assert {"must", "should"} >= {r["level"] for r in document["rules"]}

    def test_context_resolve_echoes_the_attached_context(self, call: Caller) -> None:
        """context.resolve returns the attached context and the envelope echoes it."""
        envelope = call.ok("context.resolve", {}, context_source="marker")
        assert ("marker", "ambient", False) == (envelope["context"]["resolved_from"], envelope["context"]["horizon"], envelope["context"]["broadened"])


def _put_request(key: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"v": 1, "request_id": f"req_{key}", "op": "artifact.put", "idempotency_key": key, "context": CTX,
            "input": {"kind": "note", "title": "t", "content": {"type": "text", "data": text}, **extra}}


class TestBatch:
    def test_a_batch_answers_each_request_as_alone_in_one_transaction(self, call: Caller) -> None:
        """Every request of a batch gets its own envelope, in order, at consecutive commit_seqs."""
        replies = call.ok("batch", {"requests": [_put_request(f"b{i}", f"text {i}") for i in range(3)]},
                          context=None)["result"]["replies"]
        assert [("req_b0", 1), ("req_b1", 2), ("req_b2", 3)] == [(r["request_id"], r["commit_seq"]) for r in replies]
        found = call.ok("search", {"query": "text"})["result"]
        assert 3 == len(found["hits"])

    def test_a_repeated_batch_replays_and_writes_nothing(self, call: Caller) -> None:
        """Sending the same batch again replays every request (created false) and leaves the head."""
        batch = {"requests": [_put_request(f"r{i}", f"again {i}") for i in range(4)]}
        first = call.ok("batch", batch, context=None)["result"]["replies"]
        head = call.head()
        second = call.ok("batch", batch, context=None)["result"]["replies"]
        assert head == call.head()
        assert [False] * 4 == [r["result"]["created"] for r in second]
        assert [r["result"]["artifact_id"] for r in first] == [r["result"]["artifact_id"] for r in second]

    def test_a_refused_request_takes_nothing_of_the_others(self, call: Caller) -> None:
        """A request refused inside a batch answers its own error; the others commit."""
        batch = {"requests": [_put_request("ok1", "one"), _put_request("bad", "two", unknown_field=1),
                              _put_request("ok2", "three")]}
        replies = call.ok("batch", batch, context=None)["result"]["replies"]
        assert [True, False, True] == [r["ok"] for r in replies]
        assert "INVALID_REQUEST" == replies[1]["error"]["code"]
        assert 2 == call.head()

    def test_only_mutations_may_be_batched(self, call: Caller) -> None:
        """A read (or a nested batch) in a batch refuses the whole batch, writing nothing."""
        read = {"v": 1, "request_id": "g", "op": "capabilities", "input": {}}
        envelope = call("batch", {"requests": [_put_request("x", "x"), read]}, context=None)
        assert "INVALID_REQUEST" == envelope["error"]["code"]
        assert 0 == call.head()
