"""The log proves itself: sealing signed checkpoints, inclusion and consistency proofs.

``seal`` integrates every event not yet covered into the log-wide Merkle tree and signs a
checkpoint of it with the node key; ``prove`` and ``consistency`` answer RFC 9162 proofs against
those checkpoints. This is the log's own layer: it reads the ``events`` table and the checkpoint
records, never a projection. ``engine`` is any open store with ``conn``, ``log``, ``head()`` and
``node_key()``.
"""

from __future__ import annotations

import base64
from typing import Any

from memoree.errors import InvalidRequest, NotFound
from memoree.eventlog.checkpoints import (
    HASHER,
    Checkpoint,
    checkpoint_note,
    insert_checkpoint,
    leaf_hashes,
    list_checkpoints,
    prove_consistency,
    prove_inclusion,
)
from memoree.eventlog.merkle import CompactTree
from memoree.eventlog.timefmt import now_utc

__all__ = ["BATCH_EVENTS", "BATCH_SECONDS", "checkpoint_document", "consistency", "event_hashes", "maybe_seal",
           "origin", "prove", "seal", "unsealed"]

BATCH_EVENTS = 1000
BATCH_SECONDS = 10.0


def event_hashes(conn: Any, upto: int | None = None) -> list[bytes]:
    sql = "SELECT hash FROM events" + (" WHERE commit_seq <= ?" if upto is not None else "") + " ORDER BY commit_seq"
    return [bytes(row[0]) for row in conn.execute(sql, (upto,) if upto is not None else ()).fetchall()]


def origin(first_public_key: str) -> str:
    """The checkpoint origin line: names the store (its first key) and the tree's hash."""
    return f"memoree/{first_public_key[:16]}/blake3-rfc9162"


def _first_key(conn: Any) -> str:
    row = conn.execute("SELECT public_key FROM key_epochs ORDER BY epoch LIMIT 1").fetchone()
    if row is None:
        raise InvalidRequest("the store has no recorded node key yet")
    return row[0]


def unsealed(engine: Any) -> int:
    """How many events no checkpoint covers yet."""
    row = engine.conn.execute("SELECT max(tree_size) FROM checkpoints").fetchone()
    return engine.head() - (row[0] or 0)


def seal(engine: Any) -> Checkpoint | None:
    """Sign a checkpoint over every event so far; None when the last one already covers the head."""
    key = engine.node_key()
    with engine.log.transaction() as conn:
        checkpoints = list_checkpoints(conn)
        head = engine.log.head().commit_seq
        if checkpoints and checkpoints[-1].tree_size == head:
            return None
        tree = CompactTree(HASHER)
        tree.extend(leaf_hashes(event_hashes(conn, head)))
        signed_at = now_utc()
        note = checkpoint_note(origin(_first_key(conn)), head, tree.root(), key.epoch, signed_at)
        checkpoint = Checkpoint(
            checkpoint_seq=len(checkpoints) + 1, tree_size=head, root=tree.root(),
            key_epoch=key.epoch, signed_at=signed_at, note=note, signature=key.sign(note),
        )
        insert_checkpoint(conn, checkpoint)
    return checkpoint


def maybe_seal(engine: Any, *, force_age: bool = False) -> Checkpoint | None:
    """Seal when a full batch is waiting, or (``force_age``) when any event is unsealed."""
    waiting = unsealed(engine)
    if waiting >= BATCH_EVENTS or (force_age and waiting > 0):
        return seal(engine)
    return None


def checkpoint_document(cp: Checkpoint) -> dict[str, Any]:
    return {"checkpoint_seq": cp.checkpoint_seq, "tree_size": cp.tree_size, "root": cp.root.hex(),
            "key_epoch": cp.key_epoch, "signed_at": cp.signed_at,
            "note": base64.b64encode(cp.note).decode(), "signature": base64.b64encode(cp.signature).decode()}


def _checkpoint_covering(conn: Any, commit_seq: int, checkpoint_seq: int | None) -> Checkpoint:
    checkpoints = list_checkpoints(conn)
    if checkpoint_seq is not None:
        chosen = [cp for cp in checkpoints if cp.checkpoint_seq == checkpoint_seq]
        if not chosen:
            raise NotFound(f"checkpoint {checkpoint_seq}")
        if chosen[0].tree_size < commit_seq:
            raise InvalidRequest(f"checkpoint {checkpoint_seq} covers {chosen[0].tree_size} events, not {commit_seq}")
        return chosen[0]
    covering = [cp for cp in checkpoints if cp.tree_size >= commit_seq]
    if not covering:
        raise InvalidRequest(f"no checkpoint covers commit_seq {commit_seq} yet; run `memoree log seal`")
    return covering[0]


def prove(engine: Any, commit_seq: int, checkpoint_seq: int | None = None) -> dict[str, Any]:
    """An RFC 9162 inclusion proof of one event against a signed checkpoint."""
    conn = engine.conn
    if not 1 <= commit_seq <= engine.head():
        raise NotFound(f"event at commit_seq {commit_seq}")
    cp = _checkpoint_covering(conn, commit_seq, checkpoint_seq)
    hashes = event_hashes(conn, cp.tree_size)
    return {"commit_seq": commit_seq, "leaf_index": commit_seq - 1, "event_hash": hashes[commit_seq - 1].hex(),
            "leaf_hash": HASHER.hash_leaf(hashes[commit_seq - 1]).hex(), "tree_size": cp.tree_size,
            "root": cp.root.hex(), "hash": "blake3", "proof": [h.hex() for h in prove_inclusion(hashes, commit_seq, cp.tree_size)],
            "checkpoint": checkpoint_document(cp)}


def consistency(engine: Any, old_seq: int, new_seq: int) -> dict[str, Any]:
    """An RFC 9162 consistency proof between two checkpoints (by checkpoint number)."""
    checkpoints = {cp.checkpoint_seq: cp for cp in list_checkpoints(engine.conn)}
    if old_seq not in checkpoints or new_seq not in checkpoints:
        raise NotFound(f"checkpoint {old_seq if old_seq not in checkpoints else new_seq}")
    old, new = checkpoints[old_seq], checkpoints[new_seq]
    if old.tree_size > new.tree_size:
        raise InvalidRequest("the old checkpoint must not be larger than the new one")
    hashes = event_hashes(engine.conn, new.tree_size)
    return {"old": checkpoint_document(old), "new": checkpoint_document(new), "hash": "blake3",
            "proof": [h.hex() for h in prove_consistency(hashes, old.tree_size, new.tree_size)]}
