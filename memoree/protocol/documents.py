"""The envelope and request as plain JSON documents, for the callers that must stay stdlib-only.

``memoree call``'s client path, the CLI and the MCP server answer some failures (and the CLI some
local results) without the service; they build those envelopes here, with the same shape the
service encodes in ``memoree.protocol.envelope``: ``v``, ``request_id``, ``ok``, then ``result``
or ``error``, then ``warnings``. Standard library only, and nothing imported at module level
beyond it, so the call path stays lean.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: ``typing`` is not on ``memoree call``'s import path
    from typing import Any

__all__ = ["PROTOCOL_VERSION", "encode", "error_body", "error_document", "request_document",
           "success_document"]

PROTOCOL_VERSION = 1


def success_document(request_id: str, result: Any) -> dict[str, Any]:
    return {"v": PROTOCOL_VERSION, "request_id": request_id, "ok": True, "result": result,
            "warnings": []}


def error_body(code: str, message: str, *, retryable: bool = False, hint: str | None = None,
               details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``error`` object: ``code``, ``message``, ``retryable``, ``hint`` when given, ``details``."""
    body: dict[str, Any] = {"code": code, "message": message, "retryable": retryable}
    if hint:
        body["hint"] = hint
    body["details"] = details
    return body


def error_document(request_id: str, error: dict[str, Any]) -> dict[str, Any]:
    """An error envelope around an ``error`` object (``error_body`` or ``MemoreeError.to_body``)."""
    return {"v": PROTOCOL_VERSION, "request_id": request_id, "ok": False, "error": error,
            "warnings": []}


def request_document(request_id: str, op: str, payload: dict[str, Any], *,
                     idempotency_key: str | None = None, **fields: Any) -> dict[str, Any]:
    """A request: ``v``, ``request_id``, ``op``, ``input``, the key when given, then ``fields``."""
    document: dict[str, Any] = {"v": PROTOCOL_VERSION, "request_id": request_id, "op": op,
                                "input": payload}
    document.update(fields)
    if idempotency_key is not None:
        document["idempotency_key"] = idempotency_key
    return document


def encode(document: dict[str, Any]) -> bytes:
    """Compact JSON, as the service's envelopes are."""
    from memoree.protocol.strictjson import dumps

    return dumps(document, ensure_ascii=False).encode()
