"""Small process and address predicates shared by the daemon, the REST front, backups and the CLI."""

from __future__ import annotations

import ipaddress
import os

__all__ = ["holds_flock", "is_loopback", "pid_alive"]


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


def holds_flock(pid: int, path: str | os.PathLike[str]) -> bool | None:
    """Whether ``pid`` holds a ``flock`` on the file at ``path`` (Linux ``/proc/locks``); None
    when that cannot be told here (no ``/proc/locks``, or no such file)."""
    try:
        st = os.stat(path)
        lines = open("/proc/locks", encoding="ascii", errors="replace").read().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 12345 08:01:1234567 0 EOF" ("->" marks a waiter)
        if len(fields) < 6 or fields[1] != "FLOCK" or "->" in fields:
            continue
        try:
            holder, inode = int(fields[4]), int(fields[5].rsplit(":", 1)[1])
        except (ValueError, IndexError):
            continue
        if holder == pid and inode == st.st_ino:
            return True
    return False
