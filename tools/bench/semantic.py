"""What the dense channel costs: put rate, reindex and search latency with it and without it.

    python -m tools.bench.semantic [--n 10000] [--puts 1000] [--reps 20] [--quick]

Each side runs in its own process (the model is loaded once per process): "without" sets
``MEMOREE_SEMANTIC=off`` (the store as if the model were not installed), "with" is the default.
Both build the same N synthetic artifacts (``tools.bench.search``'s corpus) by group-committed
bulk load, then time a full reindex, the `search` op p50 over the same query mix plus natural
questions, and durable one-by-one ``artifact.put`` of 1 KiB texts. Ratios are with / without.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.bench.common import Row, percentile, print_table

QUESTIONS = ["how are the release notes kept", "which team owns the build cache",
             "what happened to the old migration plan", "who approves a production change"]


def measure(n: int, puts: int, reps: int) -> dict[str, float]:
    from memoree.service.service import Service
    from tools.bench.bulk import bulk_load, requests
    from tools.bench.put import texts as put_texts
    from tools.bench.search import CONTEXT, make_corpus, query_mix

    corpus = make_corpus(n)
    folder = Path(tempfile.mkdtemp(prefix="bench-semantic-"))
    service = Service(folder / "data")
    load_seconds = bulk_load(service, requests(corpus.texts, corpus.titles), 500)
    started = time.perf_counter()
    service.engine.reindex()
    reindex_seconds = time.perf_counter() - started
    mix = [q for group in query_mix(corpus, random.Random(7)).values() for q in group] + QUESTIONS
    samples = []
    for rep in range(reps):
        for query in mix:
            body = json.dumps({"v": 1, "request_id": f"s{rep}", "op": "search", "context": CONTEXT,
                               "input": {"query": query}}).encode()
            started = time.perf_counter()
            reply = service.handle_bytes(body)
            samples.append((time.perf_counter() - started) * 1000)
            assert reply.ok
    items = put_texts(puts)
    started = time.perf_counter()
    for i, text in enumerate(items):
        reply = service.handle_bytes(json.dumps({
            "v": 1, "request_id": f"p{i}", "op": "artifact.put", "idempotency_key": f"put{i}",
            "context": CONTEXT, "input": {"kind": "note", "title": "bench",
                                          "content": {"type": "text", "data": text}}}).encode())
        assert reply.ok
    put_rate = puts / (time.perf_counter() - started)
    service.close()
    return {"load_s": load_seconds, "reindex_s": reindex_seconds, "search_p50_ms": percentile(samples, 50),
            "search_p95_ms": percentile(samples, 95), "put_per_s": put_rate}


def side(semantic: bool, n: int, puts: int, reps: int) -> dict[str, float]:
    env = dict(os.environ)
    if semantic:
        env.pop("MEMOREE_SEMANTIC", None)
    else:
        env["MEMOREE_SEMANTIC"] = "off"
    code = (f"import json; from tools.bench.semantic import measure; "
            f"print(json.dumps(measure({n}, {puts}, {reps})))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="artifacts in the store")
    parser.add_argument("--puts", type=int, default=1000, help="durable puts timed one by one")
    parser.add_argument("--reps", type=int, default=20, help="passes over the query mix")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.puts, args.reps = 300, 50, 2
    without = side(False, args.n, args.puts, args.reps)
    with_ = side(True, args.n, args.puts, args.reps)
    rows = [
        Row("put rate, 1 KiB", with_["put_per_s"], without["put_per_s"], "/s", "no dense"),
        Row(f"reindex of {args.n} events", with_["reindex_s"], without["reindex_s"], "s", "no dense", False),
        Row(f"bulk load of {args.n}", with_["load_s"], without["load_s"], "s", "no dense", False),
        Row(f"search p50 at {args.n} artifacts", with_["search_p50_ms"], without["search_p50_ms"], "ms",
            "no dense", False),
        Row(f"search p95 at {args.n} artifacts", with_["search_p95_ms"], without["search_p95_ms"], "ms",
            "no dense", False),
    ]
    print_table(rows)
    print(f"search p50 difference: {with_['search_p50_ms'] - without['search_p50_ms']:+.2f} ms")
    return rows


if __name__ == "__main__":
    main()
