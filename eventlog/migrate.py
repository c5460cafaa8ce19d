"""``memoree log migrate --to postgresql://...``: move a data dir's SQLite log into PostgreSQL.

The migration is a replay of the stored log, not a re-append: every event keeps its position,
its stored bytes and its chain hash (the target checks each one continues the chain), and the
no-op idempotency records, the signed checkpoints and every blob the log references go along.
It runs in one PostgreSQL transaction under the append lock, so a failure leaves the target as
it was. A target that already holds a prefix of this log is continued (an interrupted or repeated
migration resumes); a target holding anything else is refused. Afterwards the data dir's SQLite
file is already a complete replica, so the host can switch to the shared log at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memoree.errors import ConfigError, IntegrityError
from memoree.eventlog.cas import ContentStore
from memoree.eventlog.checkpoints import list_checkpoints
from memoree.eventlog.db import DB_FILENAME, connect
from memoree.eventlog.postgres import PostgresContentStore, PostgresEventStore, redact_url
from memoree.eventlog.sqlite import SqliteEventStore
from memoree.eventlog.store import LogHead, first_chain_break, raise_on_break

__all__ = ["migrate"]

PAGE = 1000


def migrate(data_dir: Path, url: str) -> dict[str, Any]:
    """Copy the data dir's log, records and blobs into the PostgreSQL log at ``url``."""
    db_path = data_dir / DB_FILENAME
    if not db_path.is_file():
        raise ConfigError(f"no store at {data_dir} (missing {DB_FILENAME})")
    conn = connect(db_path)
    target = PostgresEventStore(url)
    try:
        conn.execute("BEGIN")  # one consistent snapshot of the source
        source = SqliteEventStore(conn)
        raise_on_break(first_chain_break(source.read_raw()))
        source_head = source.head()
        with target.transaction():
            result = _copy_everything(source, ContentStore(conn, data_dir / "blobs"), target)
        conn.execute("COMMIT")
        _check_copy(source_head, target)
    finally:
        target.close()
        conn.close()
    return {"to": redact_url(url), **result}


def _copy_everything(source: SqliteEventStore, blobs: ContentStore,
                     target: PostgresEventStore) -> dict[str, Any]:
    start = _resume_point(source, target)
    events = _copy_events(source, target, start)
    return {
        "resumed_from": start,
        "events_copied": events,
        "last_commit_seq": source.head().commit_seq,
        "noops_copied": _copy_noops(source.conn, target),
        "checkpoints_copied": _copy_checkpoints(source.conn, target),
        "blobs_copied": _copy_blobs(source, blobs, PostgresContentStore(target)),
    }


def _resume_point(source: SqliteEventStore, target: PostgresEventStore) -> int:
    """Where the target's log ends, provided it is a prefix of the source's."""
    head = target.head()
    if head.commit_seq == 0:
        return 0
    mine = source.conn.execute(
        "SELECT hash FROM events WHERE commit_seq = ?", (head.commit_seq,)).fetchone()
    if mine is None or bytes(mine[0]) != head.hash:
        raise IntegrityError(
            f"the target log {redact_url(target.url)} already holds {head.commit_seq} events that "
            "are not this store's", hint="Migrate into an empty database.")
    return head.commit_seq


def _copy_events(source: SqliteEventStore, target: PostgresEventStore, start: int) -> int:
    copied, after = 0, start
    while True:
        page = list(source.read(after=after, limit=PAGE))
        if not page:
            return copied
        target.append_recorded(page)
        copied, after = copied + len(page), page[-1].commit_seq


def _copy_noops(conn: Any, target: PostgresEventStore) -> int:
    present = {row[0] for row in target.noops_after(0)}
    rows = conn.execute(
        "SELECT key, request_digest, operation, commit_seq, result_json, recorded_at "
        "FROM idempotency_noops ORDER BY commit_seq, key").fetchall()
    missing = [row for row in rows if row[0] not in present]
    for key, digest, operation, commit_seq, result_json, at in missing:
        target.record_noop(key, digest, operation, commit_seq, bytes(result_json), at)
    return len(missing)


def _copy_checkpoints(conn: Any, target: PostgresEventStore) -> int:
    mine, theirs = list_checkpoints(conn), target.list_checkpoints()
    if mine[:len(theirs)] != theirs:
        raise IntegrityError("the target's signed checkpoints differ from this store's",
                             hint="Migrate into an empty database.")
    for checkpoint in mine[len(theirs):]:
        target.insert_checkpoint(checkpoint)
    return len(mine) - len(theirs)


def _copy_blobs(source: SqliteEventStore, blobs: ContentStore, target: PostgresContentStore) -> int:
    """Every blob the log references and has not purged, verified on the way out."""
    wanted: dict[str, int] = {}
    purged: set[str] = set()
    for event in source.read():
        payload = event.payload
        if event.type in ("artifact.created", "artifact.revised"):
            wanted[payload.blob_hash] = payload.size_bytes
        elif event.type == "artifact.purged":
            purged.update(payload.blob_hashes)
    copied = 0
    for digest, size in sorted(wanted.items()):
        if digest not in purged and not target.contains(digest, size):
            target.put(blobs.get(digest, size), digest)
            copied += 1
    return copied


def _check_copy(source_head: LogHead, target: PostgresEventStore) -> None:
    """The target's whole chain verifies and ends exactly where the source did."""
    raise_on_break(first_chain_break(target.read_raw()))
    if target.head() != source_head:
        raise IntegrityError("the migrated log does not end where the source does")
