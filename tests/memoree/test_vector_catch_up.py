"""The daemon and the vectors' catch-up: its reader processes answer through the dense channel
while the vectors lag, and its writer catches them up when idle and when the lag passes its bound."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoree.client.transport import Endpoint, exchange
from memoree.daemon import catchup
from memoree.daemon.server import Daemon
from tests.memoree.test_readpool import Served, daemon_in_this_process, ready_readers, served  # noqa: F401 - a fixture
from tests.queries.test_dense import QUESTION

CTX = {"workspace_id": "wsp_test", "project_id": "prj_test"}


def call(daemon: Daemon, op: str, payload: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    document = {"v": 1, "request_id": f"req_{op}", "op": op, "context": CTX, "input": payload}
    if key is not None:
        document["idempotency_key"] = key
    reply = json.loads(exchange(Endpoint("unix", str(daemon.endpoint.address)), json.dumps(document).encode()))
    assert reply["ok"], reply
    return reply


def lag(daemon: Daemon) -> int:
    """The vectors' lag as ``doctor`` reports it (a reader process's snapshot)."""
    return call(daemon, "doctor", {})["result"]["semantic"]["lag_events"]


def seed(daemon: Daemon) -> tuple[str, int]:
    """What ``tests.queries.test_dense.seed`` writes, through the daemon: (the claim, the last commit)."""
    source = call(daemon, "artifact.put", {"kind": "note", "title": "security notes", "content": {
        "type": "text", "data": "Security notes: user credentials are hashed with argon2 before writing."}}, "s")
    made = call(daemon, "claim.assert", {"claim_type": "decision", "statement": "User credentials are hashed with argon2",
                                         "evidence": [{"artifact_id": source["result"]["artifact_id"],
                                                       "revision_id": source["result"]["revision_id"]}]}, "c1")
    last = made
    for i, statement in enumerate(["The billing service stores invoices in PostgreSQL",
                                   "Search results are ranked with BM25"]):
        last = call(daemon, "claim.assert", {"claim_type": "decision", "statement": statement, "evidence": []}, f"o{i}")
    return made["result"]["claim_id"], last["commit_seq"]


@pytest.fixture
def held_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Daemon]:
    """A daemon in this process (with its three reader processes) whose writer never catches
    the vectors up on its own during the test."""
    monkeypatch.setattr(catchup, "CATCH_UP_IDLE_S", 600.0)
    monkeypatch.setattr(catchup, "CATCH_UP_LAG_S", 600.0)
    monkeypatch.setattr(catchup, "CATCH_UP_LAG_EVENTS", 10_000)
    with daemon_in_this_process(tmp_path) as daemon:
        yield daemon


class TestReadersWhileTheVectorsLag:
    def test_a_reader_process_answers_a_lagging_write_by_meaning(self, held_back: Daemon) -> None:
        """Puts, then at once (min_commit_seq) a question only the dense channel answers: every
        reader process finds the claim while the stored vectors still lag the log."""
        ready_readers(held_back)
        claim_id, seq = seed(held_back)
        for _ in range(3):  # three reads in a row: every reader, not just one
            recalled = call(held_back, "memory.recall", {"query": QUESTION, "min_commit_seq": seq})["result"]
            assert [claim_id] == [c["claim_id"] for c in recalled["claims"]]
        assert lag(held_back) >= 4


class TestMemoreeServe:
    def test_an_acknowledged_claim_is_recalled_by_meaning_at_once(self, served: Served) -> None:
        """Through `memoree serve` with its defaults: right after an acknowledged claim, a recall
        by meaning alone with its commit_seq finds it, from each reader process in turn."""
        served.readers_settled(3)
        for i, statement in enumerate(["The billing service stores invoices in PostgreSQL",
                                       "Search results are ranked with BM25",
                                       "User credentials are hashed with argon2"]):
            made = served.call("claim.assert", {"claim_type": "decision", "statement": statement, "evidence": []},
                               idempotency_key=f"m{i}")
            assert made["ok"], made
        for _ in range(3):
            recalled = served.call("memory.recall", {"query": QUESTION, "min_commit_seq": made["commit_seq"]})
            assert recalled["ok"], recalled
            assert [made["result"]["claim_id"]] == [c["claim_id"] for c in recalled["result"]["claims"]]


class TestTheWritersCatchUp:
    def test_the_idle_writer_catches_the_vectors_up(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """With no request arriving, the writer embeds what lags, slice after slice, to lag 0."""
        monkeypatch.setattr(catchup, "CATCH_UP_SLICE_EVENTS", 2)
        with daemon_in_this_process(tmp_path) as daemon:
            seed(daemon)
            deadline = time.monotonic() + 30
            while lag(daemon) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert 0 == lag(daemon) and daemon.writer.vectors.catch_ups >= 2

    def test_a_steady_stream_never_outgrows_the_lag_bound(self, held_back: Daemon,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
        """With the writer never idle long enough, a lag past its bound is caught up between
        requests: after each acknowledged put the lag returns below the bound."""
        monkeypatch.setattr(catchup, "CATCH_UP_LAG_EVENTS", 3)
        monkeypatch.setattr(catchup, "CATCH_UP_SLICE_EVENTS", 2)
        for i in range(12):
            call(held_back, "artifact.put", {"kind": "note", "title": f"n{i}",
                                             "content": {"type": "text", "data": f"steady note {i}"}}, f"p{i}")
            deadline = time.monotonic() + 5
            while lag(held_back) >= 3 and time.monotonic() < deadline:
                time.sleep(0.01)  # the writer's check runs just after it answered
            assert lag(held_back) < 3
        assert held_back.writer.vectors.catch_ups >= 4

    def test_while_dense_reads_flow_the_lag_is_caught_up_at_the_reading_bound(self, held_back: Daemon,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
        """With a search after each put, the writer catches up at the reading bound (every reader
        would embed the lag for itself), though the stream's bound is never reached."""
        monkeypatch.setattr(catchup, "CATCH_UP_LAG_EVENTS_READING", 3)
        monkeypatch.setattr(catchup, "CATCH_UP_SLICE_EVENTS", 2)
        for i in range(12):
            call(held_back, "artifact.put", {"kind": "note", "title": f"n{i}",
                                             "content": {"type": "text", "data": f"read note {i}"}}, f"p{i}")
            call(held_back, "search", {"query": "read note"})
            deadline = time.monotonic() + 5
            while lag(held_back) >= 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert lag(held_back) < 3
        assert held_back.writer.vectors.catch_ups >= 4

    def test_without_dense_reads_the_stream_bound_holds(self, held_back: Daemon,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
        """Reads that never use the dense channel (doctor) leave the writer on the stream's bound:
        the lag grows past the reading bound and nothing is caught up."""
        monkeypatch.setattr(catchup, "CATCH_UP_LAG_EVENTS_READING", 3)
        for i in range(8):
            call(held_back, "artifact.put", {"kind": "note", "title": f"n{i}",
                                             "content": {"type": "text", "data": f"quiet note {i}"}}, f"q{i}")
        assert lag(held_back) >= 8 and 0 == held_back.writer.vectors.catch_ups


def wait_level(daemon: Daemon, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while lag(daemon) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert 0 == lag(daemon)


class TestTheEmbeddingWorker:
    def test_the_writer_hands_its_slices_to_a_worker_process(self, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
        """The idle writer's slices are embedded by a child process, and the stored rows answer
        by meaning like rows the writer embeds itself."""
        monkeypatch.setattr(catchup, "CATCH_UP_SLICE_EVENTS", 2)
        with daemon_in_this_process(tmp_path) as daemon:
            made, _ = seed(daemon)
            wait_level(daemon)
            vectors = daemon.writer.vectors
            assert vectors.handed_out >= 2 and not vectors.embed_here
            assert vectors.worker is not None and vectors.worker.process.poll() is None
            recalled = call(daemon, "memory.recall", {"query": QUESTION})
            assert [made] == [c["claim_id"] for c in recalled["result"]["claims"]]

    def test_a_worker_that_dies_leaves_the_writer_embedding_itself(self, tmp_path: Path) -> None:
        """When the child process is killed, the writer embeds the slice it owed and every later
        one on its own thread: the vectors still catch up."""
        with daemon_in_this_process(tmp_path) as daemon:
            seed(daemon)
            wait_level(daemon)
            worker = daemon.writer.vectors.worker
            assert worker is not None
            worker.process.kill()
            worker.process.wait()
            for i in range(3):
                call(daemon, "artifact.put", {"kind": "note", "title": f"after {i}",
                                              "content": {"type": "text", "data": f"written after the kill {i}"}},
                     f"after{i}")
            wait_level(daemon)
            assert daemon.writer.vectors.embed_here and daemon.writer.vectors.worker is None

    def test_a_worker_that_stops_answering_is_given_up(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A slice the (stopped) child never answers is embedded by the writer after
        ``WORKER_OVERDUE_S``, the vectors catch up, and the child is killed at once, not waited
        for."""
        import signal

        from memoree.daemon import server
        from memoree.projections import embed_worker

        monkeypatch.setattr(server, "BATCH_SECONDS", 0.05)
        monkeypatch.setattr(embed_worker, "STOP_SECONDS", 60.0)  # a patient close would hold the writer
        with daemon_in_this_process(tmp_path) as daemon:
            seed(daemon)
            wait_level(daemon)
            worker = daemon.writer.vectors.worker
            assert worker is not None
            monkeypatch.setattr(catchup, "WORKER_OVERDUE_S", 0.2)  # once it is up: its start takes longer
            worker.process.send_signal(signal.SIGSTOP)
            try:
                call(daemon, "artifact.put", {"kind": "note", "title": "stuck",
                                              "content": {"type": "text", "data": "a note nobody embeds"}}, "stuck")
                wait_level(daemon)
                gone_by = time.monotonic() + 5
                while worker.process.poll() is None and time.monotonic() < gone_by:
                    time.sleep(0.02)
                assert worker.process.returncode == -signal.SIGKILL
            finally:
                if worker.process.poll() is None:
                    worker.process.kill()
            assert daemon.writer.vectors.embed_here

    def test_an_idle_worker_stops_and_the_next_slice_starts_another(self, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
        """After ``WORKER_IDLE_S`` without a slice the worker process exits; a later write's slice
        starts a new one."""
        from memoree.daemon import server

        monkeypatch.setattr(catchup, "WORKER_IDLE_S", 0.0)
        monkeypatch.setattr(server, "BATCH_SECONDS", 0.05)
        with daemon_in_this_process(tmp_path) as daemon:
            seed(daemon)
            wait_level(daemon)
            deadline = time.monotonic() + 10
            while daemon.writer.vectors.worker is not None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert daemon.writer.vectors.worker is None
            handed_out = daemon.writer.vectors.handed_out
            call(daemon, "artifact.put", {"kind": "note", "title": "later",
                                          "content": {"type": "text", "data": "a later note"}}, "later")
            wait_level(daemon)
            assert daemon.writer.vectors.handed_out > handed_out and not daemon.writer.vectors.embed_here


def test_the_dense_reads_are_the_ops_with_a_semantic_switch() -> None:
    """The reads that mark dense reading flowing are search, recall, context.build, probe and retrieve."""
    assert {"search", "memory.recall", "context.build", "memory.probe", "memory.retrieve"} == catchup.DENSE_READS
