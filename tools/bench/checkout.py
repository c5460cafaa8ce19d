"""A second checkout of the project for same-run comparisons: a git worktree whose layers import.

    python -m tools.bench.checkout REV DIR

The editable install maps the packages ``pyproject.toml`` places in other folders
(``memoree.eventlog`` in ``eventlog/``, ``memoree_audit`` in ``tools/audit/``...) to the main
checkout, so a worktree put first on ``PYTHONPATH`` would run its own ``memoree/`` over the main
checkout's layers and a comparison would time the same code twice. This makes the worktree,
links each such package where the import system finds it before the editable mapping (the links
show as untracked files there), checks that the worktree's own files are the ones imported, and
prints how to run a benchmark from it.
Remove it with ``git worktree remove --force DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]


def moved_packages(folder: Path) -> dict[str, str]:
    """The packages ``pyproject.toml`` installs from a folder other than their dotted name's."""
    mapping = tomllib.loads((folder / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return {name: where for name, where in mapping.items() if name.replace(".", "/") != where}


def make_checkout(revision: str, folder: Path) -> Path:
    """Add a worktree of ``revision`` at ``folder`` whose moved packages import from itself."""
    added = subprocess.run(["git", "-C", str(REPOSITORY), "worktree", "add", "--detach", "-q", str(folder), revision],
                           capture_output=True, text=True)
    if added.returncode:
        raise SystemExit(f"git worktree add {folder} {revision} failed: {added.stderr.strip()}")
    folder = folder.resolve()
    for name, where in moved_packages(folder).items():
        link = folder / name.replace(".", "/")
        if not link.exists():
            link.symlink_to(os.path.relpath(folder / where, link.parent), target_is_directory=True)
    return folder


def imported_files(folder: Path) -> dict[str, str]:
    """Which file each moved package comes from when ``folder`` alone is on ``PYTHONPATH``."""
    probe = ("import importlib, json, sys; print(json.dumps({name: importlib.import_module(name).__file__ "
             "for name in sys.argv[1:]}))")
    output = subprocess.run([sys.executable, "-c", probe, *moved_packages(folder)], check=True, cwd=folder,
                            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(folder)}).stdout
    return json.loads(output)


def imported_from_elsewhere(folder: Path) -> dict[str, str]:
    """The moved packages that still import from outside ``folder`` (none, for a good checkout)."""
    return {name: path for name, path in imported_files(folder).items()
            if not Path(path).resolve().is_relative_to(folder)}


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revision", help="commit, branch or tag to check out")
    parser.add_argument("folder", type=Path, help="where the worktree goes (must not exist)")
    args = parser.parse_args(argv)
    folder = make_checkout(args.revision, args.folder)
    strays = imported_from_elsewhere(folder)
    if strays:
        raise SystemExit(f"these packages still import from elsewhere: {strays}")
    print(f"checked out {args.revision} at {folder}; run benchmarks from it as\n"
          f"  cd {folder} && PYTHONPATH={folder} {sys.executable} -m tools.bench.<name> ...")
    return folder


if __name__ == "__main__":
    main()
