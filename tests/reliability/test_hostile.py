"""Hostile input against a real daemon: malformed requests, a fuzzed frame decoder, flat memory.

Requests: a seeded stream of malformed requests generated from the ``schema`` op's JSON Schema
bundle (``hostile.py``: one mutation of a valid request each) plus hand-picked classics (deep
nesting, 5,000-digit and 30-digit integers, NaN, duplicate keys, lone surrogates, invalid UTF-8,
an unknown ``v``, oversize content). Every one must get a well-formed error envelope with a
catalogue code other than INTERNAL_ERROR (an INTERNAL_ERROR for bad input is an unhandled
case), or a success where the input turns out to be valid.

Frames: random byte streams; declared lengths 0, the maximum, the maximum + 1 and 2^32-1;
truncated frames; a slow sender; connections past the open-connection cap. Over-limit frames and connections are
closed without a response and ``memoree call`` reports TRANSPORT_ERROR for them. Throughout,
the daemon keeps answering, and its resident memory (VmRSS) after the barrage stays within a
generous bound of what it was before.
"""

from __future__ import annotations

import json
import random
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memoree import limits

from memoree.client import call as callcmd
from memoree.client.transport import exchange, probe
from memoree.protocol.framing import read_frame

from .conftest import Figures, Sizes
from .harness import CTX, ERROR_CODES, DaemonProcess, closed_without_response, raw_connect, request
from .hostile import HAND_PICKED, malformed_requests

MAX = limits.MAX_FRAME_BYTES
RSS_GROWTH_BOUND_KIB = 96 * 1024
WARM_UP_ROUNDS = 4
ROUNDS_AFTER_WARM_UP = 3


@pytest.fixture
def daemon(tmp_path: Path, reaper: list) -> DaemonProcess:
    process = DaemonProcess(tmp_path / "data", tmp_path / "run" / "d.sock")
    reaper.append(process)
    return process.start()


def seed_entities(daemon: DaemonProcess) -> dict[str, str]:
    """Real ids, so that mutated requests reach the code behind the existence checks."""
    seed = {"kind": "note", "title": "seed", "content": {"type": "text", "data": "seed text for hostile requests"}}
    put = daemon.call(request("artifact.put", seed, key="seed-a"))
    art = put["result"]
    claim = daemon.call(request("claim.assert", {"claim_type": "fact", "statement": "seeded", "evidence": [
        {"artifact_id": art["artifact_id"], "revision_id": art["revision_id"], "start_byte": 0, "end_byte": 4}]}, key="seed-c"))
    return {"artifact_id": art["artifact_id"], "revision_id": art["revision_id"], "claim_id": claim["result"]["claim_id"],
            "citation": f"memoree://artifact/{art['artifact_id']}@{art['revision_id']}#bytes=0-4"}


def answer(daemon: DaemonProcess, body: bytes) -> dict[str, Any] | None:
    """The daemon's envelope for one frame, or None when it closed the connection unanswered."""
    sock = raw_connect(daemon.socket_path, timeout=60)
    try:
        sock.sendall(struct.pack(">I", len(body)) + body)
        return json.loads(read_frame(sock, MAX))
    except Exception:
        return None
    finally:
        sock.close()


def typed_failure(envelope: dict[str, Any] | None) -> bool:
    if envelope is None or envelope.get("ok") is not False:
        return False
    error = envelope.get("error", {})
    return (error.get("code") in ERROR_CODES and error["code"] != "INTERNAL_ERROR"
            and isinstance(error.get("message"), str) and "Traceback" not in error["message"]
            and isinstance(envelope.get("request_id"), str) and "retryable" in error)


def warm_rss(daemon: DaemonProcess) -> int:
    for _ in range(20):
        daemon.call(request("search", {"query": "seed text"}))
    return daemon.rss_kib()


class TestMalformedRequests:
    """Every malformed request gets a typed error with a stable code; the daemon stays up."""

    def test_schema_generated_malformed_requests(self, daemon: DaemonProcess, sizes: Sizes, figures: Figures) -> None:
        """Seeded mutations of schema-valid requests: typed failures (or valid successes), never INTERNAL_ERROR."""
        ids = seed_entities(daemon)
        bundle = daemon.call(request("schema", context=None))["result"]
        before = warm_rss(daemon)
        untyped, failures, kinds = [], 0, {}
        for kind, body in malformed_requests(sizes.hostile_requests, bundle, ids, CTX, seed=1234):
            envelope = answer(daemon, body)
            kinds[kind] = kinds.get(kind, 0) + 1
            if envelope is not None and envelope.get("ok") is True:
                continue
            failures += 1
            if not typed_failure(envelope):
                untyped.append((kind, body[:300], envelope))
        after = daemon.rss_kib()
        figures.add("hostile: schema-generated requests", operations=sizes.hostile_requests, faults=sizes.hostile_requests,
                    typed_errors=failures - len(untyped), errors=failures,
                    note=f"{len(kinds)} mutation kinds; RSS {before // 1024}->{after // 1024} MiB")
        assert [] == untyped[:5]
        assert probe(daemon.endpoint) is not None
        assert after - before < RSS_GROWTH_BOUND_KIB, (before, after)

    def test_hand_picked_hostile_requests(self, daemon: DaemonProcess, figures: Figures) -> None:
        """Deep nesting, huge integers, NaN, surrogates, bad UTF-8, unknown v, oversize: the expected typed codes."""
        ids = seed_entities(daemon)
        before = warm_rss(daemon)
        wrong = []
        for name, body, expected in HAND_PICKED:
            body = body.replace(b'"ART"', json.dumps(ids["artifact_id"]).encode()).replace(b'"CLM"', json.dumps(ids["claim_id"]).encode())
            envelope = answer(daemon, body)
            got = "OK" if envelope and envelope.get("ok") else (envelope or {}).get("error", {}).get("code")
            if got not in expected or (got != "OK" and not typed_failure(envelope)):
                wrong.append((name, got, (envelope or {}).get("error", {}).get("message", "")[:200]))
        after = daemon.rss_kib()
        failures = sum(1 for _, _, expected in HAND_PICKED if "OK" not in expected)
        figures.add("hostile: hand-picked requests", operations=len(HAND_PICKED), faults=len(HAND_PICKED),
                    typed_errors=failures - len(wrong), errors=failures,
                    note=f"RSS {before // 1024}->{after // 1024} MiB")
        assert [] == wrong, "\n".join(map(str, wrong))
        assert probe(daemon.endpoint) is not None
        assert after - before < RSS_GROWTH_BOUND_KIB, (before, after)


class TestMalformedRequestsThroughMemoreeCall:
    """The stdlib call client (memoree call) answers the same hostile requests with typed envelopes."""

    def test_hand_picked_through_the_call_client(self, daemon: DaemonProcess, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch, figures: Figures) -> None:
        """Each hand-picked body on stdin: one typed envelope, never an exception."""
        monkeypatch.chdir(tmp_path)
        for name in ("MEMOREE_CONTEXT", "MEMOREE_HOME", "MEMOREE_CONFIG", "MEMOREE_ENDPOINT"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("MEMOREE_HOME", str(tmp_path / "home"))
        options = callcmd.CallOptions(endpoint=str(daemon.endpoint), autostart=False)
        wrong, failures = [], 0
        for name, body, _ in HAND_PICKED:
            reply, code = callcmd.run(body, options)
            envelope = json.loads(reply)
            failures += not envelope.get("ok")
            if not (envelope.get("ok") or typed_failure(envelope)) or (code == 0) != bool(envelope.get("ok")):
                wrong.append((name, code, envelope.get("error")))
        figures.add("hostile: through memoree call", operations=len(HAND_PICKED), faults=len(HAND_PICKED),
                    typed_errors=failures - len(wrong), errors=failures)
        assert [] == wrong, "\n".join(map(str, wrong))
        assert probe(daemon.endpoint) is not None


class TestFrameDecoder:
    """Random, boundary, truncated and slow frames never take the daemon down."""

    def test_random_byte_streams(self, daemon: DaemonProcess, sizes: Sizes, figures: Figures) -> None:
        """Random headers and bodies: a typed envelope or a silent close, and the daemon keeps answering."""
        rng = random.Random(77)
        before = warm_rss(daemon)
        streams = max(200, sizes.hostile_requests // 5)
        answered = typed = 0
        for _ in range(streams):
            length = rng.choice([rng.randrange(0, 64), rng.randrange(64, 4096)])
            declared = rng.choice([length, length, rng.randrange(0, 2**32), max(0, length - rng.randrange(1, 8))])
            payload = struct.pack(">I", declared)[: rng.choice([4, 4, 4, rng.randrange(0, 4)])] + rng.randbytes(length)
            sock = raw_connect(daemon.socket_path, timeout=5)
            try:
                sock.sendall(payload)
                sock.shutdown(socket.SHUT_WR)
                envelope = json.loads(read_frame(sock, MAX))
            except Exception:
                envelope = None
            finally:
                sock.close()
            if envelope is not None:
                answered += 1
                typed += typed_failure(envelope)
        after = daemon.rss_kib()
        figures.add("hostile: random frame bytes", operations=streams, faults=streams, typed_errors=typed, errors=answered,
                    note=f"{streams - answered} closed unanswered")
        assert answered == typed
        assert probe(daemon.endpoint) is not None
        assert after - before < RSS_GROWTH_BOUND_KIB, (before, after)

    def test_boundary_lengths(self, daemon: DaemonProcess, figures: Figures) -> None:
        """Length 0 and exactly the maximum are answered; max+1 and 2^32-1 are closed unanswered; no leak."""
        # glibc raises its mmap threshold after the first large free, so each malloc arena the
        # daemon's threads use (the I/O thread, readers and writer share two) grows once to hold a
        # max-size frame and then stays: warm every arena up before measuring.
        for _ in range(WARM_UP_ROUNDS):
            self._boundary_round(daemon)
        warmed = daemon.rss_kib()
        for _ in range(ROUNDS_AFTER_WARM_UP):
            self._boundary_round(daemon)
        after = daemon.rss_kib()
        rounds = WARM_UP_ROUNDS + ROUNDS_AFTER_WARM_UP
        figures.add("hostile: boundary frame lengths", operations=6 * rounds, faults=6 * rounds, typed_errors=3 * rounds,
                    errors=3 * rounds, note=f"max+1, 2^32-1, oversize call closed unanswered; RSS {warmed // 1024}->{after // 1024} MiB")
        assert probe(daemon.endpoint) is not None
        assert after - warmed < RSS_GROWTH_BOUND_KIB, (warmed, after)

    @staticmethod
    def _boundary_round(daemon: DaemonProcess) -> None:
        empty = answer(daemon, b"")
        assert typed_failure(empty) and empty["request_id"] == "req_transport"
        document = json.dumps(request("capabilities", context=None)).encode()
        envelope = json.loads(exchange(daemon.endpoint, document + b" " * (MAX - len(document))))
        assert envelope["ok"], envelope
        assert typed_failure(answer(daemon, b"{" + b"x" * (MAX - 1)))
        for declared in (MAX + 1, 2**32 - 1):
            sock = raw_connect(daemon.socket_path)
            sock.sendall(struct.pack(">I", declared) + b"{}")
            assert closed_without_response(sock), declared
            sock.close()
        huge = {"kind": "n", "title": "t", "content": {"type": "text", "data": "a" * MAX}}
        oversize = json.dumps(request("artifact.put", huge, key="huge")).encode()
        body, code = callcmd.run(oversize, callcmd.CallOptions(endpoint=str(daemon.endpoint), autostart=False))
        assert ("TRANSPORT_ERROR", 1) == (json.loads(body)["error"]["code"], code)

    def test_truncated_frames(self, daemon: DaemonProcess, figures: Figures) -> None:
        """A header cut short, or a body shorter than declared, is closed unanswered; nothing leaks."""
        cases = [b"\x00", b"\x00\x00\x00", struct.pack(">I", 100) + b"{" * 50, struct.pack(">I", 10), struct.pack(">I", MAX) + b"{}"]
        for payload in cases * 10:
            sock = raw_connect(daemon.socket_path)
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            assert closed_without_response(sock)
            sock.close()
        figures.add("hostile: truncated frames", operations=len(cases) * 10, faults=len(cases) * 10,
                    note="all closed unanswered")
        assert probe(daemon.endpoint) is not None

    def test_slow_sender_is_answered_and_others_are_served(self, daemon: DaemonProcess, figures: Figures) -> None:
        """A request trickling in byte by byte is answered; meanwhile other clients are served."""
        body = json.dumps(request("capabilities", context=None)).encode()
        frame = struct.pack(">I", len(body)) + body
        result: dict[str, Any] = {}

        def slow() -> None:
            sock = raw_connect(daemon.socket_path, timeout=60)
            for offset in range(0, len(frame), 4):
                sock.sendall(frame[offset:offset + 4])
                time.sleep(0.01)
            result["envelope"] = json.loads(read_frame(sock, MAX))
            sock.close()

        thread = threading.Thread(target=slow)
        thread.start()
        served = sum(1 for _ in range(20) if daemon.call(request("doctor", context=None))["ok"])
        thread.join(60)
        assert 20 == served
        assert result["envelope"]["ok"]
        figures.add("hostile: slow sender", operations=21, faults=1, note="answered; 20 other requests served meanwhile")

    def test_connections_beyond_the_cap_evict_the_oldest_idle_one(self, daemon: DaemonProcess, figures: Figures) -> None:
        """Past the cap on open connections the oldest idle one is closed unanswered; a client that
        sends its frame at once is still answered."""
        from memoree.daemon.listener import MAX_OPEN_CONNECTIONS

        held = [raw_connect(daemon.socket_path) for _ in range(MAX_OPEN_CONNECTIONS + 20)]
        time.sleep(0.3)
        envelope = daemon.call(request("capabilities", context=None))
        assert envelope["ok"], envelope
        evicted = sum(1 for sock in held[:20] if closed_without_response(sock))
        assert 20 == evicted
        for sock in held:
            sock.close()
        assert probe(daemon.endpoint) is not None
        figures.add("hostile: connections beyond the cap", operations=len(held) + 1, faults=len(held),
                    note=f"{evicted} oldest idle closed unanswered; the new client answered")
