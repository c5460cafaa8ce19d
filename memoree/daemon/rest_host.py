"""Serving the REST app from the daemon process: uvicorn on a thread, on a socket we bind.

The socket is bound (and its address checked: loopback only unless deliberately overridden)
before the thread starts, so a bad or busy address fails ``memoree serve`` at once instead of
inside a thread, and port 0 yields the ephemeral port actually bound. uvicorn runs its own event
loop on the thread (it installs no signal handlers off the main thread); ``stop()`` asks it to
exit and waits. Every store access still goes through the daemon's writer (``build_app(submit)``).
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from memoree.errors import ConfigError
from memoree.hosts import is_loopback

__all__ = ["HttpFront", "parse_http_address"]

GRACEFUL_SHUTDOWN_S = 5


def parse_http_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPV6]:PORT`` or ``http://HOST:PORT`` as ``(host, port)``."""
    address = text.removeprefix("http://").rstrip("/")
    host, sep, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--http wants HOST:PORT (e.g. 127.0.0.1:8080), got {text!r}")
    return host, int(port)


def bind(host: str, port: int, *, allow_non_loopback: bool) -> socket.socket:
    if not allow_non_loopback and not is_loopback(host):
        raise ConfigError(f"refusing to serve HTTP on non-loopback {host}; pass "
                          "--dangerously-allow-non-loopback-tcp to override")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say TCP, and without it
    # a response's second write waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot serve HTTP on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


class HttpFront:
    """An ASGI app served by uvicorn on its own thread, over a pre-bound socket."""

    def __init__(self, app: Any, sock: socket.socket) -> None:
        import uvicorn

        self.sock = sock
        host, port = sock.getsockname()[:2]
        self.url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]},
                                       name="memoree-http", daemon=True)

    @classmethod
    def serve(cls, app: Any, host: str, port: int, *, allow_non_loopback: bool = False) -> HttpFront:
        front = cls(app, bind(host, port, allow_non_loopback=allow_non_loopback))
        front.start()
        return front

    def start(self) -> None:
        self.thread.start()
        for _ in range(400):  # up to ~10 s for the loop to start accepting
            if self.server.started or not self.thread.is_alive():
                break
            threading.Event().wait(0.025)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(GRACEFUL_SHUTDOWN_S + 5)
        self.sock.close()


def serve_daemon_http(daemon: Any, host: str, port: int, *, allow_non_loopback: bool) -> HttpFront:
    """The emem REST app on the daemon: every request goes through its writer."""
    from memoree.factplane.rest import build_app

    return HttpFront.serve(build_app(daemon.writer.submit), host, port,
                           allow_non_loopback=allow_non_loopback)
