"""The peer row: the ``eventsourcing`` library's one-event command rate on SQLite.

    pip install eventsourcing   # into the bench's environment (not a memoree dependency)
    python -m tools.bench.peer [--n 2000] [--quick]

Each command loads nothing (a new aggregate is created and saved), so the peer pays one durable
SQLite transaction per command with one event and no indexing; memoree's rows for comparison are
the 1-client and 4-client daemon puts (`tools.bench.daemon`), which also index every artifact.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from tools.bench.common import Row, print_table, rate, timed
from tools.bench.put import TEXT, service_put_rate, texts


def peer_rate(folder: Path, n: int) -> float | None:
    try:
        from eventsourcing.application import Application
        from eventsourcing.domain import Aggregate, event
    except ImportError:
        return None

    class Note(Aggregate):
        @event("Written")
        def __init__(self, body: str) -> None:
            self.body = body

    class Notes(Application):
        pass

    os.environ.update(PERSISTENCE_MODULE="eventsourcing.sqlite", SQLITE_DBNAME=str(folder / "peer.sqlite3"))
    app = Notes()

    def run() -> None:
        for _ in range(n):
            app.save(Note(TEXT))

    return rate(n, timed(run))


def peer_rate_in_subprocess(n: int) -> float | None:
    """``peer_rate`` in a fresh interpreter (the peer's class registry admits one ``Note`` per
    process), or None when ``eventsourcing`` is not installed."""
    import json
    import subprocess
    import sys

    code = ("import json, sys, tempfile\nfrom pathlib import Path\nfrom tools.bench.peer import peer_rate\n"
            "with tempfile.TemporaryDirectory() as folder:\n"
            "    print(json.dumps(peer_rate(Path(folder), int(sys.argv[1]))))\n")
    done = subprocess.run([sys.executable, "-c", code, str(n)], capture_output=True, text=True, check=False)
    return json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 and done.stdout.strip() else None


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.n = 50
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        peer = peer_rate(folder, args.n)
        ours = service_put_rate(folder, texts(args.n))
    if peer is None:
        print("eventsourcing is not installed: `pip install eventsourcing` to measure the peer row")
        return []
    rows = [Row("in-process put (indexed) vs eventsourcing command", ours, peer, "/s", "eventsourcing on SQLite")]
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
