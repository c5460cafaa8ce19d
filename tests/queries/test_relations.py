"""relation.list: one hop, direction and type filters, newest-first pages, and horizon rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memoree.queries.relations import BROADEN_HINTS, pinned_artifact_ids
from tests.conftest import CTX, Caller
from tests.memoree.test_cli import project, run  # noqa: F401 - project is a fixture
from tests.projections.test_conflicts import assert_claim, relate

SIBLING = {"workspace_id": "wsp_test", "project_id": "prj_sibling"}
STRANGER = {"workspace_id": "wsp_other", "project_id": "prj_other"}


def listing(call: Caller, entity_id: str, entity_type: str = "claim", context: dict[str, Any] | None = CTX,
            **fields: Any) -> dict[str, Any]:
    return call("relation.list", {"entity_type": entity_type, "entity_id": entity_id, **fields}, context=context)


def listed(call: Caller, entity_id: str, **fields: Any) -> list[tuple[str, str, str]]:
    envelope = listing(call, entity_id, **fields)
    assert envelope["ok"], envelope
    return [(r["source_id"], r["relation"], r["target_id"]) for r in envelope["result"]["relations"]]


@pytest.fixture
def star(call: Caller) -> dict[str, str]:
    """hub → a (supports), b → hub (contradicts), hub → c (references), a → c (supports)."""
    ids = {name: assert_claim(call, name)["claim_id"] for name in ("hub", "a", "b", "c")}
    relate(call, ids["hub"], "supports", ids["a"])
    relate(call, ids["b"], "contradicts", ids["hub"])
    relate(call, ids["hub"], "references", ids["c"])
    relate(call, ids["a"], "supports", ids["c"])
    return ids


class TestOneHop:
    """Only edges touching the anchor come back, filtered by direction and type."""

    def test_both_directions_newest_first(self, call: Caller, star: dict[str, str]) -> None:
        """The default lists incoming and outgoing edges by relation_commit_seq descending."""
        s = star
        assert [(s["hub"], "references", s["c"]), (s["b"], "contradicts", s["hub"]),
                (s["hub"], "supports", s["a"])] == listed(call, s["hub"])

    def test_outgoing_and_incoming(self, call: Caller, star: dict[str, str]) -> None:
        """direction narrows to edges leaving or entering the anchor."""
        s = star
        assert [(s["hub"], "references", s["c"]), (s["hub"], "supports", s["a"])] == listed(
            call, s["hub"], direction="outgoing")
        assert [(s["b"], "contradicts", s["hub"])] == listed(call, s["hub"], direction="incoming")

    def test_relation_filter(self, call: Caller, star: dict[str, str]) -> None:
        """relation keeps one exact type."""
        assert [(star["hub"], "supports", star["a"])] == listed(call, star["hub"], relation="supports")

    def test_the_result_echoes_the_request_shape(self, call: Caller, star: dict[str, str]) -> None:
        """Anchor, direction, filter and horizon are echoed; items carry relation_commit_seq."""
        result = listing(call, star["hub"], relation="supports")["result"]
        assert ("claim", star["hub"], "both", "supports", "ambient", False) == (
            result["entity_type"], result["entity_id"], result["direction"], result["relation"],
            result["horizon"], result["truncated"])
        assert result["relations"][0]["relation_commit_seq"] > 0
        assert "broaden_hint" not in result

    def test_an_artifact_anchor(self, call: Caller) -> None:
        """Artifacts are anchors too."""
        art = call.put_text("source")
        claim = assert_claim(call, "derived")
        relate(call, claim["claim_id"], "derived_from", art["artifact_id"], target_type="artifact")
        assert [(claim["claim_id"], "derived_from", art["artifact_id"])] == listed(
            call, art["artifact_id"], entity_type="artifact")


class TestPagination:
    """An exclusive before_commit_seq cursor walks every row exactly once."""

    def test_pages_cover_every_row_once(self, call: Caller) -> None:
        """Pages of 2 over 7 edges return all of them, newest first, with honest cursors."""
        hub = assert_claim(call, "hub")["claim_id"]
        for n in range(7):
            relate(call, hub, "references", assert_claim(call, f"leaf {n}")["claim_id"])
        seen: list[int] = []
        cursor = None
        while True:
            fields = {"limit": 2} if cursor is None else {"limit": 2, "before_commit_seq": cursor}
            result = listing(call, hub, **fields)["result"]
            seen += [r["relation_commit_seq"] for r in result["relations"]]
            if not result["truncated"]:
                assert "next_before_commit_seq" not in result
                break
            cursor = result["next_before_commit_seq"]
            assert cursor == result["relations"][-1]["relation_commit_seq"]
        assert 7 == len(seen) == len(set(seen))
        assert seen == sorted(seen, reverse=True)

    def test_a_full_last_page_is_not_truncated(self, call: Caller) -> None:
        """Exactly limit rows left: truncated is false and no cursor is given."""
        hub = assert_claim(call, "hub")["claim_id"]
        for n in range(2):
            relate(call, hub, "references", assert_claim(call, f"leaf {n}")["claim_id"])
        result = listing(call, hub, limit=2)["result"]
        assert (2, False) == (len(result["relations"]), result["truncated"])

    @pytest.mark.parametrize("fields", [{"limit": 0}, {"limit": 101}, {"before_commit_seq": 0},
                                        {"direction": "sideways"}, {"relation": "derived-from"}])
    def test_bad_bounds_are_invalid(self, call: Caller, fields: dict[str, Any]) -> None:
        """limit 1..100, cursor > 0 and the enums are enforced."""
        hub = assert_claim(call, "hub")["claim_id"]
        assert "INVALID_REQUEST" == listing(call, hub, **fields)["error"]["code"]


class TestHorizons:
    """The anchor must be visible (or a pinned artifact); rows are filtered by their own context."""

    def test_a_foreign_anchor_is_a_scope_violation_at_ambient(self, call: Caller) -> None:
        """Another project's claim is outside the ambient horizon."""
        theirs = assert_claim(call, "theirs", context=SIBLING)["claim_id"]
        assert "SCOPE_VIOLATION" == listing(call, theirs)["error"]["code"]

    def test_a_missing_anchor_is_not_found(self, call: Caller) -> None:
        """An unknown id is NOT_FOUND."""
        assert "NOT_FOUND" == listing(call, "clm_nope")["error"]["code"]

    def test_workspace_horizon_with_a_reason_reveals_the_sibling_graph(self, call: Caller) -> None:
        """Broadening to the workspace shows a sibling project's relations."""
        a, b = (assert_claim(call, n, context=SIBLING)["claim_id"] for n in ("a", "b"))
        relate(call, a, "supports", b, context=SIBLING)
        envelope = listing(call, a, horizon="workspace", reason="cross-project review")
        assert [(a, "supports", b)] == [(r["source_id"], r["relation"], r["target_id"])
                                        for r in envelope["result"]["relations"]]
        assert (True, "workspace") == (envelope["context"]["broadened"], envelope["context"]["horizon"])

    @pytest.mark.parametrize("reason", [None, "", "   "])
    def test_broad_reads_need_a_nonblank_reason(self, call: Caller, reason: str | None) -> None:
        """workspace/personal without a non-whitespace reason is INVALID_REQUEST."""
        hub = assert_claim(call, "hub")["claim_id"]
        fields = {"horizon": "personal"} if reason is None else {"horizon": "personal", "reason": reason}
        assert "INVALID_REQUEST" == listing(call, hub, **fields)["error"]["code"]

    def test_a_reason_on_an_ambient_read_is_ignored(self, call: Caller) -> None:
        """Even a blank reason is accepted at the ambient horizon."""
        hub = assert_claim(call, "hub")["claim_id"]
        assert listing(call, hub, reason=" ")["ok"]

    def test_personal_reaches_another_workspace(self, call: Caller) -> None:
        """personal sees everything in the store; workspace does not cross workspaces."""
        a, b = (assert_claim(call, n, context=STRANGER)["claim_id"] for n in ("a", "b"))
        relate(call, a, "supports", b, context=STRANGER)
        assert "SCOPE_VIOLATION" == listing(call, a, horizon="workspace", reason="r")["error"]["code"]
        assert [(a, "supports", b)] == listed(call, a, horizon="personal", reason="audit")

    def test_a_pinned_foreign_artifact_is_an_anchor_without_its_graph(self, call: Caller) -> None:
        """A pin admits the anchor but never widens relation rows: the page is empty with a hint."""
        art = call.put_text("foreign doc", context=SIBLING)["artifact_id"]
        claim = assert_claim(call, "theirs", context=SIBLING)["claim_id"]
        relate(call, claim, "derived_from", art, target_type="artifact", context=SIBLING)
        for pin in (art, f"{art}@whatever", f"memoree://artifact/{art}"):
            envelope = listing(call, art, entity_type="artifact", context={**CTX, "pins": [pin]})
            assert ([], BROADEN_HINTS["ambient"]) == (envelope["result"]["relations"],
                                                       envelope["result"]["broaden_hint"])
        assert "SCOPE_VIOLATION" == listing(call, art, entity_type="artifact")["error"]["code"]

    def test_task_rows_are_hidden_from_other_tasks(self, call: Caller) -> None:
        """A row written in task 1 is visible project-wide and in task 1, not in task 2."""
        a, b = assert_claim(call, "a")["claim_id"], assert_claim(call, "b")["claim_id"]
        relate(call, a, "supports", b, context={**CTX, "task_id": "tsk_1"})
        assert 1 == len(listed(call, a))
        assert 1 == len(listed(call, a, context={**CTX, "task_id": "tsk_1"}))
        assert [] == listed(call, a, context={**CTX, "task_id": "tsk_2"})

    @pytest.mark.parametrize("horizon,hint", [("ambient", BROADEN_HINTS["ambient"]),
                                              ("workspace", BROADEN_HINTS["workspace"]),
                                              ("personal", None)])
    def test_empty_pages_carry_the_next_broader_hint(self, call: Caller, horizon: str, hint: str | None) -> None:
        """ambient suggests workspace, workspace suggests personal, personal suggests nothing."""
        hub = assert_claim(call, "lonely")["claim_id"]
        result = listing(call, hub, horizon=horizon, reason="r")["result"]
        assert hint == result.get("broaden_hint")
        assert "horizon=workspace" in BROADEN_HINTS["ambient"] and "horizon=personal" in BROADEN_HINTS["workspace"]

    def test_context_is_required(self, call: Caller) -> None:
        """relation.list needs an ambient context; malformed input is reported first."""
        hub = assert_claim(call, "hub")["claim_id"]
        assert "NO_AMBIENT_CONTEXT" == listing(call, hub, context=None)["error"]["code"]
        assert "INVALID_REQUEST" == listing(call, hub, context=None, limit="x")["error"]["code"]


class TestPins:
    """Pin strings name artifacts in three spellings."""

    def test_pinned_artifact_ids(self) -> None:
        """Bare, revision-qualified and URI-prefixed pins all name the artifact."""
        assert {"art_1", "art_2", "art_3"} == pinned_artifact_ids(
            ["art_1", "art_2@arev_9", "memoree://artifact/art_3@arev_1"])


class TestCli:
    """memoree link, relation list and conflict list wrap the protocol ops."""

    def test_link_list_and_conflicts(self, project: tuple[Path, Path]) -> None:
        """Kebab-case relations and artifact:/claim: refs reach the service; bad refs exit 2."""
        folder, home = project

        def cli(*args: str) -> tuple[dict[str, Any], int]:
            done = run(list(args), folder, home)
            return (json.loads(done.stdout) if done.stdout else {}), done.returncode

        ids = [cli("claim", "assert", "fact", statement)[0]["result"]["claim_id"] for statement in ("up", "down")]
        linked, code = cli("link", f"claim:{ids[0]}", "contradicts", f"claim:{ids[1]}")
        assert (0, "contradicts") == (code, linked["result"]["relation"])
        listed, code = cli("relation", "list", f"claim:{ids[1]}", "--direction", "incoming", "--relation", "contradicts")
        assert (0, 1) == (code, len(listed["result"]["relations"]))
        queue, code = cli("conflict", "list", "--include-stale", "--limit", "5")
        assert (0, [ids[0]]) == (code, [c["source"]["claim_id"] for c in queue["result"]["conflicts"]])
        broad, code = cli("conflict", "list", "--horizon", "workspace")
        assert (2, "INVALID_REQUEST") == (code, broad["error"]["code"])
        assert 2 == cli("link", f"clm:{ids[0]}", "supports", f"claim:{ids[1]}")[1]
        assert 2 == cli("link", f"claim:{ids[0]}", "derives", f"claim:{ids[1]}")[1]
