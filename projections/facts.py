"""The facts projection (emem): bands, and signed facts indexed by (cell, band, tslot).

``band.registered`` adds a ``fact_bands`` row (a file band keeps its CSV bytes, as the log does).
``fact.attested`` adds a ``facts`` row: the exact canonical CBOR body, whose blake3 must equal the
event's ``fact_cid`` (a mismatch is corruption, not something to repair), the address columns
decoded from that body (``cell``, ``band``, ``tslot``, ``kind``, ``signed_at``), the band's
provenance class, the scope four-tuple's index key (NULL = written without scope), the inclusion
proof and the fact's attestation receipt rebuilt from the event. ``recorded_at`` is the event's
``at`` (when the log took it). Rows are never updated, so replaying the log reproduces them.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from memoree.factplane.emem import cbor
from memoree.factplane.emem.batch_merkle import MerkleProof, proof_to_json
from memoree.factplane.emem.facts import fact_cid_of_cbor
from memoree.factplane.emem.receipts import receipt_to_json
from memoree.errors import IntegrityError
from memoree.eventlog.store import RecordedEvent
from memoree.factplane.identity import attestation_receipt, emem_scope, scope_key

__all__ = ["FactsProjector", "proof_of_event"]

_encode = msgspec.json.Encoder().encode


class FactsProjector:
    name: ClassVar[str] = "facts"
    version: ClassVar[int] = 1
    schema: ClassVar[str] = """
CREATE TABLE IF NOT EXISTS fact_bands (
    band TEXT PRIMARY KEY,
    unit TEXT NOT NULL,
    tempo TEXT NOT NULL,
    provenance_class TEXT NOT NULL,
    source_kind TEXT NOT NULL,
    privacy_class TEXT NOT NULL,
    description TEXT,
    dataset_id TEXT,
    csv_sha256 TEXT,
    radius_m REAL,
    sample_count INTEGER,
    captured_at TEXT,
    csv BLOB,
    registered_at TEXT NOT NULL,
    commit_seq INTEGER NOT NULL UNIQUE
) STRICT;
CREATE TABLE IF NOT EXISTS facts (
    fact_cid TEXT PRIMARY KEY,
    cell TEXT NOT NULL,
    band TEXT NOT NULL,
    tslot INTEGER NOT NULL,
    kind TEXT NOT NULL,
    signed_at TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    provenance_class TEXT NOT NULL,
    scope_key TEXT,
    scope_json TEXT,
    origin TEXT NOT NULL,
    materializer TEXT,
    body BLOB NOT NULL,
    reason_text TEXT,
    key_epoch INTEGER NOT NULL,
    proof_json TEXT NOT NULL,
    receipt_json TEXT NOT NULL,
    commit_seq INTEGER NOT NULL UNIQUE
) STRICT;
CREATE INDEX IF NOT EXISTS facts_by_address ON facts(cell, band, tslot, commit_seq);
CREATE INDEX IF NOT EXISTS facts_by_scope ON facts(scope_key, cell, band, tslot, commit_seq);
"""

    def apply(self, conn: Any, event: RecordedEvent) -> None:
        if event.type == "band.registered":
            _insert_band(conn, event)
        elif event.type == "fact.attested":
            _insert_fact(conn, event)


def _insert_band(conn: Any, event: RecordedEvent) -> None:
    p = event.payload
    f = p.file
    conn.execute(
        "INSERT INTO fact_bands (band, unit, tempo, provenance_class, source_kind, privacy_class, "
        "description, dataset_id, csv_sha256, radius_m, sample_count, captured_at, csv, "
        "registered_at, commit_seq) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (p.band, p.unit, p.tempo, p.provenance_class, p.source_kind, p.privacy_class,
         p.description, f and f.dataset_id, f and f.sha256, f and f.radius_m, f and f.sample_count,
         f and f.captured_at, f and f.csv, event.at, event.commit_seq),
    )


def proof_of_event(payload: Any) -> MerkleProof:
    proof = payload.proof
    return MerkleProof(leaf_index=proof.leaf_index, path=tuple(proof.path), root=proof.root,
                       version=proof.version)


def _insert_fact(conn: Any, event: RecordedEvent) -> None:
    p = event.payload
    if fact_cid_of_cbor(p.fact_cbor) != p.fact_cid:
        raise IntegrityError(f"fact.attested at commit_seq {event.commit_seq}: fact_cid does not "
                             "match the stored CBOR", details={"commit_seq": event.commit_seq})
    body = cbor.decode(p.fact_cbor)  # the cid check above already pins these exact bytes
    if body.get("band") != p.band:
        raise IntegrityError(f"fact.attested at commit_seq {event.commit_seq}: band differs from the body")
    scope = emem_scope(p.scope)
    proof = proof_of_event(p)
    seal = p.receipt
    receipt = attestation_receipt(
        cell=body["cell"], fact_cid=p.fact_cid, proof=proof, scope=scope,
        request_id=seal.request_id, served_at=seal.served_at, primitive=seal.primitive,
        source_versions=seal.source_versions, responder=p.attestation.attester,
        responder_key_epoch=seal.responder_key_epoch, signature=seal.signature,
    )
    conn.execute(
        "INSERT INTO facts (fact_cid, cell, band, tslot, kind, signed_at, recorded_at, "
        "provenance_class, scope_key, scope_json, origin, materializer, body, reason_text, "
        "key_epoch, proof_json, receipt_json, commit_seq) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (p.fact_cid, body["cell"], body["band"], _tslot(body), body["kind"],
         body["signed_at"], event.at, p.provenance_class, scope_key(scope),
         None if scope is None else _encode(scope).decode(), p.origin, p.materializer,
         p.fact_cbor, p.reason_text, p.attestation.attester_key_epoch,
         _encode(proof_to_json(proof)).decode(), _encode(receipt_to_json(receipt)).decode(),
         event.commit_seq),
    )


def _tslot(body: dict[str, Any]) -> int:
    """The valid time a fact is indexed at (a derivative's is the end of its window)."""
    return body["tslot_window"][1] if "tslot_window" in body else body["tslot"]
