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
mutation, sent in ``batch`` requests (``Sender.send_many``: one transaction per batch) by chunks of
records: artifacts first, then relations, then the claims, so a run cut off anywhere is completed
by the next; the summary counts each outcome and says why anything was skipped.
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
RECORDS_PER_BATCH = 200  # records whose artifacts (then claims) share one batch request


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
    chunks = [plans[start:start + RECORDS_PER_BATCH] for start in range(0, len(plans), RECORDS_PER_BATCH)]
    # Artifacts, then relations, then claims: a record whose claims are all stored had its edges
    # sent before them, so an import cut off anywhere is completed by the next run (a record with
    # claims missing is a "repair" and has its edges checked).
    with _Progress(progress, 2 * len(plans) + len(gone), f"importing {path.name}") as advance:
        revisions: dict[str, tuple[str, str]] = {}
        for chunk in chunks:
            revisions.update(run.write_artifacts(chunk))
            advance(len(chunk))
        run.relations(edges(document.records), {p.record.identity: p for p in plans})
        for chunk in chunks:
            run.write_claims(chunk, revisions)
            advance(len(chunk))
        run.gone(gone, claims, forget_missing)
        advance(len(gone))
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

    def write_many(self, kind: str, writes: list[Write]) -> list[dict[str, Any] | None]:
        """Send mutations in ``batch`` requests; each one's result, or None where it was refused."""
        envelopes = self.sender.send_many([
            new_request(w.op, w.payload, idempotency_key=w.key, context=self.context,
                        context_source=self.context_source) for w in writes])
        return [self._outcome(kind, write, envelope) for write, envelope in zip(writes, envelopes)]

    def _outcome(self, kind: str, write: Write, envelope: dict[str, Any]) -> dict[str, Any] | None:
        """Count one reply; a record-level refusal is noted, a store-wide failure raises."""
        if not envelope.get("ok"):
            error = envelope_error(envelope)
            if error.code not in _RECORD_LEVEL_CODES:
                error.details = {**(error.details or {}), "summary": self.summary.to_json()}
                raise error
            self.summary.count(kind, "failed")
            self.summary.failures.append({"record": write.label, "op": write.op, "code": error.code,
                                          "message": error.message})
            return None
        result = envelope["result"]
        created = result.get("created", True)
        self.summary.count(kind, write.outcome if created else "unchanged")
        commit_seq = envelope.get("commit_seq")
        if isinstance(commit_seq, int) and created:
            self.summary.commit_seq = max(self.summary.commit_seq or 0, commit_seq)
        return result


@dataclass(frozen=True)
class Write:
    """One mutation an import sends, and the outcome it counts as when it writes."""

    label: str
    op: str
    payload: dict[str, Any]
    key: str
    outcome: str


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
    """Carries out record plans in chunks of batched writes: artifacts, relations, then claims."""

    def __init__(self, fmt: str, wire: _Wire, summary: ImportSummary) -> None:
        self.fmt, self.wire, self.summary = fmt, wire, summary
        self.artifacts: dict[str, str] = {}
        self.created: set[str] = set()

    def write_claims(self, plans: list[RecordPlan], revisions: dict[str, tuple[str, str]]) -> None:
        """The claims of a chunk of records, citing each record's current revision."""
        writes: list[Write] = []
        for plan in plans:
            revision = revisions.get(plan.record.identity)
            if revision is None:
                self.summary.count("claims", "skipped", len(plan.record.observations))
                continue
            writes += self._claim_writes(plan, *revision)
        self.wire.write_many("claims", writes)

    def write_artifacts(self, plans: list[RecordPlan]) -> dict[str, tuple[str, str]]:
        """Each record's (artifact_id, revision_id) after its put or revise (or as stored)."""
        found: dict[str, tuple[str, str]] = {}
        writes: list[tuple[RecordPlan, Write]] = []
        for plan in plans:
            record, stored = plan.record, plan.stored
            if stored is not None and plan.action in ("unchanged", "repair"):
                self.summary.count("artifacts", "unchanged")
                found[record.identity] = (stored.artifact_id, stored.revision_id)
                continue
            body = {"title": record.title, "media_type": record.media_type,
                    "content": {"type": "text", "data": record.text},
                    "provenance": provenance(self.fmt, record), "actor": _actor(self.fmt)}
            if stored is None:
                writes.append((plan, Write(record.identity, "artifact.put", {"kind": record.kind, **body},
                                           import_key(self.fmt, "put", record.identity, record.digest()),
                                           "created")))
            else:
                writes.append((plan, Write(record.identity, "artifact.revise",
                                           {"artifact_id": stored.artifact_id, "if_revision": stored.revision_id, **body},
                                           import_key(self.fmt, "revise", stored.revision_id, record.digest()),
                                           "revised")))
        results = self.wire.write_many("artifacts", [write for _, write in writes])
        for (plan, write), result in zip(writes, results):
            if result is not None:
                found[plan.record.identity] = (result["artifact_id"], result["revision_id"])
                if write.op == "artifact.put":
                    self.created.add(plan.record.identity)
        self.artifacts.update({identity: ids[0] for identity, ids in found.items()})
        return found

    def _claim_writes(self, plan: RecordPlan, artifact_id: str, revision_id: str) -> list[Write]:
        identity, changes = plan.record.identity, plan.claims
        self.summary.count("claims", "unchanged", len(changes.keep))
        writes = []
        for observation in changes.add:
            payload = {"claim_type": observation.claim_type,
                       **self._claim_payload(observation, artifact_id, revision_id)}
            writes.append(Write(identity, "claim.assert", payload,
                                import_key(self.fmt, "assert", identity, revision_id, observation.statement),
                                "created"))
        for observation, claim in changes.revise:
            payload = {"claim_id": claim.claim_id, "if_revision": claim.revision_id,
                       **self._claim_payload(observation, artifact_id, revision_id)}
            writes.append(Write(identity, "claim.revise", payload,
                                import_key(self.fmt, "revise-claim", claim.revision_id, revision_id,
                                           observation.statement), "revised"))
        writes += [self._retraction(identity, claim, "the observation was removed from the source")
                   for claim in changes.retract]
        return writes

    def gone(self, artifacts: list[StoredArtifact], claims: dict[str, list[StoredClaim]],
             forget: bool) -> None:
        """Stored records the source no longer has: noted, or (``forget``) forgotten with their claims."""
        if not forget:
            for artifact in artifacts:
                self.summary.count("artifacts", "skipped")
                self.summary.notes.append(f"{artifact.identity}: no longer in the source; kept "
                                          "(import with --forget-missing to forget it)")
            return
        self.wire.write_many("claims", [
            self._retraction(a.identity, claim, "the record was removed from the source")
            for a in artifacts for claim in claims.get(a.artifact_id, [])])
        self.wire.write_many("artifacts", [
            Write(a.identity, "artifact.forget", {"artifact_id": a.artifact_id, "reason": "removed from the source",
                                                  "actor": _actor(self.fmt)},
                  import_key(self.fmt, "forget", a.revision_id), "removed") for a in artifacts])

    def relations(self, planned: list[Edge], plans: dict[str, RecordPlan]) -> None:
        """Send the edges a created or revised source (or a created target) may lack."""
        existing: dict[str, dict[tuple[str, str], Any]] = {}
        writes: list[Write] = []
        for edge in planned:
            source, target = self.artifacts.get(edge.source), self.artifacts.get(edge.target)
            if source is None or target is None:
                self.summary.count("relations", "skipped")
                self.summary.notes.append(f"relation {edge.source} -> {edge.target}: an endpoint was not imported")
                continue
            action = plans[edge.source].action
            if action == "unchanged" and edge.target not in self.created:
                self.summary.count("relations", "unchanged")
                continue
            if action in ("revise", "repair"):
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
                       "target_type": "artifact", "target_id": target, "metadata": edge.metadata(self.fmt)}
            writes.append(Write(f"{edge.source} -> {edge.target}", "relation.put", payload,
                                import_key(self.fmt, "relation", edge.source, edge.target, edge.relation,
                                           list(edge.upstream_types)), "created"))
        self.wire.write_many("relations", writes)

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

    def _retraction(self, label: str, claim: StoredClaim, reason: str) -> Write:
        return Write(label, "claim.retract", {"claim_id": claim.claim_id, "reason": reason, "actor": _actor(self.fmt)},
                     import_key(self.fmt, "retract", claim.revision_id), "removed")


class _Progress:
    """A rich progress bar with counts on stderr when it is a terminal; otherwise a no-op."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        self.enabled, self.total, self.label = enabled and total > 0, total, label
        self._bar: Any = None

    def __enter__(self) -> Callable[[int], None]:
        if not self.enabled:
            return lambda n=1: None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeRemainingColumn(), console=Console(stderr=True), transient=True)
        self._bar.start()
        task = self._bar.add_task(self.label, total=self.total)
        return lambda n=1: self._bar.advance(task, n)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
