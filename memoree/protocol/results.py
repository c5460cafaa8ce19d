"""Which typed result each op returns, for the ``schema`` bundle's ``result_types``."""

from __future__ import annotations

from typing import Any

from memoree.queries.conflicts import ConflictList
from memoree.queries.entities import ArtifactHistory, ClaimHistory
from memoree.projections.records import (
    ArtifactMutationResult,
    ArtifactRecord,
    ClaimMutationResult,
    ClaimRecord,
)
from memoree.queries.relations import RelationList, RelationMutationResult
from memoree.queries.citations import CitationResult
from memoree.queries.context_build import ContextBuildResult
from memoree.queries.probe import ProbeResult
from memoree.queries.recall import RecallResult
from memoree.queries.retrieve import RetrieveResult
from memoree.queries.search import SearchResult

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
    "search": SearchResult,
    "memory.recall": RecallResult,
    "context.build": ContextBuildResult,
    "memory.probe": ProbeResult,
    "citation.get": CitationResult,
    "memory.retrieve": RetrieveResult,
}

from memoree.projections.fact_results import BandMutationResult, FactAttestResult  # noqa: E402

RESULT_TYPES.update({"band.register": BandMutationResult, "fact.attest": FactAttestResult})
