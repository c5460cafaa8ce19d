"""``memoree remember``: quotes verified to exact byte spans, preview by default, idempotent apply."""

from __future__ import annotations

import base64
from typing import Any

from memoree.agents.remember import build_plan, byte_spans, verify_proposal
from tests.agent.conftest import CTX, Cli

NOTE = "Décision: SQLite is authoritative; the CAS stores blobs. Deploys run on Fridays."


def claim(statement: str, *quotes: Any, claim_type: str = "decision") -> dict[str, Any]:
    return {"claim_type": claim_type, "statement": statement, "quotes": list(quotes)}


def cited_bytes(cli: Cli, claim_id: str) -> list[str]:
    """The exact bytes each evidence locator of a stored claim points at, read back from the store."""
    stored = cli.call("claim.get", {"claim_id": claim_id})["result"]
    texts = []
    for locator in stored["evidence"]:
        artifact = cli.call("artifact.get", {"artifact_id": locator["artifact_id"],
                                             "revision_id": locator["revision_id"]})["result"]
        content = artifact["content"]
        data = content["data"].encode() if content["type"] == "text" else base64.b64decode(content["data"])
        texts.append(data[locator["start_byte"]:locator["end_byte"]].decode())
    return texts


class TestVerifyProposal:
    def test_exact_quotes_become_utf8_byte_spans(self) -> None:
        """A quote found once is grounded at its UTF-8 byte span, after multi-byte characters too."""
        claims, findings = verify_proposal(NOTE, {"claims": [claim("SQLite is authoritative.", "SQLite is authoritative")]})
        start = len("Décision: ".encode())
        assert ([], [(start, start + len("SQLite is authoritative"))]) == (findings, list(claims[0].spans))

    def test_ambiguous_and_missing_quotes_refuse_the_claim(self) -> None:
        """A quote occurring twice or not at all refuses its claim with a finding naming the quote."""
        proposal = {"claims": [claim("s1", "s"), claim("s2", "no such passage"), claim("ok", "Deploys run on Fridays")]}
        claims, findings = verify_proposal(NOTE, proposal)
        assert ["ok"] == [c.statement for c in claims]
        assert [("QUOTE_AMBIGUOUS", 0, 0), ("QUOTE_NOT_FOUND", 1, 0)] == [(f.code, f.claim_index, f.quote_index) for f in findings]

    def test_shape_problems_are_findings(self) -> None:
        """Bad claim types, blank statements, quote counts and too many claims are deterministic findings."""
        proposal = {"claims": [claim("x", "SQLite", claim_type="opinion"), claim("  ", "SQLite"),
                               claim("five", *["a", "b", "c", "d", "e"]), "not an object",
                               *[claim(f"c{i}", "Deploys run on Fridays") for i in range(6)]]}
        claims, findings = verify_proposal(NOTE, proposal)
        codes = [f.code for f in findings]
        assert ["TOO_MANY_CLAIMS", "CLAIM_TYPE_INVALID", "STATEMENT_EMPTY", "QUOTE_COUNT", "CLAIM_MALFORMED"] == codes
        assert ["c0", "c1", "c2", "c3"] == [c.statement for c in claims]

    def test_overlapping_occurrences_count(self) -> None:
        """Overlapping occurrences count, so a quote like 'aa' in 'aaa' is ambiguous."""
        assert [(0, 2), (1, 3)] == byte_spans("aaa", "aa")

    def test_keys_depend_only_on_the_plan(self) -> None:
        """The same text and proposal derive the same remember_ keys; other text derives others."""
        proposal = {"claims": [claim("SQLite is authoritative.", "SQLite is authoritative")]}
        one, two = (build_plan(NOTE, context=CTX, context_source="session", proposal=proposal) for _ in range(2))
        other = build_plan(NOTE + " More.", context=CTX, context_source="session", proposal=proposal)
        assert (one.artifact_key, one.claim_keys) == (two.artifact_key, two.claim_keys)
        assert one.artifact_key.startswith("remember_") and one.artifact_key != other.artifact_key


class TestRememberCommand:
    def test_preview_writes_nothing_and_shows_the_plan(self, cli: Cli) -> None:
        """The default preview prints the planned requests and findings and leaves the log head alone."""
        cli.fake_compiler({"claims": [claim("SQLite is authoritative.", "SQLite is authoritative"), claim("dup", "s")]})
        head = cli.head()
        result = cli.ok("remember", NOTE)
        assert ("preview", False, head) == (result["mode"], result["applied"], cli.head())
        assert ["artifact.put", "claim.assert"] == [r["op"] for r in result["requests"]]
        assert ["QUOTE_AMBIGUOUS"] == [f["code"] for f in result["findings"]]
        assert NOTE in cli.last_prompt and "exactly once" in cli.last_prompt

    def test_apply_twice_writes_once_with_correct_spans(self, cli: Cli) -> None:
        """--apply stores the note and grounded claims; a second identical apply commits nothing."""
        cli.fake_compiler({"claims": [claim("SQLite is authoritative.", "SQLite is authoritative", "the CAS stores blobs"),
                                      claim("Deploys happen on Fridays.", "Deploys run on Fridays", claim_type="procedure")]})
        first = cli.ok("remember", "--apply", NOTE)
        head = cli.head()
        second = cli.ok("remember", "--apply", NOTE)
        assert (3, 0, head) == (first["created"], second["created"], cli.head())
        assert [c["claim_id"] for c in first["claims_applied"]] == [c["claim_id"] for c in second["claims_applied"]]
        assert ["SQLite is authoritative", "the CAS stores blobs"] == cited_bytes(cli, first["claims_applied"][0]["claim_id"])

    def test_stdin_text_and_raw_mode(self, cli: Cli) -> None:
        """`remember - --raw --apply` stores stdin as one artifact without asking any compiler."""
        result = cli.ok("remember", "-", "--raw", "--apply", stdin=NOTE.encode())
        stored = cli.call("artifact.get", {"artifact_id": result["artifact"]["artifact_id"]})["result"]
        assert (NOTE, [], False) == (stored["content"]["data"], result["claims_applied"], result["compiled"])

    def test_compiler_failures_are_reasoner_errors_and_write_nothing(self, cli: Cli) -> None:
        """A failing exit, invalid JSON or a wrong shape answers REASONER_ERROR (exit 1) and writes nothing."""
        head = cli.head()
        for stdout, status in (("{}", 3), ("not json", 0), ('{"claims": 5}', 0)):
            cli.fake_compiler(stdout, exit_status=status, stderr="model says no")
            document, code = cli.json("remember", "--apply", NOTE)
            assert ("REASONER_ERROR", 1) == (document["error"]["code"], code), document
        assert head == cli.head()

    def test_unconfigured_compiler_is_a_reasoner_error(self, cli: Cli) -> None:
        """Without a configured compiler, remember (not --raw) says REASONER_ERROR and how to fix it."""
        document, code = cli.json("remember", NOTE)
        assert ("REASONER_ERROR", 1) == (document["error"]["code"], code)
        assert "compiler configure" in document["error"]["hint"]

    def test_compiler_status_reports_the_configured_command(self, cli: Cli) -> None:
        """`compiler status` shows the stored command and finds its program."""
        assert {"configured": False} == {k: v for k, v in cli.ok("compiler", "status").items() if k == "configured"}
        cli.fake_compiler({"claims": []})
        status = cli.ok("compiler", "status")
        assert (True, True) == (status["configured"], status["program_found"])
