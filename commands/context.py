"""What a decider may know about the world (the instant, an id minter, the ambient scope), and
what it answers (``Decision``), with the event a decision becomes (``new_event``).

Deciders never read the clock or mint ids themselves; the handler passes them in here, so a
decider is a pure function and tests can fix both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from memoree.eventlog.events import Scope, event_type_name
from memoree.eventlog.store import NewEvent

__all__ = ["Decision", "DecideContext", "new_event"]


@dataclass(frozen=True)
class DecideContext:
    now: str
    new_id: Callable[[str], str]
    scope: Scope


class Decision(msgspec.Struct, frozen=True):
    """One event a decider wants appended: its stream, the stream version it claims, its payload."""

    stream_id: str
    stream_version: int
    payload: msgspec.Struct


def new_event(decision: Decision, ctx: DecideContext, idempotency_key: str, request_digest: str) -> NewEvent:
    """The event ``decision`` appends, at ``ctx``'s instant and scope, with a fresh event id."""
    return NewEvent(type=event_type_name(decision.payload), stream_id=decision.stream_id,
                    stream_version=decision.stream_version, payload=decision.payload,
                    event_id=ctx.new_id("evt"), at=ctx.now, scope=ctx.scope,
                    idempotency_key=idempotency_key, request_digest=request_digest)
