"""A second checkout of the project for same-run comparisons: a git worktree whose layers import.

    python -m tools.bench.checkout REV DIR

The editable install maps ``memoree.eventlog``, ``memoree.projections``, ``memoree.commands``
and ``memoree.queries`` to the main checkout, so a worktree put first on ``PYTHONPATH`` would run
its own ``memoree/`` over the main checkout's layers and a comparison would time the same code
twice. This makes the worktree, links each layer into its ``memoree/`` folder (where the import
system finds it before the editable mapping; the links show as untracked files there), checks
that the worktree's own files are the ones imported, and prints how to run a benchmark from it.
Remove it with ``git worktree remove --force DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

LAYERS = ("eventlog", "projections", "commands", "queries")


def make_checkout(revision: str, folder: Path, repository: Path) -> Path:
    """Add a worktree of ``revision`` at ``folder`` whose ``memoree.<layer>`` imports are its own."""
    subprocess.run(["git", "-C", str(repository), "worktree", "add", "--detach", "-q", str(folder), revision],
                   check=True)
    folder = folder.resolve()
    for layer in LAYERS:
        link = folder / "memoree" / layer
        if not link.exists():
            link.symlink_to(Path("..") / layer, target_is_directory=True)
    return folder


def imported_files(folder: Path) -> dict[str, str]:
    """Which file each layer's package comes from when ``folder`` alone is on ``PYTHONPATH``."""
    probe = ("import importlib, json, sys; print(json.dumps({layer: importlib.import_module('memoree.' + layer)"
             ".__file__ for layer in sys.argv[1:]}))")
    output = subprocess.run([sys.executable, "-c", probe, *LAYERS], check=True, cwd=folder, capture_output=True,
                            text=True, env={**os.environ, "PYTHONPATH": str(folder)}).stdout
    return json.loads(output)


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revision", help="commit, branch or tag to check out")
    parser.add_argument("folder", type=Path, help="where the worktree goes (must not exist)")
    args = parser.parse_args(argv)
    repository = Path(__file__).resolve().parents[2]
    folder = make_checkout(args.revision, args.folder, repository)
    strays = {layer: path for layer, path in imported_files(folder).items() if not path.startswith(str(folder))}
    if strays:
        raise SystemExit(f"these layers still import from elsewhere: {strays}")
    print(f"checked out {args.revision} at {folder}; run benchmarks from it as\n"
          f"  cd {folder} && PYTHONPATH={folder} {sys.executable} -m tools.bench.<name> ...")
    return folder


if __name__ == "__main__":
    main()
