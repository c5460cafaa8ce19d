"""The idempotency projection: for every keyed event, the request digest and the result document.

The result of a mutation is a function of the log up to that event, so this projector computes it
right after the entity projections have applied the event and stores the encoded document. A
fresh mutation answers with that same stored document, and an identical replay answers with it
again (``created`` set to false) together with the original ``commit_seq``; a rebuild reproduces
byte-identical documents. Key uniqueness itself is enforced by the log (``events.idempotency_key``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import msgspec

from memoree.eventlog.store import RecordedEvent
from memoree.projections.fact_results import band_registered_result, fact_attested_result
from memoree.projections.records import (
    RETENTION_NOTICE,
    ArtifactMutationResult,
    ClaimMutationResult,
    artifact_record,
    claim_record,
)
from memoree.projections.relations import RelationMutationResult, relation_record

__all__ = ["RESULT_BUILDERS", "IdempotencyProjector", "OP_FOR_EVENT", "stored_result"]

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

_encode = msgspec.json.Encoder().encode


class IdempotencyProjector:
    name: ClassVar[str] = "idempotency"
    version: ClassVar[int] = 2
    # Rows live in commit order (the rowid), so a put appends its ~1 KiB document to the last
    # page; only the small key index takes a random insert (version 1 kept the documents in key
    # order, splitting pages of big rows all over the table).
    schema: ClassVar[str] = """
CREATE TABLE IF NOT EXISTS idempotency_results (
    key TEXT NOT NULL UNIQUE,
    request_digest TEXT NOT NULL,
    operation TEXT NOT NULL,
    commit_seq INTEGER PRIMARY KEY,
    result_json BLOB NOT NULL
) STRICT;
"""

    def apply(self, conn: Any, event: RecordedEvent) -> None:
        builder = RESULT_BUILDERS.get(event.type)
        if event.idempotency_key is None or builder is None:
            return
        conn.execute(
            "INSERT INTO idempotency_results (key, request_digest, operation, commit_seq, result_json) "
            "VALUES (?, ?, ?, ?, ?)",
            (event.idempotency_key, event.request_digest or "", OP_FOR_EVENT.get(event.type, event.type),
             event.commit_seq, _encode(builder(conn, event))),
        )


def stored_result(conn: Any, key: str) -> tuple[str, str, int, bytes] | None:
    """``(request_digest, operation, commit_seq, result_json)`` recorded for a namespaced key."""
    row = conn.execute(
        "SELECT request_digest, operation, commit_seq, result_json FROM idempotency_results WHERE key = ?",
        (key,),
    ).fetchone()
    return None if row is None else (row[0], row[1], row[2], bytes(row[3]))
