"""What a durable put's write transaction costs, part by part: the in-process put rate with fewer
projectors in the transaction, against raw SQLite, measured in the same run.

    python -m tools.bench.putparts [--n 1500] [--rounds 3] [--quick]

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
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path

from tools.bench.common import Row, median, print_table
from tools.bench.put import raw_sqlite_rate, service_put_rate, texts

BASELINE = "raw SQLite + FTS5"
# Which projectors stay in the transaction, by name; None: every one (as shipped).
VARIANTS: dict[str, Callable[[str], bool] | None] = {
    "put, every projector (as shipped)": None,
    "put without fts and vectors": lambda name: name not in ("fts", "vectors"),
    "put with entities and idempotency only": lambda name: name in ("entities", "idempotency"),
    "put with no projector: the log append alone": lambda name: False,
}


def measure(items: list[str], rounds: int) -> tuple[dict[str, float], float]:
    """Median rate of each variant and of the raw baseline over interleaved rounds."""
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    baseline: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for round_number in range(rounds):
            folder = Path(tmp) / f"round{round_number}"
            folder.mkdir()
            baseline.append(raw_sqlite_rate(folder, items, with_fts=True))
            for index, (name, keep) in enumerate(VARIANTS.items()):
                samples[name].append(service_put_rate(folder / f"store{index}", items, keep))
    return {name: median(values) for name, values in samples.items()}, median(baseline)


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1500, help="puts per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (medians are reported)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.rounds = 40, 1
    rates, raw = measure(texts(args.n), args.rounds)
    rows = [Row(name, value, raw, "/s", BASELINE) for name, value in rates.items()]
    print(f"{args.n} puts of 1 KiB per measurement, median of {args.rounds} interleaved rounds")
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
