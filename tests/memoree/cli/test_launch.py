"""The console entry loads only the area a command line needs, and a command that talks to the
daemon imports neither pydantic, rich, numpy, the embedding model nor the store engine."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer.main

from memoree.client.transport import Endpoint
from tests.memoree.test_daemon import clean_env, wait_for

# What a command that only talks to the daemon must not load: the validation and rendering
# libraries, the embedding model and its tensors, SQLite, and the store's own packages.
HEAVY = ("pydantic", "pydantic_core", "rich", "numpy", "wordllama", "tokenizers", "safetensors", "sqlite3",
         "pysqlite3", "eventlog", "projections", "queries", "commands", "memoree.service.engine",
         "memoree.service.service")

# Runs the console entry on argv, then reports its exit status, which HEAVY modules it loaded and
# which command areas.
PROBE = """
import json, sys
heavy = json.loads(sys.argv[1])
sys.argv = ["memoree", *sys.argv[2:]]
from memoree.entry import main
try:
    main()
    code = 0
except SystemExit as exc:
    code = exc.code
loaded = sorted(h for h in heavy if any(m == h or m.startswith(h + ".") for m in sys.modules))
from memoree.cli.launch import AREAS
areas = [area for area in AREAS if "memoree.cli." + area in sys.modules]
sys.stderr.write("\\n" + json.dumps({"code": code, "loaded": loaded, "areas": areas}) + "\\n")
"""


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """An initialized project folder and the environment of a shell whose daemon is warm."""
    sock = tmp_path / "run" / "d.sock"
    proc = subprocess.Popen([sys.executable, "-m", "memoree", "serve", "--listen", f"unix://{sock}",
                             "--data-dir", str(tmp_path / "data")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=clean_env())
    endpoint = Endpoint("unix", str(sock))
    wait_for(endpoint, proc)
    folder = tmp_path / "project"
    folder.mkdir()
    env = clean_env(MEMOREE_ENDPOINT=str(endpoint), MEMOREE_HOME=str(tmp_path / "home"))
    subprocess.run([sys.executable, "-m", "memoree", "init"], cwd=folder, env=env, check=True, capture_output=True)
    yield folder, env
    proc.send_signal(signal.SIGTERM)
    proc.wait(15)


def probe(folder: Path, env: dict[str, str], *argv: str, stdin: bytes = b"") -> tuple[dict, dict]:
    result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(HEAVY), *argv], input=stdin, cwd=folder,
                            env=env, capture_output=True, timeout=60)
    report = json.loads(result.stderr.decode().strip().splitlines()[-1])
    return json.loads(result.stdout), report


class TestImportSet:
    def test_search_through_the_daemon_loads_nothing_heavy(self, project: tuple[Path, dict[str, str]]) -> None:
        """memoree search answered by a warm daemon imports no pydantic, rich, numpy, embedding
        model, SQLite or store engine, and of the command areas only retrieval."""
        folder, env = project
        envelope, report = probe(folder, env, "search", "release", "notes", "--limit", "5")
        assert (True, 0, [], ["retrieval"]) == (envelope["ok"], report["code"], report["loaded"], report["areas"])

    def test_artifact_put_through_the_daemon_loads_nothing_heavy(self, project: tuple[Path, dict[str, str]]) -> None:
        """memoree artifact put stores its note through the daemon with the same lean import set,
        and a search then finds it."""
        folder, env = project
        envelope, report = probe(folder, env, "artifact", "put", "-", "--title", "lean", stdin=b"a lean start note")
        assert (True, 0, [], ["entities"]) == (envelope["ok"], report["code"], report["loaded"], report["areas"])
        found, _ = probe(folder, env, "search", "lean", "start")
        assert [envelope["result"]["artifact_id"]] == [hit["entity_id"] for hit in found["result"]["hits"]]


    @pytest.mark.parametrize("argv", [["--help"], ["search", "--help"], ["artifact", "put", "--help"]])
    def test_help_is_plain_text_and_loads_nothing_heavy(self, argv: list[str], tmp_path: Path) -> None:
        """--help prints plain text (no box drawing) and imports none of the heavy modules, rich included."""
        result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(HEAVY), *argv], cwd=tmp_path,
                                env=clean_env(MEMOREE_HOME=str(tmp_path / "home")), capture_output=True, timeout=60)
        report = json.loads(result.stderr.decode().strip().splitlines()[-1])
        help_text = result.stdout.decode()
        assert (0, [], True, False) == (report["code"], report["loaded"], help_text.startswith("Usage: memoree"),
                                        any(char in help_text for char in "╭│╰"))


class TestAreas:
    def test_every_top_level_word_names_the_areas_that_register_it(self) -> None:
        """AREAS_OF lists, for each top-level command word, exactly the areas whose commands it holds."""
        from memoree.cli.app import app
        from memoree.cli.launch import AREAS_OF

        def areas(info_callbacks: list) -> set[str]:
            return {callback.__module__.removeprefix("memoree.cli.") for callback in info_callbacks} - {"common"}

        def callbacks(group: typer.Typer) -> list:
            found = [info.callback for info in group.registered_commands]
            for sub in group.registered_groups:
                found += callbacks(sub.typer_instance)
            return found

        registered = {(info.name or typer.main.get_command_name(info.callback.__name__)): areas([info.callback])
                      for info in app.registered_commands}
        registered.update({info.name: areas(callbacks(info.typer_instance)) for info in app.registered_groups})
        assert registered == {word: set(owners) for word, owners in AREAS_OF.items()}

    def test_command_word_skips_root_options_and_their_values(self) -> None:
        """The sub-command word is found after root flags and root options that take a value."""
        from memoree.cli.launch import command_word

        assert "search" == command_word(["--pretty", "--data-dir", "search", "search", "x"])
        assert "artifact" == command_word(["--endpoint", "unix:///s", "artifact", "put", "-"])
        assert command_word(["--help"]) is None
        assert command_word(["--", "search"]) is None

    @pytest.mark.parametrize("argv", [["search", "--help"], ["context", "build", "--help"], ["serch", "x"]])
    def test_the_console_entry_answers_as_the_whole_app_does(self, argv: list[str], tmp_path: Path) -> None:
        """Built for one word (or for a typo, the whole command), the entry prints what the whole
        app prints, with the same exit status."""
        whole = ("import sys; from memoree.cli.app import app; "
                 "app(args=sys.argv[1:], prog_name='memoree')")
        env = clean_env(COLUMNS="100", MEMOREE_HOME=str(tmp_path))
        entry = subprocess.run([sys.executable, "-m", "memoree", *argv], capture_output=True, env=env, timeout=60)
        full = subprocess.run([sys.executable, "-c", whole, *argv], capture_output=True, env=env, timeout=60)
        assert (full.returncode, full.stdout, full.stderr) == (entry.returncode, entry.stdout, entry.stderr)
