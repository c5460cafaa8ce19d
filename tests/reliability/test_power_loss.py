"""Power loss: only what was synced survives, and every acknowledged write was synced.

Method. The daemon runs under ``faultshim.c``, an LD_PRELOAD library (built with gcc at test
time) that interposes open/write/pwrite/ftruncate/fsync/fdatasync/unlink for the files under the
data dir. For each file it tracks the byte range written since the file's last sync; when a sync
succeeds it applies that range (read back from the file) and the file's size to a shadow image of
the file. A shadow image is therefore exactly what a disk holds after a power cut: the content as
of the last successful sync, none of the writes after it (the pessimistic model; a real disk may
keep some unsynced writes, which can only help). A file that was never synced has no image and
is lost; the -shm file (memory-mapped, volatile by design) is always lost. Directory entries are
taken as they are at the cut (the model is about file content, not about directory fsyncs).

A "power cut" is a SIGKILL of the daemon at a random instant while clients write; the images at
that instant become a new data dir, which is reopened (SQLite recovers its WAL), checked, and
served again under the shim for the next round, with unacknowledged requests retried under the
same idempotency keys. With ``synchronous=FULL`` (the product's setting) no acknowledged write
may be missing after any cut. With ``synchronous=NORMAL`` (WAL commits are not synced) the same
harness must find acknowledged writes missing: the negative control proves that the harness can
see a loss when there is one.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from pathlib import Path

from memoree.client.transport import TransportFailure

from .conftest import Figures, Sizes
from .harness import (
    DaemonProcess,
    Ledger,
    log_shape,
    lost_acknowledgements,
    open_service,
    put_request,
    reconstruct,
    seed_images,
    verify_clean,
)

CLIENTS = 2


class PowerCutRun:
    """Rounds of writing under the shim, each ended by a cut and a reconstruction."""

    def __init__(self, tmp_path: Path, shim: Path, synchronous: str, reaper: list, seed: int) -> None:
        self.tmp_path, self.shim, self.synchronous, self.reaper = tmp_path, shim, synchronous, reaper
        self.rng = random.Random(seed)
        self.ledger = Ledger()
        self.retry_queue: list[int] = []
        self.counter = itertools.count()
        self.lock = threading.Lock()
        self.data_dir = (tmp_path / "round-0" / "data").resolve()
        self.cuts = 0
        self.losses: list[str] = []
        self.files_lost = 0

    def next_index(self) -> int:
        with self.lock:
            return self.retry_queue.pop() if self.retry_queue else next(self.counter)

    def round(self, number: int, writes: int, at_least: int = 1) -> None:
        shadow = self.tmp_path / f"round-{number}" / "shadow"
        if self.data_dir.exists():
            seed_images(self.data_dir, shadow)
        shadow.mkdir(parents=True, exist_ok=True)
        daemon = DaemonProcess(self.data_dir, self.tmp_path / "run" / "d.sock", synchronous=self.synchronous,
                               preload=self.shim, env={"FAULTSHIM_ROOT": str(self.data_dir), "FAULTSHIM_SHADOW": str(shadow)})
        self.reaper.append(daemon)
        daemon.start()
        acked_before = len(self.ledger.acks)
        cut_after = acked_before + self.rng.randint(at_least, writes)
        stop = threading.Event()
        threads = [threading.Thread(target=self._client, args=(daemon, stop)) for _ in range(CLIENTS)]
        for thread in threads:
            thread.start()
        while len(self.ledger.acks) < cut_after and daemon.alive():
            time.sleep(0.0005)
        time.sleep(self.rng.uniform(0, 0.003))
        daemon.kill9()
        stop.set()
        for thread in threads:
            thread.join(60)
        self.cuts += 1
        target = (self.tmp_path / f"round-{number + 1}" / "data").resolve()
        self.files_lost += reconstruct(self.data_dir, shadow, target)["files_lost"]
        self.data_dir = target

    def _client(self, daemon: DaemonProcess, stop: threading.Event) -> None:
        while not stop.is_set():
            index = self.next_index()
            key = f"power-{index}"
            document = put_request(key, index, large_every=11)
            try:
                envelope = daemon.call(document, timeout=30)
            except TransportFailure:
                with self.lock:
                    self.retry_queue.append(index)
                return
            if envelope["ok"]:
                self.ledger.record(key, document, envelope)
            else:
                with self.lock:
                    self.retry_queue.append(index)

    def check(self) -> list[str]:
        """Reopen the reconstructed store; the acknowledged writes it lacks."""
        with open_service(self.data_dir) as service:
            return lost_acknowledgements(service, self.ledger)


class TestPowerLoss:
    """A simulated power cut keeps every acknowledged write with synchronous=FULL, and not with NORMAL."""

    def test_full_sync_loses_no_acknowledged_write(self, tmp_path: Path, faultshim: Path, sizes: Sizes,
                                                   figures: Figures, reaper: list) -> None:
        """Cuts at random instants under synchronous=FULL: nothing acknowledged is ever missing."""
        run = PowerCutRun(tmp_path, faultshim, "FULL", reaper, seed=4242 + sizes.power_cuts)
        for number in range(sizes.power_cuts):
            run.round(number, sizes.power_writes_per_cut)
            lost = run.check()
            run.losses.extend(lost)
            assert [] == lost, f"cut {number + 1} lost acknowledged writes: {lost[:5]}"
        with open_service(run.data_dir) as service:
            shape = log_shape(service)
            verify_clean(service)
        figures.add("power loss, synchronous=FULL", operations=len(run.ledger.acks), faults=run.cuts,
                    acked_losses=len(run.losses), note=f"{run.files_lost} unsynced files dropped by the cuts")
        assert shape["dense"] and 0 == shape["repeated_keys"], shape
        assert not run.ledger.duplicates

    def test_normal_sync_negative_control_detects_loss(self, tmp_path: Path, faultshim: Path, figures: Figures,
                                                       reaper: list) -> None:
        """The same harness with synchronous=NORMAL finds acknowledged writes missing after a cut."""
        run = PowerCutRun(tmp_path, faultshim, "NORMAL", reaper, seed=99)
        detected: list[str] = []
        for number in range(4):
            # Long enough for a WAL checkpoint (which syncs) before the cut: the early writes
            # survive, the unsynced tail does not.
            run.round(number, 90, at_least=60)
            detected = run.check()
            if detected:
                break
        figures.add("power loss, synchronous=NORMAL (control)", operations=len(run.ledger.acks), faults=run.cuts,
                    note=f"negative control: {len(detected)} of {len(run.ledger.acks)} acknowledged writes lost, as expected")
        assert detected, "the harness saw no loss with synchronous=NORMAL: it cannot detect lost writes"
        assert len(detected) < len(run.ledger.acks), "everything was lost: the images kept nothing that was synced"
