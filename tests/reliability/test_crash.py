"""kill -9 during appends: a real daemon is SIGKILLed at random instants under a write load.

Four client threads send artifact.put mutations (text, binary and external-blob content) to a
real ``memoree serve`` while a killer thread SIGKILLs the daemon at random instants, each after a
random number of acknowledgements plus a random sub-millisecond delay, and starts a new one at
once. Clients record every acknowledgement and retry unacknowledged requests with the same
idempotency key until acknowledged. Afterwards the store is reopened in-process: every
acknowledged artifact is present at its acknowledged commit_seq with byte-identical content,
commit_seq is dense, no key produced two events, and verify (replay included) is clean.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

from memoree.client.transport import TransportFailure

from .conftest import Figures, Sizes
from .harness import DaemonProcess, Ledger, log_shape, lost_acknowledgements, open_service, put_request, verify_clean

CLIENTS = 4


class KillingDaemonHost:
    """Holds the current daemon and replaces it with a fresh one after each SIGKILL."""

    def __init__(self, data_dir: Path, socket_path: Path, reaper: list) -> None:
        self.data_dir, self.socket_path, self.reaper = data_dir, socket_path, reaper
        self.lock = threading.Lock()
        self.kills = 0
        self.current = self._spawn()

    def _spawn(self) -> DaemonProcess:
        daemon = DaemonProcess(self.data_dir, self.socket_path)
        self.reaper.append(daemon)
        return daemon.start()

    def kill_and_restart(self) -> None:
        with self.lock:
            self.current.kill9()
            self.kills += 1
            self.current = self._spawn()


def client_loop(host: KillingDaemonHost, ledger: Ledger, indices: list[int], failures: list[str],
                retries: list[int], kills_done: threading.Event, hold_at: int) -> None:
    for index in indices:
        if len(ledger.acks) >= hold_at:
            # The second half waits for the killer's last kill: on a fast store the burst could
            # otherwise outrun a killer thread that the scheduler left waiting.
            kills_done.wait(120)
        key = f"crash-{index}"
        document = put_request(key, index, large_every=97)
        while True:
            try:
                envelope = host.current.call(document, timeout=30)
            except TransportFailure:
                retries.append(1)
                time.sleep(0.005)
                continue
            if envelope["ok"]:
                ledger.record(key, document, envelope)
                break
            if envelope["error"]["retryable"]:
                retries.append(1)
                continue
            failures.append(f"{key}: {envelope['error']}")
            return


def killer_loop(host: KillingDaemonHost, ledger: Ledger, thresholds: list[int], rng: random.Random,
                done: threading.Event, kills_done: threading.Event) -> None:
    try:
        for threshold in thresholds:
            while len(ledger.acks) < threshold and not done.is_set():
                time.sleep(0.001)
            if done.is_set():
                return
            time.sleep(rng.uniform(0, 0.004))
            host.kill_and_restart()
    finally:
        kills_done.set()


class TestKillNineDuringAppends:
    """SIGKILL at random instants never loses, duplicates or alters an acknowledged mutation."""

    def test_acknowledged_mutations_survive_repeated_sigkill(self, tmp_path: Path, sizes: Sizes, figures: Figures,
                                                            reaper: list) -> None:
        """N acknowledged puts with K kills: all present, byte-identical, dense, unduplicated, verify clean."""
        rng = random.Random(20260731 + sizes.crash_mutations)
        total, kills = sizes.crash_mutations, sizes.crash_kills
        host = KillingDaemonHost(tmp_path / "data", tmp_path / "run" / "d.sock", reaper)
        ledger, failures, retries = Ledger(), [], []
        # Kill instants fall in the first half of the run, so the burst is still going when the
        # last one comes (a kill scheduled near the end could find every write already done).
        thresholds = sorted(rng.sample(range(total // 20, total // 2), kills))
        done, kills_done = threading.Event(), threading.Event()
        killer = threading.Thread(target=killer_loop, args=(host, ledger, thresholds, rng, done, kills_done))
        clients = [threading.Thread(target=client_loop, args=(host, ledger, list(range(c, total, CLIENTS)), failures,
                                                              retries, kills_done, total // 2))
                   for c in range(CLIENTS)]
        killer.start()
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(600)
        done.set()
        killer.join(120)
        host.current.stop()
        assert not failures, failures[:5]
        assert total == len(ledger.acks)
        assert not ledger.duplicates, ledger.duplicates[:5]
        with open_service(host.data_dir) as service:
            lost = lost_acknowledgements(service, ledger)
            shape = log_shape(service)
            created = service.engine.conn.execute("SELECT count(*) FROM events WHERE type = 'artifact.created'").fetchone()[0]
            verify_clean(service)
        figures.add("kill -9 during appends", operations=total, faults=host.kills, acked_losses=len(lost),
                    note=f"{len(retries)} retries, {ledger.replays} idempotent replays")
        assert [] == lost
        assert shape["dense"] and 0 == shape["repeated_keys"], shape
        assert total == created
        assert kills == host.kills
        acked_positions = sorted(ack.commit_seq for ack in ledger.acks.values())
        assert len(set(acked_positions)) == total
