"""The recorded results of the fact plane's mutations (``band.register``, ``fact.attest``).

Each is a function of the facts projection right after its event, so the idempotency projector
records it and a replay of the log reproduces it byte-for-byte; an identical retry answers with
it again (``created: false``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from memoree.projections.fact_rows import band_record, fact_row, fact_view, load_band

__all__ = [
    "BandMutationResult",
    "FactAttestResult",
    "band_result",
    "existing_fact_result",
    "fact_attest_result",
]


class BandMutationResult(msgspec.Struct, kw_only=True):
    band: dict[str, Any]
    commit_seq: int
    created: bool


class FactAttestResult(msgspec.Struct, kw_only=True):
    """The signed fact (with its attestation receipt) and that receipt on its own."""

    fact: dict[str, Any]
    receipt: dict[str, Any]
    commit_seq: int
    created: bool


def band_result(conn: Any, name: str, *, created: bool = False) -> BandMutationResult | None:
    band = load_band(conn, name)
    if band is None or band.commit_seq is None:
        return None
    return BandMutationResult(band=band_record(band), commit_seq=band.commit_seq, created=created)


def fact_attest_result(conn: Any, fact_cid: str, *, created: bool) -> FactAttestResult | None:
    row = fact_row(conn, fact_cid)
    if row is None:
        return None
    view = fact_view(row, load_band(conn, row.band))
    return FactAttestResult(fact=view, receipt=view["receipt"], commit_seq=row.commit_seq,
                            created=created)


def existing_fact_result(conn: Any, fact_cid: str) -> FactAttestResult | None:
    return fact_attest_result(conn, fact_cid, created=False)


def band_registered_result(conn: Any, event: Any) -> msgspec.Struct:
    result = band_result(conn, event.payload.band, created=True)
    assert result is not None
    return result


def fact_attested_result(conn: Any, event: Any) -> msgspec.Struct:
    result = fact_attest_result(conn, event.payload.fact_cid, created=True)
    assert result is not None
    return result
