"""The ``batch`` op: many mutation requests in one write transaction, for bulk loaders.

Each request in a batch is a complete protocol request (its own context, idempotency key and
request id) and is answered exactly as if it came alone: the same validation, the same deciders,
the same idempotent replay, in its own savepoint, so a refused request takes nothing of the others
with it. The batch commits once, with its text indexed once (``Engine.group``), which is what makes
an import of thousands of records cost one fsync per batch instead of one per record, and a
re-import of an unchanged file cost one round trip per batch of replays. Runs of small artifact
puts are decided one by one and written together, one statement per table (``Engine.bulk``,
``commands.bulk``): they need no savepoint, since nothing of them is written before they are
decided. Only mutations may be
batched. A store-wide failure (a full disk) fails the whole batch: nothing of it is written.
"""

from __future__ import annotations

from typing import Any

import msgspec

from memoree import limits
from memoree.errors import InvalidRequest, MemoreeError
from memoree.eventlog.events import Scope
from memoree.protocol.envelope import namespaced_key

__all__ = ["run"]


class _Head(msgspec.Struct):
    """What a batch reads of each request before answering it: its op and, loosely, its key."""

    op: str = ""
    idempotency_key: Any = None
    context: Any = None


_head_decoder = msgspec.json.Decoder(_Head)


def run(service: Any, inp: Any) -> dict[str, Any]:
    """Answer every request of the batch in one transaction; ``replies`` keeps their order."""
    if not 1 <= len(inp.requests) <= limits.MAX_BATCH_REQUESTS:
        raise InvalidRequest(f"a batch holds 1 to {limits.MAX_BATCH_REQUESTS} requests")
    heads = [_require_mutation(service, index, bytes(raw)) for index, raw in enumerate(inp.requests)]
    engine = service.engine
    try:
        with engine.bulk():
            engine.handler.expect_keys([key for key in map(_namespaced_key, heads) if key is not None])
            # The batch frame was checked for repeated keys as a whole, these requests with it.
            replies = [msgspec.Raw(service.handle_bytes(bytes(raw), fallback_request_id="req_batch",
                                                        keys_checked=True).body)
                       for raw in inp.requests]
    except MemoreeError:
        engine.handler.drop_deferred()
        raise
    engine.handler.run_deferred()
    return {"replies": replies}


def _require_mutation(service: Any, index: int, raw: bytes) -> _Head:
    try:
        head = _head_decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        raise InvalidRequest(f"batch request {index} is not a request object") from None
    if not service.is_mutation(head.op):
        raise InvalidRequest(f"batch request {index}: only mutations may be batched, not {head.op!r}")
    return head


def _namespaced_key(head: _Head) -> str | None:
    """The key a request will be looked up under, where its fields look sane (the request's own
    validation still runs: this only spares well-formed puts a look-up each)."""
    ctx, key = head.context, head.idempotency_key
    if not isinstance(key, str) or not isinstance(ctx, dict):
        return None
    workspace, project, task = ctx.get("workspace_id"), ctx.get("project_id"), ctx.get("task_id")
    if not isinstance(workspace, str) or not isinstance(project, str) or not isinstance(task, (str, type(None))):
        return None
    return namespaced_key(Scope(workspace, project, task), key)
