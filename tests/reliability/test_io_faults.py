"""I/O errors and a full disk: typed errors, nothing acknowledged that is not durable, clean resume.

Injected faults. ``faultshim.c`` (LD_PRELOAD) fails the k-th write or sync the store makes for
every k of a small workload (EIO once; ENOSPC persistently, as a full disk does). The workload
runs in ``fault_driver.py`` through the service's ``handle_bytes``, the same entry the daemon
uses; a separate test drives a real daemon with concurrent clients so that the group-commit path
(savepoints inside one transaction) meets the faults too. After each fault point: every response
is a typed envelope; the power-cut image taken right after the workload (see test_power_loss.py)
holds every acknowledged write and verifies clean; and both the live store and the image accept
the failed requests when retried with the same idempotency keys, seal, and verify clean.

Full disk. A small tmpfs is mounted (root only; skipped with the reason when mounting is not
permitted), a daemon serves a data dir on it, and a ballast file fills the remaining space.
Requests then get typed errors and the daemon stays up; after the ballast is deleted, the
failed requests succeed under their keys and verify is clean. A daemon started on the full disk
fails with a typed envelope, never a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import json
import random
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoree.client.transport import probe

from .conftest import Figures, Sizes
from .harness import (
    ERROR_CODES,
    REPO_ROOT,
    DaemonProcess,
    Ledger,
    clean_env,
    lost_acknowledgements,
    open_service,
    put_request,
    reconstruct,
    request,
    verify_clean,
)


def run_driver(shim: Path, work: Path, kind: str, errno_spec: str, mutations: int, points: list[int]) -> list[dict[str, Any]]:
    work.mkdir(parents=True, exist_ok=True)
    env = clean_env(LD_PRELOAD=str(shim), FAULTSHIM_ROOT="/nonexistent")
    result = subprocess.run([sys.executable, "-m", "tests.reliability.fault_driver", str(work), kind, errno_spec,
                             str(mutations), *map(str, points)], capture_output=True, text=True, env=env, cwd=REPO_ROOT,
                            timeout=900)
    assert 0 == result.returncode, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def fault_points(total: int, sample: int | None, rng: random.Random) -> list[int]:
    """Every k, or an even spread of ``sample`` of them (with a random offset)."""
    if sample is None or sample >= total:
        return list(range(1, total + 1))
    step = total / sample
    offset = rng.uniform(0, step)
    return sorted({min(total, int(offset + i * step) + 1) for i in range(sample)})


def check_outcomes(outcomes: list[dict[str, Any]]) -> dict[str, int]:
    """Fail on any fault point whose outcome breaks a guarantee; return the figures."""
    figures = {"points": len(outcomes), "injected": 0, "errors": 0, "typed": 0, "lost": 0, "responses": 0}
    for outcome in outcomes:
        label = f"{outcome['kind']} fault at k={outcome['k']}"
        assert "crashed" not in outcome, f"{label}: the driver crashed:\n{outcome['crashed']}"
        figures["injected"] += outcome["injected"]
        figures["responses"] += outcome["responses"]
        figures["errors"] += len(outcome["errors"])
        figures["typed"] += len(outcome["errors"]) - len([e for e in outcome["untyped"] if not e.get("ok")])
        figures["lost"] += len(outcome["image_lost"])
        assert [] == outcome["untyped"], f"{label}: untyped responses {outcome['untyped'][:2]}"
        assert [] == outcome["image_lost"], f"{label}: acknowledged but not durable: {outcome['image_lost']}"
        assert [] == outcome["live_problems"], f"{label}: the live store did not resume: {outcome['live_problems']}"
        assert [] == outcome["image_problems"], f"{label}: the power-cut image did not resume: {outcome['image_problems']}"
    return figures


def workload_counts(shim: Path, work: Path, mutations: int) -> dict[str, int]:
    env = clean_env(LD_PRELOAD=str(shim), FAULTSHIM_ROOT="/nonexistent")
    result = subprocess.run([sys.executable, "-m", "tests.reliability.fault_driver", str(work), "write", "5",
                             str(mutations)], capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert 0 == result.returncode, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


class TestInjectedIoErrors:
    """Failing the k-th write or sync yields typed errors, no acknowledged loss and a clean resume."""

    def test_every_sync_fault_point(self, tmp_path: Path, faultshim: Path, sizes: Sizes, figures: Figures) -> None:
        """EIO from each sync of the workload in turn."""
        counts = workload_counts(faultshim, tmp_path / "count", sizes.fault_workload_mutations)
        outcomes = run_driver(faultshim, tmp_path / "sync", "sync", str(errno.EIO), sizes.fault_workload_mutations,
                              list(range(1, counts["syncs"] + 1)))
        found = check_outcomes(outcomes)
        figures.add("I/O errors: failed sync (EIO)", operations=found["responses"], faults=found["injected"],
                    acked_losses=found["lost"], typed_errors=found["typed"], errors=found["errors"],
                    note=f"all {counts['syncs']} sync points")
        assert found["injected"] == counts["syncs"]

    def test_write_fault_points(self, tmp_path: Path, faultshim: Path, sizes: Sizes, figures: Figures) -> None:
        """EIO from the k-th write (a spread of k in CI, every k with --soak)."""
        counts = workload_counts(faultshim, tmp_path / "count", sizes.fault_workload_mutations)
        points = fault_points(counts["writes"], sizes.fault_write_points, random.Random(7))
        found = check_outcomes(run_driver(faultshim, tmp_path / "write", "write", str(errno.EIO),
                                          sizes.fault_workload_mutations, points))
        figures.add("I/O errors: failed write (EIO)", operations=found["responses"], faults=found["injected"],
                    acked_losses=found["lost"], typed_errors=found["typed"], errors=found["errors"],
                    note=f"{len(points)} of {counts['writes']} write points")

    def test_persistent_enospc_fault_points(self, tmp_path: Path, faultshim: Path, sizes: Sizes, figures: Figures) -> None:
        """ENOSPC from the k-th write and the next 30 writes (a disk that stays full for a while)."""
        counts = workload_counts(faultshim, tmp_path / "count", sizes.fault_workload_mutations)
        points = fault_points(counts["writes"], sizes.fault_enospc_points, random.Random(11))
        found = check_outcomes(run_driver(faultshim, tmp_path / "enospc", "write", f"{errno.ENOSPC}x30",
                                          sizes.fault_workload_mutations, points))
        figures.add("I/O errors: disk full (ENOSPC x30)", operations=found["responses"], faults=found["injected"],
                    acked_losses=found["lost"], typed_errors=found["typed"], errors=found["errors"],
                    note=f"{len(points)} of {counts['writes']} write points")

    def test_daemon_group_commit_meets_faults(self, tmp_path: Path, faultshim: Path, sizes: Sizes, figures: Figures,
                                              reaper: list) -> None:
        """Concurrent clients of a real daemon: typed errors, the daemon stays up, acks durable, retries succeed."""
        rng = random.Random(5)
        rounds = 8 if sizes.soak else 3
        totals = {"responses": 0, "errors": 0, "typed": 0, "faults": 0, "lost": 0}
        for number in range(rounds):
            kind = rng.choice(["write", "sync"])
            spec = f"{kind}:{rng.randint(1, 60 if kind == 'write' else 4)}:{errno.EIO}:{rng.choice([1, 3])}"
            outcome = self._one_daemon_round(tmp_path / f"round-{number}", faultshim, spec, reaper)
            for key in totals:
                totals[key] += outcome[key]
        figures.add("I/O errors: daemon group commit", operations=totals["responses"], faults=totals["faults"],
                    acked_losses=totals["lost"], typed_errors=totals["typed"], errors=totals["errors"],
                    note=f"{rounds} daemons, 4 concurrent clients each")

    def _one_daemon_round(self, base: Path, shim: Path, spec: str, reaper: list) -> dict[str, int]:
        data, shadow, arm = (base / "data").resolve(), base / "shadow", base / "armed"
        shadow.mkdir(parents=True)
        daemon = DaemonProcess(data, base / "d.sock", preload=shim, env={
            "FAULTSHIM_ROOT": str(data), "FAULTSHIM_SHADOW": str(shadow), "FAULTSHIM_FAIL": spec,
            "FAULTSHIM_ARM_FILE": str(arm), "FAULTSHIM_STATS": str(base / "stats.json")})
        reaper.append(daemon)
        daemon.start()
        arm.touch()
        ledger, envelopes, failed = Ledger(), [], []
        lock = threading.Lock()

        def client(c: int) -> None:
            for i in range(6):
                document = put_request(f"gc-{c}-{i}", c * 100 + i, large_every=4)
                envelope = daemon.call(document)
                with lock:
                    envelopes.append(envelope)
                    if envelope["ok"]:
                        ledger.record(document["idempotency_key"], document, envelope)
                    else:
                        failed.append(document)

        threads = [threading.Thread(target=client, args=(c,)) for c in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert probe(daemon.endpoint) is not None, f"the daemon stopped answering after {spec}"
        daemon.kill9()
        image = base / "image"
        reconstruct(data, shadow, image)
        untyped = [e for e in envelopes if not e["ok"] and e["error"]["code"] not in ERROR_CODES]
        assert [] == untyped, untyped
        with open_service(image) as service:
            lost = lost_acknowledgements(service, ledger)
        assert [] == lost, f"{spec}: acknowledged but not durable: {lost}"
        stats = json.loads((base / "stats.json").read_text()) if (base / "stats.json").exists() else {"injected": 0}
        resumed = DaemonProcess(image, base / "d2.sock")
        reaper.append(resumed)
        resumed.start()
        for document in failed:
            again = resumed.call(document)
            assert again["ok"], (spec, again)
        report = resumed.call(request("verify", context=None))
        assert report["ok"] and report["result"]["ok"], report
        resumed.stop()
        errors = [e for e in envelopes if not e["ok"]]
        return {"responses": len(envelopes), "errors": len(errors), "typed": len(errors) - len(untyped),
                "faults": stats["injected"], "lost": len(lost)}


# ---------------------------------------------------------------- a real full filesystem


@contextlib.contextmanager
def small_tmpfs(mount_point: Path, size: str) -> Iterator[Path]:
    mount_point.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(mount_point)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({result.stderr.strip() or 'mount failed'}); "
                    "the disk-full test needs root and mount permission")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def fill(path: Path) -> int:
    """Write a ballast file until the filesystem is full; return its size."""
    written = 0
    chunk = b"\0" * 65536
    with open(path, "wb", buffering=0) as ballast:
        for size in (65536, 4096, 512, 1):
            while True:
                try:
                    ballast.write(chunk[:size])
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
                written += size
    return written


class TestDiskFull:
    """A full filesystem gives typed errors, keeps the daemon up, and the store resumes once space is freed."""

    def test_full_tmpfs_then_space_freed(self, tmp_path: Path, figures: Figures, reaper: list) -> None:
        """Writes on a full tmpfs fail typed; after freeing space the same keys succeed and verify is clean."""
        with small_tmpfs(tmp_path / "mnt", "24m") as mount:
            daemon = DaemonProcess(mount / "data", tmp_path / "run" / "d.sock")
            daemon.log_path = tmp_path / "daemon.log"
            reaper.append(daemon)
            daemon.start()
            ledger = Ledger()
            for i in range(5):
                envelope = daemon.call(put_request(f"df-pre-{i}", i, large_every=2))
                assert envelope["ok"], envelope
                ledger.record(f"df-pre-{i}", put_request(f"df-pre-{i}", i, large_every=2), envelope)
            fill(mount / "ballast")
            envelopes, failed = [], []
            for i in range(12):
                document = put_request(f"df-{i}", 100 + i, large_every=3)
                envelope = daemon.call(document)
                envelopes.append(envelope)
                (ledger.record(document["idempotency_key"], document, envelope) if envelope["ok"] else failed.append(document))
            errors = [e["error"] for e in envelopes if not e["ok"]]
            assert errors, "no request failed on a full filesystem"
            untyped = [e for e in errors if e["code"] not in ERROR_CODES or "Traceback" in e["message"]]
            assert [] == untyped
            assert probe(daemon.endpoint) is not None, "the daemon died on a full disk"
            (mount / "ballast").unlink()
            for document in failed:
                again = daemon.call(document)
                assert again["ok"], again
                ledger.record(document["idempotency_key"], document, again)
            report = daemon.call(request("verify", context=None))
            assert report["ok"] and report["result"]["ok"], report
            daemon.stop()
            with open_service(mount / "data") as service:
                lost = lost_acknowledgements(service, ledger)
                verify_clean(service)
            assert [] == lost
            started_full = self._start_on_full_disk(mount, tmp_path)
        figures.add("disk full (tmpfs)", operations=len(envelopes) + len(failed) + 5, faults=len(errors),
                    acked_losses=len(lost), typed_errors=len(errors) - len(untyped) + 1, errors=len(errors) + 1,
                    note=f"start on a full disk: {started_full}")

    def test_reindex_on_a_full_disk_fails_typed_and_changes_nothing(self, tmp_path: Path, figures: Figures) -> None:
        """A reindex that runs out of space, in process (the scratch build fails) or from the CLI
        (the store cannot even open), answers a typed error, leaves no scratch folder and a store
        that verifies clean; once space is freed the same reindex succeeds."""
        from memoree.errors import MemoreeError

        with small_tmpfs(tmp_path / "mnt", "24m") as mount:
            data = mount / "data"
            with open_service(data) as service:
                for i in range(60):
                    assert json.loads(service.handle_bytes(json.dumps(put_request(f"rx-{i}", i)).encode()).body)["ok"]
                fill(mount / "ballast")
                with pytest.raises(MemoreeError) as raised:
                    service.engine.reindex()
                assert raised.value.code in ERROR_CODES, raised.value.message
                assert not list(data.glob(".rebuild-*"))
            fill(mount / "ballast-after-close")  # closing the store freed its WAL: full again
            reindex = [sys.executable, "-m", "memoree", "--data-dir", str(data), "reindex"]
            result = subprocess.run(reindex, capture_output=True, text=True, env=clean_env(), timeout=120, cwd=REPO_ROOT)
            assert 0 != result.returncode
            assert "Traceback (most recent call last):\n" not in result.stdout + result.stderr, result.stderr[-2000:]
            assert json.loads(result.stdout)["error"]["code"] in ERROR_CODES
            (mount / "ballast").unlink()
            (mount / "ballast-after-close").unlink()
            with open_service(data) as service:
                verify_clean(service)
            again = subprocess.run(reindex, capture_output=True, text=True, env=clean_env(), timeout=120, cwd=REPO_ROOT)
            assert 0 == again.returncode and json.loads(again.stdout)["ok"], again.stdout + again.stderr[-2000:]
        figures.add("reindex on a full disk (tmpfs)", operations=3, faults=2, acked_losses=0, typed_errors=2,
                    errors=2, note=f"in process: {raised.value.code}")

    def _start_on_full_disk(self, mount: Path, tmp_path: Path) -> str:
        fill(mount / "ballast")
        result = subprocess.run([sys.executable, "-m", "memoree", "serve", "--listen", f"unix://{tmp_path}/full.sock",
                                 "--data-dir", str(mount / "fresh")], capture_output=True, text=True, env=clean_env(),
                                timeout=60, cwd=REPO_ROOT)
        assert 0 != result.returncode
        assert "Traceback (most recent call last):\n" not in result.stdout + result.stderr, result.stderr[-2000:]
        envelope = json.loads(result.stdout)
        assert envelope["error"]["code"] in ERROR_CODES
        return envelope["error"]["code"]

