"""The decider for ``relation.put``: pure functions over the two endpoints and any identical edge.

``prepare_relate`` checks the input alone (bounds, no self-edge) before any lock;
``authorize_relate`` runs before the idempotency replay (both endpoints exist and lie in the
ambient write scope, pins ignored); ``decide_relate`` runs after it: ``contradicts`` and
``supersedes`` link live claims only, an identical edge with the same metadata is a ``NoOp``
(nothing is appended, the key is still recorded), and one with other metadata is refused.
Lifecycle effects (superseded targets, conflict cases) are projected from the one event, never
decided here.
"""

from __future__ import annotations

import msgspec

from memoree import limits
from memoree.errors import InvalidRequest, NotFound
from memoree.eventlog.events import RelationAdded, Scope
from memoree.inputs import RelationPutInput, check_id, check_json_object
from memoree.projections.relations import RelationMutationResult, RelationRecord
from memoree.eventlog.scope import require_write_scope

from .context import DecideContext, Decision
from .state import ArtifactState, ClaimState

__all__ = [
    "LIFECYCLE_RELATIONS",
    "NoOp",
    "RelateState",
    "authorize_relate",
    "decide_relate",
    "prepare_relate",
]

LIFECYCLE_RELATIONS = frozenset({"contradicts", "supersedes"})
TERMINAL_CLAIM_STATUSES = frozenset({"retracted", "superseded"})

Endpoint = ArtifactState | ClaimState

_canonical = msgspec.json.Encoder(order="sorted").encode


class RelateState(msgspec.Struct, frozen=True, kw_only=True):
    """Both endpoints as the entities projection holds them, and the identical edge if any."""

    source: Endpoint | None
    target: Endpoint | None
    existing: RelationRecord | None = None


class NoOp(msgspec.Struct, frozen=True):
    """A mutation that commits nothing: the existing row's ``commit_seq`` and the result."""

    commit_seq: int
    result: msgspec.Struct


def prepare_relate(inp: RelationPutInput) -> None:
    check_id("source_id", inp.source_id)
    check_id("target_id", inp.target_id)
    check_json_object("metadata", inp.metadata, limits.MAX_METADATA_BYTES)
    if inp.source_type == inp.target_type and inp.source_id == inp.target_id:
        raise InvalidRequest(f"a relation cannot link {inp.source_type} {inp.source_id} to itself")


def authorize_relate(state: RelateState, inp: RelationPutInput, ambient: Scope) -> None:
    """Both endpoints exist (NOT_FOUND) and are writable from ``ambient`` (SCOPE_VIOLATION)."""
    source, target = _endpoints(state, inp)
    require_write_scope(inp.source_type, inp.source_id, source.owner, ambient)
    require_write_scope(inp.target_type, inp.target_id, target.owner, ambient)


def decide_relate(
    state: RelateState, inp: RelationPutInput, ctx: DecideContext
) -> list[Decision] | NoOp:
    source, target = _endpoints(state, inp)
    if inp.relation in LIFECYCLE_RELATIONS:
        _require_claim_to_claim(inp)
    if state.existing is not None:
        return _identical_edge(state.existing, inp)
    if inp.relation in LIFECYCLE_RELATIONS:
        _require_live(source, inp)
        _require_live(target, inp)
    relation_id = ctx.new_id("rel")
    return [Decision(relation_id, 1, RelationAdded(
        relation_id=relation_id, source_type=inp.source_type, source_id=inp.source_id,
        relation=inp.relation, target_type=inp.target_type, target_id=inp.target_id,
        metadata=inp.metadata,
    ))]


def _endpoints(state: RelateState, inp: RelationPutInput) -> tuple[Endpoint, Endpoint]:
    if state.source is None:
        raise NotFound(f"{inp.source_type} {inp.source_id}")
    if state.target is None:
        raise NotFound(f"{inp.target_type} {inp.target_id}")
    return state.source, state.target


def _require_claim_to_claim(inp: RelationPutInput) -> None:
    if inp.source_type != "claim" or inp.target_type != "claim":
        raise InvalidRequest(
            f"{inp.relation} relations link a claim to a claim, not "
            f"{inp.source_type} to {inp.target_type}"
        )


def _require_live(endpoint: Endpoint, inp: RelationPutInput) -> None:
    if isinstance(endpoint, ClaimState) and endpoint.status in TERMINAL_CLAIM_STATUSES:
        raise InvalidRequest(
            f"cannot add a {inp.relation} relation to {endpoint.status} claim {endpoint.claim_id}"
        )


def _identical_edge(existing: RelationRecord, inp: RelationPutInput) -> NoOp:
    if _canonical(existing.metadata) != _canonical(inp.metadata):
        raise InvalidRequest(
            f"relation {existing.relation_id} already links these endpoints as {inp.relation} "
            "with different metadata; relations are immutable"
        )
    result = RelationMutationResult(
        **msgspec.structs.asdict(existing), commit_seq=existing.relation_commit_seq, created=False,
    )
    return NoOp(existing.relation_commit_seq, result)
