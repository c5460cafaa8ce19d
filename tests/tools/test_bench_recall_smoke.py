"""The recall benchmark runs end to end in quick mode, so it cannot rot (no timing is asserted)."""

from __future__ import annotations


class TestRecallBenchSmoke:
    def test_recall_benchmark_runs_and_reports_every_row(self) -> None:
        """The recall benchmark serves both endpoints over HTTP, measures every row and stops them."""
        from tools.bench import recall

        rows = recall.main(["--quick"])
        assert 3 == len(rows)
        assert all(row.ours > 0 and row.baseline > 0 for row in rows)
