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

__all__ = ["run"]


class _OpOnly(msgspec.Struct):
    op: str = ""


_op_decoder = msgspec.json.Decoder(_OpOnly)


def run(service: Any, inp: Any) -> dict[str, Any]:
    """Answer every request of the batch in one transaction; ``replies`` keeps their order."""
    if not 1 <= len(inp.requests) <= limits.MAX_BATCH_REQUESTS:
        raise InvalidRequest(f"a batch holds 1 to {limits.MAX_BATCH_REQUESTS} requests")
    for index, raw in enumerate(inp.requests):
        _require_mutation(service, index, bytes(raw))
    engine = service.engine
    try:
        with engine.bulk():
            # The batch frame was checked for repeated keys as a whole, these requests with it.
            replies = [msgspec.Raw(service.handle_bytes(bytes(raw), fallback_request_id="req_batch",
                                                        keys_checked=True).body)
                       for raw in inp.requests]
    except MemoreeError:
        engine.handler.drop_deferred()
        raise
    engine.handler.run_deferred()
    return {"replies": replies}


def _require_mutation(service: Any, index: int, raw: bytes) -> None:
    try:
        op = _op_decoder.decode(raw).op
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        raise InvalidRequest(f"batch request {index} is not a request object") from None
    if not service.is_mutation(op):
        raise InvalidRequest(f"batch request {index}: only mutations may be batched, not {op!r}")
