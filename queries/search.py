"""The search pipeline (protocol §5): candidates, qualification, typo tolerance, fusion, recency.

This module owns how a query becomes ranked hits: FTS5 BM25 candidate generation over the fts
projection (current-only or historical, within the request's horizon and pins), document-level
lexical qualification (`lexical_qualification_v2`), the trigram typo channel (`trigram_typo_v1`,
per entity table, only when none of its hits covers every unit lexically), tiered reciprocal-rank fusion (`tiered_rrf_v2`)
with content-based tie-breaks, the bounded recency nudge (`bounded_recency_v1`), exact chunk
citations (chunker v1), conflict retention, truncation and hints. The `search` op returns
unqualified candidates too; recall, context.build and probe use `run_search(qualified_only=True)`
and the unqualified candidate partition it reports. The dense channel (`local_dense_context_v3`,
``queries.dense``) adds candidates by meaning where the local model is installed and the request
leaves it on; the cross-encoder and cited projections are not built: their status objects say so
and they never contribute.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from memoree import limits
from memoree.errors import IndexNotReady, InvalidRequest
from memoree.eventlog.events import Scope
from memoree.inputs import SearchInput, check_limit, check_reason
from memoree.projections.chunker import CHUNKER_VERSION, span_citation
from memoree.projections.embedding import model_status as embedding_status
from memoree.projections.fts import TRIGRAM_VOCAB_TABLES, ensure_trigram_vocab

from . import dense
from .analysis import POLICY_VERSION as LEXICAL_POLICY_VERSION
from .analysis import AnalyzedQuery, QueryAnalysis, QueryError, QueryUnit, analyze_query
from memoree.projections.records import OwnerContext

__all__ = [
    "Ranking",
    "ReadScope",
    "SearchHit",
    "SearchResult",
    "SearchRun",
    "analyze",
    "check_min_commit_seq",
    "claim_citation",
    "read_snapshot",
    "run_search",
    "search",
]

TRIGRAM_POLICY_VERSION = "trigram_typo_v1"
FUSION_POLICY_VERSION = "tiered_rrf_v2"
RECENCY_POLICY_VERSION = "bounded_recency_v1"
CITATION_SPAN_LABEL = "artifact_citation_span_v1"
CONFLICT_RETENTION_POLICY = "conflict_retention_v1"
SEMANTIC_POLICY_VERSION = "local_dense_context_v3"
RERANKER_POLICY_VERSION = "cross_encoder_ordering_v4"
PROJECTION_POLICY_VERSION = "cited_projection_candidate_v1"
BASE_RETRIEVAL_MODE = (
    f"sqlite_fts5_bm25+{LEXICAL_POLICY_VERSION}+{TRIGRAM_POLICY_VERSION}+{FUSION_POLICY_VERSION}"
)

RRF_K = 60
TRIGRAM_CHANNEL_WEIGHT = 0.7
SEMANTIC_CHANNEL_WEIGHT = 0.85
MAX_PROMOTION = 2
MAX_CANDIDATE_PARTITION = 16
CANDIDATES_PER_LIMIT_SLOT = 8
TRIGRAMS_PER_WORD = 2
MATCH_LIST_CAP = 512
PREFILTER_FACTOR = 4
TRIGRAM_WINDOW_CHARS = 66  # snippet() over 64 trigram tokens spans 66 characters
MAX_WINDOW_OCCURRENCES = 512
MATCH_LIST_PER_CANDIDATE = 60  # reading a match row costs ~0.25 us, a per-candidate probe ~14 us
MIN_FUZZY_WORD_CHARS = 3
SINGLE_WORD_SIMILARITY = 0.80
SEVERAL_WORDS_SIMILARITY = 0.72
LIVE_CLAIM_STATUSES = ("active", "conflicted")
SECONDS_PER_DAY = 86400

# (decay class, half-life days, max bonus ratio)
CLAIM_DECAY = {
    "observation": ("observation", 30, 0.10),
    "preference": ("preference", 180, 0.06),
    "procedure": ("procedure", 365, 0.04),
    "decision": ("decision", 730, 0.025),
    "constraint": ("constraint", 3650, 0.01),
    "fact": ("general", 180, 0.05),
}
ARTIFACT_KIND_DECAY = (
    (("log", "session", "trace", "observation"), ("ephemeral", 30, 0.10)),
    (("decision", "adr"), ("decision", 730, 0.025)),
    (("constraint", "policy", "spec"), ("constraint", 3650, 0.01)),
    (("procedure", "runbook"), ("procedure", 365, 0.04)),
)
GENERAL_DECAY = ("general", 180, 0.05)

REFINE_HINT = ("More matches exist than the limit of {limit}. Refine the query or explicitly raise "
               "limit up to 100.")
BROADEN_HINT = ("No ambient matches. Retry explicitly with horizon=workspace (and a reason) if "
                "broader precedent is needed.")
_WORD = re.compile(r"\w+")
_ENTITY_TYPES = frozenset({"artifact", "claim"})


# ---------------------------------------------------------------------------------------------
# Wire shapes


class Ranking(msgspec.Struct, kw_only=True):
    """Why a hit sits where it does: every channel's evidence and both positions."""

    policy_version: str = RECENCY_POLICY_VERSION
    lexical_policy_version: str = LEXICAL_POLICY_VERSION
    trigram_policy_version: str = TRIGRAM_POLICY_VERSION
    fusion_policy_version: str = FUSION_POLICY_VERSION
    query_unit_count: int
    matched_unit_count: int
    required_matches: int
    lexical_coverage: float
    phrase_group_count: int
    matched_phrase_group_count: int
    lexical_qualified: bool
    trigram_qualified: bool
    semantic_qualified: bool
    qualified: bool
    matched_terms: list[str]
    matched_phrase_groups: list[str]
    trigram_matched_terms: list[str]
    trigram_similarity: float | None
    semantic_similarity: float | None
    exact_tier: bool
    fusion_score: float
    recency_enabled: bool
    recency_eligible: bool
    lexical_score: float
    recency_bonus: float
    lexical_position: int
    final_position: int
    max_promotion: int
    effective_at: str
    effective_at_basis: str
    evaluated_at: str
    decay_class: str


class SearchHit(msgspec.Struct, kw_only=True):
    entity_type: str
    entity_id: str
    revision_id: str
    status: str
    title: str
    excerpt: str
    citation: str
    context: OwnerContext
    score: float
    ranking: Ranking
    matched_by: list[str]
    provenance: dict[str, Any]


class ProjectionChannel(msgspec.Struct, kw_only=True, omit_defaults=True):
    state: str
    policy_version: str
    candidate_count: int
    reason: str | None = None


class SemanticChannel(msgspec.Struct, kw_only=True):
    state: str
    policy_version: str
    model_id: str | None
    model_revision: str | None
    indexed_commit_seq: int
    current_commit_seq: int
    eligible_revision_count: int
    indexed_revision_count: int
    coverage: float
    reason: str


class RerankerBreaker(msgspec.Struct, kw_only=True):
    state: str = "closed"
    budget_ms: int = 75
    trip_threshold: int = 5
    consecutive_over_budget: int = 0
    probe_after_skips: int = 16
    skipped_since_open: int = 0


class RerankerChannel(msgspec.Struct, kw_only=True):
    state: str
    policy_version: str
    role: str
    surface: str
    candidate_count: int
    scored_candidate_count: int
    ordering_applied: bool
    candidate_limit: int
    candidate_limit_reached: bool
    breaker: RerankerBreaker
    reason: str


class SearchResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    query: str
    query_analysis: QueryAnalysis
    horizon: str
    retrieval_mode: str
    projection: ProjectionChannel
    semantic: SemanticChannel
    reranker: RerankerChannel
    qualification_applied: bool
    unqualified_candidate_count: int
    best_unqualified_coverage: float | None = None
    hits: list[SearchHit]
    truncated: bool
    refine_hint: str | None = None
    broaden_hint: str | None = None


# ---------------------------------------------------------------------------------------------
# The reader's situation


@dataclass(frozen=True)
class ReadScope:
    """Who reads and when: the store (and its CAS), the ambient context and pins, now, the head."""

    conn: Any
    ambient: Scope
    pins: tuple[str, ...]
    now: str
    head: int
    cas: Any = None


@contextmanager
def read_snapshot(conn: Any) -> Iterator[Any]:
    """One consistent read transaction (joins an enclosing transaction if one is open)."""
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def check_min_commit_seq(requested: int | None, head: int) -> None:
    """INDEX_NOT_READY when the caller's acknowledged write is beyond what this store holds."""
    if requested is not None and requested > head:
        raise IndexNotReady(
            f"index is not ready through commit sequence {requested}; current sequence is {head}",
            details={"requested_commit_seq": requested, "current_commit_seq": head},
        )


def analyze(query: str) -> AnalyzedQuery:
    try:
        return analyze_query(query)
    except QueryError as exc:
        raise InvalidRequest(str(exc)) from None


# ---------------------------------------------------------------------------------------------
# Candidates


@dataclass(eq=False)
class Candidate:
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
    stored_provenance: dict[str, Any] = field(default_factory=dict)
    statement: str = ""
    evidence: list[dict[str, Any]] = field(default_factory=list)
    confidence: float | None = None
    valid_from: str | None = None
    valid_until: str | None = None
    lexical_candidate: bool = False
    lexical_score: float = 0.0
    trigram_score: float | None = None
    trigram_text: str = ""
    trigram_qualified: bool = False
    trigram_similarity: float | None = None
    trigram_matched_terms: list[str] = field(default_factory=list)
    matched_free: list[str] = field(default_factory=list)
    matched_phrases: list[str] = field(default_factory=list)
    lexical_qualified: bool = False
    lexical_coverage: float = 0.0
    exact_tier: bool = False
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
    retrieval_keys: dict[str, Any] = field(default_factory=dict)
    cited_span: bool = False

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


_ARTIFACT_COLUMNS = (
    "d.doc_id, a.id, r.id, r.commit_seq, r.title, a.status, a.current_revision_id = r.id, "
    "r.created_at, a.kind, r.provenance_json, a.workspace_id, a.project_id, a.task_id, a.component"
)
_ARTIFACT_JOINS = (
    "JOIN artifact_revisions r ON r.id = d.revision_id JOIN artifacts a ON a.id = d.artifact_id"
)
_CLAIM_COLUMNS = (
    "d.doc_id, c.id, cr.id, cr.commit_seq, c.claim_type, c.status, c.current_revision_id = cr.id, "
    "cr.created_at, cr.statement, cr.evidence_json, cr.confidence, c.valid_from, c.valid_until, "
    "c.workspace_id, c.project_id, c.task_id, c.component"
)
_CLAIM_JOINS = (
    "JOIN claim_revisions cr ON cr.id = d.revision_id JOIN claims c ON c.id = d.claim_id"
)


@dataclass(frozen=True)
class _Filters:
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


def _artifact_filters(scope: ReadScope, horizon: str, historical: bool) -> _Filters:
    owner_sql, owner_params = _owner_predicate("a", scope.ambient, horizon)
    bare, exact = parse_pins(scope.pins)
    bare_json, exact_json = msgspec.json.encode(bare).decode(), msgspec.json.encode(exact).decode()
    exact_pin = "(a.id || '@' || r.id) IN (SELECT value FROM json_each(?))"
    visible = (f"({owner_sql} OR (a.id IN (SELECT value FROM json_each(?)) "
               f"AND r.id = a.current_revision_id) OR {exact_pin})")
    params: tuple[Any, ...] = (*owner_params, bare_json, exact_json)
    if historical:
        return _Filters(visible, params)
    current = f"a.status = 'active' AND (r.id = a.current_revision_id OR {exact_pin})"
    return _Filters(f"{current} AND {visible}", (exact_json, *params))


def _claim_filters(scope: ReadScope, horizon: str, historical: bool) -> _Filters:
    owner_sql, owner_params = _owner_predicate("c", scope.ambient, horizon)
    if historical:
        return _Filters(owner_sql, owner_params)
    current = (
        "c.status IN ('active', 'conflicted') AND c.current_revision_id = cr.id "
        "AND (c.valid_from IS NULL OR c.valid_from <= ?) AND (c.valid_until IS NULL OR c.valid_until > ?)"
    )
    return _Filters(f"{current} AND {owner_sql}", (scope.now, scope.now, *owner_params))


def _owner(ws: str, prj: str, task: str | None, component: str | None) -> OwnerContext:
    return OwnerContext(workspace_id=ws, project_id=prj, task_id=task, component=component, pins=[])


def _artifact_candidate(row: Sequence[Any]) -> Candidate:
    (doc_id, art_id, rev_id, seq, title, status, is_current, created, kind, provenance,
     ws, prj, task, component) = row
    return Candidate(
        entity_type="artifact", entity_id=art_id, revision_id=rev_id, doc_id=doc_id,
        commit_seq=seq, title=title, status=status, owner=_owner(ws, prj, task, component),
        revision_created_at=created, is_current_revision=bool(is_current), kind=kind,
        stored_provenance=msgspec.json.decode(provenance),
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
class _Table:
    """How one entity type is searched: its indexes, index text, owner rows and filters."""

    entity_type: str
    word_index: str
    trigram_index: str
    docs: str
    columns: str
    joins: str
    bm25_weights: str
    make: Any
    filters: Any


_TABLES = {
    "artifact": _Table("artifact", "artifact_fts", "artifact_trigram_fts", "artifact_search_text",
                       _ARTIFACT_COLUMNS, _ARTIFACT_JOINS, "5.0, 1.0", _artifact_candidate,
                       _artifact_filters),
    "claim": _Table("claim", "claim_fts", "claim_trigram_fts", "claim_search_text", _CLAIM_COLUMNS,
                    _CLAIM_JOINS, "1.0", _claim_candidate, _claim_filters),
}


def _channel_rows(scope: ReadScope, table: _Table, index: str, expression: str,
                  filters: _Filters, limit: int) -> list[tuple[Candidate, float]]:
    """Top ``limit`` visible rows of one FTS index for ``expression``: best BM25, then newest.

    The index alone ranks a few times ``limit`` rows first (as fast as raw FTS5); when enough of
    them are visible they are exactly the visible top rows. Otherwise the filtered join decides.
    Document ids follow commit order, so "newest" is the larger document id.
    """
    probe = limit * PREFILTER_FACTOR
    top = scope.conn.execute(
        f"SELECT rowid, bm25({index}, {table.bm25_weights}) AS rank FROM {index} "
        f"WHERE {index} MATCH ? ORDER BY rank, rowid DESC LIMIT ?", (expression, probe),
    ).fetchall()
    if not top:
        return []
    # Join the owner rows in rank order, one slice of ``limit`` at a time: when most rows are
    # visible the first slice already holds the answer, and the join costs a quarter.
    visible: list[Any] = []
    for start in range(0, len(top), limit):
        piece = top[start:start + limit]
        marks = ",".join("?" * len(piece))
        visible += scope.conn.execute(
            f"SELECT {table.columns} FROM {table.docs} d {table.joins} "
            f"WHERE d.doc_id IN ({marks}) AND {filters.sql}",
            (*(doc_id for doc_id, _ in piece), *filters.params),
        ).fetchall()
        if len(visible) >= limit:
            break
    if len(visible) >= limit or len(top) < probe:
        rank = {doc_id: position for position, (doc_id, _) in enumerate(top)}
        scores = dict(top)
        chosen = sorted(visible, key=lambda row: rank[row[0]])[:limit]
        return [(table.make(row), max(0.0, -scores[row[0]])) for row in chosen]
    rows = scope.conn.execute(
        f"SELECT {table.columns}, bm25({index}, {table.bm25_weights}) AS rank "
        f"FROM {index} JOIN {table.docs} d ON d.doc_id = {index}.rowid {table.joins} "
        f"WHERE {index} MATCH ? AND {filters.sql} ORDER BY rank, d.doc_id DESC LIMIT ?",
        (expression, *filters.params, limit),
    ).fetchall()
    return [(table.make(row[:-1]), max(0.0, -row[-1])) for row in rows]


# ---------------------------------------------------------------------------------------------
# Lexical qualification (§5.3)


def annotate_lexical(conn: Any, analysis: AnalyzedQuery, candidates: Sequence[Candidate]) -> None:
    """Match every unit against each candidate's whole revision and set qualification."""
    for entity_type, table in _TABLES.items():
        subset = [c for c in candidates if c.entity_type == entity_type]
        if not subset:
            continue
        doc_ids = [c.doc_id for c in subset]
        matches = [_unit_matches(conn, table.word_index, analysis, unit, subset, doc_ids)
                   for unit in analysis.units]
        for candidate in subset:
            _qualify(candidate, analysis, [candidate.doc_id in found for found in matches])


def _unit_matches(conn: Any, index: str, analysis: AnalyzedQuery, unit: QueryUnit,
                  subset: Sequence[Candidate], doc_ids: Sequence[int]) -> set[int]:
    # With a single unit the whole-query expression is that unit's: every lexical candidate matched it.
    if len(analysis.units) == 1 and all(c.lexical_candidate for c in subset):
        return set(doc_ids)
    return _docs_matching(conn, index, unit.fts_expression, doc_ids)


def _docs_matching(conn: Any, index: str, expression: str, doc_ids: Sequence[int]) -> set[int]:
    """Which of ``doc_ids`` match ``expression``.

    A rare unit's whole match list is cheaper to read than one lookup per candidate, so read it
    when it is short; fall back to per-candidate lookups for common units.
    """
    wanted = set(doc_ids)
    cap = max(MATCH_LIST_CAP, MATCH_LIST_PER_CANDIDATE * len(doc_ids))
    rows = conn.execute(f"SELECT rowid FROM {index} WHERE {index} MATCH ? LIMIT ?",
                        (expression, cap + 1)).fetchall()
    if len(rows) <= cap:
        return {row[0] for row in rows} & wanted
    marks = ",".join("?" * len(doc_ids))
    rows = conn.execute(
        f"SELECT rowid FROM {index} WHERE {index} MATCH ? AND rowid IN ({marks})",
        (expression, *doc_ids),
    ).fetchall()
    return {row[0] for row in rows}


def _qualify(candidate: Candidate, analysis: AnalyzedQuery, matched: Sequence[bool]) -> None:
    units = analysis.units
    candidate.matched_free = [u.display for u, hit in zip(units, matched) if hit and not u.phrase]
    candidate.matched_phrases = [u.display for u, hit in zip(units, matched) if hit and u.phrase]
    count = candidate.matched_unit_count
    all_phrases = all(hit for u, hit in zip(units, matched) if u.phrase)
    candidate.lexical_qualified = all_phrases and count >= analysis.required_matches and count > 0
    candidate.lexical_coverage = count / len(units)


# ---------------------------------------------------------------------------------------------
# Trigram typo channel (§5.4)


@functools.lru_cache(maxsize=1 << 16)
def fold_word(text: str) -> str:
    """Lower-case without accents, as the trigram tokenizer compares characters."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def fuzzy_words(unit: QueryUnit) -> list[str]:
    return [fold_word(w) for w in _WORD.findall(unit.display) if len(w) >= MIN_FUZZY_WORD_CHARS]


@functools.lru_cache(maxsize=1 << 16)
def similarity(left: str, right: str) -> float:
    """Normalized Levenshtein similarity: 1 − distance / longer length."""
    if left == right:
        return 1.0
    longer = max(len(left), len(right))
    if longer == 0:
        return 1.0
    previous = list(range(len(right) + 1))
    for i, a in enumerate(left, 1):
        current = [i]
        for j, b in enumerate(right, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b)))
        previous = current
    return 1.0 - previous[-1] / longer


@dataclass(frozen=True)
class FuzzyMatch:
    matched_units: int
    matched_words: tuple[str, ...]
    similarity: float
    qualified: bool


def fuzzy_match(analysis: AnalyzedQuery, text: str) -> FuzzyMatch:
    """Trigram qualification of one text: each unit's ≥3-char words must be near some word."""
    units = analysis.units
    per_unit = [fuzzy_words(unit) for unit in units]
    query_words = list(dict.fromkeys(w for words in per_unit for w in words))
    if not query_words:
        return FuzzyMatch(0, (), 0.0, False)
    threshold = SINGLE_WORD_SIMILARITY if len(query_words) == 1 else SEVERAL_WORDS_SIMILARITY
    text_words = {fold_word(w) for w in _WORD.findall(text) if len(w) >= MIN_FUZZY_WORD_CHARS}
    best = {word: _best_similarity(word, text_words) for word in query_words}
    matched_words = tuple(w for w in query_words if best[w] >= threshold)
    unit_hits = [bool(words) and all(best[w] >= threshold for w in words) for words in per_unit]
    matched_units = sum(unit_hits)
    phrases_ok = all(hit for unit, words, hit in zip(units, per_unit, unit_hits)
                     if unit.phrase and words)
    required = 1 if len(units) <= 1 else min(
        len(units), max(analysis.required_matches, math.ceil(3 * len(units) / 5)))
    qualified = matched_units > 0 and matched_units >= required and phrases_ok
    mean = sum(best.values()) / len(best)
    return FuzzyMatch(matched_units, matched_words, mean, qualified)


@functools.lru_cache(maxsize=1 << 14)
def _letters(word: str) -> Counter[str]:
    return Counter(word)


def _best_similarity(word: str, candidates: set[str]) -> float:
    if word in candidates:
        return 1.0
    best = 0.0
    letters = _letters(word)
    for other in candidates:
        longest = max(len(word), len(other))
        # Upper bounds first: the length gap, then the shared letters, each cap the similarity.
        if 1.0 - abs(len(word) - len(other)) / longest <= best:
            continue
        if sum((letters & _letters(other)).values()) / longest <= best:
            continue
        best = max(best, similarity(word, other))
    return best


def rarest_trigrams(conn: Any, entity_type: str, analysis: AnalyzedQuery) -> list[str]:
    """The two rarest trigrams of each fuzzy word that occur in the entity's trigram index."""
    vocab = TRIGRAM_VOCAB_TABLES[entity_type][0]
    chosen: list[str] = []
    for unit in analysis.units:
        for word in fuzzy_words(unit):
            grams = sorted({word[i:i + 3] for i in range(len(word) - 2)})
            marks = ",".join("?" * len(grams))
            rows = conn.execute(
                f"SELECT term, doc FROM temp.{vocab} WHERE term IN ({marks}) AND doc > 0", grams,
            ).fetchall()
            rarest = sorted(rows, key=lambda row: (row[1], row[0]))[:TRIGRAMS_PER_WORD]
            chosen.extend(term for term, _ in rarest if term not in chosen)
    return chosen


def trigram_expression(grams: Sequence[str]) -> str:
    return " OR ".join('"' + gram.replace('"', '""') + '"' for gram in grams)


def run_trigram_channel(scope: ReadScope, analysis: AnalyzedQuery, tables: Sequence[_Table],
                        filters: dict[str, _Filters], limit: int,
                        candidates: dict[tuple[str, str], Candidate]) -> None:
    """Add or annotate candidates from each trigram index (never summing across tables)."""
    ensure_trigram_vocab(scope.conn)
    for table in tables:
        grams = rarest_trigrams(scope.conn, table.entity_type, analysis)
        if not grams:
            continue
        rows = _channel_rows(scope, table, table.trigram_index, trigram_expression(grams),
                             filters[table.entity_type], limit)
        windows = _trigram_windows(scope.conn, table, grams, [c.doc_id for c, _ in rows])
        for fresh, score in rows:
            candidate = candidates.setdefault(fresh.key, fresh)
            candidate.trigram_score = score
            candidate.trigram_text = (candidate.statement if table.entity_type == "claim"
                                      else candidate.title + " " + windows.get(candidate.doc_id, ""))
            match = fuzzy_match(analysis, candidate.trigram_text)
            candidate.trigram_qualified = match.qualified
            candidate.trigram_similarity = round(match.similarity, 12)
            candidate.trigram_matched_terms = list(match.matched_words)


def _trigram_windows(conn: Any, table: _Table, grams: Sequence[str], doc_ids: Sequence[int]) -> dict[int, str]:
    """Each artifact body's best trigram window: what FTS5 ``snippet()`` would show, computed
    here because snippet() re-tokenizes whole bodies and is slow on long documents."""
    if table.entity_type != "artifact" or not doc_ids:
        return {}
    marks = ",".join("?" * len(doc_ids))
    rows = conn.execute(f"SELECT doc_id, body FROM artifact_search_text WHERE doc_id IN ({marks})",
                        tuple(doc_ids)).fetchall()
    return {doc_id: trigram_window(body, grams) for doc_id, body in rows}


def fold_text(text: str) -> str:
    """``fold_word`` character by character, so offsets in the result match the original."""
    if text.isascii():
        return text.lower()
    return "".join(folded if len(folded := fold_word(char)) == 1 else char for char in text)


def trigram_window(body: str, grams: Sequence[str], width: int = TRIGRAM_WINDOW_CHARS) -> str:
    """The ``width``-character stretch of ``body`` holding the most distinct ``grams``, earliest
    first; empty when none occurs."""
    folded = fold_text(body)
    hits: list[tuple[int, int]] = []
    for index, gram in enumerate(grams):
        start = folded.find(gram)
        while start >= 0 and len(hits) < MAX_WINDOW_OCCURRENCES:
            hits.append((start, index))
            start = folded.find(gram, start + 1)
    if not hits:
        return ""
    hits.sort()
    best_start, best_count = hits[0][0], 0
    for position, (start, _) in enumerate(hits):
        inside = {gram for at, gram in hits[position:] if at + 3 <= start + width}
        if len(inside) > best_count:
            best_start, best_count = start, len(inside)
    return body[best_start:best_start + width]


# ---------------------------------------------------------------------------------------------
# Fusion (§5.6)


def _channel_ranks(candidates: Sequence[Candidate], score_of: Any) -> dict[int, int]:
    scored = [c for c in candidates if score_of(c) is not None]
    scored.sort(key=lambda c: (-score_of(c), -c.commit_seq))
    return {id(c): rank for rank, c in enumerate(scored, 1)}


def fuse(candidates: list[Candidate]) -> list[Candidate]:
    """Score by tiered RRF and sort with content-based tie-breaks (never ids first)."""
    lexical = _channel_ranks(candidates, lambda c: c.lexical_score if c.lexical_candidate else None)
    trigram = _channel_ranks(candidates, lambda c: c.trigram_score)
    semantic = _channel_ranks(candidates, lambda c: c.semantic_similarity)
    for c in candidates:
        c.exact_tier = c.lexical_qualified and c.lexical_coverage == 1.0
        fusion = 1.0 / (RRF_K + lexical[id(c)]) if id(c) in lexical else 0.0
        if not c.exact_tier and id(c) in trigram:
            fusion += TRIGRAM_CHANNEL_WEIGHT / (RRF_K + trigram[id(c)])
        if not c.exact_tier and id(c) in semantic:
            fusion += SEMANTIC_CHANNEL_WEIGHT / (RRF_K + semantic[id(c)])
        c.fusion = round(fusion, 12)
        c.score = c.fusion
    return sorted(candidates, key=_rank_key)


def _rank_key(c: Candidate) -> tuple[Any, ...]:
    return (not c.exact_tier, -c.fusion, -len(c.matched_phrases), -c.lexical_coverage,
            -c.commit_seq, c.excerpt, c.entity_id)


# ---------------------------------------------------------------------------------------------
# Bounded recency (§5.8)


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def decay_for(candidate: Candidate) -> tuple[str, int, float]:
    if candidate.entity_type == "claim":
        return CLAIM_DECAY.get(candidate.kind, GENERAL_DECAY)
    kind = candidate.kind.lower()
    for needles, decay in ARTIFACT_KIND_DECAY:
        if any(needle in kind for needle in needles):
            return decay
    return GENERAL_DECAY


def apply_recency(candidates: list[Candidate], enabled: bool, now: str) -> list[Candidate]:
    """Add the bounded bonus and let items rise ≤2 places past same-rank, lower-score neighbours."""
    evaluated = _instant(now)
    for position, c in enumerate(candidates, 1):
        c.lexical_position = position
        if c.entity_type == "claim" and c.valid_from is not None:
            c.effective_at, c.effective_at_basis = c.valid_from, "valid_from"
        else:
            c.effective_at, c.effective_at_basis = c.revision_created_at, "revision_created_at"
        c.decay_class, half_life, ratio = decay_for(c)
        c.recency_eligible = c.is_current(now) and c.effective_at <= now
        c.recency_bonus = 0.0
        if enabled and c.recency_eligible:
            age_days = max(0, int((evaluated - _instant(c.effective_at)).total_seconds())) / SECONDS_PER_DAY
            c.recency_bonus = round(c.fusion * ratio * 2 ** (-age_days / half_life), 12)
        c.score = round(c.fusion + c.recency_bonus, 12)
    ordered = _promote(candidates) if enabled else list(candidates)
    for position, c in enumerate(ordered, 1):
        c.final_position = position
    return ordered


def qualification_rank(c: Candidate) -> tuple[Any, ...]:
    return (c.exact_tier, c.lexical_qualified, c.trigram_qualified, c.semantic_qualified,
            len(c.matched_phrases), c.matched_unit_count)


def _promote(candidates: Sequence[Candidate]) -> list[Candidate]:
    result: list[Candidate] = []
    for index, item in enumerate(candidates):
        position = len(result)
        floor = max(0, index - MAX_PROMOTION)
        while (position > floor and qualification_rank(result[position - 1]) == qualification_rank(item)
               and item.score > result[position - 1].score):
            position -= 1
        result.insert(position, item)
    return result


# ---------------------------------------------------------------------------------------------
# Citations and excerpts (§5.7)


def claim_citation(claim_id: str, revision_id: str) -> str:
    return f"memoree://claim/{claim_id}@{revision_id}"


def attach_citations(conn: Any, analysis: AnalyzedQuery, candidates: Sequence[Candidate]) -> None:
    """Give each hit its excerpt and citation (claims whole; artifacts their best chunk)."""
    artifacts = []
    for c in candidates:
        if c.citation:
            continue
        if c.entity_type == "claim":
            c.excerpt, c.citation = c.statement, claim_citation(c.entity_id, c.revision_id)
        else:
            artifacts.append(c)
    if not artifacts:
        return
    chunks = _chunks_of(conn, [c.revision_id for c in artifacts])
    lexical = [c for c in artifacts if c.matched_unit_count or not c.trigram_qualified]
    scores = _chunk_scores(conn, analysis, [ch for c in lexical for ch in chunks.get(c.revision_id, [])])
    for c in artifacts:
        rows = chunks.get(c.revision_id, [])
        if c.semantic_span is not None and not c.lexical_candidate and c.trigram_score is None:
            _cite_passage(conn, c, c.semantic_span)
        elif c in lexical:
            _cite(conn, c, _best_lexical_chunk(rows, scores))
        else:
            _cite(conn, c, _best_fuzzy_chunk(analysis, rows, c.title, _body(conn, c.revision_id)))


@dataclass(frozen=True)
class _ChunkRow:
    chunk_id: int
    revision_id: str
    row_kind: str
    ordinal: int | None
    start_byte: int | None
    end_byte: int | None

    @property
    def order(self) -> int:
        return -1 if self.ordinal is None else self.ordinal


@dataclass(frozen=True)
class _ChunkScores:
    bm25: dict[int, float]
    units: dict[int, int]
    phrases: dict[int, int]


def _chunks_of(conn: Any, revision_ids: Sequence[str]) -> dict[str, list[_ChunkRow]]:
    marks = ",".join("?" * len(revision_ids))
    found: dict[str, list[_ChunkRow]] = {}
    for row in conn.execute(
        "SELECT chunk_id, revision_id, row_kind, ordinal, start_byte, end_byte FROM artifact_chunks "
        f"WHERE revision_id IN ({marks}) ORDER BY chunk_id", tuple(revision_ids),
    ).fetchall():
        found.setdefault(row[1], []).append(_ChunkRow(*row))
    return found


def _body(conn: Any, revision_id: str) -> bytes:
    row = conn.execute("SELECT body FROM artifact_search_text WHERE revision_id = ?", (revision_id,)).fetchone()
    return row[0].encode("utf-8")


def _chunk_scores(conn: Any, analysis: AnalyzedQuery, chunks: Sequence[_ChunkRow]) -> _ChunkScores:
    """Which chunk rows match the whole query, their matched units and phrases, and BM25 where
    it decides the best chunk: only among a revision's chunks tied on phrases and units (BM25
    costs a pass over every match of each term per query, so it is asked of few rows)."""
    if not chunks:
        return _ChunkScores({}, {}, {})
    ids = [ch.chunk_id for ch in chunks]
    per_unit = [_docs_matching(conn, "artifact_chunk_fts", unit.fts_expression, ids) for unit in analysis.units]
    matched = set().union(*per_unit)  # the whole-query expression ORs the units' expressions
    units: dict[int, int] = {}
    phrases: dict[int, int] = {}
    for unit, matching in zip(analysis.units, per_unit):
        for chunk_id in matching:
            units[chunk_id] = units.get(chunk_id, 0) + 1
            if unit.phrase:
                phrases[chunk_id] = phrases.get(chunk_id, 0) + 1
    tied = _tied_best_chunks([ch for ch in chunks if ch.chunk_id in matched], units, phrases)
    bm25 = dict.fromkeys(matched, 0.0)  # a placeholder wherever phrases and units already decide
    if tied:
        bm25.update(_chunk_bm25(conn, analysis.match_expression, tied))
    return _ChunkScores(bm25, units, phrases)


def _tied_best_chunks(matched: Sequence[_ChunkRow], units: dict[int, int],
                      phrases: dict[int, int]) -> list[_ChunkRow]:
    """The matched chunk rows that share their revision's best (phrases, units) with another."""
    def strength(ch: _ChunkRow) -> tuple[int, int]:
        return phrases.get(ch.chunk_id, 0), units.get(ch.chunk_id, 0)

    by_revision: dict[str, list[_ChunkRow]] = {}
    for ch in matched:
        by_revision.setdefault(ch.revision_id, []).append(ch)
    tied: list[_ChunkRow] = []
    for rows in by_revision.values():
        best = max(map(strength, rows))
        leaders = [ch for ch in rows if strength(ch) == best]
        if len(leaders) > 1:
            tied += leaders
    return tied


def _chunk_bm25(conn: Any, expression: str, chunks: Sequence[_ChunkRow]) -> dict[int, float]:
    wanted = {ch.chunk_id for ch in chunks}
    cap = max(MATCH_LIST_CAP, MATCH_LIST_PER_CANDIDATE * len(wanted))
    rows = conn.execute(
        "SELECT rowid, bm25(artifact_chunk_fts, 5.0, 1.0) FROM artifact_chunk_fts "
        "WHERE artifact_chunk_fts MATCH ? LIMIT ?", (expression, cap + 1)).fetchall()
    if len(rows) <= cap:
        return {chunk_id: score for chunk_id, score in rows if chunk_id in wanted}
    scores: dict[int, float] = {}
    by_revision: dict[str, list[int]] = {}
    for ch in chunks:
        by_revision.setdefault(ch.revision_id, []).append(ch.chunk_id)
    for members in by_revision.values():  # a revision's chunk rows have consecutive ids
        scores.update(conn.execute(
            "SELECT rowid, bm25(artifact_chunk_fts, 5.0, 1.0) FROM artifact_chunk_fts "
            "WHERE artifact_chunk_fts MATCH ? AND rowid BETWEEN ? AND ?",
            (expression, min(members), max(members))).fetchall())
    return scores


def _cite(conn: Any, c: Candidate, best: _ChunkRow | None) -> None:
    if best is None or best.row_kind == "title":
        c.excerpt = c.title
        c.citation = span_citation(c.entity_id, c.revision_id)
        c.retrieval_keys["retrieval_match"] = "title"
        return
    span = (best.start_byte, best.end_byte)
    c.excerpt = _body(conn, c.revision_id)[span[0]:span[1]].decode("utf-8")
    c.citation = span_citation(c.entity_id, c.revision_id, span)
    c.cited_span = True
    c.retrieval_keys["retrieval_span"] = {
        "start_byte": span[0], "end_byte": span[1], "chunker_version": CHUNKER_VERSION,
        "coordinate_space": "immutable_artifact_bytes",
    }


def _cite_passage(conn: Any, c: Candidate, span: tuple[int, int]) -> None:
    """A dense-only artifact hit cites the exact passage whose meaning matched."""
    c.excerpt = _body(conn, c.revision_id)[span[0]:span[1]].decode("utf-8")
    c.citation = span_citation(c.entity_id, c.revision_id, span)
    c.cited_span = True
    c.retrieval_keys["retrieval_span"] = {
        "start_byte": span[0], "end_byte": span[1], "chunker_version": CHUNKER_VERSION,
        "coordinate_space": "immutable_artifact_bytes", "window": "semantic_passage",
    }


def _best_lexical_chunk(chunks: Sequence[_ChunkRow], scores: _ChunkScores) -> _ChunkRow | None:
    """Most matched phrases, then units, then BM25, then earliest (the title row counts as −1)."""
    matched = [ch for ch in chunks if ch.chunk_id in scores.bm25]
    if not matched:
        return None
    return min(matched, key=lambda ch: (-scores.phrases.get(ch.chunk_id, 0), -scores.units.get(ch.chunk_id, 0),
                                        scores.bm25[ch.chunk_id], ch.order, ch.chunk_id))


def _best_fuzzy_chunk(analysis: AnalyzedQuery, chunks: Sequence[_ChunkRow], title: str,
                      body: bytes) -> _ChunkRow | None:
    best_key, best = None, None
    for chunk in chunks:
        if chunk.row_kind == "title":
            text = title
        else:
            text = body[chunk.start_byte:chunk.end_byte].decode("utf-8")
        match = fuzzy_match(analysis, text)
        if not match.matched_words:
            continue
        key = (-len(match.matched_words), -match.similarity, len(text.encode("utf-8")), chunk.order)
        if best_key is None or key < best_key:
            best_key, best = key, chunk
    return best


# ---------------------------------------------------------------------------------------------
# The pipeline


@dataclass
class SearchRun:
    """A finished search: the window of hits and what the caller may report about the rest."""

    analysis: AnalyzedQuery
    horizon: str
    limit: int
    evaluated_at: str
    recency_enabled: bool
    qualified_only: bool
    hits: list[SearchHit]
    truncated: bool
    candidates: list[SearchHit]
    candidates_truncated: bool
    unqualified_candidate_count: int
    best_unqualified_coverage: float | None
    current_commit_seq: int
    surface: str
    semantic: SemanticChannel | None = None


def gather_candidates(scope: ReadScope, analysis: AnalyzedQuery, tables: Sequence[_Table], horizon: str,
                      include_historical: bool, candidate_limit: int,
                      query_vector: Any = None, query: str = "") -> list[Candidate]:
    """Lexical candidates per table, qualified; then typo candidates for tables that need them;
    then, with a query vector, the dense channel's candidates."""
    filters = {t.entity_type: t.filters(scope, horizon, include_historical) for t in tables}
    pool: dict[tuple[str, str], Candidate] = {}
    for table in tables:
        for candidate, score in _channel_rows(scope, table, table.word_index, analysis.match_expression,
                                              filters[table.entity_type], candidate_limit):
            candidate.lexical_candidate, candidate.lexical_score = True, score
            pool[candidate.key] = candidate
    annotate_lexical(scope.conn, analysis, list(pool.values()))
    # Decided per entity table, so a claims-only or artifacts-only search (recall) takes the same
    # decision for its table as the mixed `search` op does, and their citations agree.
    typo_tables = [t for t in tables if not any(
        c.entity_type == t.entity_type and c.lexical_qualified and c.lexical_coverage == 1.0
        for c in pool.values())]
    if typo_tables:
        run_trigram_channel(scope, analysis, typo_tables, filters, candidate_limit, pool)
        annotate_lexical(scope.conn, analysis, [c for c in pool.values() if not c.lexical_candidate])
    # Like the typo channel, meaning is asked only of tables whose words did not already answer.
    dense_tables = [t for t in tables if t.entity_type not in _fully_covered(pool.values())]
    if query_vector is not None and dense_tables:
        run_dense_channel(scope, query, analysis, query_vector, dense_tables, horizon,
                          include_historical, candidate_limit, pool)
    return list(pool.values())


def _fully_covered(candidates: Any) -> set[str]:
    return {c.entity_type for c in candidates if c.lexical_qualified and c.lexical_coverage == 1.0}


def _visible_candidates(scope: ReadScope, table: _Table, filters: _Filters, hits: list[dense.DenseHit],
                        wanted: int) -> list[tuple[Candidate, dense.DenseHit]]:
    """The first ``wanted`` dense hits that ``filters`` let this request see, nearest first."""
    found: list[tuple[Candidate, dense.DenseHit]] = []
    for piece in dense.visible_slices(hits, wanted):
        by_doc = {hit.doc_id: hit for hit in piece}
        marks = ",".join("?" * len(piece))
        rows = scope.conn.execute(
            f"SELECT {table.columns} FROM {table.docs} d {table.joins} "
            f"WHERE d.doc_id IN ({marks}) AND {filters.sql}",
            (*by_doc, *filters.params)).fetchall()
        rank = {hit.doc_id: i for i, hit in enumerate(piece)}
        for row in sorted(rows, key=lambda r: rank[r[0]]):
            found.append((table.make(row), by_doc[row[0]]))
        if len(found) >= wanted:
            break
    return found[:wanted]


def run_dense_channel(scope: ReadScope, query: str, analysis: AnalyzedQuery, query_vector: Any,
                      tables: Sequence[_Table], horizon: str, include_historical: bool,
                      candidate_limit: int, pool: dict[tuple[str, str], Candidate]) -> None:
    """Add the nearest visible items by meaning to ``pool`` and decide which qualify by meaning.

    Claims are always scored (even for an artifacts-only search): an artifact qualifies by
    meaning only as the evidence of a claim that did (``queries.dense``). A claim that shares
    some of the query's words is judged on the meaning of the words it does not share.
    """
    claim_table = _TABLES["claim"]
    claims = _visible_candidates(scope, claim_table, claim_table.filters(scope, horizon, include_historical),
                                 dense.dense_hits(scope.conn, "claim", query_vector), candidate_limit)
    claims = [(pool.get(c.key, c), hit) for c, hit in claims]
    annotate_lexical(scope.conn, analysis, [c for c, _ in claims if c.key not in pool])
    similarities = [hit.similarity for _, hit in claims]
    accepted = [dense.claim_accepted(similarities, i)
                and dense.unmatched_similarity(query, c.statement, c.matched_free + c.matched_phrases,
                                               hit.similarity) >= dense.UNMATCHED_MIN_COSINE
                for i, (c, hit) in enumerate(claims)]
    vouched = {ref.get("artifact_id") for (c, _), ok in zip(claims, accepted) if ok for ref in c.evidence}
    wanted = {t.entity_type for t in tables}
    found: list[tuple[Candidate, dense.DenseHit, bool]] = []
    if "claim" in wanted:
        found += [(c, hit, ok) for (c, hit), ok in zip(claims, accepted)]
    if "artifact" in wanted:
        table = _TABLES["artifact"]
        artifacts = _visible_candidates(scope, table, table.filters(scope, horizon, include_historical),
                                        dense.dense_hits(scope.conn, "artifact", query_vector), candidate_limit)
        artifacts = [(pool.get(c.key, c), hit) for c, hit in artifacts]
        annotate_lexical(scope.conn, analysis, [c for c, _ in artifacts if c.key not in pool])
        found += [(c, hit, c.entity_id in vouched) for c, hit in artifacts]
    for candidate, hit, ok in found:
        held = pool.setdefault(candidate.key, candidate)
        held.semantic_similarity = hit.similarity
        held.semantic_span = hit.span
        held.semantic_qualified = ok


def run_search(
    scope: ReadScope,
    *,
    query: str,
    horizon: str = "ambient",
    reason: str | None = None,
    limit: int = 10,
    include_historical: bool = False,
    min_commit_seq: int | None = None,
    recency: bool = True,
    entity_types: frozenset[str] = _ENTITY_TYPES,
    qualified_only: bool = False,
    analysis: AnalyzedQuery | None = None,
    with_candidates: bool = False,
    semantic: bool = True,
) -> SearchRun:
    """Run the §5 pipeline; ``qualified_only`` drops unqualified hits (recall/context/probe).

    ``with_candidates`` also cites and returns the unqualified candidate partition (probe and
    recall candidates); otherwise only its counts are reported.
    """
    check_reason(reason)
    check_limit("limit", limit, limits.MAX_SEARCH_ITEMS)
    check_min_commit_seq(min_commit_seq, scope.head)
    analysis = analysis or analyze(query)
    tables = [_TABLES[t] for t in ("artifact", "claim") if t in entity_types]
    channel = semantic_status(scope.head, scope.conn, requested=semantic)
    query_vector = dense.embed_query(query) if channel.state == "ready" else None
    pool = gather_candidates(scope, analysis, tables, horizon, include_historical,
                             (limit + 1) * CANDIDATES_PER_LIMIT_SLOT, query_vector, query)
    ranked = apply_recency(fuse(pool), recency, scope.now)
    unqualified = [c for c in ranked if not c.qualified]
    partition, partition_truncated = _candidate_partition(unqualified)
    if not with_candidates:
        partition = []
    window = [c for c in ranked if c.qualified] if qualified_only else ranked
    truncated = len(window) > limit
    window = _retain_conflicts(window, limit)[:limit]
    for position, c in enumerate(window, 1):
        c.final_position = position
    attach_citations(scope.conn, analysis, window + partition)
    return SearchRun(
        analysis=analysis, horizon=horizon, limit=limit, evaluated_at=scope.now,
        recency_enabled=recency, qualified_only=qualified_only,
        hits=[_to_hit(c, analysis, scope.now, recency) for c in window], truncated=truncated,
        candidates=[_to_hit(c, analysis, scope.now, recency) for c in partition],
        candidates_truncated=partition_truncated,
        unqualified_candidate_count=len(unqualified),
        best_unqualified_coverage=max((c.lexical_coverage for c in unqualified), default=None),
        current_commit_seq=scope.head,
        surface="mixed" if len(tables) == 2 else tables[0].entity_type,
        semantic=channel,
    )


def _candidate_partition(unqualified: Sequence[Candidate]) -> tuple[list[Candidate], bool]:
    seen: set[str] = set()
    distinct = []
    for c in unqualified:
        if c.entity_id not in seen:
            seen.add(c.entity_id)
            distinct.append(c)
    return distinct[:MAX_CANDIDATE_PARTITION], len(distinct) > MAX_CANDIDATE_PARTITION


def _retain_conflicts(hits: list[Candidate], limit: int) -> list[Candidate]:
    """Swap conflicted claims from beyond the window into it, replacing the lowest ordinary hit."""
    if len(hits) <= limit:
        return hits
    window, rest = list(hits[:limit]), hits[limit:]
    for c in rest:
        if c.status != "conflicted":
            continue
        replaceable = [i for i, w in enumerate(window) if not w.exact_tier and w.status != "conflicted"]
        if not replaceable:
            break
        window[replaceable[-1]] = c
        c.retained_for_conflict = True
    return window + [c for c in rest if not c.retained_for_conflict]


def _matched_by(c: Candidate, recency: bool) -> list[str]:
    labels = []
    if c.lexical_candidate:
        labels.append("fts5_bm25")
    if c.lexical_qualified:
        labels.append(LEXICAL_POLICY_VERSION)
    elif c.lexical_candidate:
        labels.append("lexical_candidate_v1")
    if c.trigram_score is not None:
        labels.append(TRIGRAM_POLICY_VERSION if c.trigram_qualified else "trigram_candidate_v1")
    if c.semantic_similarity is not None:
        labels.append(SEMANTIC_POLICY_VERSION if c.semantic_qualified else "semantic_candidate_v1")
    if c.qualified:
        labels.append(FUSION_POLICY_VERSION)
    if c.cited_span:
        labels.append(CITATION_SPAN_LABEL)
    if recency:
        labels.append(RECENCY_POLICY_VERSION)
    if c.retained_for_conflict:
        labels.append(CONFLICT_RETENTION_POLICY)
    return labels


def _provenance(c: Candidate, now: str) -> dict[str, Any]:
    tier = {"retrieval_tier": "exact_match", "model_independent_ranking": True} if c.exact_tier \
        else {"retrieval_tier": "candidate"}
    currentness = {"is_current_revision": c.is_current_revision, "is_current": c.is_current(now)}
    retention = ({"conflict_retention": {
        "policy_version": CONFLICT_RETENTION_POLICY,
        "reason": "a conflicted claim beyond the limit is kept so the contradiction stays visible",
    }} if c.retained_for_conflict else {})
    if c.entity_type == "artifact":
        return {**c.stored_provenance, **currentness, **tier, **c.retrieval_keys, **retention}
    claim = {"claim_type": c.kind, "evidence": c.evidence}
    if c.confidence is not None:
        claim["confidence"] = c.confidence
    return {**claim, "valid_from": c.valid_from, "valid_until": c.valid_until,
            "evaluated_at": now, "temporal_state": c.temporal_state(now), **currentness, **tier,
            **retention}


def _to_hit(c: Candidate, analysis: AnalyzedQuery, now: str, recency: bool) -> SearchHit:
    ranking = Ranking(
        query_unit_count=len(analysis.units), matched_unit_count=c.matched_unit_count,
        required_matches=analysis.required_matches, lexical_coverage=c.lexical_coverage,
        phrase_group_count=len(analysis.phrase_units),
        matched_phrase_group_count=len(c.matched_phrases), lexical_qualified=c.lexical_qualified,
        trigram_qualified=c.trigram_qualified, semantic_qualified=c.semantic_qualified,
        qualified=c.qualified,
        matched_terms=list(c.matched_free), matched_phrase_groups=list(c.matched_phrases),
        trigram_matched_terms=list(c.trigram_matched_terms), trigram_similarity=c.trigram_similarity,
        semantic_similarity=c.semantic_similarity, exact_tier=c.exact_tier, fusion_score=c.fusion,
        recency_enabled=recency, recency_eligible=c.recency_eligible, lexical_score=c.lexical_score,
        recency_bonus=c.recency_bonus, lexical_position=c.lexical_position,
        final_position=c.final_position, max_promotion=MAX_PROMOTION, effective_at=c.effective_at,
        effective_at_basis=c.effective_at_basis, evaluated_at=now, decay_class=c.decay_class,
    )
    return SearchHit(
        entity_type=c.entity_type, entity_id=c.entity_id, revision_id=c.revision_id,
        status=c.status, title=c.title, excerpt=c.excerpt, citation=c.citation, context=c.owner,
        score=c.score, ranking=ranking, matched_by=_matched_by(c, recency),
        provenance=_provenance(c, now),
    )


# ---------------------------------------------------------------------------------------------
# The `search` op


def retrieval_mode(recency: bool, semantic: bool = False) -> str:
    return (BASE_RETRIEVAL_MODE + (f"+{SEMANTIC_POLICY_VERSION}" if semantic else "")
            + (f"+{RECENCY_POLICY_VERSION}" if recency else ""))


def semantic_status(head: int, conn: Any = None, *, requested: bool = True) -> SemanticChannel:
    """The dense channel's state for one request: ``ready`` only where the model is loaded, the
    store's vectors were built with it, and the request did not turn it off."""
    model = embedding_status()
    state, reason = "disabled", model.reason
    if model.available and conn is not None and not requested:
        reason = "turned off by the request (semantic.enabled=false); retrieval is lexical only"
    elif model.available and conn is not None and not dense.vectors_ready(conn):
        reason = "the vectors projection is not built with this model yet; run `memoree reindex`"
    elif model.available and conn is not None:
        state, reason = "ready", "local static embeddings fused with the lexical channel"
    ready = state == "ready"
    return SemanticChannel(
        state=state, policy_version=SEMANTIC_POLICY_VERSION,
        model_id=model.model_id if model.available else None,
        model_revision=model.revision if model.available else None,
        indexed_commit_seq=head if ready else 0, current_commit_seq=head,
        eligible_revision_count=0, indexed_revision_count=0, coverage=1.0 if ready else 0.0,
        reason=reason,
    )


def reranker_status(surface: str, candidate_count: int) -> RerankerChannel:
    return RerankerChannel(
        state="disabled", policy_version=RERANKER_POLICY_VERSION, role="ordering_only",
        surface=surface, candidate_count=candidate_count, scored_candidate_count=0,
        ordering_applied=False, candidate_limit=MAX_CANDIDATE_PARTITION,
        candidate_limit_reached=candidate_count > MAX_CANDIDATE_PARTITION,
        breaker=RerankerBreaker(), reason="this build ships no cross-encoder model",
    )


def projection_status() -> ProjectionChannel:
    return ProjectionChannel(
        state="not_applicable", policy_version=PROJECTION_POLICY_VERSION, candidate_count=0,
        reason="cited retrieval projections are not implemented in this build",
    )


def search_result(run: SearchRun, query: str) -> SearchResult:
    return SearchResult(
        query=query, query_analysis=run.analysis.analysis, horizon=run.horizon,
        retrieval_mode=retrieval_mode(run.recency_enabled, run_semantic(run).state == "ready"),
        projection=projection_status(), semantic=run_semantic(run),
        reranker=reranker_status(run.surface, len(run.hits)),
        qualification_applied=run.qualified_only,
        unqualified_candidate_count=run.unqualified_candidate_count,
        best_unqualified_coverage=run.best_unqualified_coverage, hits=run.hits,
        truncated=run.truncated,
        refine_hint=REFINE_HINT.format(limit=run.limit) if run.truncated else None,
        broaden_hint=BROADEN_HINT if not run.hits and run.horizon == "ambient" else None,
    )


def run_semantic(run: SearchRun) -> SemanticChannel:
    return run.semantic or semantic_status(run.current_commit_seq)


def search(scope: ReadScope, inp: SearchInput) -> SearchResult:
    """The `search` op: ranked hits including unqualified candidates."""
    with read_snapshot(scope.conn):
        run = run_search(
            scope, query=inp.query, horizon=inp.horizon, reason=inp.reason, limit=inp.limit,
            include_historical=inp.include_historical, min_commit_seq=inp.min_commit_seq,
            recency=inp.recency.enabled, semantic=inp.semantic.enabled,
        )
    return search_result(run, inp.query)
