"""Shared fixtures: a fresh service on a temporary data dir, and a helper to call it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoree.service.service import Service

CTX = {"workspace_id": "wsp_test", "project_id": "prj_test"}


class Caller:
    """Sends protocol requests to a service and returns the decoded envelopes."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.counter = 0

    def raw(self, document: dict[str, Any] | bytes) -> tuple[dict[str, Any], int]:
        body = document if isinstance(document, bytes) else json.dumps(document).encode()
        reply = self.service.handle_bytes(body)
        return json.loads(reply.body), reply.exit_code

    def __call__(self, op: str, payload: dict[str, Any] | None = None, *, key: str | None = None,
                 context: dict[str, Any] | None = CTX, **envelope: Any) -> dict[str, Any]:
        self.counter += 1
        document: dict[str, Any] = {"v": 1, "request_id": f"req_{self.counter}", "op": op,
                                    "input": payload if payload is not None else {}}
        if key is not None:
            document["idempotency_key"] = key
        if context is not None:
            document["context"] = context
        document.update(envelope)
        return self.raw(document)[0]

    def ok(self, op: str, payload: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
        envelope = self(op, payload, **kwargs)
        assert envelope["ok"], envelope
        return envelope

    def put_text(self, text: str, *, key: str | None = None, title: str = "note",
                 context: dict[str, Any] | None = CTX) -> dict[str, Any]:
        self.counter += 1
        return self.ok("artifact.put", {"kind": "note", "title": title,
                                        "content": {"type": "text", "data": text}},
                       key=key or f"put-{self.counter}", context=context)["result"]

    def head(self) -> int:
        return self.service.engine.head()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = Service(tmp_path / "data")
    yield svc
    svc.close()


@pytest.fixture
def call(service: Service) -> Caller:
    return Caller(service)
