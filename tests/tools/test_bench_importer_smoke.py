"""The importer benchmark runs end to end in quick mode, so it cannot rot (no timing is asserted)."""

from __future__ import annotations


class TestImporterBenchSmoke:
    def test_importer_benchmark_runs_and_reports_every_row(self) -> None:
        """It imports, re-imports unchanged (asserting nothing was written) and with one change."""
        from tools.bench import importer

        rows = importer.main(["--quick"])
        assert 2 == len(rows)
        assert all(row.ours > 0 and row.baseline > 0 for row in rows)
