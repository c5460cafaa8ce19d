"""The evaluator's reading of "returned" (protocol §10.3): recall's claims and artifact refs are
what it returns; its unqualified candidates are leads, which count on neither side of a case."""

from __future__ import annotations

from pathlib import Path

from memoree.admin.evaluation import evaluate
from tests.memoree.test_eval import write_corpus

# Shares one of three words with the seeded note and claim: both are unqualified candidates.
PARTIAL_QUERY = "image thumbnails resizing"


def only_case(report: dict) -> dict:
    [case] = report["cases"]
    return case


class TestCandidatesAreLeads:
    """A label recall offers only among its candidates is neither found nor forbidden."""

    def test_a_relevant_label_only_among_the_candidates_is_missing_from_recall(self, tmp_path: Path) -> None:
        """A relevant artifact that recall lists as an unqualified candidate still fails the case,
        and the case counts as a false abstain (presence none on an answerable question)."""
        folder = write_corpus(tmp_path / "lead", [{"case_id": "q", "query": PARTIAL_QUERY,
                                                  "expected_presence": "none", "relevant_artifacts": ["doc"],
                                                  "gate": "report"}])
        report = evaluate(folder)
        case = only_case(report)
        assert ("none", 1.0) == (case["presence"], case["metrics"]["candidate_suggestion_recall"])
        assert ["relevant artifact doc missing from recall"] == case["failures"]
        assert 1.0 == report["aggregate"]["false_abstain_rate"]

    def test_a_forbidden_label_only_among_the_candidates_is_not_a_forbidden_return(self, tmp_path: Path) -> None:
        """A forbidden claim and artifact that recall lists only as unqualified candidates are no
        forbidden return: the case passes, as the protocol's lexical-only v2 run requires."""
        folder = write_corpus(tmp_path / "bait", [
            {"case_id": "bait", "query": PARTIAL_QUERY, "expected_presence": "none", "forbidden": ["doc", "fact"]},
            {"case_id": "leads", "query": PARTIAL_QUERY, "expected_presence": "none", "gate": "report",
             "relevant_claims": ["fact"], "relevant_artifacts": ["doc"]},
        ], baseline={"max_forbidden_returns": 0})
        report = evaluate(folder)
        bait, leads = report["cases"]
        assert 1.0 == leads["metrics"]["candidate_suggestion_recall"]  # both are recall's candidates
        assert [] == bait["failures"] and bait["passed"]
        assert (0, True) == (report["aggregate"]["forbidden_returns"], report["passed"])

    def test_a_forbidden_label_that_recall_returns_is_a_forbidden_return(self, tmp_path: Path) -> None:
        """The same labels returned as recall's claims and artifact refs fail the case and count."""
        folder = write_corpus(tmp_path / "returned", [{"case_id": "q", "query": "image queue workers",
                                                      "expected_presence": "claims", "forbidden": ["doc", "fact"]}])
        report = evaluate(folder)
        assert 2 == report["aggregate"]["forbidden_returns"] and not report["passed"]
        assert {"forbidden label doc returned", "forbidden label fact returned"} <= set(only_case(report)["failures"])
