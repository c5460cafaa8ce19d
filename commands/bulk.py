"""The bulk lane: a run of ``artifact.put`` requests decided one by one and written together.

Inside a bulk block (``CommandHandler.bulk``, which a ``batch`` request opens inside its group
transaction), a put whose bytes are small enough to live inline is answered as soon as it is
decided: the replay check, the pure decider, the event's position (the log head plus the puts
before it) and the result document built from the event are per request, as alone. Its bytes,
its event and its projection rows wait, and the whole run goes in at once (one statement per
table: ``ContentStore.put_inline_many``, the log's multi-row append, ``projections.base``'s
batches of new artifacts) before any other mutation runs (it may read them) and at the block's
end, so every request still sees every earlier one. The rows are the ones the puts would have
written one by one, in the same order (tests compare the stores and replay them).

A put needs no savepoint here: nothing of it is written before the run goes in, and everything
that can refuse it (validation, an idempotency conflict) does so before it joins the run. A
failure while the run goes in (a full disk) fails the whole block, never one request, because
the puts before it were already answered: the block's end raises it again, and the transaction
is rolled back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from memoree.errors import IdempotencyConflict, InternalError
from memoree.eventlog.events import Scope
from memoree.eventlog.store import NewEvent, RecordedEvent
from memoree.limits import INLINE_BLOB_BYTES
from memoree.projections.base import apply_events
from memoree.projections.idempotency import result_document

from .context import DecideContext, new_event
from .state import BlobRef

__all__ = ["PutRun", "replayed_document"]


@dataclass(frozen=True)
class _Answered:
    """A put of the run as its replay would see it: its digest, position and document."""

    request_digest: str
    commit_seq: int
    result_json: bytes  # as answered (``created`` true)


class PutRun:
    """The puts decided since the run last went in, with what their writes need."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.blobs: list[tuple[bytes, str]] = []
        self.events: list[NewEvent] = []
        self.answered: dict[str, _Answered] = {}
        self.next_seq = 0  # the position of the next put (0: read the head first)
        self.failed: BaseException | None = None
        # Keys the log did not hold when the block's requests were announced (``expect``) and
        # no mutation outside the run has written since: their puts need no replay look-up.
        self.unknown_keys: set[str] = set()

    def expect(self, keys: Sequence[str]) -> None:
        """Look up the keys of the requests to come at once, instead of one put at a time."""
        self.unknown_keys = set(keys) - self.handler.log.known_keys(keys)

    def before_other_mutation(self) -> None:
        """Another mutation is about to run: it may read the run's rows and record any key."""
        self.write()
        self.unknown_keys = set()

    @staticmethod
    def takes(op: str, prepared: Any) -> bool:
        """Whether a mutation joins the run: a put of inline-sized bytes."""
        return op == "artifact.put" and isinstance(prepared, BlobRef) and prepared.size <= INLINE_BLOB_BYTES

    def put(self, inp: Any, blob: BlobRef, scope: Scope, key: str, digest: str,
            decide: Callable[..., Any]) -> tuple[int, bytes, bool]:
        """Answer one put: ``(commit_seq, result document, replayed)``; its writes join the run."""
        self.require_intact()
        earlier = self.answered.get(key)
        if earlier is not None:  # the same key earlier in the run: a replay, or a conflict
            if earlier.request_digest != digest:
                raise IdempotencyConflict(key, details={"idempotency_key": key})
            return earlier.commit_seq, replayed_document(earlier.result_json), True
        handler = self.handler
        replay = None if key in self.unknown_keys else handler.replay(handler.log.conn, key, digest)
        if replay is not None:
            return replay.commit_seq, replay.result_json, True
        if not self.next_seq:
            self.next_seq = handler.log.head().commit_seq + 1
        ctx = DecideContext(now=handler.clock(), new_id=handler.new_id, scope=scope)
        (decision,) = decide(None, inp, blob, ctx)
        event = new_event(decision, ctx, key, digest)
        commit_seq = self.next_seq
        document = result_document(handler.log.conn, _as_recorded(event, commit_seq))
        if document is None:  # pragma: no cover - a new artifact's result is built from its event
            raise InternalError("the put's result could not be built from its event")
        self.blobs.append((blob.data, blob.blob_hash))
        self.events.append(event)
        self.answered[key] = _Answered(digest, commit_seq, document)
        self.next_seq += 1
        return commit_seq, document, False

    def write(self) -> None:
        """Put the run's bytes, events and projection rows in, in one statement per table."""
        self.require_intact()
        if not self.events:
            return
        handler = self.handler
        first = self.next_seq - len(self.events)
        try:
            handler.cas.put_inline_many(self.blobs)
            recorded = handler.log.append(self.events)
            if recorded[0].commit_seq != first:
                raise InternalError(f"the bulk run was numbered from {first} but the log appended it "
                                    f"from {recorded[0].commit_seq}")
            apply_events(handler.log.conn, handler.projectors, recorded)
        except BaseException as exc:
            self.failed = exc
            raise
        finally:
            handler.cas.forget_batch()
        self.blobs, self.events, self.answered, self.next_seq = [], [], {}, 0

    def require_intact(self) -> None:
        """Refuse to go on once the run failed to go in: the block fails as a whole."""
        if self.failed is not None:
            raise InternalError("the batch could not be written; nothing of it was stored",
                                retryable=True) from self.failed


def _as_recorded(event: NewEvent, commit_seq: int) -> RecordedEvent:
    """The event as it will be recorded, less its stored bytes and chain hashes (which a result
    document does not read)."""
    return RecordedEvent(
        commit_seq=commit_seq, event_id=event.event_id, type=event.type, stream_id=event.stream_id,
        stream_version=event.stream_version, at=event.at, scope=event.scope,
        idempotency_key=event.idempotency_key, request_digest=event.request_digest,
        payload=event.payload, data=b"", prev_hash=b"", hash=b"",
    )


def replayed_document(result_json: bytes) -> bytes:
    """A recorded result document as a replay answers it (``created`` false)."""
    document = msgspec.json.decode(result_json)
    document["created"] = False
    return msgspec.json.encode(document)
