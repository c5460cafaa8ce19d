"""Progress bars for long operations (reindex, import, eval), on stderr and only on a terminal.

Scripts and agents read stdout; a bar never touches it, and nothing is drawn when stderr is not a
TTY, so piped and CI runs stay clean.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Reporter", "busy", "progress_reporter"]


class Reporter:
    """``reporter(done)`` moves the bar; ``reporter.phase(text)`` relabels it. Off a terminal,
    both do nothing."""

    def __init__(self, bar: Any = None, task: Any = None) -> None:
        self.bar, self.task = bar, task

    def __call__(self, done: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done)

    def phase(self, text: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=text)


@contextmanager
def progress_reporter(description: str, total: int) -> Iterator[Reporter]:
    """Yield a ``Reporter`` that draws a rich bar on a TTY stderr and does nothing otherwise."""
    if not sys.stderr.isatty() or total <= 0:
        yield Reporter()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        yield Reporter(bar, bar.add_task(description, total=total))


@contextmanager
def busy(description: str) -> Iterator[None]:
    """A spinner on a TTY stderr while an operation of unknown length runs (e.g. in the daemon)."""
    if not sys.stderr.isatty():
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(description):
        yield
