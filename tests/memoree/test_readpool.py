"""The daemon's reader processes: reads beside the writer, read-your-writes, crashes, shutdown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from memoree.client.transport import Endpoint, exchange
from memoree.daemon.server import Daemon
from memoree.service.service import Service
from tests.memoree.test_daemon import CTX, clean_env, put, wait_for


class Served:
    """A ``memoree serve`` process on a temporary socket."""

    def __init__(self, proc: subprocess.Popen[bytes], endpoint: Endpoint) -> None:
        self.proc, self.endpoint = proc, endpoint

    def call(self, op: str, payload: dict[str, Any], **fields: Any) -> dict[str, Any]:
        document = {"v": 1, "request_id": f"req_{op}", "op": op, "context": CTX, "input": payload, **fields}
        return json.loads(exchange(self.endpoint, json.dumps(document).encode()))

    def readers(self) -> list[int]:
        """The daemon's reader processes (its children running ``memoree.daemon.reader``)."""
        found = []
        for task in Path(f"/proc/{self.proc.pid}/task").glob("*"):
            for child in (task / "children").read_text().split():
                if b"memoree.daemon.reader" in _cmdline(int(child)):
                    found.append(int(child))
        return sorted(found)

    def readers_settled(self, count: int, timeout: float = 60) -> list[int]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = self.readers()
            if len(pids) == count:
                return pids
            time.sleep(0.05)
        raise AssertionError(f"expected {count} readers, found {self.readers()}")


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for its reaper has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def serve(tmp_path: Path, **env: str) -> subprocess.Popen[bytes]:
    sock = tmp_path / "run" / "d.sock"
    return subprocess.Popen([sys.executable, "-m", "memoree", "serve", "--listen", f"unix://{sock}",
                             "--data-dir", str(tmp_path / "data")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=clean_env(**env))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    proc = serve(tmp_path)
    endpoint = Endpoint("unix", str(tmp_path / "run" / "d.sock"))
    wait_for(endpoint, proc)
    yield Served(proc, endpoint)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


@contextmanager
def daemon_in_this_process(folder: Path) -> Iterator[Daemon]:
    """A daemon serving from a thread of this process (its writer and reader pool can be
    inspected), stopped on exit."""
    daemon = Daemon(Service(folder / "data"), Endpoint("unix", str(folder / "run" / "d.sock")))
    daemon.start()
    thread = threading.Thread(target=daemon.serve_forever, daemon=True)
    thread.start()
    try:
        yield daemon
    finally:
        daemon.stop()
        thread.join(30)


@pytest.fixture
def in_process(tmp_path: Path) -> Iterator[Daemon]:
    """A daemon running in this process (its reader pool can be inspected)."""
    with daemon_in_this_process(tmp_path) as daemon:
        yield daemon


def ready_readers(daemon: Daemon, timeout: float = 60) -> list[int]:
    """The pids of the daemon's three readers once each has said it is ready."""
    deadline = time.monotonic() + timeout
    while len(daemon.readers.pids()) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert 3 == len(daemon.readers.pids())
    return daemon.readers.pids()


def search(served: Served, query: str, **extra: Any) -> dict[str, Any]:
    return served.call("search", {"query": query, **extra})


class TestReaderProcesses:
    def test_reads_are_answered_by_three_reader_processes(self, served: Served) -> None:
        """A daemon runs three reader processes and says so in doctor, with how long a read may
        wait for writes (100 ms by default); searches are answered."""
        assert 3 == len(served.readers_settled(3))
        doctor = served.call("doctor", {})["result"]
        assert 3 == doctor["read_processes"] and 100 == doctor["reads_yield_ms"]
        assert search(served, "anything")["ok"]

    def test_every_acknowledged_write_is_visible_to_the_next_read(self, served: Served) -> None:
        """After each acknowledged put, a search with its commit_seq as min_commit_seq and a get
        of the new artifact succeed, whichever reader process answers them."""
        served.readers_settled(3)
        for i in range(30):
            written = served.call("artifact.put", put(i)["input"], idempotency_key=f"ryw{i}")
            assert written["ok"], written
            seq = written["commit_seq"]
            for _ in range(3):  # three reads in a row: every reader, not just one
                found = search(served, f"payload {i}", min_commit_seq=seq)
                assert found["ok"], found
                assert [f"n{i}"] == [h["title"] for h in found["result"]["hits"]][:1]
            got = served.call("artifact.get", {"artifact_id": written["result"]["artifact_id"]})
            assert got["ok"], got

    def test_a_commit_seq_beyond_the_log_is_index_not_ready(self, served: Served) -> None:
        """A reader asked for a commit_seq the store has not reached answers INDEX_NOT_READY."""
        written = served.call("artifact.put", put(0)["input"], idempotency_key="ahead")
        envelope = search(served, "payload", min_commit_seq=written["commit_seq"] + 5)
        assert "INDEX_NOT_READY" == envelope["error"]["code"] and envelope["error"]["retryable"]

    def test_a_reader_killed_mid_request_fails_that_request_and_is_replaced(self, in_process: Daemon) -> None:
        """Each reader holding a request when it is killed answers it with a retryable
        INTERNAL_ERROR; new readers start and the next reads succeed."""
        served = Served(None, in_process.endpoint)  # type: ignore[arg-type]
        old = ready_readers(in_process)
        for pid in old:
            os.kill(pid, signal.SIGSTOP)  # each holds the request it is sent, unanswered
        replies: list[dict[str, Any]] = []
        clients = [threading.Thread(target=lambda: replies.append(search(served, "held"))) for _ in old]
        for client in clients:
            client.start()
        time.sleep(1.0)
        for pid in old:
            os.kill(pid, signal.SIGKILL)
        for client in clients:
            client.join(60)
        assert 3 == len(replies)
        assert all(["INTERNAL_ERROR", True] == [r["error"]["code"], r["error"]["retryable"]] for r in replies), replies
        new = ready_readers(in_process)
        assert not set(new) & set(old) and 3 == in_process.readers.restarts
        assert all(search(served, "after")["ok"] for _ in range(6))

    def test_a_reader_that_died_idle_costs_no_request(self, in_process: Daemon) -> None:
        """A reader killed while idle is replaced before the next read reaches it: every read
        after it succeeds."""
        for pid in ready_readers(in_process):
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        served = Served(None, in_process.endpoint)  # type: ignore[arg-type]
        assert all(search(served, "after")["ok"] for _ in range(6))

    def test_no_reader_outlives_a_stopped_or_killed_daemon(self, tmp_path: Path) -> None:
        """SIGTERM ends the daemon and its readers; kill -9 of the daemon ends its readers too."""
        endpoint = Endpoint("unix", str(tmp_path / "run" / "d.sock"))
        for how in (signal.SIGTERM, signal.SIGKILL):
            proc = serve(tmp_path)
            wait_for(endpoint, proc)
            pids = Served(proc, endpoint).readers_settled(3)
            proc.send_signal(how)
            proc.wait(30)
            deadline = time.monotonic() + 15
            while any(_running(p) for p in pids) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert [] == [p for p in pids if _running(p)], how

    def test_reads_stay_on_the_writer_with_no_reader_processes(self, tmp_path: Path) -> None:
        """MEMOREE_READ_PROCESSES=0 starts no reader; reads are answered all the same."""
        proc = serve(tmp_path, MEMOREE_READ_PROCESSES="0")
        endpoint = Endpoint("unix", str(tmp_path / "run" / "d.sock"))
        try:
            wait_for(endpoint, proc)
            served = Served(proc, endpoint)
            assert 0 == served.call("doctor", {})["result"]["read_processes"]
            assert [] == served.readers() and search(served, "anything")["ok"]
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)

    def test_a_reader_count_beyond_the_envelope_is_refused(self, tmp_path: Path) -> None:
        """MEMOREE_READ_PROCESSES=4 (beyond 3 readers + 1 writer) is a CONFIG_ERROR at start."""
        proc = serve(tmp_path, MEMOREE_READ_PROCESSES="4")
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode != 0
        assert b"MEMOREE_READ_PROCESSES" in out and b"CONFIG" in out.upper(), out

    def test_readers_run_at_the_configured_lower_priority(self, tmp_path: Path) -> None:
        """MEMOREE_READER_NICE=10 runs every reader at nice 10 (the daemon at its own), `idle` runs
        them under SCHED_IDLE; 20 is refused."""
        proc = serve(tmp_path, MEMOREE_READER_NICE="10")
        endpoint = Endpoint("unix", str(tmp_path / "run" / "d.sock"))
        try:
            wait_for(endpoint, proc)
            pids = Served(proc, endpoint).readers_settled(3)
            deadline = time.monotonic() + 30  # each lowers its priority once it has read its settings
            while [_nice(pid) - _nice(proc.pid) for pid in pids] != [10, 10, 10] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert [10, 10, 10] == [_nice(pid) - _nice(proc.pid) for pid in pids]
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        proc = serve(tmp_path, MEMOREE_READER_NICE="idle")
        try:
            wait_for(endpoint, proc)
            pids = Served(proc, endpoint).readers_settled(3)
            deadline = time.monotonic() + 30
            while any(os.sched_getscheduler(p) != os.SCHED_IDLE for p in pids) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert all(os.sched_getscheduler(p) == os.SCHED_IDLE for p in pids)
            assert os.sched_getscheduler(proc.pid) != os.SCHED_IDLE
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        refused = serve(tmp_path, MEMOREE_READER_NICE="20")
        out, _ = refused.communicate(timeout=60)
        assert refused.returncode != 0 and b"MEMOREE_READER_NICE" in out, out


def _nice(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


class TestReaderAlone:
    def test_a_reader_answers_only_reads_on_a_read_only_connection(self, tmp_path: Path) -> None:
        """A put handed to a reader is refused and stores nothing; its connection cannot write."""
        from memoree.daemon.reader import Reader

        service = Service(tmp_path / "data")
        service.handle_bytes(json.dumps(put(1)).encode())
        head = service.engine.head()
        service.close()
        reader = Reader(tmp_path / "data", {})
        refused = json.loads(reader.answer(json.dumps(put(2)).encode()))
        assert "INTERNAL_ERROR" == refused["error"]["code"]
        found = json.loads(reader.answer(json.dumps(
            {"v": 1, "request_id": "r", "op": "search", "context": CTX, "input": {"query": "payload"}}).encode()))
        assert ["n1"] == [h["title"] for h in found["result"]["hits"]]
        assert reader.view is not None
        with pytest.raises(Exception, match="readonly"):
            reader.view.conn.execute("DELETE FROM events")
        reader.view.close()
        check = Service(tmp_path / "data")
        assert head == check.engine.head()
        check.close()
def _read_in_thread(writes: Any, arrived: float) -> threading.Thread:
    thread = threading.Thread(target=writes.begin_read, args=(arrived,), daemon=True)
    thread.start()
    return thread


class TestWritesFirst:
    def test_a_read_beyond_the_slots_beside_a_write_waits_until_the_write_is_answered(self) -> None:
        """With a write in flight and the one read slot beside it taken, the next read waits and
        goes as soon as the write is answered."""
        from concurrent.futures import Future

        from memoree.daemon.readpool import WritesFirst

        writes, write = WritesFirst(hold_s=30, beside=1), Future()
        writes.track(write)
        writes.begin_read(time.monotonic())  # the slot beside the write
        waiting = _read_in_thread(writes, time.monotonic())
        waiting.join(0.3)
        assert waiting.is_alive() and 1 == writes.held
        write.set_result(b"answered")
        waiting.join(5)
        assert not waiting.is_alive() and 2 == writes.running

    def test_a_held_read_goes_once_the_hold_has_passed_whatever_the_writes_do(self) -> None:
        """A read held by a write that is never answered goes after hold_s: reads never starve."""
        from concurrent.futures import Future

        from memoree.daemon.readpool import WritesFirst

        writes = WritesFirst(hold_s=0.2, beside=1)
        writes.track(Future())
        writes.begin_read(time.monotonic())
        started = time.monotonic()
        writes.begin_read(started)
        assert 0.15 <= time.monotonic() - started < 5 and 2 == writes.running

    def test_with_no_write_in_flight_every_read_runs_at_once(self) -> None:
        """Without a write in flight, as many reads run at once as are sent (the slot count binds
        only beside writes), and a running read's end frees its slot for a held one."""
        from concurrent.futures import Future

        from memoree.daemon.readpool import WritesFirst

        writes = WritesFirst(hold_s=30, beside=1)
        for _ in range(3):
            writes.begin_read(time.monotonic())
        assert 3 == writes.running and 0 == writes.held
        for _ in range(3):
            writes.end_read()
        writes.track(Future())
        writes.begin_read(time.monotonic())
        waiting = _read_in_thread(writes, time.monotonic())
        waiting.join(0.2)
        assert waiting.is_alive()
        writes.end_read()
        waiting.join(5)
        assert not waiting.is_alive()

    def test_the_writes_count_as_going_on_briefly_after_the_last_is_answered(self) -> None:
        """Right after a burst's last write is answered, a read past the slot still waits until
        WRITE_LINGER_S has passed (the burst's next write may come), and not longer."""
        from concurrent.futures import Future

        from memoree.daemon.readpool import WRITE_LINGER_S, WritesFirst

        writes, write = WritesFirst(hold_s=30, beside=1), Future()
        writes.track(write)
        writes.begin_read(time.monotonic())
        write.set_result(b"answered")
        started = time.monotonic()
        writes.begin_read(started)
        assert WRITE_LINGER_S * 0.8 <= time.monotonic() - started < 5 and 1 == writes.held

    def test_a_zero_hold_holds_no_read(self) -> None:
        """MEMOREE_READS_YIELD_MS=0 (a zero hold) sends every read at once, writes or not."""
        from concurrent.futures import Future

        from memoree.daemon.readpool import WritesFirst

        writes = WritesFirst(hold_s=0, beside=1)
        writes.track(Future())
        for _ in range(3):
            writes.begin_read(time.monotonic())
        assert 3 == writes.running and 0 == writes.held

    def test_the_daemon_answers_a_held_read_once_the_write_is(self, in_process: Daemon) -> None:
        """Through a daemon, with a write in flight and the one slot beside it busy, a second
        search is answered only after the write is, and every search is answered exactly once."""
        from concurrent.futures import Future

        ready_readers(in_process)
        served = Served(None, in_process.endpoint)  # type: ignore[arg-type]
        writes = in_process.readers.writes
        writes.beside, writes.hold_s = 1, 30.0
        write: Future[bytes] = Future()
        writes.track(write)
        writes.begin_read(time.monotonic())  # a read already running beside the write
        replies: list[dict[str, Any]] = []
        client = threading.Thread(target=lambda: replies.append(search(served, "held")), daemon=True)
        client.start()
        client.join(0.5)
        assert client.is_alive() and [] == replies
        write.set_result(b"answered")
        client.join(30)
        assert 1 == len(replies) and replies[0]["ok"], replies
        writes.end_read()
        assert all(search(served, "after")["ok"] for _ in range(3)) and 0 == writes.running

    def test_a_write_routed_to_the_writer_is_tracked_until_it_is_answered(self, in_process: Daemon) -> None:
        """Each request the daemon routes to its writer counts as a write in flight until its
        answer is ready, then no longer."""
        served = Served(None, in_process.endpoint)  # type: ignore[arg-type]
        ready_readers(in_process)
        assert served.call("artifact.put", put(1)["input"], idempotency_key="tracked")["ok"]
        assert 0 == in_process.readers.writes.in_flight

    def test_a_hold_beyond_a_second_is_refused(self, tmp_path: Path) -> None:
        """MEMOREE_READS_YIELD_MS=2000 (beyond 1000) is a CONFIG_ERROR at start."""
        proc = serve(tmp_path, MEMOREE_READS_YIELD_MS="2000")
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode != 0 and b"MEMOREE_READS_YIELD_MS" in out, out
