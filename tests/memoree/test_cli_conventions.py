"""CLI conventions: --version, bare `memoree`, global flags after the command, readable --human
output with errors on stderr, and `call --pretty --help`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoree import __version__
from memoree.cli.app import hoist_global_options
from tests.memoree.test_cli import run


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


CTX = {"MEMOREE_CONTEXT": json.dumps({"workspace_id": "wsp_cli", "project_id": "prj_cli"})}


def ok(args: list[str], tmp_path: Path, home: Path, stdin: bytes = b"") -> str:
    result = run(args, tmp_path, home, stdin, CTX)
    assert 0 == result.returncode, (args, result.stdout, result.stderr)
    return result.stdout.decode()


class TestBasics:
    def test_version_and_bare_command(self, tmp_path: Path, home: Path) -> None:
        """--version and `version` print the version; bare `memoree` prints help and exits 0."""
        assert f"memoree {__version__}\n" == ok(["--version"], tmp_path, home) == ok(["version"], tmp_path, home)
        assert "Usage" in ok([], tmp_path, home)

    def test_call_help_after_another_flag(self, tmp_path: Path, home: Path) -> None:
        """`memoree call --pretty --help` prints the call usage and exits 0."""
        assert "usage: memoree call" in ok(["call", "--pretty", "--help"], tmp_path, home)

    def test_global_flags_are_hoisted_unless_the_command_has_its_own(self) -> None:
        """Root flags after a command move in front; a command's own --data-dir and anything after -- stay."""
        assert ["--human", "--data-dir", "D", "search", "q"] == hoist_global_options(["search", "q", "--human", "--data-dir", "D"])
        assert ["backup", "restore", "S", "--data-dir", "D"] == hoist_global_options(["backup", "restore", "S", "--data-dir", "D"])
        assert ["session", "exec", "--task", "t", "--", "x", "--human"] == hoist_global_options(
            ["session", "exec", "--task", "t", "--", "x", "--human"])


class TestHuman:
    def test_search_after_the_command_shows_statements_and_titles(self, tmp_path: Path, home: Path) -> None:
        """`memoree search Q --human` works and shows a claim's statement and an artifact's heading title."""
        note = tmp_path / "storage.md"
        note.write_text("# Storage decision\n\nSQLite is the authoritative store.\n", encoding="utf-8")
        ok(["artifact", "put", str(note), "--kind", "decision"], tmp_path, home)
        ok(["claim", "assert", "decision", "Keep SQLite as the authoritative store"], tmp_path, home)
        shown = ok(["search", "authoritative store", "--human"], tmp_path, home)
        assert "Keep SQLite as the authoritative store" in shown and "Storage decision" in shown
        assert "decision claim" not in shown and str(tmp_path) not in shown

    def test_conflicts_show_both_claims_side_by_side(self, tmp_path: Path, home: Path) -> None:
        """`conflict list --human` prints each case's two statements in one row."""
        first = json.loads(ok(["claim", "assert", "fact", "The port is 7717"], tmp_path, home))["result"]["claim_id"]
        second = json.loads(ok(["claim", "assert", "fact", "The port is 8080"], tmp_path, home))["result"]["claim_id"]
        ok(["link", f"claim:{first}", "contradicts", f"claim:{second}"], tmp_path, home)
        shown = ok(["conflict", "list", "--human"], tmp_path, home)
        row = next(line for line in shown.splitlines() if "The port is 7717" in line)
        assert "The port is 8080" in row

    def test_errors_go_to_stderr_in_human_mode(self, tmp_path: Path, home: Path) -> None:
        """A failed read under --human prints nothing on stdout and the error with its code on stderr."""
        result = run(["artifact", "get", "art_missing", "--human"], tmp_path, home, b"", CTX)
        assert (3, b"") == (result.returncode, result.stdout)
        assert result.stderr.decode().startswith("error NOT_FOUND")
