"""A shared log's host takes other hosts' events in at its own puts: on every append path, in one
projection batch with its own, with one message when another host took its key, without guessing
its own head right after, and with vectors that catch up after the writes while reads still see
every write.

The tests skip, with the reason, when no PostgreSQL server is reachable through
``MEMOREE_TEST_PG_URL``.
"""

from __future__ import annotations

from typing import Any

import pytest

from memoree.admin.verify import projection_fingerprint
from memoree.projections.base import owned_tables
from memoree.projections.vectors import caught_up_rows
from tests.conftest import Caller
from tests.memoree.test_sharedlog import open_host, shared_url, wait_until  # noqa: F401 - fixtures

PATHS = ("guessed head", "known head", "locked")


def behind(host: Caller) -> Caller:
    """``host`` with its follower stopped: only its own writes and reads bring it current."""
    host.service.engine.shared.follower.stop()
    return host


def take_path(host: Caller, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Send ``host``'s next put down ``path``: its own head guessed (the default), the head last
    seen in one statement (the back-off after a miss), or the append lock taken first."""
    from memoree.eventlog import shared as shared_module

    if path == "guessed head":
        return
    host.service.engine.shared._guess_skip = 1
    if path == "locked":
        monkeypatch.setattr(shared_module, "KNOWN_HEAD_TRIES", 0)


def counting(owner: Any, name: str) -> list[Any]:
    """Replace ``owner.name`` with a wrapper that notes each call's arguments; return the notes."""
    calls: list[Any] = []
    original = getattr(owner, name)

    def noted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(*args, **kwargs)

    setattr(owner, name, noted)
    return calls


def fingerprints(host: Caller) -> dict[str, str]:
    """Each projection's rows, as a caught-up store holds them, digested."""
    engine = host.service.engine
    return {p.name: projection_fingerprint(engine.conn, owned_tables(p),
                                           caught_up_rows if p.name == "vectors" else None)
            for p in engine.projectors}


class TestEveryAppendPath:
    """Whichever way a put is appended, what other hosts appended before it is stored and
    projected first, in one batch with the put's own event, and the host verifies."""

    @pytest.mark.parametrize("path", PATHS)
    def test_a_put_takes_in_what_came_before_it_and_projects_it_with_its_own(
            self, shared_url: str, open_host: Any, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
        """A puts once, B puts twice (none of it on A yet unless A guesses right, so then B
        writes nothing), A puts down ``path``: A's replica holds every event in order, its page
        sink was never called (the events came in with A's put, one batch), and search finds all."""
        a, b = behind(open_host("a")), open_host("b")
        a.put_text("lantern one from a", key="a1")
        others = 0 if path == "guessed head" else 2
        for i in range(others):
            b.put_text(f"lantern {i} from b", key=f"b{i}")
        shared = a.service.engine.shared
        take_path(a, path, monkeypatch)
        pages, after_append = counting(shared, "apply"), counting(shared, "_after_own_append")
        locked = counting(shared.pg, "append_and_commit")
        assert 2 + others == a.put_text("lantern two from a", key="a2")["commit_seq"]
        assert ([], [path == "locked"]) == (pages, [bool(locked)])
        assert [(1, 1 + others)] == [(local.commit_seq, head.seq) for _, local, head, *_ in after_append]
        seqs = [r[0] for r in a.service.engine.conn.execute("SELECT commit_seq FROM events ORDER BY commit_seq")]
        assert list(range(1, 3 + others)) == seqs
        assert 2 + others == len(a.ok("search", {"query": "lantern"})["result"]["hits"])
        assert a.ok("verify", {})["result"]["ok"]

    def test_a_backlog_longer_than_a_page_projects_its_last_page_with_the_put(
            self, shared_url: str, open_host: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        """With pages of 2 and 5 events from B before it, A's put projects two pages on their own
        and the last one with its own event; A verifies against a replay."""
        from memoree.eventlog import shared as shared_module

        monkeypatch.setattr(shared_module, "CATCH_UP_PAGE", 2)
        a, b = behind(open_host("a")), open_host("b")
        for i in range(5):
            b.put_text(f"harbour {i} from b", key=f"b{i}")
        pages = counting(a.service.engine.shared, "apply")
        assert 6 == a.put_text("harbour from a", key="a1")["commit_seq"]
        assert [[1, 2], [3, 4]] == [[e.commit_seq for e in events] for _, events, _ in pages]
        assert 6 == len(a.ok("search", {"query": "harbour"})["result"]["hits"])
        assert a.ok("verify", {})["result"]["ok"]


class TestAfterATakeIn:
    """A host whose put has just taken other hosts' events in expects them to go on writing."""

    def test_the_next_put_appends_on_the_head_last_seen_until_the_others_have_been_quiet(
            self, shared_url: str, open_host: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        """After A's put took in B's event, A's next put does not guess its own head (it waits
        for the outcome on the head last seen); once no take-in happened for ``WRITING_S``, A's
        put guesses again."""
        from memoree.eventlog import shared as shared_module

        monkeypatch.setattr(shared_module, "WRITING_S", 3600.0)  # "recently", whatever the machine's pace
        a, b = behind(open_host("a")), open_host("b")
        a.put_text("first from a", key="a1")
        b.put_text("from b", key="b1")
        shared = a.service.engine.shared
        take_path(a, "known head", monkeypatch)
        assert 3 == a.put_text("second from a", key="a2")["commit_seq"]
        guesses = counting(shared, "_append_on_guess")
        assert 4 == a.put_text("third from a", key="a3")["commit_seq"]
        assert ([], 0) == (guesses, shared._guess_skip)
        shared._took_in_at -= 2 * shared_module.WRITING_S  # as if the others had been quiet since
        assert 5 == a.put_text("fourth from a", key="a4")["commit_seq"]
        assert 1 == len(guesses)
        assert a.ok("verify", {})["result"]["ok"]


class TestOneBatch:
    """Projecting other hosts' events with the put's own, in one batch, leaves the rows that
    projecting each event on its own leaves."""

    def test_a_host_that_took_events_in_with_its_put_holds_the_projections_of_their_writer(
            self, shared_url: str, open_host: Any) -> None:
        """B writes puts, a revise and a claim one request at a time; A, behind, takes them in
        with its own put; B then takes A's put in alone. Every projection of A equals B's."""
        a, b = behind(open_host("a")), open_host("b")
        first = b.put_text("the orchard ledger, first entry", key="b0")
        b.put_text("the orchard ledger, second entry", key="b1")
        b.ok("artifact.revise", {"artifact_id": first["artifact_id"], "if_revision": first["revision_id"],
                                 "content": {"type": "text", "data": "the orchard ledger, revised"}}, key="b2")
        b.ok("claim.assert", {"claim_type": "decision", "statement": "The orchard ledger is kept weekly",
                              "evidence": []}, key="b3")
        assert 5 == a.put_text("the orchard ledger, from a", key="a0")["commit_seq"]
        assert 5 == b.head() == a.head()
        assert fingerprints(b) == fingerprints(a)
        a.service.engine.catch_up_vectors()
        b.service.engine.catch_up_vectors()
        assert fingerprints(b) == fingerprints(a)


class TestTakenElsewhere:
    """A put whose idempotency key another host appended first, unseen by its host, is decided
    again on the caught-up host and replays the original result."""

    def test_both_paths_that_find_the_key_taken_say_so_in_one_message(
            self, shared_url: str, open_host: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        """B puts under two keys; the same requests retried on A (the head last seen) and on C
        (the lock first), both behind, each meet the key once, with the same message, and replay
        B's results."""
        a, b, c = behind(open_host("a")), open_host("b"), behind(open_host("c"))
        payloads = [{"kind": "note", "title": "t", "content": {"type": "text", "data": f"retried {i}"}}
                    for i in range(2)]
        originals = [b.ok("artifact.put", payload, key=f"k{i}") for i, payload in enumerate(payloads)]
        stale: list[Any] = []
        for index, (host, path) in enumerate(((a, "known head"), (c, "locked"))):
            shared = host.service.engine.shared
            taken = shared._taken_elsewhere
            shared._taken_elsewhere = lambda seq, taken=taken: stale.append(taken(seq)) or stale[-1]
            take_path(host, path, monkeypatch)
            retried = host.ok("artifact.put", payloads[index], key=f"k{index}")
            assert (originals[index]["commit_seq"], False) == (retried["commit_seq"], retried["result"]["created"])
        assert 2 == len(stale) and 1 == len({decision.message for decision in stale}), stale
        assert 2 == a.head() == c.head()


class TestVectorsCatchUp:
    """A shared log's hosts embed after the writes, the engine's projector and the follower's
    marking one lag; a read that may use the dense channel catches up first."""

    def test_puts_leave_the_embedding_to_a_catch_up_and_reads_still_see_them(
            self, shared_url: str, open_host: Any) -> None:
        """A's writes store no vectors but the lag; a recall on A at its head answers through
        meaning and leaves nothing lagging. B's follower takes the writes in, marking the same
        lag, and B's recall at that head answers the same."""
        from tests.queries.test_dense import QUESTION, seed

        a, b = open_host("a"), open_host("b")
        b.head()  # open B now: a host opened later replays the log, embedding as it goes
        made = seed(a)
        head = a.head()
        assert head == a.service.engine.vectors_lag()
        recalled = a.ok("memory.recall", {"query": QUESTION, "min_commit_seq": head})["result"]
        assert [made["claim"]["claim_id"]] == [c["claim_id"] for c in recalled["claims"]]
        assert 0 == a.service.engine.vectors_lag()
        engine = b.service.engine
        wait_until(lambda: engine.conn.execute("SELECT max(commit_seq) FROM events").fetchone()[0] == head)
        assert head == engine.vectors_lag()
        recalled = b.ok("memory.recall", {"query": QUESTION, "min_commit_seq": head})["result"]
        assert [made["claim"]["claim_id"]] == [c["claim_id"] for c in recalled["claims"]]
        assert 0 == engine.vectors_lag()
