"""Loading the write-side state deciders need from the entities projection (the handler's I/O)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from memoree.eventlog.events import Scope

from memoree.projections.relations import find_edge

from .relations import RelateState
from .state import AppendState, ArtifactState, ClaimReviseState, ClaimState, PurgeState, RevisionSize

__all__ = [
    "load_append_state", "load_artifact", "load_claim", "load_cited_revisions", "load_claim_revision", "load_nothing",
    "load_purge", "load_purge_state", "load_relate", "load_revision_sizes", "load_target_artifact",
    "load_target_claim",
]


def load_artifact(conn: Any, artifact_id: str) -> ArtifactState | None:
    row = conn.execute(
        "SELECT a.workspace_id, a.project_id, a.task_id, a.component, a.kind, a.status, "
        "a.current_revision_id, a.current_revision_number, r.title, r.media_type, a.stream_version "
        "FROM artifacts a JOIN artifact_revisions r ON r.id = a.current_revision_id WHERE a.id = ?",
        (artifact_id,),
    ).fetchone()
    if row is None:
        return None
    ws, prj, task, component, kind, status, head, number, title, media_type, version = row
    return ArtifactState(
        artifact_id=artifact_id, owner=Scope(ws, prj, task, component), kind=kind, status=status,
        head_revision_id=head, head_revision_number=number, title=title, media_type=media_type,
        stream_version=version,
    )


def load_append_state(conn: Any, inp: Any, prepared: Any) -> AppendState | None:
    """The head of the artifact ``inp.artifact_id`` names and where its current bytes are."""
    artifact_id = inp.artifact_id
    artifact = load_artifact(conn, artifact_id)
    if artifact is None:
        return None
    blob_hash, size, provenance, purged = conn.execute(
        "SELECT r.blob_hash, r.size_bytes, r.provenance_json, a.purged_commit_seq FROM artifacts a "
        "JOIN artifact_revisions r ON r.id = a.current_revision_id WHERE a.id = ?", (artifact_id,),
    ).fetchone()
    return AppendState(artifact=artifact, blob_hash=blob_hash, size_bytes=size,
                       provenance=msgspec.json.decode(provenance), purged=purged is not None)


def load_claim(conn: Any, claim_id: str) -> ClaimState | None:
    row = conn.execute(
        "SELECT workspace_id, project_id, task_id, component, claim_type, status, "
        "current_revision_id, current_revision_number, stream_version FROM claims WHERE id = ?",
        (claim_id,),
    ).fetchone()
    if row is None:
        return None
    ws, prj, task, component, claim_type, status, head, number, version = row
    return ClaimState(
        claim_id=claim_id, owner=Scope(ws, prj, task, component), claim_type=claim_type,
        status=status, head_revision_id=head, head_revision_number=number, stream_version=version,
    )


def load_revision_sizes(conn: Any, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], RevisionSize]:
    """The byte length of every cited ``(artifact_id, revision_id)`` that exists."""
    found: dict[tuple[str, str], RevisionSize] = {}
    for artifact_id, revision_id in set(pairs):
        row = conn.execute(
            "SELECT size_bytes FROM artifact_revisions WHERE id = ? AND artifact_id = ?",
            (revision_id, artifact_id),
        ).fetchone()
        if row is not None:
            found[(artifact_id, revision_id)] = RevisionSize(artifact_id, revision_id, row[0])
    return found


def load_purge_state(conn: Any, artifact_id: str) -> PurgeState | None:
    """The artifact, its blob digests, the digests other live revisions share, whether it is purged."""
    artifact = load_artifact(conn, artifact_id)
    if artifact is None:
        return None
    own = [row[0] for row in conn.execute(
        "SELECT DISTINCT blob_hash FROM artifact_revisions WHERE artifact_id = ?", (artifact_id,))]
    shared = {row[0] for row in conn.execute(
        "SELECT DISTINCT r.blob_hash FROM artifact_revisions r JOIN artifacts a ON a.id = r.artifact_id "
        "WHERE r.artifact_id != ? AND a.purged_commit_seq IS NULL AND r.blob_hash IN "
        "(SELECT blob_hash FROM artifact_revisions WHERE artifact_id = ?)", (artifact_id, artifact_id))}
    purged = conn.execute("SELECT purged_commit_seq FROM artifacts WHERE id = ?", (artifact_id,)).fetchone()[0]
    return PurgeState(artifact=artifact, own_blobs=own, shared_blobs=shared, already_purged=purged is not None)


# --- one loader per command, all ``(conn, input, prepared) -> state`` -----------------------------


def load_nothing(conn: Any, inp: Any, prepared: Any) -> None:
    """For a command that decides on its input alone."""
    return None


def load_target_artifact(conn: Any, inp: Any, prepared: Any) -> ArtifactState | None:
    """The artifact ``inp.artifact_id`` names."""
    return load_artifact(conn, inp.artifact_id)


def load_target_claim(conn: Any, inp: Any, prepared: Any) -> ClaimState | None:
    """The claim ``inp.claim_id`` names."""
    return load_claim(conn, inp.claim_id)


def _evidence_pairs(inp: Any) -> list[tuple[str, str]]:
    return [(loc.artifact_id, loc.revision_id) for loc in inp.evidence]


def load_cited_revisions(conn: Any, inp: Any, prepared: Any) -> dict[tuple[str, str], RevisionSize]:
    """The sizes of the revisions ``inp.evidence`` cites."""
    return load_revision_sizes(conn, _evidence_pairs(inp))


def load_claim_revision(conn: Any, inp: Any, prepared: Any) -> ClaimReviseState | None:
    """The claim to revise and the revisions its new evidence cites; None when it does not exist."""
    claim = load_claim(conn, inp.claim_id)
    revisions = load_revision_sizes(conn, _evidence_pairs(inp))
    return None if claim is None else ClaimReviseState(claim=claim, revisions=revisions)


def load_purge(conn: Any, inp: Any, prepared: Any) -> PurgeState | None:
    """The purge state of the artifact ``inp.artifact_id`` names."""
    return load_purge_state(conn, inp.artifact_id)


def _load_endpoint(conn: Any, entity_type: str, entity_id: str) -> Any:
    return load_artifact(conn, entity_id) if entity_type == "artifact" else load_claim(conn, entity_id)


def load_relate(conn: Any, inp: Any, prepared: Any) -> RelateState:
    """Both endpoints and the identical edge, if one exists."""
    return RelateState(
        source=_load_endpoint(conn, inp.source_type, inp.source_id),
        target=_load_endpoint(conn, inp.target_type, inp.target_id),
        existing=find_edge(conn, inp.source_type, inp.source_id, inp.relation, inp.target_type,
                           inp.target_id),
    )
