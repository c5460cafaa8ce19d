"""Getting started and discovery: ``call``, ``init``, ``context show``, ``session exec``,
``capabilities``, ``schema``, ``instructions`` and ``reindex``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

import typer

from memoree.client import call as callcmd
from memoree.client.context import MARKER_NAME, ContextResolutionError, find_marker, read_marker, resolve, task_id_for
from memoree.errors import ConfigError
from memoree.cli.common import (
    OPTIONS,
    app,
    context_app,
    fail,
    ok,
    send,
    session_app,
    with_engine,
)

@app.command()
def call(pretty: bool = typer.Option(False, "--pretty", help="Indent the JSON envelope.")) -> None:
    """Read one JSON request on stdin and print one JSON response envelope."""
    argv = ["--pretty"] if pretty or OPTIONS.pretty else []
    if OPTIONS.data_dir:
        argv += ["--data-dir", str(OPTIONS.data_dir)]
    if OPTIONS.endpoint:
        argv += ["--endpoint", OPTIONS.endpoint]
    argv += ["--no-autostart"] if not OPTIONS.autostart else []
    argv += ["--in-process"] if OPTIONS.in_process else []
    raise typer.Exit(callcmd.main(argv))


@app.command()
def init(
    name: Optional[str] = typer.Option(None, "--name", help="Project name recorded in the marker (default: the folder's name)."),
    workspace: Optional[str] = typer.Option(None, "--workspace", help="Join an existing workspace id instead of creating one."),
    directory: Path = typer.Option(Path("."), "--directory", help="Folder that gets the marker."),
) -> None:
    """Create a .memoree.toml marker that gives this folder tree its own project context."""
    from memoree.ids import new_id

    folder = directory.expanduser().resolve()
    marker = folder / MARKER_NAME
    workspace_id = workspace or new_id("wsp")
    project_id = new_id("prj")
    project_name = name or folder.name
    import tomli_w  # a TOML writer: JSON string escapes (surrogate pairs) are not TOML

    text = "# memoree project marker: commands run below this folder share this context.\n" + tomli_w.dumps(
        {"schema": 1, "workspace_id": workspace_id, "project_id": project_id, "name": project_name, "pins": []})
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        fail(ConfigError(f"{marker} already exists; it is never overwritten"))
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    ok({"marker": str(marker), "workspace_id": workspace_id, "project_id": project_id,
        "name": project_name})


@context_app.command("show")
def context_show() -> None:
    """Show the ambient context this folder resolves to, and where it came from."""
    try:
        resolved = resolve()
    except ContextResolutionError as exc:
        fail(ConfigError(str(exc)))
    if resolved is None:
        ok({"resolved": False})
        raise typer.Exit(5)
    context, source = resolved
    ok({"resolved": True, "resolved_from": source, "context": context})


@session_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def session_exec(
    ctx: typer.Context,
    task: str = typer.Option(..., "--task", help="Task name; its id is derived from the project and the name."),
) -> None:
    """Run a command with MEMOREE_CONTEXT set to this project's context plus a task."""
    command = [arg for arg in ctx.args if arg != "--"] if ctx.args[:1] == ["--"] else list(ctx.args)
    if not command:
        typer.echo("error: give the command after --, e.g. memoree session exec --task T -- memoree call", err=True)
        raise typer.Exit(2)
    marker = find_marker(Path.cwd())
    if marker is None:
        typer.echo("error: no .memoree.toml here or above; run `memoree init` first", err=True)
        raise typer.Exit(5)
    try:
        document = read_marker(marker)
    except ContextResolutionError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    context = {
        "workspace_id": document["workspace_id"], "project_id": document["project_id"],
        "task_id": task_id_for(document["workspace_id"], document["project_id"], task),
        "pins": document.get("pins", []),
    }
    env = {**os.environ, "MEMOREE_CONTEXT": json.dumps(context)}
    if OPTIONS.data_dir:
        env["MEMOREE_DATA_DIR"] = str(OPTIONS.data_dir)
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        typer.echo(f"error: cannot run {command[0]}: {exc.strerror}", err=True)
        raise typer.Exit(127) from None


@app.command()
def capabilities() -> None:
    """Print the running implementation's operations and limits."""
    send("capabilities", {})


@app.command()
def schema() -> None:
    """Print the JSON Schema bundle of every request, input and result."""
    send("schema", {})


@app.command()
def instructions(fmt: str = typer.Option("markdown", "--format", help="markdown, json, agents-md or claude-md")) -> None:
    """Print instructions for agents using memoree."""
    send("instructions", {"format": fmt})


@app.command()
def reindex(
    projection: Optional[list[str]] = typer.Option(None, "--projection", help="Rebuild only this projection (repeatable)."),
) -> None:
    """Drop projections and rebuild them by replaying the event log."""
    from memoree.cli.progress import progress_reporter

    def rebuild(engine: Any) -> dict[str, Any]:
        with progress_reporter("reindex", engine.head()) as advance:
            return engine.reindex(projection, progress=advance, phase=advance.phase)

    with_engine(rebuild)
