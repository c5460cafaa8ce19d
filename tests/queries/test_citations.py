"""citation.get (exact byte fetches) and memory.probe (unqualified leads, no content)."""

from __future__ import annotations

from typing import Any

from tests.conftest import Caller
from tests.queries.test_search import claim, put


def fetch(call: Caller, citation: str, **fields: Any) -> dict[str, Any]:
    return call("citation.get", {"citation": citation, **fields}, context=None)


def kind(envelope: dict[str, Any]) -> str:
    assert "CITATION_ERROR" == envelope["error"]["code"], envelope
    assert envelope["error"]["details"]["next_action"]
    return envelope["error"]["details"]["citation_error"]


class TestCitationGet:
    """Only exact, text, code-point-aligned spans are returned, at most max_bytes of them."""

    def test_exact_fetch_and_narrowing(self, call: Caller) -> None:
        """A span returns its bytes; an oversized one is cut and the citation names what came back."""
        made = put(call, "ab日本語cd" + "x" * 40)
        base = f"memoree://artifact/{made['artifact_id']}@{made['revision_id']}"
        whole = fetch(call, f"{base}#0-11")["result"]
        assert ("ab日本語", 11, False, True) == (whole["content"], whole["byte_count"], whole["truncated"],
                                               whole["content_is_untrusted"])
        cut = fetch(call, f"{base}#0-11", max_bytes=6)["result"]
        assert ("ab日", f"{base}#0-5", 6) == (cut["content"], cut["citation"], cut["remaining_bytes"])

    def test_every_refusal_names_its_kind(self, call: Caller) -> None:
        """Malformed, out of range, unknown, spanless, non-text, split code points, bad limits."""
        made = put(call, "ab日本語")
        binary = put(call, "zz", media_type="application/octet-stream")
        base = f"memoree://artifact/{made['artifact_id']}@{made['revision_id']}"
        assert "malformed_citation" == kind(fetch(call, "memoree://claim/x@y"))
        assert "malformed_citation" == kind(fetch(call, f"{base}#a-b"))
        assert "span_out_of_range" == kind(fetch(call, f"{base}#3-99"))
        assert "span_out_of_range" == kind(fetch(call, f"{base}#4-4"))
        assert "unknown_artifact" == kind(fetch(call, "memoree://artifact/art_none@arev_none#0-1"))
        assert "unknown_revision" == kind(fetch(call, f"memoree://artifact/{made['artifact_id']}@arev_none#0-1"))
        assert "range_required" == kind(fetch(call, base))
        assert "utf8_boundary" == kind(fetch(call, f"{base}#0-3"))
        assert "invalid_output_limit" == kind(fetch(call, f"{base}#0-2", max_bytes=3))
        binary_base = f"memoree://artifact/{binary['artifact_id']}@{binary['revision_id']}"
        assert "non_text_content" == kind(fetch(call, f"{binary_base}#0-1"))

    def test_forgotten_artifacts_stay_fetchable(self, call: Caller) -> None:
        """Exact reads are global and survive forgetting."""
        made = put(call, "kept bytes")
        call.ok("artifact.forget", {"artifact_id": made["artifact_id"], "reason": "done"}, key="f")
        result = fetch(call, f"memoree://artifact/{made['artifact_id']}@{made['revision_id']}#0-4")["result"]
        assert "kept" == result["content"]


class TestProbe:
    """Probe lists unqualified leads only, claim-backed first, as citations without content."""

    def test_leads_come_from_unqualified_candidates(self, call: Caller) -> None:
        """A partial match becomes a lead citing exact evidence; qualified hits never do."""
        text = "Webhook retries use exponential backoff."
        source = put(call, text, title="retry notes")
        claim(call, "Webhook retries back off", evidence=[{"artifact_id": source["artifact_id"],
                                                           "revision_id": source["revision_id"],
                                                           "start_byte": 0, "end_byte": 16}])
        put(call, "Webhook payload format is JSON", title="payload")
        result = call.ok("memory.probe", {"query": "webhook signing secret rotation",
                                          "original_query": "how are webhooks signed?"})["result"]
        assert ("unqualified_candidate", True, True) == (result["retrieval_tier"], result["reformulation_applied"],
                                                          result["content_is_untrusted"])
        origins = [s["locator_origin"] for lead in result["leads"] for s in lead["sources"]]
        assert "claim_exact" == origins[0] and "content" not in str(result["leads"][0].keys())
        assert all(len(lead["title"].encode()) <= 48 and len(lead["sources"]) <= 3 for lead in result["leads"])
        assert result["available_count"] == len(result["leads"]) and not result["truncated"]
        qualified = call.ok("memory.probe", {"query": "webhook retries backoff"})["result"]
        assert all("retry notes" != lead["title"] for lead in qualified["leads"])


class TestRetrieve:
    """Retrieve is recall plus one bounded recovery, and never lets recovery change presence."""

    def test_recovery_fetches_related_claim_evidence_only_without_qualified_claims(self, call: Caller) -> None:
        """No qualified claim: leads are fetched exactly, unrelated spans suppressed, next action given."""
        text = "Webhook retries use exponential backoff with jitter."
        source = put(call, text, title="retry notes")
        claim(call, "Webhook retries back off", evidence=[{"artifact_id": source["artifact_id"],
                                                           "revision_id": source["revision_id"],
                                                           "start_byte": 0, "end_byte": 52}])
        result = call.ok("memory.retrieve", {"query": "webhook signing secret rotation"})["result"]
        assert ("none", "no_qualified_match") == (result["presence"], result["next_action"]["reason"])
        recovery = result["recovery"]
        assert [text[:52]] == [e["content"] for e in recovery["evidence"]]
        assert recovery["returned_content_bytes"] <= 12288 and recovery["evidence"][0]["retrieval_tier"] == "unqualified_evidence"
        answered = call.ok("memory.retrieve", {"query": "webhook retries backoff"})["result"]
        assert ("claims", None, None) == (answered["presence"], answered.get("recovery"), answered.get("next_action"))

    def test_reformulation_must_differ(self, call: Caller) -> None:
        """A reformulation equal to the query is INVALID_REQUEST."""
        envelope = call("memory.retrieve", {"query": "same words", "reformulation": "same words"})
        assert "INVALID_REQUEST" == envelope["error"]["code"]
