"""The ``artifact.purge`` decider: erase an artifact's bytes, keeping the log verifiable.

Purge goes further than forget: the bytes of every revision leave the CAS and the search index.
Blobs that another live revision shares (content-addressed dedupe) are kept, or that revision
would lose its bytes. The log only ever held digests, so it still verifies; titles, claim
statements and other logged fields are not erased.
"""

from __future__ import annotations

from collections.abc import Sequence

from memoree import limits
from memoree.errors import InvalidRequest
from memoree.eventlog.cas import ContentStore
from memoree.eventlog.events import ArtifactPurged
from memoree.eventlog.store import RecordedEvent
from memoree.inputs import ArtifactPurgeInput, check_id, check_optional_text, check_text

from .context import DecideContext, Decision
from .state import PurgeState

__all__ = ["decide_purge", "erase_inline_blobs", "finish_erasure", "prepare_purge"]


def prepare_purge(inp: ArtifactPurgeInput) -> None:
    check_id("artifact_id", inp.artifact_id)
    check_text("reason", inp.reason, limits.MAX_REASON_BYTES)
    check_optional_text("actor", inp.actor, limits.MAX_ACTOR_BYTES)


def decide_purge(state: PurgeState, inp: ArtifactPurgeInput, prepared: None, ctx: DecideContext) -> list[Decision]:
    artifact = state.artifact
    if state.already_purged:
        raise InvalidRequest(f"artifact {artifact.artifact_id} has already been purged")
    erased = sorted(set(state.own_blobs) - state.shared_blobs)
    return [Decision(artifact.artifact_id, artifact.stream_version + 1, ArtifactPurged(
        artifact_id=artifact.artifact_id, revision_id=artifact.head_revision_id, reason=inp.reason,
        blob_hashes=erased, actor=inp.actor,
    ))]


def erase_inline_blobs(cas: ContentStore, events: Sequence[RecordedEvent]) -> None:
    """Inside the purge's transaction: erase the bytes the database itself holds."""
    for event in events:
        for digest in event.payload.blob_hashes:
            cas.erase_inline(digest)


def finish_erasure(cas: ContentStore, events: Sequence[RecordedEvent]) -> None:
    """After the commit: remove the blob files the purge erased."""
    cas.finish_erasure([digest for event in events for digest in event.payload.blob_hashes])
