"""``memoree call``: one JSON request on stdin, one compact JSON envelope on stdout.

This path runs once per agent action, so it imports only the standard library until it must
answer: it parses the request, attaches the resolved ambient context when the op needs one (it
never invents an idempotency key), hands the bytes to the service and prints the envelope.
Diagnostics go to stderr; the exit code follows the error class (0 on success).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["attach_context", "main"]

USAGE = "usage: memoree call [--pretty] [--data-dir DIR] < request.json"


def _error(request_id: str, code: str, message: str, exit_code: int,
           hint: str | None = None) -> tuple[bytes, int]:
    error: dict[str, Any] = {"code": code, "message": message, "retryable": False}
    if hint:
        error["hint"] = hint
    error["details"] = None
    envelope = {"v": 1, "request_id": request_id, "ok": False, "error": error, "warnings": []}
    return json.dumps(envelope, separators=(",", ":")).encode(), exit_code


def attach_context(document: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Attach the ambient context to a request that needs one; report whether it changed."""
    from memoree.context import CONTEXT_FREE_OPS, resolve

    if "context" in document and document["context"] is not None:
        return document, False
    if document.get("op") in CONTEXT_FREE_OPS:
        return document, False
    resolved = resolve()
    if resolved is None:
        return document, False
    context, source = resolved
    return {**document, "context": context, "context_source": source}, True


def prepare(raw: bytes) -> tuple[bytes, str] | tuple[bytes, int]:
    """Either ``(request bytes, request_id)`` ready to send, or an error ``(envelope, exit)``."""
    from memoree.context import ContextResolutionError

    try:
        document = json.loads(raw)
    except RecursionError:
        return _error("req_cli", "INVALID_REQUEST", "invalid request: JSON nests too deeply", 2)
    except (ValueError, UnicodeDecodeError) as exc:
        return _error("req_cli", "INVALID_REQUEST", f"invalid request: stdin is not one JSON request: {exc}", 2)
    if not isinstance(document, dict):
        return _error("req_cli", "INVALID_REQUEST", "invalid request: the request must be a JSON object", 2)
    request_id = document.get("request_id")
    request_id = request_id if isinstance(request_id, str) and request_id else "req_cli"
    try:
        document, changed = attach_context(document)
    except ContextResolutionError as exc:
        return _error(request_id, "CONFIG_ERROR", f"configuration error: {exc}", 2)
    if changed:
        raw = json.dumps(document, separators=(",", ":")).encode()
    return raw, request_id


def send_in_process(raw: bytes, data_dir: Path | None) -> tuple[bytes, int]:
    from memoree.paths import data_dir as default_data_dir
    from memoree.service import Service

    service = Service(data_dir or default_data_dir())
    try:
        reply = service.handle_bytes(raw, fallback_request_id="req_cli")
    finally:
        service.close()
    return reply.body, reply.exit_code


def _parse_args(argv: list[str]) -> tuple[bool, Path | None] | None:
    pretty, data_dir = False, None
    args = iter(argv)
    for arg in args:
        if arg == "--pretty":
            pretty = True
        elif arg == "--data-dir":
            value = next(args, None)
            if value is None:
                return None
            data_dir = Path(value)
        elif arg.startswith("--data-dir="):
            data_dir = Path(arg.split("=", 1)[1])
        else:
            return None
    if data_dir is None and os.environ.get("MEMOREE_DATA_DIR"):
        data_dir = Path(os.environ["MEMOREE_DATA_DIR"])
    return pretty, data_dir


def run(raw: bytes, data_dir: Path | None = None) -> tuple[bytes, int]:
    """Answer one raw request: the envelope bytes and the exit code."""
    prepared = prepare(raw)
    if isinstance(prepared[1], int):
        return prepared  # type: ignore[return-value]
    return send_in_process(prepared[0], data_dir)


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        print("Reads one JSON request from stdin and prints one JSON response envelope.")
        return 0
    parsed = _parse_args(argv)
    if parsed is None:
        print(USAGE, file=sys.stderr)
        return 2
    pretty, data_dir = parsed
    body, exit_code = run(sys.stdin.buffer.read(), data_dir)
    if pretty:
        body = json.dumps(json.loads(body), indent=2, ensure_ascii=False).encode()
    sys.stdout.buffer.write(body + b"\n")
    sys.stdout.flush()
    return exit_code
