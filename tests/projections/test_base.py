"""The projection runner advances every checkpoint with the rows it covers and refuses gaps."""

from __future__ import annotations

from typing import Any

import pytest

from memoree.errors import IntegrityError
from memoree.eventlog.events import KeyEpochStarted
from memoree.eventlog.store import NewEvent
from tests.conftest import Caller


def positions(conn: Any) -> set[int]:
    return {row[0] for row in conn.execute("SELECT position FROM projector_checkpoints")}


def unprojected_event(engine: Any) -> None:
    """An event appended to the log without applying it to any projection."""
    engine.log.append([NewEvent(type="key.epoch_started", stream_id="test-stream", stream_version=1,
                                payload=KeyEpochStarted(epoch=1, public_key="x"), event_id="evt_test",
                                at="2026-01-01T00:00:00Z")])


class TestCheckpoints:
    def test_a_group_moves_every_checkpoint_to_its_last_event(self, call: Caller) -> None:
        """After a group of puts every checkpoint stands at the log's head, as after single puts;
        a request rolled back at the group's end leaves them at the last one that stayed."""
        engine = call.service.engine
        call.put_text("before the group")
        with engine.group():
            for i in range(3):
                call.put_text(f"grouped {i}")
        assert positions(engine.conn) == {engine.head()}
        with engine.group():
            call.put_text("stays")
            try:
                with engine.log.transaction():
                    call.put_text("rolled back")
                    raise RuntimeError("this unit fails after writing")
            except RuntimeError:
                pass
        assert positions(engine.conn) == {engine.head()}
        call.put_text("after the groups")
        assert positions(engine.conn) == {engine.head()}

    def test_checkpoints_moved_under_a_group_fail_it(self, call: Caller) -> None:
        """Checkpoints that no longer stand where the group found them are a gap: the group
        fails and commits nothing."""
        engine = call.service.engine
        call.put_text("first")
        head = engine.head()
        with pytest.raises(IntegrityError):
            with engine.group() as conn:
                call.put_text("in the group")
                conn.execute("UPDATE projector_checkpoints SET position = position - 1")
        assert (engine.head(), positions(engine.conn)) == (head, {head})

    def test_an_event_skipped_inside_a_group_is_refused(self, call: Caller) -> None:
        """A position appended but never applied, followed by a mutation in the same group, is
        refused at that mutation, as it is in a plain transaction."""
        engine = call.service.engine
        call.put_text("first")
        for grouped in (False, True):
            head = engine.head()
            with pytest.raises(RuntimeError):
                with engine.group() if grouped else engine.log.transaction():
                    unprojected_event(engine)
                    reply = call("artifact.put", {"kind": "note", "title": "t",
                                                  "content": {"type": "text", "data": "after the gap"}},
                                 key=f"gap-{grouped}")
                    assert reply["error"]["code"] == "INTEGRITY_ERROR", reply
                    raise RuntimeError("roll the unprojected event back")
            assert (engine.head(), positions(engine.conn)) == (head, {head})


class TestBatches:
    def test_new_artifacts_applied_as_one_batch_leave_the_rows_one_by_one_application_leaves(
            self, call: Caller) -> None:
        """Replaying a log of new artifacts into fresh projections in one ``apply_events`` call
        (projector by projector, through ``apply_many``, indexing now) leaves every table, the
        vocabulary and the index answers as the puts one by one left them."""
        from memoree.projections.base import BATCHABLE_TYPES, apply_events, reset
        from tests.commands.test_bulk import tables
        from tests.projections.test_fts import index_answers, vocabulary

        for i in range(9):
            call.put_text(f"note {i}: wombats and quokkas, café {i}" if i % 2 else f"plain words {i} " * 40,
                          context={"workspace_id": "wsp_test", "project_id": f"prj_{i % 3}"})
        engine = call.service.engine
        engine.catch_up_vectors()
        before = (tables(call.service), vocabulary(engine.conn), index_answers(engine.conn))
        events = list(engine.log.read())
        assert len(events) == 9 and {event.type for event in events} <= BATCHABLE_TYPES
        with engine.log.transaction() as conn:
            for projector in engine.projectors:
                reset(conn, projector)
            apply_events(conn, engine.projectors, events)
        engine.catch_up_vectors()
        assert (tables(call.service), vocabulary(engine.conn), index_answers(engine.conn)) == before
