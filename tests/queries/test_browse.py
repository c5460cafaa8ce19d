"""artifact.list and claim.list: newest first within the horizon, exact filters, a cursor."""

from __future__ import annotations

from tests.conftest import CTX, Caller

OTHER = {"workspace_id": "wsp_test", "project_id": "prj_other"}


def put(call: Caller, title: str, provenance: dict | None = None, context: dict = CTX) -> dict:
    call.counter += 1
    return call.ok("artifact.put", {"kind": "note", "title": title, "provenance": provenance or {},
                                    "content": {"type": "text", "data": f"body of {title}"}},
                   key=f"k{call.counter}", context=context)["result"]


def titles(result: dict) -> list[str]:
    return [a["title"] for a in result["artifacts"]]


class TestArtifactList:
    def test_pages_newest_first_with_a_cursor(self, call: Caller) -> None:
        """Five artifacts come back newest first, two per page, and the cursor reaches the end."""
        for i in range(5):
            put(call, f"t{i}")
        seen, cursor = [], None
        while True:
            page = call.ok("artifact.list", {"limit": 2, **({"before_commit_seq": cursor} if cursor else {})})["result"]
            seen += titles(page)
            cursor = page.get("next_before_commit_seq")
            if not page["truncated"]:
                break
        assert ["t4", "t3", "t2", "t1", "t0"] == seen

    def test_horizon_scopes_the_listing(self, call: Caller) -> None:
        """Another project's artifact is listed only at the workspace horizon, which needs a reason."""
        put(call, "mine")
        put(call, "theirs", context=OTHER)
        assert ["mine"] == titles(call.ok("artifact.list", {})["result"])
        refused = call("artifact.list", {"horizon": "workspace"})
        assert "INVALID_REQUEST" == refused["error"]["code"]
        wide = call.ok("artifact.list", {"horizon": "workspace", "reason": "compare projects"})["result"]
        assert ["theirs", "mine"] == titles(wide)

    def test_exact_title_and_provenance_filters(self, call: Caller) -> None:
        """``title`` matches the whole title only; ``provenance`` matches top-level scalar fields."""
        put(call, "Alice Chen", {"source": "a", "n": 1, "flag": True})
        put(call, "Alice", {"source": "b", "n": 2})
        assert ["Alice"] == titles(call.ok("artifact.list", {"title": "Alice"})["result"])
        assert ["Alice Chen"] == titles(call.ok("artifact.list", {"provenance": {"source": "a"}})["result"])
        assert ["Alice"] == titles(call.ok("artifact.list", {"provenance": {"n": 2}})["result"])
        assert ["Alice Chen"] == titles(call.ok("artifact.list", {"provenance": {"flag": True}})["result"])

    def test_forgotten_artifacts_are_listed_only_when_asked(self, call: Caller) -> None:
        """A forgotten artifact leaves the default (active) listing and appears with status forgotten."""
        gone = put(call, "gone")
        put(call, "kept")
        call.ok("artifact.forget", {"artifact_id": gone["artifact_id"], "reason": "test"}, key="f")
        assert ["kept"] == titles(call.ok("artifact.list", {})["result"])
        assert ["gone"] == titles(call.ok("artifact.list", {"status": "forgotten"})["result"])

    def test_limit_outside_bounds_is_invalid(self, call: Caller) -> None:
        """A limit of 0 or above the page bound is INVALID_REQUEST naming the bound."""
        for limit in (0, 101):
            error = call("artifact.list", {"limit": limit})["error"]
            assert ("INVALID_REQUEST", True) == (error["code"], "between 1 and 100" in error["message"])

    def test_needs_an_ambient_context(self, call: Caller) -> None:
        """Without a context the listing is NO_AMBIENT_CONTEXT, not an empty page."""
        assert "NO_AMBIENT_CONTEXT" == call("artifact.list", {}, context=None)["error"]["code"]


class TestClaimList:
    def test_claims_citing_an_artifact_and_status(self, call: Caller) -> None:
        """``artifact_id`` keeps the claims citing it; retracted claims leave the current listing."""
        first, second = put(call, "one"), put(call, "two")

        def claim(statement: str, artifact: dict) -> dict:
            call.counter += 1
            return call.ok("claim.assert", {"claim_type": "fact", "statement": statement, "actor": "tester",
                                            "evidence": [{"artifact_id": artifact["artifact_id"],
                                                          "revision_id": artifact["revision_id"]}]},
                           key=f"c{call.counter}")["result"]

        a, _ = claim("cites one", first), claim("cites two", second)
        listed = call.ok("claim.list", {"artifact_id": first["artifact_id"]})["result"]["claims"]
        assert ["cites one"] == [c["statement"] for c in listed]
        call.ok("claim.retract", {"claim_id": a["claim_id"], "reason": "wrong"}, key="r")
        assert ["cites two"] == [c["statement"] for c in call.ok("claim.list", {"actor": "tester"})["result"]["claims"]]
        retracted = call.ok("claim.list", {"status": "retracted"})["result"]["claims"]
        assert ["cites one"] == [c["statement"] for c in retracted]


def test_listing_ops_are_advertised(call: Caller) -> None:
    """Both ops appear in capabilities as horizon reads needing context, and in the schema bundle."""
    operations = {op["operation"]: op for op in call.ok("capabilities", {}, context=None)["result"]["operations"]}
    schema = call.ok("schema", {}, context=None)["result"]
    for name in ("artifact.list", "claim.list"):
        entry = operations[name]
        assert (False, True, True) == (entry["mutating"], entry["needs_context"], entry["supports_explicit_horizon"])
        assert name in schema["operation_inputs"] and name in schema["result_types"]
