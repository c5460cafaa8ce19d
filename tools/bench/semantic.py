"""What the dense channel costs: put rate, reindex and search latency with it and without it.

    python -m tools.bench.semantic [--n 10000] [--claims 0.1] [--puts 300] [--reps 5] [--quick]
                                   [--reindexes 2] [--scan-rows 400000]
    python -m tools.bench.semantic --reindex-store DATA_DIR [--reindexes 2]
    python -m tools.bench.semantic --scan-only [--scan-rows 20000 --scan-rows 100000 ...]
                                   [--keep 2048 --keep 4096 ...] [--queries 100] [--no-sqlite-vec]

Both sides run in one process, interleaved, so machine noise (a shared machine) falls on both
alike. The store holds N synthetic artifacts (``tools.bench.search``'s corpus) and ``--claims``
× N claims (a sentence of an artifact each), bulk loaded by group commit with the model on.

- reindex: the whole log rebuilt with the model off (``MEMOREE_SEMANTIC=off``: the vectors
  projector writes nothing, as where the model is not installed) and on, alternately, twice
  each (``--reindexes``); the best of each side. ``--reindex-store DATA_DIR`` does only this,
  on an existing store (e.g. one ``tools.bench.search --n 100000 --store DIR`` built; work on a
  copy), and also reports CPU seconds, this process's and its embedding worker's, so the work
  done shows apart from what ran in parallel;
- search p50/p95: the `search` op over the same query mix plus natural questions, each query
  asked with ``semantic.enabled`` false and true, alternately;
- put rate: durable one-by-one ``artifact.put`` of 1 KiB texts into two fresh stores, one opened
  with the model off and one with it on, ten at a time alternately (``--puts 0``: skipped). The
  store with the model leaves its texts to the vectors' catch-up (``projections.vectors``), which
  then runs once, batched, as an embedded store does before its next dense read or at close: its
  wall and CPU time per put are printed beside the rate, and the rate with it included, because
  the embedding is moved, not removed. Each side's CPU per put is printed too;
- search with a tail (``--tail-reps``): ``k`` puts (1, 10, 100) leave the vectors lagging, then one
  search is answered as a daemon's reader process answers it (a read-only connection, which
  embeds the lagging events in memory), against the same kind of search once caught up (a
  different query each time, so no cache of the query's embedding helps either side);
- the nearest-document scan alone over ``--scan-rows`` int8 vectors (the model's embeddings of
  synthetic token bags, see ``scan_cost``): the Hamming-prefiltered numpy scan the channel uses,
  every row exactly, and (where the ``sqlite-vec`` package is installed) the same rows in a
  sqlite-vec ``vec0`` table searched by its KNN. ``--scan-only`` runs just this, at each
  ``--scan-rows`` size, and sweeps the prefilter's kept rows (``--keep``) with its sign bits
  centred on the model's common axis and raw: recall@10 against the exact scan and p50 of each.
Ratios are with / without.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.bench.common import Row, percentile, print_table

QUESTIONS = ["how are the release notes kept", "which team owns the build cache",
             "what happened to the old migration plan", "who approves a production change"]
OFF = "MEMOREE_SEMANTIC"


def model_switch(on: bool) -> None:
    """Turn the local model on or off for whatever opens or rebuilds next in this process."""
    from memoree.projections import embedding

    if on:
        os.environ.pop(OFF, None)
    else:
        os.environ[OFF] = "off"
    embedding._probe.cache_clear()


def claim_requests(texts: list[str], share: float) -> list[bytes]:
    from tools.bench.search import CONTEXT

    step = max(1, round(1 / share)) if share > 0 else 0
    picked = texts[::step] if step else []
    return [json.dumps({"v": 1, "request_id": f"c{i}", "op": "claim.assert", "idempotency_key": f"claim{i}",
                        "context": CONTEXT, "input": {"claim_type": "fact",
                                                      "statement": text.split(". ")[0][:300]}}).encode()
            for i, text in enumerate(picked)]


def timed_reindex(service: Any, on: bool) -> float:
    return timed_reindex_cpu(service, on)[0]


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children (a reindex's embedding worker)."""
    import resource

    mine, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def timed_reindex_cpu(service: Any, on: bool) -> tuple[float, float]:
    """One reindex with the model on or off: (wall seconds, CPU seconds incl. the worker's)."""
    model_switch(on)
    cpu, started = cpu_seconds(), time.perf_counter()
    service.engine.reindex()
    return time.perf_counter() - started, cpu_seconds() - cpu


def reindex_store(folder: Path, rounds: int, say: Callable[[str], None] | None = None) -> list[Row]:
    """``--reindex-store``: reindex an existing data dir with the model off and on in turn."""
    from memoree.service.service import Service

    say = say or progress
    model_switch(True)
    service = Service(folder)
    service.engine  # noqa: B018 - opened with the model on, as a store that has it
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    try:
        for on in (False, True) * rounds:
            load = os.getloadavg()[0]
            runs[on].append(timed_reindex_cpu(service, on))
            wall, cpu = runs[on][-1]
            say(f"reindex with the model {'on' if on else 'off'}: {wall:.1f} s wall, {cpu:.1f} s CPU "
                f"(load average {load:.2f} before)")
    finally:
        model_switch(True)
        service.close()
    return [Row("reindex, best wall", min(w for w, _ in runs[True]), min(w for w, _ in runs[False]), "s",
                "no dense", False),
            Row("reindex, least CPU (incl. the worker)", min(c for _, c in runs[True]),
                min(c for _, c in runs[False]), "s", "no dense", False)]


def search_samples(service: Any, mix: list[str], reps: int) -> dict[bool, list[float]]:
    from tools.bench.search import CONTEXT

    samples: dict[bool, list[float]] = {False: [], True: []}
    for rep in range(reps):
        for query in mix:
            for enabled in (False, True) if rep % 2 == 0 else (True, False):
                body = json.dumps({"v": 1, "request_id": f"s{rep}", "op": "search", "context": CONTEXT,
                                   "input": {"query": query, "semantic": {"enabled": enabled}}}).encode()
                started = time.perf_counter()
                reply = service.handle_bytes(body)
                samples[enabled].append((time.perf_counter() - started) * 1000)
                assert reply.ok, reply.body[:300]
    return samples


TAIL_SIZES = (1, 10, 100)


def tail_cost(service: Any, mix: list[str], reps: int) -> dict[int, tuple[float, float]]:
    """Search ms with a tail of k lagging events vs caught up (p50 of ``reps`` each), per k."""
    from memoree.daemon.reader import ReadView
    from tools.bench.put import texts as put_texts
    from tools.bench.search import CONTEXT

    view = ReadView(service.data_dir)
    engine = service.engine
    engine.catch_up_vectors()
    items = iter(put_texts(sum(TAIL_SIZES) * reps))
    queries = iter(mix * (2 * len(TAIL_SIZES) * reps // max(1, len(mix)) + 1))

    def timed_search() -> float:
        body = json.dumps({"v": 1, "request_id": "t", "op": "search", "context": CONTEXT,
                           "input": {"query": next(queries)}}).encode()
        started = time.perf_counter()
        reply = service.reading_through(view, lambda: view.snapshot(lambda: service.handle_bytes(body)))
        assert reply.ok, reply.body[:300]
        return (time.perf_counter() - started) * 1000

    found: dict[int, tuple[float, float]] = {}
    try:
        for k in TAIL_SIZES:
            with_tail, caught_up = [], []
            for rep in range(reps):
                for i in range(k):
                    body = json.dumps({"v": 1, "request_id": "p", "op": "artifact.put",
                                       "idempotency_key": f"tail{k}-{rep}-{i}", "context": CONTEXT,
                                       "input": {"kind": "note", "title": "tail",
                                                 "content": {"type": "text", "data": next(items)}}}).encode()
                    assert service.handle_bytes(body).ok
                assert engine.vectors_lag() >= k
                with_tail.append(timed_search())
                engine.catch_up_vectors()
                caught_up.append(timed_search())
            found[k] = (percentile(with_tail, 50), percentile(caught_up, 50))
    finally:
        view.close()
    return found


def put_rates(folder: Path, puts: int) -> dict[Any, float]:
    """Put rates with the model off and on (keys False, True), each side's CPU ms per put
    (``cpu_ms_off``, ``cpu_ms_on``), and the catch-up that the side with the model owes after:
    its wall and CPU ms per put (``catch_up_ms``, ``catch_up_cpu_ms``) and the rate with the
    catch-up's wall time included (``with_catch_up``)."""
    from memoree.service.service import Service
    from tools.bench.put import texts as put_texts
    from tools.bench.search import CONTEXT

    services = {}
    for on in (False, True):
        model_switch(on)
        services[on] = Service(folder / f"puts-{on}")
        # A service opens its engine (and its projectors, with or without the model) on first
        # use: open it now, while the switch holds (else both stores embed).
        services[on].engine  # noqa: B018
    model_switch(True)
    items = put_texts(puts)
    spent = {False: 0.0, True: 0.0}
    cpu = {False: 0.0, True: 0.0}
    for start in range(0, puts, 10):
        for on in (False, True):
            for i in range(start, min(puts, start + 10)):
                body = json.dumps({"v": 1, "request_id": f"p{i}", "op": "artifact.put",
                                   "idempotency_key": f"put{i}", "context": CONTEXT,
                                   "input": {"kind": "note", "title": "bench",
                                             "content": {"type": "text", "data": items[i]}}}).encode()
                started, used = time.perf_counter(), time.process_time()
                reply = services[on].handle_bytes(body)
                spent[on] += time.perf_counter() - started
                cpu[on] += time.process_time() - used
                assert reply.ok, reply.body[:300]
    engine = services[True].engine
    lagging = engine.vectors_lag()
    started, used = time.perf_counter(), time.process_time()
    engine.catch_up_vectors()
    caught_up, catch_up_cpu = time.perf_counter() - started, time.process_time() - used
    assert engine.vectors_lag() == 0 and lagging >= puts
    for service in services.values():
        service.close()
    rates: dict[Any, float] = {on: puts / seconds for on, seconds in spent.items()}
    rates.update(cpu_ms_off=cpu[False] / puts * 1000, cpu_ms_on=cpu[True] / puts * 1000,
                 catch_up_ms=caught_up / puts * 1000, catch_up_cpu_ms=catch_up_cpu / puts * 1000,
                 with_catch_up=puts / (spent[True] + caught_up))
    return rates


def progress(line: str) -> None:
    print(line, flush=True)  # a long run (100k artifacts) shows where it is, even into a file


def measure(n: int, claims: float, puts: int, reps: int, say: Callable[[str], None] = progress,
            reindexes: int = 2, tail_reps: int = 0) -> dict[str, Any]:
    from memoree.service.service import Service
    from tools.bench.bulk import bulk_load, requests
    from tools.bench.search import make_corpus, query_mix

    model_switch(True)
    corpus = make_corpus(n)
    folder = Path(tempfile.mkdtemp(prefix="bench-semantic-"))
    service = Service(folder / "data")
    load_seconds = bulk_load(service, requests(corpus.texts, corpus.titles) + claim_requests(corpus.texts, claims),
                             500)
    say(f"loaded {n} artifacts in {load_seconds:.1f} s")
    reindex: dict[bool, list[float]] = {False: [], True: []}
    for on in (False, True) * reindexes:
        reindex[on].append(timed_reindex(service, on))
        say(f"reindex with the model {'on' if on else 'off'}: {reindex[on][-1]:.1f} s")
    model_switch(True)
    mix = [q for group in query_mix(corpus, random.Random(7)).values() for q in group] + QUESTIONS
    samples = search_samples(service, mix, reps)
    tails = tail_cost(service, mix, tail_reps) if tail_reps else {}
    service.close()
    nan = float("nan")
    rates = put_rates(folder, puts) if puts else {True: nan, False: nan}
    shutil.rmtree(folder, ignore_errors=True)
    nothing = [nan]
    return {"load_s": load_seconds, "tails": tails, "put_cpu_on_ms": rates.get("cpu_ms_on", nan),
            "put_cpu_off_ms": rates.get("cpu_ms_off", nan), "catch_up_ms": rates.get("catch_up_ms", nan),
            "catch_up_cpu_ms": rates.get("catch_up_cpu_ms", nan),
            "put_with_catch_up_per_s": rates.get("with_catch_up", nan),
            "reindex_on_s": min(reindex[True] or nothing), "reindex_off_s": min(reindex[False] or nothing),
            "search_on_p50_ms": percentile(samples[True], 50), "search_off_p50_ms": percentile(samples[False], 50),
            "search_on_p95_ms": percentile(samples[True], 95), "search_off_p95_ms": percentile(samples[False], 95),
            "put_on_per_s": rates[True], "put_off_per_s": rates[False]}


def scan_cost(rows: int, queries: int = 40, with_sqlite_vec: bool = True,
              keeps: tuple[int, ...] = ()) -> dict[str, Any]:
    """The dense channel's nearest-document scan over ``rows`` stored vectors, the Hamming
    prefilter then exact scoring, vs scoring every row exactly (and vs sqlite-vec): p50 ms of
    each, and recall@10: the share of the exact scan's 10 nearest documents each one returns.
    ``keeps``: also the prefilter keeping each of these many rows, with its sign bits taken off
    the model's common axis (as shipped) and raw (uncentred), for choosing ``PREFILTER_ROWS``.

    Rows are the model's own embeddings of synthetic token bags (30-120 word pieces drawn
    Zipf-like from its vocabulary; 4 rows per document, as a 1 KiB artifact has), int8 as
    stored: real embeddings share a common direction, which random vectors would hide from the
    sign-bit prefilter. A query is a sixth of one document's tokens plus four others."""
    import numpy as np

    from memoree.projections.embedding import load_model, quantize
    from memoree.queries import dense

    model = load_model()
    rng = np.random.default_rng(7)
    vocabulary = rng.permutation(np.arange(1000, min(30_000, len(model.table))))
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)
    weights /= weights.sum()

    def embedded(bags: list[Any]) -> Any:
        sums = np.add.reduceat(model.table[np.concatenate(bags)], np.cumsum([0, *map(len, bags[:-1])]))
        return (sums / np.linalg.norm(sums, axis=1, keepdims=True)).astype(np.float32)

    index = dense._Index()
    bags: list[Any] = []
    for start in range(0, rows, 50_000):
        sizes = rng.integers(30, 120, size=min(50_000, rows - start))
        drawn = vocabulary[rng.choice(len(vocabulary), size=int(sizes.sum()), p=weights)]
        block = np.split(drawn, np.cumsum(sizes)[:-1])
        bags += block
        index.artifacts.append(np, [(start + i, (start + i) // 4, 0, 1, blob)
                                    for i, blob in enumerate(quantize(np, embedded(block)))], True,
                               model.common_axis)
    raw = dense._Rows(**{**vars(index.artifacts)})
    # C order, as the index's own bits are: each word's row contiguous for the Hamming pass.
    raw.bits = np.ascontiguousarray(np.concatenate(
        [dense.sign_bits(np, index.artifacts.vectors[at:at + 50_000], None) for at in range(0, rows, 50_000)],
        axis=1))
    variants = [(keep, axis) for keep in keeps for axis in (model.common_axis, None)]
    sweep = {variant_key(keep, axis is not None): ([], []) for keep, axis in variants}
    vec0 = _SqliteVec.open(index.artifacts.vectors[:rows]) if with_sqlite_vec else None
    prefiltered, exact, recall_fast, knn, recall_knn = [], [], [], [], []
    for asked in range(queries):
        tokens = bags[rng.integers(rows)]
        picked = rng.choice(tokens, size=max(3, len(tokens) // 6), replace=False)
        noise = vocabulary[rng.choice(len(vocabulary), size=4, p=weights)]
        query = (embedded([np.concatenate([picked, noise])])[0] / dense.QUANT).astype(np.float32)
        started = time.perf_counter()
        fast = dense.dense_hits(index, "artifact", query, 22)
        prefiltered.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        scores = dense._dot(np, index.artifacts.vectors[:rows], query)
        full = dense._ranked_documents(np, index.artifacts, np.arange(rows), scores, 22)
        exact.append((time.perf_counter() - started) * 1000)
        truth = {h.doc_id for h in full[:10]}
        recall_fast.append(len(truth & {h.doc_id for h in fast[:10]}) / len(truth))
        for keep, axis in variants if asked % 2 == 0 else variants[::-1]:  # no variant always first
            table = index.artifacts if axis is not None else raw
            started = time.perf_counter()
            positions, kept_scores = dense._similarities(np, table, query, axis, keep)
            found = dense._ranked_documents(np, table, positions, kept_scores, 22)
            times, recalls = sweep[variant_key(keep, axis is not None)]
            times.append((time.perf_counter() - started) * 1000)
            recalls.append(len(truth & {h.doc_id for h in found[:10]}) / len(truth))
        if vec0 is not None:
            started = time.perf_counter()
            documents = vec0.nearest_documents(query, dense.ROWS_PER_DOCUMENT * 22, 22)
            knn.append((time.perf_counter() - started) * 1000)
            recall_knn.append(len(truth & set(documents[:10])) / len(truth))
    result = {"prefiltered_p50_ms": percentile(prefiltered, 50), "exact_p50_ms": percentile(exact, 50),
              "recall_prefiltered": sum(recall_fast) / queries,
              "sweep": {key: (percentile(times, 50), sum(recalls) / queries)
                        for key, (times, recalls) in sweep.items()}}
    if vec0 is not None:
        result |= {"sqlite_vec_p50_ms": percentile(knn, 50), "recall_sqlite_vec": sum(recall_knn) / queries,
                   "sqlite_vec_version": vec0.version}
        vec0.close()
    return result


def variant_key(keep: int, centred: bool) -> str:
    return f"{keep} rows, {'centred' if centred else 'raw signs'}"


def print_scan(rows: int, scan: dict[str, Any]) -> None:
    """One scan's prefilter sweep: recall@10 and p50 per kept-row count, centred and raw."""
    print(f"dense nearest at {rows} vectors: exact scan p50 {scan['exact_p50_ms']:.2f} ms; "
          f"as shipped ({_shipped_keep()} rows kept, centred) p50 {scan['prefiltered_p50_ms']:.2f} ms, "
          f"recall@10 {scan['recall_prefiltered']:.3f}")
    for key, (p50, recall) in scan["sweep"].items():
        print(f"  prefilter keeping {key}: p50 {p50:.2f} ms ({p50 / scan['exact_p50_ms']:.2f}x exact), "
              f"recall@10 {recall:.3f}")


def _shipped_keep() -> int:
    from memoree.queries import dense

    return dense.PREFILTER_ROWS


class _SqliteVec:
    """The same int8 rows in a sqlite-vec ``vec0`` table (a file beside nothing else, on the
    project's SQLite driver), searched by its exact KNN: the alternative the issue asks to weigh
    against in-memory BLOB rows scanned with numpy. ``None`` from ``open`` where the package is
    not installed or the driver cannot load extensions."""

    def __init__(self, conn: Any, folder: str, version: str) -> None:
        self.conn, self.folder, self.version = conn, folder, version

    @classmethod
    def open(cls, vectors: Any) -> _SqliteVec | None:
        try:
            import sqlite_vec
        except ImportError:
            return None
        from memoree.eventlog.db import connect

        folder = tempfile.mkdtemp(prefix="bench-sqlite-vec-")
        conn = connect(Path(folder) / "vec.sqlite3", synchronous="OFF")
        if not hasattr(conn, "enable_load_extension"):
            conn.close()
            shutil.rmtree(folder, ignore_errors=True)
            return None
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        conn.execute("CREATE VIRTUAL TABLE vec USING vec0(embedding int8[256] distance_metric=cosine)")
        with conn:
            conn.executemany("INSERT INTO vec(rowid, embedding) VALUES (?, vec_int8(?))",
                             ((i, row.tobytes()) for i, row in enumerate(vectors)))
        return cls(conn, folder, conn.execute("SELECT vec_version()").fetchone()[0])

    def nearest_documents(self, query: Any, rows: int, wanted: int) -> list[int]:
        # The query scaled like the stored rows (unit vectors x 127), compared by cosine.
        scaled = (query * 127 * 127).round().clip(-127, 127).astype("int8")
        found = self.conn.execute("SELECT rowid FROM vec WHERE embedding MATCH vec_int8(?) AND k = ? "
                                  "ORDER BY distance", (scaled.tobytes(), rows)).fetchall()
        documents: list[int] = []
        for (rowid,) in found:
            if rowid // 4 not in documents:
                documents.append(rowid // 4)
        return documents[:wanted]

    def close(self) -> None:
        self.conn.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="artifacts in the store")
    parser.add_argument("--claims", type=float, default=0.1, help="claims per artifact")
    parser.add_argument("--puts", type=int, default=300, help="durable puts timed one by one, per side")
    parser.add_argument("--reps", type=int, default=4, help="passes over the query mix")
    parser.add_argument("--reindexes", type=int, default=2,
                        help="timed reindexes per side (0: skip, for a search-only run of a big store)")
    parser.add_argument("--scan-rows", type=int, action="append", default=None,
                        help="stored vectors for the scan row (default 400,000: about 100k 1 KiB artifacts; "
                             "repeatable with --scan-only)")
    parser.add_argument("--scan-only", action="store_true",
                        help="only the scan rows: recall@10 and p50 of the prefilter, per --scan-rows size "
                             "(repeatable) and per --keep count, centred and raw, against the exact scan")
    parser.add_argument("--keep", type=int, action="append", default=None,
                        help="with --scan-only: prefilter kept-row counts to compare (repeatable; "
                             "default 1024, 2048, 4096, 8192)")
    parser.add_argument("--queries", type=int, default=40, help="queries per scan")
    parser.add_argument("--tail-reps", type=int, default=0,
                        help="searches per tail size (1, 10, 100 lagging events) answered read-only; 0: skip")
    parser.add_argument("--no-sqlite-vec", action="store_true", help="skip the sqlite-vec comparison")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    parser.add_argument("--reindex-store", type=Path, default=None,
                        help="only reindex this existing data dir, model off and on in turn (--reindexes rounds)")
    args = parser.parse_args(argv)
    if args.scan_only:
        return scan_only(args)
    if args.reindex_store is not None:
        rows = reindex_store(args.reindex_store, max(1, args.reindexes))
        print_table(rows)
        return rows
    if args.quick:  # tiny sizes, unless given explicitly
        given = set(sys.argv[1:] if argv is None else argv)
        args.n = args.n if "--n" in given else 300
        args.puts = args.puts if "--puts" in given else 20
        args.scan_rows = args.scan_rows if "--scan-rows" in given else [20_000]
        args.reps = 2
    scan_rows = (args.scan_rows or [400_000])[-1]
    scan = scan_cost(scan_rows, args.queries, not args.no_sqlite_vec)
    m = measure(args.n, args.claims, args.puts, args.reps, reindexes=args.reindexes, tail_reps=args.tail_reps)
    rows = [
        Row("put rate, 1 KiB", m["put_on_per_s"], m["put_off_per_s"], "/s", "no dense"),
        Row("put rate, 1 KiB, with the later catch-up", m["put_with_catch_up_per_s"], m["put_off_per_s"], "/s",
            "no dense"),
        Row(f"reindex of {args.n} artifacts", m["reindex_on_s"], m["reindex_off_s"], "s", "no dense", False),
        Row(f"search p50 at {args.n} artifacts", m["search_on_p50_ms"], m["search_off_p50_ms"], "ms",
            "no dense", False),
        Row(f"search p95 at {args.n} artifacts", m["search_on_p95_ms"], m["search_off_p95_ms"], "ms",
            "no dense", False),
        Row(f"dense nearest at {scan_rows} vectors", scan["prefiltered_p50_ms"], scan["exact_p50_ms"],
            "ms", "exact scan", False),
    ]
    rows += [Row(f"search p50, tail of {k} lagging events", tailed, caught, "ms", "caught up", False)
             for k, (tailed, caught) in m["tails"].items()]
    rows = [row for row in rows if not math.isnan(row.ours)]  # skipped (--puts 0, --reindexes 0)
    if "sqlite_vec_p50_ms" in scan:
        rows.append(Row(f"sqlite-vec {scan['sqlite_vec_version']} KNN at {scan_rows} vectors",
                        scan["sqlite_vec_p50_ms"], scan["prefiltered_p50_ms"], "ms", "numpy prefiltered", False))
    print_table(rows)
    print(f"dense nearest: recall@10 against the exact scan {scan['recall_prefiltered']:.0%} prefiltered"
          + (f", {scan['recall_sqlite_vec']:.0%} by sqlite-vec" if "recall_sqlite_vec" in scan else
             " (sqlite-vec not installed here: pip install sqlite-vec to compare)"))
    print(f"search p50 difference: {m['search_on_p50_ms'] - m['search_off_p50_ms']:+.2f} ms; "
          f"bulk load (model on): {m['load_s']:.1f} s")
    if not math.isnan(m["put_on_per_s"]):
        print(f"put CPU per put: {m['put_cpu_on_ms']:.3f} ms with the model, {m['put_cpu_off_ms']:.3f} ms without; "
              f"the vectors' catch-up afterwards, batched: {m['catch_up_cpu_ms']:.3f} ms of CPU "
              f"({m['catch_up_ms']:.3f} ms wall) per put; load average {os.getloadavg()[0]:.2f}")
    return rows


def scan_only(args: argparse.Namespace) -> list[Row]:
    """``--scan-only``: the prefilter sweep at each ``--scan-rows`` size, and one table row per
    size (the shipped prefilter against the exact scan)."""
    rows = []
    for count in args.scan_rows or [20_000, 100_000, 400_000]:
        scan = scan_cost(count, args.queries, not args.no_sqlite_vec, tuple(args.keep or (1024, 2048, 4096, 8192)))
        print_scan(count, scan)
        rows.append(Row(f"dense nearest at {count} vectors", scan["prefiltered_p50_ms"], scan["exact_p50_ms"],
                        "ms", "exact scan", False))
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
