"""Durable ``artifact.put`` through the in-process service vs raw SQLite, and ``memoree call``
start-up vs ``python3 -c pass``.

    python -m tools.bench.put [--n 2000] [--calls 20] [--quick]

Baselines are measured in the same run on the same machine: raw SQLite in WAL mode with
``synchronous=FULL`` inserting the same 1 KiB texts one row per transaction (and the same plus an
FTS5 row), and a bare interpreter start.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from memoree.eventlog.db import connect
from memoree.service.service import Service
from tools.bench.common import Row, median, print_table, rate, timed

TEXT = ("memoree stores evidence with immutable revisions and claims that cite exact bytes. " * 13)[:1024]


def texts(n: int) -> list[str]:
    return [f"{i:08d} {TEXT}"[:1024] for i in range(n)]


def raw_sqlite_rate(folder: Path, items: list[str], with_fts: bool) -> float:
    conn = connect(folder / f"raw{int(with_fts)}.sqlite3")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
    if with_fts:
        conn.execute("CREATE VIRTUAL TABLE f USING fts5(body)")

    def load() -> None:
        for text in items:
            conn.execute("BEGIN IMMEDIATE")
            cursor = conn.execute("INSERT INTO t (body) VALUES (?)", (text.encode(),))
            if with_fts:
                conn.execute("INSERT INTO f (rowid, body) VALUES (?, ?)", (cursor.lastrowid, text))
            conn.execute("COMMIT")

    return rate(len(items), timed(load))


def service_with_projectors(data_dir: Path, keep_projector: Callable[[str], bool] | None = None) -> Service:
    """The in-process service on ``data_dir``; ``keep_projector`` (a projector name test), when
    given, leaves the other projectors out of the command handler's write transaction."""
    service = Service(data_dir)
    if keep_projector is not None:
        handler = service.engine.handler
        handler.projectors = [p for p in handler.projectors if keep_projector(p.name)]
    return service


def service_put_rate(folder: Path, items: list[str], keep_projector: Callable[[str], bool] | None = None) -> float:
    """Durable puts per second through the in-process service, in a store under ``folder``;
    ``keep_projector`` (a projector name test) leaves the others out of the write transaction
    (``tools.bench.putparts``)."""
    service = service_with_projectors(folder / "data", keep_projector)
    context = {"workspace_id": "wsp_bench", "project_id": "prj_bench"}
    requests = [json.dumps({"v": 1, "request_id": f"r{i}", "op": "artifact.put", "idempotency_key": f"k{i}",
                            "context": context, "input": {"kind": "note", "title": f"note {i}",
                                                          "content": {"type": "text", "data": text}}}).encode()
                for i, text in enumerate(items)]
    service.handle_bytes(requests[0])  # open the store outside the timing

    def load() -> None:
        for raw in requests[1:]:
            reply = service.handle_bytes(raw)
            assert reply.ok, reply.body

    seconds = timed(load)
    service.close()
    return rate(len(requests) - 1, seconds)


def command_seconds(argv: list[str], runs: int, stdin: bytes = b"", env: dict[str, str] | None = None) -> float:
    samples = []
    for _ in range(runs):
        samples.append(timed(lambda: subprocess.run(argv, input=stdin, capture_output=True, env=env, check=False)))
    return median(samples)


def call_rows(folder: Path, runs: int) -> list[Row]:
    env = {**os.environ, "MEMOREE_HOME": str(folder / "home"), "MEMOREE_IN_PROCESS": "1",
           "MEMOREE_CONTEXT": json.dumps({"workspace_id": "w", "project_id": "p"})}
    baseline = command_seconds([sys.executable, "-c", "pass"], runs)
    capabilities = json.dumps({"request_id": "c", "op": "capabilities", "input": {}}).encode()
    memoree = [sys.executable, "-m", "memoree", "call"]
    command_seconds(memoree, 1, capabilities, env)  # create the store first
    caps = command_seconds(memoree, runs, capabilities, env)
    counter = iter(range(10**9))
    put_samples = []
    for _ in range(runs):
        request = json.dumps({"request_id": "p", "op": "artifact.put", "idempotency_key": f"k{next(counter)}",
                              "input": {"kind": "note", "title": "t", "content": {"type": "text", "data": TEXT}}}).encode()
        put_samples.append(command_seconds(memoree, 1, request, env))
    put = median(put_samples)
    return [
        Row("memoree call capabilities (in-process)", caps * 1000, baseline * 1000, "ms", "python -c pass", False),
        Row("memoree call artifact.put (in-process)", put * 1000, baseline * 1000, "ms", "python -c pass", False),
    ]


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="puts per measurement")
    parser.add_argument("--calls", type=int, default=15, help="process starts per call measurement")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.calls = 50, 2
    items = texts(args.n)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        raw = raw_sqlite_rate(folder, items, with_fts=False)
        raw_fts = raw_sqlite_rate(folder, items, with_fts=True)
        ours = service_put_rate(folder, items)
        rows = [
            Row("artifact.put in-process, durable (puts/s)", ours, raw, "/s", "raw SQLite insert"),
            Row("artifact.put in-process vs insert + FTS5 row", ours, raw_fts, "/s", "raw SQLite + FTS5"),
            *call_rows(folder, args.calls),
        ]
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
