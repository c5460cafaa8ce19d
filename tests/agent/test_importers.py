"""Importers: mcp-memory JSONL and mem0 JSON become cited artifacts, claims and relations, idempotently."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memoree.client.call import CallOptions
from memoree.agents.caller import Sender
from memoree.agents.importers import import_file, plan_mcp_memory
from memoree.protocol.ops import OPS
from tests.agent.conftest import CTX, Cli

ENTITIES = [
    {"type": "entity", "name": "Alice", "entityType": "person",
     "observations": ['likes "green" tea', "works at Acme — since 2019", "likes \"green\" tea"]},
    {"type": "entity", "name": "Acme", "entityType": "company", "observations": ["makes anvils"]},
    {"type": "relation", "from": "Alice", "to": "Acme", "relationType": "works_at"},
    {"type": "relation", "from": "Alice", "to": "Acme", "relationType": "admires"},
    {"type": "relation", "from": "Alice", "to": "Bob", "relationType": "knows"},
]
MEMORIES = [
    {"id": "m1", "memory": "Prefers dark mode in every editor", "metadata": {"category": "ui"},
     "created_at": "2024-07-20T10:00:00-07:00", "user_id": "u1"},
    {"id": "m2", "memory": "Allergic to peanuts", "metadata": None, "created_at": "2024-07-21T09:00:00Z", "user_id": "u1"},
]


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records) + "\nnot json\n", encoding="utf-8")
    return path


def claim_texts(cli: Cli, statement_prefix: str) -> dict[str, str]:
    """Statement -> the exact artifact bytes its single evidence locator cites, for imported claims."""
    found = {}
    search = cli.call("search", {"query": statement_prefix, "limit": 50})["result"]["hits"]
    for claim_id in hit_ids(search, "claim"):
        stored = cli.call("claim.get", {"claim_id": claim_id})["result"]
        (locator,) = stored["evidence"]
        artifact = cli.call("artifact.get", {"artifact_id": locator["artifact_id"], "revision_id": locator["revision_id"]})
        data = artifact["result"]["content"]["data"].encode()
        found[stored["statement"]] = data[locator["start_byte"]:locator["end_byte"]].decode()
    return found


def hit_ids(hits: list[dict[str, Any]], entity_type: str) -> list[str]:
    return [h["entity_id"] for h in hits if h["entity_type"] == entity_type]


class TestPlanning:
    def test_observation_spans_are_exact_despite_escapes(self) -> None:
        """Each observation's span in the rendered entity equals the observation, quotes and dashes included."""
        plan = plan_mcp_memory("\n".join(json.dumps(r) for r in ENTITIES).encode())
        alice = plan.records[0]
        data = alice.artifact_input["content"]["data"].encode()
        assert ENTITIES[0]["observations"] == [data[c.span[0]:c.span[1]].decode() for c in alice.claims]
        assert len({c.key for c in alice.claims}) == 3
        assert [("Alice", "Acme", ["admires", "works_at"]), ("Alice", "Bob", ["knows"])] == [
            (r.source, r.target, r.relation_types) for r in plan.relations]


class TestMcpMemoryImport:
    def test_import_cites_exact_bytes_and_is_idempotent(self, cli: Cli) -> None:
        """Entities become artifacts, observations claims citing exact spans; a second import commits nothing."""
        source = write_jsonl(cli.root / "memory.jsonl", ENTITIES)
        summary = cli.ok("import", "mcp-memory", str(source))
        assert ({"created": 2, "replayed": 0, "failed": 0, "skipped": 0}, 4) == (summary["artifacts"], summary["claims"]["created"])
        expected_relations = {"created": 1, "replayed": 0, "failed": 0, "skipped": 1} if "relation.put" in OPS else \
            {"created": 0, "replayed": 0, "failed": 0, "skipped": 2}
        assert expected_relations == summary["relations"]
        assert any("not JSON" in note for note in summary["notes"])
        head = cli.head()
        again = cli.ok("import", "mcp-memory", str(source))
        assert (head, 0, 2, 4) == (cli.head(), again["artifacts"]["created"], again["artifacts"]["replayed"], again["claims"]["replayed"])
        if "search" in OPS:
            cited = claim_texts(cli, "anvils")
            assert {"Acme: makes anvils": "makes anvils"} == cited

    def test_relations_link_the_entity_artifacts(self, cli: Cli) -> None:
        """An mcp-memory relation becomes one references edge between the two entity artifacts."""
        if not {"relation.list", "relation.put", "search"} <= set(OPS):
            pytest.skip("needs relation.put, relation.list and search")
        source = write_jsonl(cli.root / "memory.jsonl", ENTITIES)
        cli.ok("import", "mcp-memory", str(source))
        (artifact_id,) = hit_ids(cli.call("search", {"query": "anvils", "limit": 10})["result"]["hits"], "artifact")
        listed = cli.call("relation.list", {"entity_type": "artifact", "entity_id": artifact_id})["result"]["relations"]
        (edge,) = listed
        assert ("references", artifact_id, ["admires", "works_at"]) == (edge["relation"], edge["target_id"], edge["metadata"]["relation_types"])

    def test_relations_are_skipped_when_relation_put_is_absent(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without relation.put the importer stores entities and claims and says it skipped the relations."""
        monkeypatch.setenv("MEMOREE_HOME", str(tmp_path / "home"))
        source = write_jsonl(tmp_path / "memory.jsonl", ENTITIES)
        summary = import_file("mcp-memory", source, Sender(CallOptions(in_process=True)), context={**CTX, "pins": []},
                              context_source="explicit", relations_supported=False)
        assert (2, 2) == (summary.counts["artifacts"]["created"], summary.counts["relations"]["skipped"])
        assert any("relation.put" in note for note in summary.notes)


class TestMem0Import:
    def test_memories_become_cited_claims_idempotently(self, cli: Cli) -> None:
        """Each mem0 memory becomes an artifact naming mem0 and a claim citing the memory's bytes; reimport is a no-op."""
        source = cli.root / "mem0.json"
        source.write_text(json.dumps({"results": MEMORIES}), encoding="utf-8")
        summary = cli.ok("import", "mem0", str(source))
        assert (2, 2, 0) == (summary["artifacts"]["created"], summary["claims"]["created"], summary["relations"]["created"])
        head = cli.head()
        again = cli.ok("import", "mem0", str(source))
        assert (head, 2) == (cli.head(), again["claims"]["replayed"])
        if "search" in OPS:
            assert {"Allergic to peanuts": "Allergic to peanuts"} == claim_texts(cli, "peanuts")
            (artifact_id,) = hit_ids(cli.call("search", {"query": "peanuts"})["result"]["hits"], "artifact")
            stored = cli.call("artifact.get", {"artifact_id": artifact_id, "include_content": False})["result"]
            assert ("mem0", "m2", "u1") == tuple(stored["provenance"][k] for k in ("source", "id", "user_id"))

    def test_not_a_memory_list_is_invalid(self, cli: Cli) -> None:
        """A file that is not a list of memories is INVALID_REQUEST (exit 2) and writes nothing."""
        source = cli.root / "mem0.json"
        source.write_text('{"memories": 3}', encoding="utf-8")
        document, code = cli.json("import", "mem0", str(source))
        assert ("INVALID_REQUEST", 2, 0) == (document["error"]["code"], code, cli.head())
