"""Importers track their source: upstream identities, revisions on change, nothing on no change.

The fixtures are written in the upstream shapes: the MCP reference memory server's
``memory.jsonl`` (``saveGraph``: one ``{"type": "entity"|"relation", ...}`` object per line), mem0's
``get_all`` result (``{"results": [...], "relations": [...]}`` with graph memory) and a Platform
``get_all`` page (``{"count", "next", "previous", "results"}``), and basic-memory notes (YAML
frontmatter, ``- [category] text #tag (context)`` observations, ``- relation [[Target]]``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memoree.agents.import_formats import read_basic_memory, read_mcp_memory
from memoree.agents.import_plan import StoredClaim, claim_changes, map_relation
from tests.agent.conftest import Cli

ALICE = {"type": "entity", "name": "Alice Chen", "entityType": "person",
         "observations": ["Works at Acme since 2019", 'Says "hello" — in Portuguese']}
ACME = {"type": "entity", "name": "Acme", "entityType": "organization", "observations": ["Makes anvils"]}
WORKS_AT = {"type": "relation", "from": "Alice Chen", "to": "Acme", "relationType": "works_at"}
BASED_ON = {"type": "relation", "from": "Acme", "to": "Alice Chen", "relationType": "derived_from"}


def save_graph(path: Path, entities: list[dict[str, Any]], relations: list[dict[str, Any]]) -> Path:
    """The file exactly as the MCP memory server's saveGraph writes it."""
    lines = [json.dumps({"type": "entity", "name": e["name"], "entityType": e["entityType"],
                         "observations": e["observations"]}, ensure_ascii=False) for e in entities]
    lines += [json.dumps({"type": "relation", "from": r["from"], "to": r["to"],
                          "relationType": r["relationType"]}) for r in relations]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def mem0_memory(memory_id: str, text: str, **extra: Any) -> dict[str, Any]:
    """One memory as mem0's open-source ``Memory.get_all`` returns it."""
    return {"id": memory_id, "memory": text, "hash": f"hash-{text}", "metadata": None,
            "created_at": "2024-07-20T01:30:36.275141-07:00", "updated_at": None,
            "user_id": "alice", **extra}


def platform_memory(memory_id: str, text: str) -> dict[str, Any]:
    """The same memory as a mem0 Platform ``get_all`` page lists it."""
    return {"id": memory_id, "memory": text, "user_id": "alice", "agent_id": None, "app_id": None,
            "run_id": None, "hash": f"platform-{text}", "metadata": None, "categories": ["personal_details"],
            "immutable": False, "expiration_date": None, "created_at": "2024-07-20T01:30:36-07:00",
            "updated_at": "2024-07-21T09:00:00-07:00"}


def listed(cli: Cli, op: str, payload: dict[str, Any], items: str) -> list[dict[str, Any]]:
    envelope = cli.call(op, {"limit": 100, **payload})
    assert envelope["ok"], envelope
    return envelope["result"][items]


class TestPlanning:
    def test_observation_spans_are_exact_bytes(self) -> None:
        """Each observation's span in the rendered entity is its exact UTF-8 bytes, quotes and dashes included."""
        document = read_mcp_memory("\n".join(json.dumps(r) for r in (ALICE, ACME, WORKS_AT)).encode())
        alice = document.records[0]
        data = alice.text.encode()
        assert ALICE["observations"] == [data[o.span[0]:o.span[1]].decode() for o in alice.observations]
        assert [("Acme", "works_at")] == [(link.target, link.upstream_type) for link in alice.links]

    def test_removed_claims_are_revised_into_new_statements_in_order(self) -> None:
        """Kept statements stay; the k-th removed claim is revised into the k-th new one; extras are retracted."""
        from memoree.agents.import_formats import Observation

        stored = [StoredClaim("c1", "r1", "keep"), StoredClaim("c2", "r2", "old a"), StoredClaim("c3", "r3", "old b")]
        changes = claim_changes([Observation("keep", (0, 4)), Observation("new a", (5, 10))], stored)
        assert (["keep"], [("new a", "c2")], [], ["c3"]) == (
            [o.statement for o, _ in changes.keep], [(o.statement, c.claim_id) for o, c in changes.revise],
            changes.add, [c.claim_id for c in changes.retract])

    def test_relation_types_map_where_the_protocol_has_one(self) -> None:
        """Upstream names meaning a protocol relation map to it; the rest, and claim-only types, are references."""
        assert ["derived_from", "supports", "duplicates", "references", "references", "references"] == [
            map_relation(t) for t in ("derived_from", "Supports", "same-as", "works_at", "contradicts", "relates_to")]


class TestMcpMemoryImport:
    def test_a_changed_entity_becomes_one_revision_not_a_duplicate(self, cli: Cli) -> None:
        """add_observations on one entity: re-import revises it once and asserts one claim; exit 0."""
        source = save_graph(cli.root / "memory.jsonl", [ALICE, ACME], [WORKS_AT, BASED_ON])
        first = cli.ok("import", "mcp-memory", str(source))
        assert ((2, 3, 2), []) == ((first["artifacts"]["created"], first["claims"]["created"],
                                    first["relations"]["created"]), first["failures"])
        head = cli.head()
        again = cli.ok("import", "mcp-memory", str(source))
        assert (head, None, 2, 3) == (cli.head(), again["commit_seq"], again["artifacts"]["unchanged"],
                                      again["claims"]["unchanged"])
        changed = {**ALICE, "observations": [*ALICE["observations"], "Lives in Porto"]}
        save_graph(source, [changed, ACME], [WORKS_AT, BASED_ON])
        third = cli.ok("import", "mcp-memory", str(source))
        assert (1, 1, 1) == (third["artifacts"]["revised"], third["artifacts"]["unchanged"], third["claims"]["created"])
        (alice,) = listed(cli, "artifact.list", {"title": "Alice Chen"}, "artifacts")
        assert (2, "mcp-memory", "Alice Chen") == (alice["revision_number"], alice["provenance"]["source"],
                                                   alice["provenance"]["external_id"])
        statements = sorted(c["statement"] for c in listed(cli, "claim.list", {"actor": "import:mcp-memory"}, "claims"))
        assert 4 == len(statements) == len(set(statements))

    def test_a_changed_observation_revises_its_claim(self, cli: Cli) -> None:
        """delete_observations + add_observations on the same entity revises the claim; the old one is not current."""
        source = save_graph(cli.root / "memory.jsonl", [{**ACME, "observations": ["Based in Porto"]}], [])
        cli.ok("import", "mcp-memory", str(source))
        save_graph(source, [{**ACME, "observations": ["Based in Lisbon"]}], [])
        summary = cli.ok("import", "mcp-memory", str(source))
        assert 1 == summary["claims"]["revised"]
        (claim,) = listed(cli, "claim.list", {"actor": "import:mcp-memory"}, "claims")
        assert ("Acme: Based in Lisbon", 2) == (claim["statement"], claim["revision_number"])

    def test_a_deleted_entity_is_forgotten_only_when_asked(self, cli: Cli) -> None:
        """Without --forget-missing a deleted entity is kept with a note; with it, forgotten and its claims retracted."""
        source = save_graph(cli.root / "memory.jsonl", [ALICE, ACME], [WORKS_AT])
        cli.ok("import", "mcp-memory", str(source))
        save_graph(source, [ALICE], [])
        kept = cli.ok("import", "mcp-memory", str(source))
        assert (1, True) == (kept["artifacts"]["skipped"], any("--forget-missing" in n for n in kept["notes"]))
        forgot = cli.ok("import", "mcp-memory", str(source), "--forget-missing")
        assert (1, 1) == (forgot["artifacts"]["removed"], forgot["claims"]["removed"])
        assert ["Alice Chen"] == [a["title"] for a in listed(cli, "artifact.list", {"provenance": {"source": "mcp-memory"}}, "artifacts")]

    def test_relation_types_are_mapped_and_kept(self, cli: Cli) -> None:
        """works_at becomes references with the upstream type kept; derived_from stays derived_from."""
        source = save_graph(cli.root / "memory.jsonl", [ALICE, ACME], [WORKS_AT, BASED_ON])
        cli.ok("import", "mcp-memory", str(source))
        (alice,) = listed(cli, "artifact.list", {"title": "Alice Chen"}, "artifacts")
        edges = listed(cli, "relation.list", {"entity_type": "artifact", "entity_id": alice["artifact_id"]}, "relations")
        assert {("references", ("works_at",)), ("derived_from", ("derived_from",))} == {
            (e["relation"], tuple(e["metadata"]["relation_types"])) for e in edges}

    def test_a_bad_line_is_skipped_and_said(self, cli: Cli) -> None:
        """A line that is not JSON is skipped with a note naming it; the rest imports, exit 0."""
        source = save_graph(cli.root / "memory.jsonl", [ACME], [])
        source.write_text(source.read_text() + "not json\n", encoding="utf-8")
        summary = cli.ok("import", "mcp-memory", str(source))
        assert (1, ["line 2: not JSON"]) == (summary["artifacts"]["created"], summary["notes"])


class TestMem0Import:
    def test_an_updated_memory_revises_its_claim_and_relations_are_imported(self, cli: Cli) -> None:
        """A memory updated under its id is one claim revised (Lisbon current, Porto not); relations are edges."""
        source = cli.root / "mem0.json"
        relations = [{"source": "alice", "relationship": "lives_in", "target": "porto"}]
        source.write_text(json.dumps({"results": [mem0_memory("m1", "Lives in Porto"),
                                                  mem0_memory("m2", "Allergic to peanuts")],
                                      "relations": relations}), encoding="utf-8")
        first = cli.ok("import", "mem0", str(source))
        assert (4, 3, 1) == (first["artifacts"]["created"], first["claims"]["created"], first["relations"]["created"])
        source.write_text(json.dumps({"results": [mem0_memory("m1", "Lives in Lisbon"),
                                                  mem0_memory("m2", "Allergic to peanuts")],
                                      "relations": relations}), encoding="utf-8")
        second = cli.ok("import", "mem0", str(source))
        assert (1, 1, 0) == (second["artifacts"]["revised"], second["claims"]["revised"], second["claims"]["created"])
        current = {c["statement"] for c in listed(cli, "claim.list", {"actor": "import:mem0"}, "claims")}
        assert {"Lives in Lisbon", "Allergic to peanuts", "alice lives in porto"} == current
        (alice,) = listed(cli, "artifact.list", {"title": "alice"}, "artifacts")
        (edge,) = listed(cli, "relation.list", {"entity_type": "artifact", "entity_id": alice["artifact_id"]}, "relations")
        assert ("references", ["lives_in"]) == (edge["relation"], edge["metadata"]["relation_types"])

    def test_the_platform_export_of_the_same_ids_adds_nothing(self, cli: Cli) -> None:
        """The same memories as a Platform page (extra fields, other hashes and times) write nothing."""
        source = cli.root / "mem0.json"
        source.write_text(json.dumps({"results": [mem0_memory("m1", "Prefers dark mode")]}), encoding="utf-8")
        cli.ok("import", "mem0", str(source))
        head = cli.head()
        page = cli.root / "platform.json"
        page.write_text(json.dumps({"count": 1, "next": None, "previous": None,
                                    "results": [platform_memory("m1", "Prefers dark mode")]}), encoding="utf-8")
        summary = cli.ok("import", "mem0", str(page))
        assert (head, 1, 0) == (cli.head(), summary["artifacts"]["unchanged"], summary["artifacts"]["created"])

    def test_not_a_memory_list_is_invalid(self, cli: Cli) -> None:
        """A file that is not a list of memories is INVALID_REQUEST (exit 2) and writes nothing."""
        source = cli.root / "mem0.json"
        source.write_text('{"memories": 3}', encoding="utf-8")
        document, code = cli.json("import", "mem0", str(source))
        assert ("INVALID_REQUEST", 2, 0) == (document["error"]["code"], code, cli.head())


TOPICS = ["coffee", "tea", "espresso", "grinder", "kettle", "water", "roast", "origin"]


def write_notes(folder: Path, count: int) -> None:
    """``count`` basic-memory notes in folders, each with observations, tags and relations to the next."""
    for i in range(count):
        topic = TOPICS[i % len(TOPICS)]
        sub = folder / ("brewing" if i % 2 else "beans")
        sub.mkdir(parents=True, exist_ok=True)
        following = f"Note {i + 1} about {TOPICS[(i + 1) % len(TOPICS)]}" if i + 1 < count else "Note 0 about coffee"
        (sub / f"Note {i} about {topic}.md").write_text(
            "---\n"
            f"title: Note {i} about {topic}\n"
            "type: note\n"
            f"tags: [{topic}, brewing]\n"
            f"permalink: notes/note-{i}\n"
            "---\n\n"
            f"# Note {i} about {topic}\n\n"
            f"Some prose about {topic}, with an inline link to [[{following}]].\n\n"
            "## Observations\n"
            f"- [method] Pour over number {i} gives clarity with {topic} #{topic}\n"
            f"- [preference] Señora prefers {topic} batch {i} at 94°C (tasted in March)\n"
            "- [ ] a task, not an observation\n\n"
            "```\n- [fake] inside a code fence\n```\n\n"
            "## Relations\n"
            f"- relates_to [[{following}]]\n"
            f"- derived_from [[Note 0 about coffee]]\n",
            encoding="utf-8")


class TestBasicMemoryImport:
    def test_parser_cites_exact_bytes_and_reads_frontmatter(self, tmp_path: Path) -> None:
        """Titles and permalinks come from frontmatter, observations cite their exact file bytes, fences are skipped."""
        write_notes(tmp_path, 3)
        document = read_basic_memory(tmp_path)
        note = next(r for r in document.records if r.identity == "notes/note-1")
        data = note.text.encode()
        cited = [data[o.span[0]:o.span[1]].decode() for o in note.observations]
        assert ["Pour over number 1 gives clarity with tea #tea",
                "Señora prefers tea batch 1 at 94°C (tasted in March)"] == cited
        assert ("Note 1 about tea", "procedure", "preference") == (
            note.title, note.observations[0].claim_type, note.observations[1].claim_type)
        assert "Note 1 about tea: Señora prefers tea batch 1 at 94°C" == note.observations[1].statement
        assert {"tea", "brewing"} <= set(note.details["tags"])
        assert {("notes/note-2", "relates_to"), ("notes/note-2", "links_to"), ("notes/note-0", "derived_from")} == {
            (link.target, link.upstream_type) for link in note.links}

    def test_a_folder_of_notes_is_imported_with_claims_and_edges_and_recalled(self, cli: Cli) -> None:
        """32 notes: 32 artifacts, 64 claims, 63 edges (no self-edge); memory.recall finds an observation."""
        folder = cli.root / "notes"
        write_notes(folder, 32)
        summary = cli.ok("import", "basic-memory", str(folder))
        assert ((32, 64, 0), 63) == ((summary["artifacts"]["created"], summary["claims"]["created"],
                                      summary["artifacts"]["failed"]), summary["relations"]["created"])
        recalled = cli.call("memory.recall", {"query": "Señora prefers espresso batch 2"})
        assert recalled["ok"], recalled
        statements = [c["statement"] for c in recalled["result"]["claims"]]
        assert "Note 2 about espresso: Señora prefers espresso batch 2 at 94°C" in statements
        (note,) = listed(cli, "artifact.list", {"provenance": {"external_id": "notes/note-2"}}, "artifacts")
        edges = listed(cli, "relation.list", {"entity_type": "artifact", "entity_id": note["artifact_id"],
                                              "direction": "outgoing"}, "relations")
        assert {"references", "derived_from"} == {e["relation"] for e in edges}
        assert {"espresso", "brewing"} <= set(note["provenance"]["tags"])

    def test_an_edited_note_becomes_one_revision(self, cli: Cli) -> None:
        """Editing one observation in one note: one artifact revision and one claim revision, nothing else."""
        folder = cli.root / "notes"
        write_notes(folder, 4)
        cli.ok("import", "basic-memory", str(folder))
        path = folder / "beans" / "Note 0 about coffee.md"
        path.write_text(path.read_text(encoding="utf-8").replace("batch 0 at 94°C", "batch 0 at 92°C"), encoding="utf-8")
        summary = cli.ok("import", "basic-memory", str(folder))
        assert (1, 3, 1, 7) == (summary["artifacts"]["revised"], summary["artifacts"]["unchanged"],
                                summary["claims"]["revised"], summary["claims"]["unchanged"])


class TestInterruptedImport:
    @pytest.mark.parametrize(("dies_at", "relations_created"), [("relation.put", 1), ("claim.assert", 0)])
    def test_an_import_cut_off_between_batches_is_completed_by_the_next_run(
            self, tmp_path: Path, dies_at: str, relations_created: int) -> None:
        """The process dies before the relations (or the claims) are sent: the next run writes exactly what is missing."""
        from memoree.agents.caller import Sender
        from memoree.agents.importers import import_source
        from memoree.client.call import CallOptions

        class DiesBeforeClaims(Sender):
            def send_many(self, documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
                if any(d["op"] == dies_at for d in documents):
                    raise KeyboardInterrupt  # stands in for the process being killed here
                return super().send_many(documents)

        source = save_graph(tmp_path / "memory.jsonl", [ALICE, ACME], [WORKS_AT])
        options = CallOptions(in_process=True, data_dir=tmp_path / "data")
        context = {"workspace_id": "wsp_cut", "project_id": "prj_cut", "pins": []}
        try:
            with DiesBeforeClaims(options, keep_open=True) as sender:
                import_source("mcp-memory", source, sender, context=context, context_source="explicit")
        except KeyboardInterrupt:
            pass
        with Sender(options, keep_open=True) as sender:
            resumed = import_source("mcp-memory", source, sender, context=context, context_source="explicit").to_json()
            again = import_source("mcp-memory", source, sender, context=context, context_source="explicit").to_json()
        assert (2, 3, relations_created, 1 - relations_created) == (
            resumed["artifacts"]["unchanged"], resumed["claims"]["created"], resumed["relations"]["created"],
            resumed["relations"]["unchanged"])
        assert (None, 3) == (again["commit_seq"], again["claims"]["unchanged"])
