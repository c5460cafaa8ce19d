"""The minimal write-side state deciders need, loaded by the handler from the entities projection."""

from __future__ import annotations

from typing import Any

import msgspec

from memoree.eventlog.events import Scope

__all__ = ["AppendState", "ArtifactState", "BlobRef", "ClaimReviseState", "ClaimState", "PurgeState", "RevisionSize"]


class BlobRef(msgspec.Struct, frozen=True):
    """Content bytes already decoded and hashed (hashing is pure; storing them is not)."""

    data: bytes
    blob_hash: str

    @property
    def size(self) -> int:
        return len(self.data)


class ArtifactState(msgspec.Struct, frozen=True, kw_only=True):
    artifact_id: str
    owner: Scope
    kind: str
    status: str
    head_revision_id: str
    head_revision_number: int
    title: str
    media_type: str
    stream_version: int


class AppendState(msgspec.Struct, frozen=True, kw_only=True):
    """An artifact to append to: its head, where its current bytes are, and its provenance."""

    artifact: ArtifactState
    blob_hash: str
    size_bytes: int
    provenance: dict[str, Any]
    purged: bool


class ClaimState(msgspec.Struct, frozen=True, kw_only=True):
    claim_id: str
    owner: Scope
    claim_type: str
    status: str
    head_revision_id: str
    head_revision_number: int
    stream_version: int


class RevisionSize(msgspec.Struct, frozen=True):
    """An artifact revision that evidence may cite, and its byte length."""

    artifact_id: str
    revision_id: str
    size_bytes: int


class ClaimReviseState(msgspec.Struct, frozen=True, kw_only=True):
    """What ``claim.revise`` decides on: the claim and the revisions its new evidence cites."""

    claim: ClaimState
    revisions: dict[tuple[str, str], RevisionSize]


class PurgeState(msgspec.Struct, frozen=True, kw_only=True):
    """What ``artifact.purge`` decides on: the artifact, its blobs, the blobs other live
    artifacts share (kept), and whether it was purged already."""

    artifact: ArtifactState
    own_blobs: list[str]
    shared_blobs: set[str]
    already_purged: bool
