"""Agent-integration commands: ``mcp``, ``remember``, ``checkpoint``, ``pending``, ``compiler``, ``import``.

``memoree.cli.app`` calls ``register`` once; the commands here are caller-side compositions, not
protocol ops, so none of them appears in ``capabilities``. Each prints one JSON document on
stdout shaped like a protocol envelope (``ok``, then ``result`` or a typed ``error``) and exits with
the error class's code; diagnostics and progress go to stderr. Heavy modules (the MCP SDK, rich)
are imported inside the command that needs them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import typer

from memoree.errors import InvalidRequest, MemoreeError

__all__ = ["register"]


def register(app: typer.Typer, options: Any) -> None:
    """Add the agent-integration commands to the root app; ``options`` is the CLI's global state."""
    _Commands(options).install(app)


class _Commands:
    def __init__(self, options: Any) -> None:
        self.options = options

    def install(self, app: typer.Typer) -> None:
        pending_app = typer.Typer(help="Checkpoint notes waiting in quarantine; preview or apply them.", no_args_is_help=True)
        compiler_app = typer.Typer(help="The external command `remember` asks for claim proposals.", no_args_is_help=True)
        import_app = typer.Typer(help="Import memories from other agent memory stores.", no_args_is_help=True)
        app.command("mcp")(self.mcp)
        app.command("remember")(self.remember)
        app.command("checkpoint")(self.checkpoint)
        pending_app.command("list")(self.pending_list)
        pending_app.command("show")(self.pending_show)
        pending_app.command("preview")(self.pending_preview)
        pending_app.command("apply")(self.pending_apply)
        pending_app.command("drop")(self.pending_drop)
        compiler_app.command("configure")(self.compiler_configure)
        compiler_app.command("status")(self.compiler_status)
        import_app.command("mcp-memory")(self.import_mcp_memory)
        import_app.command("mem0")(self.import_mem0)
        app.add_typer(pending_app, name="pending")
        app.add_typer(compiler_app, name="compiler")
        app.add_typer(import_app, name="import")

    # -- mcp ---------------------------------------------------------------------------------

    def mcp(self) -> None:
        """Serve the protocol as MCP tools over stdio (register with: claude mcp add memoree -- memoree mcp)."""
        from memoree.agents.mcp_server import run

        run(self.options.call_options())

    # -- remember ----------------------------------------------------------------------------

    def remember(
        self,
        text: Optional[list[str]] = typer.Argument(None, help="The text to remember, or - for stdin."),
        file: Optional[Path] = typer.Option(None, "--file", help="Read the text from this file."),
        raw: bool = typer.Option(False, "--raw", help="Store the text only; do not ask the compiler for claims."),
        apply: bool = typer.Option(False, "--apply", help="Write it (default: preview, which writes nothing)."),
        title: Optional[str] = typer.Option(None, "--title", help="Artifact title (default: from the first line)."),
        kind: str = typer.Option("memory_note", "--kind", help="Artifact kind."),
        idempotency_key: Optional[str] = typer.Option(None, "--idempotency-key", help="Root of the derived keys (default: a digest of the note as stored)."),
    ) -> None:
        """Store a note and the claims a compiler finds in it, each quote verified to exact bytes."""
        from memoree.agents import remember

        def work() -> dict[str, Any]:
            body = _read_text(text, file)
            return remember.remember(body, apply=apply, raw=raw, frozen=_freeze(),
                                     options=self.options.call_options(), title=title, kind=kind,
                                     idempotency_key=idempotency_key)

        self._emit(work)

    # -- checkpoint and pending --------------------------------------------------------------

    def checkpoint(
        self,
        session: str = typer.Option(..., "--session", help="Session id; its earlier note is replaced."),
        task: Optional[str] = typer.Option(None, "--task", help="Task name; the note applies to that task's context."),
        text: list[str] = typer.Argument(..., help="The note (at most 64 KiB), or - for stdin."),
    ) -> None:
        """Keep one private note per session in quarantine; nothing reads it until `pending apply`."""
        from memoree.agents import pending

        def work() -> dict[str, Any]:
            body = _read_text(text, None)
            frozen = _freeze()
            context, source = frozen if frozen is not None else (None, None)
            if context is not None and task:
                from memoree.client.context import task_id_for

                context = {**context, "task_id": task_id_for(context["workspace_id"], context["project_id"], task)}
            note, replaced = pending.write_checkpoint(self._quarantine(), session, body, task=task,
                                                      context=context, context_source=source)
            return {**note.listing(), "replaced": replaced}

        self._emit(work)

    def pending_list(self) -> None:
        """List pending checkpoint notes (without their text)."""
        from memoree.agents import pending

        self._emit(lambda: {"pending": [n.listing() for n in pending.list_notes(self._quarantine())]})

    def pending_show(self, session: str = typer.Argument(..., help="Session id.")) -> None:
        """Print one pending note, text included."""
        from memoree.agents import pending

        self._emit(lambda: {**(note := pending.read_note(self._quarantine(), session)).listing(), "text": note.text})

    def pending_preview(
        self,
        session: str = typer.Argument(..., help="Session id."),
        raw: bool = typer.Option(False, "--raw", help="Plan the text only, without the compiler."),
    ) -> None:
        """Preview what `pending apply` would write for a session's note (writes nothing)."""
        self._emit(lambda: self._pending_remember(session, apply=False, raw=raw, idempotency_key=None))

    def pending_apply(
        self,
        session: str = typer.Argument(..., help="Session id."),
        raw: bool = typer.Option(False, "--raw", help="Store the text only, without the compiler."),
        idempotency_key: Optional[str] = typer.Option(None, "--idempotency-key", help="Root of the derived keys."),
    ) -> None:
        """Write a session's note through `remember --apply`, then remove it from quarantine."""
        self._emit(lambda: self._pending_remember(session, apply=True, raw=raw, idempotency_key=idempotency_key))

    def pending_drop(self, session: str = typer.Argument(..., help="Session id.")) -> None:
        """Discard a session's note without writing it."""
        from memoree.agents import pending

        self._emit(lambda: {**pending.drop(self._quarantine(), session).listing(), "dropped": True})

    def _pending_remember(self, session: str, *, apply: bool, raw: bool,
                          idempotency_key: str | None) -> dict[str, Any]:
        from memoree.agents import pending, remember

        folder = self._quarantine()
        note = pending.read_note(folder, session)
        frozen = (note.context, note.context_source or "explicit") if note.context else _freeze()
        provenance = {"source": "memoree pending", "session": note.session}
        if note.task:
            provenance["task"] = note.task
        title = f"checkpoint {note.session}" + (f" ({note.task})" if note.task else "")
        result = remember.remember(note.text, apply=apply, raw=raw, frozen=frozen,
                                   options=self.options.call_options(), title=title,
                                   provenance=provenance, idempotency_key=idempotency_key)
        if apply:
            result["note_removed"] = pending.remove_if_unchanged(folder, note)
        return {"session": note.session, **result}

    def _quarantine(self) -> Path:
        from memoree.agents import pending

        return pending.quarantine_dir(self.options.data_dir)

    # -- compiler ----------------------------------------------------------------------------

    def compiler_configure(
        self,
        command: str = typer.Option(..., "--command", help="Command line that reads a prompt on stdin and prints a JSON proposal."),
        timeout: float = typer.Option(120.0, "--timeout", help="Seconds before the compiler counts as failed."),
    ) -> None:
        """Set the external compiler command in the config file."""
        from memoree.agents import compiler

        def work() -> dict[str, Any]:
            compiler.configure(command, timeout)
            return compiler.status()

        self._emit(work)

    def compiler_status(self) -> None:
        """Show the configured compiler command and whether its program is on PATH."""
        from memoree.agents import compiler

        self._emit(compiler.status)

    # -- import ------------------------------------------------------------------------------

    def import_mcp_memory(self, file: Path = typer.Argument(..., help="JSONL file of the MCP memory server.")) -> None:
        """Import entities, observations and relations from the MCP memory server's JSONL."""
        self._import("mcp-memory", file)

    def import_mem0(self, file: Path = typer.Argument(..., help="JSON export of mem0 memories.")) -> None:
        """Import memories from a mem0 JSON export."""
        self._import("mem0", file)

    def _import(self, fmt: str, file: Path) -> None:
        from memoree.agents import importers
        from memoree.agents.caller import Sender
        from memoree.errors import NoAmbientContext, error_class_for_code
        from memoree.protocol.ops import OPS

        def work() -> dict[str, Any]:
            frozen = _freeze()
            if frozen is None:
                raise NoAmbientContext("no ambient memory context could be resolved")
            summary = importers.import_file(
                fmt, file.expanduser(), Sender(self.options.call_options()), context=frozen[0],
                context_source=frozen[1], relations_supported="relation.put" in OPS,
                progress=importers.stderr_is_terminal())
            if summary.failures:
                first = summary.failures[0]
                raise error_class_for_code(first["code"])(
                    f"{len(summary.failures)} record(s) were not imported; first: {first['message']}",
                    details={"summary": summary.to_json()})
            return summary.to_json()

        self._emit(work)

    # -- output ------------------------------------------------------------------------------

    def _emit(self, work: Callable[[], dict[str, Any]]) -> None:
        from memoree.ids import new_id

        request_id = new_id("req")
        try:
            result = work()
        except MemoreeError as exc:
            self._print({"v": 1, "request_id": request_id, "ok": False, "error": exc.to_body(), "warnings": []})
            raise typer.Exit(exc.exit_code) from None
        self._print({"v": 1, "request_id": request_id, "ok": True, "result": result, "warnings": []})

    def _print(self, document: dict[str, Any]) -> None:
        if self.options.pretty:
            text = json.dumps(document, indent=2, ensure_ascii=False)
        else:
            text = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def _freeze() -> tuple[dict[str, Any], str] | None:
    from memoree.agents.caller import freeze_context

    return freeze_context()


def _read_text(words: list[str] | None, file: Path | None) -> str:
    """The text from ``--file``, stdin (``-``) or the words given, as UTF-8."""
    if file is not None and words:
        raise InvalidRequest("give the text either as arguments, - for stdin, or --file, not both")
    if file is not None:
        try:
            data = file.expanduser().read_bytes()
        except OSError as exc:
            raise InvalidRequest(f"cannot read {file}: {exc.strerror}") from None
    elif words == ["-"]:
        data = sys.stdin.buffer.read()
    elif words:
        return " ".join(words)
    else:
        raise InvalidRequest("give the text as arguments, - for stdin, or --file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest("the text must be UTF-8") from None
