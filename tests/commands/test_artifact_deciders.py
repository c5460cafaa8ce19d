"""Given state, when an artifact command, then the events it decides (no I/O anywhere)."""

from __future__ import annotations

import itertools

import pytest

from memoree.commands import artifacts
from memoree.commands.context import DecideContext
from memoree.commands.state import ArtifactState
from memoree.errors import ContentTooLarge, InvalidRequest, RevisionConflict
from memoree.eventlog.events import ArtifactCreated, ArtifactForgotten, ArtifactRevised, Scope
from memoree.inputs import ArtifactForgetInput, ArtifactPutInput, ArtifactReviseInput, Base64ContentIn, TextContentIn
from memoree import limits

SCOPE = Scope("wsp", "prj")


def fixed_ctx() -> DecideContext:
    counter = itertools.count(1)
    return DecideContext(now="2026-01-01T00:00:00.000000Z",
                         new_id=lambda prefix: f"{prefix}_{next(counter)}", scope=SCOPE)


def state(**overrides: object) -> ArtifactState:
    fields = dict(artifact_id="art_1", owner=SCOPE, kind="note", status="active",
                  head_revision_id="arev_1", head_revision_number=1, title="Old", media_type="text/plain",
                  stream_version=1)
    fields.update(overrides)
    return ArtifactState(**fields)  # type: ignore[arg-type]


def revise_input(**overrides: object) -> ArtifactReviseInput:
    fields = dict(artifact_id="art_1", if_revision="arev_1", content=TextContentIn("new"))
    fields.update(overrides)
    return ArtifactReviseInput(**fields)  # type: ignore[arg-type]


class TestPut:
    def test_put_creates_artifact_with_first_revision(self) -> None:
        """A put decides one artifact.created event on a new stream at version 1."""
        inp = ArtifactPutInput(kind="note", title="T", content=TextContentIn("hi"))
        blob = artifacts.prepare_put(inp)
        [decision] = artifacts.decide_put(None, inp, blob, fixed_ctx())
        assert ("art_1", 1) == (decision.stream_id, decision.stream_version)
        assert ArtifactCreated(artifact_id="art_1", revision_id="arev_2", kind="note", title="T",
                               media_type="text/plain; charset=utf-8", blob_hash=blob.blob_hash,
                               size_bytes=2) == decision.payload

    def test_base64_content_is_decoded_to_bytes(self) -> None:
        """Base64 content is stored as the bytes it encodes."""
        blob = artifacts.decode_content(Base64ContentIn("AAEC/w=="))
        assert b"\x00\x01\x02\xff" == blob.data

    def test_invalid_base64_is_refused(self) -> None:
        """Base64 that is not standard-with-padding is INVALID_REQUEST."""
        with pytest.raises(InvalidRequest):
            artifacts.decode_content(Base64ContentIn("not base64!"))

    def test_content_over_the_raw_limit_is_too_large(self) -> None:
        """Decoded content above the raw artifact limit is CONTENT_TOO_LARGE."""
        with pytest.raises(ContentTooLarge):
            artifacts.decode_content(TextContentIn("x" * (limits.MAX_ARTIFACT_BYTES + 1)))

    @pytest.mark.parametrize("field,value", [("kind", "  "), ("title", ""), ("media_type", "plain")])
    def test_bad_metadata_is_refused(self, field: str, value: str) -> None:
        """Blank kind or title and a media type without '/' are INVALID_REQUEST."""
        fields = {"kind": "note", "title": "T", "content": TextContentIn("x"), field: value}
        with pytest.raises(InvalidRequest):
            artifacts.prepare_put(ArtifactPutInput(**fields))  # type: ignore[arg-type]


class TestRevise:
    def test_revise_keeps_title_and_media_type_but_not_provenance(self) -> None:
        """An omitted title or media type is inherited; provenance is not."""
        inp = revise_input()
        [decision] = artifacts.decide_revise(state(), inp, artifacts.prepare_revise(inp), fixed_ctx())
        payload = decision.payload
        assert isinstance(payload, ArtifactRevised)
        assert ("Old", "text/plain", {}, 2, 2) == (
            payload.title, payload.media_type, payload.provenance, payload.revision_number,
            decision.stream_version)

    def test_stale_if_revision_is_a_revision_conflict(self) -> None:
        """Revising from a revision that is no longer the head names both revisions."""
        inp = revise_input(if_revision="arev_0")
        with pytest.raises(RevisionConflict) as caught:
            artifacts.decide_revise(state(), inp, artifacts.prepare_revise(inp), fixed_ctx())
        assert {"entity_type": "artifact", "entity_id": "art_1", "current_revision": "arev_1",
                "requested_revision": "arev_0"} == caught.value.details

    def test_forgotten_artifact_cannot_be_revised(self) -> None:
        """A forgotten artifact refuses revision before the revision check."""
        inp = revise_input(if_revision="arev_0")
        with pytest.raises(InvalidRequest):
            artifacts.decide_revise(state(status="forgotten"), inp, artifacts.prepare_revise(inp), fixed_ctx())


class TestForget:
    def test_forget_records_reason_against_head(self) -> None:
        """Forget decides one tombstone event naming the head revision and the reason."""
        inp = ArtifactForgetInput(artifact_id="art_1", reason="obsolete")
        [decision] = artifacts.decide_forget(state(), inp, None, fixed_ctx())
        assert ArtifactForgotten(artifact_id="art_1", revision_id="arev_1", reason="obsolete") == decision.payload

    def test_forget_requires_a_reason(self) -> None:
        """A blank reason is INVALID_REQUEST."""
        with pytest.raises(InvalidRequest):
            artifacts.prepare_forget(ArtifactForgetInput(artifact_id="art_1", reason=" "))

    def test_forgetting_twice_is_refused(self) -> None:
        """An already forgotten artifact cannot be forgotten again."""
        with pytest.raises(InvalidRequest):
            artifacts.decide_forget(state(status="forgotten"), ArtifactForgetInput(artifact_id="art_1", reason="x"), None, fixed_ctx())
