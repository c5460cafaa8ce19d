"""Real ``memoree`` processes on a temporary home, and the one fake: an outside compiler command."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

MEMOREE = [sys.executable, "-m", "memoree"]
CTX = {"workspace_id": "wsp_agent", "project_id": "prj_agent"}

# Stands in for an outside model CLI: it saves the prompt it was given and answers with whatever
# the test put in compiler_spec.json (stdout text, stderr text, exit status).
FAKE_COMPILER = """\
import json, pathlib, sys
here = pathlib.Path(__file__).parent
(here / "last_prompt.txt").write_text(sys.stdin.read(), encoding="utf-8")
spec = json.loads((here / "compiler_spec.json").read_text(encoding="utf-8"))
sys.stderr.write(spec.get("stderr", ""))
sys.stdout.write(spec["stdout"])
sys.exit(spec.get("exit", 0))
"""


class Cli:
    """Runs ``memoree`` commands in-process mode against one temporary home and context."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.cwd = root / "work"
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")}
        self.env.update({"MEMOREE_HOME": str(self.home), "MEMOREE_IN_PROCESS": "1",
                         "MEMOREE_CONTEXT": json.dumps(CTX)})

    def run(self, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*MEMOREE, *args], cwd=self.cwd, input=stdin, capture_output=True,
                              env=self.env, timeout=60)

    def json(self, *args: str, stdin: bytes = b"") -> tuple[dict[str, Any], int]:
        result = self.run(*args, stdin=stdin)
        assert result.stdout.count(b"\n") == 1, (result.stdout, result.stderr)
        return json.loads(result.stdout), result.returncode

    def ok(self, *args: str, stdin: bytes = b"") -> dict[str, Any]:
        document, code = self.json(*args, stdin=stdin)
        assert (True, 0) == (document["ok"], code), document
        return document["result"]

    def call(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        request = {"v": 1, "request_id": "req_test", "op": op, "input": payload}
        document, _ = self.json("call", stdin=json.dumps(request).encode())
        return document

    def head(self) -> int:
        envelope = self.call("doctor", {})
        assert envelope["ok"], envelope
        return envelope["result"]["last_commit_seq"]

    def fake_compiler(self, stdout: str | dict[str, Any], *, exit_status: int = 0, stderr: str = "") -> None:
        """Configure the fake compiler to print ``stdout`` (a dict is sent as JSON)."""
        folder = self.root / "compiler"
        folder.mkdir(exist_ok=True)
        script = folder / "fake_compiler.py"
        script.write_text(FAKE_COMPILER, encoding="utf-8")
        text = stdout if isinstance(stdout, str) else json.dumps(stdout)
        (folder / "compiler_spec.json").write_text(
            json.dumps({"stdout": text, "exit": exit_status, "stderr": stderr}), encoding="utf-8")
        command = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
        self.ok("compiler", "configure", "--command", command, "--timeout", "30")

    @property
    def last_prompt(self) -> str:
        return (self.root / "compiler" / "last_prompt.txt").read_text(encoding="utf-8")


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)
