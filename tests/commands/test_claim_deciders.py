"""Given state, when a claim command, then the events it decides (no I/O anywhere)."""

from __future__ import annotations

import pytest

from memoree.commands import claims
from memoree.commands.state import ClaimReviseState, ClaimState, RevisionSize
from memoree.errors import InvalidRequest, NotFound, RevisionConflict
from memoree.eventlog.events import ClaimAsserted, ClaimRetracted, EvidenceRef
from memoree.inputs import ClaimAssertInput, ClaimRetractInput, ClaimReviseInput, EvidenceLocator
from tests.commands.test_artifact_deciders import SCOPE, fixed_ctx

SIZES = {("art_1", "arev_1"): RevisionSize("art_1", "arev_1", 10)}


def claim_state(**overrides: object) -> ClaimState:
    fields = dict(claim_id="clm_1", owner=SCOPE, claim_type="fact", status="active",
                  head_revision_id="crev_1", head_revision_number=1, stream_version=1)
    fields.update(overrides)
    return ClaimState(**fields)  # type: ignore[arg-type]


def locator(start: int | None = 0, end: int | None = 5, rev: str = "arev_1") -> EvidenceLocator:
    return EvidenceLocator(artifact_id="art_1", revision_id=rev, start_byte=start, end_byte=end)


class TestAssert:
    def test_assert_records_statement_evidence_and_validity(self) -> None:
        """An assert decides claim.asserted with normalized validity and the cited spans."""
        inp = ClaimAssertInput(claim_type="fact", statement="s", evidence=[locator()],
                               valid_from="2026-01-01T01:00:00+01:00", valid_until="2027-01-01T00:00:00Z")
        [decision] = claims.decide_assert(SIZES, inp, claims.prepare_assert(inp), fixed_ctx())
        assert ClaimAsserted(
            claim_id="clm_1", revision_id="crev_2", claim_type="fact", statement="s",
            evidence=[EvidenceRef("art_1", "arev_1", 0, 5)],
            valid_from="2026-01-01T00:00:00.000000Z", valid_until="2027-01-01T00:00:00.000000Z",
        ) == decision.payload

    @pytest.mark.parametrize("start,end", [(5, 5), (6, 5), (0, 11), (None, 3), (3, None)])
    def test_spans_outside_the_revision_bytes_are_refused(self, start: int | None, end: int | None) -> None:
        """Empty, reversed, overlong or one-sided spans are INVALID_REQUEST."""
        inp = ClaimAssertInput(claim_type="fact", statement="s", evidence=[locator(start, end)])
        with pytest.raises(InvalidRequest):
            claims.decide_assert(SIZES, inp, claims.prepare_assert(inp), fixed_ctx())

    def test_span_reaching_the_last_byte_is_accepted(self) -> None:
        """A span ending exactly at the revision's size is valid (half-open)."""
        inp = ClaimAssertInput(claim_type="fact", statement="s", evidence=[locator(0, 10)])
        assert claims.decide_assert(SIZES, inp, claims.prepare_assert(inp), fixed_ctx())

    def test_unknown_evidence_revision_is_not_found(self) -> None:
        """Evidence citing a revision that does not exist is NOT_FOUND."""
        inp = ClaimAssertInput(claim_type="fact", statement="s", evidence=[locator(rev="arev_9")])
        with pytest.raises(NotFound):
            claims.decide_assert(SIZES, inp, claims.prepare_assert(inp), fixed_ctx())

    @pytest.mark.parametrize("valid_from,valid_until", [
        ("2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z"),
        ("2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"),
        ("yesterday", None),
    ])
    def test_validity_must_be_a_nonempty_half_open_interval(self, valid_from: str, valid_until: str | None) -> None:
        """valid_from must parse and be strictly earlier than valid_until."""
        with pytest.raises(InvalidRequest):
            claims.prepare_assert(ClaimAssertInput(claim_type="fact", statement="s",
                                                   valid_from=valid_from, valid_until=valid_until))

    @pytest.mark.parametrize("confidence", [-0.1, 1.5, float("nan"), float("inf")])
    def test_confidence_must_be_finite_in_unit_interval(self, confidence: float) -> None:
        """Confidence outside [0, 1] or not finite is INVALID_REQUEST."""
        with pytest.raises(InvalidRequest):
            claims.prepare_assert(ClaimAssertInput(claim_type="fact", statement="s", confidence=confidence))


class TestReviseAndRetract:
    def test_revise_replaces_evidence_and_confidence(self) -> None:
        """A revision with no evidence or confidence records none (nothing is inherited)."""
        inp = ClaimReviseInput(claim_id="clm_1", if_revision="crev_1", statement="new")
        [decision] = claims.decide_revise(ClaimReviseState(claim=claim_state(), revisions={}), inp, None, fixed_ctx())
        assert ([], None, 2, 2) == (decision.payload.evidence, decision.payload.confidence,
                                    decision.payload.revision_number, decision.stream_version)

    def test_evidence_is_checked_before_the_revision(self) -> None:
        """Bad evidence wins over a stale if_revision (the spec's check order)."""
        inp = ClaimReviseInput(claim_id="clm_1", if_revision="crev_0", statement="x", evidence=[locator(rev="arev_9")])
        with pytest.raises(NotFound):
            claims.decide_revise(ClaimReviseState(claim=claim_state(), revisions=SIZES), inp, None, fixed_ctx())

    def test_stale_revision_conflicts(self) -> None:
        """A stale if_revision is REVISION_CONFLICT with the claim's current head."""
        inp = ClaimReviseInput(claim_id="clm_1", if_revision="crev_0", statement="x")
        with pytest.raises(RevisionConflict) as caught:
            claims.decide_revise(ClaimReviseState(claim=claim_state(), revisions={}), inp, None, fixed_ctx())
        assert "crev_1" == caught.value.details["current_revision"]

    @pytest.mark.parametrize("status", ["retracted", "superseded"])
    def test_terminal_claims_cannot_be_revised(self, status: str) -> None:
        """Retracted and superseded claims refuse revision."""
        inp = ClaimReviseInput(claim_id="clm_1", if_revision="crev_1", statement="x")
        with pytest.raises(InvalidRequest):
            claims.decide_revise(ClaimReviseState(claim=claim_state(status=status), revisions={}), inp, None, fixed_ctx())

    def test_superseded_claim_can_be_retracted(self) -> None:
        """Retraction is allowed from superseded and records the reason."""
        [decision] = claims.decide_retract(claim_state(status="superseded"),
                                           ClaimRetractInput(claim_id="clm_1", reason="wrong"), None, fixed_ctx())
        assert ClaimRetracted(claim_id="clm_1", revision_id="crev_1", reason="wrong") == decision.payload

    def test_retracting_twice_is_refused(self) -> None:
        """An already retracted claim cannot be retracted again."""
        with pytest.raises(InvalidRequest):
            claims.decide_retract(claim_state(status="retracted"), ClaimRetractInput(claim_id="clm_1", reason="x"), None, fixed_ctx())
