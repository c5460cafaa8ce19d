"""Re-importing an unchanged source, against the parse-and-plan floor measured in the same run.

    python -m tools.bench.importer [--n 5000] [--quick]

An MCP-memory ``memory.jsonl`` of N entities (two observations each, one relation to the next
entity) is imported once into a fresh in-process store (timed, for information), then again
unchanged (the figure: target <= 2 s at N = 5000), then with one observation changed. The
baseline is the floor of an unchanged re-import: reading and parsing the file and planning every
record against an already-known stored state, with no store access at all.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from memoree.client.call import CallOptions
from memoree.agents.caller import Sender
from memoree.agents.import_plan import StoredArtifact, StoredClaim, plan_records
from memoree.agents.importers import import_source, read_source
from tools.bench.common import Row, print_table, timed

CONTEXT = {"workspace_id": "wsp_bench", "project_id": "prj_bench", "pins": []}


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
        return import_source("mcp-memory", path, sender, context=CONTEXT, context_source="explicit").to_json()


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


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    n = 300 if args.quick else args.n
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
    print(f"first import of {n} entities: {first_s:.1f} s; one changed record: {changed_s:.2f} s")
    rows = [Row(f"unchanged re-import, {n} records (s)", again_s, floor_s, "s",
                "parse + plan, no store", higher_is_better=False),
            Row(f"re-import with 1 changed record, {n} (s)", changed_s, again_s, "s",
                "unchanged re-import", higher_is_better=False)]
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
