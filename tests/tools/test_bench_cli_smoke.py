"""The command start-up benchmark runs end to end in quick mode (no timing asserted)."""

from __future__ import annotations

from tools.bench import cli


class TestCliBenchSmoke:
    def test_cli_benchmark_times_every_command_against_python(self) -> None:
        """Help, a daemon search, a daemon put, a memoree call and an in-process search each get a row
        with positive figures against python -c pass."""
        rows = cli.main(["--quick"])
        assert ["memoree search --help", "memoree --help", "memoree search, warm daemon",
                "memoree artifact put, warm daemon", "memoree call capabilities, warm daemon",
                "memoree search --in-process"] == [row.name for row in rows]
        assert all(row.ours > 0 and row.baseline > 0 for row in rows)
