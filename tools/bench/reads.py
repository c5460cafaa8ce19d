"""Reads beside writes through the daemon's reader pool: search throughput and a writer's rate.

    python -m tools.bench.reads [--store 3000] [--seconds 5] [--reader-nice N] [--quick]

The daemon's store holds ``--store`` varied 1 KiB texts (the daemon benchmark's). Every client
is its own process opening one connection per request. Rows, each measured in the same run:

- 4 concurrent ``search`` clients vs 1 client (reads/s; target >= 1.7x);
- one writer's durable ``artifact.put`` rate while 3 search clients run vs the same writer alone
  (target >= 0.8x). 3 readers + 1 writer is the protocol's 4-connection envelope;
- the control: the same writer while the 3 search clients read from *another* daemon (same
  store contents, started beside it). Nothing is shared with the writer's daemon but the
  machine's cores, so this is the floor the machine itself sets; the last row compares the two
  (about 1.0x: the daemon adds no slowdown of its own beyond the CPU the reads take).

Below the table, where each run's CPU went (clients, the daemon process, its reader processes)
per request, and how many cores the run kept busy.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoree.client.transport import Endpoint, exchange
from tools.bench.common import Row, print_table, rate
from tools.bench.daemon import CTX, prefill, request, start_daemon, varied_texts

__all__ = ["main"]


def search_bodies(texts: list[str], count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    bodies = []
    for i in range(count):
        words = rng.choice(texts).split()
        query = " ".join(rng.sample(words, 2)).strip(".,").lower()
        bodies.append(json.dumps({"v": 1, "request_id": f"s{i}", "op": "search", "context": CTX,
                                  "input": {"query": query, "limit": 10}}).encode())
    return bodies


def _searcher(endpoint: Endpoint, bodies: list[bytes], seconds: float, ready: Any, go: Any, done: Any) -> None:
    ready.release()
    go.wait()
    deadline, count, cpu = time.monotonic() + seconds, 0, time.process_time()
    while time.monotonic() < deadline:
        reply = exchange(endpoint, bodies[count % len(bodies)])
        if b'"ok":true' not in reply[:200]:
            raise SystemExit(f"search failed: {reply[:300]!r}")
        count += 1
    done.put((count, time.process_time() - cpu))


def _writer(endpoint: Endpoint, bodies: list[bytes], ready: Any, go: Any, done: Any) -> None:
    ready.release()
    go.wait()
    started, cpu = time.perf_counter(), time.process_time()
    for body in bodies:
        reply = exchange(endpoint, body)
        if b'"ok":true' not in reply[:200]:
            raise SystemExit(f"put failed: {reply[:300]!r}")
    done.put((rate(len(bodies), time.perf_counter() - started), time.process_time() - cpu))


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process so far (0 when it has gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


@dataclass
class Cpu:
    """Where one run's CPU went, in seconds: the clients, the daemon process, its readers."""

    clients: float = 0.0
    daemon: float = 0.0
    readers: float = 0.0
    wall: float = 0.0

    def per_request(self, requests: float) -> str:
        ms = 1000 / max(requests, 1.0)
        used = (self.clients + self.daemon + self.readers) / self.wall if self.wall else 0.0
        return (f"clients {self.clients * ms:.2f} ms, daemon {self.daemon * ms:.2f} ms, "
                f"readers {self.readers * ms:.2f} ms per request; {used:.2f} cores busy")


def _server_cpu(daemon_pid: int | None) -> tuple[float, float]:
    if daemon_pid is None:
        return 0.0, 0.0
    return _cpu_seconds(daemon_pid), sum(_cpu_seconds(c) for c in _children(daemon_pid))


def run_clients(searchers: list[tuple[Any, ...]], writer: tuple[Any, ...] | None,
                daemon_pid: int | None = None, cpu: Cpu | None = None) -> tuple[float, float | None]:
    """Start every client together; return (searches/s over all searchers, the writer's puts/s),
    adding where the CPU went to ``cpu``."""
    context = multiprocessing.get_context("fork")
    ready, go, searched, wrote = context.Semaphore(0), context.Event(), context.Queue(), context.Queue()
    procs = [context.Process(target=_searcher, args=(*args, ready, go, searched)) for args in searchers]
    if writer is not None:
        procs.append(context.Process(target=_writer, args=(*writer, ready, go, wrote)))
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.acquire()
    daemon_before, readers_before = _server_cpu(daemon_pid)
    started = time.perf_counter()
    go.set()
    searched_runs = [searched.get(timeout=600) for _ in searchers]
    wrote_run = wrote.get(timeout=600) if writer is not None else None
    elapsed = time.perf_counter() - started
    daemon_after, readers_after = _server_cpu(daemon_pid)
    for proc in procs:
        proc.join(60)
        if proc.exitcode:
            raise RuntimeError("a benchmark client failed")
    if cpu is not None:
        cpu.clients = sum(c for _, c in searched_runs) + (wrote_run[1] if wrote_run else 0.0)
        cpu.daemon, cpu.readers = daemon_after - daemon_before, readers_after - readers_before
        cpu.wall = elapsed
    seconds = searchers[0][2] if searchers else elapsed
    searches = sum(n for n, _ in searched_runs) / seconds if searchers else 0.0
    return searches, wrote_run[0] if wrote_run else None


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=int, default=3000, help="artifacts in the store")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each search run")
    parser.add_argument("--puts", type=int, default=400, help="the writer's puts per run")
    parser.add_argument("--reader-nice", default=None,
                        help="MEMOREE_READER_NICE for the measured daemon: 0-19 or idle (default: unset, 0)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    args = parser.parse_args(argv)
    settings = {} if args.reader_nice is None else {"MEMOREE_READER_NICE": str(args.reader_nice)}
    if args.quick:
        args.store, args.seconds, args.puts = 30, 0.5, 10
    items = varied_texts(args.store + 3 * args.puts)
    puts = [[request(i, name, text) for i, text in enumerate(items[args.store + n * args.puts:][:args.puts])]
            for n, name in enumerate(("alone", "beside", "control"))]
    cpus = {name: Cpu() for name in ("1 search client", "4 search clients", "writer alone", "writer beside 3")}
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as other_tmp:
        proc, endpoint = start_daemon(Path(tmp), **settings)
        other, other_endpoint = start_daemon(Path(other_tmp))  # the control: readers elsewhere
        try:
            prefill(endpoint, items[:args.store])
            prefill(other_endpoint, items[:args.store])
            queries = search_bodies(items[:args.store], 200, seed=7)
            # Warm every reader (its caches, the store's pages) before any measured run.
            for target in (endpoint, other_endpoint):
                run_clients([(target, queries[i::4], min(args.seconds, 2.0)) for i in range(4)], None)
            one, _ = run_clients([(endpoint, queries, args.seconds)], None, proc.pid, cpus["1 search client"])
            four, _ = run_clients([(endpoint, queries[i::4], args.seconds) for i in range(4)], None, proc.pid,
                                  cpus["4 search clients"])
            _, alone = run_clients([], (endpoint, puts[0]), proc.pid, cpus["writer alone"])
            # The readers run until the writer is done: give them the writer's time and then some.
            reader_seconds = max(args.seconds, 1.5 * args.puts / max(alone or 1.0, 1.0))
            searches_beside, beside = run_clients([(endpoint, queries[i::3], reader_seconds) for i in range(3)],
                                                  (endpoint, puts[1]), proc.pid, cpus["writer beside 3"])
            _, control = run_clients([(other_endpoint, queries[i::3], reader_seconds) for i in range(3)],
                                     (endpoint, puts[2]))
            memory = f"RSS after the runs: daemon {_rss_mib(proc.pid)} MiB, readers " + \
                " / ".join(f"{_rss_mib(pid)}" for pid in _children(proc.pid)) + " MiB"
        finally:
            for daemon in (proc, other):
                daemon.send_signal(signal.SIGTERM)
                daemon.wait(30)
    rows = [
        Row("search, 4 concurrent clients (reads/s)", four, one, "/s", "1 search client"),
        Row("put, 1 writer beside 3 search clients (/s)", beside or 0.0, alone or 0.0, "/s", "the writer alone"),
        Row("put, 3 search clients on another daemon (/s)", control or 0.0, alone or 0.0, "/s",
            "the writer alone (the machine's floor)"),
        Row("put beside 3 readers: same daemon vs another", beside or 0.0, control or 0.0, "/s",
            "3 readers on another daemon"),
    ]
    print_table(rows)
    requests = {"1 search client": one * args.seconds, "4 search clients": four * args.seconds,
                "writer alone": args.puts, "writer beside 3": args.puts + searches_beside * reader_seconds}
    for name, cpu in cpus.items():
        print(f"CPU, {name}: {cpu.per_request(requests[name])} ({os.cpu_count()} cores)")
    print(memory)
    return rows


if __name__ == "__main__":
    main()
