"""Scale-out: appends per second and catch-up lag with 1, 2 and 4 writer processes, PostgreSQL vs SQLite.

    python -m tools.bench.scaleout [--quick] [--puts N] [--pg-url URL] [--rounds R]

Every writer process opens its own store and sends durable ``artifact.put`` mutations (1 KiB
texts, full path: decide, append, projections, commit) for its share of ``N``; the writers warm
up, then start together. Measured in the same run, on the same machine:

- **PostgreSQL**: each writer is a host (its own data dir, ``MEMOREE_LOG_URL`` at a fresh
  database); one more host, writing nothing, follows the log by the catch-up subscription.
  Catch-up lag is the time from a writer's acknowledgement to that ``commit_seq`` being in the
  follower host's local projections. Each writer also reports how long each of its write
  transactions held the shared append lock (printed as p50 / p99): for a put appended in one
  statement (on a guessed head, or on the head a missed guess reported) by PostgreSQL's clock,
  from the head row's lock to its last row (the commit's WAL flush, still under the lock, is
  not in it: the ``WAL flush`` line measures one); for a put that took the lock first, from the
  lock's round trip to its commit's return. It prints how much of that was PostgreSQL's commit,
  and what share of its puts appended in one statement (and how many of those tries missed).
- **SQLite** (baseline): every writer opens the same data dir, serialized by ``BEGIN
  IMMEDIATE``; embedded mode has no second host, so the "follower" is a reader of the same file,
  and its lag is plain visibility.

For both it prints the CPU time per put of the writers (together), of the observer, of the
PostgreSQL server's processes (when the server runs on this machine and its ``postmaster.pid``
is readable) and of the whole machine (``/proc/stat``: other sessions' work included, so on a
shared machine it says how much of the cores the run got, not what it cost).

Both observers poll their local file every 2 ms. The PostgreSQL admin URL comes from
``--pg-url``, ``MEMOREE_BENCH_PG_URL`` or ``MEMOREE_TEST_PG_URL``; each run creates and drops
its own database.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tools.bench.common import Row, percentile, print_table, rate

WRITERS = (1, 2, 4)
POLL_S = 0.002
TEXT = ("every host follows one log and decides against its head. " * 20)[:1000]
CONTEXT = {"workspace_id": "wsp_bench", "project_id": "prj_bench"}


def request(worker: int, i: int) -> bytes:
    return json.dumps({"v": 1, "request_id": f"r{worker}-{i}", "op": "artifact.put",
                       "idempotency_key": f"k{worker}-{i}", "context": CONTEXT,
                       "input": {"kind": "note", "title": f"note {worker}-{i}",
                                 "content": {"type": "text", "data": f"{worker:02d}{i:06d} {TEXT}"}}}).encode()


def _use_log(url: str | None) -> None:
    if url:
        os.environ["MEMOREE_LOG_URL"] = url
    else:
        os.environ.pop("MEMOREE_LOG_URL", None)


def writer(data_dir: str, url: str | None, worker: int, count: int, go: Any, results: Any) -> None:
    """One writer process: warm up outside the timing, wait for the others, then put ``count``."""
    from memoree.service.service import Service

    _use_log(url)
    service = Service(Path(data_dir))
    assert service.handle_bytes(request(worker, -1)).ok
    results.put("ready")
    go.wait()
    cpu_started = time.process_time()
    acks = []
    for i in range(count):
        reply = service.handle_bytes(request(worker, i))
        assert reply.ok, reply.body
        acks.append((json.loads(reply.body)["commit_seq"], time.time()))
    shared = service.engine.shared
    holds = [seconds * 1000 for seconds in shared.lock_holds] if shared is not None else []
    commits = [seconds * 1000 for seconds in shared.lock_commits] if shared is not None else []
    guesses = list(shared.guesses) if shared is not None else [0, 0]
    results.put({"acks": acks, "finished": time.time(), "lock_ms": holds, "commit_ms": commits,
                 "cpu_s": time.process_time() - cpu_started, "guesses": guesses})
    service.close()


def observer(data_dir: str, url: str | None, ready: Any, stop: Any, results: Any) -> None:
    """Record when each commit_seq first shows up in this observer's local file."""
    from memoree.eventlog.db import connect
    from memoree.service.service import Service

    _use_log(url)
    service = Service(Path(data_dir))
    conn = service.engine.conn if url else connect(Path(data_dir) / "memoree.sqlite3", readonly=True)
    seen: dict[int, float] = {}
    last = _local_head(conn)
    ready.set()
    cpu_started = time.process_time()
    while not stop.is_set():
        head = _local_head(conn)
        now = time.time()
        for seq in range(last + 1, head + 1):
            seen[seq] = now
        last = head
        time.sleep(POLL_S)
    results.put({"seen": seen, "cpu_s": time.process_time() - cpu_started})
    service.close()


def machine_busy_s() -> float:
    """CPU seconds the whole machine spent busy so far (every process, every core), from /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(f) for f in stat.readline().split()[1:]]
    except OSError:
        return float("nan")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def server_pid(url: str | None) -> int | None:
    """The PostgreSQL postmaster's pid when the server runs on this machine (else None)."""
    if url is None:
        return None
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            data_dir = conn.execute("SHOW data_directory").fetchone()[0]
        pid = int(Path(data_dir, "postmaster.pid").read_text().split()[0])
        Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError, IndexError, psycopg.Error):
        return None
    return pid


def server_cpu_s(postmaster: int | None) -> float:
    """CPU seconds the server's processes have used: the live ones plus those it reaped."""
    if postmaster is None:
        return float("nan")
    tick, total = os.sysconf("SC_CLK_TCK"), 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        if pid == postmaster:
            total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        elif ppid == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / tick


def _local_head(conn: Any) -> int:
    return conn.execute("SELECT coalesce(max(commit_seq), 0) FROM events").fetchone()[0]


def run_case(folder: Path, url: str | None, writers: int, puts: int) -> dict[str, float]:
    """Throughput and lag percentiles for one backend and writer count."""
    ctx = multiprocessing.get_context("spawn")
    go, ready, stop = ctx.Event(), ctx.Event(), ctx.Event()
    acks_queue, seen_queue = ctx.Queue(), ctx.Queue()
    shared_dir = folder / "sqlite-data"
    _prepare_store(shared_dir, url)
    watch = ctx.Process(target=observer, args=(str(folder / "observer" if url else shared_dir), url,
                                               ready, stop, seen_queue))
    watch.start()
    while not ready.wait(1.0):
        if watch.exitcode is not None:
            raise RuntimeError(f"the observer process failed (exit code {watch.exitcode})")
    share = max(1, puts // writers)
    procs = [ctx.Process(target=writer, args=(str(folder / f"host{w}" if url else shared_dir), url,
                                               w, share, go, acks_queue)) for w in range(writers)]
    for proc in procs:
        proc.start()
    _collect(acks_queue, procs, len(procs))  # every writer warmed up
    postmaster = server_pid(url)
    go.set()
    started, busy_started, server_started = time.time(), machine_busy_s(), server_cpu_s(postmaster)
    reports = _collect(acks_queue, procs, len(procs))
    busy, server = machine_busy_s() - busy_started, server_cpu_s(postmaster) - server_started
    for proc in procs:
        proc.join(60)
    time.sleep(0.5)
    stop.set()
    watched = _collect(seen_queue, [watch], 1)[0]
    watch.join(60)
    return _summarize(reports, watched, started, busy, server)


def _collect(results: Any, procs: list[Any], count: int) -> list[Any]:
    """``count`` results, failing at once (not after a long timeout) when a process died."""
    import queue

    collected: list[Any] = []
    while len(collected) < count:
        try:
            collected.append(results.get(timeout=1.0))
        except queue.Empty:
            failed = [proc.exitcode for proc in procs if proc.exitcode not in (None, 0)]
            if failed:
                for proc in procs:
                    proc.kill()
                raise RuntimeError(f"a benchmark process failed (exit codes {failed})") from None
    return collected


def _prepare_store(data_dir: Path, url: str | None) -> None:
    """Create the store (and the shared schema) before any timed process opens it."""
    from memoree.service.service import Service

    _use_log(url)
    service = Service(data_dir)
    service.engine
    service.close()
    _use_log(None)


def _summarize(reports: list[dict[str, Any]], watched: dict[str, Any], started: float,
               busy_s: float, server_s: float) -> dict[str, float]:
    acks = [ack for report in reports for ack in report["acks"]]
    seen = watched["seen"]
    finished = max(report["finished"] for report in reports)
    puts = max(1, len(acks))
    lags = [(seen[seq] - acked) * 1000 for seq, acked in acks if seq in seen]
    holds = [ms for report in reports for ms in report.get("lock_ms", [])]
    commits = [ms for report in reports for ms in report.get("commit_ms", [])]
    return {"rate": rate(len(acks), finished - started), "p50": percentile(lags, 50),
            "p95": percentile(lags, 95), "p99": percentile(lags, 99), "missed": len(acks) - len(lags),
            "lock_p50": percentile(holds, 50), "lock_p99": percentile(holds, 99),
            "commit_p50": percentile(commits, 50),
            "guessed": sum(r.get("guesses", [0, 0])[0] for r in reports) / puts,
            "missed_guesses": sum(r.get("guesses", [0, 0])[1] for r in reports) / puts,
            "writer_cpu_ms": sum(r["cpu_s"] for r in reports) * 1000 / puts,
            "observer_cpu_ms": watched["cpu_s"] * 1000 / puts,
            "machine_cpu_ms": busy_s * 1000 / puts, "server_cpu_ms": server_s * 1000 / puts, "cores": busy_s / max(finished - started, 1e-9)}


def admin_url(explicit: str | None) -> str | None:
    return explicit or os.environ.get("MEMOREE_BENCH_PG_URL") or os.environ.get("MEMOREE_TEST_PG_URL")


def create_database(admin: str) -> str:
    import psycopg

    name = f"memoree_bench_{secrets.token_hex(4)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(admin)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


def drop_database(admin: str, url: str) -> None:
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def wal_flush_ms(url: str, samples: int = 50) -> float:
    """PostgreSQL's commit of a one-row write (its WAL flush) beyond a read's round trip, p50 in
    ms: what the lock hold of a one-statement append, measured by the server's clock up to its
    last row, leaves out."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_flush_probe (n int)")
        reads, writes = [], []
        for _ in range(samples):
            started = time.perf_counter()
            conn.execute("SELECT 1")
            reads.append(time.perf_counter() - started)
            started = time.perf_counter()
            conn.execute("INSERT INTO bench_flush_probe VALUES (1)")
            writes.append(time.perf_counter() - started)
    return max(0.0, percentile(writes, 50) - percentile(reads, 50)) * 1000


def measure(admin: str, writers: int, puts: int) -> tuple[dict[str, float], dict[str, float]]:
    """``(postgresql, sqlite)`` results for one writer count, each on a fresh store."""
    url = create_database(admin)
    try:
        with tempfile.TemporaryDirectory(prefix="memoree-scaleout-") as tmp:
            pg = run_case(Path(tmp), url, writers, puts)
        pg["flush_p50"] = wal_flush_ms(url)
    finally:
        drop_database(admin, url)
    with tempfile.TemporaryDirectory(prefix="memoree-scaleout-") as tmp:
        lite = run_case(Path(tmp), None, writers, puts)
    return pg, lite


def rows_for(writers: int, pg: dict[str, float], lite: dict[str, float],
             one_host: dict[str, float] | None) -> list[Row]:
    plural = "writer" if writers == 1 else "writers"
    rows = [
        Row(f"artifact.put/s, {writers} {plural}", pg["rate"], lite["rate"], "/s", "SQLite"),
        Row(f"catch-up lag p50 ms, {writers} {plural}", pg["p50"], lite["p50"], "ms", "SQLite", False),
        Row(f"catch-up lag p99 ms, {writers} {plural}", pg["p99"], lite["p99"], "ms", "SQLite", False),
    ]
    if one_host is not None and writers > 1:
        rows.append(Row(f"PostgreSQL puts/s, {writers} hosts vs 1", pg["rate"], one_host["rate"], "/s", "1 host"))
    print(f"{writers} {plural}: append lock held p50 {pg['lock_p50']:.2f} ms, p99 {pg['lock_p99']:.2f} ms "
          f"per write transaction (PostgreSQL's commit under it: p50 {pg['commit_p50']:.2f} ms); "
          f"lag p95 {pg['p95']:.2f} ms; {pg['missed']:.0f} acks unseen; appended in one statement: "
          f"{pg['guessed'] - pg['missed_guesses']:.0%} of puts ({pg['missed_guesses']:.0%} of puts "
          f"missed a try); WAL flush of a one-row commit p50 {pg.get('flush_p50', float('nan')):.2f} ms")
    for name, case in (("PostgreSQL", pg), ("SQLite", lite)):
        server = "" if case["server_cpu_ms"] != case["server_cpu_ms"] else \
            f", PostgreSQL server {case['server_cpu_ms']:.2f} ms"
        print(f"  {name}, CPU per put: writers {case['writer_cpu_ms']:.2f} ms, observer "
              f"{case['observer_cpu_ms']:.2f} ms{server}, whole machine {case['machine_cpu_ms']:.2f} ms "
              f"({case['cores']:.2f} cores busy, other sessions' work included)")
    return rows


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--puts", type=int, default=800, help="puts per case, shared by the writers")
    parser.add_argument("--pg-url", default=None, help="PostgreSQL admin URL (creates and drops a database)")
    parser.add_argument("--writers", default=",".join(map(str, WRITERS)), help="writer counts, e.g. 1,2,4")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat every writer count this many times, interleaved, and report "
                             "medians (on a shared machine the load moves between cases)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a smoke run")
    args = parser.parse_args(argv)
    admin = admin_url(args.pg_url)
    if admin is None:
        print("scaleout bench needs PostgreSQL: pass --pg-url or set MEMOREE_BENCH_PG_URL", file=sys.stderr)
        raise SystemExit(2)
    puts = min(args.puts, 40) if args.quick else args.puts
    counts = [int(w) for w in args.writers.split(",")]
    runs: dict[int, list[tuple[dict[str, float], dict[str, float]]]] = {w: [] for w in counts}
    for round_number in range(1, max(1, args.rounds) + 1):
        for writers in counts:
            pg, lite = measure(admin, writers, puts)
            runs[writers].append((pg, lite))
            if args.rounds > 1:
                print(f"round {round_number}, {writers} writer(s): PostgreSQL {pg['rate']:.0f} /s, "
                      f"SQLite {lite['rate']:.0f} /s, lag p99 {pg['p99']:.1f} ms, "
                      f"lock p50 {pg['lock_p50']:.2f} ms (load average {os.getloadavg()[0]:.1f})")
    rows: list[Row] = []
    one_host = _medians([pg for pg, _ in runs[1]]) if 1 in runs else None
    for writers in counts:
        pg, lite = _medians([pg for pg, _ in runs[writers]]), _medians([lite for _, lite in runs[writers]])
        rows += rows_for(writers, pg, lite, one_host)
        if args.rounds > 1 and one_host is not None and writers > 1:
            ratios = [n["rate"] / one["rate"] for (n, _), (one, _) in zip(runs[writers], runs[1], strict=True)]
            print(f"  {writers} hosts vs 1, each round: " + ", ".join(f"{r:.2f}x" for r in ratios))
    print_table(rows)
    return rows


def _medians(cases: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over the rounds (one round: the figures themselves)."""
    import statistics

    return {key: statistics.median(case[key] for case in cases) for key in cases[0]}


if __name__ == "__main__":
    main()
