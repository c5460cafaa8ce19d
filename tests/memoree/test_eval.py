"""The evaluator (§10): corpus loading, metrics, gates, and the shared corpora end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memoree.cli.app import app
from memoree.admin.evaluation import (
    CorpusError,
    EvalOptions,
    compare_baseline,
    evaluate,
    macro,
    mrr_metric,
    ndcg_metric,
    precision_metric,
    recall_metric,
)

CORPORA = Path(__file__).resolve().parents[3] / "shared" / "eval" / "memoree-corpus"
needs_corpus = pytest.mark.skipif(not CORPORA.is_dir(), reason="../shared/eval/memoree-corpus is not present")
CONTEXT = {"workspace_id": "w", "project_id": "p"}


def write_corpus(folder: Path, cases: list[dict[str, Any]], baseline: dict[str, Any] | None = None) -> Path:
    """A tiny corpus: one artifact, one claim quoting it."""
    folder.mkdir()
    seeds = [
        {"schema_version": 1, "label": "doc", "context": CONTEXT, "entity": "artifact", "kind": "note",
         "title": "Queue note", "content": {"type": "text", "data": "The image queue is processed by workers."}},
        {"schema_version": 1, "label": "fact", "context": CONTEXT, "entity": "claim", "claim_type": "fact",
         "statement": "The image queue is processed by workers.",
         "evidence": [{"artifact_label": "doc", "quote": "image queue is processed"}]},
    ]
    (folder / "seed.jsonl").write_text("".join(json.dumps(s) + "\n" for s in seeds))
    (folder / "cases.jsonl").write_text("".join(json.dumps({"schema_version": 1, "context": CONTEXT, **c}) + "\n" for c in cases))
    (folder / "baseline.json").write_text(json.dumps({"schema_version": 1, "corpus_version": folder.name,
                                                      **(baseline or {"macro_claim_recall": 1.0})}))
    return folder


class TestMetrics:
    """Per-case metrics follow the corpus definitions."""

    def test_recall_precision_mrr_and_ndcg(self) -> None:
        """Recall over direct gold, precision over direct ∪ helpful, MRR for one label, graded nDCG."""
        assert 0.5 == recall_metric(["a", "b"], ["a", "x"]) and recall_metric([], ["a"]) is None
        assert 0.5 == precision_metric(["a"], ["h"], ["a", "x"]) and 1.0 == precision_metric(["a"], ["h"], ["a", "h"])
        assert (1.0, 0.0) == (precision_metric([], [], []), precision_metric(["a"], [], []))
        assert 0.5 == mrr_metric(["a"], ["x", "a"]) and mrr_metric(["a", "b"], ["a"]) is None
        assert 1.0 == ndcg_metric(["a"], ["h"], ["a", "h"])
        assert ndcg_metric(["a"], ["h"], ["h", "a"]) < 1.0
        assert 1.0 == macro([]) and 0.5 == macro([None, 0.0, 1.0])

    def test_baseline_floors_and_ceilings(self) -> None:
        """Floors compare with epsilon; rate ceilings and forbidden returns cap."""
        baseline = {"macro_claim_recall": 1.0, "max_false_answer_rate": 0.0, "max_forbidden_returns": 0, "epsilon": 0.0}
        good = {"macro_claim_recall": 1.0, "false_answer_rate": 0.0, "forbidden_returns": 0}
        assert compare_baseline(baseline, good)["passed"]
        bad = compare_baseline(baseline, {**good, "macro_claim_recall": 0.9, "forbidden_returns": 1})
        assert 2 == len(bad["regressions"]) and not bad["passed"]


class TestSuite:
    """A run seeds through the protocol, checks every case and gates on hard failures."""

    def test_a_passing_and_a_failing_corpus(self, tmp_path: Path) -> None:
        """Correct expectations pass; a wrong expected presence is a hard failure with exit 1."""
        good = write_corpus(tmp_path / "good", [{"case_id": "q", "query": "image queue workers",
                                                 "expected_presence": "claims", "relevant_claims": ["fact"],
                                                 "relevant_artifacts": ["doc"]}])
        report = evaluate(good)
        assert report["passed"] and report["complete"] and 1.0 == report["aggregate"]["macro_claim_recall"]
        bad = write_corpus(tmp_path / "bad", [{"case_id": "q", "query": "image queue workers",
                                               "expected_presence": "none"}])
        result = CliRunner().invoke(app, ["eval", str(bad)])
        document = json.loads(result.stdout)
        assert (1, False) == (result.exit_code, document["passed"])
        assert any("presence claims != expected none" in f for f in document["hard_failures"])

    def test_inconsistent_corpora_are_refused(self, tmp_path: Path) -> None:
        """A quote that does not occur exactly once is a corpus error, not a metric."""
        folder = write_corpus(tmp_path / "broken", [])
        seeds = (folder / "seed.jsonl").read_text().replace("image queue is processed\"", "missing quote\"")
        (folder / "seed.jsonl").write_text(seeds)
        with pytest.raises(CorpusError):
            evaluate(folder)

    def test_a_case_subset_skips_the_baseline(self, tmp_path: Path) -> None:
        """Running chosen cases never claims a baseline verdict."""
        folder = write_corpus(tmp_path / "subset", [
            {"case_id": "a", "query": "image queue", "expected_presence": "claims", "relevant_claims": ["fact"]},
            {"case_id": "b", "query": "nothing here zzz", "expected_presence": "none"}])
        report = evaluate(folder, EvalOptions(case_ids=("b",)))
        assert (False, None, True) == (report["complete"], report["baseline"]["passed"], report["passed"])


@needs_corpus
class TestSharedCorpora:
    """The shared corpora pass their baselines (read from ../shared, never copied here)."""

    def test_v1_passes_through_the_cli(self) -> None:
        """`memoree eval v1` exits 0 with every macro metric at 1.0."""
        result = CliRunner().invoke(app, ["eval", str(CORPORA / "v1")])
        report = json.loads(result.stdout)
        assert 0 == result.exit_code, report["hard_failures"]
        assert all(1.0 == report["aggregate"][m] for m in ("macro_claim_recall", "macro_claim_precision",
                                                          "macro_artifact_recall", "macro_artifact_precision"))

    def test_v2_passes_its_gates(self) -> None:
        """v2: no hard failures, no forbidden returns, no false answers, lexical slices at full recall."""
        report = evaluate(CORPORA / "v2")
        aggregate = report["aggregate"]
        assert report["passed"] and [] == report["hard_failures"]
        assert (0, 0.0) == (aggregate["forbidden_returns"], aggregate["false_answer_rate"])
        assert 0 == aggregate["citation_parity_violations"] + aggregate["budget_violations"] + aggregate["scope_violations"]
        slices = aggregate["slices"]
        assert 1.0 == slices["exact_identifier"]["macro_claim_recall"] == slices["lexical"]["macro_claim_recall"]
        assert slices["typo_abbreviation"]["macro_claim_recall"] >= 0.8
        assert 1.0 == slices["long_document"]["macro_artifact_ndcg"]
