"""A store's count of its no-op records is one row kept by a trigger, so a shared log's host reads
what its replica holds (position, no-op records, checkpoints) without scanning a table, and the
count stays right in a store from before it, after rolled-back records, and on a host whose
replica file predates it.

The PostgreSQL parts skip, with the reason, when no server is reachable through
``MEMOREE_TEST_PG_URL``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memoree.eventlog.db import connect
from memoree.eventlog import replica
from memoree.eventlog.replica import local_checkpoints, local_counters, local_noops
from memoree.eventlog.sqlite import SqliteEventStore
from memoree.service.service import Service
from tests.conftest import Caller
from tests.contracts.event_store_contract import append_one, new_event
from tests.memoree.test_sharedlog import claims_edge, open_host, shared_url  # noqa: F401 - fixtures


def record_noops(store: SqliteEventStore, first: int, count: int) -> None:
    """Record ``count`` no-op keys (``k{first}`` on) against the log's first event, in one transaction."""
    with store.transaction():
        for n in range(first, first + count):
            store.record_noop(f"k{n}", "digest", "relation.put", 1, b"{}", "2026-01-01T00:00:00.000000Z")


def forget_the_count(path: Path) -> None:
    """Make the file look like one written before the count existed (no table, no trigger)."""
    conn = connect(path)
    conn.execute("DROP TRIGGER idempotency_noops_counted")
    conn.execute("DROP TABLE idempotency_noop_count")
    conn.close()


@pytest.fixture
def store(tmp_path: Path) -> SqliteEventStore:
    """An SQLite log holding one event, which no-op records can name."""
    opened = SqliteEventStore(connect(tmp_path / "log.sqlite3"))
    append_one(opened, new_event("a", 1, 0))
    return opened


class TestTheCount:
    def test_reading_the_counts_looks_rows_up_and_scans_no_table(self, store: SqliteEventStore) -> None:
        """Every step of the plans that read the counts is a look-up by key, but the read of the
        one-row count table: none reads the no-op records, the checkpoints or the events."""
        for sql in (replica._NOOPS, replica._CHECKPOINTS, replica._COUNTERS):
            plan = [row[3] for row in store.conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
            scans = [step for step in plan if step.startswith("SCAN")]
            assert all(step.split()[1] in ("c", "idempotency_noop_count") for step in scans), plan
            assert not any("idempotency_noops" in step for step in plan), plan

    def test_the_counters_are_the_replicas_head_and_counts(self, store: SqliteEventStore) -> None:
        """With 3,000 records and 51 events, the counters read position 51, its hash, 3,000
        records and no checkpoint."""
        record_noops(store, 0, 3000)
        for version in range(2, 52):
            append_one(store, new_event("a", version, version))
        assert (51, 3000, 0, store.head().hash) == tuple(local_counters(store.conn))

    def test_the_count_moves_with_each_record_and_not_with_a_rolled_back_one(
            self, store: SqliteEventStore) -> None:
        """Each recorded no-op adds one; a transaction rolled back takes its records' count with it."""
        record_noops(store, 0, 3)
        with pytest.raises(RuntimeError), store.transaction():
            store.record_noop("lost", "digest", "relation.put", 1, b"{}", "2026-01-01T00:00:00.000000Z")
            raise RuntimeError("rolled back")
        assert 3 == local_noops(store.conn) == store.conn.execute(
            "SELECT count(*) FROM idempotency_noops").fetchone()[0]

    def test_a_store_from_before_the_count_gets_it_at_open_and_keeps_it(
            self, store: SqliteEventStore, tmp_path: Path) -> None:
        """A file written before the count existed, holding 7 records, counts 7 when it opens,
        and 8 after one more."""
        record_noops(store, 0, 7)
        store.conn.close()
        forget_the_count(tmp_path / "log.sqlite3")
        reopened = SqliteEventStore(connect(tmp_path / "log.sqlite3"))
        assert 7 == local_noops(reopened.conn)
        record_noops(reopened, 7, 1)
        assert 8 == local_noops(reopened.conn)

    def test_opening_a_counted_store_in_a_read_snapshot_writes_nothing(
            self, store: SqliteEventStore, tmp_path: Path) -> None:
        """A store that has its count opens inside a deferred transaction (as a migration reads
        its source) without taking the write lock: another connection can still write."""
        reader = connect(tmp_path / "log.sqlite3")
        reader.execute("BEGIN")
        SqliteEventStore(reader)
        record_noops(store, 0, 1)  # would wait for the reader's write lock, then fail
        reader.execute("COMMIT")
        assert (1, 0) == (local_noops(store.conn), local_checkpoints(store.conn))


    def test_verify_reports_a_count_that_disagrees_with_the_records(self, tmp_path: Path) -> None:
        """A store whose one no-op record is counted as two fails verify with a ``noops`` issue."""
        service = Service(tmp_path / "data")
        try:
            host = Caller(service)
            host.ok("relation.put", claims_edge(host), key="noop-1")  # identical: a no-op record
            assert host.ok("verify", {})["result"]["ok"]
            service.engine.conn.execute("UPDATE idempotency_noop_count SET noops = 2")
            report = host.ok("verify", {})["result"]
            assert not report["ok"] and ["noops"] == [i["kind"] for i in report["issues"]], report
        finally:
            service.close()


class TestOnAHost:
    def test_a_replica_from_before_the_count_keeps_copying_no_op_records_right(
            self, shared_url: str, open_host: Any, tmp_path: Path) -> None:
        """Host A holds B's first no-op record, is closed and its file made to predate the count;
        B records a second. A, opened again, counts its one record, copies only the second (a
        wrong count would copy the first twice or miss the second), and its counters then match
        the shared head's."""
        a, b = open_host("a"), open_host("b")
        edge = claims_edge(b)
        b.ok("relation.put", edge, key="noop-1")  # an identical edge: a no-op record, no event
        a.head()
        assert 1 == local_noops(a.service.engine.conn)
        a.service.close()
        forget_the_count(tmp_path / "a" / "memoree.sqlite3")
        b.ok("relation.put", edge, key="noop-2")
        again = open_host("a")
        again.head()
        conn = again.service.engine.conn
        shared = again.service.engine.shared.pg.counters()
        assert (shared.seq, 2, shared.checkpoints) == local_counters(conn)[:3]
        keys = [k for (k,) in conn.execute("SELECT key FROM idempotency_noops")]
        assert ["noop-1", "noop-2"] == sorted(k.rsplit(":", 1)[1] for k in keys)  # namespaced
        assert again.ok("verify", {})["result"]["ok"]
