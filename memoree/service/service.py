"""The service: one request in, one response envelope out, in the spec's validation order.

Order (spec §2.4): protocol version; envelope bounds; idempotency key for mutations; typed input
for horizon ops; ambient context; broadening reason; fingerprint and namespaced key; then the
op's own validation and its transaction. Every failure becomes a typed error envelope; anything
unexpected becomes INTERNAL_ERROR and is logged to stderr, never a traceback on stdout. The
service trusts the context the client attached and never resolves one itself.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from memoree import limits
from memoree.errors import (
    ConfigError,
    InternalError,
    InvalidRequest,
    MemoreeError,
    NoAmbientContext,
    UnsupportedVersion,
)
from memoree.protocol.ops import OPS, OpSpec
from memoree.protocol.envelope import (
    PROTOCOL_VERSION,
    Request,
    ResolvedContext,
    error_envelope,
    namespaced_key,
    request_fingerprint,
    success_envelope,
)
from memoree.protocol.envelope import Warning as EnvelopeWarning

__all__ = ["Reply", "Service"]

_request_decoder = msgspec.json.Decoder(Request)


class Reply(msgspec.Struct, frozen=True):
    """An encoded response envelope and the exit code a CLI should use for it."""

    body: bytes
    exit_code: int
    ok: bool


class Service:
    """Dispatches protocol requests to the store; opens the store on first use."""

    def __init__(self, data_dir: str | os.PathLike[str], **engine_options: Any) -> None:
        self.data_dir = Path(data_dir)
        self._engine_options = engine_options
        self._engine: Any = None
        self._local = threading.local()  # a reader process's ReadView (memoree.daemon.reader), if any
        self.ops: Mapping[str, OpSpec] = OPS
        self.daemon_info: dict[str, Any] = {"running": False, "daemon_pid": None,
                                            "lifecycle_owner": "in_process"}

    @property
    def engine(self) -> Any:
        view = getattr(self._local, "view", None)
        if view is not None:
            return view
        if self._engine is None:
            from memoree.service.engine import Engine

            self._engine = Engine(self.data_dir, **self._engine_options)
        return self._engine

    def reading_through(self, view: Any, work: Callable[[], Any]) -> Any:
        """Run ``work`` on this thread with ``engine`` meaning the read-only ``view``."""
        self._local.view = view
        try:
            return work()
        finally:
            self._local.view = None

    def is_mutation(self, op: str) -> bool:
        """Whether ``op`` names a mutating operation (what a ``batch`` may hold)."""
        spec = OPS.get(op)
        return spec is not None and spec.mutating

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def handle_bytes(self, raw: bytes, *, fallback_request_id: str = "req_transport",
                     keys_checked: bool = False) -> Reply:
        """Decode one request frame and answer it; malformed JSON answers with the fallback id.

        ``keys_checked``: ``raw`` was already checked for repeated keys (a ``batch``'s requests
        inside their checked frame; a frame the daemon checked on its I/O thread), so the check
        is not paid twice."""
        try:
            request = _request_decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
            return self._failure(_salvage_request_id(raw, fallback_request_id),
                                 InvalidRequest(f"malformed request: {exc}"))
        except RecursionError:
            return self._failure(fallback_request_id,
                                 InvalidRequest("malformed request: JSON nests too deeply"))
        from memoree.protocol.strictjson import duplicate_key

        repeated = None if keys_checked else duplicate_key(raw)
        if repeated is not None:  # two parsers could read two different requests from it
            return self._failure(_salvage_request_id(raw, fallback_request_id),
                                 InvalidRequest(f"malformed request: {repeated}"))
        return self.handle(request)

    def handle(self, request: Request) -> Reply:
        try:
            body = self._dispatch(request)
        except MemoreeError as exc:
            return self._failure(request.request_id, exc)
        except OSError as exc:  # the disk under the store (blob files, keys): typed, e.g. DISK_FULL
            from memoree.eventlog.sqlite import translate_storage_error

            return self._failure(request.request_id, translate_storage_error(exc))
        except Exception as exc:  # the one boundary where an unexpected failure is contained
            from memoree.log import logger

            logger().error("request_failed", request_id=request.request_id, op=request.op,
                           exc_info=exc)
            return self._failure(request.request_id, InternalError(f"internal error: {exc}"))
        return Reply(body, 0, True)

    def _failure(self, request_id: str, exc: MemoreeError) -> Reply:
        return Reply(error_envelope(request_id, exc.to_body()), exc.exit_code, False)

    def _dispatch(self, request: Request) -> bytes:
        spec = self._validate_envelope(request)
        horizon, reason = "ambient", None
        inp = None
        if spec.horizon:
            inp = decode_input(spec, request.input)
            horizon, reason = getattr(inp, "horizon", "ambient"), getattr(inp, "reason", None)
        if spec.needs_context and request.context is None:
            raise NoAmbientContext("no ambient memory context could be resolved")
        if horizon != "ambient" and (reason is None or not reason.strip()):
            raise InvalidRequest("workspace and personal horizons require a non-empty reason")
        if inp is None:
            inp = decode_input(spec, request.input)
        context = None
        # A context the client attached on its own (marker, session, personal) to an op that needs
        # none is not echoed: only contexts the op uses or the caller sent explicitly are.
        attached_only = request.context_source not in ("none", "explicit") and not spec.needs_context
        if request.context is not None and not attached_only:
            ctx = request.context
            context = ResolvedContext(
                workspace_id=ctx.workspace_id, project_id=ctx.project_id, task_id=ctx.task_id,
                component=ctx.component, pins=list(ctx.pins),
                resolved_from="explicit" if request.context_source == "none" else request.context_source,
                horizon=horizon, broadened=horizon != "ambient",
            )
        if spec.mutating:
            assert request.context is not None and request.idempotency_key is not None
            scope = request.context.scope()
            outcome = self.engine.handler.execute(
                spec.name, inp, scope=scope,
                idempotency_key=namespaced_key(scope, request.idempotency_key),
                request_digest=request_fingerprint(request),
            )
            warnings = self._replay_warnings(spec.name, outcome) if outcome.replayed else None
            return success_envelope(request.request_id, msgspec.Raw(outcome.result_json),
                                    context=context, commit_seq=outcome.commit_seq, warnings=warnings)
        assert spec.reader is not None
        result = spec.reader(self, request, inp)
        return success_envelope(request.request_id, result, context=context)

    def _replay_warnings(self, op: str, outcome: Any) -> list[EnvelopeWarning] | None:
        """A replayed put or revise whose artifact was purged since stored nothing now: say so."""
        if op not in ("artifact.put", "artifact.revise"):
            return None
        artifact_id = msgspec.json.decode(outcome.result_json).get("artifact_id")
        row = self.engine.conn.execute("SELECT purged_commit_seq FROM artifacts WHERE id = ?",
                                       (artifact_id,)).fetchone()
        if row is None or row[0] is None:
            return None
        return [EnvelopeWarning(code="replayed_purged_artifact", message=(
            f"this idempotency key replays the {op} of artifact {artifact_id}, which was purged at "
            f"commit_seq {row[0]}: nothing was stored now. Send a new idempotency key to store these "
            "bytes again."))]

    def _validate_envelope(self, request: Request) -> OpSpec:
        if request.client_version is not None:
            _require_same_version(request.client_version)
        if request.v != PROTOCOL_VERSION:
            raise UnsupportedVersion(
                str(request.v), details={"received_version": request.v,
                                         "supported_version": PROTOCOL_VERSION},
            )
        _bounded("request_id", request.request_id, limits.MAX_REQUEST_ID_BYTES)
        spec = self.ops.get(request.op)
        if spec is None:
            raise InvalidRequest(f"unknown operation {request.op!r}; `capabilities` lists the operations")
        if request.context is not None:
            _validate_context(request)
        if spec.mutating:
            key = request.idempotency_key
            if key is None or not key.strip():
                raise InvalidRequest("mutating operations require idempotency_key")
            _bounded("idempotency_key", key, limits.MAX_IDEMPOTENCY_KEY_BYTES)
        return spec


def _require_same_version(client_version: str) -> None:
    """Refuse silent version skew between a CLI client and the daemon serving it."""
    from memoree import __version__

    if client_version != __version__:
        raise ConfigError(
            f"the daemon runs memoree {__version__} but this client is {client_version}; "
            "run `memoree daemon restart` to replace it",
            details={"daemon_version": __version__, "client_version": client_version},
        )


def decode_input(spec: OpSpec, raw: msgspec.Raw) -> Any:
    """The op's typed input; unknown fields, wrong types and a missing object are INVALID_REQUEST."""
    try:
        value = msgspec.json.decode(raw, type=spec.input_type)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(f"invalid input for {spec.name}: {exc}") from None
    except RecursionError:
        raise InvalidRequest(f"invalid input for {spec.name}: JSON nests too deeply") from None
    except msgspec.DecodeError as exc:  # pragma: no cover - the envelope decode already parsed it
        raise InvalidRequest(f"invalid input for {spec.name}: {exc}") from None
    where = _integer_out_of_range(value, "$") if _may_hold_a_long_integer(bytes(raw)) else None
    if where is not None:
        raise InvalidRequest(f"invalid input for {spec.name}: integer outside the signed 64-bit range - at `{where}`")
    return value


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# Only an integer literal of 19 digits or more can fall outside the signed 64-bit range: inputs
# without such a run of digits (nearly all) skip the walk over their typed fields.
_LONG_DIGITS = re.compile(rb"\d{19}")
_DIGITS = b"0123456789"


def _may_hold_a_long_integer(raw: bytes) -> bool:
    """Whether ``raw`` has a run of 19 digits; counting its digits first (one C pass) spares the
    regex, which costs ~20 us per KiB, for the inputs with fewer than 19 digits in all."""
    return len(raw) - len(raw.translate(None, _DIGITS)) >= 19 and _LONG_DIGITS.search(raw) is not None


def _integer_out_of_range(value: Any, path: str) -> str | None:
    """Where a typed integer field exceeds the protocol's 64-bit integers (msgspec accepts more,
    SQLite cannot bind it); free-form objects such as provenance are left alone."""
    if isinstance(value, int) and not isinstance(value, bool):
        return None if _INT64_MIN <= value <= _INT64_MAX else path
    if isinstance(value, msgspec.Struct):
        fields = ((f"{path}.{name}", getattr(value, name)) for name in value.__struct_fields__)
    elif isinstance(value, (list, tuple)):
        fields = ((f"{path}[{index}]", item) for index, item in enumerate(value))
    else:
        return None
    return next((found for where, item in fields if (found := _integer_out_of_range(item, where))), None)


def _bounded(name: str, value: str, max_bytes: int) -> None:
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidRequest(f"{name} must be valid Unicode") from None
    if not 1 <= size <= max_bytes or not value.strip():
        raise InvalidRequest(f"{name} must be 1 to {max_bytes} bytes and not blank")


def _validate_context(request: Request) -> None:
    ctx = request.context
    assert ctx is not None
    _bounded("context.workspace_id", ctx.workspace_id, limits.MAX_CONTEXT_ID_BYTES)
    _bounded("context.project_id", ctx.project_id, limits.MAX_CONTEXT_ID_BYTES)
    if ctx.task_id is not None:
        _bounded("context.task_id", ctx.task_id, limits.MAX_CONTEXT_ID_BYTES)
    if ctx.component is not None:
        _bounded("context.component", ctx.component, limits.MAX_CONTEXT_ID_BYTES)
    # NUL separates the ids in the idempotency key namespace (spec 2.5): an id containing one
    # could make two different scopes share a namespace.
    if any("\0" in (value or "") for value in (ctx.workspace_id, ctx.project_id, ctx.task_id, ctx.component)):
        raise InvalidRequest("context ids must not contain NUL characters")
    if len(ctx.pins) > limits.MAX_PINS:
        raise InvalidRequest(f"context.pins must not exceed {limits.MAX_PINS} entries")
    for pin in ctx.pins:
        _bounded("context.pins[]", pin, limits.MAX_PIN_BYTES)


def _salvage_request_id(raw: bytes, fallback: str) -> str:
    """The caller's request_id when the frame is a JSON object carrying a sane one."""
    try:
        document = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return fallback
    if isinstance(document, dict):
        candidate = document.get("request_id")
        if isinstance(candidate, str) and 1 <= len(candidate.encode("utf-8", "replace")) <= limits.MAX_REQUEST_ID_BYTES:
            return candidate
    return fallback
