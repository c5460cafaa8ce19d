"""The idempotency projection: for every keyed event, the result document of its mutation.

The result of a mutation is a function of the log up to that event, so this projector computes it
right after the entity projections have applied the event and stores the encoded document. A
fresh mutation answers with that same document, and an identical replay answers with it again
(``created`` set to false) together with the original ``commit_seq``; a rebuild reproduces
byte-identical documents. The key, its request digest and the operation are the log's own
(``events.idempotency_key`` is unique and indexed), so a stored row is only ``(commit_seq,
document)`` and a key is looked up through the log. A new artifact's result is a function of its
``artifact.created`` event alone (nothing else can have touched the artifact yet): it is built from
the event when asked, and nothing is stored for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import msgspec

from memoree.eventlog.codec import decode_envelope, decode_payload
from memoree.eventlog.store import RecordedEvent
from memoree.projections.fact_results import band_registered_result, fact_attested_result
from memoree.projections.records import (
    RETENTION_NOTICE,
    ArtifactMutationResult,
    ClaimMutationResult,
    OwnerContext,
    artifact_record,
    claim_record,
)
from memoree.projections.relations import RelationMutationResult, relation_record

__all__ = ["EVENT_RESULTS", "RESULT_BUILDERS", "IdempotencyProjector", "OP_FOR_EVENT", "result_document", "stored_result"]

ResultBuilder = Callable[[Any, RecordedEvent], msgspec.Struct]

OP_FOR_EVENT = {
    "artifact.created": "artifact.put",
    "artifact.revised": "artifact.revise",
    "artifact.forgotten": "artifact.forget",
    "artifact.purged": "artifact.purge",
    "claim.asserted": "claim.assert",
    "claim.revised": "claim.revise",
    "claim.retracted": "claim.retract",
    "relation.added": "relation.put",
    "band.registered": "band.register",
    "fact.attested": "fact.attest",
}


def _artifact_revision_result(conn: Any, event: RecordedEvent) -> msgspec.Struct:
    p = event.payload
    return artifact_record(conn, p.artifact_id, p.revision_id, ArtifactMutationResult,
                           commit_seq=event.commit_seq, created=True)


def artifact_created_result(event: RecordedEvent) -> msgspec.Struct:
    """``artifact.put``'s result from its event alone: what the entities projection holds for a
    new artifact is exactly the event's fields (a test compares the two)."""
    p, scope = event.payload, event.scope
    return ArtifactMutationResult(
        artifact_id=p.artifact_id, revision_id=p.revision_id, revision_number=1, kind=p.kind,
        title=p.title, media_type=p.media_type, blob_hash=p.blob_hash, size_bytes=p.size_bytes,
        status="active",
        context=OwnerContext(workspace_id=scope.workspace_id, project_id=scope.project_id,
                             task_id=scope.task_id, component=scope.component, pins=[]),
        # as the entities projection stores it (keys sorted) and the record reads it back
        provenance=msgspec.json.decode(_encode_sorted(p.provenance)), actor=p.actor,
        created_at=event.at, revision_created_at=event.at, revision_commit_seq=event.commit_seq,
        commit_seq=event.commit_seq, created=True,
    )


def _artifact_forgotten_result(conn: Any, event: RecordedEvent) -> msgspec.Struct:
    p = event.payload
    return artifact_record(conn, p.artifact_id, p.revision_id, ArtifactMutationResult,
                           commit_seq=event.commit_seq, created=True, physically_erased=False,
                           retention_notice=RETENTION_NOTICE)


def _artifact_purged_result(conn: Any, event: RecordedEvent) -> msgspec.Struct:
    p = event.payload
    return artifact_record(conn, p.artifact_id, p.revision_id, ArtifactMutationResult,
                           commit_seq=event.commit_seq, created=True, physically_erased=True)


def _claim_result(conn: Any, event: RecordedEvent) -> msgspec.Struct:
    return claim_record(conn, event.payload.claim_id, None, ClaimMutationResult,
                        commit_seq=event.commit_seq, created=True)


def _relation_result(conn: Any, event: RecordedEvent) -> msgspec.Struct:
    record = relation_record(conn, event.payload.relation_id)
    return RelationMutationResult(**msgspec.structs.asdict(record), commit_seq=event.commit_seq,
                                  created=True)


RESULT_BUILDERS: dict[str, ResultBuilder] = {
    "artifact.created": _artifact_revision_result,
    "artifact.revised": _artifact_revision_result,
    "artifact.forgotten": _artifact_forgotten_result,
    "artifact.purged": _artifact_purged_result,
    "claim.asserted": _claim_result,
    "claim.revised": _claim_result,
    "claim.retracted": _claim_result,
    "relation.added": _relation_result,
    "band.registered": band_registered_result,
    "fact.attested": fact_attested_result,
}

# Results that are a function of their event alone: built when asked, never stored.
EVENT_RESULTS: dict[str, Callable[[RecordedEvent], msgspec.Struct]] = {
    "artifact.created": artifact_created_result,
}

_encode = msgspec.json.Encoder().encode
_encode_sorted = msgspec.json.Encoder(order="sorted").encode


class IdempotencyProjector:
    name: ClassVar[str] = "idempotency"
    version: ClassVar[int] = 3
    # Rows live in commit order (the rowid), so a mutation appends its document to the last page.
    # Version 2 also kept the key (with its own unique index), the request digest and the
    # operation, which the log's row already holds; version 1 kept the documents in key order.
    schema: ClassVar[str] = """
CREATE TABLE IF NOT EXISTS idempotency_results (
    commit_seq INTEGER PRIMARY KEY,
    result_json BLOB NOT NULL
) STRICT;
"""

    def apply(self, conn: Any, event: RecordedEvent) -> None:
        builder = RESULT_BUILDERS.get(event.type)
        if event.idempotency_key is None or builder is None or event.type in EVENT_RESULTS:
            return
        conn.execute("INSERT INTO idempotency_results (commit_seq, result_json) VALUES (?, ?)",
                     (event.commit_seq, _encode(builder(conn, event))))


def result_document(conn: Any, event: RecordedEvent) -> bytes | None:
    """The result document of a keyed event the projector has applied (None when it records
    none): what the mutation that appended it answers."""
    derived = EVENT_RESULTS.get(event.type)
    if derived is not None:
        return _encode(derived(event))
    row = conn.execute("SELECT result_json FROM idempotency_results WHERE commit_seq = ?",
                       (event.commit_seq,)).fetchone()
    return None if row is None else bytes(row[0])


def stored_result(conn: Any, key: str) -> tuple[str, str, int, bytes] | None:
    """``(request_digest, operation, commit_seq, result_json)`` recorded for a namespaced key."""
    row = conn.execute(
        "SELECT e.request_digest, e.type, e.commit_seq, r.result_json, e.data FROM events e "
        "LEFT JOIN idempotency_results r ON r.commit_seq = e.commit_seq WHERE e.idempotency_key = ?",
        (key,),
    ).fetchone()
    if row is None:
        return None
    digest, type_, commit_seq, stored, data = row
    if stored is not None:
        document = bytes(stored)
    elif type_ in EVENT_RESULTS:
        document = _encode(EVENT_RESULTS[type_](_recorded(commit_seq, bytes(data))))
    else:
        return None
    return digest or "", OP_FOR_EVENT.get(type_, type_), commit_seq, document


def _recorded(commit_seq: int, data: bytes) -> RecordedEvent:
    """The parts of a stored event that a result built from it reads (no chain hashes)."""
    envelope = decode_envelope(data)
    return RecordedEvent(
        commit_seq=commit_seq, event_id=envelope.event_id, type=envelope.type,
        stream_id=envelope.stream_id, stream_version=envelope.stream_version, at=envelope.at,
        scope=envelope.scope, idempotency_key=envelope.idempotency_key,
        request_digest=envelope.request_digest, payload=decode_payload(envelope), data=data,
        prev_hash=b"", hash=b"",
    )
