"""The search benchmark runs end to end in quick mode, so it cannot rot (no timing is asserted)."""

from __future__ import annotations

from tools.bench import search


class TestSearchBenchSmoke:
    def test_search_benchmark_reports_every_query_kind(self) -> None:
        """Quick mode measures p50 and p99 for each query kind, the whole mix and context.build."""
        rows = search.main(["--quick"])
        assert 13 == len(rows)
        assert all(row.ours > 0 and row.baseline > 0 for row in rows)
