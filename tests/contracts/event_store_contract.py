"""The event-store contract every backend passes (not collected on its own: no ``Test`` prefix).

A backend's test module subclasses ``EventStoreContract`` and supplies ``make_store(tmp_path)``
(a fresh, empty store) and ``open_again(store)`` (another handle on the same log, as a second
process would open it), and ``writer_process_target`` for the multi-process test.
"""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest

from memoree.eventlog.codec import GENESIS_HASH, chain_hash
from memoree.eventlog.events import ArtifactForgotten, Scope
from memoree.eventlog.store import EventStore, NewEvent, StreamVersionConflict, first_chain_break
from memoree.errors import IdempotencyConflict

SCOPE = Scope("wsp", "prj")


def new_event(stream: str, version: int, n: int, key: str | None = None) -> NewEvent:
    return NewEvent(
        type="artifact.forgotten", stream_id=stream, stream_version=version,
        payload=ArtifactForgotten(artifact_id=stream, revision_id=f"rev{n}", reason=f"r{n}"),
        event_id=f"evt_{stream}_{version}_{n}", at="2026-01-01T00:00:00.000000Z", scope=SCOPE,
        idempotency_key=key, request_digest="d" if key else None,
    )


def append_one(store: Any, event: NewEvent) -> Any:
    with store.transaction():
        return store.append([event])[0]


class EventStoreContract:
    def make_store(self, tmp_path: Path) -> Any:
        raise NotImplementedError

    def open_again(self, store: Any) -> Any:
        raise NotImplementedError

    def spawn_writer_args(self, store: Any) -> tuple[Any, ...]:
        raise NotImplementedError

    writer_process_target: Any = None

    def test_the_store_implements_the_event_store_interface(self, tmp_path: Path) -> None:
        """The backend offers every method of ``EventStore`` the command handler and engine call."""
        assert isinstance(self.make_store(tmp_path), EventStore)

    def test_empty_store_has_head_zero(self, tmp_path: Path) -> None:
        """A new store's head is position 0 with the genesis hash."""
        store = self.make_store(tmp_path)
        head = store.head()
        assert (0, GENESIS_HASH) == (head.commit_seq, head.hash)

    def test_appends_get_dense_positions_and_chained_hashes(self, tmp_path: Path) -> None:
        """Each append takes the next position and hashes the previous hash with its bytes."""
        store = self.make_store(tmp_path)
        recorded = [append_one(store, new_event(f"s{i}", 1, i)) for i in range(5)]
        assert [1, 2, 3, 4, 5] == [e.commit_seq for e in recorded]
        prev = GENESIS_HASH
        for event in recorded:
            assert event.prev_hash == prev
            assert chain_hash(prev, event.data) == event.hash
            prev = event.hash
        assert 5 == store.head().commit_seq

    def test_read_returns_what_was_appended_in_order(self, tmp_path: Path) -> None:
        """Reading from a position yields the stored events after it, byte-identical and typed."""
        store = self.make_store(tmp_path)
        appended = [append_one(store, new_event(f"s{i}", 1, i)) for i in range(4)]
        read = list(store.read(after=1))
        assert [e.commit_seq for e in appended[1:]] == [e.commit_seq for e in read]
        assert [e.data for e in appended[1:]] == [e.data for e in read]
        assert appended[2].payload == read[1].payload
        assert [2] == [e.commit_seq for e in store.read(after=1, limit=1)]

    def test_several_events_in_one_transaction(self, tmp_path: Path) -> None:
        """One transaction may append several events; they take consecutive positions."""
        store = self.make_store(tmp_path)
        with store.transaction():
            recorded = store.append([new_event("a", 1, 0), new_event("a", 2, 1)])
        assert [1, 2] == [e.commit_seq for e in recorded]

    def test_stream_version_conflict(self, tmp_path: Path) -> None:
        """A second event claiming an existing stream version is refused and nothing is written."""
        store = self.make_store(tmp_path)
        append_one(store, new_event("a", 1, 0))
        with pytest.raises(StreamVersionConflict):
            append_one(store, new_event("a", 1, 1))
        assert 1 == store.head().commit_seq

    def test_duplicate_idempotency_key_is_refused(self, tmp_path: Path) -> None:
        """The log holds each namespaced idempotency key once; a retry finds the original."""
        store = self.make_store(tmp_path)
        first = append_one(store, new_event("a", 1, 0, key="ns:k"))
        with pytest.raises(IdempotencyConflict):
            append_one(store, new_event("b", 1, 1, key="ns:k"))
        hit = store.find_idempotency_key("ns:k")
        assert (first.commit_seq, "d") == (hit.commit_seq, hit.request_digest)

    def test_failed_transaction_leaves_no_trace(self, tmp_path: Path) -> None:
        """An exception inside a transaction rolls its appends back."""
        store = self.make_store(tmp_path)
        with pytest.raises(RuntimeError), store.transaction():
            store.append([new_event("a", 1, 0)])
            raise RuntimeError("boom")
        assert 0 == store.head().commit_seq
        assert 1 == append_one(store, new_event("a", 1, 0)).commit_seq

    def test_chain_verifies_and_detects_gaps(self, tmp_path: Path) -> None:
        """The stored rows verify as a chain; dropping one is reported at its position."""
        store = self.make_store(tmp_path)
        for i in range(3):
            append_one(store, new_event(f"s{i}", 1, i))
        assert first_chain_break(store.read_raw()) is None
        rows = list(store.read_raw())
        brk = first_chain_break(iter([rows[0], rows[2]]))
        assert 2 == brk.commit_seq

    def test_tailing_reader_sees_nothing_uncommitted_and_misses_nothing(self, tmp_path: Path) -> None:
        """A reader following the log while a writer holds a transaction open skips no event."""
        store = self.make_store(tmp_path)
        reader = self.open_again(store)
        append_one(store, new_event("a", 1, 0))
        entered, release = threading.Event(), threading.Event()

        def slow_writer() -> None:
            with store.transaction():
                store.append([new_event("b", 1, 1)])
                entered.set()
                release.wait(5)

        thread = threading.Thread(target=slow_writer)
        thread.start()
        entered.wait(5)
        seen = [e.commit_seq for e in reader.read(after=0)]
        release.set()
        thread.join()
        seen += [e.commit_seq for e in reader.read(after=seen[-1])]
        assert [1, 2] == seen

    def test_concurrent_writer_processes_do_not_interleave_or_gap(self, tmp_path: Path) -> None:
        """Several processes appending at once produce one dense log with every event once."""
        store = self.make_store(tmp_path)
        ctx = multiprocessing.get_context("spawn")
        workers = [ctx.Process(target=self.writer_process_target,
                               args=(*self.spawn_writer_args(store), w, 25)) for w in range(3)]
        for proc in workers:
            proc.start()
        for proc in workers:
            proc.join(60)
            assert 0 == proc.exitcode
        events = list(self.open_again(store).read())
        assert list(range(1, 76)) == [e.commit_seq for e in events]
        for w in range(3):
            versions = [e.stream_version for e in events if e.stream_id == f"w{w}"]
            assert list(range(1, 26)) == versions
        assert first_chain_break(store.read_raw()) is None
