"""How the facts projection's rows read back: bands and fact rows, shared by commands and queries.

A band is registered in the log, built in, or declared by a materializer plugin (the log's
registration wins). A fact row keeps the signed CBOR body; its JSON view is decoded once and
cached by ``fact_cid`` (a cid names immutable bytes). The command handler, the idempotency
records and ``fact.recall`` all read through these functions.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, NamedTuple

import msgspec

from memoree.factplane.emem.batch_merkle import MerkleProof, proof_from_json
from memoree.factplane.emem.facts import fact_from_cbor, fact_json
from memoree.factplane.identity import BUILTIN_BANDS, Band

__all__ = [
    "BAND_COLUMNS", "FACT_COLUMNS", "FactRow", "all_bands", "band_csv", "band_of_row", "band_record",
    "decoded_view", "fact_row", "fact_row_of", "fact_view", "load_band", "registered_bands",
    "remember_fact",
]

BAND_COLUMNS = ("band, unit, tempo, provenance_class, source_kind, privacy_class, description, "
                 "dataset_id, csv_sha256, radius_m, sample_count, captured_at, commit_seq")
FACT_COLUMNS = ("fact_cid, cell, band, tslot, kind, signed_at, provenance_class, body, "
                 "reason_text, proof_json, receipt_json, commit_seq")


# --- bands ----------------------------------------------------------------------------------------


def band_of_row(row: tuple[Any, ...]) -> Band:
    (name, unit, tempo, klass, kind, privacy, description, dataset_id, sha, radius, count,
     captured_at, commit_seq) = row
    return Band(name=name, unit=unit, tempo=tempo, provenance_class=klass, source_kind=kind,
                privacy_class=privacy, description=description,
                materializer="local.csv_nearest@1" if kind == "file" else None,
                dataset_id=dataset_id, csv_sha256=sha, radius_m=radius, sample_count=count,
                captured_at=captured_at, commit_seq=commit_seq)


def registered_bands(conn: Any) -> dict[str, Band]:
    rows = conn.execute(f"SELECT {BAND_COLUMNS} FROM fact_bands ORDER BY band").fetchall()
    return {row[0]: band_of_row(row) for row in rows}


def load_band(conn: Any, name: str, declared: Mapping[str, Band] | None = None) -> Band | None:
    """A band by name: registered in the log, built in, or declared by a materializer plugin."""
    row = conn.execute(f"SELECT {BAND_COLUMNS} FROM fact_bands WHERE band = ?", (name,)).fetchone()
    if row is not None:
        return band_of_row(row)
    return BUILTIN_BANDS.get(name) or (declared or {}).get(name)


def all_bands(conn: Any, declared: Mapping[str, Band] | None = None) -> dict[str, Band]:
    """Every band known here, by name; the log's registrations win over declarations."""
    return {**dict(declared or {}), **BUILTIN_BANDS, **registered_bands(conn)}


def band_csv(conn: Any, name: str) -> bytes | None:
    row = conn.execute("SELECT csv FROM fact_bands WHERE band = ?", (name,)).fetchone()
    return None if row is None or row[0] is None else bytes(row[0])


def band_record(band: Band) -> dict[str, Any]:
    record = msgspec.to_builtins(band)
    record["band_metadata"] = band.metadata()
    return record


class FactRow(NamedTuple):
    fact_cid: str
    cell: str
    band: str
    tslot: int
    kind: str
    signed_at: str
    provenance_class: str
    body: bytes
    reason_text: str | None
    proof_json: str
    receipt_json: str
    commit_seq: int

    def proof(self) -> MerkleProof:
        return proof_from_json(msgspec.json.decode(self.proof_json))


def fact_row_of(row: tuple[Any, ...]) -> FactRow:
    values = list(row)
    values[7] = bytes(values[7])
    return FactRow(*values)


def fact_row(conn: Any, fact_cid: str) -> FactRow | None:
    row = conn.execute(f"SELECT {FACT_COLUMNS} FROM facts WHERE fact_cid = ?", (fact_cid,)).fetchone()
    return None if row is None else fact_row_of(row)


# --- views ----------------------------------------------------------------------------------------


class _Decoded(NamedTuple):
    view: dict[str, Any]  # the body's JSON view (never mutated once cached)
    first_scheme: str | None
    captured_at: tuple[str, ...]


_DECODED: OrderedDict[str, _Decoded] = OrderedDict()
_DECODED_MAX = 4096
_decoded_lock = threading.Lock()


def _decoded_of(fact: Any, reason_text: str | None) -> _Decoded:
    sources = getattr(fact, "sources", None) or []
    return _Decoded(
        view=fact_json(fact, reason_text=reason_text),
        first_scheme=sources[0].scheme if sources else None,
        captured_at=tuple(s.captured_at for s in sources if isinstance(s.captured_at, str)),
    )


def _store(fact_cid: str, decoded: _Decoded) -> _Decoded:
    with _decoded_lock:
        _DECODED[fact_cid] = decoded
        _DECODED.move_to_end(fact_cid)
        while len(_DECODED) > _DECODED_MAX:
            _DECODED.popitem(last=False)
    return decoded


def remember_fact(fact_cid: str, fact: Any, reason_text: str | None) -> None:
    """Cache the view of a fact just signed here (its cid names immutable bytes)."""
    _store(fact_cid, _decoded_of(fact, reason_text))


def decoded_view(fact_cid: str, body: bytes, reason_text: str | None) -> _Decoded:
    # A fact_cid names immutable bytes, so its decoded view can be cached safely.
    with _decoded_lock:
        cached = _DECODED.get(fact_cid)
    if cached is not None:
        return cached
    return _store(fact_cid, _decoded_of(fact_from_cbor(body), reason_text))


def fact_view(row: FactRow, band: Band | None) -> dict[str, Any]:
    """The OpenAPI Fact: the signed body's fields plus unsigned enrichments and its receipt."""
    decoded = decoded_view(row.fact_cid, row.body, row.reason_text)
    view = dict(decoded.view)
    if decoded.first_scheme is not None:
        view["provenance"] = decoded.first_scheme
    metadata = band.metadata() if band is not None else {"provenance_class": row.provenance_class}
    metadata["provenance_class"] = row.provenance_class
    view["band_metadata"] = metadata
    view["receipt"] = msgspec.json.decode(row.receipt_json)
    return view
