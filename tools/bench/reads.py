"""Reads beside writes through the daemon's reader pool: search throughput and a writer's rate.

    python -m tools.bench.reads [--store 3000] [--seconds 5] [--puts 150] [--rounds 3]
                                [--reader-nice N|idle] [--reads-yield MS] [--set NAME=VALUE] [--quick]

The daemon's store holds ``--store`` varied 1 KiB texts (the daemon benchmark's). Every client
is its own process opening one connection per request. Rows, each measured in the same run:

- 4 concurrent ``search`` clients vs 1 client (reads/s; target >= 1.7x);
- one writer's durable ``artifact.put`` rate while 3 search clients run vs the same writer alone
  (target >= 0.8x). 3 readers + 1 writer is the protocol's 4-connection envelope;
- the control: the same writer while the 3 search clients read from *another* daemon (same
  store contents, started beside it). Nothing is shared with the writer's daemon but the
  machine's cores, so this is the floor the machine itself sets; the last row compares the two
  (about 1.0x: the daemon adds no slowdown of its own beyond the CPU the reads take).

The writer's three runs (alone, beside the 3 readers, beside the control's) take turns for
``--rounds`` rounds of ``--puts`` puts, so the drift of a shared machine hits all three; the
searchers beside the writer run until its last put is answered.

Below the table: where each run's CPU went (clients, the daemon process, its reader processes)
per request and how many cores the run kept busy; per put, each daemon thread's time on a CPU
and its time runnable but waiting for one (``/proc/<pid>/task/<tid>/schedstat``: the cost of a
full machine), the put latency and the WAL's size; the searches' latency (and their rate
beside the writer: what writes-first costs the reads); the load average (others' work).
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoree.client.transport import Endpoint, exchange
from tools.bench.common import Row, percentile, print_table, rate
from tools.bench.daemon import CTX, children_of, is_embedding_worker, prefill, request, start_daemon, varied_texts

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


def _searcher(endpoint: Endpoint, bodies: list[bytes], seconds: float, ready: Any, go: Any, stop: Any,
              done: Any) -> None:
    ready.release()
    go.wait()
    started = time.monotonic()
    deadline, count, cpu = started + seconds, 0, time.process_time()
    latencies = []
    while time.monotonic() < deadline and not stop.is_set():
        sent = time.perf_counter()
        reply = exchange(endpoint, bodies[count % len(bodies)])
        latencies.append(time.perf_counter() - sent)
        if b'"ok":true' not in reply[:200]:
            raise SystemExit(f"search failed: {reply[:300]!r}")
        count += 1
    done.put((count / (time.monotonic() - started), time.process_time() - cpu, latencies))


def _writer(endpoint: Endpoint, bodies: list[bytes], ready: Any, go: Any, stop: Any, done: Any) -> None:
    ready.release()
    go.wait()
    started, cpu = time.perf_counter(), time.process_time()
    latencies = []
    for body in bodies:
        sent = time.perf_counter()
        reply = exchange(endpoint, body)
        latencies.append(time.perf_counter() - sent)
        if b'"ok":true' not in reply[:200]:
            raise SystemExit(f"put failed: {reply[:300]!r}")
    stop.set()  # the searchers beside it stop with it
    done.put((time.perf_counter() - started, time.process_time() - cpu, latencies))


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process so far (0 when it has gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _sched(pid: int) -> dict[str, tuple[float, float]]:
    """Seconds on a CPU and seconds runnable but waiting for one, per thread of ``pid`` summed
    by the kernel's thread name (the main thread, the daemon's I/O loop, is ``io``); from
    ``/proc/<pid>/task/<tid>/schedstat``."""
    found: dict[str, tuple[float, float]] = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            name = task.joinpath("comm").read_text().strip()
            ran, waited = (int(x) / 1e9 for x in task.joinpath("schedstat").read_text().split()[:2])
        except (OSError, ValueError):
            continue
        name = "io" if int(task.name) == pid else name.removeprefix("memoree-")
        name = "relays" if name.startswith("relay-") else name
        before = found.get(name, (0.0, 0.0))
        found[name] = (before[0] + ran, before[1] + waited)
    return found


def _sched_delta(after: dict[str, tuple[float, float]], before: dict[str, tuple[float, float]]
                 ) -> dict[str, tuple[float, float]]:
    return {name: (ran - before.get(name, (0.0, 0.0))[0], waited - before.get(name, (0.0, 0.0))[1])
            for name, (ran, waited) in after.items()}


def _wal_mib(data_dir: Path) -> float:
    try:
        return (data_dir / "memoree.sqlite3-wal").stat().st_size / (1 << 20)
    except OSError:
        return 0.0


def _rss_mib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


@dataclass
class Cpu:
    """Where one run's CPU went, in seconds: the clients, the daemon process, its readers."""

    clients: float = 0.0
    daemon: float = 0.0
    readers: float = 0.0
    wall: float = 0.0
    threads: dict[str, tuple[float, float]] = field(default_factory=dict)  # (on CPU, runnable-waiting) s
    latencies: list[float] = field(default_factory=list)  # the writer's puts (s)
    reads: list[float] = field(default_factory=list)  # the searches' (s)
    wal_mib: float = 0.0

    def add(self, other: Cpu) -> None:
        self.clients, self.daemon = self.clients + other.clients, self.daemon + other.daemon
        self.readers, self.wall = self.readers + other.readers, self.wall + other.wall
        for name, (ran, waited) in other.threads.items():
            before = self.threads.get(name, (0.0, 0.0))
            self.threads[name] = (before[0] + ran, before[1] + waited)
        self.latencies += other.latencies
        self.reads += other.reads

    def writer_lines(self, puts: int) -> str:
        """Per put: each daemon thread's CPU and its wait for a CPU; the writer's latency."""
        ms = 1000 / max(puts, 1)
        parts = [f"{name} {ran * ms:.2f}+{waited * ms:.2f}"
                 for name, (ran, waited) in sorted(self.threads.items()) if ran + waited > 0.0005 * puts / 1000]
        p50, p99 = percentile(self.latencies, 50), percentile(self.latencies, 99)
        return (f"per put, ms on CPU + ms waiting for one: {', '.join(parts)}; wall {self.wall * ms:.2f} ms; "
                f"put p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms; WAL {self.wal_mib:.1f} MiB after")

    def per_request(self, requests: float) -> str:
        ms = 1000 / max(requests, 1.0)
        used = (self.clients + self.daemon + self.readers) / self.wall if self.wall else 0.0
        return (f"clients {self.clients * ms:.2f} ms, daemon {self.daemon * ms:.2f} ms, "
                f"readers (and the embedding worker) {self.readers * ms:.2f} ms per request; {used:.2f} cores busy")


def _server_cpu(daemon_pid: int | None) -> tuple[float, float]:
    if daemon_pid is None:
        return 0.0, 0.0
    return _cpu_seconds(daemon_pid), sum(_cpu_seconds(c) for c in children_of(daemon_pid))


def run_clients(searchers: list[tuple[Any, ...]], writer: tuple[Any, ...] | None,
                daemon_pid: int | None = None, cpu: Cpu | None = None) -> tuple[float, float | None]:
    """Start every client together; return (searches/s over all searchers, the writer's puts/s),
    adding where the CPU went to ``cpu``."""
    context = multiprocessing.get_context("fork")
    ready, go, stop = context.Semaphore(0), context.Event(), context.Event()
    searched, wrote = context.Queue(), context.Queue()
    procs = [context.Process(target=_searcher, args=(*args, ready, go, stop, searched)) for args in searchers]
    if writer is not None:
        procs.append(context.Process(target=_writer, args=(*writer, ready, go, stop, wrote)))
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.acquire()
    daemon_before, readers_before = _server_cpu(daemon_pid)
    threads_before = _sched(daemon_pid) if daemon_pid is not None else {}
    started = time.perf_counter()
    go.set()
    searched_runs = [searched.get(timeout=600) for _ in searchers]
    wrote_run = wrote.get(timeout=600) if writer is not None else None
    wrote_rate = rate(len(writer[1]), wrote_run[0]) if writer is not None and wrote_run else None
    elapsed = time.perf_counter() - started
    daemon_after, readers_after = _server_cpu(daemon_pid)
    threads_after = _sched(daemon_pid) if daemon_pid is not None else {}
    for proc in procs:
        proc.join(60)
        if proc.exitcode:
            raise RuntimeError("a benchmark client failed")
    if cpu is not None:
        cpu.clients = sum(c for _, c, _ in searched_runs) + (wrote_run[1] if wrote_run else 0.0)
        cpu.daemon, cpu.readers = daemon_after - daemon_before, readers_after - readers_before
        cpu.wall = elapsed
        cpu.threads = _sched_delta(threads_after, threads_before)
        cpu.latencies = wrote_run[2] if wrote_run else []
        cpu.reads = [seconds for _, _, run in searched_runs for seconds in run]
    searches = sum(per_second for per_second, _, _ in searched_runs)
    return searches, wrote_rate


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=int, default=3000, help="artifacts in the store")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each search run")
    parser.add_argument("--puts", type=int, default=150, help="the writer's puts per run")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of the writer's runs in turn (alone, beside 3 readers, control)")
    parser.add_argument("--reader-nice", default=None,
                        help="MEMOREE_READER_NICE for the measured daemon: 0-19 or idle (default: unset, 0)")
    parser.add_argument("--reads-yield", default=None,
                        help="MEMOREE_READS_YIELD_MS for the measured daemon (default: unset, the daemon's)")
    parser.add_argument("--set", action="append", default=[], metavar="MEMOREE_NAME=VALUE",
                        help="another setting for the measured daemon (repeatable)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    args = parser.parse_args(argv)
    settings = dict(setting.split("=", 1) for setting in args.set)
    if args.reader_nice is not None:
        settings["MEMOREE_READER_NICE"] = str(args.reader_nice)
    if args.reads_yield is not None:
        settings["MEMOREE_READS_YIELD_MS"] = str(args.reads_yield)
    if args.quick:
        args.store, args.seconds, args.puts, args.rounds = 30, 0.5, 10, 1
    items = varied_texts(args.store + 3 * args.puts * args.rounds)
    fresh = iter(items[args.store:])
    puts = {name: [[request(i, f"{name}{r}-", next(fresh)) for i in range(args.puts)]
                   for r in range(args.rounds)] for name in ("alone", "beside", "control")}
    cpus = {name: Cpu() for name in ("1 search client", "4 search clients", "writer alone", "writer beside 3",
                                     "writer, 3 elsewhere")}
    wrote = {name: 0.0 for name in ("alone", "beside", "control")}  # seconds writing, summed over rounds
    searched = 0.0  # searches during the writer's runs beside it
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as other_tmp:
        proc, endpoint = start_daemon(Path(tmp), **settings)
        other, other_endpoint = start_daemon(Path(other_tmp))  # the control: readers elsewhere
        store = Path(tmp) / "daemon-data"
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
            # Alone, beside, control in turn, round after round: the machine's drift hits all three.
            reader_seconds = 0.0
            for r in range(args.rounds):
                step = Cpu()
                _, alone = run_clients([], (endpoint, puts["alone"][r]), proc.pid, step)
                cpus["writer alone"].add(step)
                wrote["alone"] += args.puts / (alone or 1.0)
                cpus["writer alone"].wal_mib = _wal_mib(store)
                seconds = 600.0  # the readers run until the writer is done
                step = Cpu()
                searches, beside = run_clients([(endpoint, queries[i::3], seconds) for i in range(3)],
                                               (endpoint, puts["beside"][r]), proc.pid, step)
                cpus["writer beside 3"].add(step)
                wrote["beside"] += args.puts / (beside or 1.0)
                searched += searches * args.puts / (beside or 1.0)
                reader_seconds += args.puts / (beside or 1.0)
                cpus["writer beside 3"].wal_mib = _wal_mib(store)
                step = Cpu()
                _, control = run_clients([(other_endpoint, queries[i::3], seconds) for i in range(3)],
                                         (endpoint, puts["control"][r]), proc.pid, step)
                cpus["writer, 3 elsewhere"].add(step)
                wrote["control"] += args.puts / (control or 1.0)
                cpus["writer, 3 elsewhere"].wal_mib = _wal_mib(store)
            children = {pid: is_embedding_worker(pid) for pid in children_of(proc.pid)}
            memory = f"RSS after the runs: daemon {_rss_mib(proc.pid)} MiB, readers " + \
                " / ".join(f"{_rss_mib(pid)}" for pid, worker in children.items() if not worker) + " MiB" + \
                "".join(f", embedding worker {_rss_mib(pid)} MiB" for pid, worker in children.items() if worker)
        finally:
            for daemon in (proc, other):
                daemon.send_signal(signal.SIGTERM)
                daemon.wait(30)
    total = args.puts * args.rounds
    alone, beside, control = (total / wrote[name] for name in ("alone", "beside", "control"))
    searches_beside = searched / reader_seconds if reader_seconds else 0.0
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
                "writer alone": total, "writer beside 3": total + searched, "writer, 3 elsewhere": total}
    for name, cpu in cpus.items():
        print(f"CPU, {name}: {cpu.per_request(requests[name])} ({os.cpu_count()} cores)")
    for name in ("writer alone", "writer beside 3", "writer, 3 elsewhere"):
        print(f"Writer's daemon, {name}: {cpus[name].writer_lines(total)}")
    for name in ("1 search client", "4 search clients", "writer beside 3"):
        reads = cpus[name].reads
        beside_rate = f", {searches_beside:.1f} /s over 3 clients while the writer ran" \
            if name == "writer beside 3" else ""
        print(f"Searches, {name}: p50 {percentile(reads, 50) * 1000:.1f} ms, "
              f"p99 {percentile(reads, 99) * 1000:.1f} ms{beside_rate}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(memory)
    return rows


if __name__ == "__main__":
    main()
