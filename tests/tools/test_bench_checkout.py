"""The comparison checkout imports its own layers, not the main checkout's."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tools.bench import checkout

REPOSITORY = Path(checkout.__file__).resolve().parents[2]


def test_a_comparison_checkout_imports_every_layer_from_itself(tmp_path: Path) -> None:
    """Each of the four layers a worktree holds is imported from the worktree."""
    folder = checkout.main(["HEAD", str(tmp_path / "other")])
    try:
        files = checkout.imported_files(folder)
        assert sorted(files) == sorted(checkout.LAYERS)
        assert all(Path(path).resolve().is_relative_to(folder) for path in files.values())
    finally:
        subprocess.run(["git", "-C", str(REPOSITORY), "worktree", "remove", "--force", str(folder)], check=True)
