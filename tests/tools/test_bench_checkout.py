"""The comparison checkout imports its own moved packages, not the main checkout's."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tools.bench import checkout


def test_a_comparison_checkout_imports_every_moved_package_from_itself(tmp_path: Path) -> None:
    """Each package pyproject installs from another folder (the four layers among them) imports from the worktree."""
    folder = checkout.main(["HEAD", str(tmp_path / "other")])
    try:
        assert {"memoree.eventlog", "memoree.projections", "memoree.commands", "memoree.queries"} <= set(
            checkout.moved_packages(folder))
        assert checkout.imported_from_elsewhere(folder) == {}
    finally:
        subprocess.run(["git", "-C", str(checkout.REPOSITORY), "worktree", "remove", "--force", str(folder)],
                       check=True)


def test_a_revision_git_does_not_know_is_refused_with_gits_reason(tmp_path: Path) -> None:
    """An unknown revision stops with a message naming it, and leaves no folder behind."""
    with pytest.raises(SystemExit, match="no-such-revision"):
        checkout.main(["no-such-revision", str(tmp_path / "other")])
    assert not (tmp_path / "other").exists()
