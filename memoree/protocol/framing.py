"""Length-prefixed frames: a 4-byte big-endian length, then that many bytes of UTF-8 JSON.

One request frame and one response frame per connection. A declared length above the limit is
refused before a single body byte is read. Standard library only (the call client uses it).
"""

from __future__ import annotations

import socket
import struct

__all__ = ["FrameTooLarge", "FrameTruncated", "read_frame", "write_frame"]

_HEADER = struct.Struct(">I")


class FrameTooLarge(Exception):
    """The peer declared a frame longer than the limit."""

    def __init__(self, declared: int, limit: int) -> None:
        super().__init__(f"frame of {declared} bytes exceeds the {limit}-byte limit")
        self.declared = declared


class FrameTruncated(Exception):
    """The connection ended before a whole frame arrived."""


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise FrameTruncated(f"connection closed with {remaining} of {size} bytes unread")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket, limit: int) -> bytes:
    """Read one frame; FrameTooLarge is raised from the header alone."""
    (length,) = _HEADER.unpack(_read_exactly(sock, _HEADER.size))
    if length > limit:
        raise FrameTooLarge(length, limit)
    return _read_exactly(sock, length)


def write_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(_HEADER.pack(len(payload)) + payload)
