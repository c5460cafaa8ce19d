"""The group-commit benchmark runs end to end in quick mode (no figure is asserted but its sign)."""

from __future__ import annotations

from tools.bench import groups


def test_groups_benchmark_times_both_sides_for_every_group_size() -> None:
    """Each requested group size gives one row with the bulk lane's CPU per put beside the savepoints'."""
    rows = groups.main(["--quick", "--sizes", "1,3"])
    assert [row.name for row in rows] == ["writer CPU per put, groups of 1 (ms)", "writer CPU per put, groups of 3 (ms)"]
    assert all(row.ours > 0 and row.baseline > 0 for row in rows)
