"""Caller-side compositions' way to the store: build protocol requests and send them like ``call``.

``remember``, ``pending``, the importers and the MCP server are clients, not ops: they build
ordinary protocol requests and send them through the same path as ``memoree call`` (context
attached by ``callcmd.prepare``, then the daemon, or the in-process store with ``--in-process`` /
``MEMOREE_IN_PROCESS=1``). Derived idempotency keys follow one pattern,
``<prefix>_<BLAKE3 hex(logical op \\0 part)>``, so a repeated logical mutation replays instead of
writing again.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from blake3 import blake3

from memoree.client import call as callcmd

__all__ = ["Sender", "canonical_json", "derived_key", "envelope_error", "freeze_context", "new_request"]


def canonical_json(value: Any) -> str:
    """Sorted-key compact JSON: the stable text keys and digests are computed over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def derived_key(prefix: str, logical_op: str, part: str) -> str:
    """``<prefix>_<BLAKE3 hex(logical_op \\0 part)>``: the same logical mutation, the same key."""
    digest = blake3(f"{logical_op}\0{part}".encode()).hexdigest()
    return f"{prefix}_{digest}"


def new_request(op: str, payload: dict[str, Any], *, idempotency_key: str | None = None,
                context: dict[str, Any] | None = None, context_source: str | None = None) -> dict[str, Any]:
    """A protocol request document with a fresh ``req_`` id."""
    from memoree.ids import new_id

    document: dict[str, Any] = {"v": 1, "request_id": new_id("req"), "op": op, "input": payload}
    if idempotency_key is not None:
        document["idempotency_key"] = idempotency_key
    if context is not None:
        document["context"] = context
        document["context_source"] = context_source or "explicit"
    return document


def freeze_context() -> tuple[dict[str, Any], str] | None:
    """The ambient context resolved once, so every request of one composition shares it.

    Raises ``ConfigError`` for a malformed marker, variable or config section.
    """
    from memoree.client.context import ContextResolutionError, resolve
    from memoree.errors import ConfigError

    try:
        return resolve()
    except ContextResolutionError as exc:
        raise ConfigError(str(exc)) from None


def envelope_error(envelope: dict[str, Any]) -> Any:
    """The typed error a failure envelope carries (``MemoreeError`` subclass instance)."""
    from memoree.errors import error_class_for_code

    body = envelope.get("error") or {}
    cls = error_class_for_code(str(body.get("code", "INTERNAL_ERROR")))
    return cls(str(body.get("message", "request failed")), details=body.get("details"),
               hint=body.get("hint"), retryable=bool(body.get("retryable", False)))


class Sender:
    """Sends request documents exactly as ``memoree call`` does and returns decoded envelopes.

    Each request takes ``callcmd.run``'s path (context attached, then the daemon or the
    in-process store); a lock serializes requests, so worker threads may share one sender.
    """

    def __init__(self, options: callcmd.CallOptions | None = None) -> None:
        self.options = options or callcmd.CallOptions()
        self._lock = threading.Lock()

    def send(self, document: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """One request: its envelope and the exit code ``memoree call`` would use."""
        with self._lock:
            body, exit_code = callcmd.run(json.dumps(document).encode("utf-8"), self.options)
        return json.loads(body), exit_code
