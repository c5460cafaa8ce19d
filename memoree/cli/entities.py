"""Artifacts, claims and their relations: ``artifact ...``, ``claim ...``, ``demo``, ``link``,
``relation list`` and ``conflict list``."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any, Optional

import typer

from memoree.client import call as callcmd
from memoree.protocol.documents import encode, error_document, request_document
from memoree.cli.common import (
    HorizonOption,
    IdemOption,
    OPTIONS,
    ReasonOption,
    app,
    artifact_app,
    claim_app,
    content_of,
    default_title,
    drop_none,
    emit,
    guess_media_type,
    new_request_id,
    read_source,
    send,
)

@artifact_app.command("put")
def artifact_put(
    path: str = typer.Argument(..., help="File to store, or - for stdin."),
    kind: str = typer.Option("document", "--kind", help="Free-form kind, e.g. decision, runbook."),
    title: Optional[str] = typer.Option(None, "--title", help="Title (default: a Markdown file's first heading, else the file's name, or 'stdin')."),
    media_type: Optional[str] = typer.Option(None, "--media-type", help="Media type (default: guessed)."),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Store a file (or stdin) as a new artifact."""
    data, source = read_source(path)
    send("artifact.put", {
        "kind": kind, "title": title or default_title(path, data), "media_type": media_type or guess_media_type(path),
        "content": content_of(data), "provenance": {"source": source},
    }, idempotency_key=idempotency_key)


@artifact_app.command("get")
def artifact_get(
    artifact_id: str,
    revision: Optional[str] = typer.Option(None, "--revision", help="Exact revision id."),
    metadata_only: bool = typer.Option(False, "--metadata-only", help="Omit the content."),
    output: Optional[Path] = typer.Option(None, "--output", help="Write the bytes to this file (atomically) instead of printing them."),
    force: bool = typer.Option(False, "--force", help="With --output: replace an existing file."),
) -> None:
    """Read an artifact (its current revision unless --revision)."""
    payload = drop_none(artifact_id=artifact_id, revision_id=revision, include_content=not metadata_only)
    if output is None:
        send("artifact.get", payload)
    from memoree.errors import InvalidRequest

    document = request_document(new_request_id(), "artifact.get", payload)
    body, exit_code = callcmd.run(encode(document), OPTIONS.call_options())
    envelope = json.loads(body)
    if envelope.get("ok") and "content" in envelope["result"]:
        content = envelope["result"].pop("content")
        data = content["data"].encode() if content["type"] == "text" else base64.b64decode(content["data"])
        try:
            _write_atomically(output.expanduser().absolute(), data, force)
        except InvalidRequest as exc:
            envelope, exit_code = error_document(envelope["request_id"], exc.to_body()), exc.exit_code
        else:
            envelope["result"]["materialized_path"] = str(output.expanduser().absolute())
    emit(encode(envelope))
    raise typer.Exit(exit_code)


def _write_atomically(target: Path, data: bytes, force: bool) -> None:
    """Write ``data`` via a temp file and a no-clobber link (or a replace with ``force``);
    an existing ``target`` without ``force`` is INVALID_REQUEST."""
    from memoree.errors import InvalidRequest

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
                raise InvalidRequest(f"{target} exists; pass --force to replace it") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


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
    data, source = read_source(path)
    send("artifact.revise", drop_none(
        artifact_id=artifact_id, if_revision=if_revision, title=title, media_type=media_type,
        content=content_of(data), provenance={"source": source},
    ), idempotency_key=idempotency_key)


@artifact_app.command("history")
def artifact_history(
    artifact_id: str,
    limit: int = typer.Option(50, "--limit"),
    before_revision_number: Optional[int] = typer.Option(None, "--before-revision-number"),
) -> None:
    """List an artifact's revisions, newest first."""
    send("artifact.history", drop_none(artifact_id=artifact_id, limit=limit,
                                          before_revision_number=before_revision_number))


@artifact_app.command("forget")
def artifact_forget(
    artifact_id: str,
    reason: str = typer.Option(..., "--reason", help="Why (required, kept in the log)."),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Tombstone an artifact: it leaves retrieval; exact reads still work."""
    send("artifact.forget", {"artifact_id": artifact_id, "reason": reason}, idempotency_key=idempotency_key)


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
    send("claim.assert", drop_none(
        claim_type=claim_type, statement=" ".join(statement), confidence=confidence,
        evidence=_parse_evidence(evidence), valid_from=valid_from, valid_until=valid_until,
        actor=os.environ.get("MEMOREE_ACTOR") or None,
    ), idempotency_key=idempotency_key)


@claim_app.command("get")
def claim_get(claim_id: str, revision: Optional[str] = typer.Option(None, "--revision")) -> None:
    """Read a claim (its current revision unless --revision)."""
    send("claim.get", drop_none(claim_id=claim_id, revision_id=revision))


@claim_app.command("history")
def claim_history(
    claim_id: str,
    limit: int = typer.Option(50, "--limit"),
    before_revision_number: Optional[int] = typer.Option(None, "--before-revision-number"),
) -> None:
    """List a claim's revisions, newest first."""
    send("claim.history", drop_none(claim_id=claim_id, limit=limit,
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
    send("claim.revise", drop_none(
        claim_id=claim_id, if_revision=if_revision, statement=" ".join(statement),
        confidence=confidence, evidence=_parse_evidence(evidence),
    ), idempotency_key=idempotency_key)


@claim_app.command("retract")
def claim_retract(
    claim_id: str,
    reason: str = typer.Option(..., "--reason"),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Retract a claim; its history stays."""
    send("claim.retract", {"claim_id": claim_id, "reason": reason}, idempotency_key=idempotency_key)


@app.command()
def demo() -> None:
    """Store an artifact and a claim citing its bytes in a demo project, then read both back."""
    demo_context = {"workspace_id": "wsp_demo", "project_id": "prj_demo", "pins": []}
    text = "SQLite is authoritative; the filesystem CAS stores blobs.\n"

    def step(op: str, payload: dict[str, Any], key: Optional[str] = None) -> dict[str, Any]:
        document = request_document(new_request_id(), op, payload, idempotency_key=key,
                                    context=demo_context, context_source="explicit")
        body, exit_code = callcmd.run(json.dumps(document).encode(), OPTIONS.call_options())
        envelope = json.loads(body)
        typer.echo(f"$ {op}: " + json.dumps(envelope, ensure_ascii=False))
        if exit_code:
            raise typer.Exit(exit_code)
        return envelope["result"]

    art = step("artifact.put", {"kind": "decision", "title": "Storage design", "content": {"type": "text", "data": text}},
               key="demo:storage-design")
    claim = step("claim.assert", {"claim_type": "decision", "statement": "SQLite is the authoritative store.",
                                  "evidence": [{"artifact_id": art["artifact_id"], "revision_id": art["revision_id"],
                                                "start_byte": 0, "end_byte": 23}]}, key="demo:sqlite-claim")
    got = step("artifact.get", {"artifact_id": art["artifact_id"]})
    step("claim.get", {"claim_id": claim["claim_id"]})
    cited = got["content"]["data"].encode()[0:23].decode()
    typer.echo(f"\nStored {art['artifact_id']} at commit_seq {art['revision_commit_seq']}; the claim cites bytes [0, 23): {cited!r}")


# Relations and conflict cases: `memoree link`, `memoree relation list`, `memoree conflict list`.

relation_app = typer.Typer(help="Walk the typed relations around an artifact or claim.", no_args_is_help=True)
conflict_app = typer.Typer(help="See open contradictions between claims.", no_args_is_help=True)
app.add_typer(relation_app, name="relation")
app.add_typer(conflict_app, name="conflict")

RELATION_NAMES = ("derived-from", "supports", "contradicts", "supersedes", "references", "duplicates")


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
    send("relation.put", {
        "source_type": source_type, "source_id": source_id, "relation": _relation_name(relation),
        "target_type": target_type, "target_id": target_id,
    }, idempotency_key=idempotency_key)


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
    send("relation.list", drop_none(
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
    send("conflict.list", drop_none(
        horizon=horizon, reason=reason, include_stale=include_stale, limit=limit,
        before_case_sequence=before_case_sequence,
    ))
