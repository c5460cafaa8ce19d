"""When the daemon's writer catches the vectors projection up (``Engine.catch_up_vectors``,
``projections.vectors``): the pacing between requests, and a slice's own transaction.

The writer catches up once no request has arrived for ``CATCH_UP_IDLE_S`` (then slice after slice
while none arrives), and also after requests whenever the lag is ``CATCH_UP_LAG_EVENTS`` events or
more or has lasted ``CATCH_UP_LAG_S`` (a steady stream never leaves it growing). A slice embeds at
most ``CATCH_UP_SLICE_EVENTS`` events, so a request arriving meanwhile waits for one short slice at
most. Reads meanwhile embed the lagging events in memory (``queries.dense``), each reader process
for itself: while reads that may use the dense channel flow (one was routed within
``CATCH_UP_LAG_S``), the bound falls to ``CATCH_UP_LAG_EVENTS_READING``, so an event is embedded
once rather than once per reader. A failure never takes the writer down: it is logged, and the
next try waits ``CATCH_UP_RETRY_S``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from memoree.log import logger
from memoree.protocol.ops import OPS

__all__ = ["DENSE_READS", "VectorsCatchUp"]

CATCH_UP_IDLE_S = 0.05
CATCH_UP_LAG_EVENTS = 512
CATCH_UP_LAG_EVENTS_READING = 64
CATCH_UP_LAG_S = 2.0
CATCH_UP_SLICE_EVENTS = 64  # ~5 ms batched
CATCH_UP_RETRY_S = 30.0  # after a catch-up failed (a full disk, a damaged log): try again this late
# The reads that may use the dense channel: the ops whose input has a ``semantic`` switch.
DENSE_READS = frozenset(name for name, spec in OPS.items() if "semantic" in spec.input_type.__struct_fields__)


class VectorsCatchUp:
    """The writer's catch-up state: whether the vectors (presumably) lag, a guess at by how much,
    and when a read that may embed the lag was last routed. ``durability`` gives the writer's
    current durability (its rows are synced like any answer's)."""

    def __init__(self, service: Any, durability: Callable[[], Any]) -> None:
        self.service, self.durability = service, durability
        self.lagging_since: float | None = None  # monotonic time the vectors began to lag (presumed)
        self.lag_estimate = 0  # requests since the lag was last looked up: a guess at the events it grew by
        self.retry_at = 0.0  # no catch-up before this monotonic time (after a failure)
        self.dense_read_at = -CATCH_UP_LAG_S  # monotonic time a read that may embed the lag was last routed
        self.catch_ups = 0

    def saw_dense_read(self) -> None:
        self.dense_read_at = time.monotonic()

    def lagging(self) -> bool:
        """Whether an idle writer should look for work (a lag presumed, no failure waiting)."""
        return self.lagging_since is not None and time.monotonic() >= self.retry_at

    def after_requests(self, requests: int) -> None:
        """After requests: presume the vectors lag (the idle catch-up looks), and catch up one
        slice when the lag passed its bound in events or in time, whether or not more requests
        wait. The lag (two queries) is looked up only when the requests since the last look could
        have grown it to the bound (most add one event) or it may have lasted too long."""
        now = time.monotonic()
        if self.lagging_since is None:
            self.lagging_since = now
        self.lag_estimate += requests
        bound = CATCH_UP_LAG_EVENTS_READING if now - self.dense_read_at < CATCH_UP_LAG_S else CATCH_UP_LAG_EVENTS
        if now < self.retry_at or (self.lag_estimate < bound and now - self.lagging_since < CATCH_UP_LAG_S):
            return
        try:
            lag = self.service.engine.vectors_lag()
        except BaseException as exc:  # noqa: BLE001 - the catch-up must never take the writer down
            logger().error("vectors_lag_failed", exc_info=exc)
            return
        self.lag_estimate = lag
        if not lag:
            self.lagging_since = None
        elif lag >= bound or now - self.lagging_since >= CATCH_UP_LAG_S:
            self.slice(known_lag=lag)

    def slice(self, known_lag: int | None = None) -> bool:
        """One slice of the catch-up; the lag clock restarts after each slice. Returns whether
        more is left to do now (a failure waits ``CATCH_UP_RETRY_S``). A lag that was only
        presumed (``after_requests``) and is found level ends here: nothing written, nothing
        synced. ``known_lag`` is a lag the caller has just looked up (not asked again)."""
        try:
            if not (known_lag if known_lag is not None else self.service.engine.vectors_lag()):
                self.lag_estimate, self.lagging_since = 0, None
                return False
        except BaseException as exc:  # noqa: BLE001 - the catch-up must never take the writer down
            logger().error("vectors_lag_failed", exc_info=exc)
            self.lagging_since = self.retry_at = time.monotonic() + CATCH_UP_RETRY_S
            return False
        durability = self.durability()
        try:
            with durability.writing():
                self.service.engine.catch_up_vectors(CATCH_UP_SLICE_EVENTS)
            self.catch_ups += 1
            self.lag_estimate = self.service.engine.vectors_lag()
            self.lagging_since = time.monotonic() if self.lag_estimate else None
        except BaseException as exc:  # noqa: BLE001 - reads embed the lag in memory meanwhile
            logger().error("vectors_catch_up_failed", exc_info=exc)
            self.lagging_since = self.retry_at = time.monotonic() + CATCH_UP_RETRY_S
            return False
        finally:
            durability.after_commit([])  # its rows are synced like any answer's
        return self.lagging_since is not None
