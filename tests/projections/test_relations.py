"""relation.put through the service: the relations projection, check order and no-op records."""

from __future__ import annotations

import pytest

from memoree.eventlog.db import sqlite3
from tests.conftest import CTX, Caller
from tests.projections.test_conflicts import assert_claim, relate

FOREIGN = {"workspace_id": "wsp_test", "project_id": "prj_elsewhere"}


class TestRelationRows:
    """Each relation.added event projects one immutable row owned by the writer's context."""

    def test_the_row_carries_the_writers_ambient_context(self, call: Caller) -> None:
        """A task context writes task-owned relation rows, even between project-level claims."""
        left, right = assert_claim(call, "a"), assert_claim(call, "b")
        in_task = {**CTX, "task_id": "tsk_1", "component": "api", "pins": ["art_x"]}
        result = relate(call, left["claim_id"], "supports", right["claim_id"], context=in_task,
                        metadata={"note": "n"})["result"]
        assert {"workspace_id": "wsp_test", "project_id": "prj_test", "task_id": "tsk_1",
                "component": "api", "pins": []} == result["context"]
        assert ({"note": "n"}, result["commit_seq"], True) == (
            result["metadata"], result["relation_commit_seq"], result["created"])

    def test_artifact_endpoints_are_accepted(self, call: Caller) -> None:
        """derived_from may point from a claim to an artifact."""
        art = call.put_text("evidence")
        claim = assert_claim(call, "c")
        envelope = relate(call, claim["claim_id"], "derived_from", art["artifact_id"], target_type="artifact")
        assert envelope["ok"], envelope

    @pytest.mark.parametrize("payload_change", [{"relation": "derived-from"}, {"source_type": "note"}, {"extra": 1}])
    def test_malformed_input_is_invalid(self, call: Caller, payload_change: dict) -> None:
        """Unknown relation names, entity types and fields are INVALID_REQUEST."""
        left, right = assert_claim(call, "a"), assert_claim(call, "b")
        payload = {"source_type": "claim", "source_id": left["claim_id"], "relation": "supports",
                   "target_type": "claim", "target_id": right["claim_id"], **payload_change}
        assert "INVALID_REQUEST" == call("relation.put", payload, key="bad")["error"]["code"]


class TestCheckOrder:
    """Existence and write scope are checked before the replay; failures commit nothing."""

    def test_a_foreign_endpoint_is_a_scope_violation_and_commits_nothing(self, call: Caller) -> None:
        """Linking to another project's claim fails with SCOPE_VIOLATION; the log head is unchanged."""
        mine, theirs = assert_claim(call, "mine"), assert_claim(call, "theirs", context=FOREIGN)
        head = call.service.engine.head()
        envelope = relate(call, mine["claim_id"], "contradicts", theirs["claim_id"])
        assert "SCOPE_VIOLATION" == envelope["error"]["code"]
        assert head == call.service.engine.head()

    def test_pins_grant_no_write_scope(self, call: Caller) -> None:
        """A pinned foreign artifact is still read-only."""
        theirs = call.put_text("foreign", context=FOREIGN)
        mine = assert_claim(call, "mine")
        pinned = {**CTX, "pins": [theirs["artifact_id"]]}
        envelope = relate(call, mine["claim_id"], "references", theirs["artifact_id"], target_type="artifact",
                          context=pinned)
        assert "SCOPE_VIOLATION" == envelope["error"]["code"]

    def test_scope_violation_wins_over_an_idempotency_conflict(self, call: Caller) -> None:
        """A reused key with a foreign endpoint reports the scope, not the key."""
        mine, other = assert_claim(call, "mine"), assert_claim(call, "other")
        theirs = assert_claim(call, "theirs", context=FOREIGN)
        assert relate(call, mine["claim_id"], "supports", other["claim_id"], key="shared")["ok"]
        envelope = relate(call, mine["claim_id"], "supports", theirs["claim_id"], key="shared")
        assert "SCOPE_VIOLATION" == envelope["error"]["code"]

    def test_a_missing_endpoint_is_not_found(self, call: Caller) -> None:
        """An unknown claim id is NOT_FOUND and commits nothing."""
        mine = assert_claim(call, "mine")
        head = call.service.engine.head()
        assert "NOT_FOUND" == relate(call, mine["claim_id"], "supports", "clm_missing")["error"]["code"]
        assert head == call.service.engine.head()

    def test_a_self_edge_is_invalid(self, call: Caller) -> None:
        """A claim cannot relate to itself."""
        mine = assert_claim(call, "mine")
        assert "INVALID_REQUEST" == relate(call, mine["claim_id"], "supports", mine["claim_id"])["error"]["code"]

    def test_a_replay_of_a_created_edge_returns_the_original_commit(self, call: Caller) -> None:
        """The same key and request replays with created false and the first commit_seq."""
        left, right = assert_claim(call, "a"), assert_claim(call, "b")
        first = relate(call, left["claim_id"], "supports", right["claim_id"], key="again")
        again = relate(call, left["claim_id"], "supports", right["claim_id"], key="again")
        assert (first["commit_seq"], False) == (again["commit_seq"], again["result"]["created"])


class TestIdenticalEdge:
    """An existing edge is answered without a commit, and its key is still recorded."""

    def put_twice(self, call: Caller, metadata: dict | None = None) -> tuple[dict, dict, int]:
        left, right = assert_claim(call, "a"), assert_claim(call, "b")
        first = relate(call, left["claim_id"], "supports", right["claim_id"], metadata={"w": 1}, key="first")
        head = call.service.engine.head()
        second = relate(call, left["claim_id"], "supports", right["claim_id"],
                        metadata={"w": 1} if metadata is None else metadata, key="second")
        return first, second, head

    def test_identical_edge_returns_the_existing_row_without_a_commit(self, call: Caller) -> None:
        """created false, the existing relation and commit_seq, and the log head unchanged."""
        first, second, head = self.put_twice(call)
        assert (first["result"]["relation_id"], first["commit_seq"], False) == (
            second["result"]["relation_id"], second["commit_seq"], second["result"]["created"])
        assert first["commit_seq"] == second["result"]["commit_seq"]
        assert head == call.service.engine.head()

    def test_the_noop_key_is_recorded_and_replays(self, call: Caller) -> None:
        """Replaying the no-op's key returns the same document; another request under it conflicts."""
        left, right = assert_claim(call, "a"), assert_claim(call, "b")
        relate(call, left["claim_id"], "supports", right["claim_id"], key="first")
        noop = relate(call, left["claim_id"], "supports", right["claim_id"], key="second")
        replayed = relate(call, left["claim_id"], "supports", right["claim_id"], key="second")
        assert (noop["commit_seq"], noop["result"]) == (replayed["commit_seq"], replayed["result"])
        conflict = relate(call, right["claim_id"], "supports", left["claim_id"], key="second")
        assert "IDEMPOTENCY_CONFLICT" == conflict["error"]["code"]
        [row] = call.service.engine.conn.execute(
            "SELECT operation, commit_seq FROM idempotency_noops").fetchall()
        assert ("relation.put", noop["commit_seq"]) == row

    def test_a_noop_record_survives_reindex(self, call: Caller) -> None:
        """The no-op table is authoritative, not a projection: a rebuild keeps it and replays still work."""
        first, second, head = self.put_twice(call)
        call.service.engine.reindex()
        left, right = first["result"]["source_id"], first["result"]["target_id"]
        replayed = relate(call, left, "supports", right, metadata={"w": 1}, key="second")
        assert (second["commit_seq"], second["result"]) == (replayed["commit_seq"], replayed["result"])
        assert 1 == call.service.engine.conn.execute("SELECT count(*) FROM idempotency_noops").fetchone()[0]
        assert head == call.service.engine.head()

    def test_noop_records_are_append_only(self, call: Caller) -> None:
        """Updates and deletes of no-op records abort."""
        self.put_twice(call)
        conn = call.service.engine.conn
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("DELETE FROM idempotency_noops")
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("UPDATE idempotency_noops SET commit_seq = 1")

    def test_different_metadata_is_invalid_and_records_nothing(self, call: Caller) -> None:
        """The same 5-tuple with other metadata is INVALID_REQUEST; no key is recorded."""
        _, second, head = self.put_twice(call, metadata={"w": 2})
        assert "INVALID_REQUEST" == second["error"]["code"]
        assert head == call.service.engine.head()
        assert 0 == call.service.engine.conn.execute("SELECT count(*) FROM idempotency_noops").fetchone()[0]

    def test_the_reverse_direction_is_a_different_edge(self, call: Caller) -> None:
        """Edges are directed: b→a is new even when a→b exists."""
        left, right = assert_claim(call, "a"), assert_claim(call, "b")
        relate(call, left["claim_id"], "supports", right["claim_id"])
        assert relate(call, right["claim_id"], "supports", left["claim_id"])["result"]["created"]
