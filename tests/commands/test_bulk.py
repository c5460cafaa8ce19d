"""The bulk lane (``commands.bulk``): a batch's puts answered one by one, written together."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from memoree.admin.verify import verify
from memoree.service.service import Service
from tests.conftest import CTX
from tests.projections.test_fts import index_answers, vocabulary


def open_store(folder: Path) -> Service:
    """A store with a fixed clock and counted ids, so two stores fed alike mint alike."""
    ticks, ids = itertools.count(), itertools.count()
    return Service(folder, clock=lambda: f"2026-01-01T00:00:{next(ticks) % 60:02d}.000000Z",
                   id_factory=lambda prefix: f"{prefix}_{next(ids):026d}")


def request(i: int, op: str, inp: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    return {"v": 1, "request_id": f"r{i}", "op": op, "idempotency_key": key or f"k{i}", "context": CTX,
            "input": inp}


def put(i: int, text: str, key: str | None = None) -> dict[str, Any]:
    return request(i, "artifact.put", {"kind": "note", "title": f"t{i}",
                                       "content": {"type": "text", "data": text}}, key)


def tables(service: Service) -> dict[str, list[Any]]:
    """Every table's rows but the FTS5 index's own pages (compared by their answers instead)."""
    conn = service.engine.conn
    names = [name for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '%fts%' "
        "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    return {name: conn.execute(f"SELECT * FROM {name} ORDER BY 1").fetchall() for name in names}


def batch(service: Service, requests: list[dict[str, Any]]) -> dict[str, Any]:
    frame = {"v": 1, "request_id": "b", "op": "batch", "input": {"requests": requests}}
    return json.loads(service.handle_bytes(json.dumps(frame).encode()).body)


class TestBulkLane:
    def test_a_batch_answers_and_stores_byte_for_byte_what_its_requests_one_by_one_do(self, tmp_path: Path) -> None:
        """Puts (ASCII, accented, repeated bytes, a key repeated in the run, a key reused with other
        bytes, an earlier batch's key, the key of a claim just before), a refused revise, a claim
        citing a put of the same batch and a purge, sent as batches and one by one with the same clock and ids, get the same
        answers and leave the same rows; verify's replay of the batched store agrees."""
        lone, batched = open_store(tmp_path / "lone"), open_store(tmp_path / "batched")
        texts = [f"Note {i}: the cache_layer uses SQLite-WAL, tkt-{i:05d}; café Straße naïve {i}" if i % 3 == 0
                 else f"Plain ascii words number {i} about wombats, numbats & quokkas; see x_y_{i}."
                 for i in range(12)]
        first = [put(i, t) for i, t in enumerate(texts[:6])]
        first.insert(4, put(3, texts[3]))  # the same key and bytes again in the run: a replay
        first.insert(5, put(40, "other bytes", key="k1"))  # a key reused with other bytes: refused
        first.append(put(41, texts[0], key="same-bytes"))  # bytes already stored under another key
        lone_answers = [json.loads(lone.handle_bytes(json.dumps(r).encode()).body) for r in first]
        art = lone_answers[1]["result"]
        rest = [put(i, t) for i, t in enumerate(texts[6:], 6)]
        rest.insert(1, request(90, "artifact.revise", {"artifact_id": "art_missing", "if_revision": "arev_x",
                                                       "content": {"type": "text", "data": "fails"}}))
        rest.insert(2, request(91, "claim.assert", {
            "claim_type": "fact", "statement": "Wombats use WAL",
            "evidence": [{"artifact_id": art["artifact_id"], "revision_id": art["revision_id"],
                          "start_byte": 0, "end_byte": 5}]}))
        rest.insert(3, put(94, "a put under the claim's key", key="k91"))  # refused: the claim holds it
        rest.append(request(92, "artifact.purge", {"artifact_id": art["artifact_id"], "reason": "erasure"}))
        rest.append(put(93, "after the purge"))
        rest.append(first[2])  # a key of the earlier batch
        lone_answers += [json.loads(lone.handle_bytes(json.dumps(r).encode()).body) for r in rest]

        replies = batch(batched, first)["result"]["replies"] + batch(batched, rest)["result"]["replies"]

        assert [{k: v for k, v in a.items() if k != "request_id"} for a in replies] == \
            [{k: v for k, v in a.items() if k != "request_id"} for a in lone_answers]
        assert replies[4]["result"]["created"] is False and replies[5]["error"]["code"] == "IDEMPOTENCY_CONFLICT"
        assert replies[len(first) + 3]["error"]["code"] == "IDEMPOTENCY_CONFLICT"
        assert tables(batched) == tables(lone)
        assert index_answers(batched.engine.conn) == index_answers(lone.engine.conn)
        assert vocabulary(batched.engine.conn) == vocabulary(lone.engine.conn)
        report = verify(batched.engine)
        assert report["ok"], report["issues"]
        lone.close()
        batched.close()

    def test_a_failure_while_the_puts_go_in_fails_the_whole_batch(self, tmp_path: Path) -> None:
        """When the run's rows cannot be written (here a trigger refuses one text row), the batch
        answers one error and stores nothing, not even the puts answered before the failure."""
        service = open_store(tmp_path / "store")
        service.handle_bytes(json.dumps(put(0, "before the batch")).encode())
        head = service.engine.head()
        service.engine.conn.execute(
            "CREATE TRIGGER refuse_boom BEFORE INSERT ON artifact_search_text WHEN NEW.title = 't2' "
            "BEGIN SELECT RAISE(ABORT, 'refused'); END")
        claim = request(3, "claim.assert", {"claim_type": "fact", "statement": "after the puts"})
        envelope = batch(service, [put(1, "one"), put(2, "two"), claim, put(4, "four")])
        assert envelope["ok"] is False
        assert service.engine.head() == head
        assert service.engine.conn.execute("SELECT count(*) FROM artifacts").fetchone()[0] == 1
        service.close()
