"""The search pipeline (protocol §5): one table's candidates, then fusion, recency and the window.

This module owns the `search` op and ``run_search``, which recall, context.build and probe share:
per entity table, the units' in-horizon match lists (``candidates``) give horizon-scoped IDF,
qualification (`lexical_qualification_v2`) and the lexical score; the typo channel
(``typo``) adds candidates for words the horizon lacks; ``fusion`` merges the per-channel ranks
(`tiered_rrf_v2`) and applies `bounded_recency_v1`; conflict retention, truncation and hints
follow; ``passages`` cites each kept artifact hit by its matching passage. A question's frame
words (``question_frame``: "kind", "describe", "make") rank at a share of their IDF. The
`search` op returns unqualified candidates too; recall, context.build and probe use
``run_search(qualified_only=True)`` and the unqualified candidate partition it reports. The
dense channel (`local_dense_context_v3`, ``semantic``) joins as one more ``fusion.Channel``
where the local model is installed and the request leaves it on; the cross-encoder and cited
projections are not built: their status objects say so and they never contribute.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import msgspec

from memoree import limits
from memoree.errors import IndexNotReady, InvalidRequest
from memoree.eventlog.events import Scope
from memoree.inputs import SearchInput, check_limit, check_reason
from memoree.projections.embedding import model_status as embedding_status

from . import dense

from .analysis import POLICY_VERSION as LEXICAL_POLICY_VERSION
from .analysis import AnalyzedQuery, QueryAnalysis, QueryError, analyze_query, fts_phrase
from .candidates import (
    TABLES,
    Candidate,
    Horizon,
    Table,
    UnitMatches,
    horizon_of,
    lexical_candidates,
    match_units,
    parse_pins,
    qualify,
    table_horizon,
    unit_expressions,
    unit_idf,
    unit_membership,
)
from .fusion import CHANNELS, MAX_PROMOTION, WITH_SEMANTIC, _promote, apply_recency, fuse, qualification_rank
from .passages import CITATION_SPAN_LABEL, Passage, PassageScorer, attach_citations, claim_citation
from .question_frame import frame_weights
from memoree.projections.records import OwnerContext
from .semantic import DenseTable, add_dense_candidates, channel_ready, cite_dense_only, dense_passages, fully_covered
from .typo import fuzzy_qualify, typo_idf, typo_units

__all__ = [
    "MAX_PROMOTION",
    "Candidate",
    "Ranking",
    "ReadScope",
    "SearchHit",
    "SearchResult",
    "SearchRun",
    "analyze",
    "as_hit",
    "check_min_commit_seq",
    "claim_citation",
    "parse_pins",
    "qualification_rank",
    "read_snapshot",
    "run_search",
    "search",
]

TRIGRAM_POLICY_VERSION = "trigram_typo_v1"
FUSION_POLICY_VERSION = "tiered_rrf_v2"
RECENCY_POLICY_VERSION = "bounded_recency_v1"
CONFLICT_RETENTION_POLICY = "conflict_retention_v1"
SEMANTIC_POLICY_VERSION = "local_dense_context_v3"
RERANKER_POLICY_VERSION = "cross_encoder_ordering_v4"
PROJECTION_POLICY_VERSION = "cited_projection_candidate_v1"
BASE_RETRIEVAL_MODE = (
    f"sqlite_fts5_bm25+{LEXICAL_POLICY_VERSION}+{TRIGRAM_POLICY_VERSION}+{FUSION_POLICY_VERSION}"
)

MAX_CANDIDATE_PARTITION = 16
CANDIDATES_PER_LIMIT_SLOT = 8
DENSE_PER_LIMIT_SLOT = 2


REFINE_HINT = ("More matches exist than the limit of {limit}. Refine the query or explicitly raise "
               "limit up to 100.")
BROADEN_HINT = ("No ambient matches. Retry explicitly with horizon=workspace (and a reason) if "
                "broader precedent is needed.")
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
    idf: dict[str, list[float]] = field(default_factory=dict)
    passages: dict[str, list[Passage]] = field(default_factory=dict)
    scorer: PassageScorer | None = None
    semantic: SemanticChannel | None = None
    # Each table's unit match lists at the run's horizon and scope (``candidates.match_units``),
    # for a caller under the same scope that reads them again (``queries.admission``).
    matches: dict[str, UnitMatches] = field(default_factory=dict)


@dataclass
class TableRun:
    """One table's candidates and the horizon statistics they were ranked with."""

    candidates: list[Candidate]
    idf: list[float]
    corrections: dict[int, list[str]]
    filters: Any = None
    matches: UnitMatches | None = None


def table_candidates(scope: ReadScope, analysis: AnalyzedQuery, table: Table, horizon: Horizon,
                     include_historical: bool, candidate_limit: int,
                     expressions: Sequence[str] | None = None) -> TableRun:
    """Lexical candidates of one table, qualified; then typo candidates for units it lacks."""
    conn = scope.conn
    filters = table.filters(scope.ambient, scope.pins, scope.now, horizon.name, include_historical)
    horizon = table_horizon(conn, table.entity_type, horizon)
    matches = match_units(conn, table, horizon, analysis, scope.pins, expressions)
    idf = [unit_idf(matches.df(i), matches.doc_count) * share
           for i, share in enumerate(frame_weights(analysis.units))]
    pool: dict[tuple[str, str], Candidate] = {}
    for candidate, score in lexical_candidates(conn, table, filters, matches, idf, candidate_limit):
        candidate.lexical_candidate, candidate.lexical_score = True, score
        pool[candidate.key] = candidate
    typos = typo_units(conn, table, horizon, analysis, matches)
    fuzzy_idf = typo_idf(typos, matches.doc_count, idf)
    if typos:
        typo_lists = UnitMatches([list(t.docs) for t in typos], [False] * len(typos), matches.doc_count, [])
        weights = [fuzzy_idf[t.index] * t.similarity for t in typos]
        for fresh, _ in lexical_candidates(conn, table, filters, typo_lists, weights, candidate_limit):
            pool.setdefault(fresh.key, fresh)
    candidates = list(pool.values())
    membership = unit_membership(conn, table, analysis, matches, candidates)
    present = [bool(ids) for ids in matches.lists]
    for c in candidates:
        exact = [c.doc_id in found for found in membership]
        qualify(c, analysis, exact, idf, present)
        fuzzy_qualify(c, analysis, exact, typos, fuzzy_idf)
        c.typo_expressions = [(t.index, " OR ".join(fts_phrase(x.term) for x in t.corrections))
                              for t in typos if c.doc_id in t.docs]
    corrections = {t.index: [x.term for x in t.corrections] for t in typos}
    return TableRun(candidates, fuzzy_idf, corrections, filters, matches)


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
    every_passage: bool = False,
    min_artifacts: int = 0,
) -> SearchRun:
    """Run the §5 pipeline; ``qualified_only`` drops unqualified hits (recall/context/probe).

    ``with_candidates`` also cites and returns the unqualified candidate partition (probe and
    recall candidates); otherwise only its counts are reported. ``every_passage`` scores the
    passages of every matching chunk of each artifact hit (context.build packs them).
    ``min_artifacts``: the window holds at least that many artifacts where enough qualify, at
    most half of it (``with_artifact_floor``; context.build asks for a floor, search does not).
    """
    check_reason(reason)
    check_limit("limit", limit, limits.MAX_SEARCH_ITEMS)
    check_min_commit_seq(min_commit_seq, scope.head)
    analysis = analysis or analyze(query)
    tables = [TABLES[t] for t in ("artifact", "claim") if t in entity_types]
    scoped = horizon_of(scope.ambient, horizon)
    candidate_limit = (limit + 1) * CANDIDATES_PER_LIMIT_SLOT
    expressions = unit_expressions(scope.conn, scoped, analysis, scope.pins)
    runs = {t.entity_type: table_candidates(scope, analysis, t, scoped, include_historical,
                                            candidate_limit, expressions) for t in tables}
    ready = semantic and channel_ready(scope.conn, semantic)[0] == "ready"
    index = dense.snapshot(scope.conn) if ready else None
    channel = semantic_status(scope.head, scope.conn, requested=semantic, index=index)
    if index is not None:
        _run_dense(scope, index, query, analysis, runs, horizon, include_historical,
                   (limit + 1) * DENSE_PER_LIMIT_SLOT, leads=with_candidates or not qualified_only)
    pool = [c for run in runs.values() for c in run.candidates]
    ranked = apply_recency(fuse(pool, WITH_SEMANTIC if index is not None else CHANNELS),
                           recency, scope.now)
    unqualified = [c for c in ranked if not c.qualified]
    partition, partition_truncated = _candidate_partition(unqualified)
    if not with_candidates:
        partition = []
    window = [c for c in ranked if c.qualified] if qualified_only else ranked
    truncated = len(window) > limit
    window = _retain_conflicts(window, limit)
    window = with_artifact_floor(window, limit, min_artifacts)
    for position, c in enumerate(window, 1):
        c.final_position = position
    scorer = PassageScorer(analysis, _shared_idf(runs, analysis), _corrections(runs))
    cite_dense_only(scope.conn, window + partition)
    passages = attach_citations(scope.conn, analysis, window + partition, scorer, every_passage,
                                expressions)
    passages.update(dense_passages(window))
    return SearchRun(
        analysis=analysis, horizon=horizon, limit=limit, evaluated_at=scope.now,
        recency_enabled=recency, qualified_only=qualified_only,
        hits=[as_hit(c, analysis, scope.now, recency) for c in window], truncated=truncated,
        candidates=[as_hit(c, analysis, scope.now, recency) for c in partition],
        candidates_truncated=partition_truncated,
        unqualified_candidate_count=len(unqualified),
        best_unqualified_coverage=max((c.lexical_coverage for c in unqualified), default=None),
        current_commit_seq=scope.head,
        surface="mixed" if len(tables) == 2 else tables[0].entity_type,
        idf={name: run.idf for name, run in runs.items()}, passages=passages, scorer=scorer,
        semantic=channel,
        matches={name: run.matches for name, run in runs.items() if run.matches is not None},
    )


def _run_dense(scope: ReadScope, index: Any, query: str, analysis: AnalyzedQuery, runs: dict[str, TableRun],
               horizon: str, include_historical: bool, wanted: int, leads: bool) -> None:
    """The dense channel, for the tables whose words did not already answer every unit."""
    tables = {name: DenseTable(TABLES[name], run.filters, run.candidates, run.matches)
              for name, run in runs.items()}
    wanted_tables = [t for t in tables.values() if not fully_covered(t.pool)]
    if not wanted_tables:
        return
    query_vector = dense.embed_query(query)
    if query_vector is None:
        return
    def table(name: str) -> DenseTable:
        return tables.get(name) or DenseTable(
            TABLES[name], TABLES[name].filters(scope.ambient, scope.pins, scope.now, horizon,
                                               include_historical), [])

    add_dense_candidates(scope.conn, index, query, analysis, query_vector, wanted_tables,
                         table("claim"), table("artifact"), wanted, leads)


def _shared_idf(runs: dict[str, TableRun], analysis: AnalyzedQuery) -> list[float]:
    """One IDF per unit for scoring passages and claims on one scale: the tables' mean."""
    columns = [run.idf for run in runs.values()]
    return [sum(values) / len(values) for values in zip(*columns)] if columns else []


def _corrections(runs: dict[str, TableRun]) -> dict[int, list[str]]:
    merged: dict[int, list[str]] = {}
    for run in runs.values():
        for index, terms in run.corrections.items():
            merged.setdefault(index, [])
            merged[index] += [t for t in terms if t not in merged[index]]
    return merged


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


def with_artifact_floor(ranked: list[Candidate], limit: int, floor: int) -> list[Candidate]:
    """The first ``limit`` of ``ranked``, where the next artifacts beyond them take the places of
    the lowest claims until the window holds ``floor`` artifacts, at most half of it (or no
    claim can give way).

    For a bundle: claims are short and often match a question's words better than any session
    does, so ten of them can fill a window whose one session shows little; a second session
    brings lines no claim restates (measured on LoCoMo: multi-hop and temporal gain), and a claim
    that gave way can still compete as one admitted from beyond the window
    (``queries.admission``). A claim in the exact tier or kept for its conflict never gives way.
    """
    window, rest = list(ranked[:limit]), ranked[limit:]
    missing = min(floor, limit // 2) - sum(1 for c in window if c.entity_type == "artifact")
    if missing <= 0:
        return window
    for artifact in [c for c in rest if c.entity_type == "artifact"][:missing]:
        yielding = [i for i, c in enumerate(window) if c.entity_type == "claim" and not c.exact_tier
                    and c.status != "conflicted" and not c.retained_for_conflict]
        if not yielding:
            break
        del window[yielding[-1]]
        window.append(artifact)
    return window


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


def as_hit(c: Candidate, analysis: AnalyzedQuery, now: str, recency: bool) -> SearchHit:
    """A candidate as the search hit it answers with: its ranking explained, its matched_by."""
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


def semantic_status(head: int, conn: Any = None, *, requested: bool = True,
                    index: Any = None) -> SemanticChannel:
    """The dense channel's state for one request (``conn``: the store; without it, disabled;
    ``index``: the in-memory vectors this request reads, when it already holds them)."""
    model = embedding_status()
    state, reason = channel_ready(conn, requested) if conn is not None else ("disabled", model.reason)
    ready = state == "ready"
    eligible = dense.eligible_revisions(conn) if ready else 0
    indexed = sum(dense.index_stats(index or dense.snapshot(conn))) if ready else 0
    return SemanticChannel(
        state=state, policy_version=SEMANTIC_POLICY_VERSION,
        model_id=model.model_id if model.available else None,
        model_revision=model.revision if model.available else None,
        indexed_commit_seq=head if ready else 0, current_commit_seq=head,
        eligible_revision_count=eligible, indexed_revision_count=indexed,
        coverage=round(indexed / eligible, 6) if eligible else (1.0 if ready else 0.0),
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
