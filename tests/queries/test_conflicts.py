"""conflict.list: the open-case queue with frozen and current snapshots, pages and horizons."""

from __future__ import annotations

from typing import Any

import pytest

from memoree.queries.conflicts import BROADEN_HINTS
from tests.conftest import CTX, Caller
from tests.projections.test_conflicts import assert_claim, relate, retract, revise

SIBLING = {"workspace_id": "wsp_test", "project_id": "prj_sibling"}


def conflicts(call: Caller, context: dict[str, Any] | None = CTX, **fields: Any) -> dict[str, Any]:
    return call("conflict.list", fields, context=context)


def listed(call: Caller, **fields: Any) -> list[dict[str, Any]]:
    envelope = conflicts(call, **fields)
    assert envelope["ok"], envelope
    return envelope["result"]["conflicts"]


def contradict(call: Caller, left: str, right: str, context: dict[str, Any] = CTX,
               metadata: dict[str, Any] | None = None) -> tuple[str, str, dict[str, Any]]:
    a = assert_claim(call, left, context)["claim_id"]
    b = assert_claim(call, right, context)["claim_id"]
    relation = relate(call, a, "contradicts", b, context=context, metadata=metadata)
    assert relation["ok"], relation
    return a, b, relation["result"]


class TestQueue:
    """Open cases come newest-first with both sides' frozen and current revisions."""

    def test_an_open_case_shows_both_sides(self, call: Caller) -> None:
        """The item carries ids, state, snapshots, relation metadata and context, and sequences."""
        a, b, relation = contradict(call, "deploys happen on Fridays", "never deploy on Fridays",
                                    metadata={"source": "retro"})
        [case] = listed(call)
        assert (relation["relation_id"], "open", {"source": "retro"}, relation["commit_seq"], 1) == (
            case["relation_id"], case["state"], case["metadata"], case["opened_commit_seq"],
            case["case_sequence"])
        assert case["case_id"].startswith("ccase_")
        assert {"workspace_id": "wsp_test", "project_id": "prj_test", "pins": []} == case["context"]
        for side, claim_id, statement in (("source", a, "deploys happen on Fridays"),
                                          ("target", b, "never deploy on Fridays")):
            snapshot = case[side]
            assert (claim_id, True, statement, "conflicted") == (
                snapshot["claim_id"], snapshot["frozen_is_current"], snapshot["frozen"]["statement"],
                snapshot["current"]["status"])
            assert snapshot["frozen"] == snapshot["current"]

    def test_newest_first(self, call: Caller) -> None:
        """Cases are ordered by case_sequence, descending."""
        contradict(call, "a1", "a2")
        contradict(call, "b1", "b2")
        assert [2, 1] == [c["case_sequence"] for c in listed(call)]

    def test_resolved_cases_are_never_listed(self, call: Caller) -> None:
        """Retraction removes the case from the queue, stale or not."""
        a, _, _ = contradict(call, "x", "y")
        retract(call, a)
        assert [] == listed(call, include_stale=True)

    def test_stale_cases_only_on_request_with_frozen_and_current_apart(self, call: Caller) -> None:
        """include_stale adds the superseded pair; its revised side is no longer current."""
        a, _, _ = contradict(call, "the limit is 10", "the limit is 20")
        revise(call, a, "the limit is 15")
        assert ["open"] == [c["state"] for c in listed(call)]
        stale, fresh = sorted(listed(call, include_stale=True), key=lambda c: c["case_sequence"])
        assert ("stale", "claim revision changed", False, True) == (
            stale["state"], stale["state_reason"], stale["source"]["frozen_is_current"],
            stale["target"]["frozen_is_current"])
        assert ("the limit is 10", "the limit is 15") == (
            stale["source"]["frozen"]["statement"], stale["source"]["current"]["statement"])
        assert fresh["source"]["frozen_is_current"] and fresh["target"]["frozen_is_current"]
        result = conflicts(call, include_stale=True)["result"]
        assert (True, "ambient") == (result["include_stale"], result["horizon"])


class TestPagination:
    """An exclusive before_case_sequence cursor walks every case exactly once."""

    def test_pages_cover_every_case_once(self, call: Caller) -> None:
        """Pages of 2 over 5 cases (plus stale history) see each once, newest first."""
        for n in range(4):
            contradict(call, f"left {n}", f"right {n}")
        a, _, _ = contradict(call, "left 4", "right 4")
        revise(call, a, "left 4 v2")
        seen: list[int] = []
        cursor = None
        while True:
            fields: dict[str, Any] = {"limit": 2, "include_stale": True}
            if cursor is not None:
                fields["before_case_sequence"] = cursor
            result = conflicts(call, **fields)["result"]
            seen += [c["case_sequence"] for c in result["conflicts"]]
            if not result["truncated"]:
                assert "next_before_case_sequence" not in result
                break
            cursor = result["next_before_case_sequence"]
        assert [6, 5, 4, 3, 2, 1] == seen

    @pytest.mark.parametrize("fields", [{"limit": 0}, {"limit": 101}, {"before_case_sequence": 0},
                                        {"include_stale": "yes"}, {"unknown": 1}])
    def test_bad_input_is_invalid(self, call: Caller, fields: dict[str, Any]) -> None:
        """Bounds, types and unknown fields are INVALID_REQUEST."""
        assert "INVALID_REQUEST" == conflicts(call, **fields)["error"]["code"]


class TestHorizons:
    """Cases follow their contradiction relation's context; broad reads need a reason."""

    def test_other_projects_cases_need_a_broader_horizon(self, call: Caller) -> None:
        """A sibling project's case is hidden at ambient and shown at workspace with a reason."""
        contradict(call, "s1", "s2", context=SIBLING)
        assert [] == listed(call)
        assert 1 == len(listed(call, horizon="workspace", reason="weekly reconciliation"))

    @pytest.mark.parametrize("horizon", ["workspace", "personal"])
    def test_broad_reads_without_a_reason_are_invalid(self, call: Caller, horizon: str) -> None:
        """A missing or blank reason is INVALID_REQUEST."""
        assert "INVALID_REQUEST" == conflicts(call, horizon=horizon)["error"]["code"]
        assert "INVALID_REQUEST" == conflicts(call, horizon=horizon, reason=" \t")["error"]["code"]

    def test_task_cases_are_hidden_from_other_tasks(self, call: Caller) -> None:
        """A contradiction written in task 1 is not in task 2's queue."""
        contradict(call, "t1", "t2", context={**CTX, "task_id": "tsk_1"})
        assert 1 == len(listed(call, context={**CTX, "task_id": "tsk_1"}))
        assert [] == listed(call, context={**CTX, "task_id": "tsk_2"})

    @pytest.mark.parametrize("horizon,hint", [("ambient", BROADEN_HINTS["ambient"]),
                                              ("workspace", BROADEN_HINTS["workspace"]),
                                              ("personal", None)])
    def test_an_empty_queue_hints_at_the_next_horizon(self, call: Caller, horizon: str, hint: str | None) -> None:
        """The hint names the next broader horizon and is absent at personal."""
        result = conflicts(call, horizon=horizon, reason="r")["result"]
        assert ([], hint) == (result["conflicts"], result.get("broaden_hint"))

    def test_context_is_required(self, call: Caller) -> None:
        """conflict.list needs an ambient context."""
        assert "NO_AMBIENT_CONTEXT" == conflicts(call, context=None)["error"]["code"]
