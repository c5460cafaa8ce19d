"""The dense channel (``local_dense_context_v3``): nearest artifact passages and claims by meaning.

This module owns how a query finds memories that share its meaning but not its words: the query
is embedded with the local model (``projections.embedding``), compared by cosine with every
vector of the ``vectors`` projection, and the nearest items that the request's own horizon,
currentness and pins let it see become search candidates, each with its similarity and (for an
artifact) the exact passage that matched. Visibility is decided by the same SQL filters the
lexical channel uses, so nothing outside the caller's horizon is ever scored into a response.

Acceptance (``semantic_qualified``, what lets a dense-only hit into recall and context.build) is
deliberately stricter than nearness, because a static embedding places unrelated text of the
same register close together (calibrated on the Memoree v2 paraphrase and honest-none cases):

* a claim qualifies when it is the single clear nearest claim (similarity at least
  ``CLAIM_ACCEPT_COSINE`` and ahead of the next visible claim by ``CLAIM_ACCEPT_MARGIN``), or
  when it is nearly a restatement of the query (``CLAIM_STRONG_COSINE``);
* where neither holds and no claim qualifies by its words, ``queries.semantic`` may still accept
  the claim a word-by-word judgement (``queries.soft_match``) and a second channel agree on;
* an artifact qualifies by meaning only as the cited evidence of a near claim that qualifies
  (by meaning, or by its words), while itself at least ``MIN_CANDIDATE_COSINE`` near the query.
  An artifact that is merely near is a lead (an unqualified candidate), never an answer.

Vectors are read from SQLite once per process and kept in memory (int8 rows plus their sign
bits); a reader appends rows added since and reloads after a purge (``vector_state.generation``)
or a rebuild. Where the projection lags the read's snapshot (an embedded store's vectors catch
up after the write, ``projections.vectors``), the events after its mark are embedded here, once
per process, and appended as the rows the catch-up will store, byte for byte: a read sees every
write at or before its snapshot through this channel too, with the scores a caught-up store
gives. Above ``EXACT_SCAN_ROWS`` rows a Hamming pass over the sign bits picks the
``PREFILTER_ROWS`` nearest rows, which are then scored exactly. The bits are taken of each
vector with its component along the model's common axis removed (``Model.common_axis``, the
mean token row's direction): every text leans that way, so raw signs would spend bits on what
all rows share. The axis is fixed by the model's weights, so a row's bits depend on that row
alone, never on what else is stored or in what order it was loaded.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from memoree.projections.embedding import load_model

__all__ = ["CLAIM_ACCEPT_COSINE", "CLAIM_ACCEPT_MARGIN", "CLAIM_STRONG_COSINE", "DenseHit",
           "dense_hits", "index_stats", "snapshot", "vectors_ready"]

MIN_CANDIDATE_COSINE = 0.12
CLAIM_ACCEPT_COSINE = 0.24
CLAIM_ACCEPT_MARGIN = 0.08
CLAIM_STRONG_COSINE = 0.62
UNMATCHED_MIN_COSINE = 0.15
EXACT_SCAN_ROWS = 2048
# Rows the sign-bit pass keeps for exact scoring: the knee of recall vs time measured by
# `python -m tools.bench.semantic --scan-only` (at 400,000 rows, 2,048 -> 4,096 gains 0.10 of
# recall@10 for 0.2 ms; 4,096 -> 8,192 gains 0.07 for 0.7 ms more).
PREFILTER_ROWS = 4096
SIGN_BLOCK_ROWS = 16384
MAX_QUERY_CHARS = 4096
VISIBILITY_SLICES = 6
ROWS_PER_DOCUMENT = 4
QUANT = 127.0
_WORD = re.compile(r"\w+")


@dataclass
class _Rows:
    """One table's vectors in memory, in ``vec_id`` order, grown in place."""

    count: int = 0
    top_id: int = -1
    ids: Any = None
    doc_ids: Any = None
    starts: Any = None
    ends: Any = None
    vectors: Any = None
    bits: Any = None
    documents: int = 0  # artifacts: title rows (one per revision); claims: rows

    def append(self, np: Any, rows: list[tuple[Any, ...]], has_spans: bool, axis: Any) -> None:
        """Add rows (``vec_id, doc_id, [start, end,] vector``) in ``vec_id`` order, with their
        sign bits taken off ``axis`` (the model's common axis; ``None``: raw signs)."""
        if not rows:
            return
        needed = self.count + len(rows)
        if self.vectors is None or needed > len(self.ids):
            capacity = max(1024, needed * 2)
            self._grow(np, capacity)
        n, end = self.count, needed
        self.ids[n:end] = [r[0] for r in rows]
        self.doc_ids[n:end] = [r[1] for r in rows]
        if has_spans:
            self.starts[n:end] = [-1 if r[2] is None else r[2] for r in rows]
            self.ends[n:end] = [-1 if r[3] is None else r[3] for r in rows]
        block = np.frombuffer(b"".join(r[-1] for r in rows), dtype=np.int8).reshape(len(rows), -1)
        self.vectors[n:end] = block
        for at in range(0, len(rows), SIGN_BLOCK_ROWS):
            stop = min(len(rows), at + SIGN_BLOCK_ROWS)
            self.bits[:, n + at:n + stop] = sign_bits(np, block[at:stop], axis)
        self.count, self.top_id = end, int(rows[-1][0])
        self.documents += sum(1 for r in rows if r[2] is None) if has_spans else len(rows)

    def _grow(self, np: Any, capacity: int) -> None:
        def grown(old: Any, shape: tuple[int, ...], dtype: Any, columns: bool = False) -> Any:
            fresh = np.zeros(shape, dtype=dtype)
            if old is not None and columns:
                fresh[:, :self.count] = old[:, :self.count]
            elif old is not None:
                fresh[:self.count] = old[:self.count]
            return fresh
        self.ids = grown(self.ids, (capacity,), np.int64)
        self.doc_ids = grown(self.doc_ids, (capacity,), np.int64)
        self.starts = grown(self.starts, (capacity,), np.int64)
        self.ends = grown(self.ends, (capacity,), np.int64)
        self.vectors = grown(self.vectors, (capacity, 256), np.int8)
        # Sign bits by word, each word's column contiguous: the Hamming pass reads 4 long rows.
        self.bits = grown(self.bits, (4, capacity), np.uint64, columns=True)


def sign_bits(np: Any, block: Any, axis: Any) -> Any:
    """Each row's sign bits after removing its component along the unit ``axis`` (``None``: the
    raw signs), packed as 4 uint64 words per row, shape ``(4, rows)``. Each row's projection is
    summed on its own in float64, so its bits never depend on the rows beside it."""
    values = block.astype(np.float64)
    if axis is not None:
        along = np.einsum("ij,j->i", values, axis.astype(np.float64))
        values -= along[:, None] * axis.astype(np.float64)[None, :]
    return np.packbits(values > 0, axis=1).view(np.uint64).T


@dataclass
class _Index:
    key: tuple[int, int] = (-1, -1)
    artifacts: _Rows = field(default_factory=_Rows)
    claims: _Rows = field(default_factory=_Rows)
    # The commit_seq through which this copy holds every row: stored ones, then those embedded
    # here for events the table does not hold yet (the same bytes it will hold).
    through: int = -1
    stored_top: int = -1  # the largest artifact vec_id seen in the table
    tail_events: int = 0  # events embedded here, not read from the table (for benches and tests)


_INDEXES: dict[str, _Index] = {}
_LOCK = threading.Lock()


def _database_name(conn: Any) -> str:
    return conn.execute("PRAGMA database_list").fetchone()[2] or f":memory:{id(conn)}"


def vectors_ready(conn: Any) -> bool:
    """Whether the model is loaded here and the store's vectors were built with it."""
    from memoree.projections.vectors import MODEL_VERSION

    if load_model() is None:
        return False
    row = conn.execute("SELECT version FROM projector_checkpoints WHERE name = 'vectors'").fetchone()
    return row is not None and row[0] == MODEL_VERSION


def _current_index(conn: Any, np: Any) -> _Index:
    """The in-memory vectors of this store, brought up to what ``conn`` sees: the stored rows,
    then (where the projection lags this snapshot) the rows of the events after its mark."""
    from memoree.projections.vectors import WATERMARK, pending_rows

    generation, version, position, mark, top = conn.execute(
        "SELECT coalesce((SELECT value FROM vector_state WHERE key = 'generation'), 0), "
        "(SELECT version FROM projector_checkpoints WHERE name = 'vectors'), "
        "(SELECT position FROM projector_checkpoints WHERE name = 'vectors'), "
        "(SELECT value FROM vector_state WHERE key = ?), "
        "(SELECT coalesce(max(vec_id), -1) FROM artifact_vectors)", (WATERMARK,)).fetchone()
    stored_through = position if mark is None else mark
    name = _database_name(conn)
    with _LOCK:
        index = _INDEXES.get(name)
        # A rebuild that replaced the tables with fewer rows (a reindex after a purge) shows as
        # a table that ends before rows it held: start over from the table.
        if index is None or index.key != (generation, version) or top < index.stored_top:
            index = _INDEXES[name] = _Index(key=(generation, version))
        axis = load_model().common_axis
        if index.through < stored_through:  # rows embedded here already are the stored ones
            index.artifacts.append(np, conn.execute(
                "SELECT vec_id, doc_id, start_byte, end_byte, vector FROM artifact_vectors "
                "WHERE vec_id > ? ORDER BY vec_id", (index.artifacts.top_id,)).fetchall(), True, axis)
            index.claims.append(np, conn.execute(
                "SELECT doc_id, doc_id, vector FROM claim_vectors WHERE doc_id > ? ORDER BY doc_id",
                (index.claims.top_id,)).fetchall(), False, axis)
            index.through = stored_through
        index.stored_top = max(index.stored_top, top)
        if position is not None and index.through < position:
            artifacts, claims = pending_rows(conn, index.through, position)
            index.artifacts.append(np, [(r[0], r[1], r[4], r[5], r[6]) for r in artifacts], True, axis)
            index.claims.append(np, [(r[0], r[0], r[2]) for r in claims], False, axis)
            index.tail_events += position - index.through
            index.through = position
        return index


def snapshot(conn: Any) -> _Index:
    """The in-memory vectors of this store as ``conn`` sees them (read once per search)."""
    return _current_index(conn, load_model().np)


def index_stats(index: _Index) -> tuple[int, int]:
    """(indexed artifact revisions, indexed claim revisions): from the in-memory copy, whose
    artifact rows hold one title row per revision."""
    return index.artifacts.documents, index.claims.count


def eligible_revisions(conn: Any) -> int:
    """Artifact and claim revisions the fts projection holds (document ids are dense and never
    reused, so the largest is the count)."""
    return sum(conn.execute(f"SELECT coalesce(max(doc_id), 0) FROM {table}").fetchone()[0]
               for table in ("artifact_search_text", "claim_search_text"))


@dataclass(frozen=True)
class DenseHit:
    """A document the dense channel found: its best similarity, (artifacts) passage span, and
    the stored unit vector of that best row (int8 scaled by ``QUANT``)."""

    doc_id: int
    similarity: float
    span: tuple[int, int] | None
    vector: Any = None


def document_hit(index: _Index, entity_type: str, doc_id: int, query_vector: Any) -> DenseHit | None:
    """One document's nearest row to the query (whatever its rank), or ``None`` if unindexed."""
    np = load_model().np
    rows = index.artifacts if entity_type == "artifact" else index.claims
    positions = np.flatnonzero(rows.doc_ids[:rows.count] == doc_id)
    if len(positions) == 0:
        return None
    scores = _dot(np, rows.vectors[positions], query_vector)
    best = int(np.argmax(scores))
    position = positions[best]
    start, end = int(rows.starts[position]), int(rows.ends[position])
    return DenseHit(doc_id, round(float(scores[best]), 6), (start, end) if start >= 0 else None,
                    rows.vectors[position])


def _dot(np: Any, vectors: Any, query: Any) -> Any:
    # einsum, not matmul: an int8 x float32 product goes through BLAS threads there, which on a
    # busy machine cost milliseconds where this loop costs tens of microseconds.
    return np.einsum("ij,j->i", vectors, query, dtype=np.float32, casting="unsafe")


def _similarities(np: Any, rows: _Rows, query: Any, axis: Any, keep: int = PREFILTER_ROWS) -> tuple[Any, Any]:
    """(row positions, cosine) for the rows worth scoring exactly."""
    if rows.count == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    if rows.count <= EXACT_SCAN_ROWS:
        return np.arange(rows.count), _dot(np, rows.vectors[:rows.count], query)
    positions = prefiltered(np, rows, query, axis, keep)
    return positions, _dot(np, rows.vectors[positions], query)


def prefiltered(np: Any, rows: _Rows, query: Any, axis: Any, keep: int) -> Any:
    """Positions of the ``keep`` rows nearest the query by Hamming distance between sign bits
    taken off ``axis`` (as the rows' were), plus every row tied with the last one kept."""
    if rows.count <= keep:
        return np.arange(rows.count)
    signs = sign_bits(np, query[None, :], axis)[:, 0]
    # uint16: 256 differing bits must not wrap to 0 (uint8), and int32 doubles the memory traffic.
    distance = np.bitwise_count(rows.bits[0, :rows.count] ^ signs[0]).astype(np.uint16)
    for word in range(1, len(signs)):
        distance += np.bitwise_count(rows.bits[word, :rows.count] ^ signs[word])
    kth = np.partition(distance, keep)[keep]
    return np.flatnonzero(distance <= kth)  # ties kept whole: the set is deterministic


def _ranked_documents(np: Any, rows: _Rows, positions: Any, scores: Any, wanted: int,
                      floor: float = MIN_CANDIDATE_COSINE) -> list[DenseHit]:
    """Each document's best row at or above ``floor``, best first (ties: newer document first,
    then earlier passage), at most ``wanted`` documents, from the best ``ROWS_PER_DOCUMENT ×
    wanted`` rows only."""
    if rows.count == 0:
        return []
    keep = scores >= floor
    positions, scores = positions[keep], scores[keep]
    top = ROWS_PER_DOCUMENT * wanted
    if len(scores) > top:
        # Keep every row tied with the cut so the chosen set does not depend on row order.
        cut = np.partition(scores, len(scores) - top)[len(scores) - top]
        keep = scores >= cut
        positions, scores = positions[keep], scores[keep]
    rounded = np.round(scores.astype(np.float64), 6)
    order = np.lexsort((rows.ids[positions], -rows.doc_ids[positions], -rounded))
    seen: set[int] = set()
    hits = []
    for i in order:
        position = positions[i]
        doc_id = int(rows.doc_ids[position])
        if doc_id in seen:
            continue
        seen.add(doc_id)
        start, end = int(rows.starts[position]), int(rows.ends[position])
        hits.append(DenseHit(doc_id, float(rounded[i]), (start, end) if start >= 0 else None,
                             rows.vectors[position]))
        if len(hits) >= wanted:
            break
    return hits


def embed_query(query: str) -> Any:
    """The query's unit vector scaled to the stored int8 rows, or ``None`` without a model."""
    model = load_model()
    return None if model is None else _scaled_embedding(model, query[:MAX_QUERY_CHARS])


@functools.lru_cache(maxsize=1024)
def _scaled_embedding(model: Any, text: str) -> Any:
    """One embedding per distinct text per process and model (recall, probe and context.build
    each search two tables with one query; the shared-word check embeds the same rest words)."""
    vector = model.embed([text])[0] / model.np.float32(QUANT)
    vector.setflags(write=False)
    return vector


def dense_hits(index: _Index, entity_type: str, query_vector: Any, wanted: int,
               floor: float = MIN_CANDIDATE_COSINE) -> list[DenseHit]:
    """The ``wanted`` nearest documents of ``entity_type`` at or above ``floor`` (by default
    the candidate floor)."""
    model = load_model()
    rows = index.artifacts if entity_type == "artifact" else index.claims
    positions, scores = _similarities(model.np, rows, query_vector, model.common_axis)
    return _ranked_documents(model.np, rows, positions, scores, wanted, floor)


def unmatched_similarity(query: str, matched_terms: list[str], hit: DenseHit) -> float:
    """With no shared words, the claim's similarity to the query; otherwise the similarity of
    the query's unshared words to the claim: a claim that shares a topic word with the query is
    near it for that word alone, and must also be near in what the word does not say."""
    if not matched_terms:
        return hit.similarity
    shared = {token.casefold() for term in matched_terms for token in _WORD.findall(term)}
    rest = [word for word in _WORD.findall(query[:MAX_QUERY_CHARS]) if word.casefold() not in shared]
    if not rest:
        return hit.similarity
    model = load_model()
    rest_vector = _scaled_embedding(model, " ".join(rest))
    return round(float(_dot(model.np, hit.vector[None, :], rest_vector)[0]), 6)


def claim_accepted(similarities: list[float], position: int) -> bool:
    """Whether the visible claim at ``position`` (nearest first) qualifies by meaning alone."""
    similarity = similarities[position]
    if similarity >= CLAIM_STRONG_COSINE:
        return True
    if position != 0 or similarity < CLAIM_ACCEPT_COSINE:
        return False
    runner_up = similarities[1] if len(similarities) > 1 else 0.0
    return similarity - runner_up >= CLAIM_ACCEPT_MARGIN


def describe(conn: Any = None) -> dict[str, Any]:
    """What ``capabilities`` and ``doctor`` say about the channel (``conn``: the store, if open)."""
    from memoree.projections.embedding import DIMENSIONS, MODEL_ID, model_status

    if conn is None:  # no store here: say what would be used, without loading anything
        return {"policy_version": "local_dense_context_v3", "model_id": MODEL_ID, "dimensions": DIMENSIONS,
                "enabled": None, "reason": "no store is open in this process"}
    status = model_status()
    ready = status.available and vectors_ready(conn)
    reason = status.reason if not status.available else (
        "on: fused with the lexical channel; turn off per request with semantic.enabled=false"
        if ready else "the vectors projection is not built with this model yet; run `memoree reindex`")
    artifacts, claims = index_stats(snapshot(conn)) if ready else (0, 0)
    return {"policy_version": "local_dense_context_v3", "model_id": status.model_id,
            "model_revision": status.revision, "dimensions": status.dimensions, "enabled": ready,
            "indexed_artifact_revisions": artifacts, "indexed_claim_revisions": claims,
            **vectors_lag(conn), "reason": reason}


def vectors_lag(conn: Any) -> dict[str, Any]:
    """How far the stored vectors lag the log (``projections.vectors``): the ``commit_seq``
    through which they are complete and the events after it, which reads embed in memory."""
    from memoree.projections.vectors import embedded_through

    position = conn.execute("SELECT position FROM projector_checkpoints WHERE name = 'vectors'").fetchone()
    position = position[0] if position else 0
    mark = embedded_through(conn)
    through = position if mark is None else mark
    return {"vectors_complete_through": through, "lag_events": position - through}
