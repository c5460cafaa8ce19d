"""Backups under load: consistent while writers run, and never partial when the daemon is killed.

Writers keep sending mutations to a real daemon while ``backup.create`` runs through the same
daemon: each backup restores into a new data dir, verifies clean (replay included), and holds
every write acknowledged before the backup was requested, at the same position. Then the
daemon is SIGKILLed at random instants during backups: the destination is either absent or a
complete backup that restores and verifies; the staging folder the dead daemon left behind is
removed by the next backup; and the store itself still verifies.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

from memoree.admin import backup
from memoree.client.transport import TransportFailure

from .conftest import Figures, Sizes
from .harness import DaemonProcess, Ledger, lost_acknowledgements, open_service, put_request, request, verify_clean

STAGE_PREFIX = ".memoree-backup-stage-"


def writer(daemon_ref: list[DaemonProcess], ledger: Ledger, prefix: str, stop: threading.Event) -> None:
    index = 0
    while not stop.is_set():
        key = f"{prefix}-{index}"
        document = put_request(key, index, large_every=7)
        try:
            envelope = daemon_ref[0].call(document, timeout=60)
        except TransportFailure:
            time.sleep(0.01)
            continue  # the daemon is being replaced: retry the same key
        if envelope["ok"]:
            ledger.record(key, document, envelope)
            index += 1


def restore_and_check(source: Path, target: Path, acked_before: Ledger) -> int:
    """Restore ``source`` into ``target``, verify it, check the acknowledgements; its head."""
    backup.restore(source, target)
    with open_service(target) as service:
        report = verify_clean(service)
        assert [] == lost_acknowledgements(service, acked_before)
    return report["last_commit_seq"]


class TestBackupUnderLoad:
    """Backups taken while writers run are complete and consistent; killed ones are never partial."""

    def test_backups_while_writers_run(self, tmp_path: Path, sizes: Sizes, figures: Figures, reaper: list) -> None:
        """Three backups during a write load: each restores, verifies and holds every earlier acknowledgement."""
        daemon = DaemonProcess(tmp_path / "data", tmp_path / "run" / "d.sock")
        reaper.append(daemon)
        daemon.start()
        ledger, stop = Ledger(), threading.Event()
        threads = [threading.Thread(target=writer, args=([daemon], ledger, f"bw{w}", stop)) for w in range(3)]
        for thread in threads:
            thread.start()
        heads = []
        try:
            for number in range(3):
                while len(ledger.acks) < 40 * (number + 1):
                    time.sleep(0.01)
                acked_before = ledger.copy()
                made = daemon.call(request("backup.create", {"destination": str(tmp_path / f"backup-{number}")}, context=None))
                assert made["ok"], made
                heads.append(restore_and_check(tmp_path / f"backup-{number}", tmp_path / f"restored-{number}", acked_before))
                assert made["result"]["commit_seq"] == heads[-1]
        finally:
            stop.set()
            for thread in threads:
                thread.join(60)
        daemon.stop()
        figures.add("backup under load", operations=len(ledger.acks) + 3, note=f"3 backups at heads {heads}")
        assert heads == sorted(heads)

    def test_sigkill_during_backup_never_leaves_a_partial_destination(self, tmp_path: Path, sizes: Sizes,
                                                                       figures: Figures, reaper: list) -> None:
        """SIGKILL at random instants of a backup: absent or complete; stale staging removed; the store verifies."""
        rng = random.Random(2718)
        daemon_ref = [DaemonProcess(tmp_path / "data", tmp_path / "run" / "d.sock")]
        reaper.append(daemon_ref[0])
        daemon_ref[0].start()
        ledger, stop = Ledger(), threading.Event()
        thread = threading.Thread(target=writer, args=(daemon_ref, ledger, "bk", stop))
        thread.start()
        outcomes = {"absent": 0, "complete": 0}
        try:
            while len(ledger.acks) < 60:
                time.sleep(0.01)
            started = time.monotonic()
            timed = daemon_ref[0].call(request("backup.create", {"destination": str(tmp_path / "backups" / "timed")}, context=None))
            assert timed["ok"], timed
            duration = time.monotonic() - started
            for number in range(sizes.backup_kills):
                destination = tmp_path / "backups" / f"killed-{number}"
                acked_before = ledger.copy()
                caller = threading.Thread(target=self._request_backup, args=(daemon_ref[0], destination))
                caller.start()
                # Spread over two and a half times a backup's duration, so that some kills land
                # after the publication: both outcomes occur.
                time.sleep(2.5 * duration * (number + rng.random()) / sizes.backup_kills)
                daemon_ref[0].kill9()
                caller.join(60)
                if destination.exists():
                    outcomes["complete"] += 1
                    restore_and_check(destination, tmp_path / f"restored-killed-{number}", acked_before)
                else:
                    outcomes["absent"] += 1
                replacement = DaemonProcess(tmp_path / "data", tmp_path / "run" / "d.sock")
                reaper.append(replacement)
                daemon_ref[0] = replacement.start()
            acked_before_final = ledger.copy()
            final = daemon_ref[0].call(request("backup.create", {"destination": str(tmp_path / "backups" / "final")}, context=None))
            assert final["ok"], final
        finally:
            stop.set()
            thread.join(60)
        leftovers = sorted(p.name for p in (tmp_path / "backups").iterdir() if p.name.startswith(STAGE_PREFIX))
        daemon_ref[0].stop()
        restore_and_check(tmp_path / "backups" / "final", tmp_path / "restored-final", acked_before_final)
        with open_service(tmp_path / "data") as service:
            verify_clean(service)
        figures.add("backup: SIGKILL during backup", operations=len(ledger.acks) + sizes.backup_kills + 2,
                    faults=sizes.backup_kills, note=f"{outcomes['absent']} absent, {outcomes['complete']} complete, 0 partial")
        assert [] == leftovers

    @staticmethod
    def _request_backup(daemon: DaemonProcess, destination: Path) -> None:
        try:
            daemon.call(request("backup.create", {"destination": str(destination)}, context=None))
        except TransportFailure:
            pass
