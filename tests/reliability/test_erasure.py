"""Erasure: after a purge, an artifact's canary bytes are nowhere on disk, nor in a new backup.

A unique canary string is placed in the content of an inline artifact and of an external-blob
artifact (each also revised once, so two revisions hold it) served by a real daemon whose log
file lives in the data dir. The canary is searchable first (so it really reached the index).
After ``memoree purge ARTIFACT_ID --reason`` (the CLI, through the daemon) for one and the
``artifact.purge`` op for the other, every byte of every file under the data dir (database,
WAL, -shm, CAS blobs, keys, the daemon log) is scanned for the canary, while the daemon runs
and again after it stops; then a fresh backup is scanned too. Skipped when no purge exists.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from memoree.protocol.ops import OPS

from .conftest import Figures
from .harness import CTX, REPO_ROOT, DaemonProcess, clean_env, request

pytestmark = pytest.mark.skipif("artifact.purge" not in OPS,
                                reason="no purge exists (no artifact.purge op in memoree/ops.py OPS)")


def files_containing(root: Path, needles: list[bytes]) -> list[str]:
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_socket():
            data = path.read_bytes()
            found.extend(f"{path.relative_to(root)} holds {needle[:12]!r}…" for needle in needles if needle in data)
    return found


def canary_forms(canary: str) -> list[bytes]:
    """The canary as UTF-8, as UTF-16 (what some indexes keep), and its distinctive middle part."""
    return [canary.encode(), canary.encode("utf-16-le"), canary[4:-4].encode()]


class TestErasure:
    """Purged content leaves no trace in the data dir, the WAL, the CAS, the logs or a later backup."""

    def test_purged_canary_is_nowhere_on_disk_or_in_a_new_backup(self, tmp_path: Path, figures: Figures,
                                                                 reaper: list) -> None:
        """Canary in inline and external content, revised, indexed; purged; scanned everywhere."""
        canary = "cnry" + secrets.token_hex(12) + "endc"
        data = tmp_path / "data"
        daemon = DaemonProcess(data, tmp_path / "run" / "d.sock")
        daemon.log_path = data / "memoreed.log"
        reaper.append(daemon)
        daemon.start()
        targets = []
        for label, body in (("inline", f"secret {canary} inline"), ("external", f"secret {canary} " + "padding " * 4000)):
            put = daemon.call(request("artifact.put", {"kind": "note", "title": f"erasure {label}",
                                                       "content": {"type": "text", "data": body}}, key=f"er-{label}"))
            assert put["ok"], put
            revised = daemon.call(request("artifact.revise", {"artifact_id": put["result"]["artifact_id"],
                                                              "if_revision": put["result"]["revision_id"],
                                                              "content": {"type": "text", "data": body + f" again {canary}"}},
                                          key=f"er-rev-{label}"))
            assert revised["ok"], revised
            targets.append(put["result"]["artifact_id"])
        keeper = daemon.call(request("artifact.put", {"kind": "note", "title": "unrelated",
                                                      "content": {"type": "text", "data": "nothing secret here"}}, key="er-keep"))
        assert keeper["ok"]
        found = daemon.call(request("search", {"query": canary}))
        assert found["ok"] and found["result"]["hits"], "the canary never reached the index"
        cli = subprocess.run([sys.executable, "-m", "memoree", "--endpoint", str(daemon.endpoint), "purge", targets[0],
                              "--reason", "erasure test"], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60,
                             env=clean_env(MEMOREE_CONTEXT=json.dumps(CTX)))
        assert 0 == cli.returncode and json.loads(cli.stdout)["ok"], cli.stdout + cli.stderr
        purged = daemon.call(request("artifact.purge", {"artifact_id": targets[1], "reason": "erasure test"}, key="er-purge"))
        assert purged["ok"], purged
        assert not daemon.call(request("search", {"query": canary}))["result"]["hits"]
        while_running = files_containing(data, canary_forms(canary))
        backup_dir = tmp_path / "backup"
        made = daemon.call(request("backup.create", {"destination": str(backup_dir)}, context=None))
        assert made["ok"], made
        daemon.stop()
        after_stop = files_containing(data, canary_forms(canary))
        in_backup = files_containing(backup_dir, canary_forms(canary))
        figures.add("erasure (purge)", operations=7, faults=2, acked_losses=0,
                    note=f"{len(while_running) + len(after_stop) + len(in_backup)} traces found")
        assert [] == while_running
        assert [] == after_stop
        assert [] == in_backup

    def test_bytes_stored_again_after_a_purge_survive_restarts(self, tmp_path: Path, reaper: list) -> None:
        """The same bytes put again in a new artifact after a purge stay readable, searchable and verified across restarts."""
        body = "recurring bytes " + "x" * 20000
        daemon = DaemonProcess(tmp_path / "data", tmp_path / "run" / "d.sock")
        reaper.append(daemon)
        daemon.start()
        put = {"kind": "note", "title": "recurring", "content": {"type": "text", "data": body}}
        first = daemon.call(request("artifact.put", put, key="again-1"))["result"]
        assert daemon.call(request("artifact.purge", {"artifact_id": first["artifact_id"], "reason": "gone"}, key="again-p"))["ok"]
        second = daemon.call(request("artifact.put", put, key="again-2"))["result"]
        daemon.stop()
        for _ in range(2):
            restarted = DaemonProcess(tmp_path / "data", tmp_path / "run" / "d.sock")
            reaper.append(restarted)
            restarted.start()
            got = restarted.call(request("artifact.get", {"artifact_id": second["artifact_id"]}, context=None))
            report = restarted.call(request("verify", context=None))
            found = restarted.call(request("search", {"query": "recurring bytes"}))
            restarted.stop()
            assert got["ok"] and body == got["result"]["content"]["data"], got.get("error")
            assert report["result"]["ok"], report["result"]["issues"]
            assert second["artifact_id"] in json.dumps(found["result"]["hits"]), "the bytes stored again are not searchable"
