"""conflict.list shows nothing of a sibling task's claim, even through a project-level relation."""

from __future__ import annotations

from tests.conftest import CTX, Caller
from tests.projections.test_conflicts import assert_claim, relate

T1 = {**CTX, "task_id": "t1"}
T2 = {**CTX, "task_id": "t2"}


def test_a_project_level_case_over_a_sibling_tasks_claim_is_hidden_at_the_other_task(call: Caller) -> None:
    """A case between task t2's claim and a project claim, opened at project level: listed at
    the project and at t2, hidden at t1 (whose search does not show the t2 claim either)."""
    secret = assert_claim(call, "t2 internal: the rollout key is blue", T2)["claim_id"]
    public = assert_claim(call, "the rollout key is green", CTX)["claim_id"]
    assert relate(call, secret, "contradicts", public, context=CTX)["ok"]

    def cases(context: dict) -> list[dict]:
        envelope = call("conflict.list", {}, context=context)
        assert envelope["ok"], envelope
        return envelope["result"]["conflicts"]

    assert 1 == len(cases(CTX)) == len(cases(T2))
    at_t1 = cases(T1)
    assert [] == at_t1
    assert "rollout key is blue" not in str(at_t1)
