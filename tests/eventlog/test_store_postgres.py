"""The PostgreSQL event store passes the shared contract unchanged and keeps its own promises.

Skipped, with the reason, when no server is reachable through ``MEMOREE_TEST_PG_URL``.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memoree.errors import IdempotencyConflict, IntegrityError
from memoree.eventlog.cas import digest_hex
from memoree.eventlog.checkpoints import Checkpoint
from memoree.eventlog.postgres import NOTIFY_CHANNEL, PostgresContentStore, PostgresEventStore, redact_url
from memoree.eventlog.store import LogHead, first_chain_break
from tests.contracts.event_store_contract import EventStoreContract, append_one, new_event
from tests.pgsupport import fresh_database


def _write_many(url: str, worker: int, count: int) -> None:
    store = PostgresEventStore(url)
    for version in range(1, count + 1):
        append_one(store, new_event(f"w{worker}", version, version))
    store.close()


def _write_batches(url: str, worker: int, batches: int, size: int) -> None:
    store = PostgresEventStore(url)
    for batch in range(batches):
        with store.transaction():
            store.append([new_event(f"w{worker}b{batch}", version, version)
                          for version in range(1, size + 1)])
    store.close()


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_database() as url:
        yield url


class TestPostgresEventStore(EventStoreContract):
    """The shared event-store contract, run against a fresh PostgreSQL database per test."""

    writer_process_target = staticmethod(_write_many)

    @pytest.fixture(autouse=True)
    def _database(self, pg_url: str) -> Iterator[None]:
        self.url = pg_url
        self.opened: list[PostgresEventStore] = []
        yield
        for store in self.opened:
            store.close()

    def make_store(self, tmp_path: Path) -> Any:
        return self._open()

    def open_again(self, store: Any) -> Any:
        return self._open()

    def spawn_writer_args(self, store: Any) -> tuple[Any, ...]:
        return (self.url,)

    def _open(self) -> PostgresEventStore:
        store = PostgresEventStore(self.url)
        self.opened.append(store)
        return store


class TestPostgresSpecifics:
    """Promises of the PostgreSQL backend beyond the shared contract."""

    def test_stored_rows_are_immutable(self, pg_url: str) -> None:
        """UPDATE, DELETE and TRUNCATE on the events table are refused by triggers."""
        store = PostgresEventStore(pg_url)
        append_one(store, new_event("a", 1, 0))
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for sql in ("UPDATE events SET type = 'x'", "DELETE FROM events", "TRUNCATE events CASCADE"):
                with pytest.raises(psycopg.errors.RestrictViolation):
                    conn.execute(sql)
        assert 1 == store.head().commit_seq
        store.close()

    def test_idempotent_retry_on_another_connection_finds_the_original(self, pg_url: str) -> None:
        """A retry through a second connection (another host) finds the key at the same commit_seq."""
        first, second = PostgresEventStore(pg_url), PostgresEventStore(pg_url)
        original = append_one(first, new_event("a", 1, 0, key="wsp:prj:k1"))
        append_one(first, new_event("b", 1, 1))
        with pytest.raises(IdempotencyConflict):
            append_one(second, new_event("c", 1, 2, key="wsp:prj:k1"))
        hit = second.find_idempotency_key("wsp:prj:k1")
        assert original.commit_seq == hit.commit_seq == 1
        assert 2 == second.head().commit_seq
        first.close(), second.close()

    def test_an_append_transaction_rings_the_doorbell_once(self, pg_url: str) -> None:
        """A listener hears one doorbell per appending transaction and none for one that appended nothing."""
        store = PostgresEventStore(pg_url)
        listener = psycopg.connect(pg_url, autocommit=True)
        listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        with store.transaction():
            store.append([new_event("a", 1, 0), new_event("a", 2, 1), new_event("a", 3, 2)])
        with store.transaction():
            store.find_idempotency_key("nothing appended")
        with store.transaction():
            store.append([new_event("b", 1, 3)])
        received = list(listener.notifies(timeout=1.0))
        assert 2 == len(received)
        listener.close()
        store.close()

    def test_append_lock_serializes_a_second_writer(self, pg_url: str) -> None:
        """While one transaction holds the append lock, another writer waits, then follows it."""
        holder, waiter = PostgresEventStore(pg_url), PostgresEventStore(pg_url)
        entered, release, order = threading.Event(), threading.Event(), []

        def hold() -> None:
            with holder.transaction():
                holder.append([new_event("a", 1, 0)])
                entered.set()
                release.wait(5)
                order.append("holder")

        thread = threading.Thread(target=hold)
        thread.start()
        entered.wait(5)
        threading.Timer(0.3, release.set).start()
        recorded = append_one(waiter, new_event("b", 1, 1))
        order.append("waiter")
        thread.join()
        assert ["holder", "waiter"] == order
        assert 2 == recorded.commit_seq
        holder.close(), waiter.close()

    def test_concurrent_batches_from_several_processes_do_not_interleave(self, pg_url: str) -> None:
        """Each transaction's events occupy one contiguous run of positions, whatever runs beside it."""
        ctx = multiprocessing.get_context("spawn")
        workers = [ctx.Process(target=_write_batches, args=(pg_url, w, 4, 30)) for w in range(3)]
        for proc in workers:
            proc.start()
        for proc in workers:
            proc.join(60)
            assert 0 == proc.exitcode
        store = PostgresEventStore(pg_url)
        events = list(store.read())
        assert list(range(1, 361)) == [e.commit_seq for e in events]
        runs: dict[str, list[int]] = {}
        for event in events:
            runs.setdefault(event.stream_id, []).append(event.commit_seq)
        assert 12 == len(runs)
        assert all(seqs == list(range(seqs[0], seqs[0] + 30)) for seqs in runs.values())
        store.close()

    def test_noops_and_checkpoints_are_numbered_under_the_lock(self, pg_url: str) -> None:
        """No-op records and checkpoints are dense, immutable records beside the log."""
        store = PostgresEventStore(pg_url)
        append_one(store, new_event("a", 1, 0))
        with store.transaction():
            assert 1 == store.record_noop("k1", "d", "relation.put", 1, b"{}", "2026-01-01T00:00:00Z")
        with pytest.raises(IdempotencyConflict), store.transaction():
            store.record_noop("k1", "d", "relation.put", 1, b"{}", "2026-01-01T00:00:00Z")
        assert ("d", "relation.put", 1, b"{}") == store.find_noop("k1")
        checkpoint = Checkpoint(checkpoint_seq=1, tree_size=1, root=b"r", key_epoch=1,
                                signed_at="t", note=b"n", signature=b"s")
        with store.transaction():
            store.insert_checkpoint(checkpoint)
        with pytest.raises(IntegrityError), store.transaction():
            store.insert_checkpoint(checkpoint)
        assert [checkpoint] == store.list_checkpoints()
        assert (1, 1, 1) == tuple(store.counters())[:3]
        store.close()

    def test_migration_appends_recorded_events_verbatim_or_refuses(self, pg_url: str) -> None:
        """Recorded events keep their positions and bytes; one that does not continue the chain is refused."""
        source = PostgresEventStore(pg_url)
        events = [append_one(source, new_event(f"s{i}", 1, i)) for i in range(3)]
        with fresh_database() as other_url:
            target = PostgresEventStore(other_url)
            with pytest.raises(IntegrityError), target.transaction():
                target.append_recorded(events[1:])
            with target.transaction():
                target.append_recorded(events)
            assert [e.data for e in events] == [e.data for e in target.read()]
            assert first_chain_break(target.read_raw()) is None
            target.close()
        source.close()

    def test_an_append_at_a_known_head_continues_it_or_writes_nothing(self, pg_url: str) -> None:
        """Appending at the head read under the lock chains on it in one round trip; a stale or
        forked head (position or hash) is an integrity error and leaves the log as it was."""
        from memoree.eventlog.store import LogHead

        store = PostgresEventStore(pg_url)
        first = append_one(store, new_event("h", 1, 0))
        for wrong in (LogHead(0, first.prev_hash), LogHead(first.commit_seq, bytes(32))):
            with pytest.raises(IntegrityError), store.transaction():
                store.lock()
                store.append([new_event("h", 2, 1)], head=wrong)
        with store.transaction():
            store.lock()
            second = store.append([new_event("h", 2, 1)], head=store.head())[0]
        assert (2, first.hash) == (second.commit_seq, second.prev_hash)
        assert (2, second.hash) == (store.head().commit_seq, store.head().hash)
        assert first_chain_break(store.read_raw()) is None
        store.close()

    def test_an_append_on_a_guessed_head_commits_or_writes_nothing(self, pg_url: str) -> None:
        """An append on a guessed head (position, hash, no-op and checkpoint counts) takes the
        lock, appends and commits in one go when the guess is right; any wrong part writes
        nothing (neither the event nor the blob queued before it) and leaves the transaction open
        for a locked attempt."""
        from memoree.eventlog.postgres import HeadMoved, SharedCounters

        store = PostgresEventStore(pg_url)
        cas, reader = PostgresContentStore(store), PostgresContentStore(PostgresEventStore(pg_url))
        first = append_one(store, new_event("g", 1, 0))
        right = SharedCounters(first.commit_seq, 0, 0, first.hash)
        for wrong in (right._replace(seq=0), right._replace(hash=bytes(32)), right._replace(noops=1),
                      right._replace(checkpoints=1)):
            store.begin_unlocked()
            digest = cas.put(b"queued before the guess")
            with pytest.raises(HeadMoved):
                store.append_on_guess([new_event("g", 2, 1)], wrong)
            assert store.in_transaction
            locked = store.lock()  # the queued BEGIN and blob row go out again with the lock
            assert (1, first.hash) == (locked.seq, locked.hash)
            store.rollback()
            assert not reader.contains(digest, len(b"queued before the guess"))
        store.begin_unlocked()
        cas.put(b"kept")
        second = store.append_on_guess([new_event("g", 2, 1)], right)[0]
        assert not store.in_transaction  # committed
        assert (2, first.hash) == (second.commit_seq, second.prev_hash)
        assert (2, second.hash) == (store.head().commit_seq, store.head().hash)
        assert reader.contains(digest_hex(b"kept"), 4)
        assert first_chain_break(store.read_raw()) is None
        store.close()

    def test_a_missed_guess_reports_the_head_it_saw_and_a_right_one_its_lock_hold(self, pg_url: str) -> None:
        """A wrong guess in one statement reports the shared head (position, hash, counts, under
        any ``bytea_output``), so the next try can append on it; that try commits and says, by PostgreSQL's clock, how
        long it held the head row's lock (a fraction of its round trip)."""
        import time

        from memoree.eventlog.postgres import HeadMoved, SharedCounters

        store, other = PostgresEventStore(pg_url), PostgresEventStore(pg_url)
        first = append_one(other, new_event("k", 1, 0))
        second = append_one(other, new_event("k", 2, 1))
        store.conn.execute("SET bytea_output = 'escape'")  # the report reads the same either way
        store.begin_unlocked()
        with pytest.raises(HeadMoved) as missed:
            store.append_on_guess([new_event("m", 1, 0)], SharedCounters(first.commit_seq, 0, 0, first.hash))
        assert SharedCounters(2, 0, 0, second.hash) == missed.value.current
        started = time.perf_counter()
        mine = store.append_on_guess([new_event("m", 1, 0)], missed.value.current)[0]
        round_trip = time.perf_counter() - started
        assert (3, second.hash) == (mine.commit_seq, mine.prev_hash)
        assert 0 < store.last_hold_s < round_trip
        assert first_chain_break(store.read_raw()) is None
        store.close()
        other.close()

    def test_a_missed_guess_that_waited_for_another_append_reports_the_head_that_one_made(
            self, pg_url: str) -> None:
        """A guess sent while another session's append holds the head row waits for it; once that
        one commits, the miss reports the head it made (not the one before, which the statement's
        own snapshot held), so the next try can land."""
        import time

        from memoree.eventlog.postgres import HeadMoved, SharedCounters

        holder, guesser = PostgresEventStore(pg_url), PostgresEventStore(pg_url)
        first = append_one(holder, new_event("h", 1, 0))
        locked = holder.begin()
        theirs = holder.append([new_event("h", 2, 1)], head=LogHead(locked.seq, locked.hash))[0]
        missed: list[HeadMoved] = []

        def guess() -> None:
            guesser.begin_unlocked()
            try:
                guesser.append_on_guess([new_event("m", 1, 0)], SharedCounters(1, 0, 0, first.hash))
            except HeadMoved as exc:
                missed.append(exc)

        waiting = threading.Thread(target=guess)
        waiting.start()
        time.sleep(0.3)  # the guess is waiting for the head row
        holder.commit()
        waiting.join(10)
        assert [SharedCounters(2, 0, 0, theirs.hash)] == [m.current for m in missed]
        holder.close()
        guesser.close()

    def test_a_guessed_append_sent_without_waiting_settles_before_the_connection_is_used_again(
            self, pg_url: str) -> None:
        """``wait=False`` returns the events once the statement is sent; another use of the
        connection takes its outcome in first, and ``settle`` then raises what it found (a wrong
        guess: ``HeadMoved``, nothing written); a right guess commits, and settles quietly."""
        from memoree.eventlog.postgres import HeadMoved, SharedCounters

        store = PostgresEventStore(pg_url)
        first = append_one(store, new_event("w", 1, 0))
        store.begin_unlocked()
        store.append_on_guess([new_event("w", 2, 1)], SharedCounters(0, 0, 0), wait=False)
        assert (1, first.hash) == (store.head().commit_seq, store.head().hash)
        with pytest.raises(HeadMoved):
            store.settle()
        store.begin_unlocked()
        second = store.append_on_guess([new_event("w", 2, 1)], SharedCounters(1, 0, 0, first.hash),
                                       wait=False)[0]
        store.settle()
        assert (2, second.hash) == (store.head().commit_seq, store.head().hash)
        store.close()

    def test_a_guessed_append_prepares_its_statement_again_after_the_session_dropped_it(
            self, pg_url: str) -> None:
        """psycopg deallocates every prepared statement of a session after a ROLLBACK: the next
        append on a guessed head prepares its statement again and commits, once."""
        from memoree.eventlog.postgres import SharedCounters

        store = PostgresEventStore(pg_url)
        first = append_one(store, new_event("d", 1, 0))
        store.begin_unlocked()
        second = store.append_on_guess([new_event("d", 2, 1)], SharedCounters(1, 0, 0, first.hash))[0]
        store.conn.execute("DEALLOCATE ALL")
        store.begin_unlocked()
        third = store.append_on_guess([new_event("d", 3, 2)], SharedCounters(2, 0, 0, second.hash))[0]
        assert (3, third.hash) == (store.head().commit_seq, store.head().hash)
        assert [1, 2, 3] == [e.commit_seq for e in store.read()]
        store.close()

    def test_a_page_brings_the_head_the_rows_and_what_projecting_them_reads(self, pg_url: str) -> None:
        """One read returns the head's counters, the rows after a position (none past
        ``through``), the blobs of the revisions among them and the purges of their streams."""
        from memoree.eventlog.events import ArtifactCreated, ArtifactPurged
        from memoree.eventlog.store import NewEvent

        store = PostgresEventStore(pg_url)
        cas = PostgresContentStore(store)

        def event(kind: str, stream: str, version: int, payload: Any) -> NewEvent:
            return NewEvent(type=kind, stream_id=stream, stream_version=version, payload=payload,
                            event_id=f"evt_{stream}_{version}", at="2026-01-01T00:00:00.000000Z",
                            scope=None, idempotency_key=None, request_digest=None)

        def created(artifact: str, data: bytes) -> NewEvent:
            with store.transaction():
                digest = cas.put(data)
                # a provenance naming another blob does not stand for the artifact's own
                provenance = {"blob_hash": "f" * 64, "note": 'quoted "blob_hash":"' + "e" * 64}
                return store.append([event("artifact.created", artifact, 1, ArtifactCreated(
                    artifact_id=artifact, revision_id=f"rev_{artifact}", kind="note", title="t",
                    media_type="text/plain", blob_hash=digest, size_bytes=len(data),
                    provenance=provenance))])[0]

        empty = store.read_page(0, 10)
        assert ([], 0) == (empty.rows, empty.counters.seq)
        created("art_a", b"alpha bytes")
        append_one(store, new_event("other", 1, 1))
        created("art_b", b"beta bytes")
        with store.transaction():
            store.append([event("artifact.purged", "art_a", 2, ArtifactPurged(
                artifact_id="art_a", revision_id="rev_art_a", reason="r", blob_hashes=[digest_hex(b"alpha bytes")]))])
        page = store.read_page(0, 10, through=3)
        assert ([1, 2, 3], 4) == ([r.commit_seq for r in page.rows], page.counters.seq)
        assert {digest_hex(b"alpha bytes"): b"alpha bytes", digest_hex(b"beta bytes"): b"beta bytes"} == page.blobs
        assert {"art_a", "art_b"} == set(page.purges) and [] == page.purges["art_b"]
        assert [digest_hex(b"alpha bytes").encode()] == [
            d[d.index(b"blob_hashes") + 15:][:64] for d in page.purges["art_a"]]
        assert [2, 3] == [r.commit_seq for r in store.read_page(1, 2).rows]
        tail = store.read_page(3, 10)
        assert ([4], {}, {}) == ([r.commit_seq for r in tail.rows], tail.blobs, tail.purges)
        store.close()

    def test_a_store_session_never_jit_compiles(self, pg_url: str) -> None:
        """A store's session runs with JIT off: a page read the planner misjudges (it guesses 480
        rows for the one-row head) must not spend hundreds of milliseconds compiling."""
        store = PostgresEventStore(pg_url)
        assert "off" == store.conn.execute("SHOW jit").fetchone()[0]
        store.close()

    def test_blobs_are_shared_and_verified(self, pg_url: str) -> None:
        """A blob put through one connection is served, verified, by another."""
        writer = PostgresContentStore(PostgresEventStore(pg_url))
        reader = PostgresContentStore(PostgresEventStore(pg_url))
        data = b"x" * 40_000
        digest = writer.put(data)
        assert digest == digest_hex(data) and data == reader.get(digest, len(data))
        assert not reader.contains(digest, len(data) + 1)
        assert not reader.contains("0" * 64, 3)

    def test_passwords_are_redacted(self) -> None:
        """Connection URLs in messages never show the password."""
        assert "postgresql://u:***@h:5/db" == redact_url("postgresql://u:secret@h:5/db")
