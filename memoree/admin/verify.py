"""Verify: the store checks itself end to end, writing nothing.

``verify`` checks the hash chain and the density of ``commit_seq``, recomputes every checkpoint's
root and checks its signature under the key epoch the log recorded, checks the count kept beside
the no-op idempotency records, re-hashes every blob the log
references, and replays the whole log into a scratch store to compare each projection's
fingerprint with the live one. Every problem is reported with the first bad position and a hint;
a damaged store is never "ok". Sealing and proofs live in ``memoree.eventlog.sealing``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec
from blake3 import blake3

from memoree.errors import MemoreeError
from memoree.eventlog.checkpoints import (
    HASHER,
    Checkpoint,
    leaf_hashes,
    list_checkpoints,
    parse_note,
)
from memoree.eventlog.db import sqlite3
from memoree.eventlog.keys import verify_signature
from memoree.eventlog.merkle import CompactTree
from memoree.eventlog.sealing import event_hashes, origin
from memoree.eventlog.store import first_chain_break
from memoree.projections import sync_projectors
from memoree.projections.base import owned_tables
from memoree.projections.beside import ScratchBuild, remove_dead_scratches
from memoree.projections.fts import FTS_INDEXES
from memoree.projections.vectors import caught_up_rows

__all__ = ["projection_fingerprint", "verify"]

class _Report:
    def __init__(self) -> None:
        self.issues: list[dict[str, Any]] = []

    def add(self, kind: str, message: str, hint: str, commit_seq: int | None = None) -> None:
        issue: dict[str, Any] = {"kind": kind, "message": message, "hint": hint}
        if commit_seq is not None:
            issue["commit_seq"] = commit_seq
        self.issues.append(issue)


_RESTORE_HINT = "Restore from a verified backup or an auditor's export (`memoree log import`)."


def verify(engine: Any, *, replay: bool = True) -> dict[str, Any]:
    """Check the whole store without writing anything; see the module docstring.

    Everything is read in one snapshot (one read transaction), so writes committed meanwhile by
    a daemon are simply not seen, never mistaken for damage. The full-text indexes' own check
    runs afterwards, on a connection of its own.
    """
    from memoree.queries.search import read_snapshot

    with read_snapshot(engine.conn):
        report, result = _verify_snapshot(engine, replay)
    if replay:
        _check_text_indexes(engine.db_path, report)
    result["ok"] = not report.issues
    result["issues"] = report.issues
    return result


def _verify_snapshot(engine: Any, replay: bool) -> tuple[_Report, dict[str, Any]]:
    report = _Report()
    conn = engine.conn
    head = engine.log.head().commit_seq if engine.shared is None else engine.head()
    brk = first_chain_break(engine.log.read_raw())
    if brk is not None:
        report.add("log", f"event log breaks at commit_seq {brk.commit_seq}: {brk.problem}", _RESTORE_HINT, brk.commit_seq)
    verified_upto = (brk.commit_seq - 1) if brk else head
    keys, blobs, purged = _scan_events(engine, verified_upto)
    checkpoints = list_checkpoints(conn)
    _check_checkpoints(conn, checkpoints, keys, report)
    _check_noop_count(conn, report)
    checked_blobs = _check_blobs(engine, blobs, purged, report)
    projections = _compare_projections(engine, verified_upto, report) if replay and brk is None else {}
    sealed = checkpoints[-1].tree_size if checkpoints else 0
    return report, {
        "ok": False,
        "last_commit_seq": head,
        "checked_events": verified_upto,
        "checked_checkpoints": len(checkpoints),
        "unsealed_events": max(0, head - sealed),
        "checked_blobs": checked_blobs,
        "purged_blobs": sorted(purged),
        "projections": projections,
        "issues": [],
        "warnings": [f"{head - sealed} events are not yet covered by a signed checkpoint; run `memoree log seal`"] if head > sealed else [],
    }


def _scan_events(engine: Any, upto: int) -> tuple[dict[int, str], dict[str, int], set[str]]:
    keys: dict[int, str] = {}
    blobs: dict[str, int] = {}
    purged: set[str] = set()
    for event in engine.log.read(limit=upto):
        p = event.payload
        if event.type == "key.epoch_started":
            keys[p.epoch] = p.public_key
        elif event.type in ("artifact.created", "artifact.revised"):
            blobs[p.blob_hash] = p.size_bytes
            purged.discard(p.blob_hash)  # the same bytes stored again after a purge are live again
        elif event.type == "artifact.purged":
            purged.update(p.blob_hashes)
    return keys, blobs, purged


def _check_checkpoints(conn: Any, checkpoints: list[Checkpoint], keys: dict[int, str], report: _Report) -> None:
    if not checkpoints:
        return
    hashes = event_hashes(conn)
    tree = CompactTree(HASHER)
    first_key = keys.get(min(keys)) if keys else None
    for index, cp in enumerate(checkpoints, start=1):
        if cp.checkpoint_seq != index:
            report.add("checkpoint", f"checkpoint numbers are not dense at {index}", _RESTORE_HINT)
            return
        if cp.tree_size > len(hashes):
            report.add("checkpoint", f"checkpoint {index} covers {cp.tree_size} events but the log holds {len(hashes)}",
                       "Events after a signed checkpoint are missing: the log was truncated. " + _RESTORE_HINT, len(hashes) + 1)
            return
        tree.extend(leaf_hashes(hashes[tree.size:cp.tree_size]))
        if tree.root() != cp.root:
            report.add("checkpoint", f"checkpoint {index} root does not match the events it covers",
                       "An event at or before this size was altered or reordered. " + _RESTORE_HINT, cp.tree_size)
            return
        _check_note(cp, keys, first_key, report)


def _check_noop_count(conn: Any, report: _Report) -> None:
    """The trigger-kept count of no-op records (what a shared log's host compares with the shared
    head's) must be the number of records."""
    stored = conn.execute("SELECT count(*) FROM idempotency_noops").fetchone()[0]
    row = conn.execute("SELECT noops FROM idempotency_noop_count").fetchone()
    if row is None or row[0] != stored:
        report.add("noops", f"the no-op record count says {None if row is None else row[0]} but "
                            f"{stored} records are stored", _RESTORE_HINT)


def _check_note(cp: Checkpoint, keys: dict[int, str], first_key: str | None, report: _Report) -> None:
    try:
        fields = parse_note(cp.note)
    except ValueError:
        report.add("checkpoint", f"checkpoint {cp.checkpoint_seq} note is malformed", _RESTORE_HINT, cp.tree_size)
        return
    expected = {"tree_size": cp.tree_size, "root": cp.root, "key_epoch": cp.key_epoch, "signed_at": cp.signed_at}
    if any(fields[k] != v for k, v in expected.items()) or (first_key and fields["origin"] != origin(first_key)):
        report.add("checkpoint", f"checkpoint {cp.checkpoint_seq} note disagrees with its record", _RESTORE_HINT, cp.tree_size)
        return
    public = keys.get(cp.key_epoch)
    if public is None:
        report.add("signature", f"checkpoint {cp.checkpoint_seq} names key epoch {cp.key_epoch}, which the log never recorded",
                   _RESTORE_HINT, cp.tree_size)
        return
    raw = base64.b32decode(public.upper() + "=" * (-len(public) % 8))
    if not verify_signature(raw, cp.note, cp.signature):
        report.add("signature", f"checkpoint {cp.checkpoint_seq} signature does not verify under key epoch {cp.key_epoch}",
                   "The checkpoint record was altered. " + _RESTORE_HINT, cp.tree_size)


def _check_blobs(engine: Any, blobs: dict[str, int], purged: set[str], report: _Report) -> int:
    checked = 0
    for digest, size in sorted(blobs.items()):
        if digest in purged:
            continue
        checked += 1
        if not engine.cas.contains(digest, size):
            report.add("blob", f"blob {digest} ({size} bytes) is missing or does not match its digest",
                       "Restore the blob from a backup (blobs/ folder) or the auditor export's blob directory.")
    return checked


def projection_fingerprint(conn: Any, tables: list[str],
                           rows_of: Callable[[Any, str], Iterable[Any]] | None = None) -> str:
    """A digest of the tables' rows (``rows_of(conn, table)``, default all of them), independent
    of row order.

    Full-text indexes are skipped: they are external-content indexes whose rows *are* their
    content tables' rows, fingerprinted already; their pages are checked by ``_check_text_indexes``.
    """
    digest = blake3()
    encode = msgspec.json.encode  # bytes values encode as base64 text: deterministic
    for table in tables:
        if table in FTS_INDEXES:
            continue
        found = rows_of(conn, table) if rows_of is not None else conn.execute(f"SELECT * FROM {table}")
        rows = sorted(map(encode, found))
        digest.update(table.encode() + b"\0")
        digest.update(b"\n".join(rows) + b"\n")
    return digest.hexdigest()


def _check_text_indexes(db_path: Path, report: _Report) -> None:
    """FTS5's own check that each live full-text index is sound and matches the rows it indexes
    (rank 1 asks for the comparison with the content table, not only the index's structure).

    The check is an INSERT command, so it runs in a write transaction of its own (rolled back:
    it changes nothing), on its own connection, after the snapshot the rest of verify read."""
    from memoree.eventlog.db import connect, sqlite3

    conn = connect(db_path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        for index in FTS_INDEXES:
            try:
                conn.execute(f"INSERT INTO {index}({index}, rank) VALUES('integrity-check', 1)")
            except sqlite3.DatabaseError as exc:
                report.add("projection", f"full-text index {index} does not match its rows ({exc})",
                           "Run `memoree reindex --projection fts` to rebuild it from the log.")
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.close()


def _compare_projections(engine: Any, upto: int, report: _Report) -> dict[str, Any]:
    results: dict[str, Any] = {}
    # In the data dir (private, this user's), never a shared temp dir; a purge and the next start
    # remove scratches a killed verify left. Rows are compared, so the scratch builds no full-text
    # index pages (the live ones get FTS5's own integrity check instead).
    parent = engine.data_dir
    remove_dead_scratches(parent)
    with ScratchBuild(parent, sync_projectors(engine.cas)) as build:
        try:
            build.replay(engine.log.read(limit=upto))
        except MemoreeError as exc:
            report.add("projection", f"replaying the log failed: {exc.message}",
                       "Fix the damage named above (often a missing or damaged blob), then verify again.",
                       (exc.details or {}).get("commit_seq"))
            return results
        for projector in build.projectors:
            tables = owned_tables(projector)
            # The vectors of an embedded store may lag its log: compared as a caught-up store holds them.
            rows_of = caught_up_rows if projector.name == "vectors" else None
            live = projection_fingerprint(engine.conn, tables, rows_of)
            replayed = projection_fingerprint(build.conn, tables)
            results[projector.name] = {"live": live, "replayed": replayed, "ok": live == replayed}
            if live != replayed:
                report.add("projection", f"projection {projector.name} differs from a replay of the log",
                           f"Run `memoree reindex --projection {projector.name}` to rebuild it from the log.")
    return results
