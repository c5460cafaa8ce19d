"""What one durable put writes: WAL pages per put, by b-tree, and the CPU it costs, in-process.

    python -m tools.bench.walpages [--n 300] [--store 3000] [--group 1] [--quick]

Fills a store with ``--store`` varied 1 KiB texts (the daemon benchmark's Zipf words, through
``batch``), then makes ``--n`` more puts of such texts, one transaction each or ``--group`` to a
transaction (as the daemon's group commit does), with the WAL's automatic checkpoint off so every
frame they wrote stays in the file. Each frame's page is attributed to the table or index that
owns it now (SQLite's ``dbstat``, read through the standard library's driver, which has it); a
page freed since shows as "(free or new)". Every page in the WAL is one the commit wrote and one
a checkpoint copies later, so pages per put is what the write path costs the disk. CPU per put is
this process's, for the puts alone; set ``MEMOREE_SEMANTIC=off`` to leave the embedding out.
The baseline row is raw SQLite (WAL, ``synchronous=FULL``) inserting the same texts with an FTS5
row, one per transaction, measured the same way.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import sqlite3 as stdlib_sqlite3
import struct
import tempfile
import time
from pathlib import Path

from memoree.eventlog.db import connect
from memoree.service.service import Service
from tools.bench.common import Row, print_table
from tools.bench.daemon import request, varied_texts

WAL_HEADER_BYTES = 32
FRAME_HEADER_BYTES = 24


def wal_frame_pages(wal: Path) -> list[int]:
    """The page number of every frame in a WAL file (its header says the page size)."""
    data = wal.read_bytes()
    if len(data) < WAL_HEADER_BYTES:
        return []
    page_size = struct.unpack(">I", data[8:12])[0]
    step = FRAME_HEADER_BYTES + page_size
    return [struct.unpack(">I", data[offset:offset + 4])[0]
            for offset in range(WAL_HEADER_BYTES, len(data) - step + 1, step)]


def page_owners(db: Path) -> dict[int, str]:
    """``page -> table or index`` for every page of the database (WAL included)."""
    conn = stdlib_sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT pageno, name FROM dbstat").fetchall())
    finally:
        conn.close()


def fill(service: Service, texts: list[str]) -> None:
    for start in range(0, len(texts), 250):
        requests = [json.loads(request(start + i, "fill", text)) for i, text in enumerate(texts[start:start + 250])]
        reply = service.handle_bytes(json.dumps({"v": 1, "request_id": "fill", "op": "batch",
                                                 "input": {"requests": requests}}).encode())
        assert reply.ok, reply.body[:300]


def measure_puts(folder: Path, stored: list[str], new: list[str], group: int) -> tuple[float, collections.Counter[str]]:
    """CPU ms per put and the WAL pages the puts wrote, by owner."""
    service = Service(folder / "data")
    fill(service, stored)
    engine = service.engine
    engine.conn.execute("PRAGMA wal_autocheckpoint = 0")
    engine.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    bodies = [request(i, "put", text) for i, text in enumerate(new)]
    started = time.process_time()
    for start in range(0, len(bodies), group):
        with engine.group() if group > 1 else contextlib.nullcontext():
            for body in bodies[start:start + group]:
                reply = service.handle_bytes(body)
                assert reply.ok, reply.body[:300]
        engine.handler.run_deferred()
    cpu = time.process_time() - started
    db = engine.db_path
    owners = page_owners(db)
    pages = collections.Counter(owners.get(page, "(free or new)") for page in wal_frame_pages(db.with_name(db.name + "-wal")))
    service.close()
    return cpu / len(new) * 1000, pages


def measure_raw(folder: Path, texts: list[str]) -> tuple[float, int]:
    """CPU ms per insert and WAL pages of raw SQLite inserting each text and its FTS5 row."""
    path = folder / "raw.sqlite3"
    conn = connect(path)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(body)")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    started = time.process_time()
    for text in texts:
        conn.execute("BEGIN IMMEDIATE")
        rowid = conn.execute("INSERT INTO t (body) VALUES (?)", (text.encode(),)).lastrowid
        conn.execute("INSERT INTO f (rowid, body) VALUES (?, ?)", (rowid, text))
        conn.execute("COMMIT")
    cpu = time.process_time() - started
    frames = len(wal_frame_pages(path.with_name(path.name + "-wal")))
    conn.close()
    return cpu / len(texts) * 1000, frames


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="puts measured")
    parser.add_argument("--store", type=int, default=3000, help="artifacts in the store before them")
    parser.add_argument("--group", type=int, default=1, help="puts per transaction")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.store = 20, 40
    items = varied_texts(args.store + args.n)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cpu, pages = measure_puts(folder, items[:args.store], items[args.store:], args.group)
        raw_cpu, raw_frames = measure_raw(folder, items[args.store:])
    total = sum(pages.values())
    print(f"{args.n} puts into a store of {args.store}, {args.group} per transaction: "
          f"{total / args.n:.1f} WAL pages and {cpu:.2f} ms of CPU per put")
    for name, count in pages.most_common():
        if count / args.n >= 0.05:
            print(f"  {count / args.n:6.2f}  {name}")
    rows = [
        Row("WAL pages per put", total / args.n, raw_frames / args.n, "p", "raw SQLite + FTS5", False),
        Row("CPU per put (ms)", cpu, raw_cpu, "ms", "raw SQLite + FTS5", False),
    ]
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
