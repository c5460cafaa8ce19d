"""Bulk load, reindex and verify of a large log, against the physical floor measured in the same run.

    python -m tools.bench.bulk [--n 100000] [--batch 500] [--quick]

Rows:
- bulk load: N ``artifact.put`` requests through the in-process service in ``batch`` requests of
  ``--batch`` (the bulk path importers use: one transaction per batch, the puts decided one by
  one and written together, text indexed once per batch), vs raw batched inserts of the same
  texts into a table plus an FTS5 row, committed in the same batches;
- reindex of the N-event log vs the raw FTS5 build time of the same texts in one word index
  (target <= 1.3x), vs a raw build of the index the projection keeps (words over title and body
  with the projection's tokenizer; no chunk-level index since fts v5) and vs a raw ordered scan of the events
  with a msgspec decode; and how long of it the live write lock was held (the swap);
- verify (chain, checkpoints, blobs, full scratch replay and fingerprint comparison) vs the
  reindex time (target <= 1.5x).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import msgspec

from memoree.admin import verify as audit

from memoree.eventlog import sealing
from memoree.eventlog.codec import decode_envelope, decode_payload
from memoree.eventlog.db import connect
from memoree.service.service import Service
from tools.bench.common import Row, print_table, rate, timed
from tools.bench.search import make_corpus
from tools.bench.semantic import cpu_seconds

CONTEXT = {"workspace_id": "wsp_bench", "project_id": "prj_bench"}


def requests(texts: list[str], titles: list[str]) -> list[bytes]:
    return [json.dumps({"v": 1, "request_id": f"r{i}", "op": "artifact.put", "idempotency_key": f"bulk{i}",
                        "context": CONTEXT, "input": {"kind": "note", "title": title,
                                                      "content": {"type": "text", "data": text}}}).encode()
            for i, (text, title) in enumerate(zip(texts, titles))]


def batch_frames(bodies: list[bytes], batch: int) -> list[bytes]:
    """``batch`` requests of ``batch`` puts each, encoded before the timing starts."""
    return [b'{"v":1,"request_id":"bulk","op":"batch","input":{"requests":[' + b",".join(bodies[start:start + batch])
            + b"]}}" for start in range(0, len(bodies), batch)]


def bulk_load(service: Service, bodies: list[bytes], batch: int) -> float:
    """Wall seconds of ``bulk_load_cpu`` (what the semantic bench reads)."""
    return bulk_load_cpu(service, bodies, batch)[0]


def bulk_load_cpu(service: Service, bodies: list[bytes], batch: int) -> tuple[float, float]:
    """Wall and CPU seconds (the embedding worker's included) to load ``bodies`` in ``batch``
    requests of ``batch``, the vectors' later catch-up included (the embedding moved after the
    writes, not away)."""
    frames = batch_frames(bodies, batch)

    def load() -> None:
        for frame in frames:
            reply = service.handle_bytes(frame)
            assert reply.ok and b'"ok":false' not in reply.body, reply.body[:300]
        service.engine.catch_up_vectors()

    cpu = cpu_seconds()
    return timed(load), cpu_seconds() - cpu


def raw_batched_seconds(folder: Path, texts: list[str], titles: list[str], batch: int) -> tuple[float, float]:
    conn = connect(folder / "raw.sqlite3")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, title TEXT, body TEXT)")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(title, body, content='t', content_rowid='id')")

    def load() -> None:
        for start in range(0, len(texts), batch):
            conn.execute("BEGIN IMMEDIATE")
            for title, text in zip(titles[start:start + batch], texts[start:start + batch]):
                rowid = conn.execute("INSERT INTO t (title, body) VALUES (?, ?)", (title, text)).lastrowid
                conn.execute("INSERT INTO f (rowid, title, body) VALUES (?, ?, ?)", (rowid, title, text))
            conn.execute("COMMIT")

    cpu = cpu_seconds()
    seconds = timed(load)
    cpu = cpu_seconds() - cpu
    conn.close()
    return seconds, cpu


def raw_fts_build_seconds(folder: Path, texts: list[str], titles: list[str]) -> float:
    conn = connect(folder / "fts-build.sqlite3")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, title TEXT, body TEXT)")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO t (title, body) VALUES (?, ?)", zip(titles, texts))
    conn.execute("COMMIT")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(title, body, content='t', content_rowid='id')")

    def build() -> None:
        conn.execute("INSERT INTO f(f) VALUES('rebuild')")

    seconds = timed(build)
    conn.close()
    return seconds


def raw_same_indexes_seconds(folder: Path, texts: list[str], titles: list[str]) -> float:
    """The FTS5 build the projection keeps for these texts, done raw with FTS5's defaults: the
    word index over title + body, with the projection's tokenizer (citations index the chunks
    of the revisions they cite at query time, so there is no chunk-level index to build)."""
    from memoree.projections.fts import WORD_TOKENIZER

    conn = connect(folder / "fts-same.sqlite3")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, title TEXT, body TEXT)")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO t (title, body) VALUES (?, ?)", zip(titles, texts))
    conn.execute("COMMIT")
    conn.execute(f"CREATE VIRTUAL TABLE w USING fts5(title, body, content='t', content_rowid='id', "
                 f"tokenize='{WORD_TOKENIZER}')")

    def build() -> None:
        conn.execute("INSERT INTO w(w) VALUES('rebuild')")

    seconds = timed(build)
    conn.close()
    return seconds


def scan_decode_seconds(service: Service) -> float:
    conn = service.engine.conn

    def scan() -> None:
        for (data,) in conn.execute("SELECT data FROM events ORDER BY commit_seq"):
            decode_payload(decode_envelope(bytes(data)))

    return timed(scan)


def load_rows(n: int, batch: int, ours: tuple[float, float], raw: tuple[float, float]) -> list[Row]:
    """The bulk load rows from (wall, CPU) seconds of ours (``n - 1`` puts) and the raw load (``n``)."""
    return [
        Row(f"bulk load {n - 1} puts, {batch}/txn (puts/s)", rate(n - 1, ours[0]), rate(n, raw[0]), "/s",
            "raw batched insert + FTS5"),
        # CPU per put compares where other work shares the cores and the wall clock does not.
        Row("bulk load puts per CPU second", rate(n - 1, ours[1]), rate(n, raw[1]), "/s",
            "raw batched insert + FTS5"),
    ]


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="artifacts (events) in the log")
    parser.add_argument("--batch", type=int, default=500, help="requests per transaction in the bulk load")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    parser.add_argument("--load-only", action="store_true", help="the bulk load rows only (no reindex, no verify)")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.batch = 300, 50
    corpus = make_corpus(args.n)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        raw_load, raw_cpu = raw_batched_seconds(folder, corpus.texts, corpus.titles, args.batch)
        raw_build = raw_fts_build_seconds(folder, corpus.texts, corpus.titles)
        raw_same = raw_same_indexes_seconds(folder, corpus.texts, corpus.titles)
        service = Service(folder / "data")
        bodies = requests(corpus.texts, corpus.titles)
        service.handle_bytes(bodies[0])
        load, load_cpu = bulk_load_cpu(service, bodies[1:], args.batch)
        if args.load_only:
            service.close()
            rows = load_rows(args.n, args.batch, (load, load_cpu), (raw_load, raw_cpu))
            print_table(rows)
            return rows
        sealing.seal(service.engine)
        scan = scan_decode_seconds(service)
        reindexed: dict = {}
        reindex = timed(lambda: reindexed.update(service.engine.reindex()))
        report: dict = {}
        verify = timed(lambda: report.update(audit.verify(service.engine)))
        assert report["ok"], report["issues"][:3]
        service.close()
    rows = load_rows(args.n, args.batch, (load, load_cpu), (raw_load, raw_cpu)) + [
        Row(f"reindex {args.n} events (s)", reindex, raw_build, "s", "raw FTS5 build, same texts", False),
        Row(f"reindex {args.n} events vs the same indexes (s)", reindex, raw_same, "s",
            "raw FTS5 build of the word index", False),
        Row(f"reindex {args.n} events vs scan + decode (s)", reindex, scan, "s", "ordered scan + msgspec", False),
        Row(f"reindex {args.n} events: write lock held (s)", reindexed["write_lock_seconds"], reindex, "s",
            "whole reindex", False),
        Row(f"verify {args.n} events (s)", verify, reindex, "s", "our reindex", False),
    ]
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
