"""What an import must change: upstream records against what earlier imports stored. Pure.

A record is matched to the stored artifact carrying its upstream identity (provenance
``external_id``). Same digest and the same current claims: unchanged, nothing is written. A
changed digest: the artifact gets a new revision; its claims are diffed by statement (kept,
revised in order against the removed ones, asserted, or retracted). A stored record the source
no longer has is forgotten only when asked. Upstream relation types map onto the protocol's
where one fits; every other type becomes ``references`` with the upstream type kept in metadata.
Idempotency keys derive from the identities and digests, so an interrupted import that is run
again replays what it had written instead of writing it twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from memoree.agents.caller import canonical_json, derived_key
from memoree.agents.import_formats import Observation, SourceRecord

__all__ = [
    "ClaimChanges", "Edge", "RecordPlan", "StoredArtifact", "StoredClaim", "claim_changes",
    "edges", "import_key", "map_relation", "missing", "plan_records", "provenance",
]

KEY_PREFIX = "import"

# Upstream relation names (normalized: lower case, ``_`` for spaces and dashes) that mean one of
# the protocol's artifact-to-artifact relations. ``contradicts`` and ``supersedes`` join claims
# only, so between imported artifacts they stay ``references`` with the upstream type kept.
_RELATION_TYPES = {
    "derived_from": "derived_from", "derives_from": "derived_from", "based_on": "derived_from",
    "extracted_from": "derived_from", "summarizes": "derived_from",
    "supports": "supports", "evidence_for": "supports",
    "duplicates": "duplicates", "duplicate_of": "duplicates", "same_as": "duplicates",
    "references": "references", "refers_to": "references", "mentions": "references",
    "cites": "references", "links_to": "references", "relates_to": "references",
}


@dataclass(frozen=True)
class StoredArtifact:
    identity: str
    artifact_id: str
    revision_id: str
    digest: str | None


@dataclass(frozen=True)
class StoredClaim:
    claim_id: str
    revision_id: str
    statement: str


@dataclass
class ClaimChanges:
    keep: list[tuple[Observation, StoredClaim]] = field(default_factory=list)
    revise: list[tuple[Observation, StoredClaim]] = field(default_factory=list)
    add: list[Observation] = field(default_factory=list)
    retract: list[StoredClaim] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.revise or self.add or self.retract)


@dataclass
class RecordPlan:
    record: SourceRecord
    action: Literal["create", "revise", "repair", "unchanged"]
    stored: StoredArtifact | None
    claims: ClaimChanges


@dataclass(frozen=True)
class Edge:
    """One protocol relation between two records' artifacts; ``upstream_types`` go in metadata."""

    source: str
    target: str
    relation: str
    upstream_types: tuple[str, ...]

    def metadata(self, fmt: str) -> dict[str, Any]:
        return {"source": fmt, "relation_types": list(self.upstream_types)}


def provenance(fmt: str, record: SourceRecord) -> dict[str, Any]:
    """What an imported artifact records about its origin; ``external_id`` is how it is found again."""
    return {"source": fmt, **record.details, "external_id": record.identity,
            "record_blake3": record.digest()}


def import_key(fmt: str, logical_op: str, *parts: Any) -> str:
    return derived_key(KEY_PREFIX, f"{fmt}.{logical_op}", canonical_json(list(parts)))


def plan_records(records: list[SourceRecord], stored: dict[str, StoredArtifact],
                 claims: dict[str, list[StoredClaim]]) -> list[RecordPlan]:
    """Each record's action against the stored artifact of the same identity and its claims."""
    plans = []
    for record in records:
        found = stored.get(record.identity)
        if found is None:
            plans.append(RecordPlan(record, "create", None, ClaimChanges(add=list(record.observations))))
            continue
        changes = claim_changes(record.observations, claims.get(found.artifact_id, []))
        if found.digest != record.digest():
            action: Literal["revise", "repair", "unchanged"] = "revise"
        else:
            action = "unchanged" if changes.empty else "repair"
        plans.append(RecordPlan(record, action, found, changes))
    return plans


def missing(records: list[SourceRecord], stored: dict[str, StoredArtifact]) -> list[StoredArtifact]:
    """Stored records the source no longer has, oldest identity first."""
    present = {record.identity for record in records}
    return [stored[identity] for identity in sorted(stored) if identity not in present]


def claim_changes(observations: list[Observation], stored: list[StoredClaim]) -> ClaimChanges:
    """Match by statement; the k-th removed claim is revised into the k-th new statement."""
    by_statement = {claim.statement: claim for claim in stored}
    changes = ClaimChanges()
    wanted = {o.statement for o in observations}
    removed = [claim for claim in stored if claim.statement not in wanted]
    for observation in observations:
        claim = by_statement.get(observation.statement)
        if claim is not None:
            changes.keep.append((observation, claim))
        elif removed:
            changes.revise.append((observation, removed.pop(0)))
        else:
            changes.add.append(observation)
    changes.retract = removed
    return changes


def map_relation(upstream_type: str) -> str:
    normalized = upstream_type.strip().lower().replace("-", "_").replace(" ", "_")
    return _RELATION_TYPES.get(normalized) or "references"


def edges(records: list[SourceRecord]) -> list[Edge]:
    """The protocol edges the records' links make: one per (source, target, relation)."""
    grouped: dict[tuple[str, str, str], set[str]] = {}
    for record in records:
        for link in record.links:
            if link.target != record.identity:
                key = (record.identity, link.target, map_relation(link.upstream_type))
                grouped.setdefault(key, set()).add(link.upstream_type)
    return [Edge(source, target, relation, tuple(sorted(types)))
            for (source, target, relation), types in grouped.items()]
