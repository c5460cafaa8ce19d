"""The writer's CPU per put in a group commit: the bulk lane against one savepoint per request.

    python -m tools.bench.groups [--n 600] [--store 1000] [--sizes 1,2,4] [--reps 4] [--quick]

The daemon's writer commits the mutations that queue while it is busy as one group. Since the
eighteenth session a group runs in ``Engine.bulk``: its small puts are decided one by one and
written together, one statement per table (``commands.bulk``). The baseline, measured in the same
run, is the same requests in ``Engine.group`` alone, each request in its own savepoint, which is
how the writer wrote a group before. Both sides send the same varied 1 KiB texts into a fresh copy
of the same prefilled store, through ``Service.handle_bytes`` as the writer does, and time the
thread's CPU (the fsync waits are the syncer's, not the writer's). The reps alternate which side
goes first and the row is their median. The dense channel is off
(``MEMOREE_SEMANTIC=off``) because its catch-up runs after a group, not inside it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from tools.bench.common import Row, median, print_table
from tools.bench.daemon import request, varied_texts

SIDES = ("bulk", "group")


def prefilled(folder: Path, stored: list[str]) -> Path:
    """A store holding ``stored``, closed, to copy for every measured side."""
    from memoree.service.service import Service

    service = Service(folder)
    with service.engine.bulk():
        for i, text in enumerate(stored):
            assert service.handle_bytes(request(i, "pre", text)).ok
    service.close()
    return folder


def cpu_ms_per_put(template: Path, folder: Path, bodies: list[bytes], size: int, side: str) -> float:
    """Thread CPU per put when ``bodies`` go in ``size`` at a time through one side's group."""
    from memoree.service.service import Service

    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(template, folder)
    service = Service(folder)
    engine = service.engine
    open_group = engine.bulk if side == "bulk" else engine.group
    started = time.thread_time()
    for start in range(0, len(bodies), size):
        with open_group():
            for raw in bodies[start:start + size]:
                assert service.handle_bytes(raw).ok
    spent = time.thread_time() - started
    service.close()
    return spent / len(bodies) * 1000


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=600, help="puts measured per side and size")
    parser.add_argument("--store", type=int, default=1000, help="artifacts in the store before them")
    parser.add_argument("--sizes", default="1,2,4", help="requests per group, comma-separated")
    parser.add_argument("--reps", type=int, default=4, help="alternating repetitions (the row is the median)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.store, args.reps = 16, 20, 1
    before = os.environ.get("MEMOREE_SEMANTIC")
    os.environ["MEMOREE_SEMANTIC"] = "off"
    try:
        rows = measure(args)
    finally:
        if before is None:
            del os.environ["MEMOREE_SEMANTIC"]
        else:
            os.environ["MEMOREE_SEMANTIC"] = before
    print(f"{args.n} puts into a store of {args.store}, {args.reps} alternating reps, semantic off")
    print_table(rows)
    return rows


def measure(args: argparse.Namespace) -> list[Row]:
    """One row per group size: the bulk lane's median CPU per put beside the savepoints'."""
    items = varied_texts(args.store + args.n)
    bodies = [request(i, "bench", text) for i, text in enumerate(items[args.store:])]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        template = prefilled(Path(tmp) / "template", items[:args.store])
        for size in (int(part) for part in args.sizes.split(",")):
            spent: dict[str, list[float]] = {side: [] for side in SIDES}
            for rep in range(args.reps):
                for side in SIDES if rep % 2 == 0 else SIDES[::-1]:
                    spent[side].append(cpu_ms_per_put(template, Path(tmp) / side, bodies, size, side))
            rows.append(Row(f"writer CPU per put, groups of {size} (ms)", median(spent["bulk"]),
                            median(spent["group"]), "ms", "a savepoint per request", False))
    return rows


if __name__ == "__main__":
    main()
