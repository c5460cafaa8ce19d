"""The daemon's answers that no op computes: refusals and failures, each a typed envelope.

``failure_reply`` turns whatever went wrong while a request was handled into an error envelope
carrying the caller's request id (it never raises: the writer and the readers rely on it);
``group_failure`` is the error of every request of a group commit whose transaction failed;
``op_of`` reads a frame's ``op`` without decoding the rest (routing and admission use it).
"""

from __future__ import annotations

import errno

import msgspec

from memoree.errors import ContentTooLarge, DiskFull, InternalError, MemoreeError
from memoree.protocol.envelope import error_envelope

__all__ = ["Admission", "failure_reply", "group_failure", "op_of", "too_large", "with_request_id"]


class Admission(msgspec.Struct):
    op: object = ""
    auth: object = None
    input: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"null"))


class Destination(msgspec.Struct):
    destination: object = None


admission_decoder = msgspec.json.Decoder(Admission)
destination_decoder = msgspec.json.Decoder(Destination)


def failure_reply(raw: bytes, exc: BaseException) -> bytes:
    """The typed error envelope for a request whose handling raised ``exc`` (never raises)."""
    try:
        if isinstance(exc, MemoreeError):
            error: MemoreeError = exc
        elif isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            error = DiskFull(exc.strerror or str(exc))
        else:
            error = InternalError(f"internal error: {type(exc).__name__}: {exc}")
        return with_request_id(raw, error)
    except BaseException:  # noqa: BLE001 - even a failure to describe the failure is answered
        return error_envelope("req_transport", InternalError("internal error").to_body())


def group_failure(exc: BaseException) -> MemoreeError:
    """The error every request of a group gets when the group's transaction itself failed."""
    if isinstance(exc, DiskFull):
        return DiskFull(f"the group commit failed, nothing was written: {exc.message}")
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(f"the group commit failed, nothing was written: {exc.strerror}")
    message = exc.message if isinstance(exc, MemoreeError) else f"{type(exc).__name__}: {exc}"
    return InternalError(f"the group commit failed, nothing was written: {message}", retryable=True)


def op_of(raw: bytes) -> object:
    """The frame's ``op`` as sent (any JSON value), or "" when the frame is not a JSON object."""
    try:
        return admission_decoder.decode(raw).op
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeDecodeError):
        return ""


def with_request_id(raw: bytes, error: MemoreeError) -> bytes:
    from memoree.service.service import _salvage_request_id

    return error_envelope(_salvage_request_id(raw, "req_transport"), error.to_body())


def too_large(raw: bytes) -> bytes:
    return with_request_id(raw, ContentTooLarge(
        "content exceeds the configured size limit: the response is larger than a frame"))
