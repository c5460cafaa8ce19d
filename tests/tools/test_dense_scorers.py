"""The offline scorer comparison runs on tiny generated dev sets (no figure is asserted)."""

from __future__ import annotations

from pathlib import Path

from tests.admin.test_locomo import write_dataset
from tests.memoree.test_eval import write_corpus
from tools.bench import dense_scorers


class TestDenseScorersSmoke:
    def test_every_scorer_gets_a_row_on_both_sets(self, tmp_path: Path) -> None:
        """Each scorer is reported for the Memoree corpus (paraphrase vs unanswerable) and for LoCoMo."""
        corpus = write_corpus(tmp_path / "v2", [
            {"case_id": "p", "slice": "paraphrase", "query": "who handles picture jobs",
             "expected_presence": "claims", "relevant_claims": ["fact"]},
            {"case_id": "n", "slice": "honest_none", "query": "who signs the certificates", "expected_presence": "none"}])
        rows = dense_scorers.main(["--corpus", str(corpus), "--locomo", str(write_dataset(tmp_path / "dev"))],
                                  out=lambda row: None)
        for name in dense_scorers.SCORERS:
            assert 2 == sum(row.startswith(f"| {name} |") for row in rows)
        assert rows[0].startswith("Memoree corpus v2: 1 paraphrase questions with a gold claim, 1 unanswerable")

    def test_a_missing_folder_is_skipped_with_the_reason(self, tmp_path: Path) -> None:
        """Absent folders are named, not failed on."""
        rows = dense_scorers.main(["--corpus", str(tmp_path / "a"), "--locomo", str(tmp_path / "b")], out=lambda row: None)
        assert [f"skipped: no corpus at {tmp_path / 'a'}", "", f"skipped: no LoCoMo folder at {tmp_path / 'b'}"] == rows
