"""The vectors projection: one embedding per artifact passage and per claim revision.

This module owns the dense side of retrieval's index: for every artifact revision, one vector
for its title and one per passage of its index text (lines packed into windows of at most
``PASSAGE_BYTES``, each with its exact ``[start_byte, end_byte)`` in that text), and for every
claim revision one vector for its statement. Vectors are the local model's unit embeddings
(``projections.embedding``) quantized to int8, so they are a pure function of the log and the
model: a replay rebuilds the same bytes, and ``verify`` compares them like any other rows.

Rows are keyed like the FTS projection's (artifact passages by ``doc_id << 16 | ordinal``, claims
by ``doc_id``), so they only ever grow, except when a purge removes an artifact's passages: each
purge bumps ``vector_state.generation`` (absent = 0), which tells a reader's in-memory copy to reload.

The projector reads the index text the FTS projector wrote (so a purged body, which the FTS
projector empties, is never embedded). It runs in one of two modes:

* **in the mutation's transaction** (the default: replays, scratch builds): a write's vectors
  commit with it;
* **catching up** (``lazy``, what every engine uses, ``memoree.service.engine.catching_up_vectors``;
  on a shared log's host its follower's projector too, beside the engine's in the same file, so
  both mark the one lag mark): a write only marks the projection as lagging (``vector_state.embedded_through``, the ``commit_seq`` through which the
  rows are complete, set by the first write after a catch-up), and ``catch_up`` later embeds every
  event after that mark in one batch, in a write transaction of its own that stores the rows and
  moves (or, once level with the log, deletes) the mark: rows and mark always commit together, so
  a crash at any point leaves them consistent, and a caught-up store holds exactly a replay's rows.
  A purge still erases the artifact's stored rows in its own transaction. The daemon's writer
  splits a catch-up in two (``slice_job``, then ``store_slice`` once another process embedded
  the job's texts): the store is refused when the mark or the purge generation moved meanwhile,
  so what it stores is what ``catch_up`` would have stored at that moment. A read whose snapshot
  is past the mark embeds the events after it in memory (``pending_rows``: the same function of
  the same text, so the same bytes the catch-up will store), which is how every read sees every
  write at or before its snapshot, through the dense channel too.

Where the model is not installed the projector writes nothing and carries version 0; installing
the model makes that version stale, so the store rebuilds the projection from the log on its next
open.

A replay (reindex, verify, a rebuild on open) embeds in batches of ``BULK_BATCH`` rows; once it
has ``WORKER_AFTER_ROWS`` behind it, the batches go to a child process
(``projections.embed_worker``) while the replay goes on, and their rows are stored as the replies
come back (all of them before a purge erases, and before the replay commits). Rows are keyed by
the log, not by when they are stored, so the tables hold the same rows either way; the index by
artifact is built once at the replay's end.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import msgspec

from memoree.errors import IntegrityError
from memoree.eventlog.store import RecordedEvent

from .embed_worker import EmbeddingWorker, WorkerFailed, embed_request
from .embedding import load_model, split_rows
from .fts import CHUNK_ID_BITS, last_doc_ids
from .windows import PASSAGE_BYTES, passage_spans

__all__ = ["PASSAGE_BYTES", "SliceJob", "VectorsProjector", "caught_up_rows", "embedded_through",
           "passage_spans", "pending_rows", "projector_version", "slice_job"]

BULK_BATCH = 512
# A replay embeds in a child process (``projections.embed_worker``) once it has this many rows
# behind it (a small log is done before a child would have started), with at most this many
# batches handed over and not yet stored.
WORKER_AFTER_ROWS = 4096
MAX_IN_FLIGHT = 32
# 2: a passage is its own tokens plus its title's (was: the text "title\npassage" tokenized).
MODEL_VERSION = 2
# vector_state's key for the catch-up mark: present only while rows lag the log.
WATERMARK = "embedded_through"
# Events whose texts get vectors (a purge only removes some).
EMBEDDED_EVENTS = ("artifact.created", "artifact.revised", "claim.asserted", "claim.revised")

# What a purge finds an artifact's rows by. A replay builds it once at its end (or at its first
# purge) instead of row by row: random artifact ids make every row an insert at a random place.
BY_ARTIFACT = "CREATE INDEX IF NOT EXISTS artifact_vectors_by_artifact ON artifact_vectors(artifact_id)"

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS artifact_vectors (
    vec_id INTEGER PRIMARY KEY,
    doc_id INTEGER NOT NULL,
    revision_id TEXT NOT NULL,
    artifact_id TEXT NOT NULL,
    start_byte INTEGER,
    end_byte INTEGER,
    vector BLOB NOT NULL
) STRICT;
{BY_ARTIFACT};
CREATE TABLE IF NOT EXISTS claim_vectors (
    doc_id INTEGER PRIMARY KEY,
    revision_id TEXT NOT NULL,
    vector BLOB NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS vector_state (
    key TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) STRICT;
"""


_Revision = tuple[int, str, str, str, str]  # doc_id, revision_id, artifact_id, title, body


def projector_version() -> int:
    """``MODEL_VERSION`` where the model is loaded here, else 0 (an empty projection)."""
    return MODEL_VERSION if load_model() is not None else 0


def embedded_through(conn: Any) -> int | None:
    """The catch-up mark: the ``commit_seq`` through which the rows are complete, or ``None``
    when they are complete through the projection's checkpoint (nothing lags)."""
    row = conn.execute("SELECT value FROM vector_state WHERE key = ?", (WATERMARK,)).fetchone()
    return None if row is None else row[0]


def purge_generation(conn: Any) -> int:
    """How many purges have erased stored rows (``vector_state.generation``, absent = 0)."""
    row = conn.execute("SELECT value FROM vector_state WHERE key = 'generation'").fetchone()
    return 0 if row is None else row[0]


def _log_head(conn: Any) -> int:
    return conn.execute("SELECT coalesce(max(commit_seq), 0) FROM events").fetchone()[0]


class SliceJob(msgspec.Struct, frozen=True):
    """A slice of the catch-up read and not yet embedded: the events ``(mark, upto]``, the purge
    generation it was read at, and the texts whose rows it owes (``requests``, in that order, are
    what ``embed_request`` answers, here or in an embedding worker)."""

    mark: int
    upto: int
    generation: int
    artifacts: list[_Revision]
    claims: list[tuple[int, str, str]]

    def requests(self) -> list[list[Any]]:
        wanted: list[list[Any]] = []
        if self.artifacts:
            wanted.append(["a", [[revision[3], revision[4]] for revision in self.artifacts]])
        if self.claims:
            wanted.append(["t", [row[-1] for row in self.claims]])
        return wanted


def slice_job(conn: Any, max_events: int) -> SliceJob | None:
    """The next ``max_events`` events of the catch-up as a job (``None`` when nothing lags or
    the model is not installed). The generation is read before the texts, so a purge that
    empties one of them after this read also refuses the job's store."""
    mark = embedded_through(conn)
    if mark is None or load_model() is None:
        return None
    generation = purge_generation(conn)
    upto = min(_log_head(conn), mark + max_events)
    artifact_ids, claim_ids = _embedded_revisions(conn, mark, upto)
    return SliceJob(mark, upto, generation, [_artifact_text(conn, revision_id) for revision_id in artifact_ids],
                    [_claim_text(conn, revision_id) for revision_id in claim_ids])


def _embedded_revisions(conn: Any, after: int, upto: int) -> tuple[list[str], list[str]]:
    """Revision ids (artifacts, claims) of the events in ``(after, upto]`` that get vectors."""
    from memoree.eventlog.codec import decode_envelope, decode_payload

    marks = ",".join("?" * len(EMBEDDED_EVENTS))
    artifacts, claims = [], []
    for seq, data in conn.execute(
            f"SELECT commit_seq, data FROM events WHERE commit_seq > ? AND commit_seq <= ? AND type IN ({marks}) "
            "ORDER BY commit_seq", (after, upto, *EMBEDDED_EVENTS)):
        try:
            envelope = decode_envelope(bytes(data))
            revision_id = decode_payload(envelope).revision_id
        except (msgspec.DecodeError, msgspec.ValidationError, AttributeError) as exc:
            raise _damaged(f"the event at commit_seq {seq} does not decode ({exc})") from None
        (artifacts if envelope.type.startswith("artifact.") else claims).append(revision_id)
    return artifacts, claims


def _damaged(what: str) -> IntegrityError:
    return IntegrityError(f"the vectors cannot catch up: {what}",
                          hint="Run `memoree verify` to find the damage, then `memoree reindex`.")


def pending_rows(conn: Any, after: int, upto: int) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The rows a catch-up would store for the events in ``(after, upto]``, computed here and
    written nowhere (a read-only connection will do): ``artifact_vectors`` and ``claim_vectors``
    rows, column for column, each table's in key order. Empty without the model."""
    model = load_model()
    if model is None or upto <= after:
        return [], []
    artifact_ids, claim_ids = _embedded_revisions(conn, after, upto)
    artifacts: list[tuple[Any, ...]] = []
    claimed: list[tuple[Any, ...]] = []
    for at in range(0, len(artifact_ids), BULK_BATCH):  # batches: a long tail's memory stays bounded
        revisions = [_artifact_text(conn, revision_id) for revision_id in artifact_ids[at:at + BULK_BATCH]]
        artifacts += artifact_rows(revisions, embed_request(model, ["a", [[r[3], r[4]] for r in revisions]]))
    for at in range(0, len(claim_ids), BULK_BATCH):
        claims = [_claim_text(conn, revision_id) for revision_id in claim_ids[at:at + BULK_BATCH]]
        claimed += claim_rows(claims, embed_request(model, ["t", [row[-1] for row in claims]]))
    return sorted(artifacts), sorted(claimed)


def caught_up_rows(conn: Any, table: str) -> list[tuple[Any, ...]]:
    """``table``'s rows as a caught-up store holds them: the stored rows plus those a catch-up
    would add, and no catch-up mark (how ``verify`` compares a lagging store with a replay)."""
    if table == "vector_state":
        return conn.execute("SELECT * FROM vector_state WHERE key != ?", (WATERMARK,)).fetchall()
    stored = conn.execute(f"SELECT * FROM {table}").fetchall()
    mark = embedded_through(conn)
    if mark is None or table not in ("artifact_vectors", "claim_vectors"):
        return stored
    head = conn.execute("SELECT position FROM projector_checkpoints WHERE name = 'vectors'").fetchone()[0]
    artifacts, claims = pending_rows(conn, mark, head)
    return stored + (artifacts if table == "artifact_vectors" else claims)


def _artifact_text(conn: Any, revision_id: str) -> _Revision:
    row = conn.execute("SELECT doc_id, artifact_id, title, body FROM artifact_search_text WHERE revision_id = ?",
                       (revision_id,)).fetchone()
    if row is None:
        raise _damaged(f"the fts projection holds no text of revision {revision_id}")
    doc_id, artifact_id, title, body = row
    return doc_id, revision_id, artifact_id, title, body


def _claim_text(conn: Any, revision_id: str) -> tuple[int, str, str]:
    row = conn.execute("SELECT doc_id, statement FROM claim_search_text WHERE revision_id = ?",
                       (revision_id,)).fetchone()
    if row is None:
        raise _damaged(f"the fts projection holds no text of revision {revision_id}")
    return row[0], revision_id, row[1]


def artifact_rows(batch: list[_Revision], reply: tuple[Any, bytes]) -> list[tuple[Any, ...]]:
    """``artifact_vectors`` rows of embedded revisions (``reply``: ``embed_request``'s answer)."""
    all_spans, block = reply
    blobs = iter(split_rows(block))
    rows: list[tuple[Any, ...]] = []
    for (doc_id, revision_id, artifact_id, _, _), spans in zip(batch, all_spans):
        first = doc_id << CHUNK_ID_BITS
        rows.append((first, doc_id, revision_id, artifact_id, None, None, next(blobs)))
        rows += [(first + ordinal, doc_id, revision_id, artifact_id, start, end, next(blobs))
                 for ordinal, (start, end) in enumerate(spans, start=1)]
    return rows


def claim_rows(batch: list[tuple[int, str, str]], reply: tuple[Any, bytes]) -> list[tuple[Any, ...]]:
    """``claim_vectors`` rows of embedded claim revisions."""
    blobs = iter(split_rows(reply[1]))
    return [(doc_id, revision_id, next(blobs)) for doc_id, revision_id, _ in batch]


def _move_mark(conn: Any, upto: int, head: int) -> None:
    """The rows are complete through ``upto``: move the mark there, or delete it once level."""
    if upto >= head:
        conn.execute("DELETE FROM vector_state WHERE key = ?", (WATERMARK,))
    else:
        conn.execute("UPDATE vector_state SET value = ? WHERE key = ?", (upto, WATERMARK))


class VectorsProjector:
    """Embeds artifact passages and claim statements; owns the vector tables."""

    name: ClassVar[str] = "vectors"
    schema: ClassVar[str] = SCHEMA

    def __init__(self, *, lazy: bool = False) -> None:
        self.model = load_model()
        self.version = MODEL_VERSION if self.model is not None else 0
        self.lazy = lazy  # mutations leave their texts to ``catch_up`` (see the module docstring)
        self.bulk = False
        self.pending_artifacts: list[_Revision] = []
        self.pending_rows = 0
        self.pending_claims: list[tuple[int, str, str]] = []
        self.deferring = False
        self.replayed_rows: int | None = None  # counted while a replay runs, else None
        self.worker: EmbeddingWorker | None = None
        self.in_flight: deque[tuple[str, list[Any], list[Any]]] = deque()
        self.worker_batches = 0  # batches whose rows the worker computed (for tests and benches)

    def begin_bulk(self, conn: Any) -> None:
        self.bulk = True
        self.replayed_rows = 0
        conn.execute("DROP INDEX IF EXISTS artifact_vectors_by_artifact")

    def finish_bulk(self, conn: Any) -> None:
        """The replay went through: embed what is left, store what the worker still owes, and
        index the rows by artifact."""
        self._flush(conn)
        self._collect(conn, until_empty=True)
        conn.execute(BY_ARTIFACT)

    def end_bulk(self, conn: Any) -> None:
        self._stop_worker()
        self.in_flight.clear()
        self.bulk = False
        self.replayed_rows = None

    @contextmanager
    def deferred(self, conn: Any) -> Iterator[None]:
        """Embed the texts of a group of mutations once, at the group's end, in their transaction.

        One model call for the group instead of one per revision (the tokenizer's fixed cost is
        most of a small text's embedding). Like the FTS projector's deferral, it embeds every text
        row past the group's start mark: a request rolled back to its savepoint took its rows with
        it, and a purge in the group has already emptied the bodies it erased, so the rows are
        the ones one-by-one writes would have left (a purged body keeps its title vector only).
        Inside another deferral it joins the outer one, which embeds every row past its own mark.
        """
        if self.model is None or self.lazy or self.deferring:
            yield
            return
        artifacts, claims = last_doc_ids(conn)
        self.deferring = True
        try:
            yield
            self._embed_past(conn, artifacts, claims)
        finally:
            self.deferring = False

    def _embed_past(self, conn: Any, artifacts: int, claims: int) -> None:
        bulk, self.bulk = self.bulk, True
        try:
            for (revision_id,) in conn.execute("SELECT revision_id FROM artifact_search_text "
                                               "WHERE doc_id > ? ORDER BY doc_id", (artifacts,)).fetchall():
                self._artifact_revision(conn, revision_id)
            for (revision_id,) in conn.execute("SELECT revision_id FROM claim_search_text "
                                               "WHERE doc_id > ? ORDER BY doc_id", (claims,)).fetchall():
                self._claim_revision(conn, revision_id)
            self._flush(conn)
        finally:
            self.bulk = bulk

    def apply(self, conn: Any, event: RecordedEvent) -> None:
        if self.model is None:
            return
        if self.lazy and not self.bulk:
            self._mark_lagging(conn, event)
            return
        if self.deferring and event.type != "artifact.purged":
            return
        if event.type in ("artifact.created", "artifact.revised"):
            self._artifact_revision(conn, event.payload.revision_id)
        elif event.type in ("claim.asserted", "claim.revised"):
            self._claim_revision(conn, event.payload.revision_id)
        elif event.type == "artifact.purged":
            self._flush(conn)
            self._collect(conn, until_empty=True)  # the artifact's rows are stored before they go
            conn.execute(BY_ARTIFACT)  # a replay's first purge builds it; a no-op after
            self._erase(conn, event.payload.artifact_id)

    def apply_many(self, conn: Any, events: Sequence[RecordedEvent]) -> None:
        """A batch of new artifacts (``projections.base.BATCHABLE_TYPES``): catching up, the one
        mark the first of them would set one by one; otherwise each as ``apply``."""
        if (self.model is not None and self.lazy and not self.bulk
                and all(event.type in EMBEDDED_EVENTS for event in events)):
            self._mark_lagging(conn, events[0])  # the later events' marks would be no-ops
            return
        for event in events:
            self.apply(conn, event)

    def _mark_lagging(self, conn: Any, event: RecordedEvent) -> None:
        """Catching up: a text only marks the rows as lagging (the first after a catch-up sets
        the mark); a purge erases the artifact's stored rows now, in its own transaction."""
        if event.type in EMBEDDED_EVENTS:
            conn.execute("INSERT OR IGNORE INTO vector_state (key, value) VALUES (?, ?)",
                         (WATERMARK, event.commit_seq - 1))
        elif event.type == "artifact.purged":
            self._erase(conn, event.payload.artifact_id)

    def catch_up(self, conn: Any, max_events: int | None = None) -> int:
        """Inside the caller's write transaction: embed the events after the mark (at most
        ``max_events`` of them) in one batch, store their rows and move the mark with them
        (deleting it once level with the log). Returns how many events it covered.

        A purge among them has already erased what was stored and emptied the bodies it erased,
        so this stores what a replay leaves (a purged revision keeps its title vector only)."""
        mark = embedded_through(conn)
        if mark is None or self.model is None:
            return 0
        head = _log_head(conn)
        upto = head if max_events is None else min(head, mark + max_events)
        artifacts, claims = _embedded_revisions(conn, mark, upto)
        # Embedded here, never in the replay's worker: a catch-up has little else to overlap
        # with the embedding, and a child's start (its own model load, a cold piece cache) cost
        # more than it saved (catch-up of a 5,000-put bulk load: 1.1-1.4 CPU s here, 2.0 with it).
        bulk, self.bulk = self.bulk, True
        try:
            for revision_id in artifacts:
                self._artifact_revision(conn, revision_id)
            for revision_id in claims:
                self._claim_revision(conn, revision_id)
            self._flush(conn)
        finally:
            self.bulk = bulk
        _move_mark(conn, upto, head)
        return upto - mark

    def store_slice(self, conn: Any, job: SliceJob, replies: Sequence[tuple[Any, bytes]]) -> int:
        """Inside the caller's write transaction: store a job's rows from its ``replies`` (one per
        request, in order) and move the mark past it; returns how many events it covered. A job
        read before the mark moved or a purge erased rows (a stale job) stores nothing: 0."""
        head = _log_head(conn)
        if (self.model is None or embedded_through(conn) != job.mark
                or purge_generation(conn) != job.generation or job.upto > head):
            return 0
        answers = iter(replies)
        if job.artifacts:
            self._store(conn, "a", job.artifacts, next(answers))
        if job.claims:
            self._store(conn, "t", job.claims, next(answers))
        _move_mark(conn, job.upto, head)
        return job.upto - job.mark

    def _artifact_revision(self, conn: Any, revision_id: str) -> None:
        revision = _artifact_text(conn, revision_id)
        self.pending_artifacts.append(revision)
        self.pending_rows += 2 + len(revision[4]) // PASSAGE_BYTES  # about its rows: a title and the passages
        if not self.bulk or self.pending_rows >= BULK_BATCH:
            self._flush(conn)

    def _claim_revision(self, conn: Any, revision_id: str) -> None:
        self.pending_claims.append(_claim_text(conn, revision_id))
        if not self.bulk or len(self.pending_claims) >= BULK_BATCH:
            self._flush(conn)

    def _flush(self, conn: Any) -> None:
        if self.model is None:
            return
        if self.pending_artifacts:
            revisions, self.pending_artifacts, self.pending_rows = self.pending_artifacts, [], 0
            self._embed(conn, "a", revisions, [[r[3], r[4]] for r in revisions])
        if self.pending_claims:
            claims, self.pending_claims = self.pending_claims, []
            self._embed(conn, "t", claims, [row[-1] for row in claims])
        self._collect(conn, until_empty=False)

    def _embed(self, conn: Any, kind: str, batch: list[Any], items: list[Any]) -> None:
        """Embed a batch here, or hand it to the worker when a replay has run long enough."""
        rows = len(items) if kind == "t" else sum(2 + len(body) // PASSAGE_BYTES for _, body in items)
        worker = self._worker(rows)
        if worker is not None:
            try:
                worker.submit([kind, items])
                self.in_flight.append((kind, batch, items))
                return
            except WorkerFailed:
                self._worker_failed(conn)
        self._store(conn, kind, batch, embed_request(self.model, [kind, items]))

    def _worker(self, rows: int) -> EmbeddingWorker | None:
        if self.replayed_rows is None:
            return None
        self.replayed_rows += rows
        if self.worker is None and self.replayed_rows > WORKER_AFTER_ROWS:
            try:
                self.worker = EmbeddingWorker(self.model)
            except WorkerFailed:
                self.replayed_rows = None  # embed here for the rest of this replay
        return self.worker

    def _collect(self, conn: Any, *, until_empty: bool) -> None:
        """Store the worker's replies that are ready (all of them with ``until_empty``; the
        oldest also when too many batches are out)."""
        while self.in_flight and self.worker is not None:
            block = until_empty or len(self.in_flight) > MAX_IN_FLIGHT
            try:
                reply = self.worker.take(block)
            except WorkerFailed:
                self._worker_failed(conn)
                return
            if reply is None:
                return
            kind, batch, _ = self.in_flight.popleft()
            self._store(conn, kind, batch, reply)
            self.worker_batches += 1

    def _worker_failed(self, conn: Any) -> None:
        """Embed here what the worker still owed, and for the rest of this replay."""
        self._stop_worker()
        self.replayed_rows = None
        while self.in_flight:
            kind, batch, items = self.in_flight.popleft()
            self._store(conn, kind, batch, embed_request(self.model, [kind, items]))

    def _stop_worker(self) -> None:
        if self.worker is not None:
            worker, self.worker = self.worker, None
            worker.close()

    def _store(self, conn: Any, kind: str, batch: list[Any], reply: tuple[Any, bytes]) -> None:
        """Insert a batch's rows: ``reply`` is (each revision's spans, or None for claims; the rows' bytes)."""
        if kind == "t":
            conn.executemany("INSERT INTO claim_vectors (doc_id, revision_id, vector) VALUES (?,?,?)",
                             claim_rows(batch, reply))
            return
        conn.executemany(
            "INSERT INTO artifact_vectors (vec_id, doc_id, revision_id, artifact_id, start_byte, "
            "end_byte, vector) VALUES (?,?,?,?,?,?,?)", artifact_rows(batch, reply))

    def _erase(self, conn: Any, artifact_id: str) -> None:
        """Purge: the artifact's passage vectors go (title vectors stay, as titles stay in the log)."""
        conn.execute("DELETE FROM artifact_vectors WHERE artifact_id = ? AND start_byte IS NOT NULL",
                     (artifact_id,))
        conn.execute("INSERT INTO vector_state (key, value) VALUES ('generation', 1) "
                     "ON CONFLICT(key) DO UPDATE SET value = value + 1")
