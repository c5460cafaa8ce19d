"""Cold recalls of one cell under spellings of one scope, and under two scopes, in one second."""

from __future__ import annotations

from tests.facts.conftest import Clock, FactCaller


def attested(facts: FactCaller) -> int:
    return facts.events().count("fact.attested")


class TestScopeNormalisation:
    """An empty scope string is an absent field: one scope, one fact, never a conflict."""

    def test_empty_agent_id_and_no_agent_id_are_one_scope(self, facts: FactCaller, clock: Clock) -> None:
        """Two cold recalls within a second, scope with agent_id "" then without it: both succeed
        with the same fact, and the log holds one."""
        first = facts.recall(bands=["cell.lat_deg"], scope={"user_id": "2", "agent_id": ""})
        second = facts.recall(bands=["cell.lat_deg"], scope={"user_id": "2"})
        assert first["facts"][0]["fact_cid"] == second["facts"][0]["fact_cid"]
        assert 1 == attested(facts)

    def test_a_second_later_no_duplicate_is_minted(self, facts: FactCaller, clock: Clock) -> None:
        """The same pair a second (and more) apart still resolves to the one fact."""
        first = facts.recall(bands=["cell.lat_deg"], scope={"user_id": "2", "agent_id": ""})
        clock.advance(2)
        second = facts.recall(bands=["cell.lat_deg"], scope={"user_id": "2"})
        assert first["facts"][0]["fact_cid"] == second["facts"][0]["fact_cid"]
        assert 1 == attested(facts)


class TestTwoScopesInOneSecond:
    """Two scopes materializing the same cell in the same second do not fail each other."""

    def test_same_fact_from_two_scopes_is_not_a_conflict(self, facts: FactCaller, clock: Clock) -> None:
        """The second scope's cold recall answers ok (no revision conflict, no 500) and the log
        keeps one fact for the cid both would sign."""
        facts.recall(bands=["cell.lat_deg"], scope={"user_id": "2"})
        other = facts.ok("fact.recall", {"cell": "defi.zb493.xuqA.zcb5f", "bands": ["cell.lat_deg"],
                                         "scope": {"user_id": "3"}}, context=None)
        assert other["ok"], other
        assert 1 == attested(facts)
