"""Which typed result each op returns, for the ``schema`` bundle's ``result_types``."""

from __future__ import annotations

from typing import Any

from memoree.queries.conflicts import ConflictList
from memoree.queries.entities import ArtifactHistory, ClaimHistory
from memoree.queries.records import (
    ArtifactMutationResult,
    ArtifactRecord,
    ClaimMutationResult,
    ClaimRecord,
)
from memoree.queries.relations import RelationList, RelationMutationResult

__all__ = ["RESULT_TYPES"]

RESULT_TYPES: dict[str, Any] = {
    "artifact.put": ArtifactMutationResult,
    "artifact.revise": ArtifactMutationResult,
    "artifact.forget": ArtifactMutationResult,
    "artifact.get": ArtifactRecord,
    "artifact.history": ArtifactHistory,
    "claim.assert": ClaimMutationResult,
    "claim.revise": ClaimMutationResult,
    "claim.retract": ClaimMutationResult,
    "claim.get": ClaimRecord,
    "claim.history": ClaimHistory,
    "relation.put": RelationMutationResult,
    "relation.list": RelationList,
    "conflict.list": ConflictList,
}
