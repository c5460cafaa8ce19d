"""Loading the write-side state deciders need from the entities projection (the handler's I/O)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from memoree.eventlog.events import Scope

from .state import AppendState, ArtifactState, ClaimState, RevisionSize

__all__ = ["load_append_state", "load_artifact", "load_claim", "load_revision_sizes"]


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


def load_append_state(conn: Any, artifact_id: str) -> AppendState | None:
    """The artifact's head and where its current bytes are (and whether they were purged)."""
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


def load_purge_state(conn: Any, artifact_id: str) -> tuple[ArtifactState, list[str], set[str], bool] | None:
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
    return artifact, own, shared, purged is not None
