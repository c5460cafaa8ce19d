"""Read-side dispatch: which query answers each non-mutating op.

Each reader takes the request and its typed input and returns a result the envelope encodes.
Modules that add ops later register their readers here too.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["install"]


def _query(name: str) -> Any:
    """A query module, imported on first use: each call pays only for the op it runs."""
    return importlib.import_module(f"memoree.queries.{name}")


def _factops() -> Any:
    return importlib.import_module("memoree.factplane.readers")


def install(service: Any) -> None:
    """Register the built-in readers on a service."""
    from memoree.service import discovery

    engine = lambda: service.engine  # noqa: E731 - the store opens lazily, on first read
    service.readers.update({
        "context.resolve": lambda request, inp: {"resolved": True, "context": _resolved(request)},
        "capabilities": lambda request, inp: discovery.capabilities(service),
        "instructions": lambda request, inp: discovery.instructions(inp.format),
        "schema": lambda request, inp: discovery.schema_bundle(),
        "doctor": lambda request, inp: doctor(service),
        "verify": lambda request, inp: _verify(service),
        "backup.create": lambda request, inp: _backup(service, inp),
        "artifact.get": lambda request, inp: _query("entities").artifact_get(engine().conn, engine().cas, inp),
        "artifact.history": lambda request, inp: _query("entities").artifact_history(engine().conn, inp),
        "claim.get": lambda request, inp: _query("entities").claim_get(engine().conn, inp),
        "claim.history": lambda request, inp: _query("entities").claim_history(engine().conn, inp),
        "relation.list": lambda request, inp: _query("relations").relation_list(
            engine().conn, request.context.scope(), request.context.pins, inp),
        "conflict.list": lambda request, inp: _query("conflicts").conflict_list(
            engine().conn, request.context.scope(), inp),
        "search": lambda request, inp: _query("search").search(read_scope(engine(), request), inp),
        "memory.recall": lambda request, inp: _query("recall").recall(read_scope(engine(), request), inp),
        "context.build": lambda request, inp: _query("context_build").context_build(
            read_scope(engine(), request), inp),
        "memory.probe": lambda request, inp: _query("probe").probe(read_scope(engine(), request), inp),
        "memory.retrieve": lambda request, inp: _query("retrieve").retrieve(read_scope(engine(), request), inp),
        "citation.get": lambda request, inp: _query("citations").citation_get(engine().conn, engine().cas, inp),
    })
    service.readers.update({
        "fact.recall": lambda request, inp: _factops().recall(engine(), inp),
        "receipt.verify": lambda request, inp: _factops().verify_receipt(engine(), inp),
        "fact.identity": lambda request, inp: _factops().identity(engine()),
        "band.list": lambda request, inp: _factops().band_list(engine()),
    })


def read_scope(engine: Any, request: Any) -> Any:
    """What a retrieval read needs: the store, the caller's context and pins, now, the log head."""
    context = request.context
    return _query("search").ReadScope(
        conn=engine.conn, ambient=context.scope(), pins=tuple(context.pins),
        now=engine.handler.clock(), head=engine.head(), cas=engine.cas,
    )


def _verify(service: Any) -> dict[str, Any]:
    from memoree.admin.verify import verify

    return verify(service.engine)


def _backup(service: Any, inp: Any) -> dict[str, Any]:
    from pathlib import Path

    from memoree.admin import backup
    from memoree.inputs import check_text

    check_text("destination", inp.destination, 4096)
    return backup.create(service.engine, Path(inp.destination))


def doctor(service: Any) -> dict[str, Any]:
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
        "retrieval_mode": "fts5_trigram_hybrid" if feats.trigram else "fts5",
        "data_dir": str(service.data_dir),
        "last_commit_seq": head,
        "semantic": describe(engine.conn),
        "projections": [
            {"name": name, "version": version, "position": position, "lag": head - position}
            for name, (version, position) in sorted(checkpoints(engine.conn).items())
        ],
    }


def _resolved(request: Any) -> dict[str, Any]:
    ctx = request.context
    document: dict[str, Any] = {"workspace_id": ctx.workspace_id, "project_id": ctx.project_id}
    if ctx.task_id is not None:
        document["task_id"] = ctx.task_id
    if ctx.component is not None:
        document["component"] = ctx.component
    document["pins"] = list(ctx.pins)
    document["resolved_from"] = "explicit" if request.context_source == "none" else request.context_source
    return document
