"""Two real daemons (separate data dirs and sockets) sharing one PostgreSQL log.

Skipped, with the reason, when no server is reachable through ``MEMOREE_TEST_PG_URL``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoree.client.transport import Endpoint, TransportFailure, exchange, probe
from memoree.eventlog.keys import KeyRing
from memoree.eventlog.postgres import PostgresEventStore
from memoree.eventlog.store import first_chain_break
from tests.pgsupport import fresh_database

CTX = {"workspace_id": "wsp_s", "project_id": "prj_s"}
DEADLINE_S = 30.0


class Host:
    """One ``memoree serve`` process following the shared log."""

    def __init__(self, root: Path, name: str, url: str) -> None:
        self.name, self.url = name, url
        self.data_dir = root / name / "data"
        self.socket = root / name / "run" / "d.sock"
        self.log_path = root / f"{name}.log"
        self.endpoint = Endpoint("unix", str(self.socket))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Host:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")}
        env["MEMOREE_LOG_URL"] = self.url
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "memoree", "serve", "--listen", f"unix://{self.socket}",
                 "--data-dir", str(self.data_dir)], stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + DEADLINE_S
        while probe(self.endpoint) is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.name} did not start: {self.log_path.read_text()[-2000:]}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(15)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(15)

    def call(self, op: str, payload: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        document: dict[str, Any] = {"v": 1, "request_id": f"req_{self.name}", "op": op,
                                    "input": payload, "context": CTX}
        if key is not None:
            document["idempotency_key"] = key
        return json.loads(exchange(self.endpoint, json.dumps(document).encode()))

    def ok(self, op: str, payload: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        envelope = self.call(op, payload, key)
        assert envelope["ok"], envelope
        return envelope

    def eventually(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The first successful answer (the host may still be catching up)."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            envelope = self.call(op, payload)
            if envelope["ok"] or time.monotonic() > deadline:
                assert envelope["ok"], envelope
                return envelope
            time.sleep(0.05)


def put(text: str) -> dict[str, Any]:
    return {"kind": "note", "title": text[:20], "content": {"type": "text", "data": text}}


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[tuple[Host, Host]]:
    """Hosts A and B on one fresh database; B holds A's node key, as an operator would copy it."""
    with fresh_database() as url:
        a, b = Host(tmp_path, "a", url), Host(tmp_path, "b", url)
        KeyRing(a.data_dir / "keys").current()
        shutil.copytree(a.data_dir / "keys", b.data_dir / "keys")
        try:
            yield a.start(), b.start()
        finally:
            a.stop()
            b.stop()


def shared_log(url: str) -> list[Any]:
    store = PostgresEventStore(url)
    try:
        assert first_chain_break(store.read_raw()) is None
        return list(store.read())
    finally:
        store.close()


class TestTwoHosts:
    """Writes made through one host are served, checked and conflicted on the other."""

    def test_writes_through_a_are_found_on_b(self, hosts: tuple[Host, Host]) -> None:
        """Artifacts, claims and search results written through A are read back through B."""
        a, b = hosts
        art = a.ok("artifact.put", put("the shared log keeps every host honest"), key="p1")
        artifact = art["result"]
        claim = a.ok("claim.assert", {"claim_type": "fact", "statement": "hosts share one log",
                                      "evidence": [{"artifact_id": artifact["artifact_id"],
                                                    "revision_id": artifact["revision_id"],
                                                    "start_byte": 0, "end_byte": 14}]}, key="c1")
        got = b.eventually("artifact.get", {"artifact_id": artifact["artifact_id"]})
        assert artifact["revision_id"] == got["result"]["revision_id"]
        assert "hosts share one log" == b.eventually(
            "claim.get", {"claim_id": claim["result"]["claim_id"]})["result"]["statement"]
        found = b.ok("search", {"query": "honest", "min_commit_seq": claim["commit_seq"]})
        assert artifact["artifact_id"] in json.dumps(found["result"])

    def test_stale_revision_on_b_conflicts_and_retries_replay(self, hosts: tuple[Host, Host]) -> None:
        """B decides against the shared head: A's stale revision conflicts, A's key replays on B."""
        a, b = hosts
        first = a.ok("artifact.put", put("version one"), key="p1")["result"]
        a.ok("artifact.revise", {"artifact_id": first["artifact_id"], "if_revision": first["revision_id"],
                                 "content": {"type": "text", "data": "version two"}}, key="r1")
        stale = b.call("artifact.revise", {"artifact_id": first["artifact_id"],
                                           "if_revision": first["revision_id"],
                                           "content": {"type": "text", "data": "version three"}}, key="r2")
        assert "REVISION_CONFLICT" == stale["error"]["code"]
        retry = b.ok("artifact.put", put("version one"), key="p1")
        assert (1, False) == (retry["commit_seq"], retry["result"]["created"])

    def test_four_writers_over_two_hosts_make_one_dense_log(self, hosts: tuple[Host, Host]) -> None:
        """Two writers per host: every acknowledged write is in one dense, chained log, once."""
        a, b = hosts
        acked: list[tuple[str, int]] = []
        lock = threading.Lock()

        def writer(host: Host, w: int) -> None:
            for i in range(40):
                envelope = host.ok("artifact.put", put(f"writer {w} note {i}"), key=f"w{w}-{i}")
                with lock:
                    acked.append((f"w{w}-{i}", envelope["commit_seq"]))

        threads = [threading.Thread(target=writer, args=(host, w))
                   for w, host in enumerate([a, a, b, b])]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        events = shared_log(a.url)
        assert list(range(1, len(events) + 1)) == [e.commit_seq for e in events]
        by_seq = {e.commit_seq: e.idempotency_key for e in events}
        assert 160 == len(acked) == len({seq for _, seq in acked})
        assert all(by_seq[seq].endswith(key) for key, seq in acked)
        for host in (a, b):
            report = host.ok("verify", {})["result"]
            assert report["ok"], report["issues"]

    def test_sigkill_loses_nothing_acknowledged_and_restart_catches_up(self, hosts: tuple[Host, Host]) -> None:
        """B is killed mid-burst; its acknowledged writes are in the log; restarted, it catches up."""
        a, b = hosts
        acked: list[tuple[str, int]] = []
        stop = threading.Event()

        def burst(host: Host, w: int) -> None:
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    envelope = host.call("artifact.put", put(f"burst {w} {i}"), key=f"b{w}-{i}")
                except TransportFailure:
                    return
                if envelope.get("ok"):
                    acked.append((envelope["result"]["artifact_id"], envelope["commit_seq"]))

        threads = [threading.Thread(target=burst, args=(host, w)) for w, host in enumerate([b, b, a])]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        b.kill()
        time.sleep(0.3)
        stop.set()
        for thread in threads:
            thread.join(30)
        logged = {e.commit_seq for e in shared_log(a.url)}
        assert acked and {seq for _, seq in acked} <= logged
        b.start()
        head = max(logged)
        for artifact_id, seq in acked:
            got = b.eventually("artifact.get", {"artifact_id": artifact_id, "include_content": False})
            assert seq == got["result"]["revision_commit_seq"]
        assert probe(b.endpoint)["last_commit_seq"] >= head
        report = b.ok("verify", {})["result"]
        assert report["ok"], report["issues"]
