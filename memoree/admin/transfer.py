"""Auditor export and disaster-recovery import of the raw log.

``export`` seals first, then writes NDJSON: a header, one line per stored event (position, type,
stored bytes, previous hash, hash), every signed checkpoint and every no-op idempotency record,
and can copy the referenced blobs into a folder. ``import_log`` rebuilds a store from such an
export in a staging folder beside the target: the rows are inserted verbatim (positions preserved
exactly, nothing re-appended), the projections are rebuilt by replay, and the staged store must
verify clean before it is renamed into place.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memoree.errors import ConfigError, IntegrityError, InvalidRequest
from memoree.eventlog.cas import digest_hex
from memoree.eventlog.checkpoints import Checkpoint, insert_checkpoint, list_checkpoints
from memoree.eventlog.store import RawEvent, first_chain_break
from memoree.eventlog.timefmt import now_utc

__all__ = ["EXPORT_FORMAT", "export", "import_log", "read_export"]

EXPORT_FORMAT = "memoree-log-export"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def export(engine: Any, output: Path, blobs_dir: Path | None = None) -> dict[str, Any]:
    """Write the auditor export of ``engine``'s log to ``output`` (atomically)."""
    from memoree.eventlog import sealing

    if output.exists():
        raise InvalidRequest(f"export destination already exists: {output}")
    sealing.seal(engine) if engine.head() else None
    conn = engine.conn
    checkpoints = list_checkpoints(conn)
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".memoree-export-", dir=output.parent)
    events = 0
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        first_key = conn.execute("SELECT public_key FROM key_epochs ORDER BY epoch LIMIT 1").fetchone()
        header = {"kind": "header", "format": EXPORT_FORMAT, "version": 1, "hash": "blake3",
                  "tree": "rfc9162", "origin": sealing.origin(first_key[0]) if first_key else None,
                  "last_commit_seq": engine.head(), "exported_at": now_utc()}
        handle.write(json.dumps(header) + "\n")
        for raw in engine.log.read_raw():
            handle.write(json.dumps({"kind": "event", "commit_seq": raw.commit_seq, "type": raw.type,
                                     "data": _b64(raw.data), "prev_hash": raw.prev_hash.hex(),
                                     "hash": raw.hash.hex()}) + "\n")
            events += 1
        for cp in checkpoints:
            handle.write(json.dumps({"kind": "checkpoint", **sealing.checkpoint_document(cp)}) + "\n")
        noops = conn.execute("SELECT key, request_digest, operation, commit_seq, result_json, recorded_at "
                             "FROM idempotency_noops ORDER BY commit_seq, key").fetchall()
        for key, digest, operation, seq, result, recorded_at in noops:
            handle.write(json.dumps({"kind": "idempotency_noop", "key": key, "request_digest": digest,
                                     "operation": operation, "commit_seq": seq, "result": _b64(bytes(result)),
                                     "recorded_at": recorded_at}) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp_name, output)
    copied = _copy_blobs(engine, blobs_dir) if blobs_dir else 0
    return {"output": str(output), "events": events, "checkpoints": len(checkpoints), "noops": len(noops),
            "blobs_dir": str(blobs_dir) if blobs_dir else None, "copied_blobs": copied}


def _referenced_blobs(engine: Any) -> dict[str, int]:
    blobs: dict[str, int] = {}
    purged: set[str] = set()
    for event in engine.log.read():
        p = event.payload
        if event.type in ("artifact.created", "artifact.revised"):
            blobs[p.blob_hash] = p.size_bytes
            purged.discard(p.blob_hash)  # the same bytes stored again after a purge are live again
        elif event.type == "artifact.purged":
            purged.update(p.blob_hashes)
    return {digest: size for digest, size in blobs.items() if digest not in purged}


def _copy_blobs(engine: Any, folder: Path) -> int:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    copied = 0
    for digest, size in sorted(_referenced_blobs(engine).items()):
        target = folder / digest
        if not target.exists():
            target.write_bytes(engine.cas.get(digest, size))
            os.chmod(target, 0o600)
            copied += 1
    return copied


def read_export(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("r", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except ValueError:
                    raise IntegrityError(f"export line {number} is not JSON") from None


def import_log(export_path: Path, data_dir: Path, blobs_dir: Path | None = None) -> dict[str, Any]:
    """Rebuild a store from an export into ``data_dir`` (which must be absent or empty)."""
    if data_dir.exists() and (not data_dir.is_dir() or any(data_dir.iterdir())):
        raise InvalidRequest(f"import target {data_dir} is not empty; choose a new data dir")
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".memoree-import-stage-", dir=data_dir.parent))
    try:
        report = _build(export_path, staging, blobs_dir)
        if data_dir.exists():
            data_dir.rmdir()
        os.rename(staging, data_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {**report, "data_dir": str(data_dir)}


def _build(export_path: Path, staging: Path, blobs_dir: Path | None) -> dict[str, Any]:
    from memoree.admin import verify as audit
    from memoree.service.engine import Engine
    from memoree.eventlog.db import connect, create_private
    from memoree.eventlog.sqlite import SqliteEventStore

    os.chmod(staging, 0o700)
    lines = list(read_export(export_path))
    if not lines or lines[0].get("kind") != "header" or lines[0].get("format") != EXPORT_FORMAT:
        raise InvalidRequest(f"{export_path} is not a memoree log export")
    events = [RawEvent(line["commit_seq"], line["type"], base64.b64decode(line["data"]),
                       bytes.fromhex(line["prev_hash"]), bytes.fromhex(line["hash"]))
              for line in lines if line.get("kind") == "event"]
    brk = first_chain_break(iter(events))
    if brk is not None:
        raise IntegrityError(f"the export's log breaks at commit_seq {brk.commit_seq}: {brk.problem}",
                             details={"commit_seq": brk.commit_seq})
    db_path = staging / "memoree.sqlite3"
    create_private(db_path)
    conn = connect(db_path)
    log = SqliteEventStore(conn)
    with log.transaction():
        _insert_events(conn, events)
        for line in lines:
            if line.get("kind") == "checkpoint":
                insert_checkpoint(conn, Checkpoint(
                    checkpoint_seq=line["checkpoint_seq"], tree_size=line["tree_size"], root=bytes.fromhex(line["root"]),
                    key_epoch=line["key_epoch"], signed_at=line["signed_at"], note=base64.b64decode(line["note"]),
                    signature=base64.b64decode(line["signature"])))
            elif line.get("kind") == "idempotency_noop":
                conn.execute("INSERT INTO idempotency_noops (key, request_digest, operation, commit_seq, result_json, recorded_at) "
                             "VALUES (?,?,?,?,?,?)", (line["key"], line["request_digest"], line["operation"],
                                                      line["commit_seq"], base64.b64decode(line["result"]), line["recorded_at"]))
    conn.close()
    engine = Engine(staging) if blobs_dir is None else None
    if engine is None:
        engine = _engine_with_blobs(staging, blobs_dir)
    try:
        report = audit.verify(engine)
    finally:
        engine.close()
    if not report["ok"]:
        raise IntegrityError("the imported store does not verify: " + "; ".join(i["message"] for i in report["issues"][:3]),
                             details={"issues": report["issues"]})
    return {"events": len(events), "last_commit_seq": report["last_commit_seq"],
            "checkpoints": report["checked_checkpoints"], "verify": {"ok": True, "unsealed_events": report["unsealed_events"]}}


def _insert_events(conn: Any, events: list[RawEvent]) -> None:
    from memoree.eventlog.codec import decode_envelope

    for raw in events:
        envelope = decode_envelope(raw.data)
        conn.execute(
            "INSERT INTO events (commit_seq, event_id, type, stream_id, stream_version, at, idempotency_key, "
            "request_digest, data, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (raw.commit_seq, envelope.event_id, raw.type, envelope.stream_id, envelope.stream_version,
             envelope.at, envelope.idempotency_key, envelope.request_digest, raw.data, raw.prev_hash, raw.hash),
        )


def _engine_with_blobs(staging: Path, blobs_dir: Path) -> Any:
    """Open the staged store after loading blobs into its CAS (verified by digest)."""
    from memoree.eventlog.cas import ContentStore
    from memoree.eventlog.db import connect

    conn = connect(staging / "memoree.sqlite3")
    cas = ContentStore(conn, staging / "blobs")
    conn.execute("BEGIN IMMEDIATE")
    for path in sorted(blobs_dir.iterdir()):
        data = path.read_bytes()
        if digest_hex(data) != path.name:
            conn.execute("ROLLBACK")
            raise IntegrityError(f"blob file {path.name} does not match its digest")
        cas.put(data, path.name)
    conn.execute("COMMIT")
    conn.close()
    from memoree.service.engine import Engine

    return Engine(staging)
