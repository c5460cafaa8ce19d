"""``memoree call``: one JSON request on stdin, one compact JSON envelope on stdout.

This path runs once per agent action, so it imports only the standard library until it must
answer: it parses the request, attaches the resolved ambient context when the op needs one (it
never invents an idempotency key), hands the bytes to the service and prints the envelope.
Diagnostics go to stderr; the exit code follows the error class (0 on success).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: ``typing`` and ``pathlib`` are not on the call's import path
    from typing import Any

from memoree.protocol import strictjson
from memoree.protocol.documents import error_body, error_document

__all__ = ["attach_context", "main"]

USAGE = ("usage: memoree call [--pretty] [--endpoint EP] [--no-autostart] [--in-process] "
         "[--data-dir DIR] < request.json")


def _error(request_id: str, code: str, message: str, exit_code: int,
           hint: str | None = None, retryable: bool = False) -> tuple[bytes, int]:
    body = error_body(code, message, retryable=retryable, hint=hint)
    return strictjson.dumps(error_document(request_id, body)).encode(), exit_code


def attach_context(document: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Attach the ambient context to a request that needs one; report whether it changed."""
    from memoree.client.context import CONTEXT_FREE_OPS, resolve

    if "context" in document and document["context"] is not None:
        return document, False
    if document.get("op") in CONTEXT_FREE_OPS:
        return document, False
    resolved = resolve()
    if resolved is None:
        return document, False
    context, source = resolved
    return {**document, "context": context, "context_source": source}, True


# Administrative ops that replay or copy the whole store may run for minutes in the daemon: the
# client waits for them longer than the protocol's 30 s frame timeout.
LONG_RUNNING_OPS = frozenset({"verify", "backup.create"})
LONG_OPS_TIMEOUT_S = 3600.0


class Prepared:
    """A request ready to send: its bytes, its id (for client-side errors) and how long to wait."""

    __slots__ = ("raw", "request_id", "long_running")

    def __init__(self, raw: bytes, request_id: str, long_running: bool) -> None:
        self.raw, self.request_id, self.long_running = raw, request_id, long_running


def prepare(raw: bytes) -> Prepared | tuple[bytes, int]:
    """Either a request ready to send, or an error ``(envelope, exit code)``."""
    from memoree.client.context import ContextResolutionError

    try:
        document = strictjson.loads(raw)
    except strictjson.DuplicateKey as exc:
        return _error("req_cli", "INVALID_REQUEST", f"invalid request: {exc}", 2)
    except RecursionError:
        return _error("req_cli", "INVALID_REQUEST", "invalid request: JSON nests too deeply", 2)
    except (ValueError, UnicodeDecodeError) as exc:
        return _error("req_cli", "INVALID_REQUEST", f"invalid request: stdin is not one JSON request: {exc}", 2)
    if not isinstance(document, dict):
        return _error("req_cli", "INVALID_REQUEST", "invalid request: the request must be a JSON object", 2)
    request_id = document.get("request_id")
    request_id = request_id if isinstance(request_id, str) and request_id else "req_cli"
    if not isinstance(document.get("op", ""), str):
        return _error(request_id, "INVALID_REQUEST", "invalid request: `op` must be a string naming an operation", 2)
    try:
        document, changed = attach_context(document)
    except ContextResolutionError as exc:
        return _error(request_id, "CONFIG_ERROR", f"configuration error: {exc}", 2)
    if changed:
        raw = strictjson.dumps(document).encode()
    return Prepared(raw, request_id, document.get("op") in LONG_RUNNING_OPS)


def send_in_process(raw: bytes, data_dir: str | os.PathLike[str] | None) -> tuple[bytes, int]:
    from memoree.client.paths import data_dir as default_data_dir
    from memoree.service.service import Service

    service = Service(data_dir or default_data_dir())
    try:
        reply = service.handle_bytes(raw, fallback_request_id="req_cli")
        if reply.ok:
            from memoree.eventlog.sealing import maybe_seal

            maybe_seal(service.engine)
    finally:
        service.close()
    return reply.body, reply.exit_code


def exit_code_of(body: bytes) -> int:
    """The exit code an envelope implies, read without decoding a large success body."""
    marker = body.find(b',"ok":', 0, 1200)
    if marker >= 0 and body.startswith(b"true", marker + 6):
        return 0
    from memoree.errors import EXIT_CODES

    try:
        envelope = strictjson.loads(body)
    except ValueError:
        return 1
    if envelope.get("ok"):
        return 0
    return EXIT_CODES.get(envelope.get("error", {}).get("code"), 1)


def send_via_daemon(request: Prepared, options: CallOptions) -> tuple[bytes, int]:
    from memoree.client.transport import (
        IO_TIMEOUT_S,
        ClientConfigError,
        ClientUnauthorized,
        Endpoint,
        TransportFailure,
        request_via_daemon,
    )

    request_id = request.request_id
    try:
        endpoint = Endpoint.parse(options.endpoint) if options.endpoint else None
        body = request_via_daemon(request.raw, endpoint=endpoint, data_dir=options.data_dir,
                                  autostart_allowed=options.autostart,
                                  io_timeout=LONG_OPS_TIMEOUT_S if request.long_running else IO_TIMEOUT_S)
    except TransportFailure as exc:
        return _error(request_id, "TRANSPORT_ERROR", f"transport error: {exc}", 1, retryable=True)
    except ClientConfigError as exc:
        return _error(request_id, "CONFIG_ERROR", f"configuration error: {exc}", 2)
    except ClientUnauthorized as exc:
        return _error(request_id, "UNAUTHORIZED", f"unauthorized: {exc}", 9,
                      hint="Over TCP send the store's secret: MEMOREE_SECRET, MEMOREE_SECRET_FILE or "
                           "--data-dir of the store (`memoree secret show` prints it).")
    return body, exit_code_of(body)


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


class CallOptions:
    """Where a request goes: the daemon (default endpoint, autostart) or the in-process store.

    The data dir is kept as text: building a ``Path`` would import ``pathlib`` on every call."""

    def __init__(self, *, data_dir: str | os.PathLike[str] | None = None, endpoint: str | None = None,
                 autostart: bool = True, in_process: bool = False, pretty: bool = False) -> None:
        self.data_dir = os.fspath(data_dir) if data_dir else os.environ.get("MEMOREE_DATA_DIR") or None
        self.endpoint = endpoint or os.environ.get("MEMOREE_ENDPOINT") or None
        self.autostart = autostart and not _truthy("MEMOREE_NO_AUTOSTART")
        self.in_process = in_process or _truthy("MEMOREE_IN_PROCESS")
        self.pretty = pretty


def run(raw: bytes, options: CallOptions | None = None) -> tuple[bytes, int]:
    """Answer one raw request: the envelope bytes and the exit code."""
    options = options or CallOptions()
    prepared = prepare(raw)
    if not isinstance(prepared, Prepared):
        return prepared
    if options.in_process:
        return send_in_process(prepared.raw, options.data_dir)
    return send_via_daemon(prepared, options)


def _parse_args(argv: list[str]) -> CallOptions | None:
    options = CallOptions()
    args = iter(argv)
    for arg in args:
        name, _, inline = arg.partition("=")
        if arg == "--pretty":
            options.pretty = True
        elif arg == "--no-autostart":
            options.autostart = False
        elif arg == "--in-process":
            options.in_process = True
        elif name in ("--data-dir", "--endpoint"):
            value = inline or next(args, None)
            if not value:
                return None
            if name == "--data-dir":
                options.data_dir = value
            else:
                options.endpoint = value
        else:
            return None
    return options


def main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        print(USAGE)
        print("Reads one JSON request from stdin and prints one JSON response envelope.")
        print("  --endpoint EP     unix://PATH or tcp://127.0.0.1:PORT (default: the local daemon)")
        print("  --no-autostart    do not start the default daemon when none answers")
        print("  --in-process      open the store in this process instead of using the daemon")
        print("  --data-dir DIR    the store's data directory")
        return 0
    options = _parse_args(argv)
    if options is None:
        print(USAGE, file=sys.stderr)
        return 2
    body, exit_code = run(sys.stdin.buffer.read(), options)
    if options.pretty:
        import json

        body = json.dumps(json.loads(body), indent=2, ensure_ascii=False).encode()
    try:
        sys.stdout.buffer.write(body + b"\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`| head -c 0`): nothing left to tell it. Point stdout at
        # /dev/null so the interpreter's own flush at exit stays quiet too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return exit_code
