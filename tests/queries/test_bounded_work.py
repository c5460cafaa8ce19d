"""Bounded work on reads: hostile words and ranking that only the caller's horizon decides."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from memoree.client.transport import Endpoint, exchange
from memoree.daemon.server import Daemon
from memoree.queries.candidates import Horizon
from memoree.queries.typo import corrections_for
from memoree.service.service import Service
from tests.conftest import CTX, Caller
from tests.queries.test_search import claim, put, search

OTHER_WORKSPACE = {"workspace_id": "wsp_other", "project_id": "prj_other"}
READ_OPS = (("search", {}), ("memory.recall", {}), ("context.build", {"max_bytes": 6000}),
            ("memory.probe", {}), ("memory.retrieve", {}))


class VmSteps:
    """Counts SQLite virtual-machine steps (in thousands) while installed on a connection."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.thousands = conn, 0

    def __enter__(self) -> VmSteps:
        self.conn.set_progress_handler(self._tick, 1000)
        return self

    def _tick(self) -> int:
        self.thousands += 1
        return 0

    def __exit__(self, *exc: Any) -> None:
        self.conn.set_progress_handler(None, 0)


def hostile_store(call: Caller) -> None:
    put(call, "zq" * (512 * 1024), title="one 1 MiB word")
    claim(call, "zq" * (64 * 1024))
    put(call, "an ordinary note about the weekly ledger rotation", title="ledger")


class TestHostileWords:
    """A longest query word against a longest one-word claim and document is bounded work."""

    def test_a_query_word_over_the_limit_is_refused_before_any_work(self, call: Caller) -> None:
        """A 64 KiB query word is INVALID_REQUEST for every read op."""
        for op, extra in READ_OPS:
            envelope = call(op, {"query": "q" * (64 * 1024), **extra})
            assert "INVALID_REQUEST" == envelope["error"]["code"], op

    def test_longest_words_cost_a_bounded_number_of_sqlite_steps(self, call: Caller, service: Service) -> None:
        """An 8 KiB one-word query (typo channel included) over a 1 MiB one-word document and a
        128 KiB one-word claim takes fewer SQLite steps than a fixed bound, in every read op."""
        hostile_store(call)
        for op, extra in READ_OPS:
            for query in ("zq" * 4096, "zx" + "zq" * 4095, "ledgr rotaton"):
                with VmSteps(service.engine.conn) as steps:
                    envelope = call(op, {"query": query, **extra})
                assert envelope["ok"], envelope
                assert steps.thousands < 2000, (op, query[:10], steps.thousands)

    def test_the_typo_channel_looks_nothing_up_for_words_it_cannot_correct(self, service: Service) -> None:
        """Words outside 3..32 characters get no corrections and no lookups at all."""
        horizon = Horizon("personal", None, ("",))
        with VmSteps(service.engine.conn) as steps:
            assert [] == corrections_for(service.engine.conn, horizon, "q" * 8192, 0.72)
            assert [] == corrections_for(service.engine.conn, horizon, "qq", 0.72)
        assert 0 == steps.thousands

    def test_another_client_is_served_while_a_hostile_read_runs(self, tmp_path: Path) -> None:
        """A daemon answers an ordinary search while clients send hostile reads."""
        service = Service(tmp_path / "data")
        caller = Caller(service)
        hostile_store(caller)
        endpoint = Endpoint("unix", str(tmp_path / "run" / "d.sock"))
        daemon = Daemon(service, endpoint)
        daemon.start()
        server = threading.Thread(target=daemon.serve_forever, daemon=True)
        server.start()

        def send(query: str) -> dict[str, Any]:
            document = {"v": 1, "request_id": "req_b", "op": "search", "input": {"query": query}, "context": CTX}
            return json.loads(exchange(endpoint, json.dumps(document).encode()))

        try:
            results: list[dict[str, Any]] = []

            def hostile() -> None:
                for _ in range(3):
                    results.append(send("zx" + "zq" * 4095))

            threads = [threading.Thread(target=hostile) for _ in range(2)]
            for thread in threads:
                thread.start()
            answer = send("ledger rotation")
            for thread in threads:
                thread.join(timeout=60)
            assert answer["ok"] and ["ledger"] == [h["title"] for h in answer["result"]["hits"]]
            assert 6 == len(results) and all(r["ok"] for r in results)
        finally:
            daemon.stop()
            server.join(30)


class TestHorizonIndependence:
    """Another workspace's content changes nothing a project's reads return or disclose."""

    QUERIES = ("ledger rotation weekly", "ledgr rotaton", "vault keys", "rotation")

    def project_store(self, call: Caller) -> None:
        put(call, "Ledger rotation happens weekly.\nKeys rotate with the ledger.", title="ledger ops")
        put(call, "The vault keeps rotation keys for the ledger.", title="vault")
        claim(call, "Ledger keys rotate weekly")
        claim(call, "Vault keys are rotated monthly")

    def answers(self, call: Caller) -> list[str]:
        found = []
        for query in self.QUERIES:
            for op, extra in (("search", {}), ("memory.recall", {}), ("context.build", {"max_bytes": 4000})):
                result = call.ok(op, {"query": query, **extra})["result"]
                found.append(json.dumps(_without_ids(result), sort_keys=True))
        return found

    def test_results_typo_results_and_scores_ignore_other_workspaces(self, call: Caller) -> None:
        """Storing many matching and near-matching texts in a second workspace leaves every
        result of the project (hits, order, typo matches, every score) unchanged."""
        self.project_store(call)
        before = self.answers(call)
        for i in range(30):
            put(call, f"ledger rotation ledger weekly vault keys {i} ledge rotator ledgers",
                title=f"other {i}", context=OTHER_WORKSPACE)
            claim(call, f"Ledger rotation weekly vault keys ledgr rotaton {i}", context=OTHER_WORKSPACE)
        assert before == self.answers(call)
        assert search(call, "ledger", context=OTHER_WORKSPACE)["hits"]  # the other data is searchable


def _without_ids(result: dict[str, Any]) -> dict[str, Any]:
    """The result minus per-request clock fields (the clock moves between the two reads)."""
    text = json.dumps(result)
    document = json.loads(text)
    for hit in document.get("hits", []):
        hit["ranking"].pop("evaluated_at", None)
        hit["provenance"].pop("evaluated_at", None)
        hit["ranking"].pop("recency_bonus", None)
        hit["score"] = round(hit["ranking"]["fusion_score"], 9)
    for item in document.get("claims", []) + document.get("artifact_refs", []):
        item.pop("score", None)
    for item in document.get("manifest", []):
        item["provenance"].pop("evaluated_at", None)
    document.pop("semantic", None)
    document.pop("semantic_claims", None)
    document.pop("semantic_artifacts", None)
    return document
