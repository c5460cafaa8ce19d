"""The readers: one function per non-mutating op, each ``(service, request, input) -> result``.

The op declarations (``memoree.protocol.ops``) name the reader that serves each read; the service
calls it with the decoded request and typed input and encodes what it returns. Each reader
imports its query module when it first runs, so a call pays only for the op it serves (this
module itself imports nothing heavy: the declarations import it on the ``memoree call`` path).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memoree.inputs import (
        ArtifactGetInput,
        ArtifactHistoryInput,
        ArtifactListInput,
        BackupCreateInput,
        CitationGetInput,
        ClaimGetInput,
        ClaimHistoryInput,
        ClaimListInput,
        ConflictListInput,
        ContextBuildInput,
        FactRecallInput,
        InstructionsInput,
        ProbeInput,
        RecallInput,
        ReceiptVerifyInput,
        RelationListInput,
        RetrieveInput,
        SearchInput,
    )
    from memoree.protocol.envelope import Request
    from memoree.queries.search import ReadScope
    from memoree.service.service import Service

__all__ = [
    "artifact_get", "artifact_history", "artifact_list", "backup_create", "band_list", "capabilities", "citation_get",
    "claim_get", "claim_history", "claim_list", "conflict_list", "context_build", "context_resolve", "doctor",
    "fact_identity", "fact_recall", "instructions", "memory_probe", "memory_recall", "memory_retrieve",
    "batch", "read_scope", "receipt_verify", "relation_list", "schema", "search", "verify",
]


# --- discovery and health -------------------------------------------------------------------------


def context_resolve(service: Service, request: Request, inp: Any) -> dict[str, Any]:
    return {"resolved": True, "context": _resolved(request)}


def capabilities(service: Service, request: Request, inp: Any) -> dict[str, Any]:
    from memoree.service import discovery

    return discovery.capabilities(service.ops, service)


def instructions(service: Service, request: Request, inp: InstructionsInput) -> dict[str, Any]:
    from memoree.service import discovery

    return discovery.instructions(service.ops, inp.format)


def schema(service: Service, request: Request, inp: Any) -> dict[str, Any]:
    from memoree.service import discovery

    return discovery.schema_bundle(service.ops)


def doctor(service: Service, request: Request, inp: Any) -> dict[str, Any]:
    """Health and identity: who serves, which store, how far the log and each projection are."""
    from memoree import __version__
    from memoree.eventlog.db import features
    from memoree.projections.base import checkpoints
    from memoree.queries.dense import describe

    engine = service.engine
    head = engine.head()
    feats = features()
    return {
        "status": "ok",
        **service.daemon_info,
        "binary_version": __version__,
        "schema_version": 1,
        "authoritative_store": "postgresql" if engine.shared is not None else "sqlite_wal",
        "storage_mode": f"{feats.driver} {feats.sqlite_version}",
        "retrieval_mode": "fts5_trigram_hybrid",
        "data_dir": str(service.data_dir),
        "last_commit_seq": head,
        "semantic": describe(engine.conn),
        "projections": [
            {"name": name, "version": version, "position": position, "lag": head - position}
            for name, (version, position) in sorted(checkpoints(engine.conn).items())
        ],
    }


def batch(service: Service, request: Request, inp: Any) -> dict[str, Any]:
    from memoree.service.batch import run

    return run(service, inp)


def verify(service: Service, request: Request, inp: Any) -> dict[str, Any]:
    from memoree.admin.verify import verify as verify_store

    return verify_store(service.engine)


def backup_create(service: Service, request: Request, inp: BackupCreateInput) -> dict[str, Any]:
    from pathlib import Path

    from memoree.admin import backup
    from memoree.inputs import check_text

    check_text("destination", inp.destination, 4096)
    return backup.create(service.engine, Path(inp.destination))


# --- browsing --------------------------------------------------------------------------------------


def artifact_list(service: Service, request: Request, inp: ArtifactListInput) -> Any:
    from memoree.queries.browse import artifact_list as browse

    return browse(service.engine.conn, request.context.scope(), inp)


def claim_list(service: Service, request: Request, inp: ClaimListInput) -> Any:
    from memoree.queries.browse import claim_list as browse

    return browse(service.engine.conn, request.context.scope(), inp)


# --- exact reads ----------------------------------------------------------------------------------


def artifact_get(service: Service, request: Request, inp: ArtifactGetInput) -> Any:
    from memoree.queries.entities import artifact_get as get

    return get(service.engine.conn, service.engine.cas, inp)


def artifact_history(service: Service, request: Request, inp: ArtifactHistoryInput) -> Any:
    from memoree.queries.entities import artifact_history as history

    return history(service.engine.conn, inp)


def claim_get(service: Service, request: Request, inp: ClaimGetInput) -> Any:
    from memoree.queries.entities import claim_get as get

    return get(service.engine.conn, inp)


def claim_history(service: Service, request: Request, inp: ClaimHistoryInput) -> Any:
    from memoree.queries.entities import claim_history as history

    return history(service.engine.conn, inp)


def relation_list(service: Service, request: Request, inp: RelationListInput) -> Any:
    from memoree.queries.relations import relation_list as listed

    context = _context(request)
    return listed(service.engine.conn, context.scope(), context.pins, inp)


def conflict_list(service: Service, request: Request, inp: ConflictListInput) -> Any:
    from memoree.queries.conflicts import conflict_list as listed

    return listed(service.engine.conn, _context(request).scope(), inp)


def citation_get(service: Service, request: Request, inp: CitationGetInput) -> Any:
    from memoree.queries.citations import citation_get as get

    return get(service.engine.conn, service.engine.cas, inp)


# --- retrieval ------------------------------------------------------------------------------------


def read_scope(engine: Any, request: Request, inp: Any = None) -> ReadScope:
    """What a retrieval read needs: the store, the caller's context and pins, now, the log head.

    A read that may use the dense channel first lets an engine catch its vectors up (a reader
    process's read-only view cannot: its reads embed the lagging events in memory instead)."""
    from memoree.errors import MemoreeError
    from memoree.queries.search import ReadScope

    catch_up = getattr(engine, "catch_up_vectors", None)
    if catch_up is not None and getattr(getattr(inp, "semantic", None), "enabled", True):
        try:
            catch_up()
        except MemoreeError:  # e.g. the disk is full: the read embeds the lagging events itself
            pass
    context = _context(request)
    return ReadScope(
        conn=engine.conn, ambient=context.scope(), pins=tuple(context.pins),
        now=engine.handler.clock(), head=engine.head(), cas=engine.cas,
    )


def search(service: Service, request: Request, inp: SearchInput) -> Any:
    from memoree.queries.search import search as run

    return run(read_scope(service.engine, request, inp), inp)


def memory_recall(service: Service, request: Request, inp: RecallInput) -> Any:
    from memoree.queries.recall import recall

    return recall(read_scope(service.engine, request, inp), inp)


def context_build(service: Service, request: Request, inp: ContextBuildInput) -> Any:
    from memoree.queries.context_build import context_build as build

    return build(read_scope(service.engine, request, inp), inp)


def memory_probe(service: Service, request: Request, inp: ProbeInput) -> Any:
    from memoree.queries.probe import probe

    return probe(read_scope(service.engine, request, inp), inp)


def memory_retrieve(service: Service, request: Request, inp: RetrieveInput) -> Any:
    from memoree.queries.retrieve import retrieve

    return retrieve(read_scope(service.engine, request, inp), inp)


# --- the signed fact plane ------------------------------------------------------------------------


def fact_recall(service: Service, request: Request, inp: FactRecallInput) -> Any:
    from memoree.factplane import readers

    return readers.recall(service.engine, inp)


def receipt_verify(service: Service, request: Request, inp: ReceiptVerifyInput) -> Any:
    from memoree.factplane import readers

    return readers.verify_receipt(service.engine, inp)


def fact_identity(service: Service, request: Request, inp: Any) -> Any:
    from memoree.factplane import readers

    return readers.identity(service.engine)


def band_list(service: Service, request: Request, inp: Any) -> Any:
    from memoree.factplane import readers

    return readers.band_list(service.engine)


# --- helpers --------------------------------------------------------------------------------------


def _context(request: Request) -> Any:
    """The attached context of an op that needs one (the service refused the request otherwise)."""
    assert request.context is not None
    return request.context


def _resolved(request: Request) -> dict[str, Any]:
    ctx = _context(request)
    document: dict[str, Any] = {"workspace_id": ctx.workspace_id, "project_id": ctx.project_id}
    if ctx.task_id is not None:
        document["task_id"] = ctx.task_id
    if ctx.component is not None:
        document["component"] = ctx.component
    document["pins"] = list(ctx.pins)
    document["resolved_from"] = "explicit" if request.context_source == "none" else request.context_source
    return document
