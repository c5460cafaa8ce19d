"""``memoree call`` through a warm daemon, and mutation throughput through the daemon.

    python -m tools.bench.daemon [--n 2000] [--calls 20] [--quick]

Rows: ``memoree call capabilities`` and a ``memoree call`` put through a warm daemon vs
``python3 -c pass``; the in-process fallback (``--in-process``) vs the same; sequential and
4-client durable ``artifact.put`` through the daemon (persistent clients reusing nothing but the
socket path, one connection per request, as the protocol prescribes) vs the in-process service.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from memoree.client.transport import Endpoint, exchange, probe
from tools.bench.common import Row, print_table, rate, timed
from tools.bench.put import TEXT, command_seconds, service_put_rate, texts

CTX = {"workspace_id": "wsp_bench", "project_id": "prj_bench"}


def request(i: int, prefix: str) -> bytes:
    return json.dumps({"v": 1, "request_id": f"r{i}", "op": "artifact.put", "idempotency_key": f"{prefix}{i}",
                       "context": CTX, "input": {"kind": "note", "title": f"n{i}",
                                                 "content": {"type": "text", "data": TEXT}}}).encode()


def daemon_put_rate(endpoint: Endpoint, n: int, clients: int, prefix: str) -> float:
    per_client = n // clients

    def client(c: int) -> None:
        for i in range(per_client):
            body = exchange(endpoint, request(i, f"{prefix}{c}-"))
            assert b'"ok":true' in body[:200], body[:300]

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]

    def run() -> None:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    return rate(per_client * clients, timed(run))


def start_daemon(folder: Path) -> tuple[subprocess.Popen[bytes], Endpoint]:
    sock = folder / "run" / "bench.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")}
    proc = subprocess.Popen([sys.executable, "-m", "memoree", "serve", "--listen", f"unix://{sock}",
                             "--data-dir", str(folder / "daemon-data")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = Endpoint("unix", str(sock))
    deadline = time.monotonic() + 30
    while probe(endpoint) is None:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError("the benchmark daemon did not start")
        time.sleep(0.05)
    return proc, endpoint


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="puts per throughput measurement")
    parser.add_argument("--calls", type=int, default=20, help="process starts per call measurement")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.calls = 40, 2
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
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
            sequential = daemon_put_rate(endpoint, args.n, 1, "seq")
            four = daemon_put_rate(endpoint, args.n, 4, "four")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        in_process = service_put_rate(folder, texts(args.n))
    rows = [
        Row("memoree call capabilities, warm daemon", warm_caps * 1000, baseline * 1000, "ms", "python -c pass", False),
        Row("memoree call artifact.put, warm daemon", warm_put * 1000, baseline * 1000, "ms", "python -c pass", False),
        Row("memoree call capabilities, --in-process", inproc_caps * 1000, baseline * 1000, "ms", "python -c pass", False),
        Row("daemon put, 1 client (puts/s)", sequential, in_process, "/s", "in-process put"),
        Row("daemon put, 4 clients, group commit (puts/s)", four, sequential, "/s", "daemon, 1 client"),
    ]
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
