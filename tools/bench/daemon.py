"""``memoree call`` through a warm daemon, and mutation throughput through the daemon.

    python -m tools.bench.daemon [--n 2000] [--calls 20] [--store 3000] [--quick]
    python -m tools.bench.daemon --model [--n 2000] [--store 3000] [--rounds 4]

Rows: ``memoree call capabilities`` and a ``memoree call`` put through a warm daemon vs
``python3 -c pass``; the in-process fallback (``--in-process``) vs the same; and durable
``artifact.put`` through the daemon as users see it: varied 1 KiB texts (the search benchmark's
Zipf words) into a store that already holds ``--store`` of them, each client a separate process
opening one connection per request (as the protocol prescribes). One client is compared with raw
SQLite (WAL, ``synchronous=FULL``) inserting the same texts with an FTS5 row, one per
transaction; four clients with one. The row with the old bench's text (one sentence repeated, into
an empty store) shows what that text hid: it indexes almost nothing new. Each throughput row also
reports the daemon's CPU per put (from /proc), so a loaded machine's slow fsync shows as a gap
between CPU and wall time rather than as a mystery, and that CPU by daemon thread (the kernel's
thread names: ``io`` is the listener's loop, then the writer, the syncer, the checkpointer; the
embedding worker process that the writer's vectors catch-up hands its texts to counts as the
daemon's too) beside the client processes' own. The one-client row is also compared with the same puts made in this
process (``Service.handle_bytes``: the same requests, texts and store size, no socket, no thread
hand-off), which is what the daemon adds; the store's vectors are caught up before the timed puts
on both sides. It also prints how the writer grouped the four clients' puts (requests per group,
from the daemon's ``daemon_stopped`` diagnostic), the writer's CPU per grouped and per lone put,
and every core's busy time per put (machine-wide: on a shared machine other work counts too).

``--model`` compares the dense channel's cost through the daemon instead: two daemons, one with
the model off (``MEMOREE_SEMANTIC=off``) and one with it, each store prefilled with ``--store``
texts, then ``--rounds`` rounds of one-client puts (and one of four clients) on each in turn.
The daemon with the model embeds after the puts (its writer catches the vectors up when idle or
when the lag passes its bound): the bench waits until ``doctor`` reports no lag and prints the
daemon CPU spent catching up, per put, beside the CPU each put cost.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memoree.client.transport import Endpoint, exchange, probe
from memoree.service.service import Service
from tools.bench.common import Row, print_table, rate
from tools.bench.put import TEXT, command_seconds, raw_sqlite_rate, service_put_rate, texts
from tools.bench.search import make_corpus

CTX = {"workspace_id": "wsp_bench", "project_id": "prj_bench"}


def request(i: int, prefix: str, text: str = TEXT) -> bytes:
    return json.dumps({"v": 1, "request_id": f"r{i}", "op": "artifact.put", "idempotency_key": f"{prefix}{i}",
                       "context": CTX, "input": {"kind": "note", "title": f"n{i}",
                                                 "content": {"type": "text", "data": text}}}).encode()


def varied_texts(n: int, seed: int = 19) -> list[str]:
    """N different 1 KiB texts of Zipf-distributed words (what a user's notes look like to FTS5)."""
    return [(text + " " + text)[:1024] for text in make_corpus(n, seed=seed).texts]


def _client(endpoint: Endpoint, bodies: list[bytes], ready: object, go: object) -> None:
    ready.release()  # type: ignore[attr-defined]
    go.wait()  # type: ignore[attr-defined]
    for body in bodies:
        reply = exchange(endpoint, body)
        if b'"ok":true' not in reply[:200]:
            raise SystemExit(f"put failed: {reply[:300]!r}")


def daemon_cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds of each of the daemon's threads, summed by the name the kernel shows
    (``memoree.daemon.threadname``); the main thread, which runs the I/O loop, is ``io``."""
    seconds: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as comm, open(f"/proc/{pid}/task/{tid}/stat") as stat:
                name, fields = comm.read().strip(), stat.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        name = "io" if int(tid) == pid else name.removeprefix("memoree-")
        seconds[name] = seconds.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return seconds


def children_of(pid: int) -> list[int]:
    """The pids of a process's children (its readers and, while it runs, its embedding worker)."""
    found: list[int] = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(child) for child in children.read_text().split()]
        except OSError:  # the thread ended meanwhile
            continue
    return found


def is_embedding_worker(pid: int) -> bool:
    """Whether a child of the daemon is its embedding worker (``memoree.daemon.catchup``), not a reader."""
    try:
        return b"embed_worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def embedding_worker_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each of the daemon's embedding worker processes (the vectors' catch-up
    embeds there), by pid: its CPU is the daemon's too."""
    found: dict[int, float] = {}
    for child in filter(is_embedding_worker, children_of(pid)):
        try:
            found[child] = daemon_cpu_seconds(child)
        except OSError:  # it exited meanwhile
            continue
    return found


def _worker_seconds(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(spent - before.get(child, 0.0) for child, spent in after.items())


def machine_busy_seconds() -> float:
    """CPU seconds every core of this machine has spent busy since boot (``/proc/stat``: all but
    idle and I/O wait), whoever spent them: on a shared machine other work counts too."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def daemon_put_rate(endpoint: Endpoint, bodies: list[bytes], clients: int, daemon_pid: int,
                    breakdown: dict[str, float] | None = None) -> tuple[float, float]:
    """Puts/s with ``clients`` client processes sharing ``bodies``, and the daemon's CPU ms per put.
    ``breakdown``, when given, receives CPU ms per put for each daemon thread (by name), for the
    client processes (``clients``) and for the whole machine (``machine``: every core's busy
    time, the bench's own process and other work on the machine included)."""
    context = multiprocessing.get_context("fork")
    ready, go = context.Semaphore(0), context.Event()
    share = len(bodies) // clients
    workers = [context.Process(target=_client, args=(endpoint, bodies[c * share:(c + 1) * share], ready, go))
               for c in range(clients)]
    for worker in workers:
        worker.start()
    for _ in workers:
        ready.acquire()
    threads, children = thread_cpu_seconds(daemon_pid), resource.getrusage(resource.RUSAGE_CHILDREN)
    machine, embedding = machine_busy_seconds(), embedding_worker_cpu(daemon_pid)
    cpu, started = daemon_cpu_seconds(daemon_pid), time.perf_counter()
    go.set()
    for worker in workers:
        worker.join()
        if worker.exitcode:
            raise RuntimeError("a benchmark client failed")
    seconds, cpu = time.perf_counter() - started, daemon_cpu_seconds(daemon_pid) - cpu
    machine = machine_busy_seconds() - machine
    embedded = _worker_seconds(embedding, embedding_worker_cpu(daemon_pid))
    cpu += embedded
    puts = share * clients
    if breakdown is not None:
        breakdown["machine"] = machine / puts * 1000
        if embedded > 0:
            breakdown["embedding worker"] = embedded / puts * 1000
        for name, spent in thread_cpu_seconds(daemon_pid).items():
            if spent - threads.get(name, 0.0) > 0:
                breakdown[name] = (spent - threads.get(name, 0.0)) / puts * 1000
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        breakdown["clients"] = (after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime) / puts * 1000
    return rate(puts, seconds), cpu / puts * 1000


def in_process_put(folder: Path, stored: list[str], items: list[str]) -> tuple[float, float, float]:
    """The daemon rows' puts made in this process instead (``Service.handle_bytes``, the same
    requests, texts and store size): puts/s, thread CPU ms per put, and the CPU ms per put of
    the vectors' catch-up afterwards (the daemon does it on its writer while the puts run)."""
    service = Service(folder / "inproc-varied")
    for start in range(0, len(stored), 250):
        requests = [json.loads(request(start + i, "fill", text)) for i, text in enumerate(stored[start:start + 250])]
        reply = service.handle_bytes(json.dumps({"v": 1, "request_id": "fill", "op": "batch",
                                                 "input": {"requests": requests}}).encode())
        assert reply.ok, reply.body[:300]
    service.engine.catch_up_vectors()
    bodies = [request(i, "one", text) for i, text in enumerate(items)]
    cpu, started = time.thread_time(), time.perf_counter()
    for body in bodies:
        reply = service.handle_bytes(body)
        assert reply.ok, reply.body[:300]
    seconds, cpu = time.perf_counter() - started, time.thread_time() - cpu
    later = time.thread_time()
    service.engine.catch_up_vectors()
    later = time.thread_time() - later
    service.close()
    return rate(len(bodies), seconds), cpu / len(bodies) * 1000, later / len(bodies) * 1000


def prefill(endpoint: Endpoint, items: list[str]) -> None:
    """Fill the daemon's store through ``batch`` requests (fast, and outside any timing)."""
    for start in range(0, len(items), 250):
        requests = [json.loads(request(start + i, "fill", text)) for i, text in enumerate(items[start:start + 250])]
        reply = exchange(endpoint, json.dumps({"v": 1, "request_id": "fill", "op": "batch",
                                               "input": {"requests": requests}}).encode())
        assert b'"ok":true' in reply[:200], reply[:300]


def start_daemon(folder: Path, **settings: str) -> tuple[subprocess.Popen[bytes], Endpoint]:
    """A daemon on a store in ``folder``, with no MEMOREE_ setting but ``settings``."""
    sock = folder / "run" / "bench.sock"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")}, **settings}
    with open(folder / "daemon.log", "wb") as log:  # its diagnostics (``writer_groups`` reads them)
        proc = subprocess.Popen([sys.executable, "-m", "memoree", "serve", "--listen", f"unix://{sock}",
                                 "--data-dir", str(folder / "daemon-data")], env=env,
                                stdout=subprocess.DEVNULL, stderr=log)
    endpoint = Endpoint("unix", str(sock))
    deadline = time.monotonic() + 30
    while probe(endpoint) is None:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError("the benchmark daemon did not start")
        time.sleep(0.05)
    return proc, endpoint


def writer_groups(folder: Path) -> tuple[int, int] | None:
    """(groups, requests in them) the stopped daemon's writer committed over its life, from its
    ``daemon_stopped`` diagnostic; None when it wrote none (a daemon of an older tree)."""
    for line in (folder / "daemon.log").read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("event") == "daemon_stopped" and "groups" in record:
            return int(record["groups"]), int(record["grouped_requests"])
    return None


def vectors_lag(endpoint: Endpoint) -> int:
    """The vectors projection's lag behind the log, as the daemon's ``doctor`` reports it."""
    reply = json.loads(exchange(endpoint, json.dumps({"v": 1, "request_id": "d", "op": "doctor",
                                                      "input": {}}).encode()))
    return int(reply["result"]["semantic"].get("lag_events") or 0)


def wait_caught_up(endpoint: Endpoint, pid: int, timeout: float = 120.0) -> tuple[float, float]:
    """Wait until the daemon's vectors lag no more: (seconds waited, daemon CPU seconds meanwhile)."""
    cpu, started = daemon_cpu_seconds(pid), time.perf_counter()
    while vectors_lag(endpoint):
        if time.perf_counter() - started > timeout:
            raise RuntimeError("the daemon's vectors did not catch up")
        time.sleep(0.01)
    return time.perf_counter() - started, daemon_cpu_seconds(pid) - cpu


def model_cost(args: argparse.Namespace, items: list[str]) -> list[Row]:
    """``--model``: daemon puts with the model off and on, in turn (see the module docstring)."""
    per_round = max(1, args.n // args.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        daemons = {}
        for on in (False, True):
            folder = Path(tmp) / ("on" if on else "off")
            folder.mkdir()
            daemons[on] = start_daemon(folder, **({} if on else {"MEMOREE_SEMANTIC": "off"}))
        try:
            for on, (proc, endpoint) in daemons.items():
                prefill(endpoint, items[:args.store])
                wait_caught_up(endpoint, proc.pid)
            runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            later: dict[bool, float] = {False: 0.0, True: 0.0}
            fresh = iter(range(args.store, len(items)))
            for r in range(args.rounds):
                for on in (False, True) if r % 2 == 0 else (True, False):
                    proc, endpoint = daemons[on]
                    bodies = [request(i, f"m{r}-", items[next(fresh)]) for i in range(per_round)]
                    load = os.getloadavg()[0]
                    runs[on].append(daemon_put_rate(endpoint, bodies, 1, proc.pid))
                    _, cpu = wait_caught_up(endpoint, proc.pid)
                    later[on] += cpu
                    print(f"round {r + 1}, model {'on' if on else 'off'}: {runs[on][-1][0]:.0f} puts/s, daemon CPU "
                          f"{runs[on][-1][1]:.2f} ms per put, catch-up after {cpu / per_round * 1000:.3f} ms per put "
                          f"(load average {load:.2f})", flush=True)
            four = {}
            for on in (False, True):
                proc, endpoint = daemons[on]
                bodies = [request(i, "four", items[next(fresh)]) for i in range(per_round)]
                four[on] = daemon_put_rate(endpoint, bodies, 4, proc.pid)
                wait_caught_up(endpoint, proc.pid)
        finally:
            for proc, _ in daemons.values():
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
    best = {on: max(rate_ for rate_, _ in runs[on]) for on in runs}
    cpu_ms = {on: sum(c for _, c in runs[on]) / len(runs[on]) for on in runs}
    catch_up_ms = later[True] / (per_round * args.rounds) * 1000
    print(f"daemon CPU per put: {cpu_ms[True]:.2f} ms with the model, {cpu_ms[False]:.2f} ms without; the "
          f"vectors' catch-up after the puts, batched on the idle writer: {catch_up_ms:.3f} ms of daemon CPU per put")
    rows = [Row("daemon put, 1 client, best round (puts/s)", best[True], best[False], "/s", "model off"),
            Row("daemon put, 1 client, mean of rounds", sum(r for r, _ in runs[True]) / len(runs[True]),
                sum(r for r, _ in runs[False]) / len(runs[False]), "/s", "model off"),
            Row("daemon put, 4 clients (puts/s)", four[True][0], four[False][0], "/s", "model off"),
            Row("daemon CPU per put, incl. the later catch-up", cpu_ms[True] + catch_up_ms, cpu_ms[False], "ms",
                "model off", False)]
    print_table(rows)
    return rows


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="puts per throughput measurement")
    parser.add_argument("--calls", type=int, default=20, help="process starts per call measurement")
    parser.add_argument("--store", type=int, default=3000, help="artifacts in the store before the puts")
    parser.add_argument("--model", action="store_true",
                        help="only compare daemon puts with the embedding model off and on")
    parser.add_argument("--rounds", type=int, default=4, help="with --model: one-client rounds per side")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.calls, args.store = 40, 2, 20
    if args.model:
        return model_cost(args, varied_texts(args.store + 3 * args.n))
    items = varied_texts(args.store + 2 * args.n)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        raw_fts = raw_sqlite_rate(folder, items[args.store:args.store + args.n], with_fts=True)
        proc, endpoint = start_daemon(folder)
        try:
            env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")},
                   "MEMOREE_ENDPOINT": str(endpoint), "MEMOREE_CONTEXT": json.dumps(CTX),
                   "MEMOREE_DATA_DIR": str(folder / "inproc-data")}
            baseline = command_seconds([sys.executable, "-c", "pass"], args.calls)
            caps = json.dumps({"request_id": "c", "op": "capabilities", "input": {}}).encode()
            memoree = [sys.executable, "-m", "memoree", "call"]
            warm_caps = command_seconds(memoree, args.calls, caps, env)
            puts = [json.dumps({"request_id": "p", "op": "artifact.put", "idempotency_key": f"cli{i}",
                                "input": {"kind": "n", "title": "t", "content": {"type": "text", "data": TEXT}}}).encode()
                    for i in range(args.calls)]
            warm_put = sorted(command_seconds(memoree, 1, body, env) for body in puts)[args.calls // 2]
            command_seconds([*memoree, "--in-process"], 1, caps, env)
            inproc_caps = command_seconds([*memoree, "--in-process"], args.calls, caps, env)
            old_text, old_cpu = daemon_put_rate(endpoint, [request(i, "old", f"{i:08d} {TEXT}"[:1024])
                                                           for i in range(args.n)], 1, proc.pid)
            prefill(endpoint, items[:args.store])
            wait_caught_up(endpoint, proc.pid)
            one_threads: dict[str, float] = {}
            four_threads: dict[str, float] = {}
            one, one_cpu = daemon_put_rate(endpoint, [request(i, "one", text) for i, text in
                                                      enumerate(items[args.store:args.store + args.n])], 1,
                                           proc.pid, one_threads)
            four, four_cpu = daemon_put_rate(endpoint, [request(i, "four", text) for i, text in
                                                        enumerate(items[args.store + args.n:])], 4,
                                             proc.pid, four_threads)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        grouping = writer_groups(folder)
        in_process = service_put_rate(folder, texts(args.n))
        varied, varied_cpu, varied_later = in_process_put(folder, items[:args.store],
                                                          items[args.store:args.store + args.n])
        from tools.bench.peer import peer_rate_in_subprocess

        peer = peer_rate_in_subprocess(args.n)
    print(f"daemon CPU per put: {one_cpu:.2f} ms (1 client), {four_cpu:.2f} ms (4 clients), "
          f"{old_cpu:.2f} ms (old bench text, empty store); in-process put (old text) {in_process:.0f}/s")
    for label, threads in (("1 client", one_threads), ("4 clients", four_threads)):
        print(f"CPU ms per put by thread, {label}: " + ", ".join(
            f"{name} {spent:.3f}" for name, spent in sorted(threads.items(), key=lambda item: -item[1])
            if name != "machine"))
    if grouping is not None:
        # Every mutation before the 4-client run came alone (one client, the prefill's batches,
        # the `memoree call` puts), so the groups beyond one each are the 4 clients'.
        groups, requests = grouping
        four_puts = (args.n // 4) * 4
        four_groups = groups - (requests - four_puts)
        print(f"4 clients: {four_puts / max(1, four_groups):.2f} requests per group ({four_groups} groups); "
              f"writer CPU per put {four_threads.get('writer', 0.0):.3f} ms grouped, "
              f"{one_threads.get('writer', 0.0):.3f} ms lone (1 client)")
    print(f"machine CPU per put (every core, the load average {os.getloadavg()[0]:.2f} included): "
          f"{one_threads.get('machine', 0.0):.2f} ms (1 client), {four_threads.get('machine', 0.0):.2f} ms (4 clients)")
    print(f"in-process put of the same varied texts into a store of {args.store}: {varied:.0f}/s, "
          f"{varied_cpu:.2f} ms of CPU per put, then {varied_later:.3f} ms per put for the vectors' catch-up")
    rows = [
        Row("memoree call capabilities, warm daemon", warm_caps * 1000, baseline * 1000, "ms", "python -c pass", False),
        Row("memoree call artifact.put, warm daemon", warm_put * 1000, baseline * 1000, "ms", "python -c pass", False),
        Row("memoree call capabilities, --in-process", inproc_caps * 1000, baseline * 1000, "ms", "python -c pass", False),
        Row("daemon put, 1 client, varied texts (puts/s)", one, raw_fts, "/s", "raw SQLite + FTS5"),
        Row("daemon put, 1 client vs in-process, same texts and store", one, varied, "/s", "in-process put"),
        Row("daemon put, 4 clients, group commit (puts/s)", four, one, "/s", "daemon, 1 client"),
        Row("daemon put, 1 client, old text (puts/s)", old_text, one, "/s", "varied texts"),
    ]
    if peer is not None:  # pip install eventsourcing to measure it
        rows.append(Row("daemon put, 4 clients vs eventsourcing peer", four, peer, "/s", "eventsourcing"))
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
