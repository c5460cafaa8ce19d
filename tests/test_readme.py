"""Every command the README shows exists, has help, and the set-up command's demo runs."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


def mcp_section() -> str:
    text = README.read_text()
    start = text.index("### MCP\n")
    return text[start:text.index("\n### ", start + 1)]


def shown_mcp_json() -> list[dict]:
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", mcp_section(), flags=re.S)]


def shown_bash_lines(prefix: str) -> list[str]:
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", mcp_section(), flags=re.S):
        joined = block.replace("\\\n", " ")
        lines += [line for line in joined.splitlines() if line.startswith(prefix)]
    return lines


def substituted(words: list[str], project: Path) -> list[str]:
    """The README's example paths replaced: this venv's memoree and a real project folder."""
    memoree_bin = str(Path(sys.executable).parent / "memoree")
    return [memoree_bin if w.endswith("/.venv/bin/memoree") else str(project) if w.endswith("/myproject") else w
            for w in words]


def initialized_project(tmp_path: Path, env: dict[str, str]) -> Path:
    project = tmp_path / "myproject"
    project.mkdir()
    subprocess.run([sys.executable, "-m", "memoree", "init", "--directory", str(project)], env=env,
                   check=True, capture_output=True, timeout=60)
    return project


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")}
    env.update(MEMOREE_HOME=str(tmp_path / "home"), MEMOREE_IN_PROCESS="1")
    return env


class TestMcpRegistration:
    def test_every_shown_registration_uses_absolute_paths_and_a_context(self) -> None:
        """Each mcpServers entry and the Claude Code line name an absolute memoree and say where to act."""
        entries = [doc["mcpServers"]["memoree"] for doc in shown_mcp_json()]
        assert 2 <= len(entries)
        for entry in entries:
            assert Path(entry["command"]).is_absolute() and entry["command"].endswith("/memoree")
            assert "mcp" == entry["args"][0]
            has_project = "--project" in entry["args"] and Path(entry["args"][entry["args"].index("--project") + 1]).is_absolute()
            has_context = "MEMOREE_CONTEXT" in entry.get("env", {}) and json.loads(entry["env"]["MEMOREE_CONTEXT"])["project_id"]
            assert has_project or has_context, entry
        (claude,) = shown_bash_lines("claude mcp add")
        server = claude.split(" -- ", 1)[1].split()
        assert (True, "mcp", "--project") == (Path(server[0]).is_absolute(), server[1], server[2])

    def test_the_shown_entries_start_a_server_that_answers(self, tmp_path: Path) -> None:
        """With the example paths replaced, each shown entry starts memoree mcp from elsewhere and resolves its context."""
        import anyio
        from mcp import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        env = clean_env(tmp_path)
        project = initialized_project(tmp_path, env)
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()

        async def resolve(entry: dict) -> dict:
            command, *args = substituted([entry["command"], *entry["args"]], project)
            params = StdioServerParameters(command=command, args=args, env={**env, **entry.get("env", {})},
                                           cwd=str(elsewhere))
            with anyio.fail_after(120):
                async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                    await session.initialize()
                    return (await session.call_tool("context_resolve", {})).structured_content

        for entry in (doc["mcpServers"]["memoree"] for doc in shown_mcp_json()):
            envelope = anyio.run(resolve, entry)
            assert envelope["ok"], envelope
            expected = json.loads(entry["env"]["MEMOREE_CONTEXT"])["project_id"] if "env" in entry else \
                next(line.split('"')[1] for line in (project / ".memoree.toml").read_text().splitlines()
                     if line.startswith("project_id"))
            assert expected == envelope["result"]["context"]["project_id"]

    def test_the_inspector_commands_run_when_the_inspector_is_installed(self, tmp_path: Path) -> None:
        """The README's Inspector CLI lines list the tools and store an artifact from an object content."""
        inspector = os.environ.get("MEMOREE_MCP_INSPECTOR") or shutil.which("mcp-inspector")
        if not inspector:
            pytest.skip("the MCP Inspector CLI is not installed (npm install @modelcontextprotocol/inspector)")
        env = clean_env(tmp_path)
        project = initialized_project(tmp_path, env)
        outputs = []
        for line in shown_bash_lines("npx @modelcontextprotocol/inspector"):
            words = substituted(shlex.split(line)[2:], project)
            result = subprocess.run([inspector, *words], capture_output=True, text=True, env=env, timeout=180,
                                    cwd=tmp_path)
            assert 0 == result.returncode, result.stdout + result.stderr
            outputs.append(json.loads(result.stdout))
        listed, stored = outputs
        assert "artifact_put" in [tool["name"] for tool in listed["tools"]]
        assert (True, "Hello") == (stored["structuredContent"]["ok"], stored["structuredContent"]["result"]["title"])


def human_examples() -> list[list[str]]:
    """The README's `memoree … --human` lines, split as a shell would."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.S):
        for line in block.splitlines():
            command = line.split(" #", 1)[0].strip()
            if command.startswith("memoree ") and "--human" in command.split():
                found.append(shlex.split(command)[1:])
    return found


class TestHumanExamples:
    def test_every_human_example_runs_as_shown(self, tmp_path: Path) -> None:
        """Each README `--human` example, run on a store holding one note, exits 0 with readable text."""
        examples = human_examples()
        assert examples
        env = {**clean_env(tmp_path), "MEMOREE_CONTEXT": json.dumps({"workspace_id": "wsp_r", "project_id": "prj_r"})}
        note = tmp_path / "notes.md"
        note.write_text("# Why SQLite\n\nSQLite is authoritative; the CAS stores blobs.\n", encoding="utf-8")
        subprocess.run([sys.executable, "-m", "memoree", "artifact", "put", str(note)], env=env, check=True,
                       capture_output=True, timeout=60)
        for words in examples:
            result = subprocess.run([sys.executable, "-m", "memoree", *words], capture_output=True, text=True,
                                    env=env, timeout=60, cwd=tmp_path)
            assert 0 == result.returncode, (words, result.stdout, result.stderr)
            assert result.stdout.strip() and not result.stdout.lstrip().startswith("{"), words
