"""The SQLite event store passes the shared contract and keeps its own promises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memoree.eventlog.db import connect, features, sqlite3
from memoree.eventlog.sqlite import SqliteEventStore
from tests.contracts.event_store_contract import EventStoreContract, append_one, new_event


def _write_many(path: str, worker: int, count: int) -> None:
    store = SqliteEventStore(connect(path))
    for version in range(1, count + 1):
        append_one(store, new_event(f"w{worker}", version, version))


class TestSqliteEventStore(EventStoreContract):
    writer_process_target = staticmethod(_write_many)

    def make_store(self, tmp_path: Path) -> Any:
        store = SqliteEventStore(connect(tmp_path / "log.sqlite3"))
        store.path = str(tmp_path / "log.sqlite3")
        return store

    def open_again(self, store: Any) -> Any:
        return SqliteEventStore(connect(store.path))

    def spawn_writer_args(self, store: Any) -> tuple[Any, ...]:
        return (store.path,)


class TestSqliteSpecifics:
    def test_stored_events_are_immutable(self, tmp_path: Path) -> None:
        """UPDATE and DELETE on the events table abort."""
        store = SqliteEventStore(connect(tmp_path / "log.sqlite3"))
        append_one(store, new_event("a", 1, 0))
        for sql in ("UPDATE events SET type = 'x'", "DELETE FROM events"):
            with pytest.raises(sqlite3.IntegrityError):
                store.conn.execute(sql)

    def test_connection_is_wal_with_full_sync(self, tmp_path: Path) -> None:
        """Connections run in WAL mode with synchronous=FULL and foreign keys on."""
        conn = connect(tmp_path / "x.sqlite3")
        assert "wal" == conn.execute("PRAGMA journal_mode").fetchone()[0]
        assert 2 == conn.execute("PRAGMA synchronous").fetchone()[0]
        assert 1 == conn.execute("PRAGMA foreign_keys").fetchone()[0]

    def test_features_are_detected(self) -> None:
        """The driver reports FTS5 and secure-delete support rather than assuming them."""
        feats = features()
        assert feats.fts5
        assert isinstance(feats.secure_delete, bool)

    def test_only_purges_are_indexed_by_type(self, tmp_path: Path) -> None:
        """An older log's index of every event by type is dropped on open, and the purge
        look-ups (one artifact's, any artifact's) read the index of purges instead of the table."""
        conn = connect(tmp_path / "log.sqlite3")
        SqliteEventStore(conn)
        conn.execute("DROP INDEX events_purges")
        conn.execute("CREATE INDEX events_by_type ON events(type, commit_seq)")
        SqliteEventStore(conn)
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' "
                                                  "AND tbl_name = 'events' AND sql IS NOT NULL")}
        assert indexes == {"events_purges"}
        for sql in ("SELECT 1 FROM events WHERE type = 'artifact.purged' AND stream_id = ? AND instr(data, ?) > 0",
                    "SELECT 1 FROM events WHERE type = 'artifact.purged' AND instr(data, ?) > 0"):
            plan = " ".join(row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, ("a", b"x")[-sql.count("?"):]))
            assert "events_purges" in plan, plan

    def test_appends_in_one_transaction_chain_through_a_rolled_back_savepoint(self, tmp_path: Path) -> None:
        """Within one transaction each append continues from the previous one without reading
        the head back, and a savepoint rolled back after its append hands its position and
        hash back: the next append takes them, and the whole log verifies as one chain."""
        from memoree.eventlog.store import first_chain_break

        store = SqliteEventStore(connect(tmp_path / "log.sqlite3"))
        append_one(store, new_event("a", 1, 0))
        with store.transaction():
            with store.transaction():
                assert [e.commit_seq for e in store.append([new_event("b", 1, 1)])] == [2]
            with pytest.raises(RuntimeError):
                with store.transaction():
                    store.append([new_event("c", 1, 2), new_event("c", 2, 3)])
                    raise RuntimeError("the request failed after its append")
            with store.transaction():
                assert [e.commit_seq for e in store.append([new_event("d", 1, 4)])] == [3]
            assert [e.commit_seq for e in store.append([new_event("e", 1, 5)])] == [4]
        with store.transaction():
            assert [e.commit_seq for e in store.append([new_event("f", 1, 6)])] == [5]
        assert [e.stream_id for e in store.read()] == ["a", "b", "d", "e", "f"]
        assert first_chain_break(store.read_raw()) is None
