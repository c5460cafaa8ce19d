"""The read side of the signed fact plane: bands, fact selection for recall, views and receipts.

Selection follows emem-recall.md §6.2, with one deliberate improvement: for every
``(band, tslot)`` key the *latest written* fact that satisfies the bounds is chosen (upstream
drops the key when its last-written fact is newer than ``as_of_signed_at``). Then:

* unbounded reads return every tslot, ordered by band (bytewise) then tslot ascending;
* a read with an ``as_of`` bound and no exact ``tslot`` collapses to the latest tslot per band;
* ``as_of_tslot`` keeps ``tslot <= bound``; ``as_of_signed_at`` keeps ``signed_at <= bound``,
  compared after normalising the bound to ``YYYY-MM-DDTHH:MM:SSZ`` UTC (offsets are converted);
* the provenance filter (classes of the band) runs before anything is signed;
* scope is an exact four-tuple filter, not isolation: a scoped read sees only facts written
  under that exact tuple; an unscoped read sees every fact;
* ``bands_already_attested_at_cell`` ignores every filter but scope.

Receipt verification (``receipt.verify``) uses the proof this responder recorded for
``fact_cids[0]``, so it can tell a receipt reshaped after signing from a forged one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any, NamedTuple

from memoree.factplane.emem import b32, cell64
from memoree.factplane.emem.batch_merkle import MerkleProof
from memoree.factplane.emem.errors import EmemError, InvalidCell
from memoree.factplane.emem.facts import is_fact_cid
from memoree.factplane.emem.receipts import AsOf, Receipt, receipt_from_json, verify_receipt
from memoree.factplane.emem.receipts import Scope as EmemScope
from memoree.eventlog.timefmt import parse_rfc3339
from memoree.factplane.identity import (
    DETERMINISTIC_CLASSES,
    PROVENANCE_CLASSES,
    RECALL_PRIMITIVE,
    emem_scope,
    fact_error,
    scope_key,
)
from memoree.projections.fact_rows import (
    FACT_COLUMNS,
    FactRow,
    all_bands,
    band_csv,
    band_record,
    decoded_view,
    fact_row,
    fact_row_of,
    fact_view,
    load_band,
    registered_bands,
    remember_fact,
)

__all__ = [
    "FactRow",
    "RecallPlan",
    "all_bands",
    "band_csv",
    "band_record",
    "fact_present",
    "fact_view",
    "load_band",
    "plan_recall",
    "recall_receipt",
    "registered_bands",
    "remember_fact",
    "select_facts",
    "verify_receipt_document",
]

INT64_MAX = (1 << 63) - 1
STORED_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
MAX_RECALL_BANDS = 64
MAX_BAND_KEY_BYTES = 256

# --- recall plan (pure) ---------------------------------------------------------------------------


class RecallPlan(NamedTuple):
    cell: str
    bands: tuple[str, ...] | None  # None: every band at the cell
    tslot: int | None
    as_of_tslot: int | None
    as_of_signed_at: str | None  # raw, as the receipt carries it
    tx_bound: str | None  # normalised YYYY-MM-DDTHH:MM:SSZ
    scope: EmemScope | None
    scope_key: str | None
    classes: frozenset[str] | None  # None: no provenance filter

    @property
    def bounded(self) -> bool:
        return self.as_of_tslot is not None or self.tx_bound is not None

    def as_of(self) -> AsOf | None:
        if not self.bounded:
            return None
        return AsOf(valid_time=self.as_of_tslot, transaction_time=self.as_of_signed_at)


def plan_recall(inp: Any) -> RecallPlan:
    """Validate a recall request (fact.recall input) into a plan; raises FactPlaneError."""
    cell = _check_cell(inp.cell)
    tslot = _check_slot("tslot", inp.tslot)
    as_of_tslot = _check_slot("as_of_tslot", inp.as_of_tslot)
    if tslot is not None and as_of_tslot is not None and as_of_tslot < tslot:
        raise fact_error("invalid_temporal_bound",
                         f"as_of_tslot {as_of_tslot} is before the requested tslot {tslot}",
                         field="as_of_tslot")
    scope = emem_scope(inp.scope)
    return RecallPlan(
        cell=cell, bands=_requested_bands(inp.band, inp.bands), tslot=tslot,
        as_of_tslot=as_of_tslot, as_of_signed_at=inp.as_of_signed_at,
        tx_bound=_transaction_bound(inp.as_of_signed_at), scope=scope, scope_key=scope_key(scope),
        classes=_class_filter(inp.provenance, inp.deterministic),
    )


def _check_cell(cell: str) -> str:
    try:
        return cell64.validate(cell)
    except InvalidCell as exc:
        raise fact_error("invalid_cell", f"cell: {exc}", field="cell") from None


def _check_slot(name: str, value: int | None) -> int | None:
    if value is None:
        return None
    if value < 0:
        raise fact_error("invalid_argument", f"{name} must be >= 0", field=name)
    if value > INT64_MAX:
        raise fact_error("invalid_argument", f"{name} above 2^63-1 is not supported here", field=name)
    return value


def _requested_bands(band: str | None, bands: list[str] | None) -> tuple[str, ...] | None:
    names = ([band] if band is not None else []) + list(bands or [])
    unique = tuple(dict.fromkeys(names))
    if len(unique) > MAX_RECALL_BANDS:
        raise fact_error("invalid_argument", f"at most {MAX_RECALL_BANDS} bands per recall", field="bands")
    for name in unique:
        if not name or len(name.encode("utf-8", "replace")) > MAX_BAND_KEY_BYTES:
            raise fact_error("invalid_argument", f"band keys must be 1 to {MAX_BAND_KEY_BYTES} bytes",
                             field="bands")
    # `bands: []` (and no `band`) means every band at the cell, like omitting it: never
    # "nothing", and it never materializes anything (see the recall docs).
    return unique or None


def _transaction_bound(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        return parse_rfc3339(text)[:19] + "Z"
    except ValueError:
        raise fact_error("invalid_signed_at_format",
                         f"as_of_signed_at must be an RFC 3339 timestamp, got {text!r}",
                         field="as_of_signed_at") from None


def _class_filter(provenance: list[str] | None, deterministic: bool | None) -> frozenset[str] | None:
    chosen: frozenset[str] | None = None
    if provenance:
        unknown = [c for c in provenance if c not in PROVENANCE_CLASSES]
        if unknown:
            raise fact_error("invalid_argument", f"unknown provenance class {unknown[0]!r}",
                             field="provenance")
        chosen = frozenset(provenance)
    if deterministic is not None:
        side = DETERMINISTIC_CLASSES if deterministic else frozenset(PROVENANCE_CLASSES) - DETERMINISTIC_CLASSES
        chosen = side if chosen is None else chosen & side
    return chosen


# --- selection ------------------------------------------------------------------------------------


def _in(column: str, values: Iterable[str]) -> tuple[str, list[str]]:
    items = sorted(values)
    return f" AND {column} IN ({','.join('?' * len(items))})", items


def select_facts(conn: Any, plan: RecallPlan) -> list[FactRow]:
    """The facts a recall returns, in response order (see the module docstring)."""
    sql = f"SELECT {FACT_COLUMNS} FROM facts WHERE cell = ?"
    params: list[Any] = [plan.cell]
    if plan.scope_key is not None:
        sql += " AND scope_key = ?"
        params.append(plan.scope_key)
    if plan.bands is not None:
        clause, items = _in("band", plan.bands)
        sql, params = sql + clause, params + items
    if plan.classes is not None:
        if not plan.classes:
            return []
        clause, items = _in("provenance_class", plan.classes)
        sql, params = sql + clause, params + items
    for column, operator, value in (("tslot", "=", plan.tslot), ("tslot", "<=", plan.as_of_tslot),
                                    ("signed_at", "<=", plan.tx_bound)):
        if value is not None:
            sql += f" AND {column} {operator} ?"
            params.append(value)
    sql += " ORDER BY band, tslot, commit_seq"
    latest: dict[tuple[str, int], FactRow] = {}
    for row in conn.execute(sql, params).fetchall():
        fact = fact_row_of(row)
        latest[(fact.band, fact.tslot)] = fact  # ordered by commit_seq: the last one wins
    chosen = list(latest.values())
    if plan.bounded and plan.tslot is None:
        newest: dict[str, FactRow] = {}
        for fact in chosen:
            newest[fact.band] = fact  # tslot ascending within a band: the last is the latest
        chosen = list(newest.values())
    return chosen


def fact_present(conn: Any, cell: str, band: str, tslot: int | None, scope: str | None) -> bool:
    """Whether any fact (primary or absence) exists at the address in this scope view."""
    sql = "SELECT 1 FROM facts WHERE cell = ? AND band = ?"
    params: list[Any] = [cell, band]
    if tslot is not None:
        sql += " AND tslot = ?"
        params.append(tslot)
    if scope is not None:
        sql += " AND scope_key = ?"
        params.append(scope)
    return conn.execute(sql + " LIMIT 1", params).fetchone() is not None


def bands_at_cell(conn: Any, cell: str, scope: str | None) -> list[str]:
    sql = "SELECT DISTINCT band FROM facts WHERE cell = ?"
    params: list[Any] = [cell]
    if scope is not None:
        sql += " AND scope_key = ?"
        params.append(scope)
    return [row[0] for row in conn.execute(sql + " ORDER BY band", params).fetchall()]


def facts_at_cell(conn: Any, cell: str, scope: str | None) -> int:
    sql = "SELECT count(*) FROM facts WHERE cell = ?"
    params: list[Any] = [cell]
    if scope is not None:
        sql += " AND scope_key = ?"
        params.append(scope)
    return conn.execute(sql, params).fetchone()[0]


def source_freshness_s(rows: Iterable[FactRow], now_unix: float) -> int | None:
    """Age of the stalest dated source: now - min(captured_at); None when nothing is datable."""
    earliest: float | None = None
    for row in rows:
        for text in decoded_view(row.fact_cid, row.body, row.reason_text).captured_at:
            captured = _unix(text)
            if captured is not None and captured > 0:
                earliest = captured if earliest is None else min(earliest, captured)
    if earliest is None:
        return None
    return max(0, int(now_unix - earliest))


def _unix(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        stored = parse_rfc3339(text)
    except ValueError:
        return None
    return datetime.strptime(stored, STORED_FORMAT).replace(tzinfo=timezone.utc).timestamp()


def recall_receipt(plan: RecallPlan, rows: list[FactRow], *, request_id: str, served_at: str,
                   source_versions: Mapping[str, str]) -> Receipt:
    """The unsigned recall receipt: [cell], the fact_cids in response order, scope, as_of, proof."""
    proof = rows[0].proof() if rows else None
    return Receipt(
        request_id=request_id, served_at=served_at, primitive=RECALL_PRIMITIVE,
        cells=(plan.cell,), fact_cids=tuple(row.fact_cid for row in rows),
        schema_cid=source_versions["schema_cid"], registry_cid=source_versions["registry_cid"],
        source_versions=dict(source_versions), scope=plan.scope, as_of=plan.as_of(),
        merkle_proof=proof,
    )


# --- receipt verification -------------------------------------------------------------------------


def recorded_proof(conn: Any, receipt: Receipt) -> MerkleProof | None:
    if not receipt.fact_cids or not is_fact_cid(receipt.fact_cids[0]):
        return None
    row = fact_row(conn, receipt.fact_cids[0])
    return None if row is None else row.proof()


def verify_receipt_document(conn: Any | None, document: Any, pubkey_b32: str | None,
                            known_keys: Mapping[int, str] | None = None) -> dict[str, Any]:
    """Verify a receipt as the caller holds it; say which check failed.

    ``conn`` (this responder's store) lets a reshaped receipt be told from a forged one; without
    it (offline) that difference cannot be proven. Malformed receipts raise FactPlaneError.
    """
    if pubkey_b32 is not None and not _is_key_text(pubkey_b32):
        raise fact_error("bad_signature", "pubkey_b32 must be a 52-character base32 Ed25519 key",
                         field="pubkey_b32")
    try:
        receipt = receipt_from_json(document)
    except EmemError as exc:
        raise fact_error(exc.code, f"receipt: {exc}", field="receipt") from None
    try:
        recorded = recorded_proof(conn, receipt) if conn is not None else None
        verdict = verify_receipt(receipt, public_key=pubkey_b32, recorded_proof=recorded)
    except (ValueError, TypeError, OverflowError) as exc:
        return _unverifiable(receipt, str(exc))
    result: dict[str, Any] = {
        "valid": verdict.valid,
        "signature_valid": verdict.signature_valid,
        "merkle_proof_valid": verdict.merkle_proof_valid,
    }
    if verdict.reason is not None:
        result["reason"] = verdict.reason
    if verdict.failed_check is not None:
        result["failed_check"] = verdict.failed_check
    if verdict.failure_detail is not None:
        result["failure_detail"] = verdict.failure_detail
    result.update(
        signer_pubkey_b32=verdict.signer_pubkey_b32,
        preimage_version=verdict.preimage_version,
        preimage_blake3_hex=verdict.digest_hex,
        primitive=receipt.primitive,
        served_at=receipt.served_at,
        fact_cids_count=len(receipt.fact_cids),
        reshape_diagnosis="available" if conn is not None else "offline: reshaping cannot be told from forgery",
    )
    if known_keys is not None:
        result["responder_is_this_node"] = verdict.signer_pubkey_b32 in set(known_keys.values())
    return result


def _unverifiable(receipt: Receipt, detail: str) -> dict[str, Any]:
    return {
        "valid": False, "signature_valid": False, "merkle_proof_valid": None,
        "reason": "signature_invalid", "failed_check": "preimage",
        "failure_detail": f"the receipt's fields cannot form a preimage: {detail}",
        "signer_pubkey_b32": b32.encode(receipt.responder) if receipt.responder else None,
        "preimage_version": receipt.preimage_version, "preimage_blake3_hex": None,
        "primitive": receipt.primitive, "served_at": receipt.served_at,
        "fact_cids_count": len(receipt.fact_cids),
    }


def _is_key_text(text: str) -> bool:
    try:
        return len(b32.decode(text)) == 32
    except EmemError:
        return False

