"""Every command the README shows exists, has help, and the set-up command's demo runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import typer.main
from typer.testing import CliRunner

from memoree.cli.app import app

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_invocations() -> list[list[str]]:
    """The argument lists of every `memoree …` line in the README's shell blocks."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.S)
    found = []
    for block in blocks:
        for line in block.splitlines():
            for segment in re.split(r"&&|\|", line.split("#", 1)[0]):
                words = segment.split()
                if "memoree" in words and not segment.strip().startswith("python"):
                    last = len(words) - 1 - words[::-1].index("memoree")
                    found.append(words[last + 1:])
    return found


def command_path(words: list[str]) -> list[str]:
    """The sub-command names at the start of ``words`` (global flags skipped)."""
    command = typer.main.get_command(app)
    path: list[str] = []
    for word in words:
        if word.startswith("--") and not path:
            continue
        sub = getattr(command, "commands", {}).get(word)
        if sub is None:
            break
        path.append(word)
        command = sub
    return path


class TestReadme:
    def test_every_readme_command_exists_and_has_help(self) -> None:
        """Each `memoree …` invocation in the README names real commands whose --help works."""
        invocations = readme_invocations()
        assert len(invocations) > 20
        runner = CliRunner()
        for words in invocations:
            path = command_path(words)
            assert path, f"README shows an unknown command: memoree {' '.join(words)}"
            result = runner.invoke(app, [*path, "--help"])
            assert 0 == result.exit_code, (path, result.output)

    def test_demo_from_the_setup_command_runs(self, tmp_path: Path) -> None:
        """`memoree demo` stores and reads back an artifact on a fresh embedded store."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")}
        env.update(MEMOREE_HOME=str(tmp_path), MEMOREE_IN_PROCESS="1")
        result = subprocess.run([sys.executable, "-m", "memoree", "demo"], capture_output=True, text=True,
                                env=env, timeout=120)
        assert 0 == result.returncode, result.stdout + result.stderr
        assert "'SQLite is authoritative'" in result.stdout
        first = json.loads(result.stdout.splitlines()[0].split(": ", 1)[1])
        assert first["ok"] and first["result"]["created"]
