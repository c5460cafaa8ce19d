"""What a durable put's write transaction costs, part by part: the in-process put rate with fewer
projectors in the transaction, against raw SQLite, measured in the same run.

    python -m tools.bench.putparts [--n 1500] [--rounds 3] [--bulk BATCH] [--quick]

The store applies every synchronous projector inside the mutation's transaction (ARCHITECTURE.md,
"How a mutation flows", step 3). This bench puts the same 1 KiB texts as ``tools.bench.put`` through
the real service, once as shipped and then with projectors taken out of the command handler:
without the text projection (``fts``: its rows, vocabulary and FTS5 row; with it goes the vectors'
lag mark, since the vectors embed the text it writes), with only the entity and idempotency rows
(what the deciders and a retried request read), and with none at all,
which leaves the log append (event, content store, idempotency key check) and its commit. Each
figure is a ceiling: what a put would cost if that work left the transaction (an asynchronous
projection that reads catch up to), not a mode the store offers. The variants and the raw
baselines alternate for ``--rounds`` rounds, each on a fresh store; rows are the medians, and
the ratio is to raw SQLite's insert plus FTS5 row (issue 19's put target is 0.6x of it).

``--bulk BATCH`` measures the bulk lane instead (``tools.bench.bulk``: its varied texts in
``batch`` requests of BATCH puts, one transaction each, the vectors' catch-up after the load
included when the vectors stay) against raw batched inserts plus FTS5 rows in the same batches
(issue 19's bulk target is 0.5x of it).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path

from tools.bench import bulk
from tools.bench.common import Row, median, print_table
from tools.bench.put import raw_sqlite_rate, service_put_rate, service_with_projectors, texts
from tools.bench.search import make_corpus

BASELINE = "raw SQLite + FTS5"
BULK_BASELINE = "raw batched + FTS5"
# Which projectors stay in the transaction, by name; None: every one (as shipped).
Keep = Callable[[str], bool] | None
VARIANTS: dict[str, Keep] = {
    "every projector (as shipped)": None,
    "without fts and vectors": lambda name: name not in ("fts", "vectors"),
    "entities and idempotency only": lambda name: name in ("entities", "idempotency"),
    "no projector: the log append alone": lambda name: False,
}


def measure(run_baseline: Callable[[Path], float], run_variant: Callable[[Path, Keep], float],
            rounds: int) -> tuple[dict[str, float], float]:
    """Median rate of each variant and of the baseline over interleaved rounds, each run in a
    fresh folder."""
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    baseline: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for round_number in range(rounds):
            folder = Path(tmp) / f"round{round_number}"
            folder.mkdir()
            baseline.append(run_baseline(folder))
            for index, (name, keep) in enumerate(VARIANTS.items()):
                store = folder / f"store{index}"
                store.mkdir()
                samples[name].append(run_variant(store, keep))
    return {name: median(values) for name, values in samples.items()}, median(baseline)


def lone_puts(n: int) -> tuple[Callable[[Path], float], Callable[[Path, Keep], float]]:
    items = texts(n)
    return (lambda folder: raw_sqlite_rate(folder, items, with_fts=True),
            lambda folder, keep: service_put_rate(folder, items, keep))


def bulk_puts(n: int, batch: int) -> tuple[Callable[[Path], float], Callable[[Path, Keep], float]]:
    corpus = make_corpus(n)
    bodies = bulk.requests(corpus.texts, corpus.titles)

    def raw(folder: Path) -> float:
        return n / bulk.raw_batched_seconds(folder, corpus.texts, corpus.titles, batch)[0]

    def ours(folder: Path, keep: Keep) -> float:
        service = service_with_projectors(folder / "data", keep)
        try:
            return n / bulk.bulk_load_cpu(service, bodies, batch)[0]
        finally:
            service.close()

    return raw, ours


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1500, help="puts per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (medians are reported)")
    parser.add_argument("--bulk", type=int, default=0, metavar="BATCH",
                        help="the bulk lane, BATCH puts per batch request, instead of lone puts")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.rounds = 40, 1
    if args.bulk:
        rates, raw = measure(*bulk_puts(args.n, args.bulk), args.rounds)
        rows = [Row(f"bulk: {name}", value, raw, "/s", BULK_BASELINE) for name, value in rates.items()]
        print(f"{args.n} varied texts in batches of {args.bulk}, median of {args.rounds} interleaved rounds")
    else:
        rates, raw = measure(*lone_puts(args.n), args.rounds)
        rows = [Row(f"put: {name}", value, raw, "/s", BASELINE) for name, value in rates.items()]
        print(f"{args.n} lone puts of 1 KiB, median of {args.rounds} interleaved rounds")
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
