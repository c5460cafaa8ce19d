"""Replay determinism: every way of rebuilding a store reproduces the same projections and roots.

A hypothesis ``RuleBasedStateMachine`` drives random sequences of mutations (puts of inline and
external content, revisions, forgets, claims citing byte spans, claim revisions and retractions,
relations between any two entities, exact retries, seals) across two sibling scopes and a task.
At the end of every run it compares, by projection fingerprints
(``memoree.admin.verify.projection_fingerprint`` over each projector's tables) and by the signed Merkle
checkpoints: the incrementally maintained projections; a full replay (``engine.reindex``); the
replay of a restored backup; and the replay of an exported-then-imported log. All four must be
identical, and verify must be clean. No response may be INTERNAL_ERROR.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from memoree.admin import verify as audit, backup, transfer

from memoree.eventlog import sealing
from memoree.eventlog.checkpoints import list_checkpoints
from memoree.projections.base import owned_tables
from memoree.service.service import Service

from .conftest import Figures, Sizes

SCOPES = [
    {"workspace_id": "w", "project_id": "prj_a"},
    {"workspace_id": "w", "project_id": "prj_ab"},
    {"workspace_id": "w", "project_id": "prj_a", "task_id": "tsk_1"},
]
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=120).filter(str.strip)
CLAIM_TYPES = st.sampled_from(["fact", "decision", "constraint", "preference", "procedure", "observation"])
RELATIONS = st.sampled_from(["derived_from", "supports", "contradicts", "supersedes", "references", "duplicates"])
RUNS: list[dict[str, int]] = []


def fingerprints(engine: Any) -> dict[str, str]:
    return {p.name: audit.projection_fingerprint(engine.conn, owned_tables(p)) for p in engine.projectors}


def checkpoint_roots(engine: Any) -> list[tuple[int, int, str, str]]:
    return [(cp.checkpoint_seq, cp.tree_size, cp.root.hex(), cp.signature.hex()) for cp in list_checkpoints(engine.conn)]


class ReplayMachine(RuleBasedStateMachine):
    """Random mutation histories whose every rebuild must match the live store."""

    artifacts = Bundle("artifacts")
    claims = Bundle("claims")

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="memoree-replay-"))
        self.service = Service(self.root / "data")
        self.counter = 0
        self.sent: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.heads: dict[str, dict[str, Any]] = {}
        self.mutations = 0

    def call(self, op: str, payload: dict[str, Any], scope: dict[str, Any], *, key: str | None = None) -> dict[str, Any]:
        self.counter += 1
        document = {"v": 1, "request_id": f"r{self.counter}", "op": op, "input": payload, "context": scope,
                    "idempotency_key": key or f"k{self.counter}"}
        envelope = json.loads(self.service.handle_bytes(json.dumps(document).encode()).body)
        assert envelope["ok"] or envelope["error"]["code"] != "INTERNAL_ERROR", envelope
        if envelope["ok"]:
            self.mutations += 1
            self.sent.append((document, envelope))
        return envelope

    @initialize(target=artifacts)
    def first_artifact(self) -> str:
        return self.put_artifact(text="first evidence", large=False, scope_index=0)

    @rule(target=artifacts, text=TEXT, large=st.booleans(), scope_index=st.integers(0, len(SCOPES) - 1))
    def put_artifact(self, text: str, large: bool, scope_index: int) -> str:
        body = text * (20000 // len(text.encode()) + 1) if large else text
        envelope = self.call("artifact.put", {"kind": "note", "title": text.strip()[:40], "content": {"type": "text", "data": body}},
                             SCOPES[scope_index])
        result = envelope["result"]
        self.heads[result["artifact_id"]] = {"revision_id": result["revision_id"], "size": len(body.encode()),
                                             "scope": SCOPES[scope_index]}
        return result["artifact_id"]

    @rule(artifact=artifacts, text=TEXT)
    def revise_artifact(self, artifact: str, text: str) -> None:
        head = self.heads[artifact]
        envelope = self.call("artifact.revise", {"artifact_id": artifact, "if_revision": head["revision_id"],
                                                 "content": {"type": "text", "data": text}}, head["scope"])
        if envelope["ok"]:
            head.update(revision_id=envelope["result"]["revision_id"], size=len(text.encode()))

    @rule(artifact=artifacts, reason=TEXT)
    def forget_artifact(self, artifact: str, reason: str) -> None:
        self.call("artifact.forget", {"artifact_id": artifact, "reason": reason}, self.heads[artifact]["scope"])

    @rule(target=claims, artifact=artifacts, statement=TEXT, claim_type=CLAIM_TYPES,
          span=st.tuples(st.integers(0, 64), st.integers(1, 64)))
    def assert_claim(self, artifact: str, statement: str, claim_type: str, span: tuple[int, int]) -> str:
        head = self.heads[artifact]
        start = min(span[0], head["size"] - 1)
        end = min(start + span[1], head["size"])
        evidence = [{"artifact_id": artifact, "revision_id": head["revision_id"], "start_byte": start, "end_byte": end}]
        envelope = self.call("claim.assert", {"claim_type": claim_type, "statement": statement, "evidence": evidence},
                             head["scope"])
        if not envelope["ok"]:
            evidence = [{"artifact_id": artifact, "revision_id": head["revision_id"]}]
            envelope = self.call("claim.assert", {"claim_type": claim_type, "statement": statement, "evidence": evidence},
                                 head["scope"])
        assert envelope["ok"], envelope
        result = envelope["result"]
        self.heads[result["claim_id"]] = {"revision_id": result["revision_id"], "scope": head["scope"]}
        return result["claim_id"]

    @rule(claim=claims, statement=TEXT)
    def revise_claim(self, claim: str, statement: str) -> None:
        head = self.heads[claim]
        envelope = self.call("claim.revise", {"claim_id": claim, "if_revision": head["revision_id"], "statement": statement},
                             head["scope"])
        if envelope["ok"]:
            head["revision_id"] = envelope["result"]["revision_id"]

    @rule(claim=claims, reason=TEXT)
    def retract_claim(self, claim: str, reason: str) -> None:
        self.call("claim.retract", {"claim_id": claim, "reason": reason}, self.heads[claim]["scope"])

    @rule(source=st.one_of(artifacts, claims), other=st.one_of(artifacts, claims), relation=RELATIONS)
    def relate(self, source: str, other: str, relation: str) -> None:
        kinds = {True: "claim", False: "artifact"}
        self.call("relation.put", {"source_type": kinds[source.startswith("clm")], "source_id": source,
                                   "relation": relation, "target_type": kinds[other.startswith("clm")],
                                   "target_id": other}, self.heads[source]["scope"])

    @rule(which=st.integers(0, 10**6))
    def retry_exactly(self, which: int) -> None:
        if not self.sent:
            return
        document, envelope = self.sent[which % len(self.sent)]
        again = json.loads(self.service.handle_bytes(json.dumps(document).encode()).body)
        assert again["ok"] and again["commit_seq"] == envelope["commit_seq"], (envelope, again)

    @rule()
    def seal(self) -> None:
        sealing.seal(self.service.engine)

    def teardown(self) -> None:
        try:
            self.compare_rebuilds()
        finally:
            self.service.close()
            shutil.rmtree(self.root, ignore_errors=True)

    def compare_rebuilds(self) -> None:
        engine = self.service.engine
        sealing.seal(engine)
        assert audit.verify(engine)["ok"]  # its vectors may lag: verify compares them as caught up
        engine.catch_up_vectors()  # the incremental projections, the vectors level with the log
        live, roots = fingerprints(engine), checkpoint_roots(engine)
        engine.reindex()
        assert live == fingerprints(engine), "a full replay (reindex) differs from the incremental projections"
        backup.create(engine, self.root / "backup")
        transfer.export(engine, self.root / "export.ndjson", self.root / "export-blobs")
        assert roots == checkpoint_roots(engine)
        backup.restore(self.root / "backup", self.root / "restored")
        transfer.import_log(self.root / "export.ndjson", self.root / "imported", self.root / "export-blobs")
        for name in ("restored", "imported"):
            other = Service(self.root / name)
            try:
                assert live == fingerprints(other.engine), f"the {name} store's replay differs"
                assert roots == checkpoint_roots(other.engine), f"the {name} store's checkpoints differ"
            finally:
                other.close()
        RUNS.append({"mutations": self.mutations, "events": engine.head()})


class TestReplayDeterminism:
    """Incremental projections, reindex, restored backups and imported exports all agree."""

    def test_every_rebuild_matches_the_live_store(self, sizes: Sizes, figures: Figures) -> None:
        """Random histories: projection fingerprints and checkpoint roots agree across four rebuilds."""
        RUNS.clear()
        run_state_machine_as_test(ReplayMachine, settings=settings(
            max_examples=sizes.replay_examples, stateful_step_count=sizes.replay_steps, deadline=None,
            database=None, derandomize=not sizes.soak, suppress_health_check=list(HealthCheck),
        ))
        figures.add("replay determinism", operations=sum(r["mutations"] for r in RUNS),
                    note=f"{len(RUNS)} histories x 4 rebuilds compared")
        if not RUNS:
            pytest.fail("hypothesis ran no complete history")
