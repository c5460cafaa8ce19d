"""Run every benchmark and print one table: ``python -m tools.bench [--quick]``.

Each row is our figure, a baseline measured in the same run, and the ratio. The full run is sized
for the 2-core machine (under 10 minutes); ``--quick`` is the CI smoke size.
"""

from __future__ import annotations

import argparse
import time

from tools.bench import bulk, cli, daemon, importer, locomo, peer, put, reads, recall, search
from tools.bench.common import Row, print_table


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (CI smoke)")
    parser.add_argument("--big", action="store_true", help="also search at 100k artifacts (adds minutes)")
    args = parser.parse_args(argv)
    quick = ["--quick"] if args.quick else []
    started = time.perf_counter()
    rows: list[Row] = []
    for name, runner, extra in (
        ("put", put.main, []), ("daemon", daemon.main, []), ("cli", cli.main, []), ("peer", peer.main, []),
        ("importer", importer.main, []), ("reads", reads.main, []),
        ("bulk", bulk.main, [] if args.quick else ["--n", "100000"]),
        ("search", search.main, []), ("recall", recall.main, []),
        ("locomo", locomo.main, [] if args.quick else ["--questions", "40"]),
    ):
        print(f"\n== {name}")
        rows += runner(quick + extra)
    if args.big and not args.quick:
        print("\n== search at 100k")
        rows += search.main(["--n", "100000", "--reps", "10"])
    print(f"\n== all benchmarks ({time.perf_counter() - started:.0f} s)")
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
