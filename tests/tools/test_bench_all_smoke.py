"""The bulk, peer and all-in-one benchmark entry points run in quick mode (no timing asserted)."""

from __future__ import annotations

from tools.bench import bulk, peer


class TestBulkAndPeerSmoke:
    def test_bulk_benchmark_runs_and_verifies(self) -> None:
        """The bulk benchmark loads (wall and CPU rates), reindexes and verifies a small log,
        reporting seven rows."""
        rows = bulk.main(["--quick"])
        assert 7 == len(rows) and all(row.ours > 0 for row in rows)

    def test_peer_benchmark_reports_or_explains(self) -> None:
        """The peer row is measured when eventsourcing is installed, and explained when it is not."""
        rows = peer.main(["--quick"])
        assert rows == [] or rows[0].baseline > 0


class TestImporterSmoke:
    def test_importer_benchmark_imports_and_replays(self) -> None:
        """The importer benchmark imports a mem0 export through a daemon (batched and one by one) and
        replays it, then re-imports a tracked MCP-memory file unchanged and with one change."""
        from tools.bench import importer

        rows = importer.main(["--quick"])
        assert 4 == len(rows) and all(row.ours > 0 and row.baseline > 0 for row in rows)


class TestReadsSmoke:
    def test_reads_benchmark_measures_readers_and_a_writer(self) -> None:
        """The reads benchmark runs 1 and 4 search clients and a writer alone, beside 3 readers and
        beside 3 readers of another daemon (the control)."""
        from tools.bench import reads

        rows = reads.main(["--quick"])
        assert 4 == len(rows) and all(row.ours > 0 and row.baseline > 0 for row in rows)
