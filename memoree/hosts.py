"""Small process and address predicates shared by the daemon, the REST front, backups and the CLI."""

from __future__ import annotations

import ipaddress
import os

__all__ = ["is_loopback", "pid_alive"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def pid_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
