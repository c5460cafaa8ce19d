"""The key-epochs projection: every node-key epoch the log has recorded, with its public key.

Signatures (Merkle checkpoints, fact receipts) name an epoch; verifiers look its public key up
here, or in the log itself.
"""

from __future__ import annotations

from typing import Any, ClassVar

from memoree.eventlog.store import RecordedEvent

__all__ = ["KeysProjector", "recorded_epochs"]


class KeysProjector:
    name: ClassVar[str] = "keys"
    version: ClassVar[int] = 1
    schema: ClassVar[str] = """
CREATE TABLE IF NOT EXISTS key_epochs (
    epoch INTEGER PRIMARY KEY,
    public_key TEXT NOT NULL,
    algorithm TEXT NOT NULL,
    commit_seq INTEGER NOT NULL UNIQUE,
    started_at TEXT NOT NULL
) STRICT;
"""

    def apply(self, conn: Any, event: RecordedEvent) -> None:
        if event.type == "key.epoch_started":
            p = event.payload
            conn.execute(
                "INSERT INTO key_epochs (epoch, public_key, algorithm, commit_seq, started_at) VALUES (?,?,?,?,?)",
                (p.epoch, p.public_key, p.algorithm, event.commit_seq, event.at),
            )


def recorded_epochs(conn: Any) -> dict[int, str]:
    """``epoch -> public key (base32)`` for every epoch recorded in the log."""
    return dict(conn.execute("SELECT epoch, public_key FROM key_epochs ORDER BY epoch").fetchall())
