"""The daemon client: endpoints, one framed exchange, and auto-starting the default daemon.

Standard library only: ``memoree call`` runs once per agent action, and every import here is
paid on each call. Failures are ``TransportFailure`` (TRANSPORT_ERROR, retryable) or
``ClientConfigError`` (CONFIG_ERROR: bad endpoint, version skew); the caller turns them into
envelopes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from memoree import __version__
from memoree.protocol.framing import FrameTooLarge, FrameTruncated, read_frame, write_frame

__all__ = [
    "ClientConfigError",
    "Endpoint",
    "TransportFailure",
    "autostart",
    "default_endpoint",
    "exchange",
    "probe",
    "request_via_daemon",
]

MAX_FRAME_BYTES = 24 * 1024 * 1024
CONNECT_TIMEOUT_S = 5.0
IO_TIMEOUT_S = 30.0
START_TIMEOUT_S = 30.0
POLL_INTERVAL_S = 0.05


class TransportFailure(Exception):
    """The daemon could not be reached or the exchange did not complete."""


class ClientConfigError(Exception):
    """A malformed endpoint, or a daemon of another version."""


@dataclass(frozen=True)
class Endpoint:
    kind: str  # "unix" or "tcp"
    address: str | tuple[str, int]

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        if text.startswith("unix://"):
            path = text[len("unix://"):]
            if not path:
                raise ClientConfigError("unix endpoint needs a path, e.g. unix:///run/memoree.sock")
            return cls("unix", path)
        if text.startswith("tcp://"):
            host, sep, port = text[len("tcp://"):].rpartition(":")
            if not sep or not port.isdigit() or not host:
                raise ClientConfigError(f"tcp endpoint must be tcp://HOST:PORT, got {text!r}")
            return cls("tcp", (host.strip("[]"), int(port)))
        raise ClientConfigError(f"endpoint must start with unix:// or tcp://, got {text!r}")

    def __str__(self) -> str:
        if self.kind == "unix":
            return f"unix://{self.address}"
        host, port = self.address  # type: ignore[misc]
        return f"tcp://{host}:{port}"


def default_endpoint() -> Endpoint:
    from memoree.client.paths import socket_path

    return Endpoint("unix", str(socket_path()))


def _connect(endpoint: Endpoint) -> socket.socket:
    family = socket.AF_UNIX if endpoint.kind == "unix" else socket.AF_INET6 if ":" in endpoint.address[0] else socket.AF_INET  # type: ignore[index]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT_S)
    try:
        sock.connect(endpoint.address)
    except OSError as exc:
        sock.close()
        raise TransportFailure(f"cannot connect to {endpoint}: {exc.strerror or exc}") from None
    return sock


def exchange(endpoint: Endpoint, payload: bytes, *, io_timeout: float = IO_TIMEOUT_S) -> bytes:
    """Send one request frame and return the response frame."""
    sock = _connect(endpoint)
    try:
        sock.settimeout(io_timeout)
        write_frame(sock, payload)
        return read_frame(sock, MAX_FRAME_BYTES)
    except TimeoutError:
        raise TransportFailure(f"exchange with {endpoint} timed out after {io_timeout:.0f} seconds") from None
    except FrameTruncated:
        raise TransportFailure(f"{endpoint} closed the connection without a response (busy or refused)") from None
    except FrameTooLarge as exc:
        raise TransportFailure(f"{endpoint} sent an oversize response: {exc}") from None
    except OSError as exc:
        raise TransportFailure(f"exchange with {endpoint} failed: {exc.strerror or exc}") from None
    finally:
        sock.close()


def probe(endpoint: Endpoint) -> dict | None:
    """The daemon's doctor result, or None when nothing answers."""
    try:
        body = exchange(endpoint, b'{"v":1,"request_id":"req_probe","op":"doctor","input":{}}', io_timeout=5.0)
    except TransportFailure:
        return None
    envelope = json.loads(body)
    return envelope.get("result") if envelope.get("ok") else None


def _check_version(doctor: dict) -> None:
    version = doctor.get("binary_version")
    if version != __version__:
        raise ClientConfigError(
            f"the daemon runs memoree {version} but this client is {__version__}; "
            "run `memoree daemon restart` to replace it"
        )


def autostart(endpoint: Endpoint, data_dir: Path) -> dict:
    """Start a detached daemon for the default endpoint and wait until it answers doctor."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    log_path = data_dir / "memoreed.log"
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "memoree", "serve", "--listen", str(endpoint),
             "--data-dir", str(data_dir), "--lifecycle-owner", "memoree"],
            stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd, cwd=data_dir,
            env={**os.environ, "MEMOREE_DAEMON_CHILD": "1"}, start_new_session=True,
        )
    finally:
        os.close(log_fd)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        doctor = probe(endpoint)
        if doctor is not None:
            return doctor
        if child.poll() is not None:
            # Another client may have won the race to start the daemon: that one answers.
            doctor = probe(endpoint)
            if doctor is not None:
                return doctor
            raise TransportFailure(f"the daemon exited with status {child.returncode}; see {log_path}")
        time.sleep(POLL_INTERVAL_S)
    raise TransportFailure(f"the daemon did not answer within {START_TIMEOUT_S:.0f} seconds; see {log_path}")


def request_via_daemon(payload: bytes, *, endpoint: Endpoint | None, data_dir: Path | None,
                       autostart_allowed: bool, io_timeout: float = IO_TIMEOUT_S) -> bytes:
    """Send one request to the daemon, starting the default one when allowed and needed."""
    target = endpoint or default_endpoint()
    doctor = probe(target)
    if doctor is None:
        if endpoint is not None or not autostart_allowed:
            raise TransportFailure(f"no daemon answers at {target}")
        from memoree.client.paths import data_dir as default_data_dir

        doctor = autostart(target, data_dir or default_data_dir())
    _check_version(doctor)
    return exchange(target, payload, io_timeout=io_timeout)
