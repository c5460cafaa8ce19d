"""Property: random assert/revise/retract/relate sequences keep the §4 invariants and replay exactly."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from memoree.service.service import Service
from tests.conftest import CTX

TASK = {**CTX, "task_id": "tsk_prop"}
CONTEXTS = (CTX, TASK)
TERMINAL = ("retracted", "superseded")
RELATIONS = ("contradicts", "supersedes", "contradicts", "supports", "contradicts")

ASSERT = st.tuples(st.just("assert"), st.integers(0, 1))
REVISE = st.tuples(st.just("revise"), st.integers(0, 50))
RETRACT = st.tuples(st.just("retract"), st.integers(0, 50))
RELATE = st.tuples(st.just("relate"), st.integers(0, 50), st.integers(0, 50), st.sampled_from(RELATIONS),
                   st.integers(0, 1))
# Weighted towards relating and revising so most histories open, stale and resolve cases.
WEIGHTED_KINDS = {"relate": 4, "revise": 3, "assert": 2, "retract": 1}
SHAPES = {"relate": RELATE, "revise": REVISE, "assert": ASSERT, "retract": RETRACT}
OPERATION = st.sampled_from([kind for kind, weight in WEIGHTED_KINDS.items() for _ in range(weight)]).flatmap(
    SHAPES.__getitem__)

REPLAYED_QUERIES = (
    "SELECT * FROM relations ORDER BY relation_commit_seq",
    "SELECT * FROM conflict_cases ORDER BY case_sequence",
    "SELECT * FROM conflict_events ORDER BY event_sequence",
    "SELECT * FROM claims ORDER BY id",
)


class Session:
    """Sends JSON requests to a real service and remembers the claims it created."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.claims: list[str] = []
        self.counter = 0

    def send(self, op: str, payload: dict[str, Any], context: dict[str, Any] | None = CTX) -> dict[str, Any]:
        self.counter += 1
        document: dict[str, Any] = {"v": 1, "request_id": f"req_{self.counter}", "op": op, "input": payload,
                                    "idempotency_key": f"key_{self.counter}"}
        if context is not None:
            document["context"] = context
        return json.loads(self.service.handle_bytes(json.dumps(document).encode()).body)

    def pick(self, index: int) -> str | None:
        return self.claims[index % len(self.claims)] if self.claims else None

    def pick_other(self, index: int, offset: int) -> str:
        """A claim other than ``pick(index)`` (self-edges would only be refused)."""
        n = len(self.claims)
        return self.claims[(index + 1 + offset % (n - 1)) % n]

    def current(self, claim_id: str) -> dict[str, Any]:
        return self.send("claim.get", {"claim_id": claim_id}, context=None)["result"]

    def terminal(self, claim_id: str) -> bool:
        return self.current(claim_id)["status"] in TERMINAL

    def run(self, operation: tuple[Any, ...]) -> None:
        kind = operation[0]
        if kind == "assert":
            reply = self.send("claim.assert", {"claim_type": "fact", "statement": f"s{self.counter}"},
                              context=CONTEXTS[operation[1]])
            self.claims.append(reply["result"]["claim_id"])
            return
        claim_id = self.pick(operation[1])
        if claim_id is None:
            return
        if kind == "revise":
            claim = self.current(claim_id)
            reply = self.send("claim.revise", {"claim_id": claim_id, "if_revision": claim["revision_id"],
                                               "statement": f"r{self.counter}"})
            assert reply["ok"] == (claim["status"] not in TERMINAL), reply
        elif kind == "retract":
            retracted = self.current(claim_id)["status"] == "retracted"
            reply = self.send("claim.retract", {"claim_id": claim_id, "reason": "property"})
            assert reply["ok"] == (not retracted), reply
        else:
            target = self.pick_other(operation[1], operation[2])
            refusable = operation[3] in ("contradicts", "supersedes") and (
                self.terminal(claim_id) or self.terminal(target))
            reply = self.send("relation.put", {"source_type": "claim", "source_id": claim_id,
                                               "relation": operation[3], "target_type": "claim",
                                               "target_id": target}, context=CONTEXTS[operation[4]])
            assert reply["ok"] or (refusable and reply["error"]["code"] == "INVALID_REQUEST"), reply


def rows(service: Service, sql: str) -> list[tuple[Any, ...]]:
    return service.engine.conn.execute(sql).fetchall()


def check_invariants(session: Session) -> None:
    service = session.service
    assert [] == rows(service, "SELECT relation_id FROM conflict_cases WHERE state = 'open' "
                               "GROUP BY relation_id HAVING count(*) > 1")
    listed = session.send("conflict.list", {"horizon": "personal", "reason": "property check", "limit": 100})
    for case in listed["result"]["conflicts"]:
        assert case["source"]["frozen_is_current"] and case["target"]["frozen_is_current"], case
    open_claims = {claim_id for (claim_id,) in rows(
        service, "SELECT source_claim_id FROM conflict_cases WHERE state = 'open' "
                 "UNION SELECT target_claim_id FROM conflict_cases WHERE state = 'open'")}
    for claim_id, status in rows(service, "SELECT id, status FROM claims"):
        assert (status == "conflicted") == (claim_id in open_claims), (claim_id, status)
        if status in ("retracted", "superseded"):
            assert claim_id not in open_claims
    live_contradictions = rows(
        service, "SELECT r.id FROM relations r JOIN claims s ON s.id = r.source_id "
                 "JOIN claims t ON t.id = r.target_id WHERE r.relation = 'contradicts' "
                 "AND s.status IN ('active', 'conflicted') AND t.status IN ('active', 'conflicted')")
    open_relations = rows(service, "SELECT relation_id FROM conflict_cases WHERE state = 'open'")
    assert sorted(live_contradictions) == sorted(open_relations)


class TestConflictProperties:
    """Random histories through the real service keep the conflict invariants and replay exactly."""

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(operations=st.lists(OPERATION, min_size=8, max_size=40))
    def test_invariants_hold_and_reindex_reproduces_rows(self, operations: list[tuple[Any, ...]]) -> None:
        """At most one open case per relation, open cases on current revisions, conflicted iff open,
        and a full reindex reproduces relations, cases, case events and claims row for row."""
        with tempfile.TemporaryDirectory() as folder:
            service = Service(Path(folder) / "data")
            try:
                session = Session(service)
                for operation in [("assert", 0), ("assert", 1), *operations]:
                    session.run(operation)
                    check_invariants(session)
                for (state,) in rows(service, "SELECT DISTINCT state FROM conflict_cases"):
                    event(f"some case {state}")
                before = [rows(service, sql) for sql in REPLAYED_QUERIES]
                service.engine.reindex()
                assert before == [rows(service, sql) for sql in REPLAYED_QUERIES]
                service.engine.reindex(["conflicts"])
                assert before == [rows(service, sql) for sql in REPLAYED_QUERIES]
            finally:
                service.close()
