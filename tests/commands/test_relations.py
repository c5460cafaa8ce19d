"""Given endpoints, when relation.put, then the event (or no-op) it decides (no I/O anywhere)."""

from __future__ import annotations

import pytest

from memoree.commands import relations
from memoree.commands.relations import NoOp, RelateState
from memoree.commands.state import ArtifactState, ClaimState
from memoree.errors import InvalidRequest, NotFound, ScopeViolation
from memoree.eventlog.events import RelationAdded, Scope
from memoree.inputs import RelationPutInput
from memoree.projections.records import OwnerContext
from memoree.queries.relations import RelationMutationResult, RelationRecord
from tests.commands.test_artifact_deciders import SCOPE, fixed_ctx

FOREIGN = Scope("wsp", "prj_other")


def claim(claim_id: str, status: str = "active", owner: Scope = SCOPE) -> ClaimState:
    return ClaimState(claim_id=claim_id, owner=owner, claim_type="fact", status=status,
                      head_revision_id=f"{claim_id}_r1", head_revision_number=1, stream_version=1)


def artifact(artifact_id: str, owner: Scope = SCOPE) -> ArtifactState:
    return ArtifactState(artifact_id=artifact_id, owner=owner, kind="note", status="active",
                         head_revision_id=f"{artifact_id}_r1", head_revision_number=1, title="t",
                         media_type="text/plain", stream_version=1)


def endpoint(kind: str, entity_id: str) -> ClaimState | ArtifactState:
    return artifact(entity_id) if kind == "artifact" else claim(entity_id)


def put(relation: str = "supports", *, source: tuple[str, str] = ("claim", "clm_a"),
        target: tuple[str, str] = ("claim", "clm_b"), metadata: dict | None = None) -> RelationPutInput:
    return RelationPutInput(source_type=source[0], source_id=source[1], relation=relation,  # type: ignore[arg-type]
                            target_type=target[0], target_id=target[1], metadata=metadata or {})


def existing_edge(metadata: dict, relation: str = "supports") -> RelationRecord:
    return RelationRecord(
        relation_id="rel_old", source_type="claim", source_id="clm_a", relation=relation,
        target_type="claim", target_id="clm_b", metadata=metadata,
        context=OwnerContext(workspace_id="wsp", project_id="prj", pins=[]),
        created_at="2026-01-01T00:00:00.000000Z", relation_commit_seq=7,
    )


def both(source: ClaimState | ArtifactState | None = None, target: ClaimState | ArtifactState | None = None,
         existing: RelationRecord | None = None) -> RelateState:
    return RelateState(source=source or claim("clm_a"), target=target or claim("clm_b"), existing=existing)


class TestInputRules:
    """prepare_relate refuses what the input alone makes invalid."""

    def test_a_self_edge_is_invalid(self) -> None:
        """An edge from an entity to itself is INVALID_REQUEST."""
        with pytest.raises(InvalidRequest):
            relations.prepare_relate(put(source=("claim", "clm_a"), target=("claim", "clm_a")))

    def test_same_id_with_different_types_is_not_a_self_edge(self) -> None:
        """Only the same type and id make a self-edge."""
        relations.prepare_relate(put(source=("artifact", "x"), target=("claim", "x")))

    def test_metadata_over_64_kib_is_invalid(self) -> None:
        """Metadata is bounded as serialized JSON."""
        with pytest.raises(InvalidRequest):
            relations.prepare_relate(put(metadata={"blob": "x" * (64 * 1024)}))


class TestAuthorize:
    """authorize_relate checks existence and write scope of both endpoints (before any replay)."""

    @pytest.mark.parametrize("missing", ["source", "target"])
    def test_a_missing_endpoint_is_not_found(self, missing: str) -> None:
        """Either endpoint absent from the store is NOT_FOUND."""
        state = RelateState(source=None if missing == "source" else claim("clm_a"),
                            target=None if missing == "target" else claim("clm_b"))
        with pytest.raises(NotFound):
            relations.authorize_relate(state, put(), SCOPE)

    @pytest.mark.parametrize("foreign", ["source", "target"])
    def test_an_endpoint_outside_the_write_scope_is_a_scope_violation(self, foreign: str) -> None:
        """Both endpoints must be writable from the ambient context."""
        source = claim("clm_a", owner=FOREIGN if foreign == "source" else SCOPE)
        target = claim("clm_b", owner=FOREIGN if foreign == "target" else SCOPE)
        with pytest.raises(ScopeViolation):
            relations.authorize_relate(both(source, target), put(), SCOPE)

    def test_a_task_context_may_link_project_level_entities(self) -> None:
        """Project-level rows are inside every task of the project."""
        relations.authorize_relate(both(), put(), Scope("wsp", "prj", "tsk_1"))

    def test_another_tasks_entity_is_outside_the_write_scope(self) -> None:
        """A row owned by task 1 is not writable from task 2."""
        source = claim("clm_a", owner=Scope("wsp", "prj", "tsk_1"))
        with pytest.raises(ScopeViolation):
            relations.authorize_relate(both(source), put(), Scope("wsp", "prj", "tsk_2"))


class TestDecide:
    """decide_relate turns a valid edge into one relation.added event."""

    def test_a_new_edge_decides_relation_added_on_its_own_stream(self) -> None:
        """The relation gets a fresh id and stream version 1; metadata is kept as sent."""
        [decision] = relations.decide_relate(both(), put(metadata={"why": "cited"}), fixed_ctx())
        assert ("rel_1", 1) == (decision.stream_id, decision.stream_version)
        assert RelationAdded(relation_id="rel_1", source_type="claim", source_id="clm_a",
                             relation="supports", target_type="claim", target_id="clm_b",
                             metadata={"why": "cited"}) == decision.payload

    def test_artifacts_may_be_linked_by_non_lifecycle_relations(self) -> None:
        """derived_from, supports, references and duplicates accept artifacts."""
        state = both(artifact("art_a"), claim("clm_b"))
        [decision] = relations.decide_relate(state, put("derived_from", source=("artifact", "art_a")), fixed_ctx())
        assert "artifact" == decision.payload.source_type

    @pytest.mark.parametrize("relation", ["contradicts", "supersedes"])
    @pytest.mark.parametrize("kinds", [("artifact", "claim"), ("claim", "artifact"), ("artifact", "artifact")])
    def test_lifecycle_relations_link_claims_only(self, relation: str, kinds: tuple[str, str]) -> None:
        """contradicts and supersedes need a claim on both ends."""
        state = both(endpoint(kinds[0], "e1"), endpoint(kinds[1], "e2"))
        with pytest.raises(InvalidRequest):
            relations.decide_relate(state, put(relation, source=(kinds[0], "e1"), target=(kinds[1], "e2")), fixed_ctx())

    @pytest.mark.parametrize("relation", ["contradicts", "supersedes"])
    @pytest.mark.parametrize("status", ["retracted", "superseded"])
    @pytest.mark.parametrize("side", ["source", "target"])
    def test_lifecycle_relations_refuse_terminal_claims(self, relation: str, status: str, side: str) -> None:
        """A retracted or superseded claim cannot enter a new contradicts/supersedes edge."""
        state = both(claim("clm_a", status if side == "source" else "active"),
                     claim("clm_b", status if side == "target" else "active"))
        with pytest.raises(InvalidRequest):
            relations.decide_relate(state, put(relation), fixed_ctx())

    def test_a_conflicted_claim_may_be_superseded(self) -> None:
        """conflicted is a live status."""
        state = both(claim("clm_a"), claim("clm_b", "conflicted"))
        assert relations.decide_relate(state, put("supersedes"), fixed_ctx())

    def test_other_relations_may_touch_terminal_claims(self) -> None:
        """Only contradicts and supersedes care about the lifecycle."""
        state = both(claim("clm_a", "retracted"), claim("clm_b", "superseded"))
        assert relations.decide_relate(state, put("references"), fixed_ctx())

    def test_decide_also_refuses_missing_endpoints(self) -> None:
        """Called on its own, the decider still answers NOT_FOUND for an absent endpoint."""
        with pytest.raises(NotFound):
            relations.decide_relate(RelateState(source=claim("clm_a"), target=None), put(), fixed_ctx())


class TestIdenticalEdge:
    """An existing edge with the same 5-tuple is a no-op or a refusal, never a second event."""

    def test_same_metadata_is_a_noop_pointing_at_the_existing_row(self) -> None:
        """The existing record comes back with created false and the row's commit_seq."""
        edge = existing_edge({"b": [1, 2], "a": 1})
        decided = relations.decide_relate(both(existing=edge), put(metadata={"a": 1, "b": [1, 2]}), fixed_ctx())
        assert isinstance(decided, NoOp)
        assert 7 == decided.commit_seq
        assert isinstance(decided.result, RelationMutationResult)
        assert ("rel_old", 7, False) == (decided.result.relation_id, decided.result.commit_seq, decided.result.created)

    @pytest.mark.parametrize("metadata", [{"a": 2}, {}, {"a": 1.0}, {"a": True}])
    def test_different_metadata_is_invalid(self, metadata: dict) -> None:
        """Metadata differing in any value (even 1 versus 1.0 or true) is INVALID_REQUEST."""
        with pytest.raises(InvalidRequest):
            relations.decide_relate(both(existing=existing_edge({"a": 1})), put(metadata=metadata), fixed_ctx())

    def test_an_identical_edge_wins_over_a_later_terminal_state(self) -> None:
        """Re-putting an existing supersedes edge returns it, though its target is now superseded."""
        edge = existing_edge({}, "supersedes")
        state = both(claim("clm_a"), claim("clm_b", "superseded"), existing=edge)
        assert isinstance(relations.decide_relate(state, put("supersedes"), fixed_ctx()), NoOp)
