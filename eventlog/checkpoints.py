"""Signed checkpoints: the second append-only record beside the log.

The log's events form one RFC 9162-shaped Merkle tree (BLAKE3, leaf ``0x00``, node ``0x01``)
whose leaf ``i`` covers the chain hash of the event at ``commit_seq = i + 1``. A checkpoint fixes
the tree at some size: a short signed note naming the origin (which names the hash), the size,
the root, the signing key's epoch and the time, with an Ed25519 signature by the node key.
Checkpoints are never rewritten: a replay recomputes every recorded root, and a mismatch is
tamper evidence, never re-signed. They are not a projection; backups and exports carry them.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from .merkle import BLAKE3, CompactTree, consistency_proof, inclusion_proof

__all__ = [
    "CHECKPOINT_SCHEMA",
    "Checkpoint",
    "checkpoint_note",
    "leaf_hashes",
    "list_checkpoints",
    "log_root",
    "parse_note",
]

HASHER = BLAKE3

CHECKPOINT_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    checkpoint_seq INTEGER PRIMARY KEY,
    tree_size INTEGER NOT NULL UNIQUE,
    root BLOB NOT NULL,
    key_epoch INTEGER NOT NULL,
    signed_at TEXT NOT NULL,
    note BLOB NOT NULL,
    signature BLOB NOT NULL
) STRICT;
CREATE TRIGGER IF NOT EXISTS checkpoints_no_update BEFORE UPDATE ON checkpoints
    BEGIN SELECT RAISE(ABORT, 'checkpoints are immutable'); END;
CREATE TRIGGER IF NOT EXISTS checkpoints_no_delete BEFORE DELETE ON checkpoints
    BEGIN SELECT RAISE(ABORT, 'checkpoints are immutable'); END;
"""


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True):
    checkpoint_seq: int
    tree_size: int
    root: bytes
    key_epoch: int
    signed_at: str
    note: bytes
    signature: bytes


def checkpoint_note(origin: str, tree_size: int, root: bytes, key_epoch: int, signed_at: str) -> bytes:
    """The exact bytes a checkpoint signs."""
    return (f"{origin}\n{tree_size}\n{base64.b64encode(root).decode()}\n"
            f"key-epoch {key_epoch}\ntime {signed_at}\n").encode()


def parse_note(note: bytes) -> dict[str, Any]:
    """The fields of a signed note; ValueError when it is not one."""
    lines = note.decode("utf-8").split("\n")
    if len(lines) != 6 or lines[5] != "" or not lines[3].startswith("key-epoch ") or not lines[4].startswith("time "):
        raise ValueError("not a memoree checkpoint note")
    return {"origin": lines[0], "tree_size": int(lines[1]), "root": base64.b64decode(lines[2], validate=True),
            "key_epoch": int(lines[3].split(" ", 1)[1]), "signed_at": lines[4].split(" ", 1)[1]}


def leaf_hashes(event_hashes: Iterable[bytes]) -> Iterator[bytes]:
    for digest in event_hashes:
        yield HASHER.hash_leaf(digest)


def log_root(event_hashes: Iterable[bytes]) -> tuple[int, bytes]:
    """``(size, root)`` of the tree over the given event hashes (in commit_seq order)."""
    tree = CompactTree(HASHER)
    tree.extend(leaf_hashes(event_hashes))
    return tree.size, tree.root()


def prove_inclusion(event_hashes: list[bytes], commit_seq: int, tree_size: int) -> list[bytes]:
    return inclusion_proof(HASHER, list(leaf_hashes(event_hashes[:tree_size])), commit_seq - 1, tree_size)


def prove_consistency(event_hashes: list[bytes], old_size: int, new_size: int) -> list[bytes]:
    return consistency_proof(HASHER, list(leaf_hashes(event_hashes[:new_size])), old_size, new_size)


def list_checkpoints(conn: Any) -> list[Checkpoint]:
    rows = conn.execute(
        "SELECT checkpoint_seq, tree_size, root, key_epoch, signed_at, note, signature "
        "FROM checkpoints ORDER BY checkpoint_seq"
    ).fetchall()
    return [Checkpoint(checkpoint_seq=r[0], tree_size=r[1], root=bytes(r[2]), key_epoch=r[3],
                       signed_at=r[4], note=bytes(r[5]), signature=bytes(r[6])) for r in rows]


def insert_checkpoint(conn: Any, checkpoint: Checkpoint) -> None:
    conn.execute(
        "INSERT INTO checkpoints (checkpoint_seq, tree_size, root, key_epoch, signed_at, note, signature) "
        "VALUES (?,?,?,?,?,?,?)",
        (checkpoint.checkpoint_seq, checkpoint.tree_size, checkpoint.root, checkpoint.key_epoch,
         checkpoint.signed_at, checkpoint.note, checkpoint.signature),
    )
