"""``batch``: several mutations in one request and one transaction, each its own event.

Every item is an ordinary mutation (``artifact.put``, ``claim.assert``, ...) validated and run
exactly as it would be alone, with the batch's context. Its idempotency key is the item's own or
``<batch key>#<index>``, and its fingerprint covers its op and input, so retrying the same batch
replays every item (``created: false``) and reusing the key for different items is
IDEMPOTENCY_CONFLICT. All or nothing: the first item that fails rolls the whole batch back and
the error names that item (``details.item``, ``details.op``); nothing was written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from memoree import limits
from memoree.errors import InvalidRequest, MemoreeError
from memoree.inputs import BatchInput
from memoree.protocol.envelope import Request, namespaced_key, request_fingerprint
from memoree.protocol.results import BatchItemResult, BatchResult

__all__ = ["run_batch"]


def run_batch(engine: Any, request: Request, inp: BatchInput,
              decode_input: Callable[[Any, msgspec.Raw], Any]) -> tuple[BatchResult, int]:
    """Run the items in one transaction; the result and the commit_seq the envelope carries.

    ``decode_input`` is the service's own input decoder, so an item is validated exactly as the
    same request alone would be.
    """
    from memoree.protocol.ops import OPS

    if not 1 <= len(inp.items) <= limits.MAX_BATCH_ITEMS:
        raise InvalidRequest(f"batch items must number 1 to {limits.MAX_BATCH_ITEMS}")
    assert request.context is not None and request.idempotency_key is not None
    scope = request.context.scope()
    results: list[BatchItemResult] = []
    # Inside a daemon group commit the batch is one savepoint of the group's transaction (a
    # nested group would index the group's text twice); alone it is its own group.
    nested = engine.log.in_transaction
    with engine.log.transaction() if nested else engine.group():
        for index, item in enumerate(inp.items):
            key = item.idempotency_key or f"{request.idempotency_key}#{index}"
            raw = msgspec.json.encode(item.input)
            item_request = Request(v=request.v, request_id=request.request_id, op=item.op,
                                   idempotency_key=key, context=request.context, input=msgspec.Raw(raw))
            try:
                if not key.strip() or len(key.encode("utf-8")) > limits.MAX_IDEMPOTENCY_KEY_BYTES:
                    raise InvalidRequest(f"idempotency_key must be 1 to {limits.MAX_IDEMPOTENCY_KEY_BYTES} bytes")
                typed = decode_input(OPS[item.op], msgspec.Raw(raw))
                outcome = engine.handler.execute(
                    item.op, typed, scope=scope, idempotency_key=namespaced_key(scope, key),
                    request_digest=request_fingerprint(item_request))
            except MemoreeError as exc:
                exc.message = f"{exc.message} (batch item {index}, {item.op})"
                exc.details = {**(exc.details or {}), "item": index, "op": item.op}
                raise
            results.append(BatchItemResult(op=item.op, commit_seq=outcome.commit_seq,
                                           result=msgspec.json.decode(outcome.result_json)))
    if not nested:
        engine.handler.run_deferred()
    created = any(r.result.get("created") for r in results)
    commit_seq = max(r.commit_seq for r in results)
    return BatchResult(results=results, commit_seq=commit_seq, created=created), commit_seq
