"""The typed results ops return, by name: what the ``schema`` bundle's ``result_types`` describe.

An op declaration (``memoree.protocol.ops``) names its result type; this catalogue resolves the
name. It imports every query module, so only ``schema`` (and MCP) load it, never the call path.
"""

from __future__ import annotations

from typing import Any

from memoree.projections.fact_results import BandMutationResult, FactAttestResult
from memoree.projections.records import (
    ArtifactMutationResult,
    ArtifactRecord,
    ClaimMutationResult,
    ClaimRecord,
)
from memoree.projections.relations import RelationMutationResult
from memoree.queries.browse import ArtifactList, ClaimList
from memoree.queries.citations import CitationResult
from memoree.queries.conflicts import ConflictList
from memoree.queries.context_build import ContextBuildResult
from memoree.queries.entities import ArtifactHistory, ClaimHistory
from memoree.queries.probe import ProbeResult
from memoree.queries.recall import RecallResult
from memoree.queries.relations import RelationList
from memoree.queries.retrieve import RetrieveResult
from memoree.queries.search import SearchResult

__all__ = ["RESULT_TYPES", "result_type"]

RESULT_TYPES: dict[str, Any] = {tp.__name__: tp for tp in (
    ArtifactMutationResult, ArtifactRecord, ArtifactHistory, ClaimMutationResult, ClaimRecord,
    ClaimHistory, RelationMutationResult, RelationList, ConflictList, SearchResult, RecallResult,
    ContextBuildResult, ProbeResult, CitationResult, RetrieveResult, BandMutationResult,
    FactAttestResult, ArtifactList, ClaimList,
)}


def result_type(name: str) -> Any:
    """The result type an op declaration names."""
    return RESULT_TYPES[name]
