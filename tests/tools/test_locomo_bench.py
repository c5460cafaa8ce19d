"""The LoCoMo latency benchmark runs end to end on a tiny generated folder (no timing is asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.admin.test_locomo import write_dataset
from tools.bench import locomo


class TestLocomoBenchSmoke:
    def test_benchmark_serves_every_question_through_the_daemon(self, tmp_path: Path) -> None:
        """Each op gets a p50 and a p99 row against the FTS5-over-turns baseline, plus the round trip."""
        rows = locomo.main(["--data", str(write_dataset(tmp_path / "dev")), "--questions", "2"])
        assert [row.name for row in rows][::2] == ["locomo context.build (2,000 B) p50", "locomo memory.recall p50",
                                                   "locomo search (limit 10) p50",
                                                   "locomo daemon round trip (capabilities) p50"]
        assert all(row.ours > 0 and row.baseline > 0 for row in rows)

    def test_benchmark_explains_a_missing_folder(self, tmp_path: Path) -> None:
        """Without the data folder the benchmark reports nothing and says why."""
        assert locomo.main(["--data", str(tmp_path / "absent")]) == []

    def test_a_setting_reaches_the_daemon(self, tmp_path: Path) -> None:
        """``--set`` starts the daemon with that setting: one it refuses stops the benchmark."""
        with pytest.raises(RuntimeError, match="did not start"):
            locomo.main(["--data", str(write_dataset(tmp_path / "dev")), "--questions", "1",
                         "--set", "MEMOREE_READ_PROCESSES=9"])
