"""Importing other agent memories, keeping each upstream record tracked by its own identity.

Formats: the MCP reference memory server's ``memory.jsonl``, mem0 exports (``get_all`` results,
graph relations included, and Platform pages), and basic-memory folders of Markdown notes
(parsed by ``memoree.agents.import_formats``). Each record becomes an artifact whose provenance names
its source and upstream identity; its observations become claims citing exact byte spans of the
artifact; its links become relations between the artifacts.

An import first reads what earlier imports of the same format stored in the ambient context
(``artifact.list`` by provenance, ``claim.list`` by actor), then ``memoree.agents.import_plan`` decides
per record: create, revise (a new artifact revision; claims revised, asserted or retracted by
statement), or nothing. Re-importing an unchanged source writes nothing. Records the source no
longer has are forgotten only with ``forget_missing``. Every write is an ordinary idempotent
mutation sent through ``memoree call``'s path; the summary counts each outcome and says why
anything was skipped.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoree.agents import import_formats
from memoree.agents.caller import Sender, envelope_error, new_request
from memoree.errors import InvalidRequest
from memoree.agents.import_formats import SourceDocument
from memoree.agents.import_plan import (
    Edge,
    RecordPlan,
    StoredArtifact,
    StoredClaim,
    edges,
    import_key,
    missing,
    plan_records,
    provenance,
)

__all__ = ["FORMATS", "ImportSummary", "import_source", "read_source", "stderr_is_terminal"]

FORMATS: dict[str, str] = {
    "mcp-memory": "JSONL file of the MCP reference memory server (memory.jsonl)",
    "mem0": "JSON export of mem0 memories (get_all results, graph relations, Platform pages)",
    "basic-memory": "folder of basic-memory Markdown notes",
}
_RECORD_LEVEL_CODES = {"INVALID_REQUEST", "NOT_FOUND", "CONTENT_TOO_LARGE", "SCOPE_VIOLATION",
                       "IDEMPOTENCY_CONFLICT", "REVISION_CONFLICT"}
_OUTCOMES = ("created", "revised", "unchanged", "removed", "skipped", "failed")
_PAGE = 100


@dataclass
class ImportSummary:
    """What an import did, per kind and outcome; ``notes`` say why anything was skipped."""

    fmt: str
    source: str
    context: dict[str, Any] | None = None
    counts: dict[str, dict[str, int]] = field(default_factory=lambda: {
        kind: dict.fromkeys(_OUTCOMES, 0) for kind in ("artifacts", "claims", "relations")})
    records_read: int = 0
    notes: list[str] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    commit_seq: int | None = None
    forget_missing: bool = False

    def count(self, kind: str, outcome: str, n: int = 1) -> None:
        self.counts[kind][outcome] += n

    def to_json(self) -> dict[str, Any]:
        return {"format": self.fmt, "source": self.source, "context": self.context,
                "records_read": self.records_read, **self.counts, "commit_seq": self.commit_seq,
                "forget_missing": self.forget_missing, "notes": self.notes,
                "failures": self.failures}


def read_source(fmt: str, path: Path) -> SourceDocument:
    """Parse ``path`` (a file, or a folder for basic-memory) in format ``fmt``."""
    if fmt == "basic-memory":
        return import_formats.read_basic_memory(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidRequest(f"cannot read {path}: {exc.strerror}") from None
    return import_formats.read_mcp_memory(raw) if fmt == "mcp-memory" else import_formats.read_mem0(raw)


def import_source(fmt: str, path: Path, sender: Sender, *, context: dict[str, Any] | None,
                  context_source: str | None, forget_missing: bool = False,
                  progress: bool = False) -> ImportSummary:
    """Bring the store in line with ``path``; a store-wide failure raises its typed error."""
    if fmt not in FORMATS:
        raise InvalidRequest(f"unknown import format {fmt!r}; one of {', '.join(FORMATS)}")
    document = read_source(fmt, path)
    summary = ImportSummary(fmt=fmt, source=str(path.resolve()), context=context,
                            records_read=document.read, forget_missing=forget_missing)
    summary.notes.extend(document.skipped)
    wire = _Wire(sender, summary, context, context_source)
    stored = _stored_artifacts(wire, fmt)
    claims = _stored_claims(wire, fmt)
    plans = plan_records(document.records, stored, claims)
    gone = missing(document.records, stored)
    run = _Run(fmt, wire, summary)
    with _Progress(progress, len(plans) + len(gone), f"importing {path.name}") as advance:
        for plan in plans:
            run.record(plan)
            advance()
        for artifact in gone:
            run.gone(artifact, claims.get(artifact.artifact_id, []), forget_missing)
            advance()
    run.relations(edges(document.records), {p.record.identity: p for p in plans})
    return summary


class _Wire:
    """Sends requests in the frozen context and turns record-level refusals into counted failures."""

    def __init__(self, sender: Sender, summary: ImportSummary, context: dict[str, Any] | None,
                 context_source: str | None) -> None:
        self.sender, self.summary = sender, summary
        self.context, self.context_source = context, context_source

    def read(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        envelope, _ = self.sender.send(new_request(op, payload, context=self.context,
                                                   context_source=self.context_source))
        if not envelope.get("ok"):
            raise envelope_error(envelope)
        return envelope["result"]

    def pages(self, op: str, payload: dict[str, Any], items: str) -> Iterator[dict[str, Any]]:
        cursor = None
        while True:
            page = self.read(op, {**payload, "limit": _PAGE,
                                  **({"before_commit_seq": cursor} if cursor else {})})
            yield from page[items]
            cursor = page.get("next_before_commit_seq")
            if not page["truncated"] or cursor is None:
                return

    def write(self, kind: str, label: str, op: str, payload: dict[str, Any],
              key: str) -> dict[str, Any] | None:
        envelope, _ = self.sender.send(new_request(op, payload, idempotency_key=key,
                                                   context=self.context,
                                                   context_source=self.context_source))
        if not envelope.get("ok"):
            error = envelope_error(envelope)
            if error.code not in _RECORD_LEVEL_CODES:
                error.details = {**(error.details or {}), "summary": self.summary.to_json()}
                raise error
            self.summary.count(kind, "failed")
            self.summary.failures.append({"record": label, "op": op, "code": error.code,
                                          "message": error.message})
            return None
        commit_seq = envelope.get("commit_seq")
        if isinstance(commit_seq, int) and envelope["result"].get("created", True):
            self.summary.commit_seq = max(self.summary.commit_seq or 0, commit_seq)
        return envelope["result"]


def _stored_artifacts(wire: _Wire, fmt: str) -> dict[str, StoredArtifact]:
    """Active artifacts earlier imports of ``fmt`` stored here, by upstream identity (newest wins)."""
    stored: dict[str, StoredArtifact] = {}
    for item in wire.pages("artifact.list", {"provenance": {"source": fmt}}, "artifacts"):
        prov = item.get("provenance") or {}
        identity = prov.get("external_id")
        if isinstance(identity, str) and identity not in stored:
            stored[identity] = StoredArtifact(identity, item["artifact_id"], item["revision_id"],
                                              prov.get("record_blake3"))
    return stored


def _stored_claims(wire: _Wire, fmt: str) -> dict[str, list[StoredClaim]]:
    """Current claims earlier imports of ``fmt`` asserted here, by the artifact they cite."""
    claims: dict[str, list[StoredClaim]] = {}
    for item in wire.pages("claim.list", {"actor": _actor(fmt)}, "claims"):
        if item["evidence"]:
            claims.setdefault(item["evidence"][0]["artifact_id"], []).append(
                StoredClaim(item["claim_id"], item["revision_id"], item["statement"]))
    for listed in claims.values():
        listed.reverse()  # oldest first, the order they were asserted in
    return claims


def _actor(fmt: str) -> str:
    return f"import:{fmt}"


class _Run:
    """Carries out record plans: artifact writes first, then that artifact's claims."""

    def __init__(self, fmt: str, wire: _Wire, summary: ImportSummary) -> None:
        self.fmt, self.wire, self.summary = fmt, wire, summary
        self.artifacts: dict[str, str] = {}
        self.created: set[str] = set()

    def record(self, plan: RecordPlan) -> None:
        record = plan.record
        revision = self._artifact(plan)
        if revision is None:
            self.summary.count("claims", "skipped", len(record.observations))
            return
        artifact_id, revision_id = revision
        self.artifacts[record.identity] = artifact_id
        changes = plan.claims
        self.summary.count("claims", "unchanged", len(changes.keep))
        for observation in changes.add:
            payload = self._claim_payload(observation, artifact_id, revision_id)
            payload["claim_type"] = observation.claim_type
            key = import_key(self.fmt, "assert", record.identity, revision_id, observation.statement)
            self._counted("claims", record.identity, "claim.assert", payload, key, "created")
        for observation, claim in changes.revise:
            payload = {"claim_id": claim.claim_id, "if_revision": claim.revision_id,
                       **self._claim_payload(observation, artifact_id, revision_id)}
            key = import_key(self.fmt, "revise-claim", claim.revision_id, revision_id, observation.statement)
            self._counted("claims", record.identity, "claim.revise", payload, key, "revised")
        for claim in changes.retract:
            self._retract(record.identity, claim, "the observation was removed from the source")

    def _artifact(self, plan: RecordPlan) -> tuple[str, str] | None:
        record, stored = plan.record, plan.stored
        if stored is not None and plan.action in ("unchanged", "repair"):
            self.summary.count("artifacts", "unchanged")
            return stored.artifact_id, stored.revision_id
        body = {"title": record.title, "media_type": record.media_type,
                "content": {"type": "text", "data": record.text},
                "provenance": provenance(self.fmt, record), "actor": _actor(self.fmt)}
        if stored is None:
            key = import_key(self.fmt, "put", record.identity, record.digest())
            result = self._counted("artifacts", record.identity, "artifact.put",
                                   {"kind": record.kind, **body}, key, "created")
            if result is not None:
                self.created.add(record.identity)
        else:
            key = import_key(self.fmt, "revise", stored.revision_id, record.digest())
            result = self._counted("artifacts", record.identity, "artifact.revise",
                                   {"artifact_id": stored.artifact_id, "if_revision": stored.revision_id,
                                    **body}, key, "revised")
        return None if result is None else (result["artifact_id"], result["revision_id"])

    def gone(self, artifact: StoredArtifact, claims: list[StoredClaim], forget: bool) -> None:
        if not forget:
            self.summary.count("artifacts", "skipped")
            self.summary.notes.append(f"{artifact.identity}: no longer in the source; kept "
                                      "(import with --forget-missing to forget it)")
            return
        for claim in claims:
            self._retract(artifact.identity, claim, "the record was removed from the source")
        key = import_key(self.fmt, "forget", artifact.revision_id)
        self._counted("artifacts", artifact.identity, "artifact.forget",
                      {"artifact_id": artifact.artifact_id, "reason": "removed from the source",
                       "actor": _actor(self.fmt)}, key, "removed")

    def relations(self, planned: list[Edge], plans: dict[str, RecordPlan]) -> None:
        """Send the edges a created or revised source (or a created target) may lack."""
        existing: dict[str, dict[tuple[str, str], Any]] = {}
        for edge in planned:
            source, target = self.artifacts.get(edge.source), self.artifacts.get(edge.target)
            if source is None or target is None:
                self.summary.count("relations", "skipped")
                self.summary.notes.append(f"relation {edge.source} -> {edge.target}: an endpoint was not imported")
                continue
            action = plans[edge.source].action
            if action in ("unchanged", "repair") and edge.target not in self.created:
                self.summary.count("relations", "unchanged")
                continue
            if action == "revise":
                present = existing.setdefault(edge.source, self._outgoing(source))
                metadata = present.get((target, edge.relation))
                if metadata is not None:
                    same = metadata == edge.metadata(self.fmt)
                    self.summary.count("relations", "unchanged" if same else "skipped")
                    if not same:
                        self.summary.notes.append(
                            f"relation {edge.source} -> {edge.target}: the upstream types changed; "
                            "relations are immutable, the first edge is kept")
                    continue
            payload = {"source_type": "artifact", "source_id": source, "relation": edge.relation,
                       "target_type": "artifact", "target_id": target,
                       "metadata": edge.metadata(self.fmt)}
            key = import_key(self.fmt, "relation", edge.source, edge.target, edge.relation,
                             list(edge.upstream_types))
            self._counted("relations", f"{edge.source} -> {edge.target}", "relation.put", payload,
                          key, "created")

    def _outgoing(self, artifact_id: str) -> dict[tuple[str, str], Any]:
        found = {}
        for item in self.wire.pages("relation.list", {"entity_type": "artifact", "entity_id": artifact_id,
                                                      "direction": "outgoing"}, "relations"):
            found[(item["target_id"], item["relation"])] = item["metadata"]
        return found

    def _claim_payload(self, observation: Any, artifact_id: str, revision_id: str) -> dict[str, Any]:
        start, end = observation.span
        return {"statement": observation.statement,
                "evidence": [{"artifact_id": artifact_id, "revision_id": revision_id,
                              "start_byte": start, "end_byte": end}],
                "actor": _actor(self.fmt)}

    def _retract(self, label: str, claim: StoredClaim, reason: str) -> None:
        key = import_key(self.fmt, "retract", claim.revision_id)
        self._counted("claims", label, "claim.retract",
                      {"claim_id": claim.claim_id, "reason": reason, "actor": _actor(self.fmt)},
                      key, "removed")

    def _counted(self, kind: str, label: str, op: str, payload: dict[str, Any], key: str,
                 outcome: str) -> dict[str, Any] | None:
        result = self.wire.write(kind, label, op, payload, key)
        if result is not None:
            self.summary.count(kind, outcome if result.get("created", True) else "unchanged")
        return result


class _Progress:
    """A rich progress bar with counts on stderr when it is a terminal; otherwise a no-op."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        self.enabled, self.total, self.label = enabled and total > 0, total, label
        self._bar: Any = None

    def __enter__(self) -> Callable[[], None]:
        if not self.enabled:
            return lambda: None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeRemainingColumn(), console=Console(stderr=True), transient=True)
        self._bar.start()
        task = self._bar.add_task(self.label, total=self.total)
        return lambda: self._bar.advance(task)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
