"""The vectors projection: passage windows, catch-up, read-your-writes, byte-identical replay, purge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memoree.projections import embedding
from memoree.projections.embed_worker import embed_request
from memoree.projections.vectors import MODEL_VERSION, PASSAGE_BYTES, embedded_through, passage_spans
from memoree.service.service import Service
from tests.conftest import Caller
from tests.modelsupport import model_absent

TABLES = ("artifact_vectors", "claim_vectors", "vector_state")


def rows(conn: Any) -> dict[str, list[tuple[Any, ...]]]:
    return {table: conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall() for table in TABLES}


def caught_up(engine: Any) -> dict[str, list[tuple[Any, ...]]]:
    """The vector rows once the engine's projection has caught up with its log."""
    engine.catch_up_vectors()
    assert embedded_through(engine.conn) is None
    return rows(engine.conn)


def populate(call: Caller) -> dict[str, Any]:
    made = call.put_text("The weekly sync moved to Tuesday.\n\nDeploys leave on Friday afternoons.\n" * 3,
                         title="team rhythm")
    call.ok("artifact.revise", {"artifact_id": made["artifact_id"], "if_revision": made["revision_id"],
                                "content": {"type": "text", "data": "Deploys now leave on Thursdays."}}, key="rev")
    call.ok("claim.assert", {"claim_type": "decision", "statement": "Deploys happen on Thursdays",
                             "evidence": []}, key="c1")
    return made


class TestPassages:
    """Passages are whole lines packed into bounded windows with exact byte offsets."""

    def test_windows_are_bounded_exact_and_cover_every_non_blank_line(self) -> None:
        """Every non-blank line lies inside one window; windows never exceed the limit."""
        text = ("short line\n\n" + "é" * 700 + "\n" + "word " * 300 + "\nlast").encode("utf-8")
        spans = passage_spans(text)
        assert all(0 < end - start <= PASSAGE_BYTES for start, end in spans)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        for start, end in spans:
            text[start:end].decode("utf-8")  # never splits a character
        covered = b"".join(text[s:e] for s, e in spans)
        assert covered.replace(b"\n", b"") == text.replace(b"\n", b"")


class TestProjection:
    """One vector per artifact title and passage and per claim revision, stored by the catch-up."""

    def test_a_write_marks_the_rows_lagging_and_the_catch_up_stores_them(self, call: Caller) -> None:
        """A put stores no vector but the mark (complete through the commit before it); the
        catch-up stores its title vector and one per passage and clears the mark."""
        engine = call.service.engine
        before = engine.head()
        made = call.put_text("first line\nsecond line", title="two lines")
        call.put_text("a second put leaves the mark where the first set it")

        def found() -> list[tuple[Any, ...]]:
            return engine.conn.execute(
                "SELECT start_byte, end_byte, length(vector) FROM artifact_vectors WHERE revision_id = ? "
                "ORDER BY vec_id", (made["revision_id"],)).fetchall()

        assert [] == found() and before == embedded_through(engine.conn) and engine.vectors_lag() == 2
        assert engine.catch_up_vectors() == 2
        assert [(None, None, embedding.DIMENSIONS), (0, 22, embedding.DIMENSIONS)] == found()
        assert embedded_through(engine.conn) is None and engine.vectors_lag() == 0

    def test_a_bounded_catch_up_moves_the_mark_with_its_rows(self, call: Caller) -> None:
        """A catch-up of at most N events stores theirs and leaves the mark after them."""
        engine = call.service.engine
        start = engine.head()
        for i in range(3):
            call.put_text(f"note {i}")
        assert engine.catch_up_vectors(max_events=2) == 2
        assert embedded_through(engine.conn) == start + 2
        assert engine.conn.execute("SELECT count(DISTINCT doc_id) FROM artifact_vectors").fetchone()[0] == 2
        assert engine.catch_up_vectors() == 1 and embedded_through(engine.conn) is None

    def test_replay_rebuilds_the_same_bytes(self, call: Caller) -> None:
        """Reindexing the vectors projection (and everything) reproduces every row byte for byte."""
        populate(call)
        engine = call.service.engine
        before = caught_up(engine)
        assert before["artifact_vectors"] and before["claim_vectors"]
        engine.reindex(["vectors"])
        assert before == rows(engine.conn)
        engine.reindex()
        assert before == rows(engine.conn)

    @pytest.mark.parametrize("stored", [True, False], ids=["stored-then-purged", "purged-while-lagging"])
    def test_a_purged_artifact_keeps_no_passage_vectors(self, call: Caller, stored: bool) -> None:
        """Purge removes the vectors of every revision's text in its own transaction (stored rows)
        or before they are ever stored (a purge while the vectors lag), also after a replay; titles stay."""
        made = populate(call)
        engine = call.service.engine
        if stored:
            engine.catch_up_vectors()
        call.ok("artifact.purge", {"artifact_id": made["artifact_id"], "reason": "erasure"}, key="purge")

        def left() -> list[tuple[Any, ...]]:
            return engine.conn.execute("SELECT start_byte FROM artifact_vectors WHERE artifact_id = ?",
                                       (made["artifact_id"],)).fetchall()

        assert ([(None,), (None,)] if stored else []) == left()  # at once, before any catch-up
        before = caught_up(engine)
        assert [(None,), (None,)] == left()
        engine.reindex()
        assert [(None,), (None,)] == left() and before == rows(engine.conn)

    def test_a_store_opened_without_the_model_stays_empty_and_is_rebuilt_once_it_is_there(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without the model the projection writes nothing (version 0); with it, the next open rebuilds it."""
        with model_absent(monkeypatch):
            service = Service(tmp_path / "data")
            populate(Caller(service))
            assert not any(rows(service.engine.conn)[t] for t in ("artifact_vectors", "claim_vectors"))
            service.close()
        service = Service(tmp_path / "data")
        try:
            conn = service.engine.conn
            assert conn.execute("SELECT count(*) FROM claim_vectors").fetchone()[0] == 1
            assert conn.execute("SELECT version FROM projector_checkpoints WHERE name = 'vectors'").fetchone()[0] == MODEL_VERSION
        finally:
            service.close()



def embedded_elsewhere(engine: Any, job: Any) -> list[Any]:
    """What an embedding worker answers for a job's requests (the same function, here)."""
    return [embed_request(engine.vectors.model, request) for request in job.requests()]


class TestSlicesEmbeddedElsewhere:
    """A catch-up split in two (the daemon's writer): read a slice, embed it elsewhere, store it."""

    def test_a_slice_stored_from_elsewhere_leaves_the_rows_the_catch_up_leaves(self, call: Caller,
                                                                                tmp_path: Path) -> None:
        """Slices read, embedded outside the store and stored in turn leave every vector row and
        the mark as one catch-up leaves them in a store of the same writes."""
        single = Caller(Service(tmp_path / "single"))
        try:
            for caller in (call, single):
                populate(caller)
                caller.put_text("a third text\nwith two lines", title="third")
            single.service.engine.catch_up_vectors()
            expected = id_free_rows(single.service.engine.conn)
        finally:
            single.service.close()
        engine = call.service.engine
        lag = engine.vectors_lag()
        covered = 0
        while (job := engine.vectors_slice_job(2)) is not None:
            stored = engine.store_vectors_slice(job, embedded_elsewhere(engine, job))
            assert stored == job.upto - job.mark and 0 < stored <= 2
            covered += stored
        assert covered == lag and embedded_through(engine.conn) is None
        assert expected == id_free_rows(engine.conn)

    def test_a_slice_read_before_a_purge_stores_nothing(self, call: Caller) -> None:
        """A purge between a slice's read and its store refuses the store (the text it read is
        gone); the next slice reads again and keeps no passage of the purged artifact."""
        made = populate(call)
        engine = call.service.engine
        job = engine.vectors_slice_job(64)
        mark = embedded_through(engine.conn)
        call.ok("artifact.purge", {"artifact_id": made["artifact_id"], "reason": "erasure"}, key="purge")
        assert engine.store_vectors_slice(job, embedded_elsewhere(engine, job)) == 0
        assert embedded_through(engine.conn) == mark
        assert engine.conn.execute("SELECT count(*) FROM artifact_vectors").fetchone()[0] == 0
        again = engine.vectors_slice_job(64)
        assert engine.store_vectors_slice(again, embedded_elsewhere(engine, again)) > 0
        assert [(None,), (None,)] == engine.conn.execute(
            "SELECT start_byte FROM artifact_vectors WHERE artifact_id = ?", (made["artifact_id"],)).fetchall()

    def test_a_slice_read_before_another_catch_up_stores_nothing(self, call: Caller) -> None:
        """A slice whose mark another catch-up moved meanwhile is refused, so no row is stored twice."""
        populate(call)
        engine = call.service.engine
        job = engine.vectors_slice_job(64)
        expected = caught_up(engine)
        assert engine.store_vectors_slice(job, embedded_elsewhere(engine, job)) == 0
        assert expected == rows(engine.conn)

    def test_nothing_lagging_gives_no_slice(self, call: Caller) -> None:
        """A level projection has no slice to read."""
        populate(call)
        caught_up(call.service.engine)
        assert call.service.engine.vectors_slice_job(64) is None


def id_free_rows(conn: Any) -> dict[str, list[tuple[Any, ...]]]:
    """The vector rows without the random revision and artifact ids (two stores never share those)."""
    return {"artifact_vectors": conn.execute("SELECT vec_id, doc_id, start_byte, end_byte, vector "
                                             "FROM artifact_vectors ORDER BY 1").fetchall(),
            "claim_vectors": conn.execute("SELECT doc_id, vector FROM claim_vectors ORDER BY 1").fetchall(),
            "vector_state": conn.execute("SELECT * FROM vector_state ORDER BY 1").fetchall()}


class TestGroupedEmbedding:
    """Engine.group embeds a group's texts once, at its end, leaving the rows one-by-one writes leave."""

    def test_a_group_leaves_the_vectors_one_by_one_writes_would(self, call: Caller, tmp_path: Path) -> None:
        """Puts, a revision, a claim, a unit rolled back and a purge inside one group give the same
        vector rows as the surviving requests written one by one."""
        def write(caller: Caller, engine: Any, grouped: bool) -> None:
            populate(caller)
            doomed = caller.put_text("A passage about the quokka that a purge erases.", key="doomed")
            if grouped:
                try:
                    with engine.log.transaction():
                        caller.put_text("This unit is rolled back to its savepoint.", key="rolled")
                        raise RuntimeError("the unit fails after writing")
                except RuntimeError:
                    pass
            caller.ok("artifact.purge", {"artifact_id": doomed["artifact_id"], "reason": "erasure"}, key="purge")
            caller.put_text("A later note about bilbies.", key="later")

        single = Caller(Service(tmp_path / "one-by-one"))
        write(single, single.service.engine, grouped=False)
        engine = call.service.engine
        with engine.group():
            write(call, engine, grouped=True)
        engine.catch_up_vectors()
        single.service.engine.catch_up_vectors()
        grouped = id_free_rows(engine.conn)
        assert grouped == id_free_rows(single.service.engine.conn)
        assert grouped["claim_vectors"] and len(grouped["artifact_vectors"]) > 4
        before = rows(engine.conn)
        engine.reindex(["vectors"])
        assert before == rows(engine.conn)
        single.service.close()

    def test_a_failed_group_embeds_nothing(self, call: Caller) -> None:
        """When the group's block raises, no vector row is left behind."""
        engine = call.service.engine
        try:
            with engine.group():
                call.put_text("never committed echidna")
                raise RuntimeError("the group fails")
        except RuntimeError:
            pass
        assert not any(rows(engine.conn)[table] for table in ("artifact_vectors", "claim_vectors"))


class TestEmbeddingWorker:
    """A long replay embeds in a child process and stores the bytes one-by-one writes stored."""

    def many_writes(self, call: Caller) -> None:
        populate(call)
        for i in range(12):
            call.put_text(f"Note {i} about the quokka colony.\nIts second line, number {i}.", title=f"note {i}")
            call.ok("claim.assert", {"claim_type": "fact", "statement": f"The colony counted {i} quokkas",
                                     "evidence": []}, key=f"claim-{i}")
        gone = call.put_text("A body a purge erases in the middle of the log.", key="gone")
        call.ok("artifact.purge", {"artifact_id": gone["artifact_id"], "reason": "erasure"}, key="purge")
        call.put_text("Written after the purge.", key="after")

    def replay(self, engine: Any, tmp_path: Path, kill_after: int | None = None) -> tuple[Any, Any]:
        """Replay the log into a scratch build event by event; kill the child after
        ``kill_after`` batches went to it. Returns the build's rows and its vectors projector."""
        from memoree.eventlog.sqlite import read_events
        from memoree.projections import sync_projectors
        from memoree.projections.base import apply_events, bulk_mode
        from memoree.projections.beside import ScratchBuild

        with ScratchBuild(tmp_path, sync_projectors(engine.cas)) as build:
            vectors = next(p for p in build.projectors if p.name == "vectors")
            build.conn.execute("BEGIN")
            with bulk_mode(build.conn, build.projectors):
                for event in read_events(engine.conn):
                    apply_events(build.conn, build.projectors, [event])
                    if kill_after is not None and vectors.worker is not None \
                            and vectors.worker.outstanding + vectors.worker_batches >= kill_after:
                        vectors.worker.process.kill()
                        kill_after = None
            build.conn.execute("COMMIT")
            return rows(build.conn), vectors

    def test_the_worker_computes_the_same_rows(self, call: Caller, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
        """With the worker from the first batch on, in small batches, a replay stores the live rows."""
        from memoree.projections import vectors as module

        monkeypatch.setattr(module, "WORKER_AFTER_ROWS", 0)
        monkeypatch.setattr(module, "BULK_BATCH", 4)
        self.many_writes(call)
        replayed, vectors = self.replay(call.service.engine, tmp_path)
        assert vectors.worker_batches >= 5 and vectors.worker is None
        assert replayed == caught_up(call.service.engine)
        engine = call.service.engine
        before = rows(engine.conn)
        engine.reindex()
        assert before == rows(engine.conn)

    def test_a_long_catch_up_embeds_here_and_stores_a_replays_rows(
            self, call: Caller, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A catch-up of a long lag (a bulk load's) embeds in this process, whatever the worker's
        threshold, and stores exactly the replay's rows."""
        from memoree.projections import vectors as module

        monkeypatch.setattr(module, "WORKER_AFTER_ROWS", 0)
        monkeypatch.setattr(module, "BULK_BATCH", 4)
        self.many_writes(call)
        engine = call.service.engine
        engine.catch_up_vectors()
        assert engine.vectors.worker_batches == 0 and engine.vectors.worker is None
        assert self.replay(engine, tmp_path)[0] == rows(engine.conn)

    def test_a_worker_that_dies_leaves_the_same_rows(self, call: Caller, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
        """The child killed mid-replay: what it owed and everything after is embedded here."""
        from memoree.projections import vectors as module

        monkeypatch.setattr(module, "WORKER_AFTER_ROWS", 0)
        monkeypatch.setattr(module, "BULK_BATCH", 4)
        self.many_writes(call)
        replayed, vectors = self.replay(call.service.engine, tmp_path, kill_after=2)
        assert vectors.worker is None and vectors.worker_batches <= 2
        assert replayed == caught_up(call.service.engine)


def read_only(call: Caller, op: str, payload: dict[str, Any]) -> dict[str, Any]:
    """One read answered as a daemon's reader process answers it: on a read-only connection of
    its own, in one snapshot, unable to write (so unable to catch the vectors up)."""
    import json

    from memoree.daemon.reader import ReadView
    from tests.conftest import CTX

    view = ReadView(call.service.data_dir)
    document = {"v": 1, "request_id": "req_read_only", "op": op, "context": CTX, "input": payload}
    try:
        reply = call.service.reading_through(
            view, lambda: view.snapshot(lambda: call.service.handle_bytes(json.dumps(document).encode())))
    finally:
        view.close()
    envelope = json.loads(reply.body)
    assert envelope["ok"], envelope
    return envelope["result"]


def fresh_index() -> None:
    """Forget this process's in-memory vectors: the next read loads them from the table."""
    from memoree.queries import dense

    dense._INDEXES.clear()


class TestCatchingUp:
    """Reads see lagging writes through the dense channel; the catch-up stores what they saw."""

    def test_a_read_sees_a_lagging_write_through_the_dense_channel_alone(self, call: Caller) -> None:
        """A put, then at once (min_commit_seq) a question that only meaning answers: a read-only
        reader embeds the lagging events itself, and the in-process read catches up first."""
        from tests.queries.test_dense import QUESTION, seed

        engine = call.service.engine
        made = seed(call)
        head = engine.head()
        assert engine.vectors_lag() == head and not rows(engine.conn)["claim_vectors"]
        lagging = read_only(call, "memory.recall", {"query": QUESTION, "min_commit_seq": head})
        assert [made["claim"]["claim_id"]] == [c["claim_id"] for c in lagging["claims"]]
        assert engine.vectors_lag() == head  # the reader wrote nothing
        in_process = call.ok("memory.recall", {"query": QUESTION, "min_commit_seq": head})["result"]
        assert [made["claim"]["claim_id"]] == [c["claim_id"] for c in in_process["claims"]]
        assert engine.vectors_lag() == 0

    def test_the_tail_embedded_answer_equals_the_caught_up_answer(self, call: Caller) -> None:
        """Search and recall answered while every vector lags equal the answers of the caught-up
        store read from its table, and the in-memory rows are the stored rows, byte for byte."""
        from memoree.daemon.reader import ReadView
        from memoree.queries import dense
        from tests.queries.test_dense import QUESTION, seed, without_clock

        seed(call)
        populate(call)
        asks = [("search", {"query": QUESTION}), ("memory.recall", {"query": QUESTION}),
                ("search", {"query": "when do deploys leave"}), ("memory.recall", {"query": "weekly meeting day"})]
        fresh_index()
        lagging = [without_clock(read_only(call, op, payload)) for op, payload in asks]
        view = ReadView(call.service.data_dir)
        tail = dense.snapshot(view.conn)
        assert tail.tail_events == call.service.engine.head()
        call.service.engine.catch_up_vectors()
        fresh_index()
        stored = dense.snapshot(view.conn)
        assert stored.tail_events == 0 and stored.artifacts.count == tail.artifacts.count > 0
        for name in ("ids", "doc_ids", "starts", "ends", "vectors"):
            for table in ("artifacts", "claims"):
                count = getattr(stored, table).count
                assert (getattr(getattr(tail, table), name)[:count] == getattr(getattr(stored, table), name)[:count]).all()
        view.close()
        assert lagging == [without_clock(read_only(call, op, payload)) for op, payload in asks]

    def test_a_purge_while_the_vectors_lag_leaves_no_passage_to_a_read_at_once(self, call: Caller) -> None:
        """Purged while its vectors lag: a read at once embeds the emptied text (titles only),
        as the catch-up then stores."""
        from memoree.daemon.reader import ReadView
        from memoree.queries import dense

        made = populate(call)
        call.ok("artifact.purge", {"artifact_id": made["artifact_id"], "reason": "erasure"}, key="purge")
        fresh_index()
        view = ReadView(call.service.data_dir)
        index = dense.snapshot(view.conn)
        docs = [doc for (doc,) in view.conn.execute(
            "SELECT doc_id FROM artifact_search_text WHERE artifact_id = ?", (made["artifact_id"],))]
        held = index.artifacts
        starts = [int(held.starts[i]) for i in range(held.count) if int(held.doc_ids[i]) in docs]
        assert [-1, -1] == starts and index.tail_events > 0
        view.close()
        caught_up(call.service.engine)
        assert [(None,), (None,)] == call.service.engine.conn.execute(
            "SELECT start_byte FROM artifact_vectors WHERE artifact_id = ?", (made["artifact_id"],)).fetchall()

    def test_verify_compares_a_lagging_store_as_caught_up(self, call: Caller) -> None:
        """verify of a store whose vectors lag is clean (stored rows plus what the catch-up would
        add equal a replay), and so is the caught-up store; a damaged stored vector is found."""
        from memoree.admin.verify import verify

        populate(call)
        engine = call.service.engine
        assert engine.vectors_lag() and verify(engine)["ok"]
        engine.catch_up_vectors()
        assert verify(engine)["projections"]["vectors"]["ok"]
        with engine.log.transaction() as conn:
            conn.execute("UPDATE artifact_vectors SET vector = zeroblob(256) WHERE vec_id = "
                         "(SELECT min(vec_id) FROM artifact_vectors)")
        report = verify(engine)
        assert not report["ok"] and not report["projections"]["vectors"]["ok"]

    def test_doctor_and_capabilities_report_the_lag(self, call: Caller) -> None:
        """doctor and capabilities say through which commit_seq the vectors are complete and how
        many events they lag; a catch-up brings the lag to 0."""
        engine = call.service.engine
        start = engine.head()
        call.put_text("a note whose vectors lag")
        call.put_text("another one")
        for op in ("doctor", "capabilities"):
            semantic = call.ok(op, {})["result"]["semantic"]
            assert (start, 2) == (semantic["vectors_complete_through"], semantic["lag_events"])
        engine.catch_up_vectors()
        semantic = call.ok("doctor", {})["result"]["semantic"]
        assert (engine.head(), 0) == (semantic["vectors_complete_through"], semantic["lag_events"])

    def test_kill_9_between_a_put_and_its_catch_up_loses_nothing(self, tmp_path: Path) -> None:
        """A process killed (SIGKILL) after its puts and before any catch-up leaves the store
        lagging but consistent; reopening catches up to exactly a replay's rows, and meaning finds the put."""
        import json
        import os
        import signal
        import subprocess
        import sys

        from tests.queries.test_dense import QUESTION

        script = (
            "import os, signal, sys\n"
            "from memoree.service.service import Service\n"
            "from tests.conftest import Caller\n"
            "from tests.queries.test_dense import seed\n"
            "call = Caller(Service(sys.argv[1]))\n"
            "made = seed(call)\n"
            "assert call.service.engine.vectors_lag() > 0\n"
            "print(made['claim']['claim_id'], flush=True)\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
        data = tmp_path / "data"
        done = subprocess.run([sys.executable, "-c", script, str(data)], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parents[2], timeout=120,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
        assert done.returncode == -signal.SIGKILL, done.stderr
        claim_id = done.stdout.split()[0]
        service = Service(data)
        try:
            engine = service.engine
            assert engine.vectors_lag() == 0 and len(rows(engine.conn)["claim_vectors"]) == 3
            before = rows(engine.conn)
            engine.reindex()
            assert before == rows(engine.conn)
            reply = json.loads(service.handle_bytes(json.dumps({
                "v": 1, "request_id": "r", "op": "memory.recall", "input": {"query": QUESTION},
                "context": {"workspace_id": "wsp_test", "project_id": "prj_test"}}).encode()).body)
            assert [claim_id] == [c["claim_id"] for c in reply["result"]["claims"]]
        finally:
            service.close()
