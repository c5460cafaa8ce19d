"""What a decider may know about the world: the instant, an id minter, and the ambient scope.

Deciders never read the clock or mint ids themselves; the handler passes them in here, so a
decider is a pure function and tests can fix both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from memoree.eventlog.events import Scope

__all__ = ["Decision", "DecideContext"]


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
