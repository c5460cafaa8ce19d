"""The operation registry: every protocol op, its input type and how it is classified.

One table drives validation (mutating ops need an idempotency key, context ops need an ambient
context, horizon ops parse their input first), ``capabilities`` and the ``schema`` bundle. Only
ops that are implemented appear here, so discovery never advertises a roadmap feature.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from memoree import inputs

__all__ = ["OPS", "OpSpec"]


@dataclass(frozen=True)
class OpSpec:
    name: str
    input_type: type[msgspec.Struct]
    mutating: bool = False
    needs_context: bool = False
    horizon: bool = False
    side_effecting: bool = False


def _ops(*specs: OpSpec) -> dict[str, OpSpec]:
    return {spec.name: spec for spec in specs}


OPS: dict[str, OpSpec] = _ops(
    OpSpec("context.resolve", inputs.EmptyInput, needs_context=True),
    OpSpec("capabilities", inputs.EmptyInput),
    OpSpec("instructions", inputs.InstructionsInput),
    OpSpec("schema", inputs.EmptyInput),
    OpSpec("doctor", inputs.EmptyInput),
    OpSpec("verify", inputs.EmptyInput),
    OpSpec("backup.create", inputs.BackupCreateInput, side_effecting=True),
    OpSpec("artifact.put", inputs.ArtifactPutInput, mutating=True, needs_context=True),
    OpSpec("artifact.get", inputs.ArtifactGetInput),
    OpSpec("artifact.revise", inputs.ArtifactReviseInput, mutating=True, needs_context=True),
    OpSpec("artifact.history", inputs.ArtifactHistoryInput),
    OpSpec("artifact.forget", inputs.ArtifactForgetInput, mutating=True, needs_context=True),
    OpSpec("artifact.purge", inputs.ArtifactPurgeInput, mutating=True, needs_context=True),
    OpSpec("claim.assert", inputs.ClaimAssertInput, mutating=True, needs_context=True),
    OpSpec("claim.get", inputs.ClaimGetInput),
    OpSpec("claim.history", inputs.ClaimHistoryInput),
    OpSpec("claim.revise", inputs.ClaimReviseInput, mutating=True, needs_context=True),
    OpSpec("claim.retract", inputs.ClaimRetractInput, mutating=True, needs_context=True),
    OpSpec("relation.put", inputs.RelationPutInput, mutating=True, needs_context=True),
    OpSpec("relation.list", inputs.RelationListInput, needs_context=True, horizon=True),
    OpSpec("conflict.list", inputs.ConflictListInput, needs_context=True, horizon=True),
    OpSpec("search", inputs.SearchInput, needs_context=True, horizon=True),
    OpSpec("memory.recall", inputs.RecallInput, needs_context=True, horizon=True),
    OpSpec("context.build", inputs.ContextBuildInput, needs_context=True, horizon=True),
    OpSpec("memory.probe", inputs.ProbeInput, needs_context=True, horizon=True),
    OpSpec("memory.retrieve", inputs.RetrieveInput, needs_context=True, horizon=True),
    OpSpec("citation.get", inputs.CitationGetInput),
    # The signed fact plane (emem). fact.recall may write (a cold band materializes) but is not a
    # protocol mutation: no idempotency key, no ambient context (emem's scope is in the input).
    OpSpec("band.register", inputs.BandRegisterInput, mutating=True, needs_context=True),
    OpSpec("band.list", inputs.EmptyInput),
    OpSpec("fact.attest", inputs.FactAttestInput, mutating=True, needs_context=True),
    OpSpec("fact.recall", inputs.FactRecallInput, side_effecting=True),
    OpSpec("receipt.verify", inputs.ReceiptVerifyInput),
    OpSpec("fact.identity", inputs.EmptyInput),
)


def register(spec: OpSpec) -> None:
    """Add an op (used by the modules that implement later ops)."""
    OPS[spec.name] = spec
