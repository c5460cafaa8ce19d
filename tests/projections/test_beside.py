"""Blue/green reindex: built in a scratch database beside the live one, caught up, swapped in one transaction."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memoree.admin import verify as audit
from memoree.service.engine import Engine
from memoree.projections.base import owned_tables
from memoree.projections.beside import SCRATCH_PREFIX
from memoree.projections.fts import FTS_INDEXES
from memoree.service.service import Service
from tests.conftest import Caller
from tests.projections.test_reindex import populate, snapshot


def search_ids(call: Caller, query: str) -> set[str]:
    hits = call.ok("search", {"query": query})["result"]["hits"]
    return {hit["entity_id"] for hit in hits if hit["entity_type"] == "artifact"}


def check_text_indexes(conn: Any) -> None:
    for index in FTS_INDEXES:
        conn.execute(f"INSERT INTO {index}({index}, rank) VALUES('integrity-check', 1)")  # raises when damaged


def all_tables(engine: Engine) -> list[str]:
    return [t for p in engine.projectors for t in owned_tables(p) if t not in FTS_INDEXES]


class TestBlueGreenReindex:
    def test_writes_during_the_build_are_in_the_swapped_projections(self, call: Caller) -> None:
        """Writes committed by another connection during the replay and during the catch-up both
        end up in the swapped projections, and the store verifies clean."""
        populate(call)
        other = Caller(Service(call.service.data_dir))
        written: list[str] = []

        def write_meanwhile(_: int) -> None:
            if len(written) < 2:
                text = f"arrived meanwhile number{len(written)} quokka"
                written.append(other.put_text(text, key=f"meanwhile-{len(written)}")["artifact_id"])

        report = call.service.engine.reindex(progress=write_meanwhile)
        other.service.close()
        assert len(written) == 2
        assert report["commit_seq"] == call.head()
        assert set(written) <= search_ids(call, "quokka")
        assert audit.verify(call.service.engine)["ok"]

    def test_a_write_arriving_at_the_swap_waits_for_it_and_lands(self, call: Caller) -> None:
        """A write from another connection started as the swap begins succeeds (it waits for the
        lock, or the swap waits for it) and is searchable afterwards."""
        populate(call)
        other = Caller(Service(call.service.data_dir))
        results: list[dict[str, Any]] = []
        writer = threading.Thread(target=lambda: results.append(
            other.put_text("landed around the swap: pangolin", key="at-swap")))

        def on_phase(name: str) -> None:
            if name == "swapping in":
                writer.start()

        call.service.engine.reindex(phase=on_phase)
        writer.join()
        other.service.close()
        assert results and results[0]["artifact_id"] in search_ids(call, "pangolin")
        assert audit.verify(call.service.engine)["ok"]

    def test_readers_see_the_old_projections_during_the_build(self, call: Caller) -> None:
        """While the scratch is being built, the live tables answer exactly as before."""
        populate(call)
        before = snapshot(call.service.engine.conn, all_tables(call.service.engine))
        reader = Engine(call.service.data_dir)
        seen: list[dict[str, Any]] = []
        call.service.engine.reindex(progress=lambda _: seen.append(snapshot(reader.conn, all_tables(reader))))
        reader.close()
        assert seen and all(rows == before for rows in seen)

    def test_swapped_indexes_are_intact_and_keep_indexing_new_writes(self, call: Caller) -> None:
        """FTS5 integrity-check passes after the swap, and the same connection indexes later writes correctly."""
        populate(call)
        call.service.engine.reindex()
        check_text_indexes(call.service.engine.conn)
        later = call.put_text("written after the swap: wombat", key="after-swap")["artifact_id"]
        assert later in search_ids(call, "wombat")
        assert search_ids(call, "cache")
        check_text_indexes(call.service.engine.conn)
        assert audit.verify(call.service.engine)["ok"]

    def test_the_swapped_tables_keep_every_index_of_their_schema(self, call: Caller) -> None:
        """Indexes built after the copy (and the vectors' one, built at the replay's end) are the
        live store's own, with the same definitions, and queries use them."""
        populate(call)
        conn = call.service.engine.conn

        def indexes() -> list[tuple[str, str, str]]:
            return conn.execute("SELECT name, tbl_name, sql FROM main.sqlite_master WHERE type = 'index' "
                                "AND sql IS NOT NULL ORDER BY name").fetchall()

        before = indexes()
        assert any(name == "artifact_vectors_by_artifact" for name, _, _ in before)
        call.service.engine.reindex()
        assert indexes() == before
        plan = conn.execute("EXPLAIN QUERY PLAN SELECT vec_id FROM artifact_vectors WHERE artifact_id = 'x'").fetchall()
        assert "artifact_vectors_by_artifact" in " ".join(str(row[-1]) for row in plan)

    def test_another_connections_reads_survive_the_swap(self, call: Caller) -> None:
        """A service that searched (typo channel included) before another connection reindexed
        keeps answering afterwards, and sees writes made after the swap."""
        call.put_text("the quokka colony at dawn", key="first")
        assert 1 == len(search_ids(call, "qukka"))  # the typo channel's vocabulary views now exist
        other = Caller(Service(call.service.data_dir))
        other.service.engine.reindex()
        other.put_text("another quokka sighting", key="second")
        other.service.close()
        assert 2 == len(search_ids(call, "qukka"))
        assert 1 == len(search_ids(call, "sighting"))
        check_text_indexes(call.service.engine.conn)

    def test_a_failed_build_leaves_the_live_store_untouched_and_no_scratch(self, call: Caller) -> None:
        """An error during the build changes no live row and removes the scratch folder."""
        populate(call)
        engine = call.service.engine
        before = snapshot(engine.conn, all_tables(engine))

        def fail(_: int) -> None:
            raise RuntimeError("disk on fire")

        with pytest.raises(RuntimeError):
            engine.reindex(progress=fail)
        assert snapshot(engine.conn, all_tables(engine)) == before
        assert not list(engine.data_dir.glob(SCRATCH_PREFIX + "*"))

    def test_the_scratch_is_private(self, call: Caller) -> None:
        """During a build the scratch folder is 0700 and every file in it 0600, whatever the umask."""
        populate(call)
        data_dir = call.service.engine.data_dir
        modes: list[tuple[str, int]] = []

        def look(_: int) -> None:
            for folder in data_dir.glob(SCRATCH_PREFIX + "*"):
                modes.append((folder.name, stat.S_IMODE(folder.stat().st_mode)))
                modes.extend((f.name, stat.S_IMODE(f.stat().st_mode)) for f in folder.iterdir())

        previous = os.umask(0o022)
        try:
            call.service.engine.reindex(progress=look)
        finally:
            os.umask(previous)
        assert modes and all(mode == (0o700 if name.startswith(SCRATCH_PREFIX) else 0o600) for name, mode in modes)

    def test_a_dead_builds_folder_is_removed_by_the_next_build(self, call: Caller) -> None:
        """A scratch folder whose process is gone is deleted; the reindex then succeeds."""
        dead = call.service.engine.data_dir / f"{SCRATCH_PREFIX}999999999-leftover"
        dead.mkdir()
        (dead / "scratch.sqlite3").write_bytes(b"half a build")
        call.service.engine.reindex()
        assert not dead.exists()

    def test_reindexing_one_projection_leaves_earlier_ones_alone(self, call: Caller) -> None:
        """--projection relations swaps relations and the projectors after it, not entities."""
        populate(call)
        engine = call.service.engine
        engine.conn.execute("UPDATE artifacts SET updated_at = 'marker' WHERE id = (SELECT min(id) FROM artifacts)")
        report = engine.reindex(["relations"])
        assert report["projections"][0] == "relations" and "entities" not in report["projections"]
        assert engine.conn.execute("SELECT count(*) FROM artifacts WHERE updated_at = 'marker'").fetchone()[0] == 1

    def test_a_version_bump_on_open_is_rebuilt_beside(self, call: Caller) -> None:
        """Opening a store whose fts projector version changed rebuilds it blue/green: same rows,
        intact indexes, checkpoints at the head, no scratch folder left."""
        populate(call)
        engine = call.service.engine
        before = snapshot(engine.conn, all_tables(engine))
        engine.conn.execute("UPDATE projector_checkpoints SET version = 0 WHERE name = 'fts'")
        data_dir, head = engine.data_dir, engine.head()
        call.service.close()
        reopened = Engine(data_dir)
        assert snapshot(reopened.conn, all_tables(reopened)) == before
        check_text_indexes(reopened.conn)
        assert {(head,)} == set(reopened.conn.execute("SELECT position FROM projector_checkpoints").fetchall())
        assert not list(data_dir.glob(SCRATCH_PREFIX + "*"))
        reopened.close()

    def test_sigkill_during_reindex_loses_nothing(self, tmp_path: Path) -> None:
        """A reindex killed at any moment leaves a store that opens, verifies clean and answers search."""
        data = tmp_path / "data"
        service = Service(data)
        caller = Caller(service)
        for i in range(300):
            caller.put_text(f"entry {i} about the numbat colony and other things " * 8, key=f"n{i}")
        service.close()
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")}
        for delay in (0.05, 0.3, 0.8):
            proc = subprocess.Popen([sys.executable, "-m", "memoree", "--data-dir", str(data), "reindex"],
                                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            reopened = Service(data)
            assert audit.verify(reopened.engine)["ok"]
            assert len(search_ids(Caller(reopened), "numbat")) > 0
            reopened.close()
        service = Service(data)
        service.engine.reindex()
        assert not list(data.glob(SCRATCH_PREFIX + "*"))
        service.close()
