"""The ``memoree`` command: ``call`` over stdin/stdout, init, context resolution and session exec."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memoree.client.context import CONTEXT_FREE_OPS, ContextResolutionError, resolve, task_id_for
from memoree.protocol.ops import OPS

MEMOREE = [sys.executable, "-m", "memoree"]


def run(args: list[str], cwd: Path, home: Path, stdin: bytes = b"", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")}
    environment.update({"MEMOREE_HOME": str(home), "MEMOREE_IN_PROCESS": "1", **(env or {})})
    return subprocess.run([*MEMOREE, *args], cwd=cwd, input=stdin, capture_output=True, env=environment, timeout=60)


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    folder, home = tmp_path / "proj", tmp_path / "home"
    folder.mkdir()
    result = run(["init", "--name", "demo"], folder, home)
    assert 0 == result.returncode, result.stderr
    return folder, home


def call(folder: Path, home: Path, document: dict[str, Any] | bytes, *args: str, env: dict[str, str] | None = None) -> tuple[dict[str, Any], int, bytes]:
    raw = document if isinstance(document, bytes) else json.dumps(document).encode()
    result = run(["call", *args], folder, home, raw, env)
    assert result.stdout.count(b"\n") == (1 if "--pretty" not in args else result.stdout.count(b"\n"))
    return json.loads(result.stdout), result.returncode, result.stdout


PUT = {"v": 1, "request_id": "req_a", "op": "artifact.put", "idempotency_key": "k",
       "input": {"kind": "note", "title": "t", "content": {"type": "text", "data": "hello"}}}


class TestCall:
    def test_put_then_get_through_the_marker_context(self, project: tuple[Path, Path]) -> None:
        """A put resolves the marker's context, and a get reads the artifact back."""
        folder, home = project
        envelope, code, _ = call(folder, home, PUT)
        assert (True, 0, "marker", 1) == (envelope["ok"], code, envelope["context"]["resolved_from"], envelope["commit_seq"])
        got, code, _ = call(folder, home, {"request_id": "g", "op": "artifact.get", "input": {"artifact_id": envelope["result"]["artifact_id"]}})
        assert ("hello", 0) == (got["result"]["content"]["data"], code)
        assert "context" not in got

    def test_data_dir_and_database_are_private(self, project: tuple[Path, Path]) -> None:
        """The data dir is 0700 and the database file 0600."""
        folder, home = project
        call(folder, home, PUT)
        assert 0o700 == stat.S_IMODE((home / "data").stat().st_mode)
        assert 0o600 == stat.S_IMODE((home / "data" / "memoree.sqlite3").stat().st_mode)

    def test_malformed_stdin_is_invalid_request_from_the_cli(self, project: tuple[Path, Path]) -> None:
        """Non-JSON stdin answers INVALID_REQUEST with request_id req_cli and exit code 2."""
        envelope, code, _ = call(*project, b"not json")
        assert ("INVALID_REQUEST", "req_cli", 2) == (envelope["error"]["code"], envelope["request_id"], code)

    def test_no_context_outside_a_project(self, tmp_path: Path) -> None:
        """A mutation with no marker, variable or personal fallback is NO_AMBIENT_CONTEXT (exit 5)."""
        envelope, code, _ = call(tmp_path, tmp_path / "home", PUT)
        assert ("NO_AMBIENT_CONTEXT", "req_a", 5) == (envelope["error"]["code"], envelope["request_id"], code)
        assert envelope["error"]["hint"]

    def test_pretty_indents(self, project: tuple[Path, Path]) -> None:
        """--pretty prints the same envelope indented."""
        _, _, stdout = call(*project, {"request_id": "c", "op": "capabilities", "input": {}}, "--pretty")
        assert stdout.startswith(b'{\n  "v": 1')

    def test_malformed_marker_is_a_config_error(self, tmp_path: Path) -> None:
        """A broken nearest marker is CONFIG_ERROR, never skipped."""
        (tmp_path / ".memoree.toml").write_text("schema = [")
        envelope, code, _ = call(tmp_path, tmp_path / "home", PUT)
        assert ("CONFIG_ERROR", 2) == (envelope["error"]["code"], code)


class TestInitAndContext:
    def test_init_never_overwrites_a_marker(self, project: tuple[Path, Path]) -> None:
        """A second init in the same folder fails and keeps the first marker."""
        folder, home = project
        before = (folder / ".memoree.toml").read_text()
        result = run(["init"], folder, home)
        assert 2 == result.returncode
        assert before == (folder / ".memoree.toml").read_text()

    def test_resolution_order(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """MEMOREE_CONTEXT beats the nearest marker, which beats the personal config section."""
        config = tmp_path / "config.toml"
        config.write_text('[personal]\nworkspace_id = "wsp_me"\nproject_id = "prj_me"\n')
        nested = tmp_path / "a" / "b"
        nested.mkdir(parents=True)
        monkeypatch.delenv("MEMOREE_CONTEXT", raising=False)
        assert ({"workspace_id": "wsp_me", "project_id": "prj_me", "pins": []}, "personal") == resolve(nested, config)
        (tmp_path / "a" / ".memoree.toml").write_text('schema = 1\nworkspace_id = "w"\nproject_id = "p"\nname = "x"\npins = []\n')
        assert "marker" == resolve(nested, config)[1]
        monkeypatch.setenv("MEMOREE_CONTEXT", json.dumps({"workspace_id": "w2", "project_id": "p2", "task_id": "t"}))
        assert ({"workspace_id": "w2", "project_id": "p2", "task_id": "t", "pins": []}, "session") == resolve(nested, config)
        monkeypatch.setenv("MEMOREE_CONTEXT", json.dumps({"workspace_id": "w2", "project_id": "p2", "colour": 1}))
        with pytest.raises(ContextResolutionError):
            resolve(nested, config)

    def test_context_free_ops_match_the_registry(self) -> None:
        """No op the fast client treats as context-free needs a context in the registry."""
        assert not CONTEXT_FREE_OPS & {name for name, spec in OPS.items() if spec.needs_context}

    def test_session_exec_runs_the_child_with_a_task_context(self, project: tuple[Path, Path]) -> None:
        """session exec sets MEMOREE_CONTEXT to the marker's context plus the derived task id."""
        folder, home = project
        result = run(["session", "exec", "--task", "build", "--", sys.executable, "-c",
                      "import os; print(os.environ['MEMOREE_CONTEXT'])"], folder, home)
        context = json.loads(result.stdout)
        assert task_id_for(context["workspace_id"], context["project_id"], "build") == context["task_id"]
        envelope, _, _ = call(folder, home, PUT, env={"MEMOREE_CONTEXT": json.dumps(context)})
        assert ("session", context["task_id"]) == (envelope["context"]["resolved_from"], envelope["context"]["task_id"])


class TestHumanCommands:
    def test_every_command_has_help(self) -> None:
        """Every command and sub-command of the CLI has help text."""
        import typer.main

        from memoree.cli.app import app

        def walk(command: Any, path: str) -> list[tuple[str, Any]]:
            found = [(path, command)]
            for name, sub in getattr(command, "commands", {}).items():
                found += walk(sub, f"{path} {name}")
            return found

        for path, command in walk(typer.main.get_command(app), "memoree"):
            assert (command.help or "").strip(), path

    def test_wrappers_store_and_read_with_fresh_keys(self, project: tuple[Path, Path]) -> None:
        """artifact put twice stores two artifacts (fresh keys), claim assert cites one of them."""
        folder, home = project
        (folder / "note.md").write_text("# Decision\nUse SQLite.\n")
        first = json.loads(run(["artifact", "put", "note.md", "--kind", "decision"], folder, home).stdout)
        second = json.loads(run(["artifact", "put", "note.md"], folder, home).stdout)
        assert first["result"]["artifact_id"] != second["result"]["artifact_id"]
        assert first["result"]["blob_hash"] == second["result"]["blob_hash"]
        art = first["result"]
        claim = run(["claim", "assert", "decision", "Use", "SQLite", "--evidence",
                     f"{art['artifact_id']}@{art['revision_id']}#11-22"], folder, home)
        assert 0 == claim.returncode, claim.stdout
        assert 11 == json.loads(claim.stdout)["result"]["evidence"][0]["start_byte"]
        reindex = json.loads(run(["reindex"], folder, home).stdout)
        assert 3 == reindex["result"]["events_replayed"]
