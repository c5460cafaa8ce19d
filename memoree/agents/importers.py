"""Importers from other agent memories: the MCP reference memory server's JSONL and mem0's JSON.

Each source record becomes an artifact (the record itself, rendered as text, is the evidence),
its observations or memory become ``observation`` claims citing the exact byte spans of that
artifact, and mcp-memory relations become ``relation.put`` ``references`` edges between the
entity artifacts (only when ``relation.put`` is registered; otherwise they are skipped and the
summary says so). Everything goes through ordinary idempotent mutations whose keys derive from
the source records, ``import_<BLAKE3 hex(logical op \\0 part)>``, and whose inputs depend only on
the records (never on the file's path or the time), so importing a file twice leaves the log
head unchanged. The artifact provenance names the source.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blake3 import blake3

from memoree.agents.caller import Sender, canonical_json, derived_key, envelope_error, new_request
from memoree.errors import InvalidRequest

__all__ = [
    "FORMATS", "ImportSummary", "PlannedRecord", "import_file", "plan_mcp_memory", "plan_mem0",
    "stderr_is_terminal",
]

KEY_PREFIX = "import"
MARKDOWN = "text/markdown; charset=utf-8"
_RECORD_LEVEL_CODES = {"INVALID_REQUEST", "NOT_FOUND", "CONTENT_TOO_LARGE", "SCOPE_VIOLATION",
                       "IDEMPOTENCY_CONFLICT"}
_TITLE_CHARS = 80


@dataclass
class PlannedClaim:
    """A claim citing ``[start, end)`` of its record's artifact."""

    statement: str
    span: tuple[int, int]
    key: str


@dataclass
class PlannedRecord:
    """One source record: the artifact to store, the claims citing it, a name for relations."""

    label: str
    artifact_input: dict[str, Any]
    artifact_key: str
    claims: list[PlannedClaim] = field(default_factory=list)
    actor: str = ""


@dataclass
class PlannedRelation:
    source: str
    target: str
    relation_types: list[str]
    label: str

    def key(self, fmt: str) -> str:
        part = canonical_json({"from": self.source, "to": self.target, "types": self.relation_types})
        return derived_key(KEY_PREFIX, f"{fmt}.relation", part)


@dataclass
class ImportPlan:
    records: list[PlannedRecord] = field(default_factory=list)
    relations: list[PlannedRelation] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    read: int = 0


@dataclass
class ImportSummary:
    """What an import did, counted per kind; ``failures`` are records the store refused."""

    fmt: str
    file: str
    context: dict[str, Any] | None = None
    counts: dict[str, dict[str, int]] = field(default_factory=lambda: {
        kind: {"created": 0, "replayed": 0, "failed": 0, "skipped": 0}
        for kind in ("artifacts", "claims", "relations")})
    records_read: int = 0
    notes: list[str] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    commit_seq: int | None = None

    def count(self, kind: str, outcome: str, n: int = 1) -> None:
        self.counts[kind][outcome] += n

    def to_json(self) -> dict[str, Any]:
        return {"format": self.fmt, "file": self.file, "context": self.context,
                "records_read": self.records_read, **self.counts, "commit_seq": self.commit_seq,
                "notes": self.notes, "failures": self.failures}


def plan_mcp_memory(raw: bytes) -> ImportPlan:
    """Entities and relations of the MCP memory server's JSONL (one JSON object per line)."""
    plan = ImportPlan()
    relations: dict[tuple[str, str], set[str]] = {}
    for number, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        plan.read += 1
        try:
            record = json.loads(line)
        except ValueError:
            plan.skipped.append(f"line {number}: not JSON")
            continue
        kind = record.get("type") if isinstance(record, dict) else None
        if kind == "entity" and _valid_entity(record):
            plan.records.append(_entity_record(record))
        elif kind == "relation" and _valid_relation(record):
            relations.setdefault((record["from"], record["to"]), set()).add(record["relationType"])
        else:
            plan.skipped.append(f"line {number}: not an entity or relation record")
    plan.relations = [PlannedRelation(source, target, sorted(types), f"{source} -> {target}")
                      for (source, target), types in sorted(relations.items())]
    return plan


def plan_mem0(raw: bytes) -> ImportPlan:
    """Memories of a mem0 export: a JSON list (or ``{"results": [...]}``) of memory objects."""
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidRequest(f"mem0 export is not JSON: {exc}") from None
    if isinstance(document, dict):
        document = document.get("results", document.get("memories"))
    if not isinstance(document, list):
        raise InvalidRequest('a mem0 export must be a JSON list of memories (or {"results": [...]})')
    plan = ImportPlan(read=len(document))
    for index, record in enumerate(document):
        if isinstance(record, dict) and isinstance(record.get("memory"), str) and record["memory"].strip():
            plan.records.append(_mem0_record(record))
        else:
            plan.skipped.append(f"item {index}: no memory text")
    return plan


FORMATS: dict[str, Callable[[bytes], ImportPlan]] = {"mcp-memory": plan_mcp_memory, "mem0": plan_mem0}


def import_file(fmt: str, path: Path, sender: Sender, *, context: dict[str, Any] | None,
                context_source: str | None, relations_supported: bool,
                progress: bool = False) -> ImportSummary:
    """Plan ``path`` in format ``fmt`` and send it; a store-wide failure raises its typed error."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidRequest(f"cannot read {path}: {exc.strerror}") from None
    plan = FORMATS[fmt](raw)
    summary = ImportSummary(fmt=fmt, file=str(path.resolve()), context=context,
                            records_read=plan.read)
    summary.notes.extend(plan.skipped)
    run = _Run(fmt, sender, summary, context, context_source)
    steps = len(plan.records) + len(plan.relations)
    with _Progress(progress, steps, f"importing {path.name}") as advance:
        for record in plan.records:
            run.record(record)
            advance()
        run.relations(plan.relations, relations_supported, advance)
    return summary


class _Run:
    """One import's sending loop: counts outcomes and remembers the artifact of each label."""

    def __init__(self, fmt: str, sender: Sender, summary: ImportSummary,
                 context: dict[str, Any] | None, context_source: str | None) -> None:
        self.fmt, self.sender, self.summary = fmt, sender, summary
        self.context, self.context_source = context, context_source
        self.artifacts: dict[str, tuple[str, str]] = {}

    def record(self, record: PlannedRecord) -> None:
        artifact = self._send("artifacts", record.label, "artifact.put", record.artifact_input,
                              record.artifact_key)
        if artifact is None:
            self.summary.count("claims", "skipped", len(record.claims))
            return
        ids = (artifact["artifact_id"], artifact["revision_id"])
        if record.label in self.artifacts:
            self.summary.notes.append(f"{record.label}: appears more than once; relations use the first")
        else:
            self.artifacts[record.label] = ids
        for claim in record.claims:
            payload = {"claim_type": "observation", "statement": claim.statement,
                       "evidence": [{"artifact_id": ids[0], "revision_id": ids[1],
                                     "start_byte": claim.span[0], "end_byte": claim.span[1]}],
                       "actor": record.actor}
            self._send("claims", record.label, "claim.assert", payload, claim.key)

    def relations(self, relations: list[PlannedRelation], supported: bool,
                  advance: Callable[[], None]) -> None:
        if relations and not supported:
            self.summary.count("relations", "skipped", len(relations))
            self.summary.notes.append(
                f"{len(relations)} relation(s) skipped: this memoree does not offer relation.put")
            for _ in relations:
                advance()
            return
        for relation in relations:
            source, target = self.artifacts.get(relation.source), self.artifacts.get(relation.target)
            if source is None or target is None or source == target:
                self.summary.count("relations", "skipped")
                why = ("an endpoint entity was not imported" if source is None or target is None
                       else "a self-relation")
                self.summary.notes.append(f"relation {relation.label}: skipped, {why}")
            else:
                payload = {"source_type": "artifact", "source_id": source[0], "relation": "references",
                           "target_type": "artifact", "target_id": target[0],
                           "metadata": {"source": self.fmt, "relation_types": relation.relation_types}}
                self._send("relations", relation.label, "relation.put", payload, relation.key(self.fmt))
            advance()

    def _send(self, kind: str, label: str, op: str, payload: dict[str, Any],
              key: str) -> dict[str, Any] | None:
        document = new_request(op, payload, idempotency_key=key, context=self.context,
                               context_source=self.context_source)
        envelope, _ = self.sender.send(document)
        if not envelope.get("ok"):
            error = envelope_error(envelope)
            if error.code not in _RECORD_LEVEL_CODES:
                error.details = {**(error.details or {}), "summary": self.summary.to_json()}
                raise error
            self.summary.count(kind, "failed")
            self.summary.failures.append({"record": label, "op": op, "code": error.code,
                                          "message": error.message})
            return None
        result = envelope["result"]
        self.summary.count(kind, "created" if result.get("created") else "replayed")
        commit_seq = envelope.get("commit_seq")
        if isinstance(commit_seq, int):
            self.summary.commit_seq = max(self.summary.commit_seq or 0, commit_seq)
        return result


def _valid_relation(record: dict[str, Any]) -> bool:
    return all(isinstance(record.get(k), str) and record[k] for k in ("from", "to", "relationType"))


def _valid_entity(record: dict[str, Any]) -> bool:
    observations = record.get("observations", [])
    return (isinstance(record.get("name"), str) and bool(record["name"].strip())
            and isinstance(record.get("entityType", ""), str)
            and isinstance(observations, list) and all(isinstance(o, str) for o in observations))


def _record_digest(record: dict[str, Any]) -> str:
    return blake3(canonical_json(record).encode("utf-8")).hexdigest()


class _TextBuilder:
    """Renders a record line by line and remembers the UTF-8 byte span of chosen pieces."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0

    def add(self, text: str) -> tuple[int, int]:
        start = self.size
        self.parts.append(text)
        self.size += len(text.encode("utf-8"))
        return start, self.size

    def text(self) -> str:
        return "".join(self.parts)


def _entity_record(record: dict[str, Any]) -> PlannedRecord:
    name, entity_type = record["name"], record.get("entityType", "")
    digest = _record_digest(record)
    builder = _TextBuilder()
    builder.add(f"# {name}\n\nentityType: {entity_type}\n\nobservations:\n")
    spans = []
    for observation in record.get("observations", []):
        builder.add("- ")
        spans.append((observation, builder.add(observation)))
        builder.add("\n")
    artifact_input = {
        "kind": "entity",
        "title": _title(name),
        "media_type": MARKDOWN,
        "content": {"type": "text", "data": builder.text()},
        "provenance": {"source": "mcp-memory", "record": "entity", "name": name,
                       "entity_type": entity_type, "record_blake3": digest},
    }
    planned = PlannedRecord(label=name, artifact_input=artifact_input,
                            artifact_key=derived_key(KEY_PREFIX, "mcp-memory.entity", canonical_json(record)),
                            actor="import:mcp-memory")
    for index, (observation, span) in enumerate(spans):
        if observation.strip():
            planned.claims.append(PlannedClaim(
                statement=f"{name}: {observation}", span=span,
                key=derived_key(KEY_PREFIX, "mcp-memory.observation", f"{digest}\0{index}")))
    return planned


def _mem0_record(record: dict[str, Any]) -> PlannedRecord:
    memory = record["memory"]
    digest = _record_digest(record)
    builder = _TextBuilder()
    span = builder.add(memory)
    builder.add("\n\n")
    for name in sorted(k for k in record if k != "memory"):
        value = record[name]
        shown = value if isinstance(value, str) else canonical_json(value)
        builder.add(f"{name}: {shown}\n")
    provenance = {"source": "mem0", "record_blake3": digest}
    provenance.update({k: record[k] for k in ("id", "user_id", "agent_id", "created_at")
                       if isinstance(record.get(k), str)})
    artifact_input = {
        "kind": "memory",
        "title": _title(memory),
        "media_type": MARKDOWN,
        "content": {"type": "text", "data": builder.text()},
        "provenance": provenance,
    }
    return PlannedRecord(
        label=str(record.get("id") or digest[:16]), artifact_input=artifact_input,
        artifact_key=derived_key(KEY_PREFIX, "mem0.memory", canonical_json(record)),
        claims=[PlannedClaim(statement=memory, span=span,
                             key=derived_key(KEY_PREFIX, "mem0.claim", digest))],
        actor="import:mem0")


def _title(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "untitled")
    return first if len(first) <= _TITLE_CHARS else first[: _TITLE_CHARS - 1].rstrip() + "…"


class _Progress:
    """A rich progress bar on stderr when it is a terminal; otherwise a no-op ``advance``."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        self.enabled, self.total, self.label = enabled and total > 0, total, label
        self._bar: Any = None

    def __enter__(self) -> Callable[[], None]:
        if not self.enabled:
            return lambda: None
        from rich.console import Console
        from rich.progress import Progress

        self._bar = Progress(console=Console(stderr=True), transient=True)
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
