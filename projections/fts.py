"""The full-text projection: what retrieval matches against, with exact byte offsets for citations.

This module owns the search index text of every artifact revision (its title plus the body index
text of ``projections.text``, read from the CAS) and of every claim revision (its statement), the
FTS5 word indexes over them, and the chunker-v1 citation rows: one
spanless title row per artifact revision plus one row per body chunk with its exact
``[start_byte, end_byte)`` offsets. Index text is stored once, in plain ``*_text`` tables; the
FTS5 tables are external-content indexes over them, and chunk text is a view that slices the
stored body by byte offsets, so no text is duplicated. There are no trigram indexes: the typo
channel looks words up in the vocabulary (``projections.fts_vocab``), and version 4 drops the
trigram tables older stores still hold. There is no chunk-level word index either: only
citations ask which chunks of a few cited revisions match, and they ask a temporary index of
those chunks (``queries.chunk_probe``), so a put indexes its words once, not twice; version 5
drops the chunk index older stores still hold. The word indexes keep no per-document column
sizes (``columnsize=0``): ranking counts a document's words itself (the ``words`` column), never
through FTS5's ``bm25()``, so version 6 stops writing a size row (a WAL page) per put. Version 7
stores half of each word's deletion keys reversed (``projections.fts_vocab``), so they cluster
on about two leaf pages. Lifecycle (forgotten artifacts, retracted
or superseded claims, current revisions) is never copied here: queries join the entities tables.

The projector runs inside the mutation's transaction, so a read with ``min_commit_seq`` at or
below the head always sees these rows. Row ids follow event order, so a replay rebuilds the same
rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

from memoree.eventlog.cas import ContentStore
from memoree.eventlog.db import features
from memoree.eventlog.store import RecordedEvent

from .chunker import CHUNKER_VERSION, chunk_spans
from .fts_vocab import (
    GLOBAL_SCOPE,
    VOCAB_SCHEMA,
    add_scope_doc,
    add_scope_docs,
    forget_words,
    index_word_set,
    owner_scope_tokens,
    remove_scope_words,
    word_count,
    words_and_count,
    words_of,
)
from .text import body_index_text

__all__ = ["FTS_INDEXES", "FtsProjector", "fts_schema", "last_doc_ids"]

WORD_TOKENIZER = "unicode61 remove_diacritics 2"


FTS_INDEXES = ("artifact_fts", "claim_fts")
# Indexes of earlier versions that nothing reads any more; the schema drops them.
RETIRED_INDEXES = ("artifact_trigram_fts", "claim_trigram_fts", "artifact_chunk_fts")
# Room for every chunk of an 8 MiB body at the chunker's 256-byte minimum (32,768 < 2**16).
CHUNK_ID_BITS = 16


def fts_schema() -> str:
    retired = "".join(f"DROP TABLE IF EXISTS {index};\n" for index in RETIRED_INDEXES)
    return f"""{retired}
CREATE TABLE IF NOT EXISTS artifact_search_text (
    doc_id INTEGER PRIMARY KEY,
    revision_id TEXT NOT NULL UNIQUE,
    artifact_id TEXT NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    scope TEXT NOT NULL,
    words INTEGER NOT NULL
) STRICT;
CREATE VIRTUAL TABLE IF NOT EXISTS artifact_fts USING fts5(
    title, body, scope, content='artifact_search_text', content_rowid='doc_id', columnsize=0,
    tokenize='{WORD_TOKENIZER}'
);
CREATE TABLE IF NOT EXISTS artifact_chunks (
    chunk_id INTEGER PRIMARY KEY,
    revision_id TEXT NOT NULL,
    artifact_id TEXT NOT NULL,
    row_kind TEXT NOT NULL CHECK (row_kind IN ('title', 'body')),
    ordinal INTEGER,
    start_byte INTEGER,
    end_byte INTEGER,
    chunker_version INTEGER NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS artifact_chunks_by_revision ON artifact_chunks(revision_id, chunk_id);
DROP VIEW IF EXISTS artifact_chunk_text;
CREATE VIEW artifact_chunk_text AS
SELECT c.chunk_id AS chunk_id,
       CASE WHEN c.row_kind = 'title' THEN d.title ELSE '' END AS title,
       CASE WHEN c.row_kind = 'body'
            THEN CAST(substr(CAST(d.body AS BLOB), c.start_byte + 1, c.end_byte - c.start_byte) AS TEXT)
            ELSE '' END AS body
FROM artifact_chunks c JOIN artifact_search_text d ON d.revision_id = c.revision_id;
CREATE TABLE IF NOT EXISTS claim_search_text (
    doc_id INTEGER PRIMARY KEY,
    revision_id TEXT NOT NULL UNIQUE,
    claim_id TEXT NOT NULL,
    statement TEXT NOT NULL,
    scope TEXT NOT NULL,
    words INTEGER NOT NULL
) STRICT;
CREATE VIRTUAL TABLE IF NOT EXISTS claim_fts USING fts5(
    statement, scope, content='claim_search_text', content_rowid='doc_id', columnsize=0,
    tokenize='{WORD_TOKENIZER}'
);
{VOCAB_SCHEMA}
{_secure_delete_statements()}"""


def _secure_delete_statements() -> str:
    """Purged text must leave the index pages too, which FTS5 secure-delete (3.44+) guarantees."""
    if not features().secure_delete:
        return ""
    return "INSERT INTO artifact_fts(artifact_fts, rank) VALUES('secure-delete', 1);\n"


class FtsProjector:
    """Indexes artifact and claim revisions for search; needs the CAS to read artifact bodies."""

    name: ClassVar[str] = "fts"
    version: ClassVar[int] = 7

    def __init__(self, cas: ContentStore) -> None:
        self.cas = cas
        self.schema = fts_schema()
        self.bulk = False
        self.bulk_mark = (0, 0)
        self.purges: dict[str, list[bytes]] = {}
        # While deferring (a group of mutations in one transaction): the last document ids whose
        # text is indexed; rows past them are indexed at the group's end (see ``deferred``).
        self.indexed_upto: tuple[int, int] | None = None
        # While deferring: the vocabulary of each text row written, found in the same pass as its
        # length, by (table, doc_id) with the revision it belongs to (see ``_words_past``).
        self.row_words: dict[tuple[str, int], tuple[str, set[str]]] = {}

    def begin_bulk(self, conn: Any) -> None:
        """Replaying a whole log: fill the content tables only; the vocabulary is added at the end
        (``finish_bulk``) and the FTS5 indexes are built at once after."""
        self.bulk = True
        self.purges = self.cas.purges_by_artifact()  # one read instead of one query per revision
        self.bulk_mark = last_doc_ids(conn)

    def finish_bulk(self, conn: Any) -> None:
        """The replayed texts' vocabulary, added once per scope (the FTS5 indexes come after)."""
        self._index_vocabulary_past(conn, *self.bulk_mark)

    def end_bulk(self, conn: Any) -> None:
        self.bulk = False

    @contextmanager
    def deferred(self, conn: Any) -> Iterator[None]:
        """Index the text of a group of mutations once, at the end, inside their transaction.

        FTS5 writes its pending index out at every savepoint, and a daemon group runs each
        request in its own; deferring turns one small segment per request per index into one per
        group. The vocabulary is deferred too: the group's words go in once per scope instead of
        once per request (it holds the words of the text rows as they stand, which is what a
        purge keeps it at, so adding them at the end gives the same rows). A request rolled back
        to its savepoint takes its text rows with it, so indexing "every row past the mark" at
        the end indexes exactly what the group keeps. Nothing is indexed when the block raises:
        the transaction is being rolled back anyway. Inside another deferral (a page of other
        hosts' events applied inside a group) it joins the outer one, which indexes every row
        past its own mark.
        """
        if self.indexed_upto is not None:
            yield
            return
        self.indexed_upto = last_doc_ids(conn)
        try:
            yield
            self._index_past(conn, *self.indexed_upto)
        finally:
            self.indexed_upto = None
            self.row_words = {}

    def _index_past(self, conn: Any, artifacts: int, claims: int) -> None:
        """Index every text row after the given document ids (a word index with no new rows is
        not asked: a group of puts has no claim rows)."""
        tables = self._index_vocabulary_past(conn, artifacts, claims)
        if "artifact" in tables:
            conn.execute("INSERT INTO artifact_fts (rowid, title, body, scope) SELECT doc_id, title, body, scope "
                         "FROM artifact_search_text WHERE doc_id > ?", (artifacts,))
        if "claim" in tables:
            conn.execute("INSERT INTO claim_fts (rowid, statement, scope) SELECT doc_id, statement, scope "
                         "FROM claim_search_text WHERE doc_id > ?", (claims,))

    def _index_vocabulary_past(self, conn: Any, artifacts: int, claims: int) -> set[str]:
        """Add the vocabulary of the text rows after the given document ids; returns the tables
        ("artifact", "claim") that have such rows."""
        tables: set[str] = set()
        for scope, words in self._words_past(conn, artifacts, claims, tables).items():
            if scope is not None:
                index_word_set(conn, scope.split(), words)
        return tables

    @property
    def _indexing_now(self) -> bool:
        return not self.bulk and self.indexed_upto is None

    def _keep_words(self, table: str, doc_id: int, revision_id: str, vocabulary: set[str]) -> None:
        """While deferring, keep a new text row's words (found in the pass that counted its
        length) for the group's end, so the group does not read and split the text again."""
        if self.indexed_upto is not None:
            self.row_words[(table, doc_id)] = (revision_id, vocabulary)

    def _in_index(self, doc_id: int) -> bool:
        """Whether an artifact text row is in the word indexes already."""
        if self.bulk:
            return False
        return self.indexed_upto is None or doc_id <= self.indexed_upto[0]

    def apply(self, conn: Any, event: RecordedEvent) -> None:
        if event.type in ("artifact.created", "artifact.revised"):
            self._index_artifact_revision(conn, event.payload, _creator_scopes(event))
        elif event.type in ("claim.asserted", "claim.revised"):
            self._index_claim_revision(conn, event.payload, _creator_scopes(event))
        elif event.type == "artifact.purged":
            self._erase_artifact_bodies(conn, event.payload.artifact_id)

    def _index_artifact_revision(self, conn: Any, p: Any, scopes: list[str] | None) -> None:
        if self._is_purged(p.blob_hash, p.artifact_id):
            body = ""  # a replay meets bytes a later purge erased: index the title only
        else:
            body = body_index_text(p.media_type, self.cas.get(p.blob_hash, p.size_bytes))
        scopes = scopes or _owner_scopes(conn, "artifacts", p.artifact_id)
        scope = " ".join(scopes)
        # One pass over the text for its BM25 length and, when indexed now, its vocabulary (the
        # newline keeps the title's last word and the body's first apart: the counts add up).
        text = p.title + "\n" + body
        vocabulary, words = words_and_count(text) if not self.bulk else (set(), word_count(text))
        doc_id = conn.execute(
            "INSERT INTO artifact_search_text (revision_id, artifact_id, title, body, scope, words) "
            "VALUES (?,?,?,?,?,?)", (p.revision_id, p.artifact_id, p.title, body, scope, words),
        ).lastrowid
        self._keep_words("artifact", doc_id, p.revision_id, vocabulary)
        add_scope_doc(conn, "artifact", scopes, words)
        if self._indexing_now:
            index_word_set(conn, scopes, vocabulary)
        if self._indexing_now:
            conn.execute("INSERT INTO artifact_fts (rowid, title, body, scope) VALUES (?, ?, ?, ?)",
                         (doc_id, p.title, body, scope))
        self._insert_chunks(conn, doc_id, p.artifact_id, p.revision_id, body)

    def _is_purged(self, digest: str, artifact_id: str) -> bool:
        if not self.bulk:
            return self.cas.is_purged(digest, artifact_id)
        return any(digest.encode() in data for data in self.purges.get(artifact_id, ()))

    def _erase_artifact_bodies(self, conn: Any, artifact_id: str) -> None:
        """Purge: remove every revision's body from the indexes (titles stay, as in the log)."""
        rows = conn.execute("SELECT doc_id, revision_id, title, body, scope FROM artifact_search_text "
                            "WHERE artifact_id = ?", (artifact_id,)).fetchall()
        self._erase_bodies(conn, rows)
        for doc_id, _, _, body, scope in rows:
            scopes = scope.split()
            body_words = word_count(body)
            conn.execute("UPDATE artifact_search_text SET words = words - ? WHERE doc_id = ?",
                         (body_words, doc_id))
            remove_scope_words(conn, "artifact", scopes, body_words)
            pending = self._pending_words(conn)
            forget_words(conn, body, scopes, lambda word, within: (
                word in pending.get(within, set()) or _still_indexed(conn, word, within, self.bulk)))

    def _pending_words(self, conn: Any) -> dict[str | None, set[str]]:
        """While deferring: the words of the text rows not indexed yet, per scope token and
        store-wide (None), which a forget must treat as still indexed."""
        if self.indexed_upto is None:
            return {}
        found: dict[str | None, set[str]] = {None: set()}
        for scope, words in self._words_past(conn, *self.indexed_upto).items():
            if scope is None:
                found[None] |= words
                continue
            for token in scope.split():
                found.setdefault(token, set()).update(words)
        return found

    def _words_past(self, conn: Any, artifacts: int, claims: int,
                    tables: set[str] | None = None) -> dict[str | None, set[str]]:
        """The vocabulary words of the text rows after the given document ids, per owner scope
        column (the space-separated tokens) and all together (None); ``tables``, when given,
        receives the tables that have such rows.

        A row written in this group whose words were kept is not split again, nor its text read
        (a request rolled back to its savepoint frees its document id, and the next row written
        there replaces what was kept; the revision check guards the rest); a purge in the group
        drops what was kept for the rows it empties."""
        kept = self.row_words
        # With no words kept (a replay's end) every row's text is read in the one statement.
        artifact_text, claim_text = ("''", "''") if kept else ("title || ' ' || body", "statement")
        rows = conn.execute(f"SELECT 'artifact', doc_id, revision_id, scope, {artifact_text} "
                            "FROM artifact_search_text WHERE doc_id > ? UNION ALL "
                            f"SELECT 'claim', doc_id, revision_id, scope, {claim_text} FROM claim_search_text "
                            "WHERE doc_id > ?", (artifacts, claims)).fetchall()
        found: dict[str | None, set[str]] = {None: set()}
        for table, doc_id, revision_id, scope, text in rows:
            known = kept.get((table, doc_id))
            if known is not None and known[0] == revision_id:
                words = known[1]
            else:
                words = words_of(text if not kept else _row_text(conn, table, doc_id))
            found[None] |= words
            found.setdefault(scope, set()).update(words)
            if tables is not None:
                tables.add(table)
        return found

    def _erase_bodies(self, conn: Any, rows: list[Any]) -> None:
        for doc_id, revision_id, title, body, scope in rows:
            self.row_words.pop(("artifact", doc_id), None)  # its body's words go with the body
            # A row not in the word index yet is indexed later, from the row as the purge leaves it.
            indexed = self._in_index(doc_id)
            if indexed:
                conn.execute("INSERT INTO artifact_fts (artifact_fts, rowid, title, body, scope) "
                             "VALUES ('delete', ?, ?, ?, ?)", (doc_id, title, body, scope))
            conn.execute("DELETE FROM artifact_chunks WHERE revision_id = ? AND row_kind = 'body'",
                         (revision_id,))
            conn.execute("UPDATE artifact_search_text SET body = '' WHERE doc_id = ?", (doc_id,))
            if indexed:
                conn.execute("INSERT INTO artifact_fts (rowid, title, body, scope) VALUES (?, ?, '', ?)",
                             (doc_id, title, scope))

    @staticmethod
    def _insert_chunks(conn: Any, doc_id: int, artifact_id: str, revision_id: str, body: str) -> None:
        conn.executemany(_INSERT_CHUNK, _chunk_rows(doc_id, artifact_id, revision_id, body))

    def apply_many(self, conn: Any, events: Sequence[RecordedEvent]) -> None:
        """A batch of new artifacts (``projections.base.BATCHABLE_TYPES``) indexed as ``apply``
        one by one would, with one statement per table for the batch: the text rows numbered
        after the newest one (as SQLite numbers them), the batch's purges looked up once (a
        shared log's replica may hold a purge it has not applied yet), the scope counts summed
        per scope, the words of each owner scope added once."""
        if self.bulk or any(event.type != "artifact.created" or event.scope is None for event in events):
            for event in events:
                self.apply(conn, event)
            return
        purges = self.cas.purges_of([event.payload.artifact_id for event in events])
        texts: list[tuple[Any, ...]] = []
        chunks: list[tuple[Any, ...]] = []
        counts: dict[str, tuple[int, int]] = {}
        vocabularies: dict[tuple[str, ...], set[str]] = {}
        for doc_id, event in enumerate(events, last_doc_ids(conn)[0] + 1):
            p, scopes = event.payload, _creator_scopes(event) or []
            purged = any(p.blob_hash.encode() in data for data in purges.get(p.artifact_id, ()))
            body = "" if purged else body_index_text(p.media_type, self.cas.get(p.blob_hash, p.size_bytes))
            vocabulary, words = words_and_count(p.title + "\n" + body)
            texts.append((doc_id, p.revision_id, p.artifact_id, p.title, body, " ".join(scopes), words))
            self._keep_words("artifact", doc_id, p.revision_id, vocabulary)
            for token in (GLOBAL_SCOPE, *scopes):
                docs, total = counts.get(token, (0, 0))
                counts[token] = (docs + 1, total + words)
            vocabularies.setdefault(tuple(scopes), set()).update(vocabulary)
            chunks += _chunk_rows(doc_id, p.artifact_id, p.revision_id, body)
        conn.executemany("INSERT INTO artifact_search_text (doc_id, revision_id, artifact_id, title, body, "
                         "scope, words) VALUES (?,?,?,?,?,?,?)", texts)
        add_scope_docs(conn, "artifact", counts)
        if self._indexing_now:
            for scopes_key, vocabulary in vocabularies.items():
                index_word_set(conn, list(scopes_key), vocabulary)
            conn.executemany("INSERT INTO artifact_fts (rowid, title, body, scope) VALUES (?, ?, ?, ?)",
                             [(row[0], row[3], row[4], row[5]) for row in texts])
        conn.executemany(_INSERT_CHUNK, chunks)

    def _index_claim_revision(self, conn: Any, p: Any, scopes: list[str] | None) -> None:
        scopes = scopes or _owner_scopes(conn, "claims", p.claim_id)
        scope = " ".join(scopes)
        vocabulary, words = (words_and_count(p.statement) if not self.bulk
                             else (set(), word_count(p.statement)))
        doc_id = conn.execute(
            "INSERT INTO claim_search_text (revision_id, claim_id, statement, scope, words) VALUES (?,?,?,?,?)",
            (p.revision_id, p.claim_id, p.statement, scope, words),
        ).lastrowid
        self._keep_words("claim", doc_id, p.revision_id, vocabulary)
        add_scope_doc(conn, "claim", scopes, words)
        if self._indexing_now:
            index_word_set(conn, scopes, vocabulary)
        if self._indexing_now:
            conn.execute("INSERT INTO claim_fts (rowid, statement, scope) VALUES (?, ?, ?)",
                         (doc_id, p.statement, scope))


_INSERT_CHUNK = ("INSERT INTO artifact_chunks (chunk_id, revision_id, artifact_id, row_kind, ordinal, "
                 "start_byte, end_byte, chunker_version) VALUES (?,?,?,?,?,?,?,?)")


def _chunk_rows(doc_id: int, artifact_id: str, revision_id: str, body: str) -> list[tuple[Any, ...]]:
    """The citation rows of one text row: its spanless title row, then one per body chunk."""
    rows = [("title", None, None, None)]
    rows += [("body", ordinal, start, end)
             for ordinal, (start, end) in enumerate(chunk_spans(body.encode("utf-8")))]
    # Chunk ids derive from the document and the row's place in it, never from history, so a
    # replay that meets purged (empty) bodies numbers every later chunk the same way.
    first = doc_id << CHUNK_ID_BITS
    return [(first + offset, revision_id, artifact_id, row_kind, ordinal, start, end, CHUNKER_VERSION)
            for offset, (row_kind, ordinal, start, end) in enumerate(rows)]


def last_doc_ids(conn: Any) -> tuple[int, int]:
    """The newest artifact and claim text rows' document ids (0 when there are none)."""
    artifacts, claims = conn.execute("SELECT (SELECT coalesce(max(doc_id), 0) FROM artifact_search_text), "
                                     "(SELECT coalesce(max(doc_id), 0) FROM claim_search_text)").fetchone()
    return artifacts, claims


def _row_text(conn: Any, table: str, doc_id: int) -> str:
    """A text row's searchable text as its vocabulary is taken from (title and body, or the
    statement)."""
    sql = ("SELECT title || ' ' || body FROM artifact_search_text WHERE doc_id = ?" if table == "artifact"
           else "SELECT statement FROM claim_search_text WHERE doc_id = ?")
    return conn.execute(sql, (doc_id,)).fetchone()[0]


def _creator_scopes(event: RecordedEvent) -> list[str] | None:
    """The owner scope tokens of an entity this event creates: the scope it was written in (the
    entities projector stores the same); None for a revision, whose owner is looked up."""
    if event.type not in ("artifact.created", "claim.asserted") or event.scope is None:
        return None
    scope = event.scope
    return owner_scope_tokens(scope.workspace_id, scope.project_id, scope.task_id)


def _owner_scopes(conn: Any, table: str, entity_id: str) -> list[str]:
    """The scope tokens of the entity's owner (the entities projector has run already)."""
    row = conn.execute(f"SELECT workspace_id, project_id, task_id FROM {table} WHERE id = ?",
                       (entity_id,)).fetchone()
    return owner_scope_tokens(*row)


def _still_indexed(conn: Any, word: str, scope: str | None, bulk: bool) -> bool:
    """Whether any indexed text (of ``scope``; None: of the store) still holds ``word``.

    While replaying, the indexes are built only at the end, and a purged body was never
    indexed, so nothing of it is in the vocabulary to forget: replay answers True."""
    if bulk:
        return True
    phrase = '"' + word.replace('"', '""') + '"'
    confine = "" if scope is None else f'scope : "{scope}" AND '
    return any(conn.execute(f"SELECT 1 FROM {index} WHERE {index} MATCH ? LIMIT 1",
                            (f"{confine}{{{columns}}} : {phrase}",)).fetchone()
               for index, columns in (("artifact_fts", "title body"), ("claim_fts", "statement")))
