"""The fact plane's mutations on the command handler: ``band.register`` and ``fact.attest``.

Their deciders live in ``memoree.commands.facts``; this wiring adds what only the composition
root has: the store's node key (attestations are signed) and the materializer registry's declared
bands. ``Engine`` installs them the first time one of the two ops runs.
"""

from __future__ import annotations

from typing import Any

from memoree.commands.facts import (
    AttestState,
    BandState,
    PreparedAttest,
    PreparedBand,
    decide_attest,
    decide_band_register,
    prepare_attest,
    prepare_band,
)
from memoree.commands.handler import Command
from memoree.factplane.identity import manifest_source_versions
from memoree.factplane.materializers import REGISTRY
from memoree.inputs import BandRegisterInput, FactAttestInput
from memoree.projections.fact_results import band_result, existing_fact_result
from memoree.projections.fact_rows import all_bands, load_band

__all__ = ["install"]


def install(engine: Any) -> None:
    """Register band.register and fact.attest on an engine's handler (they need its node key)."""

    def load_attest(conn: Any, inp: FactAttestInput, prepared: PreparedAttest) -> AttestState:
        declared = REGISTRY.plugin_bands()
        bands = all_bands(conn, declared)
        return AttestState(
            band=load_band(conn, inp.band, declared),
            source_versions=manifest_source_versions(bands.values(), REGISTRY.fn_keys()),
            existing=lambda cid: existing_fact_result(conn, cid),
        )

    def load_band_state(conn: Any, inp: BandRegisterInput, prepared: PreparedBand) -> BandState:
        existing = load_band(conn, inp.band, REGISTRY.plugin_bands())
        result = band_result(conn, inp.band) if existing is not None and existing.commit_seq else None
        return BandState(existing=existing, existing_result=result)

    engine.handler.commands.update({
        "band.register": Command(
            prepare=prepare_band, load=load_band_state, authorize=lambda *_: None,
            decide=decide_band_register,
        ),
        "fact.attest": Command(
            prepare=lambda inp: prepare_attest(inp, engine.node_key()), load=load_attest,
            authorize=lambda *_: None, decide=decide_attest,
        ),
    })

