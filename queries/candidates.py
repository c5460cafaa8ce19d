"""Candidate generation and lexical qualification (protocol §5.2-5.3), confined to the horizon.

This module owns how a query's units find documents: one FTS5 MATCH per unit, confined by the
projection's scope tokens to the caller's horizon (plus pinned revisions), each reading at most
``UNIT_MATCH_CAP`` document ids, newest first. From those lists come everything ranking needs,
computed only from what the horizon holds: each unit's document frequency and IDF (BM25's
``ln(1 + (N − df + ½)/(df + ½))`` over the horizon's document count), each document's matched
units (document-level qualification, `lexical_qualification_v2`) and its lexical score (the IDF
of the units it matches). Visibility (current revision, lifecycle, validity, the task rule) is
then checked by joining the owner rows of the best-scoring documents only. Work per request is
bounded by the unit count (≤ 48) times the cap, whatever the store holds. Shortcuts that change
no result: a unit's expression leaves out inflections the horizon's vocabulary lacks, the scope
filter goes when the horizon holds every document of the table, and membership tests read rowid
ranges rather than FTS5's one lookup per id.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from memoree.eventlog.events import Scope
from memoree.projections.fts_vocab import GLOBAL_SCOPE, MAX_VOCAB_WORD, MIN_VOCAB_WORD, scope_token

from .analysis import AnalyzedQuery, QueryUnit, variants_expression
from memoree.projections.records import OwnerContext

__all__ = [
    "Candidate", "Horizon", "TABLES", "Table", "UnitMatches", "horizon_of", "known_terms",
    "lexical_candidates", "table_horizon", "match_units", "parse_pins", "qualify", "unit_expressions", "unit_idf",
]

UNIT_MATCH_CAP = 2048
LONG_QUERY_UNITS = 6
RESCORED_PER_SLOT = 4
BM25_K1 = 1.2
BM25_B = 0.75
LIVE_CLAIM_STATUSES = ("active", "conflicted")


class Candidate(msgspec.Struct, eq=False):
    """One (entity, revision) under consideration, accumulating every channel's evidence."""

    entity_type: str
    entity_id: str
    revision_id: str
    doc_id: int
    commit_seq: int
    title: str
    status: str
    owner: OwnerContext
    revision_created_at: str
    is_current_revision: bool
    kind: str
    provenance_json: bytes | str = b"{}"
    statement: str = ""
    evidence: list[dict[str, Any]] = msgspec.field(default_factory=list)
    confidence: float | None = None
    valid_from: str | None = None
    valid_until: str | None = None
    lexical_candidate: bool = False
    lexical_score: float = 0.0
    trigram_score: float | None = None
    trigram_qualified: bool = False
    trigram_similarity: float | None = None
    trigram_matched_terms: list[str] = msgspec.field(default_factory=list)
    typo_units: list[str] = msgspec.field(default_factory=list)
    typo_expressions: list[tuple[int, str]] = msgspec.field(default_factory=list)
    matched_free: list[str] = msgspec.field(default_factory=list)
    matched_phrases: list[str] = msgspec.field(default_factory=list)
    lexical_qualified: bool = False
    lexical_coverage: float = 0.0
    exact_tier: bool = False
    channel_scores: dict[str, float] = msgspec.field(default_factory=dict)
    fusion: float = 0.0
    score: float = 0.0
    recency_eligible: bool = False
    recency_bonus: float = 0.0
    effective_at: str = ""
    effective_at_basis: str = "revision_created_at"
    decay_class: str = "general"
    semantic_similarity: float | None = None
    semantic_qualified: bool = False
    semantic_span: tuple[int, int] | None = None
    lexical_position: int = 0
    final_position: int = 0
    retained_for_conflict: bool = False
    excerpt: str = ""
    citation: str = ""
    retrieval_keys: dict[str, Any] = msgspec.field(default_factory=dict)
    cited_span: bool = False

    @property
    def stored_provenance(self) -> dict[str, Any]:
        """The revision's stored provenance, decoded only for the hits that are returned."""
        return msgspec.json.decode(self.provenance_json)

    @property
    def key(self) -> tuple[str, str]:
        return (self.entity_type, self.revision_id)

    @property
    def matched_unit_count(self) -> int:
        return len(self.matched_free) + len(self.matched_phrases)

    @property
    def qualified(self) -> bool:
        return self.lexical_qualified or self.trigram_qualified or self.semantic_qualified

    def temporal_state(self, now: str) -> str:
        if self.valid_from is not None and self.valid_from > now:
            return "future"
        if self.valid_until is not None and self.valid_until <= now:
            return "expired"
        return "current"

    def is_current(self, now: str) -> bool:
        if self.entity_type == "artifact":
            return self.is_current_revision and self.status == "active"
        return (self.is_current_revision and self.status in LIVE_CLAIM_STATUSES
                and self.temporal_state(now) == "current")


# ---------------------------------------------------------------------------------------------
# Tables and visibility


@dataclass(frozen=True)
class Filters:
    """SQL predicates (and their parameters) for one entity table under one request."""

    sql: str
    params: tuple[Any, ...]


def _owner_predicate(alias: str, ambient: Scope, horizon: str) -> tuple[str, tuple[Any, ...]]:
    if horizon == "personal":
        return "1", ()
    if horizon == "workspace":
        return f"{alias}.workspace_id = ?", (ambient.workspace_id,)
    return (
        f"({alias}.workspace_id = ? AND {alias}.project_id = ? "
        f"AND (? IS NULL OR {alias}.task_id IS NULL OR {alias}.task_id = ?))",
        (ambient.workspace_id, ambient.project_id, ambient.task_id, ambient.task_id),
    )


def parse_pins(pins: Sequence[str]) -> tuple[list[str], list[str]]:
    """Bare artifact pins (current revision) and exact ``ART@REV`` pins, in a stable order."""
    bare: set[str] = set()
    exact: set[str] = set()
    for pin in pins:
        reference = pin.removeprefix("memoree://artifact/").split("#", 1)[0]
        artifact_id, at, revision_id = reference.partition("@")
        if at and artifact_id and revision_id:
            exact.add(f"{artifact_id}@{revision_id}")
        elif not at and artifact_id:
            bare.add(artifact_id)
    return sorted(bare), sorted(exact)


def _artifact_filters(ambient: Scope, pins: Sequence[str], now: str, horizon: str,
                      historical: bool) -> Filters:
    owner_sql, owner_params = _owner_predicate("a", ambient, horizon)
    bare, exact = parse_pins(pins)
    bare_json, exact_json = msgspec.json.encode(bare).decode(), msgspec.json.encode(exact).decode()
    exact_pin = "(a.id || '@' || r.id) IN (SELECT value FROM json_each(?))"
    visible = (f"({owner_sql} OR (a.id IN (SELECT value FROM json_each(?)) "
               f"AND r.id = a.current_revision_id) OR {exact_pin})")
    params: tuple[Any, ...] = (*owner_params, bare_json, exact_json)
    if historical:
        return Filters(visible, params)
    current = f"a.status = 'active' AND (r.id = a.current_revision_id OR {exact_pin})"
    return Filters(f"{current} AND {visible}", (exact_json, *params))


def _claim_filters(ambient: Scope, pins: Sequence[str], now: str, horizon: str,
                   historical: bool) -> Filters:
    owner_sql, owner_params = _owner_predicate("c", ambient, horizon)
    if historical:
        return Filters(owner_sql, owner_params)
    current = (
        "c.status IN ('active', 'conflicted') AND c.current_revision_id = cr.id "
        "AND (c.valid_from IS NULL OR c.valid_from <= ?) AND (c.valid_until IS NULL OR c.valid_until > ?)"
    )
    return Filters(f"{current} AND {owner_sql}", (now, now, *owner_params))


def _owner(ws: str, prj: str, task: str | None, component: str | None) -> OwnerContext:
    return OwnerContext(workspace_id=ws, project_id=prj, task_id=task, component=component, pins=[])


def _artifact_candidate(row: Sequence[Any]) -> Candidate:
    (doc_id, art_id, rev_id, seq, title, status, is_current, created, kind, provenance,
     ws, prj, task, component) = row
    return Candidate(
        entity_type="artifact", entity_id=art_id, revision_id=rev_id, doc_id=doc_id,
        commit_seq=seq, title=title, status=status, owner=_owner(ws, prj, task, component),
        revision_created_at=created, is_current_revision=bool(is_current), kind=kind,
        provenance_json=provenance,
    )


def _claim_candidate(row: Sequence[Any]) -> Candidate:
    (doc_id, claim_id, rev_id, seq, claim_type, status, is_current, created, statement,
     evidence, confidence, valid_from, valid_until, ws, prj, task, component) = row
    return Candidate(
        entity_type="claim", entity_id=claim_id, revision_id=rev_id, doc_id=doc_id,
        commit_seq=seq, title=f"{claim_type} claim", status=status,
        owner=_owner(ws, prj, task, component), revision_created_at=created,
        is_current_revision=bool(is_current), kind=claim_type, statement=statement,
        evidence=msgspec.json.decode(evidence), confidence=confidence, valid_from=valid_from,
        valid_until=valid_until, excerpt=statement,
    )


@dataclass(frozen=True)
class Table:
    """How one entity type is searched: its word index and text columns, owner rows, filters."""

    entity_type: str
    word_index: str
    text_columns: str
    docs: str
    columns: str
    joins: str
    make: Any
    filters: Any

    def match(self, horizon: Horizon, expression: str) -> str:
        """``expression`` over the text columns, confined to the horizon's scope tokens."""
        text = f"{{{self.text_columns}}} : ({expression})"
        return text if horizon.fts_scope is None else f"{horizon.fts_scope} AND {text}"


TABLES = {
    "artifact": Table(
        "artifact", "artifact_fts", "title body", "artifact_search_text",
        "d.doc_id, a.id, r.id, r.commit_seq, r.title, a.status, a.current_revision_id = r.id, "
        "r.created_at, a.kind, r.provenance_json, a.workspace_id, a.project_id, a.task_id, a.component",
        "CROSS JOIN artifact_revisions r ON r.id = d.revision_id CROSS JOIN artifacts a ON a.id = d.artifact_id",
        _artifact_candidate, _artifact_filters),
    "claim": Table(
        "claim", "claim_fts", "statement", "claim_search_text",
        "d.doc_id, c.id, cr.id, cr.commit_seq, c.claim_type, c.status, c.current_revision_id = cr.id, "
        "cr.created_at, cr.statement, cr.evidence_json, cr.confidence, c.valid_from, c.valid_until, "
        "c.workspace_id, c.project_id, c.task_id, c.component",
        "CROSS JOIN claim_revisions cr ON cr.id = d.revision_id CROSS JOIN claims c ON c.id = d.claim_id",
        _claim_candidate, _claim_filters),
}


# ---------------------------------------------------------------------------------------------
# The horizon as the index sees it


@dataclass(frozen=True)
class Horizon:
    """The scope tokens one horizon covers: an FTS5 filter (None: everything) and the
    vocabulary/document-count scopes."""

    name: str
    fts_scope: str | None
    scopes: tuple[str, ...]


def horizon_of(ambient: Scope, horizon: str) -> Horizon:
    ws, prj, task = ambient.workspace_id, ambient.project_id, ambient.task_id
    if horizon == "personal":
        return Horizon(horizon, None, (GLOBAL_SCOPE,))
    if horizon == "workspace":
        tokens: tuple[str, ...] = (scope_token("w", ws),)
    elif task is None:
        tokens = (scope_token("p", ws, prj),)
    else:
        tokens = (scope_token("n", ws, prj), scope_token("t", ws, prj, task))
    quoted = " OR ".join(f'"{token}"' for token in tokens)
    return Horizon(horizon, f"scope : ({quoted})", tokens)


def table_horizon(conn: Any, table: str, horizon: Horizon) -> Horizon:
    """``horizon`` as one table's MATCH needs it: without the scope filter when every document
    the table ever counted lies inside the horizon (a store holding one project, say), where
    the filter would only make FTS5 intersect each unit with the scope token's posting list
    (it changes nothing there, and costs up to 2x per unit query at 100k documents)."""
    if horizon.fts_scope is None:
        return horizon
    marks = ",".join("?" * len(horizon.scopes))
    inside, everywhere = conn.execute(
        f"SELECT coalesce(sum(docs) FILTER (WHERE scope IN ({marks})), 0), "
        "coalesce(sum(docs) FILTER (WHERE scope = ?), 0) FROM search_scope_docs WHERE tbl = ?",
        (*horizon.scopes, GLOBAL_SCOPE, table)).fetchone()
    return Horizon(horizon.name, None, horizon.scopes) if inside == everywhere else horizon


def horizon_size(conn: Any, table: str, horizon: Horizon) -> tuple[int, float]:
    """(documents, mean words per document) of ``table`` at the horizon."""
    marks = ",".join("?" * len(horizon.scopes))
    docs, words = conn.execute(
        f"SELECT coalesce(sum(docs), 0), coalesce(sum(words), 0) FROM search_scope_docs "
        f"WHERE tbl = ? AND scope IN ({marks})", (table, *horizon.scopes)).fetchone()
    return int(docs), (words / docs if docs else 1.0)


# ---------------------------------------------------------------------------------------------
# Per-unit match lists


@dataclass
class UnitMatches:
    """One table's match list per unit (newest first, capped), the horizon's size, and the
    MATCH expression each unit was read with (``unit_expressions``)."""

    lists: list[list[int]]
    capped: list[bool]
    doc_count: int
    pinned: list[int]
    mean_words: float = 1.0
    expressions: list[str] = field(default_factory=list)

    def df(self, index: int) -> int:
        return len(self.lists[index])

    def sets(self) -> list[set[int]]:
        return [set(ids) for ids in self.lists]


def unit_idf(df: int, doc_count: int) -> float:
    """BM25's IDF, over the horizon."""
    n = max(doc_count, df)
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def pinned_docs(conn: Any, table: Table, pins: Sequence[str]) -> list[int]:
    """Document ids of the pinned artifact revisions (bare pins: the current revision)."""
    if table.entity_type != "artifact" or not pins:
        return []
    bare, exact = parse_pins(pins)
    rows = conn.execute(
        "SELECT d.doc_id FROM artifact_search_text d JOIN artifacts a ON a.id = d.artifact_id "
        "WHERE (a.id IN (SELECT value FROM json_each(?)) AND d.revision_id = a.current_revision_id) "
        "OR (a.id || '@' || d.revision_id) IN (SELECT value FROM json_each(?))",
        (msgspec.json.encode(bare).decode(), msgspec.json.encode(exact).decode())).fetchall()
    return sorted(row[0] for row in rows)


def match_expression_docs(conn: Any, table: Table, horizon: Horizon, expression: str,
                          pinned: Sequence[int], cap: int = UNIT_MATCH_CAP) -> tuple[list[int], bool]:
    """In-horizon (and pinned) documents matching ``expression``: newest first, at most ``cap``."""
    rows = conn.execute(
        f"SELECT rowid FROM {table.word_index} WHERE {table.word_index} MATCH ? "
        "ORDER BY rowid DESC LIMIT ?", (table.match(horizon, expression), cap + 1)).fetchall()
    ids = [row[0] for row in rows]
    if pinned and horizon.fts_scope is not None:
        marks = ",".join("?" * len(pinned))
        extra = conn.execute(
            f"SELECT rowid FROM {table.word_index} WHERE {table.word_index} MATCH ? "
            f"AND rowid IN ({marks})",
            (f"{{{table.text_columns}}} : ({expression})", *pinned)).fetchall()
        ids = sorted(set(ids) | {row[0] for row in extra}, reverse=True)
    return ids[:cap], len(ids) > cap


def known_terms(conn: Any, horizon: Horizon, terms: Sequence[str]) -> set[str]:
    """Which of ``terms`` the horizon's vocabulary holds (one indexed lookup per term)."""
    if not terms:
        return set()
    scopes = ",".join("?" * len(horizon.scopes))
    marks = ",".join("?" * len(terms))
    return {row[0] for row in conn.execute(
        f"SELECT DISTINCT term FROM search_terms WHERE scope IN ({scopes}) AND term IN ({marks})",
        (*horizon.scopes, *terms))}


def _in_vocabulary_range(term: str) -> bool:
    return MIN_VOCAB_WORD <= len(term) <= MAX_VOCAB_WORD


def unit_expressions(conn: Any, horizon: Horizon, analysis: AnalyzedQuery,
                     pins: Sequence[str]) -> list[str]:
    """Each unit's MATCH expression without the inflections no document of the horizon holds.

    A free word's variants (up to six spellings) are each a term lookup in every FTS5 query the
    unit takes part in; a generated inflection missing from the horizon's vocabulary (which
    holds every word of every text indexed there) matches nothing there, so it is left out.
    The unit's own spelling always stays, and with pins (documents outside the horizon) every
    variant stays."""
    if pins:
        return [unit.fts_expression for unit in analysis.units]
    generated = sorted({v for unit in analysis.units for v in unit.variants[1:] if _in_vocabulary_range(v)})
    known = known_terms(conn, horizon, generated)
    return [variants_expression([unit.variants[0]] + [v for v in unit.variants[1:]
                                                      if v in known or not _in_vocabulary_range(v)])
            for unit in analysis.units]


def match_units(conn: Any, table: Table, horizon: Horizon, analysis: AnalyzedQuery,
                pins: Sequence[str], expressions: Sequence[str] | None = None) -> UnitMatches:
    pinned = pinned_docs(conn, table, pins)
    expressions = list(expressions or [unit.fts_expression for unit in analysis.units])
    lists, capped = [], []
    for expression in expressions:
        ids, was_capped = match_expression_docs(conn, table, horizon, expression, pinned)
        lists.append(ids)
        capped.append(was_capped)
    docs, mean_words = horizon_size(conn, table.entity_type, horizon)
    return UnitMatches(lists, capped, docs, pinned, mean_words, expressions)


# ---------------------------------------------------------------------------------------------
# Lexical candidates


def lexical_candidates(conn: Any, table: Table, filters: Filters, matches: UnitMatches,
                       idf: Sequence[float], limit: int) -> list[tuple[Candidate, float]]:
    """The ``limit`` visible documents with the highest lexical score (newest first on ties).

    The score is BM25 over the horizon with one occurrence per matched unit: the summed IDF of
    the matched units ranks every match first, then the best ``RESCORED_PER_SLOT × limit`` are
    length-normalized (a long document matching a unit once weighs less than a short one).
    """
    coverage, ranked = _coverage_order(idf, matches.lists)
    head = ranked.head(RESCORED_PER_SLOT * limit)
    lengths = doc_lengths(conn, table, head)
    score = {d: coverage[d] * (BM25_K1 + 1) / (1 + BM25_K1 * (1 - BM25_B + BM25_B * lengths.get(d, 0)
                                                               / max(matches.mean_words, 1.0)))
             for d in head}
    head.sort(key=lambda doc_id: (-score[doc_id], -doc_id))
    found = visible_rows(conn, table, filters, head, limit)
    if len(found) < limit:
        found += visible_rows(conn, table, filters, ranked.rest(len(head)), limit - len(found))
    return [(c, round(score.get(c.doc_id, 0.0), 12)) for c in found]


class _Ranked:
    """Documents by (coverage DESC, id DESC), ordered only as far as they are read: the head
    by a partial selection, the rest (rarely reached: only when too few of the head are
    visible) by a full sort."""

    def __init__(self, coverage: dict[int, float], ordered: list[int] | None) -> None:
        self.coverage = coverage
        self.ordered = ordered

    def _key(self, doc_id: int) -> tuple[float, int]:
        return (self.coverage[doc_id], doc_id)

    def head(self, n: int) -> list[int]:
        if self.ordered is not None:
            return self.ordered[:n]
        return heapq.nlargest(n, self.coverage, key=self._key)

    def rest(self, skip: int) -> list[int]:
        if self.ordered is None:
            self.ordered = sorted(self.coverage, key=self._key, reverse=True)
        return self.ordered[skip:]


def _coverage_order(idf: Sequence[float], lists: Sequence[list[int]]) -> tuple[dict[int, float], _Ranked]:
    """Each matched document's summed unit IDF, and the documents in rank order. With one
    non-empty list every document has the same coverage, and the list is already newest first."""
    filled = [(weight, ids) for weight, ids in zip(idf, lists) if ids]
    if len(filled) == 1:
        weight, ids = filled[0]
        return dict.fromkeys(ids, 0.0 + weight), _Ranked({}, list(ids))
    coverage: dict[int, float] = {}
    for weight, ids in filled:
        for doc_id in ids:
            coverage[doc_id] = coverage.get(doc_id, 0.0) + weight
    return coverage, _Ranked(coverage, None)


def doc_lengths(conn: Any, table: Table, doc_ids: Sequence[int]) -> dict[int, int]:
    found: dict[int, int] = {}
    for start in range(0, len(doc_ids), 500):
        piece = doc_ids[start:start + 500]
        marks = ",".join("?" * len(piece))
        found.update(conn.execute(f"SELECT doc_id, words FROM {table.docs} WHERE doc_id IN ({marks})",
                                  tuple(piece)).fetchall())
    return found


def visible_rows(conn: Any, table: Table, filters: Filters, ranked: Sequence[int],
                 limit: int) -> list[Candidate]:
    """Join owner rows in rank order, a slice at a time, until ``limit`` are visible.

    The joins are CROSS JOINs so that SQLite keeps the document ids as the outer loop: left to
    itself it scanned every claim of the project by its scope index (7 ms on the LoCoMo store
    against 0.5 ms)."""
    found: list[Candidate] = []
    step = max(limit, 16)
    for start in range(0, len(ranked), step):
        piece = ranked[start:start + step]
        marks = ",".join("?" * len(piece))
        rows = conn.execute(
            f"SELECT {table.columns} FROM {table.docs} d {table.joins} "
            f"WHERE d.doc_id IN ({marks}) AND {filters.sql}", (*piece, *filters.params)).fetchall()
        order = {doc_id: i for i, doc_id in enumerate(piece)}
        found += [table.make(row) for row in sorted(rows, key=lambda r: order[r[0]])]
        if len(found) >= limit:
            break
    return found[:limit]


# ---------------------------------------------------------------------------------------------
# Lexical qualification (§5.3)


RANGE_ROWS_PER_ID = 32
RANGE_ROWS_FLOOR = 256
RANGES_PER_STATEMENT = 64


def docs_matching(conn: Any, index: str, expression: str, doc_ids: Sequence[int],
                  block_bits: int = 0) -> set[int]:
    """Which of ``doc_ids`` match ``expression`` (a membership test, no statistics).

    First one read of the expression's matches between the smallest and the largest id, at most
    ``RANGE_ROWS_PER_ID`` rows per id asked: FTS5 answers ``rowid IN (…)`` with one full lookup
    per id (~12 µs each), a range with one lookup and a cheap walk of the doclist. When the
    range holds more matches than that bound, each block of ids (ids equal above the low
    ``block_bits`` bits: one revision's chunk rows, ``CHUNK_ID_BITS``; else each id alone) is
    read as its own rowid range, many ranges to a statement."""
    ids = sorted(set(doc_ids))
    if not ids:
        return set()
    bound = max(RANGE_ROWS_FLOOR, RANGE_ROWS_PER_ID * len(ids))
    rows = conn.execute(
        f"SELECT rowid FROM {index} WHERE {index} MATCH ? AND rowid BETWEEN ? AND ? LIMIT ?",
        (expression, ids[0], ids[-1], bound + 1)).fetchall()
    if len(rows) <= bound:
        return {row[0] for row in rows}.intersection(ids)
    blocks: list[list[int]] = []
    for doc_id in ids:
        if blocks and blocks[-1][1] >> block_bits == doc_id >> block_bits:
            blocks[-1][1] = doc_id
        else:
            blocks.append([doc_id, doc_id])
    found: set[int] = set()
    one = f"SELECT rowid FROM {index} WHERE {index} MATCH ? AND rowid BETWEEN ? AND ?"
    for start in range(0, len(blocks), RANGES_PER_STATEMENT):
        piece = blocks[start:start + RANGES_PER_STATEMENT]
        found.update(row[0] for row in conn.execute(
            " UNION ALL ".join([one] * len(piece)), [v for lo, hi in piece for v in (expression, lo, hi)]))
    return found.intersection(ids)


def unit_membership(conn: Any, table: Table, analysis: AnalyzedQuery, matches: UnitMatches,
                    candidates: Sequence[Candidate]) -> list[set[int]]:
    """Per unit, which candidates match it: from the lists, or asked when a list was capped."""
    sets = matches.sets()
    doc_ids = [c.doc_id for c in candidates]
    for index, (unit, capped) in enumerate(zip(analysis.units, matches.capped)):
        if capped:
            missing = [d for d in doc_ids if d not in sets[index]]
            unit_expression = matches.expressions[index] if matches.expressions else unit.fts_expression
            expression = f"{{{table.text_columns}}} : ({unit_expression})"
            sets[index] |= docs_matching(conn, table.word_index, expression, missing)
    return sets


def qualify(candidate: Candidate, analysis: AnalyzedQuery, matched: Sequence[bool],
            idf: Sequence[float] | None = None, present: Sequence[bool] | None = None) -> None:
    """Qualified: every phrase unit matched, and ``required_matches`` units or, for a claim
    answering a long question, units holding a third of the IDF of the question's units the
    horizon holds (a short statement cannot repeat a long question's many common words)."""
    units: Sequence[QueryUnit] = analysis.units
    candidate.matched_free = [u.display for u, hit in zip(units, matched) if hit and not u.phrase]
    candidate.matched_phrases = [u.display for u, hit in zip(units, matched) if hit and u.phrase]
    count = candidate.matched_unit_count
    all_phrases = all(hit for u, hit in zip(units, matched) if u.phrase)
    enough = count >= analysis.required_matches
    if (not enough and candidate.entity_type == "claim" and idf is not None and present is not None
            and len(units) >= LONG_QUERY_UNITS and count >= 2):
        total = sum(w for w, seen in zip(idf, present) if seen)
        enough = total > 0 and sum(w for w, hit in zip(idf, matched) if hit) >= total / 3
    candidate.lexical_qualified = all_phrases and enough and count > 0
    candidate.lexical_coverage = count / len(units)
