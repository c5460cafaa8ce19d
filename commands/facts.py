"""The write side of the signed fact plane: ``band.register``, ``fact.attest``, materialized facts.

``band.register`` and ``fact.attest`` are protocol mutations: each appends exactly one event
through the command handler (idempotency key, one transaction). Their deciders are pure: the node
key is fetched (its epoch recorded in the log) in ``prepare``, before the transaction, and Ed25519
is deterministic, so a decider's events are a function of (state, input, key, context).

A recall that fills a cold band is not a protocol mutation (emem's contract has no idempotency
key for it), but it is a write: ``append_facts`` appends one ``fact.attested`` event per
materialized fact, all in one transaction, applying the sync projectors, with no idempotency key.
It re-checks each address inside that transaction, so a fact is never minted twice for it.

Every fact is signed alone: a single-fact v1 attestation (batch root = promote(leaf), empty
proof path) and a v2 attestation receipt (primitive ``emem.attest``) whose signature the event
records, so the projection rebuilds the receipt byte-for-byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, NamedTuple

import msgspec
from msgspec import UNSET

from memoree.factplane.emem import cell64, tslot as tslots
from memoree.factplane.emem.attestation import attest_facts
from memoree.factplane.emem.errors import InvalidCell
from memoree.factplane.emem.facts import (
    Derivation,
    Fact,
    PrimaryFact,
    Source,
    absence_fact,
    fact_cbor,
    fact_cid,
)
from memoree.factplane.emem.receipts import Scope as EmemScope
from memoree.factplane.emem.receipts import sign_receipt
from memoree.errors import InvalidRequest
from memoree.eventlog.events import (
    BandFile,
    BandRegistered,
    FactAttestationRecord,
    FactAttested,
    FactProofRecord,
    FactReceiptSeal,
    FactScope,
)
from memoree.eventlog.keys import NodeKey
from memoree.eventlog.store import NewEvent
from memoree.eventlog.timefmt import parse_rfc3339
from memoree.factplane.identity import (
    ATTEST_PRIMITIVE,
    PRIVACY_PUBLIC,
    REGISTRABLE_CLASSES,
    SCHEMA_CID,
    SCHEME_AGENT,
    Band,
    attestation_receipt,
    check_band_name,
    emem_scope,
    fact_error,
)
from memoree.inputs import BandRegisterInput, FactAttestInput, check_optional_text, check_text
from memoree.factplane.materializers import csv_sha256, parse_samples
from memoree.projections.base import apply_events

from .context import DecideContext, Decision
from .relations import NoOp

__all__ = [
    "AttestState",
    "BandState",
    "SigningPlan",
    "append_facts",
    "decide_attest",
    "decide_band_register",
    "prepare_attest",
    "prepare_band",
    "sign_fact",
]

MAX_UNIT_BYTES = 64
MAX_DESCRIPTION_BYTES = 4096
MAX_SCOPE_FIELD_BYTES = 256
MAX_SOURCE_TEXT_BYTES = 2048
MAX_VECTOR_LENGTH = 4096
ATTEST_FN_KEY = "memoree.attest@1"


# --- signing (deterministic given the key) --------------------------------------------------------


class SigningPlan(NamedTuple):
    """Everything a fact's signature binds besides the fact: key, manifests, receipt identity."""

    key: NodeKey
    source_versions: dict[str, str]
    request_id: str
    served_at: str


def signed_at_of(instant: str) -> str:
    """A stored instant (``...HH:MM:SS.ffffffZ``) as emem's second-precision ``...HH:MM:SSZ``."""
    return instant[:19] + "Z"


def receipt_request_id(minted: str) -> str:
    """A ULID for a receipt's request_id: the id minter's ULID without its prefix."""
    return minted.partition("_")[2] or minted


def sign_fact(fact: Fact, plan: SigningPlan, *, provenance_class: str, origin: str,
              scope: EmemScope | None, materializer: str | None = None,
              reason_text: str | None = None, actor: str | None = None) -> FactAttested:
    """Attest one fact alone and seal its receipt; returns the event payload."""
    sv = plan.source_versions
    seed, epoch = plan.key.seed, plan.key.epoch
    batch = attest_facts([fact], key=seed, registry_cid=sv["registry_cid"],
                         schema_cid=sv["schema_cid"], key_epoch=epoch)
    cid = fact_cid(fact)
    proof = batch.proofs[cid]
    unsigned = attestation_receipt(
        cell=fact.cell, fact_cid=cid, proof=proof, scope=scope, request_id=plan.request_id,
        served_at=plan.served_at, primitive=ATTEST_PRIMITIVE, source_versions=sv,
        responder=batch.attester, responder_key_epoch=epoch,
    )
    receipt = sign_receipt(unsigned, seed, key_epoch=epoch)
    return FactAttested(
        fact_cid=cid, fact_cbor=fact_cbor(fact), band=fact.band,
        provenance_class=provenance_class, origin=origin,
        attestation=FactAttestationRecord(
            batch_root=batch.batch_root, attester=batch.attester, attester_key_epoch=epoch,
            registry_cid=batch.registry_cid, schema_cid=batch.schema_cid,
            signature=batch.signature, preimage_version=batch.preimage_version,
        ),
        proof=FactProofRecord(leaf_index=proof.leaf_index, path=list(proof.path),
                              root=proof.root, version=proof.version),
        receipt=FactReceiptSeal(request_id=plan.request_id, served_at=plan.served_at,
                                primitive=ATTEST_PRIMITIVE, source_versions=dict(sv),
                                responder_key_epoch=epoch, signature=receipt.signature),
        scope=None if scope is None else FactScope(**msgspec.to_builtins(scope)),
        materializer=materializer, reason_text=reason_text, actor=actor,
    )


def fact_stream(cid: str) -> str:
    return f"fact:{cid}"


# --- band.register ----------------------------------------------------------------------------------


class PreparedBand(NamedTuple):
    file: BandFile | None


class BandState(NamedTuple):
    existing: Band | None
    existing_result: Any  # the recorded result of the existing registration, for a NoOp


def prepare_band(inp: BandRegisterInput) -> PreparedBand:
    """Input-only checks (before any lock): the name, unit, class, and a file band's CSV."""
    check_band_name(inp.band, for_registration=True)
    check_text("unit", inp.unit, MAX_UNIT_BYTES)
    check_optional_text("description", inp.description, MAX_DESCRIPTION_BYTES)
    if inp.provenance_class not in REGISTRABLE_CLASSES:
        raise fact_error("invalid_argument", "direct_sensor is reserved for real instrument "
                         "products served by an upstream materializer; a band registered here "
                         "is local (use deterministic_index, model_output, human_curated, ...)",
                         field="provenance_class")
    if inp.file is None:
        return PreparedBand(None)
    if inp.tempo != "static":
        raise fact_error("invalid_argument", "a CSV file band has no time column: its tempo is static",
                         field="tempo")
    spec = inp.file
    check_text("file.dataset_id", spec.dataset_id, 256)
    if not (spec.radius_m > 0 and spec.radius_m <= 20_037_509):
        raise fact_error("invalid_argument", "file.radius_m must be > 0 and at most half the "
                         "Earth's circumference", field="file.radius_m")
    if spec.captured_at is not None:
        _check_instant("file.captured_at", spec.captured_at)
    data = spec.csv.encode("utf-8")
    samples = parse_samples(data)
    return PreparedBand(BandFile(dataset_id=spec.dataset_id, csv=data, sha256=csv_sha256(data),
                                 sample_count=len(samples), radius_m=float(spec.radius_m),
                                 captured_at=spec.captured_at and _utc_second(spec.captured_at)))


def decide_band_register(state: BandState, inp: BandRegisterInput, prepared: PreparedBand,
                         ctx: DecideContext) -> list[Decision] | NoOp:
    payload = BandRegistered(
        band=inp.band, unit=inp.unit, tempo=inp.tempo, provenance_class=inp.provenance_class,
        source_kind="attested" if prepared.file is None else "file", privacy_class=PRIVACY_PUBLIC,
        description=inp.description, file=prepared.file, actor=inp.actor,
    )
    existing = state.existing
    if existing is not None:
        if existing.source_kind == "builtin" or existing.commit_seq is None:
            raise fact_error("invalid_argument", f"band {inp.band} is built in", field="band")
        if _same_band(existing, payload):
            return NoOp(commit_seq=existing.commit_seq, result=state.existing_result)
        raise InvalidRequest(f"band {inp.band} is already registered with another definition; "
                             "bands are immutable: register a new name",
                             details={"emem_code": "invalid_argument", "band": inp.band})
    return [Decision(stream_id=f"band:{inp.band}", stream_version=1, payload=payload)]


def _same_band(existing: Band, payload: BandRegistered) -> bool:
    file = payload.file
    return (existing.unit, existing.tempo, existing.provenance_class, existing.source_kind,
            existing.description, existing.csv_sha256, existing.radius_m) == (
        payload.unit, payload.tempo, payload.provenance_class, payload.source_kind,
        payload.description, file and file.sha256, file and file.radius_m)


# --- fact.attest ------------------------------------------------------------------------------------


class PreparedAttest(NamedTuple):
    key: NodeKey
    observed_unix: int | None
    source: Source | None


class AttestState(NamedTuple):
    band: Band | None
    source_versions: dict[str, str]
    existing: Any  # callable: fact_cid -> (commit_seq, result) of an identical earlier fact, or None


def prepare_attest(inp: FactAttestInput, key: NodeKey) -> PreparedAttest:
    """Input-only checks: cell, band key, value shape, time, source, scope field sizes."""
    try:
        cell64.validate(inp.cell)
    except InvalidCell as exc:
        raise fact_error("invalid_cell", f"cell: {exc}", field="cell") from None
    check_band_name(inp.band)
    _check_value(inp.value)
    if not 0.0 <= inp.confidence <= 1.0:
        raise fact_error("invalid_argument", "confidence must be between 0 and 1", field="confidence")
    if inp.tslot is not None and not 0 <= inp.tslot < 1 << 63:
        raise fact_error("invalid_argument", "tslot must be between 0 and 2^63-1", field="tslot")
    observed = None if inp.observed_at is None else _check_instant("observed_at", inp.observed_at)
    for name in ("user_id", "agent_id", "run_id", "org_id"):
        check_optional_text(f"scope.{name}", getattr(inp.scope, name, None), MAX_SCOPE_FIELD_BYTES)
    return PreparedAttest(key=key, observed_unix=observed, source=_source(inp))


def _check_value(value: Any) -> None:
    if isinstance(value, list):
        if not value or len(value) > MAX_VECTOR_LENGTH:
            raise fact_error("invalid_argument", f"a vector value needs 1 to {MAX_VECTOR_LENGTH} numbers",
                             field="value")
    elif isinstance(value, str):
        check_text("value", value, 256)
    for number in value if isinstance(value, list) else [value]:
        if isinstance(number, float) and number != number:  # NaN cannot reach JSON, but be sure
            raise fact_error("invalid_argument", "value must be finite", field="value")
        if isinstance(number, int) and not -(1 << 63) <= number < 1 << 64:
            raise fact_error("invalid_argument", "integer values must fit 64 bits", field="value")


def _check_instant(name: str, text: str) -> int:
    try:
        stored = parse_rfc3339(text)
    except ValueError:
        raise fact_error("invalid_signed_at_format", f"{name} must be an RFC 3339 timestamp",
                         field=name) from None
    moment = datetime.strptime(stored, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return int(moment.timestamp())


def _utc_second(text: str) -> str:
    return signed_at_of(parse_rfc3339(text))


def _source(inp: FactAttestInput) -> Source | None:
    if inp.source is None:
        return None
    spec = inp.source
    check_text("source.scheme", spec.scheme, 128)
    check_text("source.id", spec.id, MAX_SOURCE_TEXT_BYTES)
    check_optional_text("source.url", spec.url, MAX_SOURCE_TEXT_BYTES)
    fields: dict[str, Any] = {"scheme": spec.scheme, "id": spec.id}
    if spec.captured_at is not None:
        _check_instant("source.captured_at", spec.captured_at)
        fields["captured_at"] = _utc_second(spec.captured_at)
    if spec.url is not None:
        fields["url"] = spec.url
    return Source(**fields)


def attest_tslot(band: Band, inp: FactAttestInput, observed_unix: int | None, now_unix: int) -> int:
    """The fact's slot: 0 for static bands; else the given tslot, the observation's, or now's."""
    if band.tempo == "static":
        if inp.tslot not in (None, 0):
            raise fact_error("tslot_mismatch", f"band {band.name} is static: its only tslot is 0",
                             field="tslot")
        return 0
    from_time = tslots.tslot_for(observed_unix if observed_unix is not None else now_unix, band.tempo)
    if inp.tslot is not None and observed_unix is not None and inp.tslot != from_time:
        raise fact_error("tslot_mismatch", f"tslot {inp.tslot} is not the {band.tempo} slot of "
                         f"observed_at ({from_time})", field="tslot")
    return inp.tslot if inp.tslot is not None else from_time


def decide_attest(state: AttestState, inp: FactAttestInput, prepared: PreparedAttest,
                  ctx: DecideContext) -> list[Decision] | NoOp:
    band = state.band
    if band is None:
        raise fact_error("band_not_in_registry", f"band {inp.band} is not registered here; register "
                         "it first with band.register", field="band")
    if band.source_kind != "attested":
        raise fact_error("invalid_argument", f"band {inp.band} is filled by its materializer "
                         f"({band.source_kind}); agents attest only bands registered for it",
                         field="band")
    if inp.unit is not None and inp.unit != band.unit:
        raise fact_error("invalid_argument", f"unit {inp.unit!r} differs from band {band.name}'s "
                         f"unit {band.unit!r}", field="unit")
    signed_at = signed_at_of(ctx.now)
    now_unix = int(datetime.strptime(signed_at, "%Y-%m-%dT%H:%M:%SZ")
                   .replace(tzinfo=timezone.utc).timestamp())
    key = prepared.key
    source = prepared.source or Source(scheme=SCHEME_AGENT,
                                       id=f"{ctx.scope.workspace_id}/{ctx.scope.project_id}")
    fact = PrimaryFact(
        cell=inp.cell, band=band.name, tslot=attest_tslot(band, inp, prepared.observed_unix, now_unix),
        value=inp.value, unit=band.unit or UNSET, confidence=inp.confidence, sources=[source],
        derivation=Derivation(fn_key=ATTEST_FN_KEY), privacy_class=band.privacy_class,
        schema_cid=SCHEMA_CID, signer=key.public_key, signed_at=signed_at,
    )
    existing = state.existing(fact_cid(fact))
    if existing is not None:  # the same fact, signed in the same second: nothing new to record
        return NoOp(commit_seq=existing.commit_seq, result=existing)
    plan = SigningPlan(key=key, source_versions=state.source_versions,
                       request_id=receipt_request_id(ctx.new_id("req")), served_at=signed_at)
    payload = sign_fact(fact, plan, provenance_class=band.provenance_class, origin="attested",
                        scope=emem_scope(inp.scope), actor=inp.actor)
    return [Decision(stream_id=fact_stream(payload.fact_cid), stream_version=1, payload=payload)]


# --- materialized facts (written by recall) -----------------------------------------------------------


def materialized_primary(*, cell: str, band: Band, tslot: int, reading: Any, signer: bytes,
                         signed_at: str) -> PrimaryFact:
    return PrimaryFact(
        cell=cell, band=band.name, tslot=tslot, value=reading.value, unit=band.unit or UNSET,
        confidence=reading.confidence, sources=list(reading.sources), derivation=reading.derivation,
        privacy_class=band.privacy_class, schema_cid=SCHEMA_CID, signer=signer, signed_at=signed_at,
    )


def materialized_absence(*, cell: str, band: Band, tslot: int, no_data: Any, signer: bytes,
                         signed_at: str) -> tuple[Fact, str]:
    absence = absence_fact(cell=cell, band=band.name, tslot=tslot, reason=no_data.reason,
                           detail=no_data.detail, sources=list(no_data.sources),
                           schema_cid=SCHEMA_CID, signer=signer, signed_at=signed_at)
    return absence.fact, absence.reason_text


def append_facts(engine: Any, payloads: Sequence[FactAttested], *,
                 still_missing: Any = lambda conn, payload: True) -> list[str]:
    """Append materialized facts in one transaction (no idempotency key); return appended cids.

    ``still_missing(conn, payload)`` re-checks each address inside the transaction; a payload
    whose address was filled meanwhile is dropped.
    """
    handler = engine.handler
    appended: list[str] = []
    if not payloads:
        return appended
    with handler.log.transaction() as conn:
        at = handler.clock()
        fresh = [p for p in payloads if still_missing(conn, p)]
        events = handler.log.append([
            NewEvent(type="fact.attested", stream_id=fact_stream(p.fact_cid), stream_version=1,
                     payload=p, event_id=handler.new_id("evt"), at=at)
            for p in fresh
        ])
        apply_events(conn, handler.projectors, events)
        appended = [p.fact_cid for p in fresh]
    return appended
