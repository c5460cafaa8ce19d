"""The narrow event-store interface every backend implements, and the types it speaks.

A store appends events (assigning the dense ``commit_seq``, the chain hash and checking the
per-stream version), reads them back in order from a position, and reports its head. Appends
happen inside the store's write transaction, which the command handler opens, so a mutation's
event, its projections and its idempotency record commit or roll back together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

import msgspec

from memoree.errors import IntegrityError, InternalError, RevisionConflict

from .codec import chain_hash, decode_envelope
from .events import Scope

__all__ = [
    "ChainBreak",
    "EventSink",
    "EventStore",
    "IdempotencyHit",
    "LogHead",
    "NewEvent",
    "RawEvent",
    "RecordedEvent",
    "StreamVersionConflict",
    "first_chain_break",
    "paged_raw_events",
]


class NewEvent(msgspec.Struct, frozen=True, kw_only=True):
    """An event ready to append: the handler has minted its id and time."""

    type: str
    stream_id: str
    stream_version: int
    payload: msgspec.Struct
    event_id: str
    at: str
    scope: Scope | None = None
    idempotency_key: str | None = None
    request_digest: str | None = None


class RecordedEvent(msgspec.Struct, frozen=True, kw_only=True):
    """An appended event: its position, typed payload, stored bytes and chain hashes."""

    commit_seq: int
    event_id: str
    type: str
    stream_id: str
    stream_version: int
    at: str
    scope: Scope | None
    idempotency_key: str | None
    request_digest: str | None
    payload: Any
    data: bytes
    prev_hash: bytes
    hash: bytes


class RawEvent(msgspec.Struct, frozen=True):
    """One stored row as the log holds it, for verification and export."""

    commit_seq: int
    type: str
    data: bytes
    prev_hash: bytes
    hash: bytes


class LogHead(msgspec.Struct, frozen=True):
    commit_seq: int
    hash: bytes


class IdempotencyHit(msgspec.Struct, frozen=True):
    commit_seq: int
    request_digest: str
    type: str


class ChainBreak(msgspec.Struct, frozen=True):
    """The first position where the stored log stops verifying, and why."""

    commit_seq: int
    problem: str


class StreamVersionConflict(RevisionConflict):
    """Another writer appended to the stream first (optimistic concurrency)."""


class StaleDecision(InternalError):
    """A shared log moved on between this host's catch-up and its append: the decision was made
    against projections that miss events, so it is discarded and made again after catching up
    (``CommandHandler`` retries; it reaches a caller only when retries run out)."""

    retryable = True


EventSink = Callable[[Any, Sequence["RecordedEvent"]], None]
"""Applies recorded events to a host's projections inside the caller's transaction."""


@runtime_checkable
class EventStore(Protocol):
    """What the command handler and the engine need of a log: every backend the engine opens
    (``SqliteEventStore``, ``SharedLog``) implements it, and the contract suite checks it."""

    def transaction(self, *, decides_on_input: bool = False) -> AbstractContextManager[Any]: ...

    @property
    def in_transaction(self) -> bool: ...

    def append(self, events: Sequence[NewEvent]) -> list[RecordedEvent]: ...

    def read(self, after: int = 0, limit: int | None = None) -> Iterator[RecordedEvent]: ...

    def read_raw(self, after: int = 0, limit: int | None = None) -> Iterator[RawEvent]: ...

    def head(self) -> LogHead: ...

    def find_idempotency_key(self, key: str) -> IdempotencyHit | None: ...

    def record_noop(self, key: str, request_digest: str, operation: str, commit_seq: int,
                    result_json: bytes, at: str) -> None: ...

    def find_noop(self, key: str) -> tuple[str, str, int, bytes] | None: ...

    def stream_version(self, stream_id: str) -> int: ...


def paged_raw_events(fetch_page: Callable[[int, int], list[tuple[Any, ...]]], after: int,
                     limit: int | None, page: int = 2000) -> Iterator[RawEvent]:
    """Stored rows after ``after`` in order, ``page`` at a time from ``fetch_page(after, take)``
    (rows of commit_seq, type, data, prev_hash, hash), at most ``limit`` of them."""
    remaining = limit if limit is not None else -1
    while remaining:
        take = page if remaining < 0 else min(page, remaining)
        rows = fetch_page(after, take)
        for seq, type_, data, prev, digest in rows:
            yield RawEvent(seq, type_, bytes(data), bytes(prev), bytes(digest))
        if len(rows) < take:
            return
        after = rows[-1][0]
        if remaining > 0:
            remaining -= len(rows)


def first_chain_break(rows: Iterator[RawEvent], *, start_seq: int = 1,
                      start_hash: bytes = bytes(32)) -> ChainBreak | None:
    """Walk stored rows and return the first break in density, hashes or envelope, if any."""
    expected_seq, prev = start_seq, start_hash
    for row in rows:
        if row.commit_seq != expected_seq:
            return ChainBreak(expected_seq, f"commit_seq gap: expected {expected_seq}, found {row.commit_seq}")
        if row.prev_hash != prev:
            return ChainBreak(row.commit_seq, "prev_hash does not match the previous event's hash")
        if chain_hash(prev, row.data) != row.hash:
            return ChainBreak(row.commit_seq, "hash does not match the stored bytes")
        try:
            envelope = decode_envelope(row.data)
        except msgspec.DecodeError:
            return ChainBreak(row.commit_seq, "stored bytes do not decode as an event")
        if envelope.commit_seq != row.commit_seq or envelope.type != row.type:
            return ChainBreak(row.commit_seq, "stored bytes name another position or type")
        prev = row.hash
        expected_seq += 1
    return None


def raise_on_break(brk: ChainBreak | None) -> None:
    if brk is not None:
        raise IntegrityError(f"event log breaks at commit_seq {brk.commit_seq}: {brk.problem}",
                             details={"commit_seq": brk.commit_seq, "problem": brk.problem})
