"""Search and context.build latency against raw FTS5 BM25 on the same synthetic texts.

    python -m tools.bench.search [--n 10000] [--reps 30] [--quick] [--store DIR]   (--n 100000 for a big store)

Builds N synthetic artifacts (Zipf-distributed pronounceable words, plus one rare ticket
identifier per artifact) through the in-process service, then times the `search` op (full
protocol path: JSON in, qualification, typo channel, fusion, recency, citations, JSON out) on a
fixed query mix: rare identifiers, mid-frequency words, two-word conjunctions, a very common word
and a typo. The baseline, measured in the same run over the same texts in a plain FTS5 table, is
``MATCH <the same candidate expression> ORDER BY bm25(...) LIMIT 10``; for context.build it is
that query plus ``snippet()`` for each hit. Latencies are milliseconds; the ratio is ours/baseline.
``--store DIR`` keeps both stores in DIR and reuses them on the next run with the same ``--n``
(a 100k build takes minutes); the reused store is the one the code of the building run wrote.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from memoree.eventlog.db import connect
from memoree.queries.analysis import analyze_query
from memoree.service.service import Service
from tools.bench.common import Row, percentile, print_table

CONTEXT = {"workspace_id": "wsp_bench", "project_id": "prj_bench"}
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
VOCABULARY_SIZE = 20_000
WORDS_PER_DOC = (60, 140)
SEED = 20260721


@dataclass(frozen=True)
class Corpus:
    vocabulary: list[str]
    texts: list[str]
    titles: list[str]


def make_vocabulary(rng: random.Random, size: int) -> list[str]:
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def ticket(index: int) -> str:
    return f"TKT-{index:06d}"


def make_corpus(n: int, seed: int = SEED) -> Corpus:
    rng = random.Random(seed)
    vocabulary = make_vocabulary(rng, VOCABULARY_SIZE)
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]
    texts, titles = [], []
    for index in range(n):
        words = rng.choices(vocabulary, weights=weights, k=rng.randint(*WORDS_PER_DOC))
        words.insert(rng.randrange(len(words)), ticket(index))
        sentences = [" ".join(words[i:i + 12]).capitalize() + "." for i in range(0, len(words), 12)]
        texts.append(" ".join(sentences))
        titles.append(" ".join(rng.choices(vocabulary[:2000], k=3)).title())
    return Corpus(vocabulary, texts, titles)


def typo(word: str) -> str:
    return word[:2] + word[3:] if len(word) > 4 else word + "x"


def query_mix(corpus: Corpus, rng: random.Random) -> dict[str, list[str]]:
    n = len(corpus.texts)
    mid = corpus.vocabulary[200:400]
    return {
        "rare identifier": [ticket(rng.randrange(n)) for _ in range(8)],
        "mid-frequency word": rng.sample(mid, 8),
        "two-word conjunction": [f"{a} {b}" for a, b in zip(rng.sample(mid, 8), rng.sample(mid, 8))],
        "very common word": [corpus.vocabulary[0]],
        "typo": [typo(word) for word in rng.sample(mid, 8)],
    }


class Store:
    """The memoree service plus a raw FTS5 table over the same texts."""

    def __init__(self, folder: Path, corpus: Corpus) -> None:
        marker = folder / f"built-{len(corpus.texts)}"
        reuse = marker.exists()
        if not reuse and folder.exists() and any(folder.iterdir()):
            raise SystemExit(f"{folder} holds something other than a finished {len(corpus.texts)}-artifact store")
        folder.mkdir(parents=True, exist_ok=True)
        self.service = Service(folder / "data", synchronous="OFF")
        self.counter = 0
        self.raw = connect(folder / "raw.sqlite3", synchronous="OFF")
        if not reuse:
            self._build(corpus)
            marker.touch()

    def _build(self, corpus: Corpus) -> None:
        for index, (title, text) in enumerate(zip(corpus.titles, corpus.texts)):
            self._ok("artifact.put", {"kind": "note", "title": title, "content": {"type": "text", "data": text}},
                     key=f"k{index}")
        self.raw.execute("CREATE VIRTUAL TABLE raw USING fts5(title, body, tokenize='unicode61 remove_diacritics 2')")
        self.raw.execute("BEGIN")
        self.raw.executemany("INSERT INTO raw (title, body) VALUES (?, ?)", zip(corpus.titles, corpus.texts))
        self.raw.execute("COMMIT")

    def _ok(self, op: str, payload: dict, key: str | None = None) -> dict:
        self.counter += 1
        document = {"v": 1, "request_id": f"r{self.counter}", "op": op, "context": CONTEXT, "input": payload}
        if key:
            document["idempotency_key"] = key
        reply = self.service.handle_bytes(json.dumps(document).encode())
        assert reply.ok, reply.body[:300]
        return json.loads(reply.body)["result"]

    def search(self, query: str) -> None:
        self._ok("search", {"query": query, "limit": 10})

    def context_build(self, query: str) -> None:
        self._ok("context.build", {"query": query, "limit": 10, "max_bytes": 16384})

    def raw_search(self, query: str, with_snippets: bool = False) -> None:
        expression = analyze_query(query).match_expression
        columns = "rowid, snippet(raw, 1, '', '', ' … ', 36)" if with_snippets else "rowid"
        self.raw.execute(f"SELECT {columns} FROM raw WHERE raw MATCH ? ORDER BY bm25(raw, 5.0, 1.0) LIMIT 10",
                         (expression,)).fetchall()

    def close(self) -> None:
        self.service.close()
        self.raw.close()


def latencies(fn: Callable[[str], None], queries: list[str], reps: int) -> list[float]:
    for query in queries:
        fn(query)  # warm caches
    samples = []
    for _ in range(reps):
        for query in queries:
            started = time.perf_counter()
            fn(query)
            samples.append((time.perf_counter() - started) * 1000)
    return samples


def measure(store: Store, mix: dict[str, list[str]], reps: int) -> list[Row]:
    rows: list[Row] = []
    everything_ours: list[float] = []
    everything_raw: list[float] = []
    for kind, queries in mix.items():
        ours = latencies(store.search, queries, reps)
        raw = latencies(store.raw_search, queries, reps)
        everything_ours += ours
        everything_raw += raw
        for q in (50, 99):
            rows.append(Row(f"search p{q}: {kind}", percentile(ours, q), percentile(raw, q), "ms",
                            "FTS5 bm25 LIMIT 10", False))
    for q in (50, 99):
        rows.append(Row(f"search p{q}: whole mix", percentile(everything_ours, q),
                        percentile(everything_raw, q), "ms", "FTS5 bm25 LIMIT 10", False))
    all_queries = [query for queries in mix.values() for query in queries]
    ours = latencies(store.context_build, all_queries, max(1, reps // 3))
    raw = latencies(lambda query: store.raw_search(query, with_snippets=True), all_queries, max(1, reps // 3))
    rows.append(Row("context.build p50: whole mix (16 KiB)", percentile(ours, 50), percentile(raw, 50), "ms",
                    "FTS5 + snippet()", False))
    return rows


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="artifacts in the store (try 100000)")
    parser.add_argument("--reps", type=int, default=30, help="repetitions of each query")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    parser.add_argument("--store", type=Path, default=None,
                        help="keep the stores in this folder and reuse them when it holds a finished one")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.reps = 200, 2
    corpus = make_corpus(args.n)
    mix = query_mix(corpus, random.Random(SEED + 1))
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.store or Path(tmp)
        reused = (folder / f"built-{args.n}").exists()
        started = time.perf_counter()
        store = Store(folder, corpus)
        loaded = time.perf_counter() - started
        try:
            rows = measure(store, mix, args.reps)
        finally:
            store.close()
    how = "reopened (built by an earlier run)" if reused else "loaded through artifact.put"
    print(f"{args.n} artifacts {how} in {loaded:.1f} s; {args.reps} reps per query")
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
