"""``memoree checkpoint`` and ``memoree pending``: a private quarantine no read path ever sees."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from memoree.protocol.ops import OPS
from tests.agent.conftest import Cli

SECRET = "quetzal-7731"
NOTE = f"The zebra gate code is {SECRET}; the zebra keeper decided to move feeding to noon."


def quarantine(cli: Cli) -> Path:
    return cli.home / "data-pending"


def store_files(cli: Cli) -> list[Path]:
    """Every file of the store: database, WAL, CAS blobs, keys."""
    return [p for p in (cli.home / "data").rglob("*") if p.is_file()]


class TestCheckpoint:
    def test_notes_are_private_and_last_write_wins(self, cli: Cli) -> None:
        """One note per session in a 0700 folder of 0600 files; a second checkpoint replaces the first."""
        first = cli.ok("checkpoint", "--session", "s1", "--task", "t1", "first", "draft")
        second = cli.ok("checkpoint", "--session", "s1", "--task", "t1", NOTE)
        files = list(quarantine(cli).iterdir())
        assert (False, True, 1) == (first["replaced"], second["replaced"], len(files))
        assert 0o700 == stat.S_IMODE(quarantine(cli).stat().st_mode)
        assert 0o600 == stat.S_IMODE(files[0].stat().st_mode)
        assert NOTE == cli.ok("pending", "show", "s1")["text"]
        listed = cli.ok("pending", "list")["pending"]
        assert [("s1", "t1", len(NOTE.encode()))] == [(n["session"], n["task"], n["bytes"]) for n in listed]
        assert listed[0]["context"]["task_id"].startswith("tsk_") and "text" not in listed[0]

    def test_notes_are_bounded(self, cli: Cli) -> None:
        """A note over 64 KiB is refused with INVALID_REQUEST (exit 2) and nothing is kept."""
        document, code = cli.json("checkpoint", "--session", "big", "-", stdin=b"x" * (64 * 1024 + 1))
        assert ("INVALID_REQUEST", 2) == (document["error"]["code"], code)
        assert [] == cli.ok("pending", "list")["pending"]

    def test_no_read_path_sees_checkpoint_text(self, cli: Cli) -> None:
        """Search, recall and context.build never return checkpoint text, and the store never holds it."""
        cli.ok("remember", "--raw", "--apply", "The zebra enclosure is north of the gate; the keeper feeds at dawn.")
        cli.ok("checkpoint", "--session", "s1", NOTE)
        reads = {"search": {"query": "zebra gate code"}, "memory.recall": {"query": "zebra gate code"},
                 "context.build": {"query": "zebra gate code"}}
        for op, payload in reads.items():
            if op in OPS:
                envelope = cli.call(op, payload)
                assert envelope["ok"], envelope
                shown = json.dumps(envelope["result"])
                assert ("enclosure" in shown, SECRET in shown) == (True, False), op
        assert all(SECRET.encode() not in path.read_bytes() for path in store_files(cli))


class TestPending:
    def test_preview_writes_nothing_and_apply_consumes_the_note(self, cli: Cli) -> None:
        """pending preview plans like remember; pending apply writes through remember and removes the note."""
        quote = "the zebra keeper decided to move feeding to noon"
        cli.fake_compiler({"claims": [{"claim_type": "decision", "statement": "Zebra feeding moves to noon.",
                                       "quotes": [quote]}]})
        cli.ok("checkpoint", "--session", "s1", "--task", "feeding", NOTE)
        head = cli.head()
        preview = cli.ok("pending", "preview", "s1")
        assert ("preview", 1, head) == (preview["mode"], preview["claims_accepted"], cli.head())
        applied = cli.ok("pending", "apply", "s1")
        assert (2, True, []) == (applied["created"], applied["note_removed"], cli.ok("pending", "list")["pending"])
        artifact = applied["artifact"]
        assert {"source": "memoree pending", "session": "s1", "task": "feeding"} == artifact["provenance"]
        assert artifact["context"]["task_id"] == preview["context"]["task_id"]
        document, code = cli.json("pending", "apply", "s1")
        assert ("NOT_FOUND", 3) == (document["error"]["code"], code)

    def test_failed_apply_keeps_the_note(self, cli: Cli) -> None:
        """When the compiler fails, pending apply writes nothing and the note stays in quarantine."""
        cli.fake_compiler("garbage")
        cli.ok("checkpoint", "--session", "s2", NOTE)
        document, code = cli.json("pending", "apply", "s2")
        assert ("REASONER_ERROR", 1, 0) == (document["error"]["code"], code, cli.head())
        assert ["s2"] == [n["session"] for n in cli.ok("pending", "list")["pending"]]

    def test_drop_discards_without_writing(self, cli: Cli) -> None:
        """pending drop removes the note and writes nothing to the store."""
        cli.ok("checkpoint", "--session", "s3", NOTE)
        assert cli.ok("pending", "drop", "s3")["dropped"]
        assert ([], 0) == (cli.ok("pending", "list")["pending"], cli.head())
