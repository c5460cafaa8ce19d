"""Importing a mem0 export through a warm daemon: fresh, and again unchanged, batched vs one by one.

    python -m tools.bench.importer [--n 2000] [--quick]

The export holds N synthetic memories (varied words, a user id, a creation time). Rows: the fresh
import through ``batch`` requests (``memoree import mem0``'s path) vs the same file sent one
request per mutation (the path before the bulk writer), and the re-import of the unchanged file
vs its fresh import (target <= 0.1x or <= 1.5 s; <= 2 s at 5,000 records).
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import tempfile
from pathlib import Path
from typing import Any

from memoree.client.call import CallOptions
from memoree.agents.caller import Sender
from memoree.agents.importers import import_file
from tools.bench.common import Row, print_table, timed
from tools.bench.daemon import CTX, start_daemon
from tools.bench.search import SYLLABLES

__all__ = ["main", "mem0_export"]


def mem0_export(n: int, seed: int = 19) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    words = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(5000)]
    return [{"id": f"mem-{i:06d}", "memory": " ".join(rng.choices(words, k=rng.randint(8, 30))).capitalize(),
             "user_id": f"user-{i % 17}", "created_at": f"2026-0{1 + i % 9}-1{i % 10}T08:00:00Z"}
            for i in range(n)]


class OneByOne(Sender):
    """The path before the bulk writer: every mutation its own request and transaction."""

    def send_many(self, documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [self.send(document)[0] for document in documents]


def import_seconds(path: Path, sender: Sender) -> tuple[float, dict[str, Any]]:
    summary: dict[str, Any] = {}

    def run() -> None:
        summary.update(import_file("mem0", path, sender, context=CTX, context_source="explicit",
                                   relations_supported=True).to_json())

    return timed(run), summary


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="memories in the export")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.n = 40
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        batched_file, single_file = folder / "mem0.json", folder / "mem0-single.json"
        batched_file.write_text(json.dumps(mem0_export(args.n)))
        single_file.write_text(json.dumps(mem0_export(args.n, seed=20)))
        proc, endpoint = start_daemon(folder)
        try:
            options = CallOptions(endpoint=str(endpoint))
            one_by_one, _ = import_seconds(single_file, OneByOne(options))
            fresh, summary = import_seconds(batched_file, Sender(options))
            assert summary["artifacts"]["created"] == args.n, summary
            again, summary = import_seconds(batched_file, Sender(options))
            assert summary["artifacts"]["replayed"] == args.n and summary["claims"]["created"] == 0, summary
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    rows = [
        Row(f"mem0 import, {args.n} records, batched (s)", fresh, one_by_one, "s",
            "one request per mutation", False),
        Row(f"mem0 re-import, unchanged, {args.n} records (s)", again, fresh, "s", "its fresh import", False),
    ]
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
