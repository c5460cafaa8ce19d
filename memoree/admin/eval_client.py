"""How the evaluators talk to their scratch store: JSON requests to an in-process service, the
way `memoree call` would send them, one at a time or in ``batch`` requests, on a synthetic clock."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from memoree.admin.corpus import CorpusError
from memoree.eventlog.timefmt import format_instant
from memoree.service.service import Service

__all__ = ["BATCH_REQUESTS", "CLOCK_START", "Client", "SyntheticClock"]

CLOCK_START = datetime(2026, 1, 1, tzinfo=timezone.utc)


class SyntheticClock:
    """A deterministic clock: a fixed start, one second later on every reading."""

    def __init__(self) -> None:
        self.ticks = 0

    def __call__(self) -> str:
        self.ticks += 1
        return format_instant(CLOCK_START + timedelta(seconds=self.ticks))


class Client:
    """Sends JSON requests to an in-process service, the way `memoree call` would."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.count = 0

    def send(self, op: str, payload: dict[str, Any], *, context: dict[str, Any] | None = None,
             key: str | None = None) -> dict[str, Any]:
        document = self._document(op, payload, context, key)
        reply = self.service.handle_bytes(json.dumps(document).encode("utf-8"))
        return json.loads(reply.body)

    def ok(self, op: str, payload: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return _result(op, self.send(op, payload, **kwargs))

    def ok_many(self, mutations: Sequence[tuple[str, dict[str, Any], dict[str, Any], str]]) -> list[dict[str, Any]]:
        """Results of ``(op, payload, context, key)`` mutations sent in ``batch`` requests (one
        transaction each, small puts written together), each answered as if it came alone."""
        documents = [self._document(op, payload, context, key) for op, payload, context, key in mutations]
        results: list[dict[str, Any]] = []
        for start in range(0, len(documents), BATCH_REQUESTS):
            part = documents[start:start + BATCH_REQUESTS]
            self.count += 1
            batch = {"v": 1, "request_id": f"req_eval_{self.count}", "op": "batch",
                     "input": {"requests": part}}
            envelope = json.loads(self.service.handle_bytes(json.dumps(batch).encode("utf-8")).body)
            replies = _result("batch", envelope)["replies"]
            results += [_result(document["op"], reply) for document, reply in zip(part, replies)]
        return results

    def _document(self, op: str, payload: dict[str, Any], context: dict[str, Any] | None,
                  key: str | None) -> dict[str, Any]:
        self.count += 1
        document: dict[str, Any] = {"v": 1, "request_id": f"req_eval_{self.count}", "op": op,
                                    "input": payload}
        if context is not None:
            document["context"] = context
            document["context_source"] = "explicit"
        if key is not None:
            document["idempotency_key"] = key
        return document


# Requests per ``batch``: a LoCoMo conversation's sessions fit one (~20 of a few KiB each).
BATCH_REQUESTS = 250


def _result(op: str, envelope: dict[str, Any]) -> dict[str, Any]:
    if not envelope["ok"]:
        raise CorpusError(f"{op} failed: {envelope['error']['code']}: {envelope['error']['message']}")
    return envelope["result"]
