"""OS-visible names for the daemon's threads, so per-thread CPU can be told apart from outside.

Python's thread names live in the interpreter only; the kernel shows every thread of the daemon
as ``python``. ``name_this_thread`` gives the calling thread a kernel name too (Linux
``prctl(PR_SET_NAME)``: ``/proc/<pid>/task/<tid>/comm``, ``top -H``, ``ps -L``), which the daemon
bench reads to report the writer's, the syncer's and the checkpointer's CPU per put. The main
thread (the I/O loop) keeps the process's own name. Elsewhere, or if the call fails, nothing
happens.
"""

from __future__ import annotations

__all__ = ["name_this_thread"]

_PR_SET_NAME = 15  # linux/prctl.h


def name_this_thread(name: str) -> None:
    """Name the calling thread ``name`` (at most 15 bytes are kept) for the kernel's tools."""
    import sys

    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
    except (OSError, AttributeError):
        return
