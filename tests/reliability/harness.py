"""Shared machinery of the reliability suite: real daemons, requests, acknowledgements, images.

``DaemonProcess`` starts a real daemon (``memoree serve``, or ``serve_child.py`` when a test needs
another ``synchronous`` setting or the fault shim) and always stops it; ``Ledger`` records what
the daemon acknowledged; ``lost_acknowledgements`` reopens a data dir in-process and names every
acknowledged write that is missing or differs; ``reconstruct`` builds the data dir a power cut
would leave behind from the shim's durable images.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoree.client.transport import Endpoint, exchange, probe

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVE_CHILD = Path(__file__).with_name("serve_child.py")
CTX = {"workspace_id": "wsp_rel", "project_id": "prj_rel"}
ERROR_CODES = frozenset({
    "NO_AMBIENT_CONTEXT", "INVALID_REQUEST", "NOT_FOUND", "CITATION_ERROR", "REVISION_CONFLICT",
    "IDEMPOTENCY_CONFLICT", "INDEX_NOT_READY", "SCOPE_VIOLATION", "CONFIG_ERROR", "CONTENT_TOO_LARGE",
    "INTEGRITY_ERROR", "UNSUPPORTED_VERSION", "TRANSPORT_ERROR", "REASONER_ERROR", "INTERNAL_ERROR",
})


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without any MEMOREE_* setting, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMOREE_", "FAULTSHIM_")) and k != "LD_PRELOAD"}
    env.update(extra)
    return env


def request(op: str, payload: dict[str, Any] | None = None, *, key: str | None = None,
            context: dict[str, Any] | None = CTX, request_id: str = "req_rel") -> dict[str, Any]:
    document: dict[str, Any] = {"v": 1, "request_id": request_id, "op": op,
                                "input": payload if payload is not None else {}}
    if key is not None:
        document["idempotency_key"] = key
    if context is not None:
        document["context"] = context
    return document


def content_of(index: int, *, large_every: int = 0) -> dict[str, str]:
    """A deterministic, varied artifact content: text, binary (base64) or a large external blob."""
    if large_every and index % large_every == 0:
        return {"type": "text", "data": f"large {index} " + "ő" * 9000}
    if index % 5 == 3:
        raw = bytes((index * 7 + i * 13) % 256 for i in range(300 + index % 200))
        return {"type": "base64", "data": base64.b64encode(raw).decode()}
    return {"type": "text", "data": f"note {index}: the Ångström payload ✓ {index * 31}"}


def put_request(key: str, index: int, *, large_every: int = 0, context: dict[str, Any] | None = CTX) -> dict[str, Any]:
    return request("artifact.put", {"kind": "note", "title": f"note {index}", "content": content_of(index, large_every=large_every)},
                   key=key, context=context, request_id=f"req_{key}")


def content_bytes(content: dict[str, str]) -> bytes:
    return base64.b64decode(content["data"]) if content["type"] == "base64" else content["data"].encode("utf-8")


# ---------------------------------------------------------------- daemons


class DaemonProcess:
    """One daemon child on a Unix socket; ``stop`` (also at test teardown) always reaps it."""

    def __init__(self, data_dir: Path, socket_path: Path, *, synchronous: str | None = None,
                 preload: Path | None = None, env: dict[str, str] | None = None, umask: int = -1) -> None:
        self.data_dir, self.socket_path, self.umask = data_dir, socket_path, umask
        self.endpoint = Endpoint("unix", str(socket_path))
        self.synchronous, self.preload, self.extra_env = synchronous, preload, env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}.daemon.log"

    def command(self) -> list[str]:
        if self.synchronous is None and self.preload is None:
            return [sys.executable, "-m", "memoree", "serve", "--listen", str(self.endpoint), "--data-dir", str(self.data_dir)]
        return [sys.executable, str(SERVE_CHILD), str(self.data_dir), str(self.endpoint), self.synchronous or "FULL"]

    def start(self, *, wait: bool = True) -> DaemonProcess:
        env = clean_env(**self.extra_env)
        if self.preload is not None:
            env["LD_PRELOAD"] = str(self.preload)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT,
                                         umask=self.umask)
        if wait:
            self.wait_ready()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            report = probe(self.endpoint)
            if report is not None and report.get("daemon_pid") == self.pid:
                return report
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}: {self.log_tail()}")
            time.sleep(0.02)
        raise AssertionError(f"daemon did not answer within {timeout} s: {self.log_tail()}")

    def log_tail(self, size: int = 3000) -> str:
        try:
            return self.log_path.read_bytes()[-size:].decode("utf-8", "replace")
        except OSError:
            return ""

    def kill9(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        """SIGTERM and wait; SIGKILL when it does not stop in time."""
        if not self.alive():
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.kill9()

    def call(self, document: dict[str, Any], *, timeout: float = 60.0) -> dict[str, Any]:
        return json.loads(exchange(self.endpoint, json.dumps(document).encode(), io_timeout=timeout))

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS in /proc status")


def raw_connect(path: Path, timeout: float = 10.0) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect(str(path))
    return sock


def closed_without_response(sock: socket.socket) -> bool:
    try:
        return b"" == sock.recv(16)
    except (ConnectionResetError, BrokenPipeError):
        return True


# ---------------------------------------------------------------- acknowledgements


@dataclass
class Ack:
    key: str
    request: dict[str, Any]
    commit_seq: int
    artifact_id: str | None = None
    revision_id: str | None = None


@dataclass
class Ledger:
    """Every acknowledged mutation, by idempotency key; a thread-safe record."""

    acks: dict[str, Ack] = field(default_factory=dict)
    replays: int = 0
    duplicates: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, key: str, document: dict[str, Any], envelope: dict[str, Any]) -> None:
        result = envelope["result"]
        ack = Ack(key, document, envelope["commit_seq"])
        if document["op"] in ("artifact.put", "artifact.revise"):
            ack.artifact_id, ack.revision_id = result["artifact_id"], result["revision_id"]
        with self.lock:
            earlier = self.acks.get(key)
            if earlier is not None:
                self.replays += 1
                if (earlier.artifact_id, earlier.commit_seq) != (ack.artifact_id, ack.commit_seq):
                    self.duplicates.append(key)
                return
            if not result.get("created", True):
                self.replays += 1
            self.acks[key] = ack

    def copy(self) -> Ledger:
        with self.lock:
            return Ledger(acks=dict(self.acks))


@contextlib.contextmanager
def open_service(data_dir: Path) -> Iterator[Any]:
    from memoree.service.service import Service

    service = Service(data_dir)
    try:
        yield service
    finally:
        service.close()


def handle(service: Any, document: dict[str, Any]) -> dict[str, Any]:
    return json.loads(service.handle_bytes(json.dumps(document).encode()).body)


def lost_acknowledgements(service: Any, ledger: Ledger) -> list[str]:
    """Keys whose acknowledged event is missing or moved, or whose artifact revision has other bytes."""
    conn = service.engine.conn
    lost = []
    for key, ack in sorted(ledger.acks.items()):
        row = conn.execute("SELECT idempotency_key FROM events WHERE commit_seq = ?", (ack.commit_seq,)).fetchone()
        if row is None or not str(row[0]).endswith(":" + key):
            lost.append(key)
            continue
        if ack.artifact_id is None:
            continue
        got = handle(service, request("artifact.get", {"artifact_id": ack.artifact_id, "revision_id": ack.revision_id},
                                      context=None))
        if not got.get("ok") or got["result"]["revision_commit_seq"] != ack.commit_seq \
                or content_bytes(got["result"]["content"]) != content_bytes(ack.request["input"]["content"]):
            lost.append(key)
    return lost


def log_shape(service: Any) -> dict[str, Any]:
    """Event count, head, and how many artifact.created events each idempotency key has."""
    conn = service.engine.conn
    count, head = conn.execute("SELECT count(*), coalesce(max(commit_seq), 0) FROM events").fetchone()
    dense = conn.execute("SELECT count(*) FROM events e WHERE commit_seq > 1 AND NOT EXISTS "
                         "(SELECT 1 FROM events p WHERE p.commit_seq = e.commit_seq - 1)").fetchone()[0] == 0
    repeated = conn.execute("SELECT count(*) FROM (SELECT idempotency_key FROM events WHERE idempotency_key IS NOT NULL "
                            "GROUP BY idempotency_key HAVING count(*) > 1)").fetchone()[0]
    return {"count": count, "head": head, "dense": dense and count == head, "repeated_keys": repeated}


def verify_clean(service: Any) -> dict[str, Any]:
    from memoree.admin import verify as audit

    report = audit.verify(service.engine)
    assert report["ok"], report["issues"][:5]
    return report


# ---------------------------------------------------------------- power-cut images

SKIPPED_ON_POWER_LOSS = ("-shm",)


def seed_images(data_dir: Path, shadow_dir: Path) -> None:
    """Record the data dir's current files as durable (they are, at the start of a round)."""
    shadow_dir.mkdir(parents=True, exist_ok=True)
    for path in data_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            shutil.copyfile(path, shadow_dir / f"{st.st_dev}-{st.st_ino}")


def reconstruct(data_dir: Path, shadow_dir: Path, target: Path) -> dict[str, int]:
    """Build ``target`` as a power cut would leave ``data_dir``: each file's last synced image."""
    kept = lost = 0
    target.mkdir(mode=0o700, parents=True)
    for path in sorted(data_dir.rglob("*")):
        relative = path.relative_to(data_dir)
        if path.is_dir() and not path.is_symlink():
            (target / relative).mkdir(mode=stat.S_IMODE(path.stat().st_mode), parents=True, exist_ok=True)
            continue
        if not path.is_file() or path.name.endswith(SKIPPED_ON_POWER_LOSS):
            continue
        st = path.stat()
        image = shadow_dir / f"{st.st_dev}-{st.st_ino}"
        if not image.exists():
            lost += 1
            continue
        (target / relative).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copyfile(image, target / relative)
        os.chmod(target / relative, stat.S_IMODE(st.st_mode))
        kept += 1
    return {"files_kept": kept, "files_lost": lost}
