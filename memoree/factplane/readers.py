"""The fact plane's non-mutating protocol ops: ``fact.recall``, ``receipt.verify``,
``fact.identity`` and ``band.list``.

``fact.recall`` is emem's ``ensure(cell, bands)``: it reuses what exists and materializes what is
missing. It is not a protocol mutation (no idempotency key, no ambient context: emem's scope
four-tuple comes in the request), yet a cold band is a write: the reader runs the materializers
outside any transaction, signs what they return, and appends those facts through
``commands.facts.append_facts`` in one transaction that re-checks each address first. In the
daemon this all runs on the single writer thread, like every store access. The steps:

1. validate the request into a plan (``queries.facts.plan_recall``);
2. for each named band, decide (pure, ``materialize_action``): warm (a fact, or a signed absence,
   is present in this scope view), skip with a typed note (unknown band, no materializer, a
   static band asked for another tslot, a past ``as_of`` a fact signed now could never satisfy),
   leave out (its provenance class is filtered out: never materialize what is not returned), or
   materialize;
3. run each materializer: a reading becomes a signed primary, a "no data" answer a signed
   absence, a failure or timeout a skip note (never an absence). Materialized facts are written
   under the request's scope, so a scoped recall can see what it filled;
4. select, view and sign the v2 receipt: ``cells = [cell]``, fact_cids in response order, scope
   and ``as_of`` when set, the proof of ``fact_cids[0]``. The cost block is unsigned.

``bands: []`` means "every band at the cell", like omitting it; naming no band never
materializes anything (a caveat says so).
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from memoree.commands.facts import (
    SigningPlan,
    append_facts,
    materialized_absence,
    materialized_primary,
    receipt_request_id,
    sign_fact,
    signed_at_of,
)
from memoree.factplane.emem import cbor, cell64, tslot as tslots
from memoree.factplane.emem.receipts import receipt_to_json, sign_receipt
from memoree.factplane.identity import Band, manifest_source_versions
from memoree.factplane.materializers import (
    REGISTRY,
    MaterializeNote,
    MaterializeRequest,
    NoData,
    Reading,
    Skip,
    materialized_note,
    run_materializer,
    skipped_note,
)
from memoree.queries import facts as q

__all__ = ["LatencyHistogram", "band_list", "identity", "materialize_action", "recall",
           "verify_receipt"]

LATENCY_BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
LATENCY_OVERFLOW_MS = 10000
GRID_CAVEAT = ("cell64 is a ~9.55 m grid (lng pitch shrinks with cos(lat)); values are read at the "
               "cell's grid point, not averaged over the cell")
NO_BANDS_CAVEAT = "no bands were named: existing facts are returned and nothing was materialized"


class LatencyHistogram:
    """Per-primitive latency buckets; p50/p99 are reported as bucket upper bounds (emem §3.7)."""

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS_MS) + 1)

    def observe(self, ms: float) -> None:
        index = next((i for i, bound in enumerate(LATENCY_BUCKETS_MS) if ms <= bound),
                     len(LATENCY_BUCKETS_MS))
        self.counts[index] += 1

    def quantile(self, q: float) -> int:
        total = sum(self.counts)
        if not total:
            return 0
        rank, seen = q * total, 0
        for index, count in enumerate(self.counts):
            seen += count
            if seen >= rank:
                return LATENCY_BUCKETS_MS[index] if index < len(LATENCY_BUCKETS_MS) else LATENCY_OVERFLOW_MS
        return LATENCY_OVERFLOW_MS


RECALL_LATENCY = LatencyHistogram()


# --- the responder's key ----------------------------------------------------------------------------


def responder_key(engine: Any) -> Any:
    """The current node key, its epoch recorded in the log (a write only on first use)."""
    key = engine.keys.current()
    recorded = engine.__dict__.setdefault("_fact_plane_recorded_epochs", set())
    if key.epoch not in recorded:
        key = engine.node_key()
        recorded.add(key.epoch)
    return key


def _source_versions(conn: Any) -> tuple[dict[str, Band], dict[str, str]]:
    declared = REGISTRY.plugin_bands()
    bands = q.all_bands(conn, declared)
    return bands, manifest_source_versions(bands.values(), REGISTRY.fn_keys())


# --- materialization decisions (pure) ---------------------------------------------------------------


class Materialize(NamedTuple):
    tslot: int


def materialize_action(plan: q.RecallPlan, name: str, band: Band | None, has_materializer: bool,
                       present: bool, now_second: str, now_unix: int) -> Materialize | Skip | None:
    """What a recall does about one named band; None means nothing (warm, or filtered out)."""
    if present:
        return None
    if band is None:
        return Skip(reason_class="unknown_band", reason=(
            f"no_auto_materializer_registered: band {name!r} is not known here; register it "
            "(band.register, or `memoree band add-file`) and see band.list for the bands served"))
    if plan.classes is not None and band.provenance_class not in plan.classes:
        return None
    if not has_materializer:
        return Skip(reason_class="no_materializer", reason=(
            f"no_auto_materializer_registered: band {name} has no materializer here; its facts "
            "are attested by agents (fact.attest)"))
    if band.tempo == "static":
        if plan.tslot not in (None, 0):
            return Skip(reason_class="capability_unavailable", reason=(
                f"tslot_mismatch: band {name} is static; its only tslot is 0"))
        target = 0
    else:
        target = plan.tslot if plan.tslot is not None else tslots.tslot_for(now_unix, band.tempo)
    if plan.as_of_tslot is not None and target > plan.as_of_tslot:
        return Skip(reason_class="capability_unavailable", reason=(
            f"present_only: band {name} materializes tslot {target}, beyond as_of_tslot "
            f"{plan.as_of_tslot}"))
    if plan.tx_bound is not None and plan.tx_bound < now_second:
        return Skip(reason_class="capability_unavailable", reason=(
            "as_of_in_past: a fact signed now could never satisfy as_of_signed_at "
            f"{plan.as_of_signed_at}; nothing was materialized"))
    return Materialize(target)


# --- fact.recall ---------------------------------------------------------------------------------------


def recall(engine: Any, inp: Any) -> dict[str, Any]:
    started = time.perf_counter()
    plan = q.plan_recall(inp)
    conn = engine.conn
    key = responder_key(engine)
    bands, source_versions = _source_versions(conn)
    notes: list[MaterializeNote] = []
    if plan.bands is not None:
        notes = _ensure(engine, plan, bands, source_versions, key)
        if any(n.status == "materialized" for n in notes):
            bands, source_versions = _source_versions(conn)
    rows = q.select_facts(conn, plan)
    now = engine.handler.clock()
    receipt = sign_receipt(
        q.recall_receipt(plan, rows, request_id=receipt_request_id(engine.handler.new_id("req")),
                         served_at=signed_at_of(now), source_versions=source_versions),
        key.seed, key_epoch=key.epoch,
    )
    document: dict[str, Any] = {
        "facts": [q.fact_view(row, bands.get(row.band)) for row in rows],
        "receipt": None,
        "bands_already_attested_at_cell": q.bands_at_cell(conn, plan.cell, plan.scope_key),
        "materialize_notes": [_note_json(n) for n in notes],
        "caveats": _caveats(plan, rows, bands),
        "bands_cid": source_versions["bands_cid"],
    }
    advice = _temporal_advice(conn, plan, rows)
    if advice is not None:
        document["temporal_advice"] = advice
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    RECALL_LATENCY.observe(elapsed_ms)
    receipt_json = receipt_to_json(receipt)
    receipt_json["cost"] = {
        "credits": 0,
        "latency_p50_ms": RECALL_LATENCY.quantile(0.5),
        "latency_p99_ms": RECALL_LATENCY.quantile(0.99),
        "source_freshness_s": q.source_freshness_s(rows, _unix(now)),
        "was_cached": False,  # no hot cache here: every read is served from the store
    }
    document["receipt"] = receipt_json
    return document


def _ensure(engine: Any, plan: q.RecallPlan, bands: dict[str, Band],
            source_versions: dict[str, str], key: Any) -> list[MaterializeNote]:
    conn = engine.conn
    now = engine.handler.clock()
    now_second = signed_at_of(now)
    notes: list[MaterializeNote] = []
    payloads: list[Any] = []
    pending: list[tuple[str, bool, float]] = []  # (band, absence, latency) per payload
    point = cell64.decode(plan.cell)
    signing = SigningPlan(key=key, source_versions=source_versions,
                          request_id=receipt_request_id(engine.handler.new_id("req")),
                          served_at=now_second)
    for name in plan.bands or ():
        band = bands.get(name)
        materializer = REGISTRY.for_band(band) if band is not None else None
        present = q.fact_present(conn, plan.cell, name, plan.tslot, plan.scope_key)
        action = materialize_action(plan, name, band, materializer is not None, present,
                                    now_second, int(_unix(now)))
        if isinstance(action, Skip):
            notes.append(skipped_note(plan.cell, name, action))
            continue
        if action is None:
            continue
        assert band is not None
        request = MaterializeRequest(plan.cell, band, action.tslot, point.lat, point.lng)
        outcome, ms = _run(conn, materializer, band, request)
        if isinstance(outcome, Skip):
            notes.append(skipped_note(plan.cell, name, outcome, ms))
            continue
        payloads.append(_signed(outcome, request, signing, plan, materializer.fn_key))
        pending.append((name, isinstance(outcome, NoData), ms))
    appended = set(append_facts(engine, payloads, still_missing=_still_missing(plan)))
    for payload, (name, absence, ms) in zip(payloads, pending):
        if payload.fact_cid in appended:
            notes.append(materialized_note(plan.cell, name, payload.fact_cid, absence=absence,
                                           latency_ms=ms))
    return notes


def _run(conn: Any, materializer: Any, band: Band, request: MaterializeRequest) -> tuple[Any, float]:
    if band.source_kind == "file" and hasattr(materializer, "cached"):
        data = None if materializer.cached(band) else q.band_csv(conn, band.name)
        return run_materializer(materializer, request,
                                call=lambda: materializer.materialize(request, data))
    return run_materializer(materializer, request)


def _signed(outcome: Reading | NoData, request: MaterializeRequest, signing: SigningPlan,
            plan: q.RecallPlan, fn_key: str) -> Any:
    common = {"cell": request.cell, "band": request.band, "tslot": request.tslot,
              "signer": signing.key.public_key, "signed_at": signing.served_at}
    reason_text = None
    if isinstance(outcome, Reading):
        fact = materialized_primary(reading=outcome, **common)
    else:
        fact, reason_text = materialized_absence(no_data=outcome, **common)
    payload = sign_fact(fact, signing, provenance_class=request.band.provenance_class,
                        origin="materialized", scope=plan.scope, materializer=fn_key,
                        reason_text=reason_text)
    q.remember_fact(payload.fact_cid, fact, reason_text)
    return payload


def _still_missing(plan: q.RecallPlan) -> Any:
    def check(conn: Any, payload: Any) -> bool:
        tslot = cbor.decode(payload.fact_cbor)["tslot"]
        return not q.fact_present(conn, plan.cell, payload.band, tslot, plan.scope_key)

    return check


def _note_json(note: MaterializeNote) -> dict[str, Any]:
    import msgspec

    return msgspec.to_builtins(note)


def _caveats(plan: q.RecallPlan, rows: list[q.FactRow], bands: dict[str, Band]) -> list[str]:
    caveats = [GRID_CAVEAT]
    if plan.bands is None:
        caveats.append(NO_BANDS_CAVEAT)
    for name in sorted({row.band for row in rows}):
        band = bands.get(name)
        if band is not None and band.source_kind == "file":
            caveats.append(f"{name}: nearest sample of {band.dataset_id} within "
                           f"{band.radius_m:g} m of the grid point, not an interpolation")
        if band is not None and band.klass.caution:
            caveats.append(f"{name}: {band.klass.caution}")
    return caveats


def _temporal_advice(conn: Any, plan: q.RecallPlan, rows: list[q.FactRow]) -> dict[str, Any] | None:
    if rows or not plan.bounded:
        return None
    unbounded = q.facts_at_cell(conn, plan.cell, plan.scope_key)
    if not unbounded:
        return None
    advice: dict[str, Any] = {"facts_at_cell_unbounded": unbounded,
                              "hint": "facts exist at this cell outside the as_of bound; widen "
                                      "or drop as_of_tslot / as_of_signed_at to see them"}
    if plan.as_of_tslot is not None:
        advice["as_of_tslot"] = plan.as_of_tslot
    if plan.as_of_signed_at is not None:
        advice["as_of_signed_at"] = plan.as_of_signed_at
    return advice


def _unix(instant: str) -> float:
    from datetime import datetime, timezone

    return datetime.strptime(instant[:19], "%Y-%m-%dT%H:%M:%S").replace(
        tzinfo=timezone.utc).timestamp()


# --- receipt.verify, fact.identity, band.list -----------------------------------------------------------


def verify_receipt(engine: Any, inp: Any) -> dict[str, Any]:
    from memoree.projections.keys import recorded_epochs

    return q.verify_receipt_document(engine.conn, inp.receipt, inp.pubkey_b32,
                                     known_keys=recorded_epochs(engine.conn))


def identity(engine: Any) -> dict[str, Any]:
    """What ``/.well-known/emem.json`` publishes: the responder key, its epoch, the algorithms."""
    from memoree import __version__
    from memoree.projections.keys import recorded_epochs

    key = responder_key(engine)
    _, source_versions = _source_versions(engine.conn)
    return {
        "schema": "emem.well_known.v1",
        "product": "memoree",
        "version": __version__,
        "responder": {"pubkey_b32": key.public_b32, "key_epoch": key.epoch},
        "key_epoch": key.epoch,
        "key_epochs": [{"epoch": epoch, "pubkey_b32": public}
                       for epoch, public in sorted(recorded_epochs(engine.conn).items())],
        "signature_alg": "ed25519",
        "hash_alg": "blake3",
        "cid_encoding": "base32-nopad-lowercase",
        "receipt_preimage_version": 2,
        "cell_codec": cell64.CODEC_NAME,
        "source_versions": source_versions,
        "manifests_note": "these manifest cids are memoree's own, not emem.dev's",
    }


def band_list(engine: Any) -> dict[str, Any]:
    bands = q.all_bands(engine.conn, REGISTRY.plugin_bands())
    return {"bands": [q.band_record(bands[name]) for name in sorted(bands)],
            "materializers": REGISTRY.fn_keys(),
            "plugin_errors": list(REGISTRY.plugin_errors)}
