"""The human command line (typer): thin wrappers that build protocol requests.

Every wrapper prints the same JSON envelope ``memoree call`` would (``--pretty`` indents it) and
exits with the error class's code. Mutation wrappers mint a fresh idempotency key per invocation
(``auto_<request_id>``) unless ``--idempotency-key`` is given; ``memoree call`` never does.
"""

from __future__ import annotations

import base64
import contextlib
import json
import mimetypes
import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from memoree.client import call as callcmd
from memoree.client.context import MARKER_NAME, ContextResolutionError, find_marker, read_marker, resolve, task_id_for

__all__ = ["app"]

app = typer.Typer(
    help="memoree: local, event-sourced memory for AI agents.",
    no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False,
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
    human: bool = typer.Option(False, "--human", help="Print a readable table or Markdown instead of the JSON envelope."),
) -> None:
    """memoree: local, event-sourced memory for AI agents."""
    OPTIONS.data_dir = data_dir
    OPTIONS.pretty = pretty
    OPTIONS.endpoint = endpoint
    OPTIONS.autostart = not no_autostart
    OPTIONS.in_process = in_process
    OPTIONS.human = human


def _request_id() -> str:
    from memoree.ids import new_id

    return new_id("req")


def _send(op: str, payload: dict[str, Any], *, mutation: bool = False,
          idempotency_key: Optional[str] = None) -> None:
    request_id = _request_id()
    document: dict[str, Any] = {"v": 1, "request_id": request_id, "op": op, "input": payload}
    if mutation:
        document["idempotency_key"] = idempotency_key or f"auto_{request_id}"
    from memoree.cli.progress import busy

    with busy(f"{op} …") if op in LONG_OPS else _nothing_to_show():
        body, exit_code = callcmd.run(json.dumps(document).encode(), OPTIONS.call_options())
    _emit(body)
    raise typer.Exit(exit_code)


# Operations that can take a while; a spinner shows on a terminal's stderr while they run.
LONG_OPS = frozenset({"verify", "backup.create"})


@contextlib.contextmanager
def _nothing_to_show() -> Any:
    yield


def _emit(body: bytes) -> None:
    """Print an envelope: compact JSON, ``--pretty`` JSON, or ``--human`` text."""
    if OPTIONS.human:
        from memoree.cli.render import render

        typer.echo(render(json.loads(body)))
        return
    if OPTIONS.pretty:
        body = json.dumps(json.loads(body), indent=2, ensure_ascii=False).encode()
    sys.stdout.buffer.write(body + b"\n")
    sys.stdout.flush()


def _drop_none(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _read_source(path: str) -> tuple[bytes, str]:
    if path == "-":
        return sys.stdin.buffer.read(), "stdin"
    source = Path(path).expanduser().resolve()
    try:
        return source.read_bytes(), str(source)
    except OSError as exc:
        typer.echo(f"error: cannot read {path}: {exc.strerror}", err=True)
        raise typer.Exit(2) from None


def _content(data: bytes) -> dict[str, str]:
    try:
        return {"type": "text", "data": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"type": "base64", "data": base64.b64encode(data).decode("ascii")}


def _guess_media_type(path: str) -> str:
    if path == "-":
        return "text/plain; charset=utf-8"
    guessed, _ = mimetypes.guess_type(path)
    if guessed is None:
        return "text/plain; charset=utf-8" if path.endswith((".txt", ".md", ".log")) else "application/octet-stream"
    return f"{guessed}; charset=utf-8" if guessed.startswith("text/") else guessed


IdemOption = typer.Option(None, "--idempotency-key", help="Logical mutation key (default: fresh per invocation).")


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
    text = (
        "# memoree project marker: commands run below this folder share this context.\n"
        f"schema = 1\nworkspace_id = {json.dumps(workspace_id)}\nproject_id = {json.dumps(project_id)}\n"
        f"name = {json.dumps(project_name)}\npins = []\n"
    )
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        _print_json({"ok": False, "error": {"code": "CONFIG_ERROR", "message": f"configuration error: {marker} already exists; it is never overwritten", "retryable": False, "details": None}})
        raise typer.Exit(2) from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    _print_json({"ok": True, "result": {"marker": str(marker), "workspace_id": workspace_id,
                                        "project_id": project_id, "name": project_name}})


def _print_json(document: dict[str, Any]) -> None:
    if OPTIONS.human and "ok" in document:
        from memoree.cli.render import render

        typer.echo(render(document))
        return
    indent = 2 if OPTIONS.pretty else None
    separators = None if indent else (",", ":")
    typer.echo(json.dumps(document, indent=indent, separators=separators, ensure_ascii=False))


@context_app.command("show")
def context_show() -> None:
    """Show the ambient context this folder resolves to, and where it came from."""
    try:
        resolved = resolve()
    except ContextResolutionError as exc:
        _print_json({"ok": False, "error": {"code": "CONFIG_ERROR", "message": str(exc), "retryable": False, "details": None}})
        raise typer.Exit(2) from None
    if resolved is None:
        _print_json({"ok": True, "result": {"resolved": False}})
        raise typer.Exit(5)
    context, source = resolved
    _print_json({"ok": True, "result": {"resolved": True, "resolved_from": source, "context": context}})


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
    _send("capabilities", {})


@app.command()
def schema() -> None:
    """Print the JSON Schema bundle of every request, input and result."""
    _send("schema", {})


@app.command()
def instructions(fmt: str = typer.Option("markdown", "--format", help="markdown, json, agents-md or claude-md")) -> None:
    """Print instructions for agents using memoree."""
    _send("instructions", {"format": fmt})


@app.command()
def reindex(
    projection: Optional[list[str]] = typer.Option(None, "--projection", help="Rebuild only this projection (repeatable)."),
) -> None:
    """Drop projections and rebuild them by replaying the event log."""
    from memoree.service.engine import Engine
    from memoree.errors import MemoreeError
    from memoree.client.paths import data_dir

    from memoree.cli.progress import progress_reporter

    try:
        engine = Engine(OPTIONS.data_dir or data_dir())
        try:
            with progress_reporter("reindex", engine.head()) as advance:
                report = engine.reindex(projection, progress=advance, phase=advance.phase)
        finally:
            engine.close()
    except MemoreeError as exc:
        _print_json({"ok": False, "error": exc.to_body()})
        raise typer.Exit(exc.exit_code) from None
    _print_json({"ok": True, "result": report})


@artifact_app.command("put")
def artifact_put(
    path: str = typer.Argument(..., help="File to store, or - for stdin."),
    kind: str = typer.Option("document", "--kind", help="Free-form kind, e.g. decision, runbook."),
    title: Optional[str] = typer.Option(None, "--title", help="Title (default: the source path or 'stdin')."),
    media_type: Optional[str] = typer.Option(None, "--media-type", help="Media type (default: guessed)."),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Store a file (or stdin) as a new artifact."""
    data, source = _read_source(path)
    _send("artifact.put", {
        "kind": kind, "title": title or source, "media_type": media_type or _guess_media_type(path),
        "content": _content(data), "provenance": {"source": source},
    }, mutation=True, idempotency_key=idempotency_key)


@artifact_app.command("get")
def artifact_get(
    artifact_id: str,
    revision: Optional[str] = typer.Option(None, "--revision", help="Exact revision id."),
    metadata_only: bool = typer.Option(False, "--metadata-only", help="Omit the content."),
    output: Optional[Path] = typer.Option(None, "--output", help="Write the bytes to this file (atomically) instead of printing them."),
    force: bool = typer.Option(False, "--force", help="With --output: replace an existing file."),
) -> None:
    """Read an artifact (its current revision unless --revision)."""
    payload = _drop_none(artifact_id=artifact_id, revision_id=revision, include_content=not metadata_only)
    if output is None:
        _send("artifact.get", payload)
    document = {"v": 1, "request_id": _request_id(), "op": "artifact.get", "input": payload}
    body, exit_code = callcmd.run(json.dumps(document).encode(), OPTIONS.call_options())
    envelope = json.loads(body)
    if envelope.get("ok") and "content" in envelope["result"]:
        content = envelope["result"].pop("content")
        data = content["data"].encode() if content["type"] == "text" else base64.b64decode(content["data"])
        written = _write_atomically(output.expanduser().absolute(), data, force)
        if written is not None:
            envelope, exit_code = written, 2
        else:
            envelope["result"]["materialized_path"] = str(output.expanduser().absolute())
    _emit(json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode())
    raise typer.Exit(exit_code)


def _write_atomically(target: Path, data: bytes, force: bool) -> Optional[dict[str, Any]]:
    """Write ``data`` via a temp file and a no-clobber link (or a replace with ``force``)."""
    import tempfile

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if force:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)
            except FileExistsError:
                return {"v": 1, "request_id": "req_cli", "ok": False, "warnings": [], "error": {
                    "code": "INVALID_REQUEST", "message": f"invalid request: {target} exists; pass --force to replace it",
                    "retryable": False, "details": None}}
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return None


@artifact_app.command("revise")
def artifact_revise(
    artifact_id: str,
    path: str = typer.Argument(..., help="File with the new content, or - for stdin."),
    if_revision: str = typer.Option(..., "--if-revision", help="The revision you read (optimistic concurrency)."),
    title: Optional[str] = typer.Option(None, "--title"),
    media_type: Optional[str] = typer.Option(None, "--media-type", help="Default: keep the previous one."),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Add a new immutable revision to an artifact."""
    data, source = _read_source(path)
    _send("artifact.revise", _drop_none(
        artifact_id=artifact_id, if_revision=if_revision, title=title, media_type=media_type,
        content=_content(data), provenance={"source": source},
    ), mutation=True, idempotency_key=idempotency_key)


@artifact_app.command("history")
def artifact_history(
    artifact_id: str,
    limit: int = typer.Option(50, "--limit"),
    before_revision_number: Optional[int] = typer.Option(None, "--before-revision-number"),
) -> None:
    """List an artifact's revisions, newest first."""
    _send("artifact.history", _drop_none(artifact_id=artifact_id, limit=limit,
                                          before_revision_number=before_revision_number))


@artifact_app.command("forget")
def artifact_forget(
    artifact_id: str,
    reason: str = typer.Option(..., "--reason", help="Why (required, kept in the log)."),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Tombstone an artifact: it leaves retrieval; exact reads still work."""
    _send("artifact.forget", {"artifact_id": artifact_id, "reason": reason}, mutation=True,
          idempotency_key=idempotency_key)


def _parse_evidence(values: Optional[list[str]]) -> list[dict[str, Any]]:
    evidence = []
    for value in values or []:
        locator, _, span = value.partition("#")
        artifact_id, sep, revision_id = locator.partition("@")
        if not sep:
            typer.echo(f"error: evidence must look like ART@REV[#START-END], got {value!r}", err=True)
            raise typer.Exit(2)
        item: dict[str, Any] = {"artifact_id": artifact_id, "revision_id": revision_id}
        if span:
            start, dash, end = span.partition("-")
            if not (dash and start.isdigit() and end.isdigit()):
                typer.echo(f"error: evidence span must be START-END, got {span!r}", err=True)
                raise typer.Exit(2)
            item.update(start_byte=int(start), end_byte=int(end))
        evidence.append(item)
    return evidence


EvidenceOption = typer.Option(None, "--evidence", help="ART_ID@REV_ID[#START-END] (repeatable).")


@claim_app.command("assert")
def claim_assert(
    claim_type: str = typer.Argument(..., help="fact, decision, constraint, preference, procedure or observation"),
    statement: list[str] = typer.Argument(..., help="The statement."),
    confidence: Optional[float] = typer.Option(None, "--confidence"),
    evidence: Optional[list[str]] = EvidenceOption,
    valid_from: Optional[str] = typer.Option(None, "--valid-from", help="RFC 3339 (inclusive)."),
    valid_until: Optional[str] = typer.Option(None, "--valid-until", help="RFC 3339 (exclusive)."),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Assert a claim, citing evidence."""
    _send("claim.assert", _drop_none(
        claim_type=claim_type, statement=" ".join(statement), confidence=confidence,
        evidence=_parse_evidence(evidence), valid_from=valid_from, valid_until=valid_until,
        actor=os.environ.get("MEMOREE_ACTOR") or None,
    ), mutation=True, idempotency_key=idempotency_key)


@claim_app.command("get")
def claim_get(claim_id: str, revision: Optional[str] = typer.Option(None, "--revision")) -> None:
    """Read a claim (its current revision unless --revision)."""
    _send("claim.get", _drop_none(claim_id=claim_id, revision_id=revision))


@claim_app.command("history")
def claim_history(
    claim_id: str,
    limit: int = typer.Option(50, "--limit"),
    before_revision_number: Optional[int] = typer.Option(None, "--before-revision-number"),
) -> None:
    """List a claim's revisions, newest first."""
    _send("claim.history", _drop_none(claim_id=claim_id, limit=limit,
                                       before_revision_number=before_revision_number))


@claim_app.command("revise")
def claim_revise(
    claim_id: str,
    statement: list[str] = typer.Argument(..., help="The new statement."),
    if_revision: str = typer.Option(..., "--if-revision"),
    confidence: Optional[float] = typer.Option(None, "--confidence"),
    evidence: Optional[list[str]] = EvidenceOption,
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Revise a claim (evidence and confidence are replaced, not merged)."""
    _send("claim.revise", _drop_none(
        claim_id=claim_id, if_revision=if_revision, statement=" ".join(statement),
        confidence=confidence, evidence=_parse_evidence(evidence),
    ), mutation=True, idempotency_key=idempotency_key)


@claim_app.command("retract")
def claim_retract(
    claim_id: str,
    reason: str = typer.Option(..., "--reason"),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Retract a claim; its history stays."""
    _send("claim.retract", {"claim_id": claim_id, "reason": reason}, mutation=True,
          idempotency_key=idempotency_key)


@app.command()
def demo() -> None:
    """Store an artifact and a claim citing its bytes in a demo project, then read both back."""
    demo_context = {"workspace_id": "wsp_demo", "project_id": "prj_demo", "pins": []}
    text = "SQLite is authoritative; the filesystem CAS stores blobs.\n"

    def send(op: str, payload: dict[str, Any], key: Optional[str] = None) -> dict[str, Any]:
        document: dict[str, Any] = {"v": 1, "request_id": _request_id(), "op": op, "input": payload,
                                    "context": demo_context, "context_source": "explicit"}
        if key:
            document["idempotency_key"] = key
        body, exit_code = callcmd.run(json.dumps(document).encode(), OPTIONS.call_options())
        envelope = json.loads(body)
        typer.echo(f"$ {op}: " + json.dumps(envelope, ensure_ascii=False))
        if exit_code:
            raise typer.Exit(exit_code)
        return envelope["result"]

    art = send("artifact.put", {"kind": "decision", "title": "Storage design", "content": {"type": "text", "data": text}},
               key="demo:storage-design")
    claim = send("claim.assert", {"claim_type": "decision", "statement": "SQLite is the authoritative store.",
                                  "evidence": [{"artifact_id": art["artifact_id"], "revision_id": art["revision_id"],
                                                "start_byte": 0, "end_byte": 23}]}, key="demo:sqlite-claim")
    got = send("artifact.get", {"artifact_id": art["artifact_id"]})
    send("claim.get", {"claim_id": claim["claim_id"]})
    cited = got["content"]["data"].encode()[0:23].decode()
    typer.echo(f"\nStored {art['artifact_id']} at commit_seq {art['revision_commit_seq']}; the claim cites bytes [0, 23): {cited!r}")


# Relations and conflict cases: `memoree link`, `memoree relation list`, `memoree conflict list`.

relation_app = typer.Typer(help="Walk the typed relations around an artifact or claim.", no_args_is_help=True)
conflict_app = typer.Typer(help="See open contradictions between claims.", no_args_is_help=True)
app.add_typer(relation_app, name="relation")
app.add_typer(conflict_app, name="conflict")

RELATION_NAMES = ("derived-from", "supports", "contradicts", "supersedes", "references", "duplicates")
HorizonOption = typer.Option("ambient", "--horizon", help="ambient, workspace or personal.")
ReasonOption = typer.Option(None, "--reason", help="Why a broader horizon is needed (required for workspace/personal).")


def _entity_ref(value: str) -> tuple[str, str]:
    """``artifact:ID`` or ``claim:ID`` as ``(entity_type, id)``."""
    entity_type, sep, entity_id = value.partition(":")
    if not sep or entity_type not in ("artifact", "claim") or not entity_id:
        typer.echo(f"error: refer to an entity as artifact:ID or claim:ID, got {value!r}", err=True)
        raise typer.Exit(2)
    return entity_type, entity_id


def _relation_name(value: str) -> str:
    """A kebab-case relation name (``derived-from``) as the protocol's ``derived_from``."""
    if value.replace("_", "-") not in RELATION_NAMES:
        typer.echo(f"error: relation must be one of {'|'.join(RELATION_NAMES)}, got {value!r}", err=True)
        raise typer.Exit(2)
    return value.replace("-", "_")


@app.command()
def link(
    source: str = typer.Argument(..., help="artifact:ID or claim:ID (for supersedes: the newer claim)."),
    relation: str = typer.Argument(..., help="|".join(RELATION_NAMES)),
    target: str = typer.Argument(..., help="artifact:ID or claim:ID (for supersedes: the older claim)."),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Add a typed relation from SOURCE to TARGET."""
    source_type, source_id = _entity_ref(source)
    target_type, target_id = _entity_ref(target)
    _send("relation.put", {
        "source_type": source_type, "source_id": source_id, "relation": _relation_name(relation),
        "target_type": target_type, "target_id": target_id,
    }, mutation=True, idempotency_key=idempotency_key)


@relation_app.command("list")
def relation_list(
    anchor: str = typer.Argument(..., help="artifact:ID or claim:ID"),
    direction: str = typer.Option("both", "--direction", help="both, incoming or outgoing."),
    relation: Optional[str] = typer.Option(None, "--relation", help="Only this relation type."),
    horizon: str = HorizonOption,
    reason: Optional[str] = ReasonOption,
    limit: int = typer.Option(100, "--limit"),
    before_commit_seq: Optional[int] = typer.Option(None, "--before-commit-seq", help="Page cursor (exclusive)."),
) -> None:
    """List the relations one hop from an artifact or claim, newest first."""
    entity_type, entity_id = _entity_ref(anchor)
    _send("relation.list", _drop_none(
        entity_type=entity_type, entity_id=entity_id, direction=direction,
        relation=_relation_name(relation) if relation is not None else None, horizon=horizon,
        reason=reason, limit=limit, before_commit_seq=before_commit_seq,
    ))


@conflict_app.command("list")
def conflict_list(
    horizon: str = HorizonOption,
    reason: Optional[str] = ReasonOption,
    include_stale: bool = typer.Option(False, "--include-stale", help="Also list cases a revision made stale."),
    limit: int = typer.Option(100, "--limit"),
    before_case_sequence: Optional[int] = typer.Option(None, "--before-case-sequence", help="Page cursor (exclusive)."),
) -> None:
    """List open conflict cases, newest first."""
    _send("conflict.list", _drop_none(
        horizon=horizon, reason=reason, include_stale=include_stale, limit=limit,
        before_case_sequence=before_case_sequence,
    ))


daemon_app = typer.Typer(help="Inspect, stop or restart the local daemon.", no_args_is_help=True)
app.add_typer(daemon_app, name="daemon")


@app.command()
def serve(
    listen: Optional[str] = typer.Option(None, "--listen", help="unix://PATH or tcp://127.0.0.1:PORT (default: the local socket)."),
    dangerously_allow_non_loopback_tcp: bool = typer.Option(False, "--dangerously-allow-non-loopback-tcp", help="Listen on a non-loopback address (no authentication!)."),
    data_dir_here: Optional[Path] = typer.Option(None, "--data-dir", help="Data directory to serve."),
    lifecycle_owner: str = typer.Option("external", "--lifecycle-owner", hidden=True),
    http: Optional[str] = typer.Option(None, "--http", help="Also serve the emem REST API on HOST:PORT (loopback unless --dangerously-allow-non-loopback-tcp; port 0 picks one, see `memoree doctor`)."),
) -> None:
    """Run the daemon in the foreground until SIGINT or SIGTERM."""
    OPTIONS.data_dir = data_dir_here or OPTIONS.data_dir
    from memoree.client.transport import ClientConfigError, Endpoint, default_endpoint
    from memoree.daemon.server import serve as run_daemon
    from memoree.errors import MemoreeError
    from memoree.client.paths import data_dir

    try:
        endpoint = Endpoint.parse(listen) if listen else default_endpoint()
        from memoree.daemon.rest_host import parse_http_address

        http_address = parse_http_address(http) if http else None
        run_daemon(OPTIONS.data_dir or data_dir(), endpoint, lifecycle_owner=lifecycle_owner,
                   allow_non_loopback=dangerously_allow_non_loopback_tcp, http=http_address)
    except ClientConfigError as exc:
        _print_json({"ok": False, "error": {"code": "CONFIG_ERROR", "message": f"configuration error: {exc}", "retryable": False, "details": None}})
        raise typer.Exit(2) from None
    except MemoreeError as exc:
        _print_json({"ok": False, "error": exc.to_body()})
        raise typer.Exit(exc.exit_code) from None


@app.command()
def doctor() -> None:
    """Report the daemon's identity and health: pid, version, store, log head, projection lag."""
    _send("doctor", {})


def _default_unix_endpoint_only() -> Any:
    from memoree.client.transport import default_endpoint

    if OPTIONS.endpoint:
        _print_json({"ok": False, "error": {"code": "INVALID_REQUEST", "message": "invalid request: daemon stop/restart act only on the default local Unix endpoint", "retryable": False, "details": None}})
        raise typer.Exit(2)
    return default_endpoint()


@daemon_app.command("status")
def daemon_status() -> None:
    """Print the daemon's doctor report, or a stopped status (exit 1) when none answers."""
    from memoree.client.transport import Endpoint, default_endpoint, probe

    endpoint = Endpoint.parse(OPTIONS.endpoint) if OPTIONS.endpoint else default_endpoint()
    report = probe(endpoint)
    if report is None:
        _print_json({"v": 1, "request_id": _request_id(), "ok": True,
                     "result": {"status": "stopped", "running": False, "endpoint": str(endpoint)}, "warnings": []})
        raise typer.Exit(1)
    _print_json({"v": 1, "request_id": _request_id(), "ok": True, "result": report, "warnings": []})


def _stop_default_daemon(endpoint: Any) -> dict[str, Any]:
    import signal
    import time

    from memoree.client.transport import probe
    from memoree.hosts import pid_alive

    report = probe(endpoint)
    if report is None:
        return {"status": "stopped", "running": False, "already_stopped": True, "stopped_pid": None, "endpoint": str(endpoint)}
    pid = report.get("daemon_pid")
    if not isinstance(pid, int) or pid <= 1:
        raise typer.Exit(1)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        current = probe(endpoint)
        if current is None and not pid_alive(pid):
            return {"status": "stopped", "running": False, "already_stopped": False, "stopped_pid": pid, "endpoint": str(endpoint)}
        if current is not None and current.get("daemon_pid") != pid:
            _print_json({"ok": False, "error": {"code": "TRANSPORT_ERROR", "message": "transport error: another daemon took over the endpoint", "retryable": True, "details": None}})
            raise typer.Exit(1)
        time.sleep(0.05)
    _print_json({"ok": False, "error": {"code": "TRANSPORT_ERROR", "message": f"transport error: daemon {pid} did not stop within 5 seconds", "retryable": True, "details": None}})
    raise typer.Exit(1)


@daemon_app.command("stop")
def daemon_stop() -> None:
    """Stop the default local daemon (SIGTERM, then wait until it is gone)."""
    endpoint = _default_unix_endpoint_only()
    _print_json({"v": 1, "request_id": _request_id(), "ok": True, "result": _stop_default_daemon(endpoint), "warnings": []})


@daemon_app.command("restart")
def daemon_restart() -> None:
    """Stop the default local daemon and start a fresh one."""
    from memoree.client.transport import autostart
    from memoree.client.paths import data_dir

    endpoint = _default_unix_endpoint_only()
    _stop_default_daemon(endpoint)
    report = autostart(endpoint, OPTIONS.data_dir or data_dir())
    _print_json({"v": 1, "request_id": _request_id(), "ok": True, "result": report, "warnings": []})


log_app = typer.Typer(help="Seal, prove, export and import the event log.", no_args_is_help=True)
key_app = typer.Typer(help="Manage the store's Ed25519 node key.", no_args_is_help=True)
app.add_typer(log_app, name="log")
app.add_typer(key_app, name="key")


def _with_engine(action: Any) -> None:
    """Run an administrative action on the store directly (SQLite serializes it with any daemon)."""
    from memoree.service.engine import Engine
    from memoree.errors import MemoreeError
    from memoree.client.paths import data_dir

    try:
        engine = Engine(OPTIONS.data_dir or data_dir())
        try:
            result = action(engine)
        finally:
            engine.close()
    except MemoreeError as exc:
        _print_json({"v": 1, "request_id": _request_id(), "ok": False, "error": exc.to_body(), "warnings": []})
        raise typer.Exit(exc.exit_code) from None
    _print_json({"v": 1, "request_id": _request_id(), "ok": True, "result": result, "warnings": []})


@app.command()
def verify() -> None:
    """Check the hash chain, checkpoints, signatures, blobs and every projection (writes nothing)."""
    _send("verify", {})


@log_app.command("seal")
def log_seal() -> None:
    """Close the current Merkle batch: sign a checkpoint over every event so far."""
    from memoree.eventlog import sealing

    def action(engine: Any) -> dict[str, Any]:
        checkpoint = sealing.seal(engine)
        return {"sealed": checkpoint is not None,
                "checkpoint": sealing.checkpoint_document(checkpoint) if checkpoint else None,
                "last_commit_seq": engine.head()}

    _with_engine(action)


@log_app.command("checkpoints")
def log_checkpoints() -> None:
    """List the signed checkpoints."""
    from memoree.eventlog import sealing
    from memoree.eventlog.checkpoints import list_checkpoints

    _with_engine(lambda engine: {"checkpoints": [sealing.checkpoint_document(cp) for cp in list_checkpoints(engine.conn)]})


@log_app.command("prove")
def log_prove(
    commit_seq: int = typer.Argument(..., help="The event's position."),
    checkpoint: Optional[int] = typer.Option(None, "--checkpoint", help="Checkpoint number (default: the first covering the event)."),
) -> None:
    """Print an RFC 9162 inclusion proof of one event against a signed checkpoint."""
    from memoree.eventlog import sealing

    _with_engine(lambda engine: sealing.prove(engine, commit_seq, checkpoint))


@log_app.command("consistency")
def log_consistency(
    old: int = typer.Argument(..., help="Older checkpoint number."),
    new: int = typer.Argument(..., help="Newer checkpoint number."),
) -> None:
    """Print the RFC 9162 consistency proof between two checkpoints."""
    from memoree.eventlog import sealing

    _with_engine(lambda engine: sealing.consistency(engine, old, new))


@key_app.command("rotate")
def key_rotate() -> None:
    """Start a new node-key epoch (earlier signatures stay valid under their epochs)."""
    from memoree.eventlog import sealing

    def action(engine: Any) -> dict[str, Any]:
        sealing.seal(engine)  # the old epoch signs everything up to the rotation
        key = engine.rotate_key()
        return {"epoch": key.epoch, "public_key": key.public_b32, "commit_seq": engine.head()}

    _with_engine(action)


@log_app.command("export")
def log_export(
    output: Path = typer.Option(..., "--output", help="NDJSON file to write (must not exist)."),
    blobs: Optional[Path] = typer.Option(None, "--blobs", help="Also copy every referenced blob into this folder."),
) -> None:
    """Write the auditor export: every raw event, the signed checkpoints and no-op records."""
    from memoree.admin import transfer

    _with_engine(lambda engine: transfer.export(engine, output.expanduser().absolute(), blobs.expanduser().absolute() if blobs else None))


@log_app.command("import")
def log_import(
    export_file: Path = typer.Argument(..., help="An export written by `memoree log export`."),
    target: Path = typer.Option(..., "--data-dir", help="New, empty data dir to rebuild the store in."),
    blobs: Optional[Path] = typer.Option(None, "--blobs", help="Folder of blobs written by `log export --blobs`."),
) -> None:
    """Rebuild a store from an export by replay (positions preserved), verified before publishing."""
    from memoree.admin import transfer
    from memoree.errors import MemoreeError

    from memoree.cli.progress import busy

    try:
        with busy("import …"):
            result = transfer.import_log(export_file, target.expanduser().absolute(), blobs)
    except MemoreeError as exc:
        _print_json({"v": 1, "request_id": _request_id(), "ok": False, "error": exc.to_body(), "warnings": []})
        raise typer.Exit(exc.exit_code) from None
    _print_json({"v": 1, "request_id": _request_id(), "ok": True, "result": result, "warnings": []})


@log_app.command("migrate")
def log_migrate(
    to: str = typer.Option(..., "--to", help="postgresql://USER@HOST:PORT/DB of the shared log (empty, or holding a prefix of this log)."),
) -> None:
    """Move this data dir's SQLite log into PostgreSQL by replay (positions, bytes, checkpoints, blobs kept)."""
    from memoree.eventlog import migrate as logmigrate
    from memoree.errors import MemoreeError
    from memoree.client.paths import data_dir

    try:
        result = logmigrate.migrate((OPTIONS.data_dir or data_dir()).expanduser().absolute(), to)
    except MemoreeError as exc:
        _print_json({"v": 1, "request_id": _request_id(), "ok": False, "error": exc.to_body(), "warnings": []})
        raise typer.Exit(exc.exit_code) from None
    _print_json({"v": 1, "request_id": _request_id(), "ok": True, "result": result, "warnings": []})


# Agent integration (caller-side, not protocol ops): `memoree mcp`, `remember`, `checkpoint`,
# `pending`, `compiler` and `import`, defined in memoree.cli.agents.
from memoree.cli.agents import register as _register_agent_commands  # noqa: E402

_register_agent_commands(app, OPTIONS)


# Retrieval: search, recall, context build, probe, citation get, and the evaluator.

citation_app = typer.Typer(help="Fetch exactly the bytes a citation names.", no_args_is_help=True)
app.add_typer(citation_app, name="citation")

QueryArgument = typer.Argument(..., help="The query (words, \"quoted phrases\", IDENTIFIER-123).")
NoRecencyOption = typer.Option(False, "--no-recency", help="Disable the bounded recency nudge (pure lexical order).")
NoSemanticOption = typer.Option(False, "--no-semantic", help="Turn the dense (meaning) channel off: the lexical answer.")
MinCommitSeqOption = typer.Option(None, "--min-commit-seq", help="Answer INDEX_NOT_READY until this commit is visible.")


def _retrieval_input(query: list[str], horizon: str, reason: Optional[str], no_recency: bool,
                     min_commit_seq: Optional[int], no_semantic: bool = False, **fields: Any) -> dict[str, Any]:
    payload = _drop_none(query=" ".join(query), horizon=horizon, reason=reason,
                         min_commit_seq=min_commit_seq, **fields)
    if no_recency:
        payload["recency"] = {"enabled": False}
    if no_semantic:
        payload["semantic"] = {"enabled": False}
    return payload


@app.command("search")
def search_command(
    query: list[str] = QueryArgument,
    horizon: str = HorizonOption,
    reason: Optional[str] = ReasonOption,
    limit: int = typer.Option(10, "--limit", help="1 to 100 hits."),
    include_historical: bool = typer.Option(False, "--include-historical", help="Also old revisions, forgotten, retracted, future and expired."),
    min_commit_seq: Optional[int] = MinCommitSeqOption,
    no_recency: bool = NoRecencyOption,
    no_semantic: bool = NoSemanticOption,
) -> None:
    """Ranked hits with exact citations, including unqualified candidates."""
    _send("search", _retrieval_input(query, horizon, reason, no_recency, min_commit_seq, no_semantic=no_semantic, limit=limit,
                                     include_historical=include_historical or None))


@app.command("recall")
def recall_command(
    query: list[str] = QueryArgument,
    horizon: str = HorizonOption,
    reason: Optional[str] = ReasonOption,
    max_claims: int = typer.Option(5, "--max-claims", help="1 to 10."),
    max_artifact_refs: int = typer.Option(3, "--max-artifact-refs", help="1 to 20."),
    max_excerpt_bytes: int = typer.Option(320, "--max-excerpt-bytes", help="1 to 1024."),
    max_candidate_claims: int = typer.Option(0, "--max-candidate-claims", help="0 to 16 unqualified claim leads."),
    max_candidate_artifact_refs: int = typer.Option(0, "--max-candidate-artifact-refs", help="0 to 16 unqualified artifact leads."),
    min_commit_seq: Optional[int] = MinCommitSeqOption,
    no_recency: bool = NoRecencyOption,
    no_semantic: bool = NoSemanticOption,
) -> None:
    """Claim-first recall: current or disputed claims with evidence, then artifact references."""
    _send("memory.recall", _retrieval_input(
        query, horizon, reason, no_recency, min_commit_seq, no_semantic=no_semantic, max_claims=max_claims,
        max_artifact_refs=max_artifact_refs, max_excerpt_bytes=max_excerpt_bytes,
        max_candidate_claims=max_candidate_claims, max_candidate_artifact_refs=max_candidate_artifact_refs,
    ))


@context_app.command("build")
def context_build_command(
    query: list[str] = QueryArgument,
    horizon: str = HorizonOption,
    reason: Optional[str] = ReasonOption,
    limit: int = typer.Option(10, "--limit", help="1 to 100 hits."),
    max_bytes: int = typer.Option(16384, "--max-bytes", help="Byte budget of the rendered Markdown."),
    include_historical: bool = typer.Option(False, "--include-historical"),
    min_commit_seq: Optional[int] = MinCommitSeqOption,
    no_recency: bool = NoRecencyOption,
    no_semantic: bool = NoSemanticOption,
) -> None:
    """Render qualified hits as byte-bounded Markdown with every source line quoted."""
    _send("context.build", _retrieval_input(
        query, horizon, reason, no_recency, min_commit_seq, no_semantic=no_semantic, limit=limit, max_bytes=max_bytes,
        include_historical=include_historical or None,
    ))


@app.command("probe")
def probe_command(
    query: list[str] = QueryArgument,
    original_query: Optional[str] = typer.Option(None, "--original-query", help="The question this probe reformulates."),
    horizon: str = HorizonOption,
    reason: Optional[str] = ReasonOption,
    max_leads: int = typer.Option(8, "--max-leads", help="1 to 8."),
    min_commit_seq: Optional[int] = MinCommitSeqOption,
    no_recency: bool = NoRecencyOption,
    no_semantic: bool = NoSemanticOption,
) -> None:
    """List unqualified leads (exact citations, no content) worth fetching explicitly."""
    _send("memory.probe", _retrieval_input(query, horizon, reason, no_recency, min_commit_seq, no_semantic=no_semantic,
                                           original_query=original_query, max_leads=max_leads))


@app.command("retrieve")
def retrieve_command(
    query: list[str] = QueryArgument,
    reformulation: Optional[str] = typer.Option(None, "--reformulation", help="A rewording used only for the recovery probe."),
    horizon: str = HorizonOption,
    reason: Optional[str] = ReasonOption,
    max_claims: int = typer.Option(5, "--max-claims", help="1 to 10."),
    max_artifact_refs: int = typer.Option(3, "--max-artifact-refs", help="1 to 20."),
    max_excerpt_bytes: int = typer.Option(320, "--max-excerpt-bytes", help="1 to 1024."),
    max_recovery_leads: int = typer.Option(8, "--max-recovery-leads", help="1 to 8."),
    max_recovery_bytes: int = typer.Option(12288, "--max-recovery-bytes", help="1 to 12288."),
    min_commit_seq: Optional[int] = MinCommitSeqOption,
    no_recency: bool = NoRecencyOption,
    no_semantic: bool = NoSemanticOption,
    profile: bool = typer.Option(False, "--profile", help="Report stage timings."),
) -> None:
    """Recall, plus one bounded recovery of unqualified exact evidence when no claim qualified."""
    _send("memory.retrieve", _retrieval_input(
        query, horizon, reason, no_recency, min_commit_seq, no_semantic=no_semantic, reformulation=reformulation,
        max_claims=max_claims, max_artifact_refs=max_artifact_refs, max_excerpt_bytes=max_excerpt_bytes,
        max_recovery_leads=max_recovery_leads, max_recovery_bytes=max_recovery_bytes,
        profile=profile or None,
    ))


@citation_app.command("get")
def citation_get_command(
    citation: str = typer.Argument(..., help="memoree://artifact/ART@REV#START-END"),
    max_bytes: int = typer.Option(8192, "--max-bytes", help="4 to 8192."),
) -> None:
    """Fetch exactly the cited bytes of an artifact revision."""
    _send("citation.get", {"citation": citation, "max_bytes": max_bytes})


@app.command("eval")
def eval_command(
    corpus_dir: Path = typer.Argument(..., help="A corpus folder with seed.jsonl, cases.jsonl and baseline.json, or a LoCoMo folder (26.json, ...)."),
    case: Optional[list[str]] = typer.Option(None, "--case", help="Run only this case (repeatable; skips the baseline)."),
    case_timeout_ms: int = typer.Option(60000, "--case-timeout-ms", help="Soft per-case budget (slow cases are listed)."),
    suite_timeout_ms: int = typer.Option(600000, "--suite-timeout-ms", help="Hard suite deadline (exit 124, no report)."),
    only: Optional[list[str]] = typer.Option(None, "--only", help="LoCoMo: only this conversation, e.g. 26 (repeatable)."),
    questions: Optional[int] = typer.Option(None, "--questions", help="LoCoMo: the first N questions of each conversation."),
    json_output: bool = typer.Option(False, "--json", help="LoCoMo: print the summary as JSON instead of tables."),
    report: Optional[Path] = typer.Option(None, "--report", help="LoCoMo: write per-question results (JSON Lines) here."),
) -> None:
    """Seed a temporary store from a corpus (or a LoCoMo folder), run every case, print metrics."""
    from memoree.admin.locomo import is_locomo_dir, run_cli

    if is_locomo_dir(corpus_dir.expanduser()):
        raise typer.Exit(run_cli(corpus_dir.expanduser().resolve(), only=only or (), questions=questions,
                                 as_json=json_output, report=report))
    if only or questions is not None or report is not None:
        typer.echo("error: --only, --questions and --report apply to LoCoMo folders", err=True)
        raise typer.Exit(2)
    from memoree.admin.evaluation import CorpusError, EvalOptions, main_report

    options = EvalOptions(case_ids=tuple(case or ()), case_timeout_ms=case_timeout_ms,
                          suite_timeout_ms=suite_timeout_ms)
    from memoree.cli.progress import busy

    try:
        with busy(f"eval {corpus_dir.name} …"):
            report, exit_code = main_report(corpus_dir.expanduser().resolve(), options)
    except (CorpusError, OSError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if report is None:
        typer.echo(f"error: the suite passed its {suite_timeout_ms} ms deadline", err=True)
    else:
        _print_json(report)
    raise typer.Exit(exit_code)


# The signed fact plane (emem): `memoree band ...`, `memoree fact ...`, `memoree receipt verify`.

band_app = typer.Typer(help="Register and list the bands signed facts are recorded in.", no_args_is_help=True)
fact_app = typer.Typer(help="Attest and recall signed facts at a cell64.", no_args_is_help=True)
receipt_app = typer.Typer(help="Check signed receipts offline.", no_args_is_help=True)
app.add_typer(band_app, name="band")
app.add_typer(fact_app, name="fact")
app.add_typer(receipt_app, name="receipt")

ProvenanceOption = typer.Option("human_curated", "--provenance-class", help="deterministic_index, estimator, attested_execution, model_output, human_curated or unclassified.")


@band_app.command("add-file")
def band_add_file(
    band: str = typer.Argument(..., help="Band key, e.g. soil.ph_topsoil."),
    csv_file: Path = typer.Argument(..., help="CSV with lat,lng,value columns."),
    unit: str = typer.Option(..., "--unit", help="The values' unit, e.g. pH, m, degC."),
    radius_m: float = typer.Option(100.0, "--radius-m", help="Use the nearest sample within this many metres; farther cells get a signed outside_coverage absence."),
    provenance_class: str = typer.Option("deterministic_index", "--provenance-class", help="What the data honestly is: deterministic_index, estimator, model_output, human_curated, ... (never direct_sensor)."),
    dataset_id: Optional[str] = typer.Option(None, "--dataset-id", help="Dataset name in the facts' source id (default: the file's stem)."),
    captured_at: Optional[str] = typer.Option(None, "--captured-at", help="The data's date (RFC 3339), cited as the source's captured_at."),
    description: Optional[str] = typer.Option(None, "--description"),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Register a band whose values recall reads from a CSV file (stored in the log)."""
    data, _ = _read_source(str(csv_file))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        typer.echo(f"error: {csv_file} is not UTF-8 text", err=True)
        raise typer.Exit(2) from None
    _send("band.register", _drop_none(
        band=band, unit=unit, tempo="static", provenance_class=provenance_class,
        description=description, actor=os.environ.get("MEMOREE_ACTOR") or None,
        file=_drop_none(csv=text, dataset_id=dataset_id or csv_file.stem, radius_m=radius_m,
                        captured_at=captured_at),
    ), mutation=True, idempotency_key=idempotency_key)


@band_app.command("register")
def band_register(
    band: str = typer.Argument(..., help="Band key, e.g. site.noise_db."),
    unit: str = typer.Option(..., "--unit"),
    tempo: str = typer.Option("static", "--tempo", help="static, slow, composite_16day, composite_8day, medium, fast or ultra_fast."),
    provenance_class: str = ProvenanceOption,
    description: Optional[str] = typer.Option(None, "--description"),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Register a band whose facts agents attest (fact.attest)."""
    _send("band.register", _drop_none(
        band=band, unit=unit, tempo=tempo, provenance_class=provenance_class,
        description=description, actor=os.environ.get("MEMOREE_ACTOR") or None,
    ), mutation=True, idempotency_key=idempotency_key)


@band_app.command("list")
def band_list() -> None:
    """List the bands served here (built in, registered, plugins) with their provenance classes."""
    _send("band.list", {})


def _fact_value(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return text  # a categorical class id
    return value if isinstance(value, (int, float, list)) and not isinstance(value, bool) else text


@fact_app.command("attest")
def fact_attest(
    cell: str = typer.Argument(..., help="cell64, e.g. defi.zb493.xuqA.zcb5f."),
    band: str = typer.Argument(...),
    value: str = typer.Argument(..., help="A number, a JSON array of numbers, or a class id."),
    tslot: Optional[int] = typer.Option(None, "--tslot"),
    observed_at: Optional[str] = typer.Option(None, "--observed-at", help="RFC 3339; sets the tslot from the band's tempo."),
    confidence: float = typer.Option(1.0, "--confidence"),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Sign and record one fact in a registered band."""
    _send("fact.attest", _drop_none(
        cell=cell, band=band, value=_fact_value(value), tslot=tslot, observed_at=observed_at,
        confidence=confidence, actor=os.environ.get("MEMOREE_ACTOR") or None,
    ), mutation=True, idempotency_key=idempotency_key)


@fact_app.command("recall")
def fact_recall(
    cell: str = typer.Argument(...),
    band: Optional[list[str]] = typer.Option(None, "--band", help="A band to ensure (repeatable; cold ones materialize)."),
    tslot: Optional[int] = typer.Option(None, "--tslot"),
    deterministic: Optional[bool] = typer.Option(None, "--deterministic/--non-deterministic"),
) -> None:
    """Recall the signed facts at a cell (the same as POST /v1/recall)."""
    _send("fact.recall", _drop_none(cell=cell, bands=band, tslot=tslot, deterministic=deterministic))


def _receipts_in(document: Any) -> tuple[list[tuple[str, Any]], list[Any]]:
    """``(where, receipt)`` pairs and the facts of a saved response, envelope or bare receipt."""
    if isinstance(document, dict) and isinstance(document.get("result"), dict):
        document = document["result"]  # a protocol envelope around a recall result
    if isinstance(document, dict) and "signature" in document and "fact_cids" in document:
        return [("receipt", document)], []
    if not isinstance(document, dict) or not isinstance(document.get("receipt"), dict):
        return [], []
    facts = document.get("facts") if isinstance(document.get("facts"), list) else []
    if isinstance(document.get("fact"), dict):
        facts = [document["fact"]]
    pairs = [("receipt", document["receipt"])]
    pairs += [(f"facts[{i}].receipt", f["receipt"]) for i, f in enumerate(facts)
              if isinstance(f, dict) and isinstance(f.get("receipt"), dict)]
    return pairs, facts


def _check_fact_cids(facts: list[Any], receipt: Any) -> list[dict[str, Any]]:
    """Each fact's cid recomputed from its JSON, and the receipt binding exactly those cids."""
    from memoree.factplane.emem.errors import EmemError
    from memoree.factplane.emem.facts import fact_cid, fact_from_builtins

    problems = []
    for index, fact in enumerate(facts):
        try:
            recomputed = fact_cid(fact_from_builtins(fact))
        except EmemError as exc:
            problems.append({"where": f"facts[{index}]", "problem": f"not a fact: {exc}"})
            continue
        if recomputed != fact.get("fact_cid"):
            problems.append({"where": f"facts[{index}]", "problem": "fact_cid does not match its body",
                             "recomputed": recomputed})
    listed = [fact.get("fact_cid") for fact in facts if isinstance(fact, dict)]
    if facts and isinstance(receipt, dict) and receipt.get("fact_cids") != listed:
        problems.append({"where": "receipt.fact_cids", "problem": "does not list the facts' cids in order"})
    return problems


@receipt_app.command("verify")
def receipt_verify(
    file: str = typer.Argument(..., help="A saved /v1/recall response (or a bare receipt, or a protocol envelope); - for stdin."),
    pubkey: Optional[str] = typer.Option(None, "--pubkey", help="Verify under this base32 key instead of each receipt's responder."),
) -> None:
    """Check a saved response offline: every receipt's signature and proof, every fact_cid."""
    from memoree.errors import MemoreeError
    from memoree.queries.facts import verify_receipt_document

    data, _ = _read_source(file)
    try:
        document = json.loads(data)
    except ValueError as exc:
        _print_json({"ok": False, "error": {"code": "INVALID_REQUEST", "message": f"invalid request: {file} is not JSON: {exc}", "retryable": False, "details": None}})
        raise typer.Exit(2) from None
    pairs, facts = _receipts_in(document)
    if not pairs:
        _print_json({"ok": False, "error": {"code": "INVALID_REQUEST", "message": "invalid request: no receipt found (expected a recall response, an envelope around one, or a receipt)", "retryable": False, "details": None}})
        raise typer.Exit(2)
    verdicts = []
    for where, receipt in pairs:
        try:
            verdict = verify_receipt_document(None, receipt, pubkey)
        except MemoreeError as exc:
            verdict = {"valid": False, "error": exc.to_body()}
        verdicts.append({"where": where, **verdict})
    problems = _check_fact_cids(facts, pairs[0][1])
    valid = all(v["valid"] for v in verdicts) and not problems
    _print_json({"ok": True, "result": {"valid": valid, "receipts": verdicts, "fact_problems": problems,
                                        "note": "offline: a reshaped receipt cannot be told from a forged one; POST /v1/verify_receipt to the responder can"}})
    raise typer.Exit(0 if valid else 1)


backup_app = typer.Typer(help="Create and restore verified backups.", no_args_is_help=True)
app.add_typer(backup_app, name="backup")


@backup_app.command("create")
def backup_create(destination: Path = typer.Argument(..., help="New folder for the backup (must not exist).")) -> None:
    """Seal, snapshot, verify by replay and atomically publish a backup at DESTINATION."""
    _send("backup.create", {"destination": str(destination.expanduser().absolute())})


@backup_app.command("restore")
def backup_restore(
    source: Path = typer.Argument(..., help="A backup folder made by `memoree backup create`."),
    target: Path = typer.Option(..., "--data-dir", help="New, empty data dir to restore into."),
) -> None:
    """Restore a backup into a new data dir; it is verified before it appears there."""
    from memoree.admin import backup
    from memoree.errors import MemoreeError

    from memoree.cli.progress import busy

    try:
        with busy("restore …"):
            result = backup.restore(source.expanduser().absolute(), target.expanduser().absolute())
    except MemoreeError as exc:
        _print_json({"v": 1, "request_id": _request_id(), "ok": False, "error": exc.to_body(), "warnings": []})
        raise typer.Exit(exc.exit_code) from None
    _print_json({"v": 1, "request_id": _request_id(), "ok": True, "result": result, "warnings": []})


@app.command()
def purge(
    artifact_id: str = typer.Argument(..., help="The artifact whose bytes to erase."),
    reason: str = typer.Option(..., "--reason", help="Why (required, kept in the log)."),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Erase an artifact's bytes from the CAS and the search index (the log keeps its digests)."""
    _send("artifact.purge", {"artifact_id": artifact_id, "reason": reason}, mutation=True,
          idempotency_key=idempotency_key)
