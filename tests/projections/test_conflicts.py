"""The conflict-case projection: the spec §4 state machine, derived claim statuses and replay."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from memoree.errors import IntegrityError
from memoree.eventlog.db import sqlite3
from memoree.projections.conflicts import (
    OPENED_REASON,
    REASSESSED_REASON,
    RETRACTED_REASON,
    STALE_REASON,
    SUPERSEDED_REASON,
    derived_id,
)
from tests.conftest import CTX, Caller

_keys = itertools.count(1)


def key() -> str:
    return f"key-{next(_keys)}"


def assert_claim(call: Caller, statement: str, context: dict[str, Any] = CTX) -> dict[str, Any]:
    return call.ok("claim.assert", {"claim_type": "fact", "statement": statement}, key=key(),
                   context=context)["result"]


def revise(call: Caller, claim_id: str, statement: str, context: dict[str, Any] = CTX) -> dict[str, Any]:
    head = call.ok("claim.get", {"claim_id": claim_id}, context=None)["result"]["revision_id"]
    return call.ok("claim.revise", {"claim_id": claim_id, "if_revision": head, "statement": statement},
                   key=key(), context=context)["result"]


def retract(call: Caller, claim_id: str, context: dict[str, Any] = CTX) -> dict[str, Any]:
    return call.ok("claim.retract", {"claim_id": claim_id, "reason": "wrong"}, key=key(),
                   context=context)["result"]


def relate(call: Caller, source_id: str, relation: str, target_id: str, *,
           context: dict[str, Any] = CTX, metadata: dict[str, Any] | None = None,
           source_type: str = "claim", target_type: str = "claim", **kwargs: Any) -> dict[str, Any]:
    payload = {"source_type": source_type, "source_id": source_id, "relation": relation,
               "target_type": target_type, "target_id": target_id}
    if metadata is not None:
        payload["metadata"] = metadata
    kwargs.setdefault("key", key())
    return call("relation.put", payload, context=context, **kwargs)


def status(call: Caller, claim_id: str) -> str:
    return call.ok("claim.get", {"claim_id": claim_id}, context=None)["result"]["status"]


def head_revision(call: Caller, claim_id: str) -> str:
    return call.ok("claim.get", {"claim_id": claim_id}, context=None)["result"]["revision_id"]


def cases(call: Caller) -> list[dict[str, Any]]:
    cursor = call.service.engine.conn.execute("SELECT * FROM conflict_cases ORDER BY case_sequence")
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def case_events(call: Caller, case_id: str) -> list[tuple[str, str, str, str]]:
    return call.service.engine.conn.execute(
        "SELECT event_type, source_revision_id, target_revision_id, reason FROM conflict_events "
        "WHERE case_id = ? ORDER BY event_sequence", (case_id,),
    ).fetchall()


def contradiction(call: Caller) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    left, right = assert_claim(call, "the cache is warm"), assert_claim(call, "the cache is cold")
    relation = relate(call, left["claim_id"], "contradicts", right["claim_id"])
    assert relation["ok"], relation
    return left, right, relation["result"]


class TestOpening:
    """A contradicts relation opens one case that freezes both current revisions."""

    def test_a_contradiction_opens_a_case_over_the_current_revisions(self, call: Caller) -> None:
        """The case holds both revisions, the relation commit and the opening reason."""
        left, right, relation = contradiction(call)
        [case] = cases(call)
        assert (relation["relation_id"], "open", left["revision_id"], right["revision_id"],
                relation["commit_seq"], OPENED_REASON, 1) == (
            case["relation_id"], case["state"], case["source_revision_id"], case["target_revision_id"],
            case["opened_commit_seq"], case["state_reason"], case["case_sequence"])
        assert [("opened", left["revision_id"], right["revision_id"], OPENED_REASON)] == case_events(call, case["case_id"])

    def test_both_sides_become_conflicted(self, call: Caller) -> None:
        """conflicted is derived from the open case on both current revisions."""
        left, right, _ = contradiction(call)
        assert ("conflicted", "conflicted") == (status(call, left["claim_id"]), status(call, right["claim_id"]))

    def test_the_relation_put_result_is_recorded_after_the_lifecycle_effects(self, call: Caller) -> None:
        """relation.put answers with the relation record and its commit."""
        left, right, relation = contradiction(call)
        assert (True, "contradicts", left["claim_id"], right["claim_id"]) == (
            relation["created"], relation["relation"], relation["source_id"], relation["target_id"])

    def test_other_relations_open_no_case(self, call: Caller) -> None:
        """supports, references and the like leave the lifecycle alone."""
        left, right = assert_claim(call, "a"), assert_claim(call, "b")
        for relation in ("supports", "references", "duplicates", "derived_from"):
            assert relate(call, left["claim_id"], relation, right["claim_id"])["ok"]
        assert [] == cases(call)
        assert ("active", "active") == (status(call, left["claim_id"]), status(call, right["claim_id"]))


class TestRevision:
    """Revising a side stales its open case and opens a fresh one over current revisions."""

    def test_revising_a_side_stales_the_case_and_opens_a_new_one(self, call: Caller) -> None:
        """The old case keeps its frozen pair as history; the new one freezes the new revision."""
        left, right, _ = contradiction(call)
        revised = revise(call, left["claim_id"], "the cache is warm after boot")
        first, second = cases(call)
        assert ("stale", STALE_REASON) == (first["state"], first["state_reason"])
        assert (left["revision_id"], right["revision_id"]) == (first["source_revision_id"], first["target_revision_id"])
        assert ("open", REASSESSED_REASON, revised["revision_id"], right["revision_id"], revised["commit_seq"]) == (
            second["state"], second["state_reason"], second["source_revision_id"],
            second["target_revision_id"], second["opened_commit_seq"])
        assert ["opened", "stale"] == [e[0] for e in case_events(call, first["case_id"])]

    def test_the_revise_result_shows_the_claim_still_conflicted(self, call: Caller) -> None:
        """A cosmetic edit cannot hide a live contradiction."""
        left, _, _ = contradiction(call)
        assert "conflicted" == revise(call, left["claim_id"], "reworded")["status"]

    def test_revise_revise_retract_walks_the_cases_to_resolved(self, call: Caller) -> None:
        """open→stale, open→stale, open→resolved, each case frozen on the revisions of its time."""
        left, right, _ = contradiction(call)
        left2 = revise(call, left["claim_id"], "left v2")
        right2 = revise(call, right["claim_id"], "right v2")
        retract(call, left["claim_id"])
        walked = [(c["state"], c["source_revision_id"], c["target_revision_id"]) for c in cases(call)]
        assert [
            ("stale", left["revision_id"], right["revision_id"]),
            ("stale", left2["revision_id"], right["revision_id"]),
            ("resolved", left2["revision_id"], right2["revision_id"]),
        ] == walked
        last = cases(call)[-1]
        assert [("opened", REASSESSED_REASON), ("resolved", RETRACTED_REASON)] == [
            (e[0], e[3]) for e in case_events(call, last["case_id"])]
        assert ("retracted", "active") == (status(call, left["claim_id"]), status(call, right["claim_id"]))

    def test_one_revision_reopens_every_live_contradiction_in_relation_order(self, call: Caller) -> None:
        """A claim in two contradictions gets two new cases, ordered by relation commit."""
        hub, a, b = assert_claim(call, "hub"), assert_claim(call, "a"), assert_claim(call, "b")
        first = relate(call, hub["claim_id"], "contradicts", a["claim_id"])["result"]
        second = relate(call, b["claim_id"], "contradicts", hub["claim_id"])["result"]
        revise(call, hub["claim_id"], "hub v2")
        open_cases = [c for c in cases(call) if c["state"] == "open"]
        assert [first["relation_id"], second["relation_id"]] == [c["relation_id"] for c in open_cases]
        assert {"conflicted"} == {status(call, c) for c in (hub["claim_id"], a["claim_id"], b["claim_id"])}

    def test_no_new_case_when_the_other_side_is_terminal(self, call: Caller) -> None:
        """After the partner is retracted, revising the survivor opens nothing."""
        left, right, _ = contradiction(call)
        retract(call, right["claim_id"])
        revise(call, left["claim_id"], "left v2")
        assert ["resolved"] == [c["state"] for c in cases(call)]
        assert "active" == status(call, left["claim_id"])

    def test_at_most_one_open_case_per_relation(self, call: Caller) -> None:
        """However many revisions happen, each relation has one open case."""
        left, right, _ = contradiction(call)
        for n in range(4):
            revise(call, (left if n % 2 else right)["claim_id"], f"v{n}")
        states = [c["state"] for c in cases(call)]
        assert (1, 4) == (states.count("open"), states.count("stale"))


class TestResolution:
    """Retraction and supersession resolve open cases; statuses follow."""

    def test_retraction_resolves_and_returns_the_other_side_to_active(self, call: Caller) -> None:
        """The case is resolved with the retraction reason; the survivor is active again."""
        left, right, _ = contradiction(call)
        retract(call, left["claim_id"])
        [case] = cases(call)
        assert ("resolved", RETRACTED_REASON) == (case["state"], case["state_reason"])
        assert ("retracted", "active") == (status(call, left["claim_id"]), status(call, right["claim_id"]))

    def test_a_claim_stays_conflicted_while_another_case_is_open(self, call: Caller) -> None:
        """Resolving one of two contradictions leaves the shared claim conflicted."""
        hub, a, b = assert_claim(call, "hub"), assert_claim(call, "a"), assert_claim(call, "b")
        relate(call, hub["claim_id"], "contradicts", a["claim_id"])
        relate(call, hub["claim_id"], "contradicts", b["claim_id"])
        retract(call, a["claim_id"])
        assert ("conflicted", "retracted", "conflicted") == tuple(
            status(call, c["claim_id"]) for c in (hub, a, b))

    def test_supersedes_marks_the_target_and_resolves_its_cases(self, call: Caller) -> None:
        """Source is the newer claim; the older target is superseded and its case resolved."""
        left, right, _ = contradiction(call)
        newer = assert_claim(call, "the cache is warm, measured")
        assert relate(call, newer["claim_id"], "supersedes", left["claim_id"])["ok"]
        [case] = cases(call)
        assert ("resolved", SUPERSEDED_REASON) == (case["state"], case["state_reason"])
        assert ("superseded", "active", "active") == tuple(
            status(call, c["claim_id"]) for c in (left, right, newer))

    @pytest.mark.parametrize("newer_first", [True, False])
    def test_the_supersedes_direction_decides_which_claim_is_marked(self, call: Caller, newer_first: bool) -> None:
        """Reversing the edge's direction marks the other claim: only the target is superseded."""
        one, two = assert_claim(call, "one"), assert_claim(call, "two")
        source, target = (one, two) if newer_first else (two, one)
        assert relate(call, source["claim_id"], "supersedes", target["claim_id"])["ok"]
        assert ("active", "superseded") == (status(call, source["claim_id"]), status(call, target["claim_id"]))

    def test_a_superseded_claim_can_still_be_retracted(self, call: Caller) -> None:
        """superseded → retracted is allowed, and terminal statuses are never recomputed back."""
        one, two = assert_claim(call, "one"), assert_claim(call, "two")
        relate(call, one["claim_id"], "supersedes", two["claim_id"])
        retract(call, two["claim_id"])
        assert "retracted" == status(call, two["claim_id"])

    def test_terminal_claims_are_refused_in_new_lifecycle_edges(self, call: Caller) -> None:
        """A superseded claim cannot be contradicted, nor revised."""
        one, two, three = assert_claim(call, "one"), assert_claim(call, "two"), assert_claim(call, "three")
        relate(call, one["claim_id"], "supersedes", two["claim_id"])
        refused = relate(call, three["claim_id"], "contradicts", two["claim_id"])
        assert "INVALID_REQUEST" == refused["error"]["code"]
        assert [] == cases(call)


class TestDeterminism:
    """Case ids and sequences derive from the log, so replay reproduces every row."""

    def test_derived_ids_are_ulid_shaped_and_reproducible(self) -> None:
        """Same inputs, same id; the time prefix follows the event's at; ordinals differ."""
        at = "2026-03-01T12:00:00.123456Z"
        first = derived_id("ccase", at, 42, 0)
        assert first == derived_id("ccase", at, 42, 0)
        assert first != derived_id("ccase", at, 42, 1) != derived_id("ccase", at, 43, 0)
        assert first.startswith("ccase_") and 26 == len(first.split("_", 1)[1])
        later = derived_id("ccase", "2026-03-01T12:00:01.000000Z", 1, 0)
        assert first.split("_")[1][:10] < later.split("_")[1][:10]

    @pytest.mark.parametrize("names", [None, ["conflicts"], ["relations"], ["entities"]])
    def test_reindex_reproduces_cases_events_and_statuses(self, call: Caller, names: list[str] | None) -> None:
        """Full or partial rebuilds give identical conflict rows and claim statuses."""
        left, right, _ = contradiction(call)
        revise(call, left["claim_id"], "left v2")
        extra = assert_claim(call, "extra")
        relate(call, extra["claim_id"], "contradicts", right["claim_id"])
        relate(call, assert_claim(call, "newest")["claim_id"], "supersedes", extra["claim_id"])
        revise(call, right["claim_id"], "right v2")
        conn = call.service.engine.conn
        queries = ["SELECT * FROM conflict_cases ORDER BY case_sequence",
                   "SELECT * FROM conflict_events ORDER BY event_sequence",
                   "SELECT id, status, current_revision_id FROM claims ORDER BY id",
                   "SELECT * FROM relations ORDER BY relation_commit_seq"]
        before = [conn.execute(q).fetchall() for q in queries]
        call.service.engine.reindex(names)
        assert before == [conn.execute(q).fetchall() for q in queries]

    def test_conflict_events_are_immutable(self, call: Caller) -> None:
        """The change log refuses updates and deletes."""
        contradiction(call)
        conn = call.service.engine.conn
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("UPDATE conflict_events SET reason = 'x'")
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("DELETE FROM conflict_cases")

    def test_reopening_a_closed_pair_is_reported_as_corruption(self, call: Caller) -> None:
        """An identical case that is no longer open cannot be opened again (spec §4.2)."""
        from memoree.projections.conflicts import _EventPass

        left, right, relation = contradiction(call)
        retract(call, left["claim_id"])
        conn = call.service.engine.conn
        conn.execute("UPDATE conflict_claim_heads SET terminal = NULL")
        event = next(iter(call.service.engine.log.read(after=relation["commit_seq"] - 1, limit=1)))
        with pytest.raises(IntegrityError):
            _EventPass(conn, event).open_case(relation["relation_id"], left["claim_id"], right["claim_id"], "again")
