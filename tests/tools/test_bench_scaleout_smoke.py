"""The scale-out benchmark runs end to end in quick mode (no timing is asserted).

Skipped, with the reason, when no PostgreSQL server is reachable through ``MEMOREE_TEST_PG_URL``.
"""

from __future__ import annotations

import pytest

from tests.pgsupport import require_pg


class TestScaleoutBenchSmoke:
    """The benchmark measures both backends and prints a row per figure."""

    def test_scaleout_benchmark_reports_rates_and_lags(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """One and two writers on PostgreSQL and SQLite: positive rates, every lag measured."""
        from tools.bench import scaleout

        url = require_pg()
        monkeypatch.delenv("MEMOREE_LOG_URL", raising=False)
        rows = scaleout.main(["--quick", "--puts", "12", "--writers", "1,2", "--pg-url", url])
        assert 7 == len(rows)
        assert all(row.ours > 0 and row.baseline > 0 for row in rows)
