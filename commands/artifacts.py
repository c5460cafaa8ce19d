"""Deciders for ``artifact.put``, ``artifact.revise``, ``artifact.append`` and ``artifact.forget``: pure.

``prepare_*`` validates the input and decodes its content (before any transaction); ``decide_*``
turns state plus input into the one event the mutation appends, or refuses with a typed error.
"""

from __future__ import annotations

import base64
import binascii

from memoree import limits
from memoree.errors import ContentTooLarge, InvalidRequest, RevisionConflict
from memoree.eventlog.cas import digest_hex
from memoree.eventlog.events import ArtifactCreated, ArtifactForgotten, ArtifactRevised
from memoree.inputs import (
    ArtifactAppendInput,
    ArtifactForgetInput,
    ArtifactPutInput,
    ArtifactReviseInput,
    Base64ContentIn,
    TextContentIn,
    check_id,
    check_json_object,
    check_optional_text,
    check_text,
)

from .context import DecideContext, Decision
from .state import AppendState, ArtifactState, BlobRef

__all__ = [
    "AppendState",
    "compose_append",
    "decide_append",
    "decide_forget",
    "decide_put",
    "decide_revise",
    "decode_content",
    "prepare_forget",
    "prepare_put",
    "prepare_revise",
]


def decode_content(content: TextContentIn | Base64ContentIn) -> BlobRef:
    """The raw bytes of tagged content, bounded by the raw-artifact limit, with their digest."""
    if isinstance(content, TextContentIn):
        try:
            data = content.data.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidRequest("content.data must be valid Unicode text") from None
    else:
        if len(content.data) > limits.MAX_ARTIFACT_BYTES * 4 // 3 + 4:
            raise ContentTooLarge(_too_large_message())
        try:
            data = base64.b64decode(content.data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidRequest("content.data is not valid standard base64 with padding") from None
    if len(data) > limits.MAX_ARTIFACT_BYTES:
        raise ContentTooLarge(_too_large_message(len(data)))
    return BlobRef(data, digest_hex(data))


def _too_large_message(size: int | None = None) -> str:
    got = f" ({size} bytes)" if size is not None else ""
    return (f"content exceeds the configured size limit: artifacts hold at most "
            f"{limits.MAX_ARTIFACT_BYTES} bytes{got}")


def _check_media_type(value: str) -> str:
    check_text("media_type", value, limits.MAX_MEDIA_TYPE_BYTES)
    if "/" not in value:
        raise InvalidRequest("media_type must contain '/' (for example text/markdown)")
    return value


def prepare_put(inp: ArtifactPutInput) -> BlobRef:
    check_text("kind", inp.kind, limits.MAX_KIND_BYTES)
    check_text("title", inp.title, limits.MAX_TITLE_BYTES)
    _check_media_type(inp.media_type)
    check_json_object("provenance", inp.provenance, limits.MAX_METADATA_BYTES)
    check_optional_text("actor", inp.actor, limits.MAX_ACTOR_BYTES)
    return decode_content(inp.content)


def decide_put(state: None, inp: ArtifactPutInput, blob: BlobRef, ctx: DecideContext) -> list[Decision]:
    artifact_id = ctx.new_id("art")
    return [Decision(artifact_id, 1, ArtifactCreated(
        artifact_id=artifact_id, revision_id=ctx.new_id("arev"), kind=inp.kind, title=inp.title,
        media_type=inp.media_type, blob_hash=blob.blob_hash, size_bytes=blob.size,
        provenance=inp.provenance, actor=inp.actor,
    ))]


def prepare_revise(inp: ArtifactReviseInput) -> BlobRef:
    check_id("artifact_id", inp.artifact_id)
    check_id("if_revision", inp.if_revision)
    check_optional_text("title", inp.title, limits.MAX_TITLE_BYTES)
    if inp.media_type is not None:
        _check_media_type(inp.media_type)
    check_json_object("provenance", inp.provenance, limits.MAX_METADATA_BYTES)
    check_optional_text("actor", inp.actor, limits.MAX_ACTOR_BYTES)
    return decode_content(inp.content)


def decide_revise(
    state: ArtifactState, inp: ArtifactReviseInput, blob: BlobRef, ctx: DecideContext
) -> list[Decision]:
    if state.status == "forgotten":
        raise InvalidRequest(f"artifact {state.artifact_id} has been forgotten and cannot be revised")
    if inp.if_revision != state.head_revision_id:
        raise _stale("artifact", state.artifact_id, state.head_revision_id, inp.if_revision)
    return [Decision(state.artifact_id, state.stream_version + 1, ArtifactRevised(
        artifact_id=state.artifact_id, revision_id=ctx.new_id("arev"),
        revision_number=state.head_revision_number + 1, previous_revision_id=state.head_revision_id,
        title=inp.title if inp.title is not None else state.title,
        media_type=inp.media_type if inp.media_type is not None else state.media_type,
        blob_hash=blob.blob_hash, size_bytes=blob.size, provenance=inp.provenance, actor=inp.actor,
    ))]


def prepare_append(inp: ArtifactAppendInput) -> BlobRef:
    check_id("artifact_id", inp.artifact_id)
    check_id("if_revision", inp.if_revision)
    check_optional_text("title", inp.title, limits.MAX_TITLE_BYTES)
    if inp.provenance is not None:
        check_json_object("provenance", inp.provenance, limits.MAX_METADATA_BYTES)
    check_optional_text("actor", inp.actor, limits.MAX_ACTOR_BYTES)
    appended = decode_content(inp.content)
    if not appended.data:
        raise InvalidRequest("content to append must not be empty")
    return appended


def compose_append(current: bytes, appended: BlobRef) -> BlobRef:
    """The new revision's bytes: the current bytes followed by the appended ones, bounded."""
    total = len(current) + appended.size
    if total > limits.MAX_ARTIFACT_BYTES:
        raise ContentTooLarge(_too_large_message(total))
    data = current + appended.data
    return BlobRef(data, digest_hex(data))


def decide_append(state: AppendState, inp: ArtifactAppendInput, blob: BlobRef,
                  ctx: DecideContext) -> list[Decision]:
    """A revision like ``artifact.revise``'s; title and provenance default to the current ones."""
    head = state.artifact
    if head.status == "forgotten":
        raise InvalidRequest(f"artifact {head.artifact_id} has been forgotten and cannot be appended to")
    if inp.if_revision != head.head_revision_id:
        raise _stale("artifact", head.artifact_id, head.head_revision_id, inp.if_revision)
    return [Decision(head.artifact_id, head.stream_version + 1, ArtifactRevised(
        artifact_id=head.artifact_id, revision_id=ctx.new_id("arev"),
        revision_number=head.head_revision_number + 1, previous_revision_id=head.head_revision_id,
        title=inp.title if inp.title is not None else head.title, media_type=head.media_type,
        blob_hash=blob.blob_hash, size_bytes=blob.size,
        provenance=inp.provenance if inp.provenance is not None else state.provenance,
        actor=inp.actor,
    ))]


def prepare_forget(inp: ArtifactForgetInput) -> None:
    check_id("artifact_id", inp.artifact_id)
    check_text("reason", inp.reason, limits.MAX_REASON_BYTES)
    check_optional_text("actor", inp.actor, limits.MAX_ACTOR_BYTES)


def decide_forget(
    state: ArtifactState, inp: ArtifactForgetInput, prepared: None, ctx: DecideContext
) -> list[Decision]:
    if state.status == "forgotten":
        raise InvalidRequest(f"artifact {state.artifact_id} has already been forgotten")
    return [Decision(state.artifact_id, state.stream_version + 1, ArtifactForgotten(
        artifact_id=state.artifact_id, revision_id=state.head_revision_id, reason=inp.reason,
        actor=inp.actor,
    ))]


def _stale(entity: str, entity_id: str, current: str, requested: str) -> RevisionConflict:
    return RevisionConflict(
        f"{entity} {entity_id} is at revision {current}, not {requested}",
        details={"entity_type": entity, "entity_id": entity_id,
                 "current_revision": current, "requested_revision": requested},
    )
