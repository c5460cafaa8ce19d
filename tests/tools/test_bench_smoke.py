"""The benchmarks run end to end in quick mode, so they cannot rot (no timing is asserted)."""

from __future__ import annotations

import importlib.util

from tools.bench import put


class TestBenchSmoke:
    def test_put_benchmark_runs_and_reports_every_row(self, capsys: object) -> None:
        """The put benchmark prints a row per measurement with positive figures."""
        rows = put.main(["--quick"])
        assert 4 == len(rows)
        assert all(row.ours > 0 and row.baseline > 0 for row in rows)


class TestDaemonBenchSmoke:
    def test_daemon_benchmark_runs_and_reports_every_row(self) -> None:
        """The daemon benchmark starts a daemon, measures every row and stops it."""
        from tools.bench import daemon

        rows = daemon.main(["--quick"])
        assert len(rows) in (6, 7)  # the peer row needs eventsourcing installed
        assert all(row.ours > 0 and row.baseline > 0 for row in rows)


class TestSemanticBenchSmoke:
    def test_semantic_benchmark_runs_and_reports_every_row(self) -> None:
        """The dense channel's cost benchmark measures each side of every row and leaves the
        model switched on for the rest of the process."""
        from memoree.projections import embedding
        from tools.bench import semantic

        rows = semantic.main(["--quick", "--n", "120", "--puts", "10", "--scan-rows", "5000"])
        # The sqlite-vec comparison row is there where the bench extra is installed.
        assert 5 + (importlib.util.find_spec("sqlite_vec") is not None) == len(rows)
        assert all(row.ours > 0 and row.baseline > 0 for row in rows)
        assert embedding.load_model() is not None
