"""The log proves itself: tampering is named at its first bad position, recovery is verified."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from memoree.admin import verify as audit, backup, transfer

from memoree.eventlog import sealing
from memoree.service.engine import Engine
from memoree.errors import InvalidRequest
from memoree.eventlog.checkpoints import list_checkpoints
from memoree.projections.base import owned_tables
from tests.conftest import Caller

VERIFIER = Path(__file__).resolve().parents[2] / "tools" / "audit" / "verify_log.py"


def populate(call: Caller, n: int = 12) -> None:
    for i in range(n):
        art = call.put_text(f"evidence number {i} " + ("x" * 20000 if i == 3 else ""), key=f"p{i}")
        if i % 4 == 0:
            call.ok("claim.assert", {"claim_type": "fact", "statement": f"claim {i}",
                                     "evidence": [{"artifact_id": art["artifact_id"], "revision_id": art["revision_id"],
                                                   "start_byte": 0, "end_byte": 8}]}, key=f"c{i}")
        if i in (4, 9):
            sealing.seal(call.service.engine)


def without_query_time(document: Any) -> Any:
    """A read's answer minus ``evaluated_at``, the moment the query ran."""
    if isinstance(document, dict):
        return {k: without_query_time(v) for k, v in document.items() if k != "evaluated_at"}
    if isinstance(document, list):
        return [without_query_time(v) for v in document]
    return document


def tamper(engine: Engine, sql: str, *params: Any) -> None:
    engine.conn.execute("DROP TRIGGER IF EXISTS events_no_update")
    engine.conn.execute("DROP TRIGGER IF EXISTS checkpoints_no_update")
    engine.conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
    engine.conn.execute(sql, params)


def first_issue(engine: Engine) -> dict[str, Any]:
    report = audit.verify(engine)
    assert not report["ok"]
    return report["issues"][0]


def run_verifier(export: Path, pubkey: str, *extra: str) -> tuple[int, dict[str, Any]]:
    result = subprocess.run([sys.executable, str(VERIFIER), str(export), "--pubkey", pubkey, *extra],
                            capture_output=True, text=True, timeout=60)
    return result.returncode, json.loads(result.stdout)


def export_lines(call: Caller, tmp_path: Path) -> tuple[Path, list[dict[str, Any]], str]:
    engine = call.service.engine
    path = tmp_path / "export.ndjson"
    transfer.export(engine, path)
    return path, [json.loads(line) for line in path.read_text().splitlines()], engine.keys.current().public_b32


def write_lines(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


class TestVerify:
    def test_untouched_store_verifies_clean(self, call: Caller, tmp_path: Path) -> None:
        """A healthy store verifies ok in every part, and so does its export."""
        populate(call)
        report = audit.verify(call.service.engine)
        assert report["ok"], report["issues"]
        assert all(p["ok"] for p in report["projections"].values())
        assert 2 == report["checked_checkpoints"]
        path, _, pubkey = export_lines(call, tmp_path)
        code, verdict = run_verifier(path, pubkey)
        assert (0, True) == (code, verdict["ok"])

    def test_installed_console_script_verifies_without_memoree(self, call: Caller, tmp_path: Path) -> None:
        """``memoree-verify-log`` (installed beside the interpreter) verifies an export, loading no memoree module."""
        populate(call, 4)
        sealing.seal(call.service.engine)
        path, _, pubkey = export_lines(call, tmp_path)
        script = Path(sys.executable).parent / "memoree-verify-log"
        assert script.is_file(), "reinstall the package: pip install -e ."
        result = subprocess.run([str(script), str(path), "--pubkey", pubkey], capture_output=True, text=True, timeout=60)
        assert (0, True) == (result.returncode, json.loads(result.stdout)["ok"])
        probe = ("import sys, memoree_audit.verify_log as v; "
                 "print(v.__file__, sorted(m for m in sys.modules if m == 'memoree' or m.startswith('memoree.')))")
        shipped, loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                         timeout=60, cwd=tmp_path).stdout.split(" ", 1)
        assert (VERIFIER.resolve(), "[]") == (Path(shipped).resolve(), loaded.strip())

    def test_flipped_event_byte_is_named(self, call: Caller, tmp_path: Path) -> None:
        """Changing one byte of event 5's stored bytes is reported at commit_seq 5."""
        populate(call)
        engine = call.service.engine
        path, lines, pubkey = export_lines(call, tmp_path)
        data = bytearray(engine.conn.execute("SELECT data FROM events WHERE commit_seq = 5").fetchone()[0])
        data[20] ^= 1
        tamper(engine, "UPDATE events SET data = ? WHERE commit_seq = 5", bytes(data))
        assert 5 == first_issue(engine)["commit_seq"]
        event = next(x for x in lines if x.get("commit_seq") == 5 and x["kind"] == "event")
        raw = bytearray(base64.b64decode(event["data"]))
        raw[20] ^= 1
        event["data"] = base64.b64encode(bytes(raw)).decode()
        write_lines(path, lines)
        code, verdict = run_verifier(path, pubkey)
        assert (1, 5) == (code, verdict["first_bad_commit_seq"])

    def test_reordered_events_are_named(self, call: Caller, tmp_path: Path) -> None:
        """Swapping events 2 and 3 is reported at commit_seq 2."""
        populate(call)
        engine = call.service.engine
        path, lines, pubkey = export_lines(call, tmp_path)
        rows = {seq: engine.conn.execute("SELECT data, prev_hash, hash FROM events WHERE commit_seq = ?", (seq,)).fetchone() for seq in (2, 3)}
        tamper(engine, "UPDATE events SET data = ?, prev_hash = ?, hash = ? WHERE commit_seq = 2", *rows[3])
        tamper(engine, "UPDATE events SET data = ?, prev_hash = ?, hash = ? WHERE commit_seq = 3", *rows[2])
        assert 2 == first_issue(engine)["commit_seq"]
        events = [x for x in lines if x["kind"] == "event"]
        events[1], events[2] = {**events[2], "commit_seq": 2}, {**events[1], "commit_seq": 3}
        write_lines(path, [lines[0], *events, *[x for x in lines if x["kind"] not in ("event", "header")]])
        code, verdict = run_verifier(path, pubkey)
        assert (1, 2) == (code, verdict["first_bad_commit_seq"])

    def test_deleted_last_event_after_a_seal_is_named(self, call: Caller, tmp_path: Path) -> None:
        """Removing the last sealed event is reported at that position, from the signed size."""
        populate(call)
        engine = call.service.engine
        sealing.seal(engine)
        path, lines, pubkey = export_lines(call, tmp_path)
        head = engine.head()
        tamper(engine, "DELETE FROM events WHERE commit_seq = ?", head)
        assert head == first_issue(engine)["commit_seq"]
        write_lines(path, [x for x in lines if not (x["kind"] == "event" and x["commit_seq"] == head)])
        code, verdict = run_verifier(path, pubkey)
        assert (1, head) == (code, verdict["first_bad_commit_seq"])

    def test_flipped_checkpoint_signature_is_named(self, call: Caller, tmp_path: Path) -> None:
        """A damaged signature on the first checkpoint is reported at that checkpoint's size."""
        populate(call)
        engine = call.service.engine
        path, lines, pubkey = export_lines(call, tmp_path)
        first = list_checkpoints(engine.conn)[0]
        bad = bytearray(first.signature)
        bad[0] ^= 1
        tamper(engine, "UPDATE checkpoints SET signature = ? WHERE checkpoint_seq = 1", bytes(bad))
        issue = first_issue(engine)
        assert ("signature", first.tree_size) == (issue["kind"], issue["commit_seq"])
        cp = next(x for x in lines if x["kind"] == "checkpoint")
        cp["signature"] = base64.b64encode(bytes(bad)).decode()
        write_lines(path, lines)
        code, verdict = run_verifier(path, pubkey)
        assert (1, "signature", first.tree_size) == (code, verdict["where"], verdict["first_bad_commit_seq"])

    def test_flipped_blob_byte_is_reported(self, call: Caller) -> None:
        """A damaged CAS file is reported as a blob issue, never ok."""
        populate(call)
        engine = call.service.engine
        files = [p for p in (engine.data_dir / "blobs").rglob("*") if p.is_file() and p.parent.name != ".tmp"]
        data = bytearray(files[0].read_bytes())
        data[0] ^= 1
        files[0].write_bytes(bytes(data))
        assert "blob" == first_issue(engine)["kind"]

    def test_verify_scratch_lives_in_the_data_dir_and_dead_ones_are_removed(self, call: Caller, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
        """Verify builds its scratch in the (private) data dir, never the shared temp dir; a scratch
        folder whose process is gone is deleted by the next verify, which leaves none of its own."""
        import tempfile

        shared_tmp = tmp_path / "shared-tmp"
        shared_tmp.mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(shared_tmp))
        data_dir = call.service.engine.data_dir
        dead = data_dir / ".rebuild-999999999-left"
        dead.mkdir()
        populate(call)
        assert audit.verify(call.service.engine)["ok"]
        assert not list(data_dir.glob(".rebuild-*"))
        assert not list(shared_tmp.iterdir())

    def test_a_text_index_that_lost_a_row_is_reported(self, call: Caller) -> None:
        """A full-text index missing a document its content table still holds is a projection
        issue (the rows compare equal; FTS5's content check finds it)."""
        populate(call)
        conn = call.service.engine.conn
        doc_id, title, body, scope = conn.execute(
            "SELECT doc_id, title, body, scope FROM artifact_search_text LIMIT 1").fetchone()
        conn.execute("INSERT INTO artifact_fts(artifact_fts, rowid, title, body, scope) "
                     "VALUES('delete', ?, ?, ?, ?)", (doc_id, title, body, scope))
        issue = first_issue(call.service.engine)
        assert ("projection", True) == (issue["kind"], "artifact_fts" in issue["message"])

    def test_a_lagging_projection_is_reported(self, call: Caller) -> None:
        """A projection row changed behind the log's back differs from the replay."""
        populate(call)
        engine = call.service.engine
        engine.conn.execute("UPDATE artifacts SET kind = 'forged' WHERE id = (SELECT min(id) FROM artifacts)")
        issue = first_issue(engine)
        assert "projection" == issue["kind"] and "entities" in issue["message"]

    def test_since_detects_a_rewritten_history(self, call: Caller, tmp_path: Path) -> None:
        """--since passes for a grown log and fails when a trusted checkpoint's root was rewritten."""
        populate(call)
        path, lines, pubkey = export_lines(call, tmp_path)
        trusted = next(x for x in lines if x["kind"] == "checkpoint")
        since = tmp_path / "trusted.json"
        since.write_text(json.dumps(trusted))
        assert 0 == run_verifier(path, pubkey, "--since", str(since))[0]
        since.write_text(json.dumps({**trusted, "root": "00" * 32}))
        code, verdict = run_verifier(path, pubkey, "--since", str(since))
        assert (1, "since") == (code, verdict["where"])


class TestProofs:
    def test_inclusion_and_consistency_proofs_verify(self, call: Caller) -> None:
        """log prove and log consistency give proofs that the RFC 9162 verifiers accept."""
        from memoree.eventlog.checkpoints import HASHER
        from memoree.eventlog.merkle import verify_consistency, verify_inclusion

        populate(call)
        engine = call.service.engine
        proof = sealing.prove(engine, 3)
        assert verify_inclusion(HASHER, 2, proof["tree_size"], bytes.fromhex(proof["leaf_hash"]),
                                [bytes.fromhex(x) for x in proof["proof"]], bytes.fromhex(proof["root"]))
        both = sealing.consistency(engine, 1, 2)
        assert verify_consistency(HASHER, both["old"]["tree_size"], both["new"]["tree_size"],
                                  [bytes.fromhex(x) for x in both["proof"]], bytes.fromhex(both["old"]["root"]),
                                  bytes.fromhex(both["new"]["root"]))

    def test_rotation_keeps_old_signatures_valid(self, call: Caller, tmp_path: Path) -> None:
        """After a key rotation, checkpoints of both epochs verify."""
        populate(call)
        engine = call.service.engine
        engine.rotate_key()
        call.put_text("after rotation", key="after")
        sealing.seal(engine)
        assert {1, 2} == {cp.key_epoch for cp in list_checkpoints(engine.conn)}
        assert audit.verify(engine)["ok"]
        path, _, pubkey = export_lines(call, tmp_path)
        assert 0 == run_verifier(path, pubkey)[0]


def tables_snapshot(engine: Engine) -> dict[str, Any]:
    engine.catch_up_vectors()  # the vectors level with the log, as a replay leaves them
    tables = [t for p in engine.projectors for t in owned_tables(p)]
    return {t: sorted(map(repr, engine.conn.execute(f"SELECT * FROM {t}").fetchall())) for t in tables}


class TestRecovery:
    def test_export_import_reproduces_projections_and_roots(self, call: Caller, tmp_path: Path) -> None:
        """Export, import into an empty data dir: identical projections and checkpoint roots."""
        populate(call)
        engine = call.service.engine
        transfer.export(engine, tmp_path / "e.ndjson", tmp_path / "blobs")
        transfer.import_log(tmp_path / "e.ndjson", tmp_path / "imported", tmp_path / "blobs")
        imported = Engine(tmp_path / "imported")
        assert tables_snapshot(engine) == tables_snapshot(imported)
        assert [c.root for c in list_checkpoints(engine.conn)] == [c.root for c in list_checkpoints(imported.conn)]
        imported.close()

    def test_import_without_blobs_is_refused_up_front_with_a_hint(self, call: Caller, tmp_path: Path) -> None:
        """An export made without --blobs, whose artifacts' bytes are not in it, is refused before
        anything is built (INVALID_REQUEST naming --blobs, no target, no staging left); the export
        itself says so in a warning."""
        populate(call, 3)
        exported = transfer.export(call.service.engine, tmp_path / "e.ndjson")
        assert exported["referenced_blobs"] and "--blobs" in exported["warning"]
        with pytest.raises(InvalidRequest) as refused:
            transfer.import_log(tmp_path / "e.ndjson", tmp_path / "imported")
        assert "--blobs" in (refused.value.hint or "")
        assert not (tmp_path / "imported").exists()
        assert not list(tmp_path.glob(".memoree-import-stage-*"))

    def test_import_refuses_a_non_empty_target(self, call: Caller, tmp_path: Path) -> None:
        """Importing over an existing store is refused."""
        populate(call, 2)
        transfer.export(call.service.engine, tmp_path / "e.ndjson")
        (tmp_path / "busy").mkdir()
        (tmp_path / "busy" / "file").write_text("x")
        with pytest.raises(InvalidRequest):
            transfer.import_log(tmp_path / "e.ndjson", tmp_path / "busy")

    def test_backup_restores_to_an_identical_store(self, call: Caller, tmp_path: Path) -> None:
        """A restored backup has the same projections and answers search, recall and context.build
        exactly like the original (apart from when each query ran)."""
        populate(call)
        engine = call.service.engine
        result = backup.create(engine, tmp_path / "bk")
        assert engine.head() == result["commit_seq"]
        backup.restore(tmp_path / "bk", tmp_path / "restored")
        restored = Engine(tmp_path / "restored")
        assert tables_snapshot(engine) == tables_snapshot(restored)
        restored.close()
        from memoree.service.service import Service

        twin = Caller(Service(tmp_path / "restored"))
        # One instant for both stores: recency counts whole seconds of age, so two reads that
        # straddle a second (a loaded machine) would rank by different bonuses.
        instant = engine.handler.clock()
        engine.handler.clock = twin.service.engine.handler.clock = lambda: instant
        assert twin.ok("search", {"query": "evidence number"})["result"]["hits"]
        for op, payload in (("search", {"query": "evidence number"}), ("search", {"query": "claim"}),
                            ("memory.recall", {"query": "evidence number 4"}),
                            ("context.build", {"query": "evidence"})):
            original, copy = call.ok(op, payload)["result"], twin.ok(op, payload)["result"]
            assert without_query_time(original) == without_query_time(copy), op
        twin.service.close()

    @pytest.mark.parametrize("case", ["existing", "inside", "symlink"])
    def test_backup_refuses_unsafe_destinations(self, call: Caller, tmp_path: Path, case: str) -> None:
        """An existing path, a path inside the data dir or one through a symlink is refused."""
        populate(call, 2)
        engine = call.service.engine
        if case == "existing":
            (tmp_path / "taken").mkdir()
            destination = tmp_path / "taken"
        elif case == "inside":
            destination = engine.data_dir / "bk"
        else:
            (tmp_path / "real").mkdir()
            (tmp_path / "link").symlink_to(tmp_path / "real")
            destination = tmp_path / "link" / "bk"
        envelope = call("backup.create", {"destination": str(destination)}, context=None)
        assert "INVALID_REQUEST" == envelope["error"]["code"]
        assert not (tmp_path / "real" / "bk").exists()

    def test_sigkill_during_backup_leaves_no_partial_destination(self, tmp_path: Path) -> None:
        """A backup killed at any moment leaves the destination absent or complete; the next one cleans up."""
        data = tmp_path / "data"
        engine = Engine(data)
        from memoree.service.service import Service

        service = Service(data)
        caller = Caller(service)
        for i in range(40):
            caller.put_text(f"blob {i} " + "y" * 40000, key=f"b{i}")
        service.close()
        engine.close()
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")}
        for attempt, delay in enumerate((0.05, 0.2, 0.5)):
            destination = tmp_path / f"bk{attempt}"
            proc = subprocess.Popen([sys.executable, "-m", "memoree", "--in-process", "--data-dir", str(data),
                                     "backup", "create", str(destination)], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            if destination.exists():
                restored = Engine(destination)
                assert audit.verify(restored)["ok"]
                restored.close()
        final = backup.create(Engine(data), tmp_path / "final")
        assert final["commit_seq"] >= 40
        assert not list(tmp_path.glob(".memoree-backup-stage-*"))


class TestPurge:
    def test_purge_erases_the_bytes_everywhere_and_the_log_still_verifies(self, call: Caller, tmp_path: Path) -> None:
        """After purge a canary is nowhere in the data dir or a new backup; verify stays clean."""
        canary = "zq-canary-7c1d"
        big = call.put_text(f"{canary} " * 3000, key="big")
        small = call.put_text(f"small {canary} text", key="small")
        call.put_text("unrelated text", key="other")
        for art, key in ((big, "pb"), (small, "ps")):
            assert call.ok("artifact.purge", {"artifact_id": art["artifact_id"], "reason": "erasure request"}, key=key)["result"]["physically_erased"]
        engine = call.service.engine
        report = audit.verify(engine)
        assert report["ok"], report["issues"]
        assert len(report["purged_blobs"]) == 2
        backup.create(engine, tmp_path / "bk")
        for folder in (engine.data_dir, tmp_path / "bk"):
            for path in folder.rglob("*"):
                if path.is_file():
                    assert canary.encode() not in path.read_bytes(), path

    def test_reading_purged_bytes_names_the_purge(self, call: Caller) -> None:
        """artifact.get with content answers NOT_FOUND naming the purge; metadata stays readable."""
        art = call.put_text("to be erased", key="a")
        call.ok("artifact.purge", {"artifact_id": art["artifact_id"], "reason": "asked"}, key="p")
        envelope = call("artifact.get", {"artifact_id": art["artifact_id"]})
        assert ("NOT_FOUND", True) == (envelope["error"]["code"], envelope["error"]["details"]["purged"])
        meta = call.ok("artifact.get", {"artifact_id": art["artifact_id"], "include_content": False})["result"]
        assert (True, "forgotten") == (meta["physically_erased"], meta["status"])

    def test_shared_bytes_survive_a_purge_of_one_owner(self, call: Caller) -> None:
        """Identical bytes kept by another live artifact are not erased from the CAS."""
        first = call.put_text("same bytes", key="one")
        second = call.put_text("same bytes", key="two")
        call.ok("artifact.purge", {"artifact_id": first["artifact_id"], "reason": "asked"}, key="p")
        assert "same bytes" == call.ok("artifact.get", {"artifact_id": second["artifact_id"]})["result"]["content"]["data"]
        assert audit.verify(call.service.engine)["ok"]

    def test_purge_outside_the_ambient_project_is_a_scope_violation(self, call: Caller) -> None:
        """Purging another project's artifact is refused and writes nothing."""
        art = call.put_text("mine", key="m")
        head = call.head()
        envelope = call("artifact.purge", {"artifact_id": art["artifact_id"], "reason": "x"}, key="p",
                        context={"workspace_id": "wsp_test", "project_id": "prj_other"})
        assert "SCOPE_VIOLATION" == envelope["error"]["code"]
        assert head == call.head()
