"""The WAL pages benchmark runs end to end in quick mode (no figure is asserted but its sign)."""

from __future__ import annotations

from tools.bench import walpages


def test_walpages_benchmark_attributes_the_puts_pages_and_reports_both_rows(capsys: object) -> None:
    """Single and grouped puts each give pages and CPU per put, beside raw SQLite's."""
    for group in ("1", "4"):
        rows = walpages.main(["--quick", "--group", group])
        assert [row.name for row in rows] == ["WAL pages per put", "CPU per put (ms)"]
        assert all(row.ours > 0 and row.baseline > 0 for row in rows)
        assert rows[0].ours > rows[0].baseline  # a put writes more b-trees than one row and its FTS5 row
