"""The daemon's writer on a real store: group commit, one request's failure, answers after the sync."""

from __future__ import annotations

import json
import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from memoree.daemon.durability import WalSync, durability_for
from memoree.daemon.server import Writer
from memoree.eventlog.db import sqlite3
from memoree.service.service import Service

CTX = {"workspace_id": "wsp_g", "project_id": "prj_g"}


def frame(op: str, body: dict[str, Any], key: str | None = None, request_id: str = "r") -> bytes:
    document: dict[str, Any] = {"v": 1, "request_id": request_id, "op": op, "context": CTX, "input": body}
    if key is not None:
        document["idempotency_key"] = key
    return json.dumps(document).encode()


def put(i: int, key: str | None = None) -> bytes:
    return frame("artifact.put", {"kind": "note", "title": f"t{i}", "content": {"type": "text", "data": f"text {i}"}},
                 key or f"k{i}", f"r{i}")


def run_as_one_group(service: Service, frames: list[bytes]) -> tuple[Writer, list[dict[str, Any]]]:
    """Queue every frame before the writer starts, so its first group holds them all."""
    writer = Writer(service, durability_for(service.engine, "FULL"))
    futures: list[Future[bytes]] = [writer.submit(raw) for raw in frames]
    writer.durability.start()
    writer.start()
    answers = [json.loads(future.result(timeout=60)) for future in futures]
    writer.stop()
    writer.join(10)
    writer.durability.stop()
    return writer, answers


class TestGroupCommit:
    def test_a_failing_request_in_a_group_fails_alone_and_the_others_are_durable(self, tmp_path: Path) -> None:
        """One group of five: a stale revise gets its own REVISION_CONFLICT, the puts and a replay succeed and survive a reopen."""
        service = Service(tmp_path / "data")
        first = json.loads(service.handle_bytes(put(0)).body)["result"]
        stale = frame("artifact.revise", {"artifact_id": first["artifact_id"], "if_revision": "rev_not_the_head",
                                          "content": {"type": "text", "data": "v2"}}, "revise", "r-stale")
        frames = [put(1), put(2), stale, put(3), put(1)]  # the last one replays the first of the group
        writer, answers = run_as_one_group(service, frames)
        assert (writer.groups, writer.grouped_requests) == (1, 5)
        assert [a["ok"] for a in answers] == [True, True, False, True, True]
        assert answers[2]["request_id"] == "r-stale" and answers[2]["error"]["code"] == "REVISION_CONFLICT"
        assert answers[4]["result"]["artifact_id"] == answers[0]["result"]["artifact_id"]
        seqs = [answers[i]["commit_seq"] for i in (0, 1, 3)]
        assert seqs == sorted(seqs) and len(set(seqs)) == 3, "commit order is arrival order"
        service.close()
        reopened = Service(tmp_path / "data")
        for index, title in ((0, "t1"), (1, "t2"), (3, "t3")):
            got = json.loads(reopened.handle_bytes(frame("artifact.get", {"artifact_id": answers[index]["result"]["artifact_id"]})).body)
            assert got["ok"] and got["result"]["title"] == title
        reopened.close()

    def test_a_groups_puts_go_in_together_and_a_failure_to_write_them_fails_the_group_and_stores_none(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """The puts of a group are written in one statement per table (the bulk lane); a full disk while they go in gives every request DISK_FULL and stores none."""
        service = Service(tmp_path / "data")
        service.handle_bytes(put(0))
        head = service.engine.head()
        handler = service.engine.handler
        writes: list[int] = []
        real_put_many = handler.cas.put_inline_many

        def full_disk(blobs: list[tuple[bytes, str]]) -> None:
            writes.append(len(blobs))
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(handler.cas, "put_inline_many", full_disk)
        _, answers = run_as_one_group(service, [put(i) for i in range(1, 5)])
        assert writes == [4], "the group's four puts go in with one statement"
        assert [a["error"]["code"] for a in answers] == ["DISK_FULL"] * 4
        assert all(a["error"]["retryable"] for a in answers)
        assert service.engine.head() == head
        monkeypatch.setattr(handler.cas, "put_inline_many", real_put_many)
        _, again = run_as_one_group(service, [put(i) for i in range(1, 5)])
        assert all(a["ok"] and a["result"]["created"] for a in again), "the retried group stores all four"
        service.close()

    def test_answers_are_released_only_after_the_wal_is_synced(self, tmp_path: Path) -> None:
        """Every answer of a group comes after at least one WAL sync that covers its commit."""
        service = Service(tmp_path / "data")
        writer, answers = run_as_one_group(service, [put(i) for i in range(4)])
        assert all(a["ok"] for a in answers)
        durability = writer.durability
        assert isinstance(durability, WalSync)
        assert durability.syncs >= 1 and durability.durable == durability.committed >= 1
        service.close()

    def test_a_lone_request_is_synced_by_the_writer_itself_before_its_answer(self, tmp_path: Path) -> None:
        """A lone client's puts (one at a time, nothing queued behind them) are synced on the writer
        thread from the second on (no hand-off to the syncer), each answered only once the sync
        covers its commit; a later read sees them."""
        service = Service(tmp_path / "data")
        writer = Writer(service, durability_for(service.engine, "FULL"))
        writer.durability.start()
        writer.start()
        durability = writer.durability
        assert isinstance(durability, WalSync)
        for i in range(4):
            answer = json.loads(writer.submit(put(i)).result(timeout=60))
            assert answer["ok"] and durability.durable == durability.committed
        assert durability.inline_syncs >= 3
        writer.stop()
        writer.join(10)
        durability.stop()
        got = json.loads(service.handle_bytes(frame("artifact.get", {"artifact_id": answer["result"]["artifact_id"]})).body)
        assert got["ok"] and got["result"]["title"] == "t3"
        service.close()

    def test_with_more_requests_waiting_the_syncer_syncs_and_releases(self, tmp_path: Path) -> None:
        """A commit the writer hands on (more requests wait) is synced by the syncer thread, which
        releases its answer only after that sync."""
        service = Service(tmp_path / "data")
        service.handle_bytes(put(0))
        durability = durability_for(service.engine, "FULL")
        assert isinstance(durability, WalSync)
        durability.start()
        with durability.writing():
            pass
        answer: Future[bytes] = Future()
        durability.after_commit([(b"{}", answer, b"done")], more_waiting=True)
        assert answer.result(timeout=10) == b"done"
        assert durability.syncs == 1 and durability.inline_syncs == 0 and durability.durable == durability.committed
        durability.stop()
        service.close()

    def test_settle_waits_for_a_commit_that_is_not_synced_yet(self, tmp_path: Path) -> None:
        """An answer computed beside an unsynced commit (a reader's) is held until the syncer syncs it."""
        service = Service(tmp_path / "data")
        service.handle_bytes(put(0))
        durability = durability_for(service.engine, "FULL")
        assert isinstance(durability, WalSync)
        durability.start()
        with durability.writing():  # a commit the syncer has not been told about yet
            pass
        settled = threading.Event()
        waiter = threading.Thread(target=lambda: (durability.settle(), settled.set()))
        waiter.start()
        assert not settled.wait(0.3), "settle returned before the commit was synced"
        durability.after_commit([])
        assert settled.wait(10), "settle did not return after the sync"
        waiter.join(5)
        durability.stop()
        service.close()

    @pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kernel thread names are read from /proc")
    def test_the_writer_and_the_sync_threads_carry_kernel_visible_names(self, tmp_path: Path) -> None:
        """Once started, the writer, the syncer and the checkpointer show their names in
        /proc (what `top -H` and the daemon bench read)."""
        service = Service(tmp_path / "data")
        writer = Writer(service, durability_for(service.engine, "FULL"))
        writer.durability.start()
        writer.start()
        assert json.loads(writer.submit(put(0)).result(timeout=60))["ok"]
        threads = [writer, *writer.durability.threads]  # type: ignore[union-attr]
        names = {Path(f"/proc/self/task/{thread.native_id}/comm").read_text().strip() for thread in threads}
        writer.stop()
        writer.join(10)
        writer.durability.stop()
        service.close()
        assert names == {"memoree-writer", "memoree-syncer", "memoree-checkpt"}

    def test_other_synchronous_settings_answer_at_once(self, tmp_path: Path) -> None:
        """With synchronous=NORMAL (no sync asked for) the writer answers as soon as it committed."""
        service = Service(tmp_path / "data", synchronous="NORMAL")
        durability = durability_for(service.engine, "NORMAL")
        assert not isinstance(durability, WalSync)
        service.close()


def submit_while_the_first_is_written(service: Service, writer: Writer, late: list[bytes],
                                      stop: bool = False) -> list[Future[bytes]]:
    """While the writer handles its first request, queue ``late`` (and the stop signal)."""
    futures: list[Future[bytes]] = []
    handle = service.handle_bytes

    def handle_and_queue_more(raw: bytes, **kwargs: Any) -> Any:
        if not futures:
            futures.extend(writer.submit(frame) for frame in late)
            if stop:
                writer.stop()
        return handle(raw, **kwargs)

    service.handle_bytes = handle_and_queue_more  # type: ignore[method-assign]
    return futures


class TestTheOpenGroup:
    def test_mutations_queued_while_a_group_is_written_join_its_commit(self, tmp_path: Path) -> None:
        """Puts that arrive while the writer writes a group's first put go in with it: one group,
        one commit, arrival order kept, every answer durable."""
        service = Service(tmp_path / "data")
        writer = Writer(service, durability_for(service.engine, "FULL"))
        late = submit_while_the_first_is_written(service, writer, [put(1), put(2)])
        writer.durability.start()
        writer.start()
        first = writer.submit(put(0))
        first.result(timeout=60)  # the late frames are queued while it is handled
        answers = [json.loads(f.result(timeout=60)) for f in [first, *late]]
        writer.stop()
        writer.join(10)
        writer.durability.stop()
        assert all(a["ok"] for a in answers)
        assert (writer.groups, writer.grouped_requests) == (1, 3)
        seqs = [a["commit_seq"] for a in answers]
        assert seqs == sorted(seqs) and len(set(seqs)) == 3
        service.close()

    def test_a_read_and_the_stop_signal_that_arrive_meanwhile_are_served_after_the_commit(
            self, tmp_path: Path) -> None:
        """A read queued while the group is open is answered after the group's commit (it sees
        the group's put), and a stop queued then ends the writer once the group is answered."""
        service = Service(tmp_path / "data")
        made = json.loads(service.handle_bytes(put(0)).body)["result"]
        writer = Writer(service, durability_for(service.engine, "FULL"))
        read = frame("artifact.get", {"artifact_id": made["artifact_id"]}, request_id="read")
        late = submit_while_the_first_is_written(service, writer, [read, put(2)], stop=True)
        writer.durability.start()
        writer.start()
        first = writer.submit(put(1))
        first.result(timeout=60)  # the late frames are queued while it is handled
        answers = [json.loads(f.result(timeout=60)) for f in [first, *late]]
        writer.join(10)
        writer.durability.stop()
        assert not writer.is_alive(), "the stop that came while the group was open ended the writer"
        assert [a["ok"] for a in answers] == [True, True, True]
        assert answers[1]["request_id"] == "read" and answers[1]["result"]["title"] == "t0"
        assert (writer.groups, writer.grouped_requests) == (1, 2)
        assert answers[0]["commit_seq"] < answers[2]["commit_seq"]
        service.close()
