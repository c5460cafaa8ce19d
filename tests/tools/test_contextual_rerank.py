"""The contextual rerank bench runs on a tiny generated BERT and a tiny LoCoMo set, and blends scores as documented."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import memoree.queries.context_build as context_build
from tests.admin.test_locomo import write_dataset
from tests.tools.test_contextual_judge import tiny_bert
from tools.bench import contextual_rerank


def items(*scores: float) -> list:
    return [context_build._Item(score, rank, rank, SimpleNamespace(), None) for rank, score in enumerate(scores)]


class TestRescore:
    def test_mult_scales_each_score_by_its_clamped_cosine(self) -> None:
        """At weight 0.5 a score keeps half of itself plus half times its cosine, a negative cosine counting 0."""
        scored = contextual_rerank.rescore(items(2.0, 4.0), [1.0, -0.5], 0.5, "mult")
        assert [2.0, 2.0] == [i.score for i in scored]

    def test_add_mixes_the_normalised_score_with_the_cosine(self) -> None:
        """The best lexical score counts 1, so a weaker item with a higher cosine can pass it."""
        scored = contextual_rerank.rescore(items(4.0, 2.0), [0.0, 1.0], 0.5, "add")
        assert [0.5, 0.75] == [i.score for i in scored]

    def test_rrf_rewards_the_contextual_rank(self) -> None:
        """With all weight on the contextual rank, the item with the highest cosine scores highest."""
        scored = contextual_rerank.rescore(items(3.0, 2.0, 1.0), [0.1, 0.2, 0.9], 1.0, "rrf")
        assert max(scored, key=lambda i: i.score).rank == 2


class TestSmoke:
    def test_every_setting_and_every_held_out_chat_gets_a_row(self, tmp_path: Path) -> None:
        """The baseline and each setting print a ratio row, then the cost and one leave-one-out row per chat."""
        original = context_build.evidence_items
        rows = contextual_rerank.main(["--data", str(write_dataset(tmp_path / "dev", ("7", "8"))),
                                       "--model", str(tiny_bert(tmp_path / "bert")), "--heads", "4",
                                       "--weights", "0.5", "--blends", "mult,rrf"], out=lambda row: None)
        assert context_build.evidence_items is original
        assert [r.split()[0] for r in rows[:3]] == ["(0,", "(4,", "(4,"]
        assert all(" all " in r and "x  multi-hop" in r for r in rows[:3])
        assert rows[3].startswith("model ")
        assert [r.split(":")[0] for r in rows[4:]] == ["hold out 7", "hold out 8"]

    def test_a_missing_model_is_skipped_with_the_reason(self, tmp_path: Path) -> None:
        """Without the model nothing is loaded or measured, and the row says why."""
        rows = contextual_rerank.main(["--data", str(tmp_path), "--model", str(tmp_path)], out=lambda row: None)
        assert [f"skipped: no model.safetensors in {tmp_path}"] == rows
