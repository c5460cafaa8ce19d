"""Embedding beside a replay: a child process that embeds batches while this one replays the log.

A reindex (or a verify) replays the whole log on one core, and embedding its texts is most of
what the vectors projection adds to that. ``EmbeddingWorker`` hands batches of texts to a child
process (``serve``, started with this interpreter) that loads the same model files with
the same code, and gives the quantized rows back in the order the batches went in, so the
replay goes on while the child embeds. Before any row of the child's is used, the child embeds
a fixed probe and its bytes must equal this process's own: the rows a replay stores are the
bytes one-by-one writes store, whichever process computed them.

The worker is a speed-up, never a dependency: when the child cannot start, dies, or answers
anything unexpected, ``take`` raises ``WorkerFailed`` and the caller embeds what is outstanding
itself. The child exits when its input closes (also when this process is killed).

Frames on the pipes are a 4-byte little-endian length and a msgpack body: a request is
``[kind, items]`` (``"a"``: ``[title, body]`` artifact revisions, ``"t"``: texts), a reply
``[spans, rows]`` (``embed_request``: each revision's passage spans, and the int8 rows' bytes).
"""

from __future__ import annotations

import os
import queue
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["EmbeddingWorker", "WorkerFailed", "embed_request", "serve"]

HEADER = struct.Struct("<I")
PROBE: list[Any] = ["a", [["Probe title: a fixed text", "The probe's first passage, with ▁ and é.\n"
                                                       "A second passage\nwith two lines.  Spaced."]]]
STOP_SECONDS = 5.0
CHILD = "import sys; from memoree.projections.embed_worker import serve; sys.exit(serve(sys.argv[1], sys.argv[2]))"


def _as_tuples(reply: tuple[Any, bytes]) -> tuple[Any, bytes]:
    """A reply with its spans as tuples (msgpack gives lists back), to compare with one made here."""
    spans, block = reply
    return (None if spans is None else [[tuple(span) for span in doc] for doc in spans]), block


class WorkerFailed(RuntimeError):
    """The child process cannot be used (any more): embed the outstanding batches here."""


def embed_request(model: Any, request: list[Any]) -> tuple[list[Any] | None, bytes]:
    """One request's answer, what both the child and this process compute: for artifact
    revisions (``"a"``: ``[title, body]`` each) the passage spans of each and the int8 rows
    (title, then passages, revision after revision); for texts (``"t"``) ``None`` and a row each."""
    from .embedding import quantize_block
    from .windows import document_passages

    kind, items = request
    if kind == "a":
        documents = [(title, document_passages(body)) for title, body in items]
        vectors = model.embed_documents([(title, passages) for title, (_, passages) in documents])
        return [spans for _, (spans, _) in documents], quantize_block(model.np, vectors)
    if kind == "t":
        return None, quantize_block(model.np, model.embed(list(items)))
    raise ValueError(f"unknown request kind {kind!r}")


class EmbeddingWorker:
    """One child process; ``submit`` requests, then ``take`` their replies in the same order.
    ``on_reply``, when given, is called (from the worker's reader thread) after each reply or
    failure arrives, so a caller need not poll."""

    def __init__(self, model: Any, on_reply: Callable[[], None] | None = None) -> None:
        import msgspec

        self.encoder = msgspec.msgpack.Encoder()
        self.decoder = msgspec.msgpack.Decoder()
        self.expected_probe = embed_request(model, PROBE)
        self.replies: queue.SimpleQueue[tuple[Any, bytes] | BaseException] = queue.SimpleQueue()
        self.requests: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.outstanding = 0
        self.failure: str | None = None
        self.on_reply = on_reply
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", CHILD, str(model.folder), model.revision],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        except (OSError, ValueError) as exc:
            raise WorkerFailed(f"the embedding worker could not start ({type(exc).__name__})") from exc
        self.writer = threading.Thread(target=self._write, name="embed-worker-writer", daemon=True)
        self.reader = threading.Thread(target=self._read, name="embed-worker-reader", daemon=True)
        self.writer.start()
        self.reader.start()
        self._send(PROBE)
        self.probed = False

    def submit(self, request: list[Any]) -> None:
        """Queue one request; it never blocks (the writer thread feeds the child)."""
        if self.failure is not None:
            raise WorkerFailed(self.failure)
        self._send(request)
        self.outstanding += 1

    def take(self, block: bool) -> tuple[list[Any] | None, bytes] | None:
        """The oldest outstanding reply, or ``None`` when none is ready and ``block`` is false."""
        if self.failure is not None:
            raise WorkerFailed(self.failure)
        if not self.probed:
            probe = self._next(block)
            if probe is None:
                return None
            if _as_tuples(probe) != _as_tuples(self.expected_probe):
                self._fail("the embedding worker's probe differs from this process's")
            self.probed = True
        reply = self._next(block)
        if reply is not None:
            self.outstanding -= 1
        return reply

    def close(self, patience: float | None = None) -> None:
        """Stop the child: its input closes, and it is killed if it has not exited within
        ``patience`` seconds (``STOP_SECONDS`` by default; 0 for a child no longer trusted, which
        need not exit when its input closes)."""
        self.requests.put(None)
        try:
            self.process.wait(timeout=STOP_SECONDS if patience is None else patience)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def _send(self, request: list[Any]) -> None:
        body = self.encoder.encode(request)
        self.requests.put(HEADER.pack(len(body)) + body)

    def _next(self, block: bool) -> tuple[list[Any] | None, bytes] | None:
        try:
            reply = self.replies.get(block=block)
        except queue.Empty:
            return None
        if isinstance(reply, BaseException):
            self._fail(f"the embedding worker stopped ({type(reply).__name__}: {reply})")
        return reply  # type: ignore[return-value]

    def _fail(self, reason: str) -> None:
        self.failure = reason
        self.process.kill()
        raise WorkerFailed(reason)

    def _write(self) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        try:
            while (frame := self.requests.get()) is not None:
                stdin.write(frame)
                stdin.flush()
        except (OSError, ValueError):
            pass  # the child is gone; the reader reports it
        finally:
            try:
                stdin.close()
            except OSError:
                pass

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while True:
                header = stdout.read(HEADER.size)
                if len(header) < HEADER.size:
                    raise EOFError("the embedding worker closed its output")
                (length,) = HEADER.unpack(header)
                body = stdout.read(length)
                if len(body) < length:
                    raise EOFError("the embedding worker's reply was cut short")
                spans, block = self.decoder.decode(body)
                self.replies.put((spans, block))
                self._notify()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, who embeds itself
            self.replies.put(exc)
            self._notify()

    def _notify(self) -> None:
        if self.on_reply is not None:
            self.on_reply()


def serve(folder: str, revision: str) -> int:
    """The child's loop: load the model, answer requests until the input closes."""
    import msgspec

    from .embedding import Model

    # Replies go to a private copy of stdout; anything printed by a library goes to stderr.
    output = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    model = Model(Path(folder), revision)
    decoder, encoder = msgspec.msgpack.Decoder(), msgspec.msgpack.Encoder()
    source = sys.stdin.buffer
    while True:
        header = source.read(HEADER.size)
        if len(header) < HEADER.size:
            return 0
        (length,) = HEADER.unpack(header)
        reply = encoder.encode(embed_request(model, decoder.decode(source.read(length))))
        output.write(HEADER.pack(len(reply)) + reply)
        output.flush()

