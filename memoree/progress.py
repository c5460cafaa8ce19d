"""Progress bars for long operations (reindex, import, eval), on stderr and only on a terminal.

Scripts and agents read stdout; a bar never touches it, and nothing is drawn when stderr is not a
TTY, so piped and CI runs stay clean.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["busy", "progress_reporter"]


@contextmanager
def progress_reporter(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(done)``; it draws a rich bar on a TTY stderr and does nothing otherwise."""
    if not sys.stderr.isatty() or total <= 0:
        yield lambda done: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda done: bar.update(task, completed=done)


@contextmanager
def busy(description: str) -> Iterator[None]:
    """A spinner on a TTY stderr while an operation of unknown length runs (e.g. in the daemon)."""
    if not sys.stderr.isatty():
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(description):
        yield
