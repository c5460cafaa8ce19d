"""The daemon client: endpoints, one framed exchange, and auto-starting the default daemon.

A request is one round trip: it carries ``client_version`` and the daemon refuses another
version itself (no doctor probe first); only when nothing accepts the connection (no request was
sent) does the client start the default daemon and send it again.

Standard library only: ``memoree call`` runs once per agent action, and every import here is
paid on each call. Failures are ``TransportFailure`` (TRANSPORT_ERROR, retryable) or
``ClientConfigError`` (CONFIG_ERROR: bad endpoint, version skew, a daemon that is not who it
should be); the caller turns them into envelopes.

Before a byte of the request leaves, a Unix socket's peer is checked with ``SO_PEERCRED``: the
daemon must run as this user, or the request is refused (someone else's socket in a shared
runtime folder would otherwise receive it and answer with forged results). ``probe`` also checks
that the pid the daemon names is the socket's own. Over TCP the request carries the store's secret
(``memoree.client.secret``) in its ``auth`` field.
"""

from __future__ import annotations

import _socket  # the C module: the ``socket`` wrapper costs ~2 ms of imports per call
import os
import sys
import time

from memoree import __version__
from memoree.protocol import strictjson
from memoree.protocol.framing import FrameTooLarge, FrameTruncated, peer_credentials, read_frame, write_frame

__all__ = [
    "ClientConfigError",
    "ClientUnauthorized",
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


class NotListening(TransportFailure):
    """Nothing accepted the connection: no request was sent, so starting a daemon is safe."""


class ClientConfigError(Exception):
    """A malformed endpoint, a daemon of another version, or one that runs as another user."""


class ClientUnauthorized(Exception):
    """The daemon refused this client: the wrong user on its Unix socket, or a missing or wrong
    secret over TCP."""


class Endpoint(tuple):
    """Where a daemon listens: ``kind`` "unix" (``address`` a path) or "tcp" (``(host, port)``).

    A pair, not a named tuple or a dataclass: ``collections`` and ``dataclasses`` cost imports on
    every call.
    """

    __slots__ = ()

    def __new__(cls, kind: str, address: str | tuple[str, int]) -> Endpoint:
        return tuple.__new__(cls, (kind, address))

    def __getnewargs__(self) -> tuple[str, str | tuple[str, int]]:
        return self[0], self[1]

    def __repr__(self) -> str:
        return f"Endpoint(kind={self[0]!r}, address={self[1]!r})"

    @property
    def kind(self) -> str:
        return self[0]

    @property
    def address(self) -> str | tuple[str, int]:
        return self[1]

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
    from memoree.client.paths import socket_path_str

    return Endpoint("unix", socket_path_str())


def _connect(endpoint: Endpoint) -> tuple[_socket.socket, int | None]:
    """A connected socket and, for a Unix socket, the daemon's pid (checked to run as this user)."""
    family = _socket.AF_UNIX if endpoint.kind == "unix" else _socket.AF_INET6 if ":" in endpoint.address[0] else _socket.AF_INET  # type: ignore[index]
    sock = _socket.socket(family, _socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT_S)
    try:
        sock.connect(endpoint.address)
    except OSError as exc:
        sock.close()
        raise NotListening(f"cannot connect to {endpoint}: {exc.strerror or exc}") from None
    if endpoint.kind != "unix":
        return sock, None
    pid, uid, _ = peer_credentials(sock)
    if uid != os.geteuid():
        sock.close()
        raise ClientConfigError(
            f"refusing the daemon at {endpoint}: its socket is served by uid {uid} (pid {pid}), not by "
            f"this user (uid {os.geteuid()}); another user may be impersonating it. Use a private "
            "MEMOREE_HOME or MEMOREE_RUNTIME_DIR")
    return sock, pid


def _exchange(endpoint: Endpoint, payload: bytes, io_timeout: float) -> tuple[bytes, int | None]:
    sock, pid = _connect(endpoint)
    try:
        sock.settimeout(io_timeout)
        write_frame(sock, payload)
        return read_frame(sock, MAX_FRAME_BYTES), pid
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


def exchange(endpoint: Endpoint, payload: bytes, *, io_timeout: float = IO_TIMEOUT_S) -> bytes:
    """Send one request frame and return the response frame."""
    return _exchange(endpoint, payload, io_timeout)[0]


def probe(endpoint: Endpoint, *, secret: str | None = None) -> dict | None:
    """The daemon's doctor result, or None when nothing answers.

    Over a Unix socket the pid the daemon reports must be the socket's own (``SO_PEERCRED``), so
    ``memoree daemon stop`` never signals a pid a forged reply named.
    """
    document: dict = {"v": 1, "request_id": "req_probe", "op": "doctor", "input": {}}
    if secret is not None and endpoint.kind == "tcp":
        document["auth"] = secret
    try:
        body, pid = _exchange(endpoint, strictjson.dumps(document).encode(), 5.0)
    except TransportFailure:
        return None
    envelope = strictjson.loads(body)
    if not envelope.get("ok"):
        error = envelope.get("error") or {}
        if error.get("code") == "UNAUTHORIZED":
            raise ClientUnauthorized(str(error.get("message", "unauthorized")).removeprefix("unauthorized: "))
        return None
    result = envelope.get("result")
    if pid is not None and isinstance(result, dict) and result.get("daemon_pid") != pid:
        raise ClientConfigError(f"the daemon at {endpoint} names pid {result.get('daemon_pid')!r}, "
                                f"but its socket belongs to pid {pid}; refusing it")
    return result


def with_secret(payload: bytes, secret: str | None) -> bytes:
    """The request with the store's secret in its ``auth`` field (for TCP endpoints)."""
    if secret is None:
        return payload
    try:
        document = strictjson.loads(payload)
    except strictjson.DuplicateKey:
        return payload  # the daemon refuses it, as it refuses a repeated key from any client
    if not isinstance(document, dict) or "auth" in document:
        return payload
    document["auth"] = secret
    return strictjson.dumps(document, ensure_ascii=False).encode()


def _check_version(doctor: dict) -> None:
    version = doctor.get("binary_version")
    if version != __version__:
        raise ClientConfigError(_skew_message(version))


def _skew_message(version: object) -> str:
    return (f"the daemon runs memoree {version} but this client is {__version__}; "
            "run `memoree daemon restart` to replace it")


def stamp_version(payload: bytes) -> bytes:
    """The request with ``client_version`` added, so the daemon checks the version itself."""
    head = payload.lstrip()
    if not head.startswith(b"{"):
        return payload  # not an object: the daemon answers INVALID_REQUEST as for any client
    rest = head[1:].lstrip()
    separator = b"" if rest.startswith(b"}") else b","
    return b'{"client_version":' + strictjson.dumps(__version__).encode() + separator + rest


def refused_for_version(body: bytes) -> str | None:
    """The skew message when the daemon refused the request for its client version, else None.

    A daemon of this protocol answers CONFIG_ERROR with ``details.daemon_version``; an older one
    rejects the unknown ``client_version`` field as INVALID_REQUEST.
    """
    marker = body.find(b',"ok":', 0, 1200)
    if marker >= 0 and body.startswith(b"true", marker + 6):
        return None
    try:
        error = strictjson.loads(body).get("error") or {}
    except ValueError:
        return None
    details = error.get("details") or {}
    if error.get("code") == "CONFIG_ERROR" and isinstance(details, dict) and "daemon_version" in details:
        return _skew_message(details["daemon_version"])
    if error.get("code") == "INVALID_REQUEST" and "client_version" in str(error.get("message", "")):
        return _skew_message("of an older protocol")
    return None


def autostart(endpoint: Endpoint, data_dir: str | os.PathLike[str]) -> dict:
    """Start a detached daemon for the default endpoint and wait until it answers doctor.

    The data dir and the socket's folder must be this user's (``memoree.client.paths.private_dir``);
    the log file is never opened through a planted link or another user's file."""
    import subprocess
    from pathlib import Path

    from memoree.client.paths import ForeignPath, open_append_private, private_dir

    data_dir = Path(data_dir)
    try:
        private_dir(data_dir, "data dir")
        if endpoint.kind == "unix":
            private_dir(Path(str(endpoint.address)).parent, "runtime dir")
        log_path = data_dir / "memoreed.log"
        log_fd = open_append_private(log_path)
    except ForeignPath as exc:
        raise ClientConfigError(str(exc)) from None
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


def request_via_daemon(payload: bytes, *, endpoint: Endpoint | None, data_dir: str | os.PathLike[str] | None,
                       autostart_allowed: bool, io_timeout: float = IO_TIMEOUT_S) -> bytes:
    """Send one request to the daemon in one round trip, starting the default one when allowed
    and nothing listens; the request carries this client's version (the daemon refuses skew) and,
    over TCP, the store's secret (``memoree.client.secret.client_secret``)."""
    target = endpoint or default_endpoint()
    secret = None
    if target.kind == "tcp":
        from memoree.client.secret import client_secret

        secret = client_secret(data_dir)
    stamped = stamp_version(with_secret(payload, secret))
    try:
        body = exchange(target, stamped, io_timeout=io_timeout)
    except NotListening:
        if endpoint is not None or not autostart_allowed:
            raise TransportFailure(f"no daemon answers at {target}") from None
        from memoree.client.paths import data_dir_str

        _check_version(autostart(target, data_dir or data_dir_str()))
        body = exchange(target, stamped, io_timeout=io_timeout)
    skew = refused_for_version(body)
    if skew is not None:
        raise ClientConfigError(skew)
    return body
