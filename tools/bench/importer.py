"""Importing: fresh and unchanged re-imports, batched vs one by one, each against a same-run baseline.

    python -m tools.bench.importer [--n 2000] [--tracked 5000] [--quick]

Rows:
- a mem0 export of N synthetic memories through a warm daemon: the fresh import through
  ``batch`` requests (``memoree import mem0``'s path) vs the same file sent one request per
  mutation (the path before the bulk writer), and the re-import of the unchanged file vs its
  fresh import;
- an MCP-memory ``memory.jsonl`` of ``--tracked`` entities (two observations each, one relation to
  the next) imported into an in-process store, then again unchanged (target <= 2 s at 5,000) vs
  the floor of an unchanged re-import (parsing the file and planning every record against an
  already-known stored state, no store access), then with one observation changed vs the
  unchanged re-import.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import tempfile
from pathlib import Path
from typing import Any

from memoree.agents.caller import Sender
from memoree.agents.import_plan import StoredArtifact, StoredClaim, plan_records
from memoree.agents.importers import import_source, read_source
from memoree.client.call import CallOptions
from tools.bench.common import Row, print_table, timed
from tools.bench.daemon import CTX, start_daemon
from tools.bench.search import SYLLABLES

__all__ = ["main", "mem0_export", "write_source"]

TRACKED_CONTEXT = {"workspace_id": "wsp_bench", "project_id": "prj_bench", "pins": []}


def mem0_export(n: int, seed: int = 19, prefix: str = "mem") -> list[dict[str, Any]]:
    rng = random.Random(seed)
    words = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(5000)]
    return [{"id": f"{prefix}-{i:06d}", "memory": " ".join(rng.choices(words, k=rng.randint(8, 30))).capitalize(),
             "user_id": f"user-{i % 17}", "created_at": f"2026-0{1 + i % 9}-1{i % 10}T08:00:00Z"}
            for i in range(n)]


class OneByOne(Sender):
    """The path before the bulk writer: every mutation its own request and transaction."""

    def send_many(self, documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [self.send(document)[0] for document in documents]


def import_seconds(path: Path, sender: Sender) -> tuple[float, dict[str, Any]]:
    summary: dict[str, Any] = {}

    def run() -> None:
        summary.update(import_source("mem0", path, sender, context=CTX, context_source="explicit").to_json())

    return timed(run), summary


def daemon_rows(n: int) -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        batched_file, single_file = folder / "mem0.json", folder / "mem0-single.json"
        batched_file.write_text(json.dumps(mem0_export(n)))
        # Other memories (other ids): the importer tracks mem0 ids, so the same ids would be revisions.
        single_file.write_text(json.dumps(mem0_export(n, seed=20, prefix="single")))
        proc, endpoint = start_daemon(folder)
        try:
            options = CallOptions(endpoint=str(endpoint))
            one_by_one, _ = import_seconds(single_file, OneByOne(options))
            fresh, summary = import_seconds(batched_file, Sender(options))
            assert summary["artifacts"]["created"] == n, summary
            again, summary = import_seconds(batched_file, Sender(options))
            assert summary["artifacts"]["unchanged"] == n and summary["commit_seq"] is None, summary
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    return [
        Row(f"mem0 import, {n} records, batched (s)", fresh, one_by_one, "s",
            "one request per mutation", False),
        Row(f"mem0 re-import, unchanged, {n} records (s)", again, fresh, "s", "its fresh import", False),
    ]


def write_source(path: Path, n: int, changed: int | None = None) -> None:
    lines = []
    for i in range(n):
        second = f"changed observation {i}" if i == changed else f"prefers tool {i % 17} for task {i}"
        lines.append(json.dumps({"type": "entity", "name": f"Entity {i}", "entityType": "person",
                                 "observations": [f"works on project {i % 97}", second]}))
    for i in range(n - 1):
        lines.append(json.dumps({"type": "relation", "from": f"Entity {i}", "to": f"Entity {i + 1}",
                                 "relationType": "knows"}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def run_import(path: Path, data_dir: Path) -> dict:
    with Sender(CallOptions(in_process=True, data_dir=data_dir), keep_open=True) as sender:
        return import_source("mcp-memory", path, sender, context=TRACKED_CONTEXT, context_source="explicit").to_json()


def plan_floor(path: Path) -> float:
    """Parse and plan with the stored state already in memory (what no store can beat)."""
    def work() -> None:
        document = read_source("mcp-memory", path)
        stored = {r.identity: StoredArtifact(r.identity, f"art{i}", f"arev{i}", r.digest())
                  for i, r in enumerate(document.records)}
        claims = {f"art{i}": [StoredClaim(f"c{i}{j}", f"cr{i}{j}", o.statement) for j, o in enumerate(r.observations)]
                  for i, r in enumerate(document.records)}
        plans = plan_records(document.records, stored, claims)
        assert all(p.action == "unchanged" for p in plans)

    return timed(work)


def tracked_rows(n: int) -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        source, data_dir = root / "memory.jsonl", root / "data"
        write_source(source, n)
        first_s = timed(lambda: run_import(source, data_dir))
        again: dict = {}
        again_s = timed(lambda: again.update(run_import(source, data_dir)))
        assert again["commit_seq"] is None and again["artifacts"]["unchanged"] == n, again
        floor_s = plan_floor(source)
        write_source(source, n, changed=n // 2)
        changed: dict = {}
        changed_s = timed(lambda: changed.update(run_import(source, data_dir)))
        assert (changed["artifacts"]["revised"], changed["claims"]["revised"]) == (1, 1), changed
    print(f"first import of {n} entities: {first_s:.1f} s")
    return [Row(f"unchanged re-import, {n} MCP-memory entities (s)", again_s, floor_s, "s",
                "parse + plan, no store", higher_is_better=False),
            Row(f"re-import with 1 changed entity of {n} (s)", changed_s, again_s, "s",
                "unchanged re-import", higher_is_better=False)]


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="memories in the mem0 export")
    parser.add_argument("--tracked", type=int, default=5000, help="entities in the MCP-memory file")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.tracked = 40, 200
    rows = daemon_rows(args.n) + tracked_rows(args.tracked)
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
