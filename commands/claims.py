"""Deciders for ``claim.assert``, ``claim.revise`` and ``claim.retract``: pure functions.

Evidence is checked against the cited revisions' byte lengths (loaded by the handler): both span
ends or neither, ``start < end <= size``. Revisions replace evidence and confidence; claim type
and validity are fixed at assert. Validity is half-open: ``valid_from`` inclusive,
``valid_until`` exclusive.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from memoree import limits
from memoree.errors import InvalidRequest, NotFound
from memoree.eventlog.events import ClaimAsserted, ClaimRetracted, ClaimRevised, EvidenceRef
from memoree.eventlog.timefmt import parse_rfc3339
from memoree.inputs import (
    ClaimAssertInput,
    ClaimRetractInput,
    ClaimReviseInput,
    EvidenceLocator,
    check_id,
    check_optional_text,
    check_text,
)

from .artifacts import _stale
from .context import DecideContext, Decision
from .state import ClaimReviseState, ClaimState, RevisionSize

__all__ = [
    "decide_assert",
    "decide_retract",
    "decide_revise",
    "prepare_assert",
    "prepare_retract",
    "prepare_revise",
    "validate_evidence",
]

TERMINAL = frozenset({"retracted", "superseded"})


class PreparedAssert:
    __slots__ = ("valid_from", "valid_until")

    def __init__(self, valid_from: str | None, valid_until: str | None) -> None:
        self.valid_from = valid_from
        self.valid_until = valid_until


def _check_evidence_shape(evidence: list[EvidenceLocator]) -> None:
    if len(evidence) > limits.MAX_EVIDENCE_ITEMS:
        raise InvalidRequest(f"evidence must not exceed {limits.MAX_EVIDENCE_ITEMS} items")
    for index, loc in enumerate(evidence):
        check_id(f"evidence[{index}].artifact_id", loc.artifact_id)
        check_id(f"evidence[{index}].revision_id", loc.revision_id)


def _check_confidence(value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise InvalidRequest("confidence must be a finite number between 0 and 1")


def _parse_instant(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError:
        raise InvalidRequest(f"{name} must be an RFC 3339 timestamp with an offset, such as 2026-01-01T00:00:00Z") from None


def prepare_assert(inp: ClaimAssertInput) -> PreparedAssert:
    check_text("statement", inp.statement, limits.MAX_CLAIM_STATEMENT_BYTES)
    _check_confidence(inp.confidence)
    _check_evidence_shape(inp.evidence)
    check_optional_text("actor", inp.actor, limits.MAX_ACTOR_BYTES)
    valid_from = _parse_instant("valid_from", inp.valid_from)
    valid_until = _parse_instant("valid_until", inp.valid_until)
    if valid_from is not None and valid_until is not None and not valid_from < valid_until:
        raise InvalidRequest("valid_from must be earlier than valid_until (validity is [from, until))")
    return PreparedAssert(valid_from, valid_until)


def validate_evidence(
    evidence: list[EvidenceLocator], revisions: Mapping[tuple[str, str], RevisionSize]
) -> list[EvidenceRef]:
    """Check every locator against its cited revision's bytes; return the refs to record."""
    refs = []
    for index, loc in enumerate(evidence):
        target = revisions.get((loc.artifact_id, loc.revision_id))
        if target is None:
            raise NotFound(f"evidence {loc.artifact_id} revision {loc.revision_id}")
        if (loc.start_byte is None) != (loc.end_byte is None):
            raise InvalidRequest(f"evidence[{index}] must give both start_byte and end_byte, or neither")
        if loc.start_byte is not None and loc.end_byte is not None:
            if not 0 <= loc.start_byte < loc.end_byte <= target.size_bytes:
                raise InvalidRequest(
                    f"evidence[{index}] span [{loc.start_byte}, {loc.end_byte}) is outside revision "
                    f"{loc.revision_id} of {target.size_bytes} bytes (need 0 <= start < end <= size)"
                )
        refs.append(EvidenceRef(loc.artifact_id, loc.revision_id, loc.start_byte, loc.end_byte))
    return refs


def decide_assert(
    revisions: Mapping[tuple[str, str], RevisionSize], inp: ClaimAssertInput,
    prepared: PreparedAssert, ctx: DecideContext,
) -> list[Decision]:
    evidence = validate_evidence(inp.evidence, revisions)
    claim_id = ctx.new_id("clm")
    return [Decision(claim_id, 1, ClaimAsserted(
        claim_id=claim_id, revision_id=ctx.new_id("crev"), claim_type=inp.claim_type,
        statement=inp.statement, evidence=evidence, confidence=inp.confidence,
        valid_from=prepared.valid_from, valid_until=prepared.valid_until, actor=inp.actor,
    ))]


def prepare_revise(inp: ClaimReviseInput) -> None:
    check_id("claim_id", inp.claim_id)
    check_id("if_revision", inp.if_revision)
    check_text("statement", inp.statement, limits.MAX_CLAIM_STATEMENT_BYTES)
    _check_confidence(inp.confidence)
    _check_evidence_shape(inp.evidence)
    check_optional_text("actor", inp.actor, limits.MAX_ACTOR_BYTES)


def decide_revise(
    state: ClaimReviseState, inp: ClaimReviseInput, prepared: None, ctx: DecideContext,
) -> list[Decision]:
    evidence = validate_evidence(inp.evidence, state.revisions)
    claim = state.claim
    if inp.if_revision != claim.head_revision_id:
        raise _stale("claim", claim.claim_id, claim.head_revision_id, inp.if_revision)
    if claim.status in TERMINAL:
        raise InvalidRequest(f"cannot revise {claim.status} claim {claim.claim_id}")
    return [Decision(claim.claim_id, claim.stream_version + 1, ClaimRevised(
        claim_id=claim.claim_id, revision_id=ctx.new_id("crev"),
        revision_number=claim.head_revision_number + 1, previous_revision_id=claim.head_revision_id,
        statement=inp.statement, evidence=evidence, confidence=inp.confidence, actor=inp.actor,
    ))]


def prepare_retract(inp: ClaimRetractInput) -> None:
    check_id("claim_id", inp.claim_id)
    check_text("reason", inp.reason, limits.MAX_REASON_BYTES)
    check_optional_text("actor", inp.actor, limits.MAX_ACTOR_BYTES)


def decide_retract(
    state: ClaimState, inp: ClaimRetractInput, prepared: None, ctx: DecideContext
) -> list[Decision]:
    if state.status == "retracted":
        raise InvalidRequest(f"claim {state.claim_id} has already been retracted")
    return [Decision(state.claim_id, state.stream_version + 1, ClaimRetracted(
        claim_id=state.claim_id, revision_id=state.head_revision_id, reason=inp.reason,
        actor=inp.actor,
    ))]
