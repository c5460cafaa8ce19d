"""File permissions: everything memoree writes is owner-only, whatever the umask.

A real daemon runs with a permissive umask (0000, the hostile case) and with the usual 0022; it
stores inline and external content, seals (creating the node key), and makes a backup. Then the
data dir and every folder under it are 0700, and the database and its WAL and shared-memory
files, the node key seeds (keys/*.seed), CAS blobs, lock files and the socket are 0600 (the
socket's folder 0700); the backup is private the same way. A pre-existing world-readable data
dir is tightened to 0700 with a warning (``memoree.service.engine.prepare_data_dir``), which the daemon
and an in-process store log.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from memoree.service.engine import prepare_data_dir

from .conftest import Figures
from .harness import DaemonProcess, clean_env, put_request, request


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def loose_entries(root: Path) -> list[str]:
    """Folders that are not 0700 and files or sockets that are not 0600, under ``root``."""
    loose = [] if mode(root) == 0o700 else [f". is {mode(root):o}"]
    for path in sorted(root.rglob("*")):
        wanted = 0o700 if path.is_dir() else 0o600
        if mode(path) != wanted:
            loose.append(f"{path.relative_to(root)} is {mode(path):o}, not {wanted:o}")
    return loose


class TestFilePermissions:
    """Data dir 0700; database, keys, blobs and socket 0600; a world-readable data dir is fixed with a warning."""

    @pytest.mark.parametrize("umask", [0o000, 0o022])
    def test_everything_written_is_owner_only(self, tmp_path: Path, umask: int, figures: Figures, reaper: list) -> None:
        """With umask {umask:o}: the data dir, its files, the socket and a backup are private."""
        data = tmp_path / "data"
        daemon = DaemonProcess(data, tmp_path / "run" / "d.sock", umask=umask)
        reaper.append(daemon)
        daemon.start()
        for index in range(3):
            assert daemon.call(put_request(f"perm-{index}", index, large_every=2))["ok"]
        made = daemon.call(request("backup.create", {"destination": str(tmp_path / "backup")}, context=None))
        assert made["ok"], made
        assert list((data / "keys").glob("*.seed")), "sealing created no node key"
        assert (data / "memoree.sqlite3-wal").exists() and (data / "blobs").is_dir()
        socket_modes = (mode(tmp_path / "run" / "d.sock"), mode(tmp_path / "run"))
        problems = loose_entries(data) + [f"backup: {p}" for p in loose_entries(tmp_path / "backup")]
        daemon.stop()
        figures.add("file permissions", operations=4, note=f"umask {umask:04o}: {len(problems)} loose entries")
        assert (0o600, 0o700) == socket_modes
        assert [] == problems

    def test_world_readable_data_dir_is_tightened_with_a_warning(self, tmp_path: Path, reaper: list) -> None:
        """prepare_data_dir fixes a 0755 dir and says so; the daemon does the same and logs the warning."""
        direct = tmp_path / "direct"
        direct.mkdir(mode=0o755)
        direct.chmod(0o755)
        warnings = prepare_data_dir(direct)
        assert 0o700 == mode(direct)
        assert warnings and "0700" in warnings[0]
        in_process = tmp_path / "in-process"
        in_process.mkdir()
        in_process.chmod(0o755)
        opened = subprocess.run([sys.executable, "-c", "import sys; from memoree.service.engine import Engine; Engine(sys.argv[1]).close()",
                                 str(in_process)], capture_output=True, text=True, timeout=60, env=clean_env())
        assert 0 == opened.returncode, opened.stderr
        assert 0o700 == mode(in_process) and "data_dir_permissions_tightened" in opened.stderr
        served = tmp_path / "served"
        served.mkdir()
        served.chmod(0o755)
        daemon = DaemonProcess(served, tmp_path / "run" / "d.sock")
        reaper.append(daemon)
        daemon.start()
        assert daemon.call(request("doctor", context=None))["ok"]
        daemon.stop()
        assert 0o700 == mode(served)
        logged = [json.loads(line) for line in daemon.log_tail(20000).splitlines() if line.startswith("{")]
        assert any("0700" in json.dumps(entry) for entry in logged), daemon.log_tail()
