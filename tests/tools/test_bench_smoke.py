"""The benchmarks run end to end in quick mode, so they cannot rot (no timing is asserted)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

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
        assert len(rows) in (7, 8)  # the peer row needs eventsourcing installed
        assert all(row.ours > 0 and row.baseline > 0 for row in rows)

    def test_daemon_model_comparison_waits_for_the_catch_up(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``--model`` runs daemons with the model off and on, and prints the catch-up's CPU per put."""
        from tools.bench import daemon

        rows = daemon.main(["--quick", "--model"])
        assert 4 == len(rows) and all(row.ours > 0 and row.baseline > 0 for row in rows)
        assert "catch-up after the puts" in capsys.readouterr().out


class TestSemanticBenchSmoke:
    def test_semantic_benchmark_runs_and_reports_every_row(self) -> None:
        """The dense channel's cost benchmark measures each side of every row and leaves the
        model switched on for the rest of the process."""
        from memoree.projections import embedding
        from tools.bench import semantic

        rows = semantic.main(["--quick", "--n", "120", "--puts", "10", "--scan-rows", "5000", "--tail-reps", "1"])
        # The sqlite-vec comparison row is there where the bench extra is installed; a put row
        # with the later catch-up and one row per tail size come with --puts and --tail-reps.
        assert 9 + (importlib.util.find_spec("sqlite_vec") is not None) == len(rows)
        assert all(row.ours > 0 and row.baseline > 0 for row in rows)
        assert embedding.load_model() is not None

    def test_semantic_scan_only_sweeps_the_prefilter(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``--scan-only`` measures just the scan, one row per size, and prints each kept-row
        count's recall centred and raw."""
        from tools.bench import semantic

        rows = semantic.main(["--scan-only", "--scan-rows", "3000", "--keep", "2100", "--queries", "3",
                              "--no-sqlite-vec"])
        assert 1 == len(rows) and rows[0].ours > 0 and rows[0].baseline > 0
        printed = capsys.readouterr().out
        assert "2100 rows, centred" in printed and "2100 rows, raw signs" in printed

    def test_semantic_reindex_store_times_an_existing_store(self, tmp_path: Path) -> None:
        """``--reindex-store`` reindexes a given data dir with the model off and on, wall and CPU."""
        from memoree.projections import embedding
        from memoree.service.service import Service
        from tests.conftest import Caller
        from tools.bench import semantic

        service = Service(tmp_path / "data")
        for i in range(5):
            Caller(service).put_text(f"note {i} about the store", key=f"k{i}")
        service.close()
        rows = semantic.main(["--reindex-store", str(tmp_path / "data"), "--reindexes", "1"])
        assert ["reindex, best wall", "reindex, least CPU (incl. the worker)"] == [row.name for row in rows]
        assert all(row.ours > 0 and row.baseline > 0 for row in rows)
        assert embedding.load_model() is not None

    def test_semantic_put_rates_compare_a_store_without_the_channel(self, tmp_path: Path) -> None:
        """The put-rate row's 'without' store really embeds nothing, and the 'with' store does."""
        from memoree.eventlog.db import DB_FILENAME, connect
        from tools.bench import semantic

        semantic.put_rates(tmp_path, 4)

        def vectors(side: bool) -> int:
            conn = connect(tmp_path / f"puts-{side}" / DB_FILENAME, readonly=True)
            try:
                return conn.execute("SELECT count(*) FROM artifact_vectors").fetchone()[0]
            finally:
                conn.close()

        assert vectors(False) == 0 and vectors(True) >= 4
