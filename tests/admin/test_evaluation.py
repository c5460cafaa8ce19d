"""The evaluator's reading of "returned" (protocol §10.3): recall's claims and artifact refs are
what it returns; its unqualified candidates are leads, which count on neither side of a case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memoree.admin.evaluation import Client, evaluate, seed_store
from tests.memoree.test_eval import CONTEXT, write_corpus

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


class OneByOneClient(Client):
    """The loaders' path before batching: each mutation its own request and transaction."""

    def ok_many(self, mutations: Any) -> list[dict[str, Any]]:
        return [self.ok(op, payload, context=context, key=key) for op, payload, context, key in mutations]


class TestBatchedSeeding:
    def test_runs_of_artifacts_in_batches_store_what_one_request_per_seed_does(self, tmp_path: Path) -> None:
        """Seeds with runs of artifacts between claims and a relation, seeded with batches and one
        request per seed (same clock and ids), leave the same rows and the same label maps."""
        from tests.commands.test_bulk import open_store, tables

        def artifact(label: str, text: str) -> dict[str, Any]:
            return {"label": label, "context": CONTEXT, "entity": "artifact", "kind": "note", "title": label,
                    "content": {"type": "text", "data": text}}

        def claim(label: str, source: str, quote: str) -> dict[str, Any]:
            return {"label": label, "context": CONTEXT, "entity": "claim", "claim_type": "fact",
                    "statement": f"{label} holds", "evidence": [{"artifact_label": source, "quote": quote}]}

        seeds = [artifact("a1", "queue workers resize images"), artifact("a2", "the cache keeps thumbnails"),
                 claim("c0", "a1", "resize images"), claim("c1", "a2", "keeps thumbnails"),
                 artifact("a3", "workers retry twice"),
                 {"label": "r1", "context": CONTEXT, "entity": "relation", "source_label": "c1",
                  "relation": "contradicts", "target_label": "c0"},
                 artifact("a4", "retries back off"), artifact("a5", "big " * 6000 + "end"), claim("c2", "a5", "big end")]
        seeded = []
        for name, kind in (("lone", OneByOneClient), ("batched", Client)):
            service = open_store(tmp_path / name)
            seeded.append((service, seed_store(kind(service), seeds)))
        (lone, lone_seeded), (batched, batched_seeded) = seeded
        assert batched_seeded == lone_seeded and len(batched_seeded.ids) == 8
        assert tables(batched) == tables(lone)
        for service in (lone, batched):
            service.close()
