"""The trust boundary's smaller rules, each against a real file, process or socket.

Files are created new (``O_EXCL|O_NOFOLLOW``, unguessable temporary names), so a planted link is
never written through; ``memoree call`` refuses duplicate JSON keys and a non-string ``op`` with an
envelope, and a reader that goes away (``| head -c 0``) gets no traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from memoree.agents import pending

REPO_ROOT = Path(__file__).resolve().parents[2]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")}
    env.update(extra)
    return env


class TestCreatedFiles:
    """No file the store writes follows a link someone planted."""

    def test_a_checkpoint_never_writes_through_a_planted_link(self, tmp_path: Path) -> None:
        """A link planted at the temporary name the old code used (`.<note>.<pid>.tmp`) pointing at
        a root-only file: the checkpoint is written, the file is untouched."""
        folder = tmp_path / "quarantine"
        victim = tmp_path / "victim"
        victim.write_text("root only\n")
        os.chmod(victim, 0o600)
        note_path = pending._note_path(pending._private_dir(folder), "s1")
        (note_path.parent / f".{note_path.name}.{os.getpid()}.tmp").symlink_to(victim)
        pending.write_checkpoint(folder, "s1", "the note", task=None, context=None, context_source=None)
        assert "root only\n" == victim.read_text()
        assert "the note" == pending.read_note(folder, "s1").text

    def test_the_database_is_not_created_through_a_link(self, tmp_path: Path) -> None:
        """A link planted where the store's database goes is refused, not followed."""
        import pytest

        from memoree.eventlog.db import create_private

        victim = tmp_path / "victim"
        (tmp_path / "memoree.sqlite3").symlink_to(victim)
        with pytest.raises(OSError):
            create_private(tmp_path / "memoree.sqlite3")
        assert not victim.exists()


def call(stdin: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "memoree", "call", "--in-process", *args], input=stdin,
                          capture_output=True, env=clean_env(), cwd=REPO_ROOT, timeout=60)


class TestStrictJsonInCall:
    """`memoree call` answers every bad frame with an envelope, never a traceback."""

    def test_duplicate_keys_are_invalid_request(self, tmp_path: Path) -> None:
        """Two `op` keys (which two parsers could read differently) are INVALID_REQUEST, exit 2."""
        result = call(b'{"v":1,"request_id":"r","op":"capabilities","op":"doctor","input":{}}',
                      "--data-dir", str(tmp_path / "data"))
        envelope = json.loads(result.stdout)
        assert (2, "INVALID_REQUEST") == (result.returncode, envelope["error"]["code"])
        assert "duplicate key 'op'" in envelope["error"]["message"]

    def test_duplicate_keys_inside_input_are_invalid_request(self, tmp_path: Path) -> None:
        """A repeated key deeper in the document is refused the same way."""
        result = call(b'{"v":1,"request_id":"r","op":"capabilities","input":{"a":1,"a":2}}',
                      "--data-dir", str(tmp_path / "data"))
        assert "INVALID_REQUEST" == json.loads(result.stdout)["error"]["code"]

    def test_a_non_string_op_is_an_envelope(self, tmp_path: Path) -> None:
        """`"op": ["x"]` is an INVALID_REQUEST envelope, not a traceback."""
        for op in (b'["x"]', b'{"a":1}', b"7", b"null"):
            result = call(b'{"v":1,"request_id":"r","op":' + op + b',"input":{}}', "--data-dir", str(tmp_path / "data"))
            assert b"Traceback" not in result.stderr, result.stderr
            assert "INVALID_REQUEST" == json.loads(result.stdout)["error"]["code"], op

    def test_a_closed_pipe_is_quiet(self, tmp_path: Path) -> None:
        """`memoree call … | head -c 0` prints no BrokenPipeError traceback."""
        request = '{"v":1,"request_id":"r","op":"schema","input":{}}'
        shell = (f"echo '{request}' | {sys.executable} -m memoree call --in-process --data-dir {tmp_path / 'data'} "
                 "| head -c 0")
        result = subprocess.run(["sh", "-c", shell], capture_output=True, env=clean_env(), cwd=REPO_ROOT, timeout=60)
        assert b"Traceback" not in result.stderr and b"BrokenPipe" not in result.stderr, result.stderr


class TestReplayOfAPurgedPut:
    """A retried put whose artifact was purged since then says so instead of a silent ok."""

    def test_the_replay_carries_a_warning_naming_the_purge(self, tmp_path: Path) -> None:
        """Put, purge, then the identical put (same key, as MCP derives it): ok with the original
        result, plus a `replayed_purged_artifact` warning that names the artifact and the purge."""
        from memoree.service.service import Service
        from tests.conftest import Caller

        service = Service(tmp_path / "data")
        try:
            call = Caller(service)
            put = {"kind": "note", "title": "t", "content": {"type": "text", "data": "erase me"}}
            first = call.ok("artifact.put", put, key="same")["result"]
            call.ok("artifact.purge", {"artifact_id": first["artifact_id"], "reason": "gdpr"}, key="purge")
            again, _ = call.raw({"v": 1, "request_id": "r2", "op": "artifact.put", "input": put,
                                 "idempotency_key": "same", "context": {"workspace_id": "wsp_test", "project_id": "prj_test"}})
        finally:
            service.close()
        assert again["ok"] and again["result"]["created"] is False
        [warning] = again["warnings"]
        assert warning["code"] == "replayed_purged_artifact"
        assert first["artifact_id"] in warning["message"] and "purged" in warning["message"]


class TestMarkerNames:
    """`memoree init` writes a marker memoree itself can read, whatever the project's name."""

    def test_a_name_with_an_emoji_reads_back(self, tmp_path: Path) -> None:
        """`init --name "Café 😀 notes"` then `context.resolve` in that folder: resolved from the
        marker, no CONFIG_ERROR (JSON's surrogate-pair escapes are not TOML)."""
        project = tmp_path / "proj"
        project.mkdir()
        env = clean_env(MEMOREE_DATA_DIR=str(tmp_path / "data"))
        init = subprocess.run([sys.executable, "-m", "memoree", "init", "--name", "Café 😀 notes"],
                              capture_output=True, env=env, cwd=project, timeout=60)
        assert 0 == init.returncode, init.stdout + init.stderr
        resolved = subprocess.run([sys.executable, "-m", "memoree", "call", "--in-process"],
                                  input=b'{"v":1,"request_id":"r","op":"context.resolve","input":{}}',
                                  capture_output=True, env=env, cwd=project, timeout=60)
        envelope = json.loads(resolved.stdout)
        assert envelope["ok"] and envelope["result"]["context"]["resolved_from"] == "marker", envelope
