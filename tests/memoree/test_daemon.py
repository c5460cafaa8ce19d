"""A real daemon on a temporary socket: framing limits, concurrency, autostart and kill -9."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoree.client.transport import Endpoint, TransportFailure, exchange, probe

CTX = {"workspace_id": "wsp_d", "project_id": "prj_d"}


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")}
    env.update(extra)
    return env


def wait_for(endpoint: Endpoint, proc: subprocess.Popen[bytes] | None = None, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        report = probe(endpoint)
        if report is not None:
            return report
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"daemon exited: {proc.stdout.read() if proc.stdout else b''!r}")
        time.sleep(0.05)
    raise AssertionError("daemon did not answer")


class Running:
    def __init__(self, proc: subprocess.Popen[bytes], endpoint: Endpoint, socket_path: Path, data_dir: Path) -> None:
        self.proc, self.endpoint, self.socket_path, self.data_dir = proc, endpoint, socket_path, data_dir

    def call(self, document: dict[str, Any]) -> dict[str, Any]:
        return json.loads(exchange(self.endpoint, json.dumps(document).encode()))


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Running]:
    sock, data = tmp_path / "run" / "d.sock", tmp_path / "data"
    proc = subprocess.Popen([sys.executable, "-m", "memoree", "serve", "--listen", f"unix://{sock}", "--data-dir", str(data)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=clean_env())
    endpoint = Endpoint("unix", str(sock))
    wait_for(endpoint, proc)
    yield Running(proc, endpoint, sock, data)
    proc.send_signal(signal.SIGTERM)
    proc.wait(15)


def put(i: int, key_prefix: str = "k") -> dict[str, Any]:
    return {"v": 1, "request_id": f"r{i}", "op": "artifact.put", "idempotency_key": f"{key_prefix}{i}", "context": CTX,
            "input": {"kind": "note", "title": f"n{i}", "content": {"type": "text", "data": f"payload {i}"}}}


def closed_without_response(sock: socket.socket) -> bool:
    try:
        return b"" == sock.recv(16)
    except ConnectionResetError:
        return True


def raw_connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(path))
    return sock


class TestTransport:
    def test_socket_is_private(self, daemon: Running) -> None:
        """The socket is 0600 in a 0700 directory."""
        assert 0o600 == stat.S_IMODE(daemon.socket_path.stat().st_mode)
        assert 0o700 == stat.S_IMODE(daemon.socket_path.parent.stat().st_mode)

    def test_garbage_frame_is_invalid_request_from_the_transport(self, daemon: Running) -> None:
        """A frame of garbage bytes gets INVALID_REQUEST with request_id req_transport."""
        envelope = json.loads(exchange(daemon.endpoint, b"\x00\xff garbage {"))
        assert ("INVALID_REQUEST", "req_transport") == (envelope["error"]["code"], envelope["request_id"])

    def test_oversize_declared_frame_is_closed_without_reading(self, daemon: Running) -> None:
        """A declared 100 MiB frame is refused from its header: the connection closes unanswered."""
        sock = raw_connect(daemon.socket_path)
        sock.sendall(struct.pack(">I", 100 * 1024 * 1024))
        assert closed_without_response(sock)
        sock.close()
        assert probe(daemon.endpoint) is not None

    def test_idle_connections_do_not_lock_others_out(self, daemon: Running) -> None:
        """Four (and forty) connections that never send a frame do not keep a fifth from being answered."""
        held = [raw_connect(daemon.socket_path) for _ in range(40)]
        time.sleep(0.3)
        envelope = daemon.call({"v": 1, "request_id": "r", "op": "capabilities", "input": {}})
        assert envelope["ok"], envelope
        for sock in held:
            sock.close()

    def test_four_concurrent_clients_lose_nothing(self, daemon: Running) -> None:
        """4 clients x 250 mutations: all acknowledged, commit_seq unique and dense 1..1000."""
        acks: list[int] = []
        lock = threading.Lock()

        def client(w: int) -> None:
            for i in range(250):
                envelope = daemon.call(put(i, key_prefix=f"w{w}-"))
                assert envelope["ok"], envelope
                with lock:
                    acks.append(envelope["commit_seq"])

        threads = [threading.Thread(target=client, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert list(range(1, 1001)) == sorted(acks)
        report = daemon.call({"request_id": "v", "op": "verify", "input": {}})["result"]
        # The writer may seal a full Merkle batch, recording the node key's epoch as one more event.
        assert report["ok"] and report["last_commit_seq"] >= 1000, report["issues"]

    def test_second_daemon_on_the_same_data_dir_is_refused(self, daemon: Running, tmp_path: Path) -> None:
        """A data dir has one daemon: a second serve on another socket fails with TRANSPORT_ERROR."""
        result = subprocess.run([sys.executable, "-m", "memoree", "serve", "--listen", f"unix://{tmp_path}/other.sock",
                                 "--data-dir", str(daemon.data_dir)], capture_output=True, env=clean_env(), timeout=30)
        assert 1 == result.returncode
        assert "TRANSPORT_ERROR" in result.stdout.decode()

    def test_non_loopback_tcp_is_refused(self, tmp_path: Path) -> None:
        """Listening on a non-loopback address needs the explicit dangerous flag."""
        result = subprocess.run([sys.executable, "-m", "memoree", "serve", "--listen", "tcp://0.0.0.0:0",
                                 "--data-dir", str(tmp_path / "d")], capture_output=True, env=clean_env(), timeout=30)
        assert (2, "CONFIG_ERROR") == (result.returncode, json.loads(result.stdout)["error"]["code"])

    def test_clean_call_imports_only_the_standard_library(self, daemon: Running, tmp_path: Path) -> None:
        """memoree call to a running daemon never loads msgspec, SQLite, typer, pydantic, structlog,
        numpy, the embedding model (its tokenizer and weights), typing or pathlib."""
        import sysconfig

        import memoree

        probe_code = """if True:
            import json, sys
            sys.argv[1:] = ["call"]
            from memoree.entry import main
            try:
                main()
            except SystemExit as exit:
                assert exit.code == 0, exit.code
            from memoree.client import call as callcmd
            body, code = callcmd.run(json.dumps({"request_id": "c", "op": "capabilities", "input": {}}).encode())
            assert code == 0, body
            heavy = ("msgspec", "sqlite3", "pysqlite3", "sqlite_utils", "typer", "pydantic", "structlog", "rich",
                     "blake3", "click", "numpy", "tokenizers", "safetensors", "wordllama", "typing", "pathlib")
            print(json.dumps(sorted(m for m in heavy if m in sys.modules)))
        """
        # Without site (-S): an editable install's import hook, loaded from a .pth file at start,
        # imports pathlib itself and would hide an import of it on the call path.
        search_path = [str(Path(memoree.__file__).resolve().parent.parent),
                       sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
        # The put resolves its context (MEMOREE_CONTEXT) and finds the default socket (MEMOREE_SOCKET).
        request = {k: v for k, v in put(0, key_prefix="imports-").items() if k != "context"}
        result = subprocess.run([sys.executable, "-S", "-c", probe_code], capture_output=True, cwd=tmp_path,
                                input=json.dumps(request).encode(), timeout=30,
                                env=clean_env(MEMOREE_SOCKET=str(daemon.socket_path), MEMOREE_CONTEXT=json.dumps(CTX),
                                              PYTHONPATH=os.pathsep.join(search_path)))
        *replies, modules = result.stdout.decode().splitlines() or [""]
        assert [] == json.loads(modules or "null"), (replies, result.stderr)


class TestAutostartAndCrash:
    def test_kill_9_mid_burst_loses_no_acknowledged_write(self, tmp_path: Path) -> None:
        """SIGKILL during a write burst; the next call autostarts a daemon that has every acked write."""
        home = tmp_path / "home"
        env = clean_env(MEMOREE_HOME=str(home), MEMOREE_CONTEXT=json.dumps(CTX))
        first = subprocess.run([sys.executable, "-m", "memoree", "call"], input=json.dumps(put(0)).encode(),
                               capture_output=True, env=env, timeout=60)
        assert 0 == first.returncode, first.stdout
        endpoint = Endpoint("unix", str(home / "run" / "memoree.sock"))
        pid = probe(endpoint)["daemon_pid"]
        acked: list[tuple[str, int]] = []
        stop = threading.Event()

        def burst(w: int) -> None:
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    envelope = json.loads(exchange(endpoint, json.dumps(put(i, key_prefix=f"b{w}-")).encode()))
                except TransportFailure:
                    return
                if envelope.get("ok"):
                    acked.append((envelope["result"]["artifact_id"], envelope["commit_seq"]))

        threads = [threading.Thread(target=burst, args=(w,)) for w in range(3)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        os.kill(pid, signal.SIGKILL)
        stop.set()
        for thread in threads:
            thread.join(30)
        assert acked
        try:
            restarted = subprocess.run([sys.executable, "-m", "memoree", "call"], capture_output=True, env=env, timeout=60,
                                       input=json.dumps({"request_id": "g", "op": "artifact.get", "input": {"artifact_id": acked[-1][0]}}).encode())
            assert 0 == restarted.returncode, restarted.stdout
            for artifact_id, seq in acked:
                got = json.loads(exchange(endpoint, json.dumps({"request_id": "g", "op": "artifact.get",
                                                                  "input": {"artifact_id": artifact_id, "include_content": False}}).encode()))
                assert (True, seq) == (got["ok"], got["result"]["revision_commit_seq"]), got
            report = probe(endpoint)
            assert report["daemon_pid"] != pid
            assert report["last_commit_seq"] >= max(seq for _, seq in acked)
            assert len({seq for _, seq in acked}) == len(acked)
        finally:
            new_pid = (probe(endpoint) or {}).get("daemon_pid")
            if new_pid:
                os.kill(new_pid, signal.SIGTERM)

    def test_no_autostart_reports_a_transport_error(self, tmp_path: Path) -> None:
        """With autostart disabled and no daemon, call answers TRANSPORT_ERROR (retryable, exit 1)."""
        env = clean_env(MEMOREE_HOME=str(tmp_path), MEMOREE_NO_AUTOSTART="1")
        result = subprocess.run([sys.executable, "-m", "memoree", "call"], capture_output=True, env=env, timeout=30,
                                input=b'{"request_id":"r","op":"capabilities","input":{}}')
        envelope = json.loads(result.stdout)
        assert (1, "TRANSPORT_ERROR", True, "r") == (result.returncode, envelope["error"]["code"], envelope["error"]["retryable"], envelope["request_id"])

    def test_a_call_is_one_round_trip_carrying_the_version(self, tmp_path: Path) -> None:
        """request_via_daemon opens one connection and sends one frame: the request with client_version."""
        from memoree import __version__
        from memoree.client.transport import request_via_daemon
        from memoree.protocol.framing import read_frame, write_frame

        path = tmp_path / "one.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(8)
        frames: list[bytes] = []

        def answer() -> None:
            listener.settimeout(2.0)
            try:
                while True:
                    conn, _ = listener.accept()
                    with conn:
                        frames.append(read_frame(conn, 1 << 20))
                        write_frame(conn, b'{"v":1,"request_id":"r","ok":true,"result":{},"warnings":[]}')
            except OSError:
                return

        server = threading.Thread(target=answer)
        server.start()
        try:
            body = request_via_daemon(b' {"request_id":"r","op":"capabilities","input":{}}',
                                      endpoint=Endpoint("unix", str(path)), data_dir=None, autostart_allowed=False)
        finally:
            server.join()
            listener.close()
        assert body.startswith(b'{"v":1,"request_id":"r","ok":true')
        assert [__version__] == [json.loads(frame)["client_version"] for frame in frames]
        assert "capabilities" == json.loads(frames[0])["op"]

    def test_the_daemon_refuses_another_client_version(self, daemon: Running) -> None:
        """A request stamped with another client_version is refused CONFIG_ERROR, naming the daemon's version."""
        from memoree import __version__

        reply = daemon.call({"request_id": "r", "op": "artifact.put", "idempotency_key": "k", "context": CTX,
                             "client_version": "0.0.0-other",
                             "input": {"kind": "note", "title": "t", "content": {"type": "text", "data": "x"}}})
        assert ("CONFIG_ERROR", __version__) == (reply["error"]["code"], reply["error"]["details"]["daemon_version"])
        assert 0 == daemon.call({"request_id": "d", "op": "doctor", "input": {}})["result"]["last_commit_seq"]

    def test_version_skew_is_refused(self, daemon: Running, monkeypatch: pytest.MonkeyPatch) -> None:
        """A client of another version refuses to talk to the daemon (CONFIG_ERROR)."""
        from memoree.client import transport as client
        from memoree.client.transport import ClientConfigError, request_via_daemon

        monkeypatch.setattr(client, "__version__", "0.0.0-other")
        with pytest.raises(ClientConfigError):
            request_via_daemon(b'{"request_id":"r","op":"capabilities","input":{}}', endpoint=daemon.endpoint,
                               data_dir=None, autostart_allowed=False)
