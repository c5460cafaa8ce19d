"""emem recall over HTTP on loopback: warm and cold (materializing) ``POST /v1/recall``.

    python -m tools.bench.recall [--n 300] [--cold 100] [--quick]

Both servers run in their own process and are served the same way (uvicorn on a thread over a
pre-bound 127.0.0.1 socket, ``memoree.daemon.rest_host.HttpFront``): the daemon (``memoree serve
--http 127.0.0.1:0``) and, as the baseline, a bare ASGI app that drains the body and returns a
constant JSON document. The client keeps one HTTP/1.1 connection per server and times each
request. Rows (lower is better): warm recall p50 and p99 (three facts, one signed receipt, read
through the daemon's writer thread), and cold recall p50 (a fresh cell each time: three
built-in bands materialized, signed and appended in one fsynced transaction).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memoree.client.transport import Endpoint, probe
from memoree.factplane.emem import cell64
from tools.bench.common import Row, percentile, print_table

BANDS = ["cell.lat_deg", "cell.lng_deg", "cell.area_m2"]
WARM_CELL = "defi.zb493.xuqA.zcb5f"
CONSTANT = json.dumps({"facts": [], "receipt": {}, "materialize_notes": []}).encode()


async def constant_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The baseline: a bare ASGI endpoint that returns a constant."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(CONSTANT)).encode())]})
    await send({"type": "http.response.body", "body": CONSTANT})


def serve_constant() -> None:
    """Child process: serve the constant app on 127.0.0.1:0, print the URL, run until killed."""
    from memoree.daemon.rest_host import HttpFront

    front = HttpFront.serve(constant_app, "127.0.0.1", 0)
    print(front.url, flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    front.stop()


def start_daemon(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    sock = folder / "run" / "bench.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")}
    proc = subprocess.Popen([sys.executable, "-m", "memoree", "serve", "--listen", f"unix://{sock}",
                             "--http", "127.0.0.1:0", "--data-dir", str(folder / "data")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        report = probe(Endpoint("unix", str(sock)))
        if report is not None:
            return proc, report["http_endpoint"]
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError("the benchmark daemon did not start")
        time.sleep(0.05)


def start_constant() -> tuple[subprocess.Popen[bytes], str]:
    # The child blocks SIGTERM/SIGINT before uvicorn's thread starts, then waits for one.
    proc = subprocess.Popen([sys.executable, "-c",
                             "import signal; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT}); "
                             "from tools.bench.recall import serve_constant; serve_constant()"],
                            stdout=subprocess.PIPE, cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None
    return proc, proc.stdout.readline().decode().strip()


def timed_posts(url: str, bodies: list[bytes]) -> list[float]:
    """Milliseconds per POST /v1/recall over one kept-alive connection."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    samples = []
    try:
        for body in bodies:
            started = time.perf_counter()
            conn.request("POST", "/v1/recall", body, {"content-type": "application/json"})
            response = conn.getresponse()
            content = response.read()
            samples.append((time.perf_counter() - started) * 1000.0)
            if response.status != 200:
                raise RuntimeError(f"recall failed: {response.status} {content[:300]!r}")
    finally:
        conn.close()
    return samples


def recall_body(cell: str) -> bytes:
    return json.dumps({"cell": cell, "bands": BANDS}).encode()


def fresh_cells(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [cell64.encode(rng.uniform(-60, 60), rng.uniform(-180, 180)) for _ in range(count)]


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="warm recalls (and baseline requests)")
    parser.add_argument("--cold", type=int, default=100, help="cold recalls, one fresh cell each")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.cold = 20, 5
    with tempfile.TemporaryDirectory() as tmp:
        daemon, daemon_url = start_daemon(Path(tmp))
        constant, constant_url = start_constant()
        try:
            timed_posts(daemon_url, [recall_body(WARM_CELL)] * 3)  # materialize, then warm up
            timed_posts(constant_url, [recall_body(WARM_CELL)] * 3)
            warm = timed_posts(daemon_url, [recall_body(WARM_CELL)] * args.n)
            cold = timed_posts(daemon_url, [recall_body(cell) for cell in fresh_cells(args.cold)])
            base = timed_posts(constant_url, [recall_body(WARM_CELL)] * args.n)
        finally:
            stop(daemon)
            stop(constant)
    rows = [
        Row("warm recall p50, HTTP loopback (3 facts)", percentile(warm, 50), percentile(base, 50), "ms", "constant ASGI", False),
        Row("warm recall p99, HTTP loopback (3 facts)", percentile(warm, 99), percentile(base, 99), "ms", "constant ASGI", False),
        Row("cold recall p50, 3 bands materialized", percentile(cold, 50), percentile(base, 50), "ms", "constant ASGI", False),
    ]
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
