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
from memoree.client.context import ContextResolutionError, resolve
from memoree.errors import ConfigError, error_class_for_code
from memoree.ids import new_id
from memoree.protocol.documents import request_document

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
    if context is None:
        return request_document(new_id("req"), op, payload, idempotency_key=idempotency_key)
    return request_document(new_id("req"), op, payload, idempotency_key=idempotency_key,
                            context=context, context_source=context_source or "explicit")


def freeze_context() -> tuple[dict[str, Any], str] | None:
    """The ambient context resolved once, so every request of one composition shares it.

    Raises ``ConfigError`` for a malformed marker, variable or config section.
    """

    try:
        return resolve()
    except ContextResolutionError as exc:
        raise ConfigError(str(exc)) from None


def envelope_error(envelope: dict[str, Any]) -> Any:
    """The typed error a failure envelope carries (``MemoreeError`` subclass instance)."""
    body = envelope.get("error") or {}
    cls = error_class_for_code(str(body.get("code", "INTERNAL_ERROR")))
    return cls(str(body.get("message", "request failed")), details=body.get("details"),
               hint=body.get("hint"), retryable=bool(body.get("retryable", False)))


class Sender:
    """Sends request documents exactly as ``memoree call`` does and returns decoded envelopes.

    Each request takes ``callcmd.run``'s path (context attached, then the daemon or the
    in-process store); a lock serializes requests, so worker threads may share one sender. With
    ``keep_open`` an in-process sender opens the store once for all its requests instead of once
    per request (close it, or use it as a context manager).
    """

    def __init__(self, options: callcmd.CallOptions | None = None, *, keep_open: bool = False) -> None:
        self.options = options or callcmd.CallOptions()
        self._lock = threading.Lock()
        self._keep_open = keep_open and self.options.in_process
        self._service: Any = None

    def send(self, document: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """One request: its envelope and the exit code ``memoree call`` would use."""
        raw = json.dumps(document).encode("utf-8")
        with self._lock:
            body, exit_code = self._send_kept(raw) if self._keep_open else callcmd.run(raw, self.options)
        return json.loads(body), exit_code

    def _send_kept(self, raw: bytes) -> tuple[bytes, int]:
        prepared = callcmd.prepare(raw)
        if not isinstance(prepared, callcmd.Prepared):
            return prepared
        reply = self._kept_service().handle_bytes(prepared.raw, fallback_request_id="req_cli")
        if reply.ok:
            from memoree.eventlog.sealing import maybe_seal

            maybe_seal(self._service.engine)
        return reply.body, reply.exit_code

    def _kept_service(self) -> Any:
        """The store this sender keeps open (opened on first use)."""
        if self._service is None:
            from memoree.client.paths import data_dir
            from memoree.service.service import Service

            self._service = Service(self.options.data_dir or data_dir())
        return self._service

    def close(self) -> None:
        with self._lock:
            if self._service is not None:
                self._service.close()
                self._service = None

    def __enter__(self) -> Sender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_many(self, documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Mutation requests sent as ``batch`` requests (one transaction each); their envelopes, in
        order. A batch refused as a whole answers its failure for each of its requests.

        Each document is encoded once and the batch frame assembled from those bytes; it needs no
        ambient context (each request carries its own), so it skips ``memoree call``'s parse."""
        envelopes: list[dict[str, Any]] = []
        for part in _batches([json.dumps(document, ensure_ascii=False).encode("utf-8") for document in documents]):
            request_id = new_request("batch", {})["request_id"]
            raw = (b'{"v":1,"request_id":"' + request_id.encode() + b'","op":"batch","input":{"requests":['
                   + b",".join(part) + b"]}}")
            with self._lock:
                prepared = callcmd.Prepared(raw, request_id, False)
                if self._keep_open:
                    from memoree.eventlog.sealing import maybe_seal

                    body = self._kept_service().handle_bytes(raw, fallback_request_id="req_cli").body
                    maybe_seal(self._service.engine)
                else:
                    body, _ = (callcmd.send_in_process(raw, self.options.data_dir) if self.options.in_process
                               else callcmd.send_via_daemon(prepared, self.options))
            envelope = json.loads(body)
            if envelope.get("ok"):
                envelopes.extend(envelope["result"]["replies"])
            else:
                envelopes.extend(envelope for _ in part)
        return envelopes


BATCH_REQUESTS = 250
BATCH_BYTES = 8 * 1024 * 1024  # well inside a 24 MiB frame, with room for the replies


def _batches(encoded: list[bytes]) -> list[list[bytes]]:
    """Consecutive runs of at most ``BATCH_REQUESTS`` encoded requests and about ``BATCH_BYTES``."""
    batches: list[list[bytes]] = []
    current: list[bytes] = []
    size = 0
    for document in encoded:
        if current and (len(current) >= BATCH_REQUESTS or size + len(document) > BATCH_BYTES):
            batches.append(current)
            current, size = [], 0
        current.append(document)
        size += len(document)
    if current:
        batches.append(current)
    return batches