"""What every CLI command shares: the typer app and its top-level groups, the global options,
and the helpers that send a request, run work on the store and print the resulting envelope.

Every command prints the envelope ``memoree call`` would (``--pretty`` indents it, ``--human``
renders it) and exits with the error class's code. Mutations get a fresh idempotency key per
invocation (``auto_<request_id>``) unless ``--idempotency-key`` is given; ``memoree call`` never
mints one. Envelopes come from ``memoree.protocol`` (``documents`` for the few built here: local
results and local failures), never from a hand-built dict.
"""

from __future__ import annotations

import base64
import contextlib
import json
import mimetypes
import sys
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, Optional

import typer

from memoree.cli.coercion import install as install_lean_coercion
from memoree.client import call as callcmd
from memoree.protocol.documents import error_document, request_document, success_document

if TYPE_CHECKING:
    from memoree.errors import MemoreeError

__all__ = [
    "HorizonOption", "IdemOption", "OPTIONS", "Options", "ReasonOption", "answer", "app", "artifact_app",
    "claim_app", "content_of", "context_app", "drop_none", "emit", "fail", "guess_media_type",
    "new_request_id", "ok", "on_store", "print_document", "read_source", "send", "session_app",
    "with_engine",
]

install_lean_coercion()  # before any command parses: plain options convert without pydantic

app = typer.Typer(
    help="memoree: local, event-sourced memory for AI agents.",
    no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False,
    # Plain click help and usage errors: half the start-up of rich's panels (typer commands must
    # start in 0.3 s), and an agent reading --help gets text, not box-drawing characters.
    rich_markup_mode=None,
)
artifact_app = typer.Typer(help="Store, read, revise and forget evidence artifacts.", no_args_is_help=True)
claim_app = typer.Typer(help="Assert, read, revise and retract claims that cite evidence.", no_args_is_help=True)
context_app = typer.Typer(help="Inspect the ambient context.", no_args_is_help=True)
session_app = typer.Typer(help="Run commands inside a task context.", no_args_is_help=True)
app.add_typer(artifact_app, name="artifact")
app.add_typer(claim_app, name="claim")
app.add_typer(context_app, name="context")
app.add_typer(session_app, name="session")


class Options:
    data_dir: Optional[Path] = None
    pretty: bool = False
    endpoint: Optional[str] = None
    autostart: bool = True
    in_process: bool = False
    human: bool = False

    def call_options(self) -> callcmd.CallOptions:
        return callcmd.CallOptions(data_dir=self.data_dir, endpoint=self.endpoint,
                                   autostart=self.autostart, in_process=self.in_process,
                                   pretty=self.pretty)


OPTIONS = Options()

DataDirOption = typer.Option(None, "--data-dir", help="Data directory (default: MEMOREE_DATA_DIR, MEMOREE_HOME/data or the platform's).")


@app.callback()
def main(
    data_dir: Optional[Path] = DataDirOption,
    pretty: bool = typer.Option(False, "--pretty", help="Indent the JSON envelope."),
    endpoint: Optional[str] = typer.Option(None, "--endpoint", envvar="MEMOREE_ENDPOINT", help="Daemon endpoint: unix://PATH or tcp://127.0.0.1:PORT."),
    no_autostart: bool = typer.Option(False, "--no-autostart", help="Never start the default daemon (also MEMOREE_NO_AUTOSTART=1)."),
    in_process: bool = typer.Option(False, "--in-process", help="Open the store in this process instead of using the daemon."),
    human: bool = typer.Option(False, "--human", help="Print a readable table or Markdown instead of the JSON envelope (errors on stderr)."),
    version: bool = typer.Option(False, "--version", help="Print the version and exit.", is_eager=True,
                                 callback=lambda value: print_version() if value else None),
) -> None:
    """memoree: local, event-sourced memory for AI agents.

    Global options may also follow the command: `memoree search "x" --human`.
    """
    OPTIONS.data_dir = data_dir
    OPTIONS.pretty = pretty
    OPTIONS.endpoint = endpoint
    OPTIONS.autostart = not no_autostart
    OPTIONS.in_process = in_process
    OPTIONS.human = human


def print_version() -> None:
    from memoree import __version__

    typer.echo(f"memoree {__version__}")
    raise typer.Exit(0)


@app.command("version")
def version_command() -> None:
    """Print the version (also: memoree --version)."""
    print_version()


# The root's options, by how many values each takes, that may also follow a sub-command.
GLOBAL_OPTIONS = {"--pretty": 0, "--human": 0, "--in-process": 0, "--no-autostart": 0,
                  "--data-dir": 1, "--endpoint": 1}


def hoist_global_options(argv: list[str], command: Any = None) -> list[str]:
    """Move root options written after the sub-command to the front, unless that command has an
    option of the same name (``backup restore --data-dir`` keeps its own); ``--`` ends the scan.
    ``command`` is the app's click command when the caller has built it already."""
    if command is None:
        import typer.main

        command = typer.main.get_command(app)
    path: list[str] = []
    rest = list(argv)
    while rest and not rest[0].startswith("-") and rest[0] in getattr(command, "commands", {}):
        command = command.commands[rest[0]]
        path.append(rest.pop(0))
    if not path:
        return argv
    own = {name for param in getattr(command, "params", []) for name in getattr(param, "opts", [])}
    hoisted: list[str] = []
    kept: list[str] = []
    index = 0
    while index < len(rest):
        word = rest[index]
        if word == "--":
            kept += rest[index:]
            break
        name, _, inline = word.partition("=")
        arity = GLOBAL_OPTIONS.get(name)
        has_value = arity == 0 or bool(inline) or index + 1 < len(rest)
        if arity is not None and name not in own and has_value:
            take = 1 if inline or arity == 0 else 2
            hoisted += rest[index:index + take]
            index += take
            continue
        kept.append(word)
        index += 1
    return [*hoisted, *path, *kept]


def new_request_id() -> str:
    from memoree.ids import new_id

    return new_id("req")


def send(op: str, payload: dict[str, Any], *, idempotency_key: Optional[str] = None) -> None:
    """Send one request for a declared op (a mutation gets a fresh key unless one is given)."""
    from memoree.cli.progress import busy
    from memoree.protocol.ops import OPS

    spec = OPS[op]
    request_id = new_request_id()
    key = (idempotency_key or f"auto_{request_id}") if spec.mutating else None
    document = request_document(request_id, op, payload, idempotency_key=key)
    with busy(f"{op} …") if spec.long_running else _nothing_to_show():
        body, exit_code = callcmd.run(json.dumps(document).encode(), OPTIONS.call_options())
    emit(body)
    raise typer.Exit(exit_code)


@contextlib.contextmanager
def _nothing_to_show() -> Any:
    yield


def emit(body: bytes) -> None:
    """Print an envelope: compact JSON, ``--pretty`` JSON, or ``--human`` text (errors on stderr)."""
    if OPTIONS.human:
        from memoree.cli.render import render

        envelope = json.loads(body)
        typer.echo(render(envelope), err=not envelope.get("ok"))
        return
    if OPTIONS.pretty:
        body = json.dumps(json.loads(body), indent=2, ensure_ascii=False).encode()
    sys.stdout.buffer.write(body + b"\n")
    sys.stdout.flush()


def drop_none(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def read_source(path: str) -> tuple[bytes, str]:
    if path == "-":
        return sys.stdin.buffer.read(), "stdin"
    source = Path(path).expanduser().resolve()
    try:
        return source.read_bytes(), str(source)
    except OSError as exc:
        typer.echo(f"error: cannot read {path}: {exc.strerror}", err=True)
        raise typer.Exit(2) from None


def content_of(data: bytes) -> dict[str, str]:
    try:
        return {"type": "text", "data": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"type": "base64", "data": base64.b64encode(data).decode("ascii")}


def default_title(path: str, data: bytes) -> str:
    """A Markdown file's first heading, else the file's name ('stdin' for -)."""
    if path.endswith((".md", ".markdown")):
        for line in data.decode("utf-8", "replace").splitlines():
            if line.startswith("# ") and line[2:].strip():
                return line[2:].strip()[:200]
    return "stdin" if path == "-" else Path(path).name


def guess_media_type(path: str) -> str:
    if path == "-":
        return "text/plain; charset=utf-8"
    guessed, _ = mimetypes.guess_type(path)
    if guessed is None:
        return "text/plain; charset=utf-8" if path.endswith((".txt", ".md", ".log")) else "application/octet-stream"
    return f"{guessed}; charset=utf-8" if guessed.startswith("text/") else guessed


IdemOption = typer.Option(None, "--idempotency-key", help="Logical mutation key (default: fresh per invocation).")


def print_document(document: dict[str, Any]) -> None:
    if OPTIONS.human and "ok" in document:
        from memoree.cli.render import render

        typer.echo(render(document), err=not document["ok"])
        return
    indent = 2 if OPTIONS.pretty else None
    separators = None if indent else (",", ":")
    typer.echo(json.dumps(document, indent=indent, separators=separators, ensure_ascii=False))


def ok(result: Any) -> None:
    """Print a success envelope around a result computed here, not by the service."""
    print_document(success_document(new_request_id(), result))


def fail(error: MemoreeError) -> NoReturn:
    """Print the error envelope for ``error`` and exit with its class's code."""
    print_document(error_document(new_request_id(), error.to_body()))
    raise typer.Exit(error.exit_code)


def answer(work: Callable[[], Any]) -> None:
    """Run ``work`` and print its result as a success envelope, or its error as an error envelope."""
    from memoree.errors import MemoreeError

    try:
        result = work()
    except MemoreeError as exc:
        fail(exc)
    ok(result)


def on_store(action: Callable[[Any], Any]) -> Any:
    """Open the store in this process (SQLite serializes it with any daemon), run ``action``, close."""
    from memoree.client.paths import data_dir
    from memoree.service.engine import Engine

    engine = Engine(OPTIONS.data_dir or data_dir())
    try:
        return action(engine)
    finally:
        engine.close()


def with_engine(action: Callable[[Any], Any]) -> None:
    """The one way to run an administrative action on the store and print its envelope."""
    answer(lambda: on_store(action))


HorizonOption = typer.Option("ambient", "--horizon", help="ambient, workspace or personal.")
ReasonOption = typer.Option(None, "--reason", help="Why a broader horizon is needed (required for workspace/personal).")
