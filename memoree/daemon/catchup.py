"""When the daemon's writer catches the vectors projection up (``Engine.catch_up_vectors``,
``projections.vectors``): the pacing between requests, where a slice is embedded, and its own
transaction.

The writer catches up once no request has arrived for ``CATCH_UP_IDLE_S`` (then slice after slice
while none arrives), and also after requests whenever the lag is ``CATCH_UP_LAG_EVENTS`` events or
more or has lasted ``CATCH_UP_LAG_S`` (a steady stream never leaves it growing). A slice embeds at
most ``CATCH_UP_SLICE_EVENTS`` events, so a request arriving meanwhile waits for one short slice at
most. Reads meanwhile embed the lagging events in memory (``queries.dense``), each reader process
for itself: while reads that may use the dense channel flow (one was routed within
``CATCH_UP_LAG_S``), the bound falls to ``CATCH_UP_LAG_EVENTS_READING``, so an event is embedded
once rather than once per reader. A failure never takes the writer down: it is logged, and the
next try waits ``CATCH_UP_RETRY_S``.

The embedding itself (most of a slice's cost: tokenizing and summing token rows, ~0.2 ms of CPU
per 1 KiB text) runs in an embedding worker process (``projections.embed_worker``), not on the
writer thread: the writer reads the slice's texts (``Engine.vectors_slice_job``), hands them out
and goes on serving requests; the worker's reply wakes it (``wake``) and it stores the rows
(``Engine.store_vectors_slice``, refused when a purge or another catch-up moved the projection
meanwhile: the next slice reads again). A thread would not do: the tokenizer's Python holds the
interpreter lock, and the writer would wait for it after every SQLite call. One slice is out at a
time. The worker starts with the first slice and stops after ``WORKER_IDLE_S`` without one (its
memory is a reader process's). Where it cannot start or fails, the writer embeds on its own
thread, as before, for the rest of the daemon's life.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memoree.log import logger
from memoree.protocol.ops import OPS

if TYPE_CHECKING:
    from memoree.projections.embed_worker import EmbeddingWorker
    from memoree.projections.vectors import SliceJob

__all__ = ["DENSE_READS", "VectorsCatchUp"]

CATCH_UP_IDLE_S = 0.05
CATCH_UP_LAG_EVENTS = 512
CATCH_UP_LAG_EVENTS_READING = 64
CATCH_UP_LAG_S = 2.0
CATCH_UP_SLICE_EVENTS = 64  # ~5 ms batched
CATCH_UP_RETRY_S = 30.0  # after a catch-up failed (a full disk, a damaged log): try again this late
WORKER_IDLE_S = 60.0  # the embedding worker (~120 MB) stops after this long without a slice
WORKER_OVERDUE_S = 30.0  # a slice the worker has not answered this long is embedded by the writer
# The reads that may use the dense channel: the ops whose input has a ``semantic`` switch.
DENSE_READS = frozenset(name for name, spec in OPS.items() if "semantic" in spec.input_type.__struct_fields__)


class VectorsCatchUp:
    """The writer's catch-up state: whether the vectors (presumably) lag, a guess at by how much,
    when a read that may embed the lag was last routed, and the slice out being embedded.
    ``durability`` gives the writer's current durability (its rows are synced like any answer's);
    ``wake``, called from another thread, tells the writer that the embedding worker answered
    (without it, the writer embeds every slice itself)."""

    def __init__(self, service: Any, durability: Callable[[], Any], wake: Callable[[], None] | None = None) -> None:
        self.service, self.durability, self.wake = service, durability, wake
        self.lagging_since: float | None = None  # monotonic time the vectors began to lag (presumed)
        self.lag_estimate = 0  # requests since the lag was last looked up: a guess at the events it grew by
        self.retry_at = 0.0  # no catch-up before this monotonic time (after a failure)
        self.dense_read_at = -CATCH_UP_LAG_S  # monotonic time a read that may embed the lag was last routed
        self.catch_ups = 0
        self.worker: EmbeddingWorker | None = None
        self.embed_here = wake is None  # set for good when the worker fails
        self.job: SliceJob | None = None  # the slice out being embedded
        self.replies: list[tuple[Any, bytes]] = []
        self.handed_out = 0  # slices the worker embedded and the writer stored (tests, benches)
        self.requests_at = -CATCH_UP_IDLE_S  # monotonic time requests were last served
        self.worker_used_at = 0.0  # monotonic time a slice was last handed to the worker

    def saw_dense_read(self) -> None:
        self.dense_read_at = time.monotonic()

    def lagging(self) -> bool:
        """Whether an idle writer should look for work (a lag presumed, no failure waiting, no
        slice out: its reply wakes the writer)."""
        return self.lagging_since is not None and self.job is None and time.monotonic() >= self.retry_at

    def idle(self) -> bool:
        """Whether no request came for ``CATCH_UP_IDLE_S`` (the idle catch-up's own rule)."""
        return time.monotonic() - self.requests_at >= CATCH_UP_IDLE_S

    def after_requests(self, requests: int) -> None:
        """After requests: presume the vectors lag (the idle catch-up looks), and catch up one
        slice when the lag passed its bound in events or in time, whether or not more requests
        wait. The lag (two queries) is looked up only when the requests since the last look could
        have grown it to the bound (most add one event) or it may have lasted too long."""
        if self.job is not None:
            self.tend_worker()
        now = self.requests_at = time.monotonic()
        if self.lagging_since is None:
            self.lagging_since = now
        self.lag_estimate += requests
        bound = CATCH_UP_LAG_EVENTS_READING if now - self.dense_read_at < CATCH_UP_LAG_S else CATCH_UP_LAG_EVENTS
        if (self.job is not None or now < self.retry_at
                or (self.lag_estimate < bound and now - self.lagging_since < CATCH_UP_LAG_S)):
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
        more is left to do now (a failure waits ``CATCH_UP_RETRY_S``; a slice handed to the
        worker is done when its reply wakes the writer: ``collect``). A lag that was only
        presumed (``after_requests``) and is found level ends here: nothing written, nothing
        synced. ``known_lag`` is a lag the caller has just looked up (not asked again)."""
        if self.job is not None:
            return False
        try:
            if not (known_lag if known_lag is not None else self.service.engine.vectors_lag()):
                self.lag_estimate, self.lagging_since = 0, None
                return False
        except BaseException as exc:  # noqa: BLE001 - the catch-up must never take the writer down
            logger().error("vectors_lag_failed", exc_info=exc)
            self.lagging_since = self.retry_at = time.monotonic() + CATCH_UP_RETRY_S
            return False
        try:
            if self._hand_out():
                return False
        except BaseException as exc:  # noqa: BLE001 - reads embed the lag in memory meanwhile
            self._failed(exc)
            return False
        return self._write(lambda: self.service.engine.catch_up_vectors(CATCH_UP_SLICE_EVENTS))

    def collect(self) -> bool:
        """The worker answered (or failed): take its replies and, once the slice's are all in,
        store the rows (a failed worker's slice is embedded here). Returns whether more is left
        to do now."""
        job = self.job
        if job is None:
            return self.lagging()
        requests = job.requests()
        if self.worker is not None:
            try:
                while len(self.replies) < len(requests):
                    reply = self.worker.take(block=False)
                    if reply is None:
                        return False  # more to come: its reply wakes the writer again
                    self.replies.append(reply)
            except BaseException as exc:  # noqa: BLE001 - the worker failed: embed the slice here
                logger().warning("embedding_worker_failed", detail=str(exc))
                self._embed_here_from_now_on()
        replies, self.replies, self.job = self.replies, [], None
        if len(replies) == len(requests):
            self.handed_out += 1
        else:
            from memoree.projections.embed_worker import embed_request

            model = self.service.engine.vectors.model
            replies = [embed_request(model, request) for request in requests]
        return self._write(lambda: self.service.engine.store_vectors_slice(job, replies))

    def tend_worker(self) -> None:
        """On the idle writer: stop the worker when no slice went to it for ``WORKER_IDLE_S``
        (the next slice starts another), and give up on one that has owed a slice for
        ``WORKER_OVERDUE_S`` (the writer embeds it)."""
        if self.worker is None:
            return
        waited = time.monotonic() - self.worker_used_at
        if self.job is None and waited >= WORKER_IDLE_S:
            self.close()
        elif self.job is not None and waited >= WORKER_OVERDUE_S:
            logger().warning("embedding_worker_failed", detail=f"no reply in {waited:.0f} s")
            self._embed_here_from_now_on()
            self.collect()

    def close(self) -> None:
        """Stop the worker (a slice still out is dropped: the engine's close catches up)."""
        self.job, self.replies = None, []
        if self.worker is not None:
            worker, self.worker = self.worker, None
            worker.close()

    def _hand_out(self) -> bool:
        """Read the next slice and hand its texts to the worker; whether it was handed out (or,
        having no text to embed, stored at once). False: embed it here."""
        if self.embed_here or (self.worker is None and not self._start_worker()):
            return False
        job = self.service.engine.vectors_slice_job(CATCH_UP_SLICE_EVENTS)
        if job is None:
            return False
        requests = job.requests()
        if not requests:  # only purges or texts without vectors: nothing to embed
            self._write(lambda: self.service.engine.store_vectors_slice(job, []))
            return True
        self.job, self.replies, self.worker_used_at = job, [], time.monotonic()
        try:
            # A failure the worker reported while no slice was out woke nobody: find it now.
            self.worker.take(block=False)  # type: ignore[union-attr]
            for request in requests:
                self.worker.submit(request)  # type: ignore[union-attr]
        except BaseException as exc:  # noqa: BLE001 - embedded here instead (collect, now)
            logger().warning("embedding_worker_failed", detail=str(exc))
            self._embed_here_from_now_on()
            self.collect()
        return True

    def _start_worker(self) -> bool:
        from memoree.projections.embed_worker import EmbeddingWorker, WorkerFailed

        model = getattr(self.service.engine.vectors, "model", None)
        if model is None:
            self.embed_here = True
            return False
        try:
            self.worker = EmbeddingWorker(model, on_reply=self.wake)
        except WorkerFailed as exc:
            logger().warning("embedding_worker_failed", detail=str(exc))
            self.embed_here = True
            return False
        return True

    def _embed_here_from_now_on(self) -> None:
        """Give the worker up for good: killed at once (a stopped child would hold the writer in
        a patient close), the writer embeds from now on."""
        self.embed_here = True
        if self.worker is not None:
            worker, self.worker = self.worker, None
            try:
                worker.close(patience=0)
            except OSError:
                pass

    def _write(self, store: Callable[[], int]) -> bool:
        """Run a slice's write transaction and look the lag up after it; whether more lags."""
        durability = self.durability()
        try:
            with durability.writing():
                store()
            self.catch_ups += 1
            self.lag_estimate = self.service.engine.vectors_lag()
            self.lagging_since = time.monotonic() if self.lag_estimate else None
        except BaseException as exc:  # noqa: BLE001 - reads embed the lag in memory meanwhile
            self._failed(exc)
            return False
        finally:
            durability.after_commit([])  # its rows are synced like any answer's
        return self.lagging_since is not None

    def _failed(self, exc: BaseException) -> None:
        logger().error("vectors_catch_up_failed", exc_info=exc)
        self.lagging_since = self.retry_at = time.monotonic() + CATCH_UP_RETRY_S
