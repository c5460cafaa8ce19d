"""Hosts in shared mode, in process: configuration, catch-up, gaps, foreign replicas, migration, keys.

The PostgreSQL parts skip, with the reason, when no server is reachable through
``MEMOREE_TEST_PG_URL``.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memoree.eventlog import sealing
from memoree.errors import ConfigError, IntegrityError
from memoree.eventlog.db import connect
from memoree.eventlog.postgres import PostgresEventStore
from memoree.eventlog.shared import LOCKED_READ_MAX
from memoree.eventlog.sqlite import SqliteEventStore
from memoree.service.logconfig import log_url
from memoree.eventlog.migrate import migrate
from memoree.service.service import Service
from tests.conftest import Caller
from tests.pgsupport import fresh_database


@pytest.fixture
def shared_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh database that every service opened in the test uses as its log."""
    with fresh_database() as url:
        monkeypatch.setenv("MEMOREE_LOG_URL", url)
        yield url


@pytest.fixture
def open_host(tmp_path: Path) -> Iterator[Any]:
    """Open in-process hosts (each its own data dir) and close them at the end."""
    opened: list[Service] = []

    def host(name: str) -> Caller:
        service = Service(tmp_path / name)
        opened.append(service)
        return Caller(service)

    yield host
    for service in opened:
        service.close()


def claims_edge(host: Caller) -> dict[str, Any]:
    """An edge between two claims ``host`` asserts, put once: putting it again is a no-op."""
    claims = [host.ok("claim.assert", {"claim_type": "fact", "statement": s}, key=f"c{s}")["result"]
              for s in ("left", "right")]
    edge = {"source_type": "claim", "source_id": claims[0]["claim_id"], "relation": "supports",
            "target_type": "claim", "target_id": claims[1]["claim_id"]}
    host.ok("relation.put", edge, key="r1")
    return edge


def wait_until(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


class TestConfiguration:
    """Which log an engine opens is decided by MEMOREE_LOG_URL or the config file."""

    def test_embedded_log_without_a_url(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """No URL anywhere means the embedded SQLite log."""
        monkeypatch.delenv("MEMOREE_LOG_URL", raising=False)
        assert log_url(tmp_path / "missing.toml") is None

    def test_environment_beats_the_config_file(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """MEMOREE_LOG_URL wins over [log] url; the config key works on its own."""
        config = tmp_path / "config.toml"
        config.write_text('[log]\nurl = "postgresql://cfg@127.0.0.1/db"\n')
        monkeypatch.delenv("MEMOREE_LOG_URL", raising=False)
        assert "postgresql://cfg@127.0.0.1/db" == log_url(config)
        monkeypatch.setenv("MEMOREE_LOG_URL", "postgresql://env@127.0.0.1/db")
        assert "postgresql://env@127.0.0.1/db" == log_url(config)

    @pytest.mark.parametrize(("raw", "seconds"), [(None, 0.005), ("0", 0.0), ("12.5", 0.0125)])
    def test_the_followers_gathering_window_comes_from_the_environment(
            self, monkeypatch: pytest.MonkeyPatch, raw: str | None, seconds: float) -> None:
        """MEMOREE_FOLLOW_GATHER_MS sets the window in milliseconds; unset, it is 5 ms."""
        from memoree.eventlog.follower import gather_window_s

        if raw is None:
            monkeypatch.delenv("MEMOREE_FOLLOW_GATHER_MS", raising=False)
        else:
            monkeypatch.setenv("MEMOREE_FOLLOW_GATHER_MS", raw)
        assert seconds == pytest.approx(gather_window_s())

    @pytest.mark.parametrize("raw", ["soon", "-1", "5000", "nan"])
    def test_a_bad_gathering_window_is_a_config_error(self, monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
        """Anything but 0 to 1000 milliseconds is CONFIG_ERROR naming the variable."""
        from memoree.eventlog.follower import gather_window_s

        monkeypatch.setenv("MEMOREE_FOLLOW_GATHER_MS", raw)
        with pytest.raises(ConfigError, match="MEMOREE_FOLLOW_GATHER_MS"):
            gather_window_s()

    def test_other_schemes_are_a_config_error(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A URL that is not postgresql:// is refused, with its password hidden."""
        monkeypatch.setenv("MEMOREE_LOG_URL", "mysql://u:secret@h/db")
        with pytest.raises(ConfigError) as raised:
            log_url()
        assert "secret" not in raised.value.message


class TestCatchUp:
    """Hosts follow the shared log; decisions are made against the shared head."""

    def test_follower_brings_an_idle_host_current(self, shared_url: str, open_host: Any) -> None:
        """A write through A becomes readable on B without B writing anything."""
        a, b = open_host("a"), open_host("b")
        b.head()
        artifact = a.put_text("followed by every host", key="p1")
        wait_until(lambda: b.service.engine.shared.follower.applied >= 1)
        assert b("artifact.get", {"artifact_id": artifact["artifact_id"]})["ok"]

    def test_min_commit_seq_waits_for_the_host_to_catch_up(self, shared_url: str, open_host: Any) -> None:
        """A read on B naming A's acknowledged commit_seq is answered, not INDEX_NOT_READY."""
        a, b = open_host("a"), open_host("b")
        b.head()
        b.service.engine.shared.follower.stop()
        envelope = a.ok("artifact.put", {"kind": "note", "title": "t",
                                         "content": {"type": "text", "data": "lighthouse keeper"}}, key="p1")
        found = b.ok("search", {"query": "lighthouse", "min_commit_seq": envelope["commit_seq"]})
        assert envelope["result"]["artifact_id"] in str(found["result"])

    def test_a_host_decides_without_the_append_lock_and_decides_again_when_stale(
            self, shared_url: str, open_host: Any) -> None:
        """While A decides, B appends unhindered; A's now-stale revise is decided again on the caught-up head."""
        a, b = open_host("a"), open_host("b")
        put = a.put_text("v1", key="p0")
        body = {"artifact_id": put["artifact_id"], "if_revision": put["revision_id"]}
        with a.service.engine.log.transaction():  # A caught up and is deciding: no append lock held
            b.ok("artifact.revise", {**body, "content": {"type": "text", "data": "v2 from b"}}, key="rb")
            stale = a("artifact.revise", {**body, "content": {"type": "text", "data": "v2 from a"}}, key="ra")
        assert "REVISION_CONFLICT" == stale["error"]["code"], stale
        got = a.ok("artifact.get", {"artifact_id": put["artifact_id"]})["result"]
        assert ({"type": "text", "data": "v2 from b"}, 2) == (got["content"], a.head())
        holds = a.service.engine.shared.lock_holds
        assert holds and holds[-1] > 0

    def test_a_creation_stands_when_another_host_appended_meanwhile(self, shared_url: str, open_host: Any) -> None:
        """A put decided while B appended is appended after B's event, which A applies first."""
        a, b = open_host("a"), open_host("b")
        a.put_text("first", key="p0")
        with a.service.engine.log.transaction():
            from_b = b.ok("artifact.put", {"kind": "note", "title": "b", "content": {"type": "text", "data": "from b"}},
                          key="pb")
            from_a = a.ok("artifact.put", {"kind": "note", "title": "a", "content": {"type": "text", "data": "from a"}},
                          key="pa")
        assert (2, 3) == (from_b["commit_seq"], from_a["commit_seq"])
        assert a.ok("artifact.get", {"artifact_id": from_b["result"]["artifact_id"]})["ok"]

    def test_a_lone_creation_takes_in_other_hosts_events_after_the_lock(self, shared_url: str, open_host: Any) -> None:
        """When B appends between A's catch-up and A's lock, A's put commits after B's event and
        A stores and projects B's event after releasing the lock, ahead of its own."""
        a, b = open_host("a"), open_host("b")
        a.put_text("first", key="p0")
        shared = a.service.engine.shared
        shared.follower.stop()  # only the put's own path may bring B's event to A
        unlocked = shared.pg.begin_unlocked

        def begin_while_b_writes() -> None:
            unlocked()
            shared.pg.begin_unlocked = unlocked
            b.ok("artifact.put", {"kind": "note", "title": "b", "content": {"type": "text", "data": "from b"}}, key="pb")

        shared.pg.begin_unlocked = begin_while_b_writes
        commits_before = len(shared.lock_commits)
        from_a = a.ok("artifact.put", {"kind": "note", "title": "a", "content": {"type": "text", "data": "from a"}},
                      key="pa")
        assert 3 == from_a["commit_seq"] and len(shared.lock_commits) == commits_before + 1
        rows = a.service.engine.conn.execute("SELECT commit_seq, type FROM events ORDER BY commit_seq").fetchall()
        assert [(1, "artifact.created"), (2, "artifact.created"), (3, "artifact.created")] == [tuple(r) for r in rows]
        found = a.ok("search", {"query": "from b"})["result"]["hits"]
        assert "b" in {hit["title"] for hit in found}
        assert a.ok("verify", {})["result"]["ok"]

    def test_follower_reconnects_after_losing_postgres(self, shared_url: str, open_host: Any) -> None:
        """Killing the follower's sessions costs nothing: it reconnects and resumes from its checkpoint."""
        a, b = open_host("a"), open_host("b")
        b.head()
        follower = b.service.engine.shared.follower
        with psycopg.connect(shared_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        artifact = a.put_text("after the outage", key="p1")
        wait_until(lambda: follower.applied >= 1)
        assert b("artifact.get", {"artifact_id": artifact["artifact_id"]})["ok"]

    def test_a_gap_in_the_shared_log_is_an_error(self, shared_url: str, open_host: Any) -> None:
        """A head that names a missing event fails writes with INTEGRITY_ERROR and reads with INDEX_NOT_READY."""
        a = open_host("a")
        a.put_text("one", key="p1")
        with psycopg.connect(shared_url, autocommit=True) as admin:
            admin.execute("UPDATE log_head SET seq = seq + 1")
        envelope = a("artifact.put", {"kind": "note", "title": "t", "content": {"type": "text", "data": "two"}},
                     key="p2")
        assert "INTEGRITY_ERROR" == envelope["error"]["code"]
        assert "INDEX_NOT_READY" == a("search", {"query": "one", "min_commit_seq": 2})["error"]["code"]

    def test_a_replica_of_another_log_is_refused(self, shared_url: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
        """A data dir holding events the shared log lacks cannot join it."""
        monkeypatch.delenv("MEMOREE_LOG_URL")
        local = Service(tmp_path / "solo")
        Caller(local).put_text("mine alone", key="p1")
        local.close()
        monkeypatch.setenv("MEMOREE_LOG_URL", shared_url)
        with pytest.raises(IntegrityError):
            Service(tmp_path / "solo").engine


class TestPutsDecideOnTheirInput:
    """A put reads no projection, so a host does not catch up before it: what other hosts
    appended meanwhile is taken in, in order, after the put's append; the shared log's unique keys
    and the no-op count guard what the host has not seen."""

    @staticmethod
    def behind(host: Caller) -> Caller:
        """``host`` with its follower stopped: only its own writes and reads bring it current."""
        host.service.engine.shared.follower.stop()
        return host

    @pytest.mark.parametrize("backlog", [5, LOCKED_READ_MAX + 3])
    def test_a_put_on_a_host_behind_lands_after_the_others_and_the_host_holds_them(
            self, shared_url: str, open_host: Any, backlog: int) -> None:
        """A, some events behind, puts without catching up first: its event follows them, and A's
        replica and projections then hold them all, in order, and verify against a replay. The
        backlog is read once the put has committed and let go of the lock."""
        a, b = open_host("a"), open_host("b")
        self.behind(a)
        for i in range(backlog):
            b.put_text(f"lantern from b number {i}", key=f"b{i}")
        assert 0 == a.service.engine.conn.execute("SELECT count(*) FROM events").fetchone()[0]
        shared = a.service.engine.shared
        reads, read_page = [], shared.pg.read_page
        appends, append_and_commit = [], shared.pg.append_and_commit

        def read_noting_the_lock(*args: Any, **kwargs: Any) -> Any:
            reads.append(bool(shared._lock_taken_at))
            return read_page(*args, **kwargs)

        def append_noting_the_read(*args: Any, **kwargs: Any) -> Any:
            recorded, page = append_and_commit(*args, **kwargs)
            appends.append((kwargs.get("read_first"), [] if page is None else [r.commit_seq for r in page.rows]))
            return recorded, page

        shared.pg.read_page, shared.pg.append_and_commit = read_noting_the_lock, append_noting_the_read
        mine = a.ok("artifact.put", {"kind": "note", "title": "a", "content": {"type": "text", "data": "lantern from a"}},
                    key="a0")
        assert backlog + 1 == mine["commit_seq"]
        # The guess on A's own head missed and reported B's; the retry appended on that head in
        # one statement (no lock taken first), then read B's events
        assert [] == appends and [False] == reads
        seqs = [r[0] for r in a.service.engine.conn.execute("SELECT commit_seq FROM events ORDER BY commit_seq")]
        assert list(range(1, backlog + 2)) == seqs
        assert backlog + 1 == len(a.ok("search", {"query": "lantern", "limit": 50})["result"]["hits"])
        assert a.ok("verify", {})["result"]["ok"]

    def test_a_put_guesses_the_head_while_nobody_else_writes_and_backs_off_after_a_miss(
            self, shared_url: str, open_host: Any) -> None:
        """A current host's put appends on its replica's head in one go; after B wrote, A's guess
        misses, writes nothing and reports B's head, and the put lands on that head after B's
        event; the next put also waits for its outcome (the back-off), the one after guesses
        again; the log stays dense and every host verifies."""
        a, b = open_host("a"), open_host("b")
        self.behind(a)
        shared = a.service.engine.shared
        assert 1 == a.put_text("first from a", key="a1")["commit_seq"]
        assert [1, 0] == shared.guesses
        b.put_text("from b", key="b1")
        assert 3 == a.put_text("second from a", key="a2")["commit_seq"]
        assert ([3, 1], 1) == (shared.guesses, shared._guess_skip)
        assert 4 == a.put_text("third from a", key="a3")["commit_seq"]  # waited: the back-off
        assert 5 == a.put_text("fourth from a", key="a4")["commit_seq"]
        assert ([5, 1], 0) == (shared.guesses, shared._guess_skip)
        seqs = [r[0] for r in a.service.engine.conn.execute("SELECT commit_seq FROM events ORDER BY commit_seq")]
        assert [1, 2, 3, 4, 5] == seqs
        assert 5 == len(a.ok("search", {"query": "from"})["result"]["hits"])
        assert a.ok("verify", {})["result"]["ok"] and b.ok("verify", {})["result"]["ok"]

    @pytest.mark.parametrize("tries", [2, 1])
    def test_a_put_while_another_host_writes_appends_on_the_head_its_miss_saw_or_locks(
            self, shared_url: str, open_host: Any, tries: int, monkeypatch: pytest.MonkeyPatch) -> None:
        """In the back-off, A's put tries its own head, misses (B wrote twice), and appends on the
        head that miss reported, in one statement; with no try left it takes the lock first
        instead. Either way it lands after B's events, which A holds, and every host verifies."""
        from memoree.eventlog import shared as shared_module

        monkeypatch.setattr(shared_module, "KNOWN_HEAD_TRIES", tries)
        a, b = open_host("a"), open_host("b")
        self.behind(a)
        a.put_text("first from a", key="a1")
        b.put_text("one from b", key="b1")
        b.put_text("two from b", key="b2")
        shared = a.service.engine.shared
        shared._guess_skip = 1
        locked, append_and_commit = [], shared.pg.append_and_commit

        def noting(*args: Any, **kwargs: Any) -> Any:
            locked.append(True)
            return append_and_commit(*args, **kwargs)

        shared.pg.append_and_commit = noting
        assert 4 == a.put_text("second from a", key="a2")["commit_seq"]
        assert ([3, 1] if tries == 2 else [2, 1], [] if tries == 2 else [True]) == (shared.guesses, locked)
        seqs = [r[0] for r in a.service.engine.conn.execute("SELECT commit_seq FROM events ORDER BY commit_seq")]
        assert [1, 2, 3, 4] == seqs
        assert 4 == len(a.ok("search", {"query": "from"})["result"]["hits"])
        assert a.ok("verify", {})["result"]["ok"] and b.ok("verify", {})["result"]["ok"]

    def test_a_retry_landing_on_a_host_that_has_not_seen_the_original_replays_it(
            self, shared_url: str, open_host: Any) -> None:
        """B puts under a key; the same request retried on A (behind) returns B's result, not a new
        artifact; another request under that key is IDEMPOTENCY_CONFLICT there too."""
        a, b = open_host("a"), open_host("b")
        self.behind(a)
        payload = {"kind": "note", "title": "t", "content": {"type": "text", "data": "retried on another host"}}
        original = b.ok("artifact.put", payload, key="same-key")
        retried = a.ok("artifact.put", payload, key="same-key")
        assert (original["commit_seq"], original["result"]["artifact_id"], False) == (
            retried["commit_seq"], retried["result"]["artifact_id"], retried["result"]["created"])
        other = a("artifact.put", {**payload, "title": "another request"}, key="same-key")
        assert "IDEMPOTENCY_CONFLICT" == other["error"]["code"], other
        with psycopg.connect(shared_url) as conn:
            assert 1 == conn.execute("SELECT count(*) FROM events").fetchone()[0]

    def test_a_key_another_host_recorded_as_a_no_op_is_not_reused_by_a_put(
            self, shared_url: str, open_host: Any) -> None:
        """B records a no-op (an identical relation) under a key; a put under that key on A,
        which holds B's events but not the no-op record, is IDEMPOTENCY_CONFLICT."""
        a, b = open_host("a"), open_host("b")
        edge = claims_edge(b)
        a.head()
        self.behind(a)
        b.ok("relation.put", edge, key="noop-key")  # identical edge: a no-op record, no event
        conflict = a("artifact.put", {"kind": "note", "title": "t", "content": {"type": "text", "data": "x"}},
                     key="noop-key")
        assert "IDEMPOTENCY_CONFLICT" == conflict["error"]["code"], conflict

    @pytest.mark.parametrize(("path", "skip", "tries"), [
        ("append_on_guess", 0, 4), ("append_on_guess", 1, 4), ("append_and_commit", 1, 0)])
    def test_a_put_whose_shared_commit_fails_leaves_nothing_behind_on_the_host(
            self, shared_url: str, open_host: Any, path: str, skip: int, tries: int,
            monkeypatch: pytest.MonkeyPatch) -> None:
        """The append that commits a lone put fails (on a guessed head sent without waiting, on
        the head last seen while waiting, or on the locked one): the put answers a retryable
        error, the host's replica and search hold nothing of it, and the retry commits."""
        from memoree.errors import InternalError
        from memoree.eventlog import shared as shared_module

        monkeypatch.setattr(shared_module, "KNOWN_HEAD_TRIES", tries)
        a = open_host("a")
        a.put_text("before", key="p0")
        shared = a.service.engine.shared
        shared._guess_skip = skip
        append = getattr(shared.pg, path)

        def lose_the_connection(*args: Any, **kwargs: Any) -> None:
            setattr(shared.pg, path, append)
            raise InternalError("the shared log is unreachable", retryable=True)

        setattr(shared.pg, path, lose_the_connection)
        payload = {"kind": "note", "title": "t", "content": {"type": "text", "data": "quarry notebook"}}
        failed = a("artifact.put", payload, key="p1")
        assert "INTERNAL_ERROR" == failed["error"]["code"] and failed["error"]["retryable"], failed
        assert 1 == a.service.engine.conn.execute("SELECT count(*) FROM events").fetchone()[0]
        assert not a.ok("search", {"query": "quarry"})["result"]["hits"]
        retried = a.ok("artifact.put", payload, key="p1")
        assert (2, True) == (retried["commit_seq"], retried["result"]["created"])
        assert a.ok("verify", {})["result"]["ok"]

    def test_a_read_catches_up_checkpoints_that_came_without_events(
            self, shared_url: str, tmp_path: Path, open_host: Any) -> None:
        """B seals (a checkpoint, no event); A's next read of its head copies the checkpoint."""
        a = open_host("a")
        a.put_text("to be sealed", key="p1")
        a.service.engine.node_key()
        shutil.copytree(tmp_path / "a" / "keys", tmp_path / "b" / "keys")
        b = open_host("b")
        b.head()
        self.behind(a)
        assert sealing.seal(b.service.engine) is not None
        a.head()
        assert 1 == a.service.engine.conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]


class TestBatchedCatchUp:
    """Other hosts' events are applied a page at a time, with the page's text indexed and embedded
    once and its blobs and purges read in one go: the projections are the ones a replay builds."""

    def test_a_page_with_revisions_and_a_purge_projects_as_a_replay_does(
            self, shared_url: str, open_host: Any) -> None:
        """B, behind, takes in A's puts, a revise and a purge in one page: search finds the kept
        texts, not the purged one, and B's projections verify against a replay of the log."""
        a, b = open_host("a"), open_host("b")
        b.head()
        b.service.engine.shared.follower.stop()
        kept = [a.put_text(f"orchard ledger entry {i}", key=f"k{i}") for i in range(3)]
        a.ok("artifact.revise", {"artifact_id": kept[0]["artifact_id"], "if_revision": kept[0]["revision_id"],
                                 "content": {"type": "text", "data": "orchard ledger entry zero, revised"}}, key="rv")
        doomed = a.put_text("orchard secret to erase", key="d")
        a.ok("artifact.purge", {"artifact_id": doomed["artifact_id"], "reason": "erasure request"}, key="x")
        b.head()  # one read: the whole backlog in one page
        assert a.head() == b.head()
        hits = b.ok("search", {"query": "orchard ledger"})["result"]["hits"]
        assert {k["artifact_id"] for k in kept} <= {hit["entity_id"] for hit in hits}
        assert "secret" not in str(b.ok("search", {"query": "orchard secret"})["result"]["hits"])
        assert "revised" in str(b.ok("search", {"query": "revised"})["result"])
        assert b.ok("verify", {})["result"]["ok"]

    def test_events_taken_in_inside_a_group_join_the_groups_deferral(
            self, shared_url: str, open_host: Any) -> None:
        """A group on A whose first append takes in B's events (appended after the group caught
        up) indexes and embeds all of them at the group's end: search finds every text and A
        verifies clean."""
        a, b = open_host("a"), open_host("b")
        a.put_text("first", key="p0")
        engine = a.service.engine
        engine.shared.follower.stop()
        with engine.group():
            for i in range(3):
                b.put_text(f"meadow from b {i}", key=f"b{i}")
            a.put_text("meadow from a, one", key="g1")
            a.put_text("meadow from a, two", key="g2")
        assert 6 == a.head()
        assert 5 == len(a.ok("search", {"query": "meadow"})["result"]["hits"])
        assert a.ok("verify", {})["result"]["ok"]

    def test_the_follower_sleeps_through_its_own_hosts_doorbells(self, shared_url: str, open_host: Any) -> None:
        """A's own puts never wake A's follower (A stores them itself); one put on B does, and A
        catches up."""
        a, b = open_host("a"), open_host("b")
        a.put_text("warm up", key="p0")
        follower = a.service.engine.shared.follower
        time.sleep(0.3)
        woken = follower.woken
        for i in range(5):
            a.put_text(f"own {i}", key=f"own{i}")
        time.sleep(0.3)
        assert woken == follower.woken
        from_b = b.put_text("from another host", key="b1")
        wait_until(lambda: follower.woken > woken)
        wait_until(lambda: a.service.engine.conn.execute(
            "SELECT 1 FROM events WHERE commit_seq = ?", (from_b["commit_seq"],)).fetchone() is not None)

    def test_a_host_writing_steadily_leaves_other_hosts_events_to_its_writes(
            self, shared_url: str, open_host: Any) -> None:
        """While A counts as writing, B's doorbell does not wake A's follower; A's next put takes
        B's event in ahead of its own. A write marks a host as writing for a moment only."""
        from memoree.eventlog.shared import WRITING_S

        a, b = open_host("a"), open_host("b")
        a.put_text("warm up", key="p0")
        shared = a.service.engine.shared
        assert shared._writing()
        time.sleep(WRITING_S * 1.5)
        assert not shared._writing()
        shared.follower.writing = lambda: True
        woken = shared.follower.woken
        from_b = b.put_text("from b while a writes", key="b1")
        time.sleep(0.2)
        assert woken == shared.follower.woken
        mine = a.ok("artifact.put", {"kind": "note", "title": "a", "content": {"type": "text", "data": "a again"}},
                    key="a1")
        assert (from_b["commit_seq"] + 1, from_b["commit_seq"]) == (
            mine["commit_seq"], a.service.engine.conn.execute(
                "SELECT commit_seq FROM events WHERE commit_seq = ?", (from_b["commit_seq"],)).fetchone()[0])

    def test_appends_close_behind_one_another_reach_the_follower_as_one_page(
            self, shared_url: str, open_host: Any) -> None:
        """With a gathering window longer than B's burst, A's follower applies three puts in fewer
        pages than puts."""
        a, b = open_host("a"), open_host("b")
        a.put_text("warm up", key="p0")
        follower = a.service.engine.shared.follower
        follower.gather_s = 2.0
        rounds = follower.rounds
        last = [b.put_text(f"burst {i}", key=f"burst{i}") for i in range(3)][-1]
        wait_until(lambda: a.service.engine.conn.execute(
            "SELECT 1 FROM events WHERE commit_seq = ?", (last["commit_seq"],)).fetchone() is not None)
        assert follower.rounds - rounds < 3

    def test_the_follower_takes_a_stale_head_reading_in_its_stride(
            self, shared_url: str, open_host: Any) -> None:
        """A page the follower read before the host's own write moved it further is no error."""
        from memoree.eventlog.postgres import SharedCounters

        a = open_host("a")
        a.put_text("one", key="p1")
        a.put_text("two", key="p2")
        follower = a.service.engine.shared.follower
        follower.stop()
        follower._connect()
        try:
            stale = follower._store.read_page(0, 1, through=1)._replace(counters=SharedCounters(1, 0, 0))
            assert 0 == follower._apply_page(0, stale)
        finally:
            follower._disconnect()


class TestPurge:
    """A purge made on one host erases the shared bytes; every host, old or new, still verifies."""

    def test_purged_bytes_are_gone_everywhere_and_a_new_host_still_replays(
            self, shared_url: str, open_host: Any) -> None:
        """After a purge on A, B and a host joining later answer NOT_FOUND for the bytes and verify clean."""
        a, b = open_host("a"), open_host("b")
        artifact = a.put_text("purge me " * 5000, key="p1")
        a.put_text("keep me", key="p2")
        b.head()
        a.ok("artifact.purge", {"artifact_id": artifact["artifact_id"], "reason": "erasure request"}, key="x1")
        late = open_host("late")
        for host in (b, late):
            host.head()
            assert "NOT_FOUND" == host("artifact.get", {"artifact_id": artifact["artifact_id"]})["error"]["code"]
            report = host.ok("verify", {})["result"]
            assert report["ok"] and [artifact["blob_hash"]] == report["purged_blobs"], report
        with psycopg.connect(shared_url) as conn:
            assert conn.execute("SELECT count(*) FROM blobs WHERE hash = %s",
                                (artifact["blob_hash"],)).fetchone()[0] == 0


class TestMigration:
    """`memoree log migrate` moves a store into PostgreSQL with positions preserved."""

    def test_migrated_store_keeps_positions_and_serves_every_host(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, open_host: Any) -> None:
        """Events, checkpoints and blobs arrive intact; the old data dir and a new host both continue."""
        monkeypatch.delenv("MEMOREE_LOG_URL", raising=False)
        solo = Service(tmp_path / "a")
        caller = Caller(solo)
        artifact = caller.put_text("x" * 40_000, key="big")
        caller.put_text("small note", key="small")
        sealing.seal(solo.engine)
        solo.close()
        source = SqliteEventStore(connect(tmp_path / "a" / "memoree.sqlite3"))
        with fresh_database() as url:
            result = migrate(tmp_path / "a", url)
            assert (0, source.head().commit_seq, 1) == (
                result["resumed_from"], result["events_copied"], result["checkpoints_copied"])
            assert 0 == migrate(tmp_path / "a", url)["events_copied"]
            target = PostgresEventStore(url)
            assert [e.data for e in source.read()] == [e.data for e in target.read()]
            target.close()
            monkeypatch.setenv("MEMOREE_LOG_URL", url)
            a, b = open_host("a"), open_host("b")
            assert a.ok("verify", {})["result"]["ok"]
            got = b.ok("artifact.get", {"artifact_id": artifact["artifact_id"]})
            assert 40_000 == len(got["result"]["content"]["data"])
            assert 1 == len(b.service.engine.log.list_checkpoints())
            assert source.head().commit_seq + 1 == b.ok(
                "artifact.put", {"kind": "note", "title": "t", "content": {"type": "text", "data": "next"}},
                key="next")["commit_seq"]

    def test_a_foreign_target_is_refused(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         shared_url: str, open_host: Any) -> None:
        """Migrating into a log that holds other events fails and changes nothing."""
        open_host("other").put_text("someone else's", key="p1")
        monkeypatch.delenv("MEMOREE_LOG_URL")
        solo = Service(tmp_path / "solo")
        Caller(solo).put_text("mine", key="p1")
        solo.close()
        with pytest.raises(IntegrityError):
            migrate(tmp_path / "solo", shared_url)
        store = PostgresEventStore(shared_url)
        assert 1 == store.head().commit_seq
        store.close()


class TestNodeKeys:
    """Hosts seal and attest with the one node key the shared log recorded."""

    def test_a_host_with_another_key_refuses_to_sign(self, shared_url: str, tmp_path: Path,
                                                     open_host: Any) -> None:
        """B with its own key cannot seal; with A's keys copied in, B's checkpoint reaches A."""
        a = open_host("a")
        a.put_text("sealed by whoever holds the key", key="p1")
        a.service.engine.node_key()
        b = open_host("b")
        b.head()
        b.service.engine.keys.current()
        with pytest.raises(ConfigError):
            sealing.seal(b.service.engine)
        b.service.close()
        shutil.rmtree(tmp_path / "b" / "keys")
        shutil.copytree(tmp_path / "a" / "keys", tmp_path / "b" / "keys")
        assert sealing.seal(b.service.engine) is not None
        a("artifact.put", {"kind": "note", "title": "t", "content": {"type": "text", "data": "later"}}, key="p2")
        report = a.ok("verify", {})["result"]
        assert report["ok"] and 1 == report["checked_checkpoints"], report


class TestReindex:
    """A host rebuilds its projections blue/green from its replica while other hosts keep writing."""

    def test_a_host_reindexes_while_another_writes(self, shared_url: str, open_host: Any) -> None:
        """B reindexes while A writes; B then answers search for every write and verifies clean."""
        a, b = open_host("a"), open_host("b")
        for i in range(5):
            a.put_text(f"harbour note {i}", key=f"p{i}")
        b.head()
        written: list[str] = []

        def write_on_a(_: int) -> None:
            if not written:
                written.append(a.put_text("harbour arrival during the reindex", key="during")["artifact_id"])

        b.service.engine.reindex(progress=write_on_a)
        assert written
        wait_until(lambda: written[0] in str(b.ok("search", {"query": "arrival"})["result"]))
        assert 6 == len(b.ok("search", {"query": "harbour"})["result"]["hits"])
        assert b.ok("verify", {})["result"]["ok"]

    def test_a_host_behind_the_shared_log_reindexes_its_replica(self, shared_url: str, open_host: Any) -> None:
        """B, whose replica lags A's writes, rebuilds up to its replica's head, then catches up cleanly."""
        a, b = open_host("a"), open_host("b")
        a.put_text("first harbour", key="p1")
        b.head()
        b.service.engine.shared.follower.stop()
        later = a.ok("artifact.put", {"kind": "note", "title": "t",
                                      "content": {"type": "text", "data": "second harbour, later"}}, key="p2")
        replica_head = b.service.engine.conn.execute("SELECT max(commit_seq) FROM events").fetchone()[0]
        assert replica_head < later["commit_seq"]
        assert replica_head == b.service.engine.reindex()["commit_seq"]
        found = b.ok("search", {"query": "later", "min_commit_seq": later["commit_seq"]})
        assert later["result"]["artifact_id"] in str(found["result"])
        assert b.ok("verify", {})["result"]["ok"]
