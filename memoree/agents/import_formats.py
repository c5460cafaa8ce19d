"""Reading other agent memories into source records: the MCP memory server, mem0, basic-memory.

Each parser turns one upstream export into ``SourceRecord``s keyed by the upstream's own stable
identity (an MCP-memory entity name, a mem0 memory id, a basic-memory permalink), each with the
text to store, the observations to assert as claims (with the exact UTF-8 byte span each one
cites in that text) and the links to other records by identity. Parsers are pure: bytes in,
records out, no store access; what to write is decided by ``memoree.agents.import_plan``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blake3 import blake3

from memoree.agents.caller import canonical_json
from memoree.errors import InvalidRequest

__all__ = [
    "Link", "Observation", "SourceDocument", "SourceRecord", "read_basic_memory", "read_mcp_memory",
    "read_mem0",
]

MARKDOWN = "text/markdown; charset=utf-8"
_TITLE_CHARS = 80
_KIND_CHARS = 64


@dataclass(frozen=True)
class Observation:
    """A claim to assert: its statement and the ``[start, end)`` bytes of the record it cites."""

    statement: str
    span: tuple[int, int]
    claim_type: str = "observation"


@dataclass(frozen=True)
class Link:
    """A directed edge to another record, by that record's identity, with the upstream's type."""

    target: str
    upstream_type: str


@dataclass
class SourceRecord:
    """One upstream record as it is stored: an artifact, its claims and its outgoing links."""

    identity: str
    kind: str
    title: str
    text: str
    observations: list[Observation] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    media_type: str = MARKDOWN

    def digest(self) -> str:
        """BLAKE3 of what the store keeps of this record; an unchanged digest means nothing to do."""
        stored = {"kind": self.kind, "title": self.title, "media_type": self.media_type,
                  "text": self.text,
                  "observations": [[o.statement, o.claim_type, *o.span] for o in self.observations],
                  "links": sorted([link.target, link.upstream_type] for link in self.links)}
        return blake3(canonical_json(stored).encode("utf-8")).hexdigest()


@dataclass
class SourceDocument:
    """A parsed export: its records, and the upstream items it could not use and why."""

    records: list[SourceRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    read: int = 0


class _TextBuilder:
    """Builds a record's text and remembers the UTF-8 byte span of chosen pieces."""

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


# -- the MCP reference memory server (memory.jsonl) ---------------------------------------------


def read_mcp_memory(raw: bytes) -> SourceDocument:
    """Entities and relations of the MCP memory server's JSONL, one JSON object per line."""
    document = SourceDocument()
    entities: dict[str, dict[str, Any]] = {}
    relations: dict[str, list[tuple[str, str]]] = {}
    for number, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        document.read += 1
        try:
            item = json.loads(line)
        except ValueError:
            document.skipped.append(f"line {number}: not JSON")
            continue
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "entity" and _valid_entity(item):
            if item["name"] in entities:
                document.skipped.append(f"line {number}: entity {item['name']!r} appears again; the first is kept")
            else:
                entities[item["name"]] = item
        elif kind == "relation" and _valid_relation(item):
            pair = (item["relationType"], item["to"])
            if pair not in relations.setdefault(item["from"], []):
                relations[item["from"]].append(pair)
        else:
            document.skipped.append(f"line {number}: not a valid entity or relation record")
    for source, pairs in relations.items():
        if source not in entities:
            document.skipped.append(f"relations from {source!r}: no such entity")
        for upstream_type, target in pairs:
            if target not in entities:
                document.skipped.append(f"relation {source!r} {upstream_type} {target!r}: no such entity")
    for name, entity in entities.items():
        links = [Link(target, upstream_type) for upstream_type, target in relations.get(name, [])
                 if target in entities]
        document.records.append(_entity_record(entity, links))
    return document


def _valid_relation(item: dict[str, Any]) -> bool:
    return all(isinstance(item.get(k), str) and item[k].strip() for k in ("from", "to", "relationType"))


def _valid_entity(item: dict[str, Any]) -> bool:
    observations = item.get("observations", [])
    return (isinstance(item.get("name"), str) and bool(item["name"].strip())
            and isinstance(item.get("entityType", ""), str)
            and isinstance(observations, list) and all(isinstance(o, str) for o in observations))


def _entity_record(entity: dict[str, Any], links: list[Link]) -> SourceRecord:
    name, entity_type = entity["name"], entity.get("entityType", "")
    builder = _TextBuilder()
    builder.add(f"# {name}\n\nentityType: {entity_type}\n\nobservations:\n")
    observations: list[Observation] = []
    seen: set[str] = set()
    for text in entity.get("observations", []):
        builder.add("- ")
        span = builder.add(text)
        builder.add("\n")
        statement = f"{name}: {text}"
        if text.strip() and statement not in seen:
            seen.add(statement)
            observations.append(Observation(statement, span))
    if links:
        builder.add("\nrelations:\n")
        for link in links:
            builder.add(f"- {link.upstream_type} {link.target}\n")
    return SourceRecord(identity=name, kind="entity", title=_title(name), text=builder.text(),
                        observations=observations, links=links,
                        details={"name": name, "entity_type": entity_type})


# -- mem0 (get_all / Platform exports) ----------------------------------------------------------

# What a memory's text is rendered with: the scoping ids and the caller's metadata. Timestamps,
# hashes, scores and the Platform's derived fields (categories, ...) are kept in provenance only,
# so re-exporting the same memories through another mem0 surface changes nothing stored.
_MEM0_RENDERED = ("user_id", "agent_id", "run_id", "app_id", "metadata")
_MEM0_DESCRIBED = ("id", "user_id", "agent_id", "run_id", "app_id", "created_at", "updated_at",
                   "categories")


def read_mem0(raw: bytes) -> SourceDocument:
    """Memories (and graph relations) of a mem0 export: a list, ``{"results": [...]}`` (with
    ``relations`` when graph memory is on), a Platform page ``{"count", "next", "results"}``,
    or ``{"memories": [...]}``."""
    try:
        exported = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidRequest(f"mem0 export is not JSON: {exc}") from None
    relations: Any = []
    memories: Any = exported
    if isinstance(exported, dict):
        memories = exported.get("results", exported.get("memories"))
        relations = exported.get("relations") or []
    if not isinstance(memories, list) or not isinstance(relations, list):
        raise InvalidRequest('a mem0 export must be a JSON list of memories (or {"results": [...]})')
    document = SourceDocument(read=len(memories) + len(relations))
    seen: set[str] = set()
    for index, item in enumerate(memories):
        if not (isinstance(item, dict) and isinstance(item.get("memory"), str) and item["memory"].strip()):
            document.skipped.append(f"memory {index}: no memory text")
            continue
        record = _mem0_record(item)
        if record.identity in seen:
            document.skipped.append(f"memory {index}: id {record.identity!r} appears again; the first is kept")
            continue
        if not isinstance(item.get("id"), str) or not item["id"]:
            document.skipped.append(f"memory {index}: no id, so it is tracked by its text (a changed text is a new memory)")
        seen.add(record.identity)
        document.records.append(record)
    document.records.extend(_mem0_graph(relations, document))
    return document


def _mem0_record(item: dict[str, Any]) -> SourceRecord:
    memory = item["memory"]
    builder = _TextBuilder()
    span = builder.add(memory)
    builder.add("\n\n")
    for name in _MEM0_RENDERED:
        value = item.get(name)
        if value not in (None, "", {}, []):
            shown = value if isinstance(value, str) else canonical_json(value)
            builder.add(f"{name}: {shown}\n")
    identity = item.get("id") if isinstance(item.get("id"), str) and item["id"] else \
        "text:" + blake3(memory.encode("utf-8")).hexdigest()[:32]
    details = {k: item[k] for k in _MEM0_DESCRIBED if isinstance(item.get(k), (str, list))}
    return SourceRecord(identity=identity, kind="memory", title=_title(memory), text=builder.text(),
                        observations=[Observation(memory, span)], details=details)


def _mem0_graph(relations: list[Any], document: SourceDocument) -> list[SourceRecord]:
    """Graph memory: one ``entity`` record per node, a claim and an edge per relation."""
    outgoing: dict[str, list[tuple[str, str]]] = {}
    types: dict[str, str] = {}
    for index, item in enumerate(relations):
        target = item.get("target", item.get("destination")) if isinstance(item, dict) else None
        source = item.get("source") if isinstance(item, dict) else None
        relationship = item.get("relationship", item.get("relation")) if isinstance(item, dict) else None
        if not all(isinstance(v, str) and v.strip() for v in (source, target, relationship)):
            document.skipped.append(f"relation {index}: needs source, relationship and target")
            continue
        assert isinstance(source, str) and isinstance(target, str) and isinstance(relationship, str)
        pairs = outgoing.setdefault(source, [])
        outgoing.setdefault(target, [])
        if (relationship, target) not in pairs:
            pairs.append((relationship, target))
        for node, type_key in ((source, "source_type"), (target, "target_type")):
            if isinstance(item.get(type_key), str):
                types.setdefault(node, item[type_key])
    records = []
    for node, pairs in outgoing.items():
        builder = _TextBuilder()
        builder.add(f"# {node}\n")
        observations = []
        if pairs:
            builder.add("\nrelations:\n")
        for relationship, target in pairs:
            builder.add("- ")
            span = builder.add(f"{node} {relationship} {target}")
            builder.add("\n")
            observations.append(Observation(f"{node} {relationship.replace('_', ' ')} {target}", span))
        details = {"name": node, **({"entity_type": types[node]} if node in types else {})}
        records.append(SourceRecord(
            identity=f"entity:{node}", kind="entity", title=_title(node), text=builder.text(),
            observations=observations, links=[Link(f"entity:{t}", r) for r, t in pairs], details=details))
    return records


# -- basic-memory (a folder of Markdown notes) ------------------------------------------------

_OBSERVATION = re.compile(r"^[ \t]*[-*][ \t]+\[([^\[\]]+)\][ \t]+(\S.*?)[ \t]*$")
_RELATION = re.compile(r"^[ \t]*[-*][ \t]+([A-Za-z][\w-]*(?:[ \t]+[\w-]+)*?)[ \t]+\[\[([^\[\]]+)\]\](.*)$")
_WIKILINK = re.compile(r"\[\[([^\[\]]+)\]\]")
_HASHTAG = re.compile(r"(?:^|\s)#([\w/-]+)")
_CONTEXT = re.compile(r"\s*\(([^()]*)\)\s*$")
_HEADING = re.compile(r"^#[ \t]+(.+?)[ \t]*#*[ \t]*$")
_CLAIM_TYPES = {"fact": "fact", "decision": "decision", "constraint": "constraint",
                "requirement": "constraint", "preference": "preference", "procedure": "procedure",
                "technique": "procedure", "method": "procedure", "how-to": "procedure"}


def read_basic_memory(folder: Path) -> SourceDocument:
    """Every ``*.md`` note under ``folder``: frontmatter, observations, relations and tags."""
    if not folder.is_dir():
        raise InvalidRequest(f"{folder} is not a folder of basic-memory notes")
    document = SourceDocument()
    notes: list[_Note] = []
    for path in sorted(folder.rglob("*.md")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts):
            continue
        document.read += 1
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            document.skipped.append(f"{relative}: not UTF-8")
            continue
        except OSError as exc:
            document.skipped.append(f"{relative}: cannot read ({exc.strerror})")
            continue
        notes.append(_parse_note(relative, text))
    by_name: dict[str, str] = {}
    seen: set[str] = set()
    for note in notes:
        if note.permalink in seen:
            document.skipped.append(f"{note.path}: permalink {note.permalink!r} is already used; skipped")
            note.permalink = ""
            continue
        seen.add(note.permalink)
        for name in (note.title, note.permalink, note.path.with_suffix("").as_posix(), note.path.stem):
            by_name.setdefault(name.casefold(), note.permalink)
    for note in notes:
        if note.permalink:
            document.records.append(_note_record(note, by_name, document))
    return document


@dataclass
class _Note:
    path: Path
    text: str
    title: str
    permalink: str
    kind: str
    tags: list[str]
    frontmatter: dict[str, Any]
    body_start: int


def _parse_note(relative: Path, text: str) -> _Note:
    frontmatter, body_start = _frontmatter(text)
    title = frontmatter.get("title") if isinstance(frontmatter.get("title"), str) else None
    if not title:
        title = next((m.group(1) for line in text[body_start:].splitlines()
                      if (m := _HEADING.match(line))), None) or relative.stem
    permalink = frontmatter.get("permalink")
    if not isinstance(permalink, str) or not permalink.strip():
        permalink = _slug(relative.with_suffix("").as_posix())
    kind = frontmatter.get("type") if isinstance(frontmatter.get("type"), str) else "note"
    tags = frontmatter.get("tags", [])
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",")]
    tags = [str(t).strip().lstrip("#") for t in tags if str(t).strip()] if isinstance(tags, list) else []
    return _Note(path=relative, text=text, title=title.strip(), permalink=permalink.strip(),
                 kind=(kind.strip() or "note")[:_KIND_CHARS], tags=tags, frontmatter=frontmatter,
                 body_start=body_start)


def _note_record(note: _Note, by_name: dict[str, str], document: SourceDocument) -> SourceRecord:
    observations: list[Observation] = []
    links: list[Link] = []
    tags = list(note.tags)
    offset = len(note.text[: note.body_start].encode("utf-8"))
    fenced = False
    for line in note.text[note.body_start:].splitlines(keepends=True):
        start = offset
        offset += len(line.encode("utf-8"))
        bare = line.rstrip("\r\n")
        if bare.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        if (found := _OBSERVATION.match(bare)) and found.group(1).strip() not in ("", "x", "X"):
            category, content = found.group(1).strip(), found.group(2)
            head = len(bare[: found.start(2)].encode("utf-8"))
            span = (start + head, start + head + len(content.encode("utf-8")))
            statement = _CONTEXT.sub("", content).strip() or content
            tags.extend(t for t in _HASHTAG.findall(content) if t not in tags)
            observations.append(Observation(f"{note.title}: {statement}", span,
                                            _CLAIM_TYPES.get(category.lower(), "observation")))
            continue
        relation = _RELATION.match(bare)
        targets = [(relation.group(1).strip().replace(" ", "_"), relation.group(2))] if relation else \
            [("links_to", name) for name in _WIKILINK.findall(bare)]
        for upstream_type, name in targets:
            target = by_name.get(name.split("|", 1)[0].strip().casefold())
            if target is None:
                document.skipped.append(f"{note.path}: link to [[{name}]] has no note in the folder")
            elif target != note.permalink and Link(target, upstream_type) not in links:
                links.append(Link(target, upstream_type))
    details = {"path": note.path.as_posix(), "permalink": note.permalink, "tags": tags}
    return SourceRecord(identity=note.permalink, kind=note.kind, title=_title(note.title, 4000),
                        text=note.text, observations=_unique(observations), links=links,
                        details=details)


def _unique(observations: list[Observation]) -> list[Observation]:
    seen: set[str] = set()
    kept = []
    for observation in observations:
        if observation.statement not in seen:
            seen.add(observation.statement)
            kept.append(observation)
    return kept


def _frontmatter(text: str) -> tuple[dict[str, Any], int]:
    """The YAML frontmatter's simple fields (scalars and lists) and where the body starts."""
    if not text.startswith("---"):
        return {}, 0
    lines = text.splitlines(keepends=True)
    if lines[0].rstrip() != "---":
        return {}, 0
    fields: dict[str, Any] = {}
    offset = len(lines[0])
    current: str | None = None
    for line in lines[1:]:
        offset += len(line)
        bare = line.rstrip("\r\n")
        if bare.rstrip() in ("---", "..."):
            return fields, offset
        item = re.match(r"^\s+-\s*(.*)$", bare)
        if item and current is not None:
            if not isinstance(fields.get(current), list):
                fields[current] = []
            fields[current].append(_scalar(item.group(1)))
            continue
        pair = re.match(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$", bare)
        if pair:
            current, value = pair.group(1), pair.group(2).strip()
            fields[current] = _flow_list(value) if value.startswith("[") else _scalar(value)
    return {}, 0  # no closing fence: not frontmatter


def _flow_list(value: str) -> list[Any]:
    inner = value.strip()[1:-1] if value.strip().endswith("]") else value.strip()[1:]
    return [_scalar(part) for part in inner.split(",") if part.strip()]


def _scalar(value: str) -> Any:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    if " #" in value:
        value = value.split(" #", 1)[0].rstrip()
    return value


def _slug(path: str) -> str:
    parts = [re.sub(r"[^\w]+", "-", part.lower()).strip("-") for part in path.split("/")]
    return "/".join(part for part in parts if part) or "note"


def _title(text: str, limit: int = _TITLE_CHARS) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "untitled")
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"
