"""Scope isolation: sibling scopes whose ids share prefixes never see or write each other's memory.

Five scopes: projects ``prj_a`` and ``prj_ab`` (one a prefix of the other), workspaces ``w`` and
``w2``, and tasks ``t`` and ``t2`` of ``prj_a``. Each owns artifacts (inline and external
content), claims, a contradiction (so a conflict case) and relations, all sharing one keyword
and each carrying its scope's unique marker. At the ambient horizon every read (search,
memory.recall, context.build, memory.probe, memory.retrieve where registered, relation.list,
conflict.list) from each scope returns nothing that carries the marker or id of a scope outside
its visibility (the spec's ambient rule: a project-level context sees its tasks, a task sees the
project level and itself). Every cross-scope write is SCOPE_VIOLATION and leaves the log head
unchanged; a pin grants reading, never writing; and one idempotency key used in sibling scopes
names two independent mutations.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memoree.protocol.ops import OPS
from memoree.service.service import Service

from .conftest import Figures

SCOPES: dict[str, dict[str, Any]] = {
    "alpha": {"workspace_id": "w", "project_id": "prj_a"},
    "bravo": {"workspace_id": "w", "project_id": "prj_ab"},
    "charlie": {"workspace_id": "w2", "project_id": "prj_a"},
    "delta": {"workspace_id": "w", "project_id": "prj_a", "task_id": "t"},
    "echo": {"workspace_id": "w", "project_id": "prj_a", "task_id": "t2"},
}
VISIBLE = {"alpha": {"alpha", "delta", "echo"}, "bravo": {"bravo"}, "charlie": {"charlie"},
           "delta": {"alpha", "delta"}, "echo": {"alpha", "echo"}}
KEYWORD = "wombatlantern"
READ_OPS = [op for op in ("search", "memory.recall", "context.build", "memory.probe", "memory.retrieve") if op in OPS]


def marker(name: str) -> str:
    return f"mk{name}zz"


class Store:
    """An in-process service, a request counter, and what each scope owns."""

    def __init__(self, data_dir: Path) -> None:
        self.service = Service(data_dir)
        self.counter = 0
        self.owned: dict[str, dict[str, list[str]]] = {name: {"artifacts": [], "claims": [], "revisions": []} for name in SCOPES}

    def call(self, op: str, payload: dict[str, Any], scope: str, *, key: str | None = None,
             pins: list[str] | None = None) -> dict[str, Any]:
        self.counter += 1
        context = {**SCOPES[scope], "pins": pins or []}
        document = {"v": 1, "request_id": f"r{self.counter}", "op": op, "input": payload, "context": context}
        if OPS[op].mutating:
            document["idempotency_key"] = key or f"key-{self.counter}"
        return json.loads(self.service.handle_bytes(json.dumps(document).encode()).body)

    def ok(self, op: str, payload: dict[str, Any], scope: str, **kwargs: Any) -> dict[str, Any]:
        envelope = self.call(op, payload, scope, **kwargs)
        assert envelope["ok"], envelope
        return envelope["result"]

    def head(self) -> int:
        return self.service.engine.head()

    def seed(self, name: str) -> None:
        owned = self.owned[name]
        for size, label in ((1, "inline"), (900, "external")):
            body = f"{KEYWORD} {marker(name)} {label} evidence. " * size
            art = self.ok("artifact.put", {"kind": "note", "title": f"{KEYWORD} {marker(name)} {label}",
                                           "content": {"type": "text", "data": body}}, name)
            owned["artifacts"].append(art["artifact_id"])
            owned["revisions"].append(art["revision_id"])
        claims = []
        for stance in ("holds", "fails"):
            claim = self.ok("claim.assert", {"claim_type": "fact", "statement": f"{KEYWORD} {marker(name)} {stance}",
                                             "evidence": [{"artifact_id": owned["artifacts"][0], "revision_id": owned["revisions"][0],
                                                           "start_byte": 0, "end_byte": len(KEYWORD)}]}, name)
            claims.append(claim["claim_id"])
        owned["claims"].extend(claims)
        self.ok("relation.put", {"source_type": "claim", "source_id": claims[0], "relation": "contradicts",
                                 "target_type": "claim", "target_id": claims[1]}, name)
        self.ok("relation.put", {"source_type": "artifact", "source_id": owned["artifacts"][1], "relation": "supports",
                                 "target_type": "claim", "target_id": claims[0]}, name)

    def foreign_tokens(self, viewer: str) -> list[str]:
        tokens = []
        for name in SCOPES:
            if name not in VISIBLE[viewer]:
                tokens.append(marker(name))
                tokens.extend(self.owned[name]["artifacts"] + self.owned[name]["claims"])
        return tokens


@pytest.fixture
def store(tmp_path: Path) -> Any:
    seeded = Store(tmp_path / "data")
    for name in SCOPES:
        seeded.seed(name)
    # A task-level relation between project-level claims: visible to its task, not to the sibling task.
    seeded.ok("relation.put", {"source_type": "claim", "source_id": seeded.owned["alpha"]["claims"][0], "relation": "references",
                               "target_type": "claim", "target_id": seeded.owned["alpha"]["claims"][1]}, "delta")
    yield seeded
    seeded.service.close()


def read_requests(store: Store, viewer: str) -> list[tuple[str, dict[str, Any]]]:
    reads: list[tuple[str, dict[str, Any]]] = []
    for op in READ_OPS:
        payload: dict[str, Any] = {"query": KEYWORD}
        if op == "memory.recall":
            payload.update(max_claims=10, max_artifact_refs=20, max_candidate_claims=16, max_candidate_artifact_refs=16)
        elif op == "search":
            payload["limit"] = 100
        elif op == "context.build":
            payload.update(limit=100, max_bytes=200000)
        reads.append((op, payload))
    reads.append(("conflict.list", {"include_stale": True}))
    for name in VISIBLE[viewer]:
        for entity_type, ids in (("claim", store.owned[name]["claims"]), ("artifact", store.owned[name]["artifacts"])):
            reads.extend(("relation.list", {"entity_type": entity_type, "entity_id": entity_id}) for entity_id in ids)
    return reads


class TestScopeIsolation:
    """Reads at the ambient horizon and writes never cross into sibling scopes."""

    def test_ambient_reads_never_show_sibling_scopes(self, store: Store, figures: Figures) -> None:
        """Search, recall, context.build, probe, retrieve, relation.list and conflict.list stay inside the horizon."""
        leaks, reads = [], 0
        for viewer in SCOPES:
            foreign = store.foreign_tokens(viewer)
            own_seen = False
            for op, payload in read_requests(store, viewer):
                envelope = store.call(op, payload, viewer)
                reads += 1
                assert envelope["ok"], (viewer, op, envelope)
                text = json.dumps(envelope["result"], ensure_ascii=False)
                own_seen |= marker(viewer) in text
                leaks.extend((viewer, op, token) for token in foreign if token in text)
            assert own_seen, f"{viewer} saw none of its own memory: the isolation check would be vacuous"
        figures.add("scope isolation: ambient reads", operations=reads, acked_losses=0, note=f"{len(leaks)} leaks")
        assert [] == leaks[:10]

    def test_relation_list_anchored_outside_the_horizon_is_refused(self, store: Store) -> None:
        """relation.list on a sibling scope's entity is SCOPE_VIOLATION."""
        for viewer in SCOPES:
            for name in set(SCOPES) - VISIBLE[viewer]:
                envelope = store.call("relation.list", {"entity_type": "claim", "entity_id": store.owned[name]["claims"][0]}, viewer)
                assert "SCOPE_VIOLATION" == envelope["error"]["code"], (viewer, name, envelope)

    def test_cross_scope_writes_are_refused_and_append_nothing(self, store: Store, figures: Figures) -> None:
        """Revise, forget, retract, claim.revise and relation.put on a sibling's entity: SCOPE_VIOLATION, head unchanged."""
        attempts = refused = 0
        for writer in SCOPES:
            for name in set(SCOPES) - VISIBLE[writer]:
                owned, mine = store.owned[name], store.owned[writer]
                for op, payload in [
                    ("artifact.revise", {"artifact_id": owned["artifacts"][0], "if_revision": owned["revisions"][0],
                                         "content": {"type": "text", "data": "overwritten"}}),
                    ("artifact.forget", {"artifact_id": owned["artifacts"][1], "reason": "cross-scope"}),
                    ("claim.retract", {"claim_id": owned["claims"][0], "reason": "cross-scope"}),
                    ("relation.put", {"source_type": "claim", "source_id": mine["claims"][0], "relation": "supports",
                                      "target_type": "claim", "target_id": owned["claims"][1]}),
                    ("relation.put", {"source_type": "claim", "source_id": owned["claims"][1], "relation": "supports",
                                      "target_type": "claim", "target_id": mine["claims"][0]}),
                ]:
                    head = store.head()
                    envelope = store.call(op, payload, writer)
                    attempts += 1
                    refused += envelope.get("error", {}).get("code") == "SCOPE_VIOLATION"
                    assert "SCOPE_VIOLATION" == envelope.get("error", {}).get("code"), (writer, name, op, envelope)
                    assert head == store.head(), (writer, name, op)
        figures.add("scope isolation: cross-scope writes", operations=attempts, typed_errors=refused, errors=attempts)

    def test_pins_grant_reading_but_never_writing(self, store: Store) -> None:
        """A pinned sibling artifact is readable by search, yet revising it is SCOPE_VIOLATION."""
        foreign = store.owned["bravo"]["artifacts"][0]
        found = store.ok("search", {"query": KEYWORD, "limit": 100}, "alpha", pins=[foreign])
        assert foreign in json.dumps(found)
        head = store.head()
        envelope = store.call("artifact.revise", {"artifact_id": foreign, "if_revision": store.owned["bravo"]["revisions"][0],
                                                  "content": {"type": "text", "data": "pinned"}}, "alpha", pins=[foreign])
        assert ("SCOPE_VIOLATION", head) == (envelope["error"]["code"], store.head())

    def test_one_idempotency_key_in_sibling_scopes_names_two_mutations(self, store: Store) -> None:
        """The same key in prj_a and prj_ab creates two artifacts; a NUL-joined id cannot alias a namespace."""
        put = {"kind": "note", "title": "keyed", "content": {"type": "text", "data": "same key"}}
        first = store.call("artifact.put", put, "alpha", key="shared-key")
        second = store.call("artifact.put", put, "bravo", key="shared-key")
        assert first["ok"] and second["ok"]
        assert first["result"]["artifact_id"] != second["result"]["artifact_id"]
        assert first["result"]["created"] and second["result"]["created"]
        # Namespaces join ids with NUL: ("w\0prj_a", "x") would otherwise alias ("w", "prj_a\0x").
        document = {"v": 1, "request_id": "r-nul", "op": "artifact.put", "idempotency_key": "shared-key",
                    "context": {"workspace_id": "w\0prj_a", "project_id": "x"}, "input": put}
        envelope = json.loads(store.service.handle_bytes(json.dumps(document).encode()).body)
        assert "INVALID_REQUEST" == envelope["error"]["code"]
