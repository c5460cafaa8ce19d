"""Progress reporting: a real rich bar on a terminal, nothing at all elsewhere."""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import Progress

from memoree.cli.progress import Reporter, progress_reporter


def test_the_reporter_moves_and_relabels_the_bar() -> None:
    """reporter(done) sets the completed count and reporter.phase(text) the label."""
    with Progress(console=Console(file=io.StringIO(), force_terminal=True)) as bar:
        reporter = Reporter(bar, bar.add_task("reindex", total=10))
        reporter(4)
        reporter.phase("indexing text")
        task = bar.tasks[0]
        assert (4, "indexing text") == (task.completed, task.description)


def test_off_a_terminal_no_bar_is_made() -> None:
    """With stderr captured (not a TTY) the reporter draws nothing and accepts every call."""
    with progress_reporter("reindex", 10) as reporter:
        reporter(3)
        reporter.phase("swapping in")
        assert reporter.bar is None
