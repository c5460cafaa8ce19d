"""The protocol envelope: request and response shapes, the request fingerprint and key namespace.

A request is decoded into ``Request`` (unknown top-level fields rejected) with ``input`` kept raw:
the typed per-op input is decoded later, in the spec's validation order, and the raw input is what
the idempotency fingerprint covers (``blake3`` of sorted-key compact JSON of ``{context, input,
op, v}``). Idempotency keys are namespaced by ambient workspace/project/task.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from blake3 import blake3

from memoree.eventlog.events import Scope

__all__ = [
    "AmbientContext",
    "ErrorBody",
    "ErrorEnvelope",
    "SuccessEnvelope",
    "PROTOCOL_VERSION",
    "Request",
    "ResolvedContext",
    "error_envelope",
    "namespaced_key",
    "request_fingerprint",
    "success_envelope",
]

PROTOCOL_VERSION = 1
ContextSource = Literal["explicit", "session", "marker", "personal", "none"]


class AmbientContext(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    workspace_id: str
    project_id: str
    task_id: str | None = None
    component: str | None = None
    pins: list[str] = []

    def scope(self) -> Scope:
        return Scope(self.workspace_id, self.project_id, self.task_id, self.component)


class Request(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    v: int = PROTOCOL_VERSION
    request_id: str
    op: str
    idempotency_key: str | None = None
    context: AmbientContext | None = None
    context_source: ContextSource = "none"
    input: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"null"))


class ResolvedContext(msgspec.Struct, kw_only=True, omit_defaults=True):
    workspace_id: str
    project_id: str
    task_id: str | None = None
    component: str | None = None
    pins: list[str]
    resolved_from: str
    horizon: str
    broadened: bool


class Warning(msgspec.Struct):
    code: str
    message: str


class ErrorBody(msgspec.Struct, kw_only=True, omit_defaults=True):
    code: str
    message: str
    retryable: bool
    hint: str | None = None
    details: dict[str, Any] | None


class SuccessEnvelope(msgspec.Struct, kw_only=True, omit_defaults=True):
    v: int
    request_id: str
    ok: Literal[True]
    context: ResolvedContext | None = None
    commit_seq: int | None = None
    result: Any
    warnings: list[Warning]


class ErrorEnvelope(msgspec.Struct, kw_only=True):
    v: int = PROTOCOL_VERSION
    request_id: str
    ok: Literal[False] = False
    error: ErrorBody
    warnings: list[Warning] = []


_sorted = msgspec.json.Encoder(order="sorted")
_encoder = msgspec.json.Encoder()


def request_fingerprint(request: Request) -> str:
    """BLAKE3 hex over the sorted-key compact JSON of the request's context, raw input and op."""
    context: dict[str, Any] | None = None
    if request.context is not None:
        context = msgspec.to_builtins(request.context)
        context["pins"] = list(request.context.pins)
    document = {
        "context": context,
        "input": msgspec.json.decode(request.input),
        "op": request.op,
        "v": PROTOCOL_VERSION,
    }
    return blake3(_sorted.encode(document)).hexdigest()


def namespaced_key(scope: Scope, key: str) -> str:
    """``hex(blake3(workspace \\0 project \\0 task))[:32] + ":" + key``."""
    namespace = f"{scope.workspace_id}\0{scope.project_id}\0{scope.task_id or ''}"
    return blake3(namespace.encode("utf-8")).hexdigest()[:32] + ":" + key


def success_envelope(
    request_id: str, result: Any, *, context: ResolvedContext | None = None,
    commit_seq: int | None = None,
) -> bytes:
    return _encoder.encode(SuccessEnvelope(
        v=PROTOCOL_VERSION, request_id=request_id, ok=True, context=context,
        commit_seq=commit_seq, result=result, warnings=[],
    ))


def error_envelope(request_id: str, error_body: dict[str, Any]) -> bytes:
    return _encoder.encode(ErrorEnvelope(request_id=request_id, error=ErrorBody(**error_body)))
