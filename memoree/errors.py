"""The one error tree of memoree, with stable codes.

Every failure a caller can see is a ``MemoreeError`` subclass carrying a stable ``code`` (the
protocol's error code), a ``retryable`` flag, the CLI ``exit_code``, an optional ``hint`` and
machine-readable ``details``. Foreign exceptions are translated at one boundary each (the SQLite
driver in ``eventlog.sqlite``, the transport in ``memoree.service.service``), never caught ad hoc.

    MemoreeError
    ├── NoAmbientContext        NO_AMBIENT_CONTEXT    exit 5
    ├── InvalidRequest          INVALID_REQUEST       exit 2
    ├── NotFound                NOT_FOUND             exit 3
    ├── CitationError           CITATION_ERROR        exit 1
    ├── RevisionConflict        REVISION_CONFLICT     exit 4
    ├── IdempotencyConflict     IDEMPOTENCY_CONFLICT  exit 4
    ├── IndexNotReady           INDEX_NOT_READY       exit 6  (retryable)
    ├── ScopeViolation          SCOPE_VIOLATION       exit 7
    ├── ConfigError             CONFIG_ERROR          exit 2
    ├── ContentTooLarge         CONTENT_TOO_LARGE     exit 2
    ├── IntegrityError          INTEGRITY_ERROR       exit 1
    ├── UnsupportedVersion      UNSUPPORTED_VERSION   exit 2
    ├── TransportError          TRANSPORT_ERROR       exit 1  (retryable)
    ├── ReasonerError           REASONER_ERROR        exit 1
    └── InternalError           INTERNAL_ERROR        exit 1
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CitationError",
    "ConfigError",
    "ContentTooLarge",
    "IdempotencyConflict",
    "IndexNotReady",
    "IntegrityError",
    "InternalError",
    "InvalidRequest",
    "MemoreeError",
    "NoAmbientContext",
    "NotFound",
    "ReasonerError",
    "RevisionConflict",
    "ScopeViolation",
    "TransportError",
    "UnsupportedVersion",
    "error_class_for_code",
]


class MemoreeError(Exception):
    """Base of every error a caller can see; subclasses fix code, retryability and exit code."""

    code = "INTERNAL_ERROR"
    retryable = False
    exit_code = 1
    prefix = ""
    default_hint: str | None = None

    def __init__(
        self,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        hint: str | None = None,
        retryable: bool | None = None,
    ) -> None:
        text = f"{self.prefix}{message}" if self.prefix and not message.startswith(self.prefix) else message
        super().__init__(text)
        self.message = text
        self.details = details
        self.hint = hint if hint is not None else self.default_hint
        if retryable is not None:
            self.retryable = retryable

    def to_body(self) -> dict[str, Any]:
        """The protocol's ``error`` object for this failure."""
        body: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
        }
        if self.hint:
            body["hint"] = self.hint
        body["details"] = self.details
        return body


class NoAmbientContext(MemoreeError):
    code = "NO_AMBIENT_CONTEXT"
    exit_code = 5
    default_hint = (
        "Run `memoree init` in the project, or use `memoree session exec` from an initialized project."
    )


class InvalidRequest(MemoreeError):
    code = "INVALID_REQUEST"
    exit_code = 2
    prefix = "invalid request: "


class NotFound(MemoreeError):
    code = "NOT_FOUND"
    exit_code = 3
    prefix = "not found: "


class CitationError(MemoreeError):
    code = "CITATION_ERROR"
    exit_code = 1


class RevisionConflict(MemoreeError):
    code = "REVISION_CONFLICT"
    exit_code = 4
    prefix = "revision conflict: "
    default_hint = "Fetch the current revision and retry with its revision id."


class IdempotencyConflict(MemoreeError):
    code = "IDEMPOTENCY_CONFLICT"
    exit_code = 4
    prefix = "idempotency conflict for key "
    default_hint = "Use the same key only for an exact retry, or choose a new idempotency key."


class IndexNotReady(MemoreeError):
    code = "INDEX_NOT_READY"
    retryable = True
    exit_code = 6
    default_hint = (
        "Retry the read with the same min_commit_seq after the acknowledged write is visible."
    )


class ScopeViolation(MemoreeError):
    code = "SCOPE_VIOLATION"
    exit_code = 7
    prefix = "scope violation: "
    default_hint = (
        "Resolve the ambient context that owns the entity before mutating it; pinned and "
        "exact-looked-up entities remain read-only outside their owner context."
    )


class ConfigError(MemoreeError):
    code = "CONFIG_ERROR"
    exit_code = 2
    prefix = "configuration error: "


class ContentTooLarge(MemoreeError):
    code = "CONTENT_TOO_LARGE"
    exit_code = 2


class IntegrityError(MemoreeError):
    code = "INTEGRITY_ERROR"
    exit_code = 1
    prefix = "integrity check failed: "


class UnsupportedVersion(MemoreeError):
    code = "UNSUPPORTED_VERSION"
    exit_code = 2
    prefix = "unsupported protocol version "


class TransportError(MemoreeError):
    code = "TRANSPORT_ERROR"
    retryable = True
    exit_code = 1
    prefix = "transport error: "


class ReasonerError(MemoreeError):
    code = "REASONER_ERROR"
    exit_code = 1


class InternalError(MemoreeError):
    code = "INTERNAL_ERROR"
    exit_code = 1


_BY_CODE = {
    cls.code: cls
    for cls in (
        NoAmbientContext, InvalidRequest, NotFound, CitationError, RevisionConflict,
        IdempotencyConflict, IndexNotReady, ScopeViolation, ConfigError, ContentTooLarge,
        IntegrityError, UnsupportedVersion, TransportError, ReasonerError, InternalError,
    )
}


def error_class_for_code(code: str) -> type[MemoreeError]:
    """The error class for a protocol code; unknown codes map to ``InternalError``."""
    return _BY_CODE.get(code, InternalError)


EXIT_CODES = {code: cls.exit_code for code, cls in _BY_CODE.items()}
