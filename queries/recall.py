"""``memory.recall`` (protocol §6.1): a claim-first presence read with exact evidence.

This module owns how two independent qualified searches (claims, then artifacts, so they never
compete for slots) become an honest answer: which claims are kept (duplicates and near-duplicates
collapse, at most two per source artifact before back-fill), whether each is current or
disputed, the evidence each cites (with a bounded UTF-8 preview for the first few locators), the
artifact references with a term-centred excerpt whose bytes are cited exactly, the open conflicts
among the kept claims, and the unqualified candidates only when asked for. Presence is decided by
qualified results alone. There is no historical mode and no automatic broadening.

It also owns ``open_conflicts``, the "open conflicts for these claims" read that context.build
shares: open cases whose frozen revisions are both still current, visible at the horizon.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from memoree import limits
from memoree.errors import IntegrityError
from memoree.eventlog.events import Scope
from memoree.inputs import RecallInput, check_limit
from memoree.projections.chunker import matched_window, span_citation
from memoree.projections.text import truncate_utf8

from .analysis import STOPWORDS, AnalyzedQuery, QueryAnalysis
from memoree.projections.records import TextContent, content_for_output
from .risk import hit_risk_signals
from .search import (
    ReadScope,
    RerankerChannel,
    SearchHit,
    SearchRun,
    SemanticChannel,
    analyze,
    check_min_commit_seq,
    read_snapshot,
    reranker_status,
    run_search,
    run_semantic,
)

__all__ = [
    "ConflictSummary",
    "RecallResult",
    "assemble_recall",
    "check_recall_bounds",
    "excerpt_terms",
    "evidence_citation",
    "open_conflicts",
    "recall",
    "recall_searches",
]

MAX_CLAIM_SLATE = 10
CLAIM_SLATE_FACTOR = 4
MAX_CLAIMS_PER_SOURCE = 2
NEAR_DUPLICATE_MIN_TOKENS = 4
NEAR_DUPLICATE_JACCARD = 0.8
NEGATIONS = frozenset({"no", "not", "never", "without", "cannot", "disallowed"})
CANDIDATES_HINT = "Unqualified leads exist; run `memoree probe` explicitly to inspect a compact list."
CLAIMS_REFINE_HINT = ("More qualified claims exist than max_claims={n}. Refine the query or "
                      f"explicitly raise max_claims up to {limits.MAX_RECALL_CLAIMS}.")
ARTIFACTS_REFINE_HINT = ("More qualified artifacts exist than max_artifact_refs={n}. Refine the query "
                         f"or explicitly raise max_artifact_refs up to {limits.MAX_RECALL_ARTIFACT_REFS}.")
_TOKEN = re.compile(r"\w+")


class ConflictSummary(msgspec.Struct, kw_only=True):
    left_id: str
    right_id: str
    relation_id: str


class RecallEvidenceReference(msgspec.Struct, kw_only=True, omit_defaults=True):
    artifact_id: str
    revision_id: str
    citation: str
    start_byte: int | None = None
    end_byte: int | None = None
    title: str
    media_type: str
    excerpt: str | None = None
    excerpt_truncated: bool


class RecallClaim(msgspec.Struct, kw_only=True):
    claim_id: str
    revision_id: str
    claim_type: str
    status: str
    statement: str
    citation: str
    evidence: list[RecallEvidenceReference]
    conflict_relation_ids: list[str]
    score: float
    matched_by: list[str]


class RecallArtifactReference(msgspec.Struct, kw_only=True, omit_defaults=True):
    artifact_id: str
    revision_id: str
    citation: str
    title: str
    status: str
    excerpt: str
    excerpt_truncated: bool
    excerpt_citation: str | None = None
    score: float
    matched_by: list[str]
    risk_signals: list[str]


class RankingSignals(msgspec.Struct, kw_only=True, omit_defaults=True):
    lexical_coverage: float
    trigram_similarity: float | None = None
    semantic_similarity: float | None = None


class RecallCandidateClaim(msgspec.Struct, kw_only=True):
    retrieval_tier: str
    claim_id: str
    revision_id: str
    claim_type: str
    statement: str
    statement_truncated: bool
    citation: str
    matched_by: list[str]
    ranking_signals: RankingSignals


class RecallCandidateArtifactReference(msgspec.Struct, kw_only=True, omit_defaults=True):
    retrieval_tier: str
    artifact_id: str
    revision_id: str
    title: str
    citation: str
    excerpt: str
    excerpt_truncated: bool
    excerpt_citation: str | None = None
    matched_by: list[str]
    risk_signals: list[str]
    ranking_signals: RankingSignals


class RecallResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    content_is_untrusted: bool
    query: str
    query_analysis: QueryAnalysis
    searched_horizons: list[str]
    semantic_claims: SemanticChannel
    semantic_artifacts: SemanticChannel
    reranker_claims: RerankerChannel
    reranker_artifacts: RerankerChannel
    presence: str
    claims: list[RecallClaim]
    conflicts: list[ConflictSummary]
    artifact_refs: list[RecallArtifactReference]
    candidate_claims: list[RecallCandidateClaim]
    candidate_artifact_refs: list[RecallCandidateArtifactReference]
    candidate_claims_truncated: bool
    candidate_artifact_refs_truncated: bool
    candidates_hint: str | None = None
    unqualified_claim_candidates: int
    unqualified_artifact_candidates: int
    best_unqualified_claim_coverage: float | None = None
    best_unqualified_artifact_coverage: float | None = None
    claims_truncated: bool
    artifact_refs_truncated: bool
    claims_refine_hint: str | None = None
    artifact_refs_refine_hint: str | None = None


# ---------------------------------------------------------------------------------------------
# Open conflicts (§4 "open conflicts for these claims")


def _table_exists(conn: Any, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (name,)).fetchone() is not None


def _relation_visibility(ambient: Scope, horizon: str) -> tuple[str, tuple[Any, ...]]:
    if horizon == "personal":
        return "", ()
    if horizon == "workspace":
        return " AND r.workspace_id = ?", (ambient.workspace_id,)
    return (" AND r.workspace_id = ? AND r.project_id = ? "
            "AND (? IS NULL OR r.task_id IS NULL OR r.task_id = ?)",
            (ambient.workspace_id, ambient.project_id, ambient.task_id, ambient.task_id))


def open_conflicts(conn: Any, claim_ids: Iterable[str], ambient: Scope,
                   horizon: str) -> tuple[list[ConflictSummary], dict[str, list[str]]]:
    """Open cases over current revisions touching ``claim_ids``, claim by claim, deduplicated.

    Returns the summaries and, per claim, the relation ids of its open conflicts. A store without
    the conflicts projection reports none.
    """
    if not (_table_exists(conn, "conflict_cases") and _table_exists(conn, "relations")):
        return [], {}
    visibility, params = _relation_visibility(ambient, horizon)
    summaries: list[ConflictSummary] = []
    seen_cases: set[str] = set()
    by_claim: dict[str, list[str]] = {}
    for claim_id in claim_ids:
        rows = conn.execute(
            "SELECT cc.case_id, r.id, r.source_id, r.target_id FROM conflict_cases cc "
            "JOIN relations r ON r.id = cc.relation_id "
            "JOIN claims s ON s.id = cc.source_claim_id AND s.current_revision_id = cc.source_revision_id "
            "JOIN claims t ON t.id = cc.target_claim_id AND t.current_revision_id = cc.target_revision_id "
            "WHERE cc.state = 'open' AND (cc.source_claim_id = ? OR cc.target_claim_id = ?)"
            f"{visibility} ORDER BY r.relation_commit_seq, cc.case_sequence",
            (claim_id, claim_id, *params),
        ).fetchall()
        for case_id, relation_id, source_id, target_id in rows:
            by_claim.setdefault(claim_id, []).append(relation_id)
            if case_id not in seen_cases:
                seen_cases.add(case_id)
                summaries.append(ConflictSummary(left_id=source_id, right_id=target_id,
                                                 relation_id=relation_id))
    return summaries, {claim: sorted(set(ids)) for claim, ids in by_claim.items()}


# ---------------------------------------------------------------------------------------------
# Claim window selection (§6.1 step 3)


def _normalized_statement(statement: str) -> str:
    return " ".join(statement.lower().split())


def _content_tokens(statement: str) -> frozenset[str]:
    return frozenset(t for t in _TOKEN.findall(statement.lower()) if t not in STOPWORDS)


def _distinctive_values(tokens: frozenset[str]) -> frozenset[str]:
    return frozenset(t for t in tokens
                     if "_" in t or any(ch.isdigit() for ch in t) or t in NEGATIONS)


def _near_duplicate(tokens: frozenset[str], values: frozenset[str],
                    kept: tuple[frozenset[str], frozenset[str]]) -> bool:
    """Whether ``tokens`` (whose distinctive values are ``values``) nearly repeat a kept
    claim's (tokens, distinctive values)."""
    if len(tokens) < NEAR_DUPLICATE_MIN_TOKENS:
        return False
    kept_tokens, kept_values = kept
    if values != kept_values:
        return False
    union = tokens | kept_tokens
    return bool(union) and len(tokens & kept_tokens) / len(union) >= NEAR_DUPLICATE_JACCARD


def collapse_duplicates(hits: Sequence[SearchHit], exempt: set[str]) -> list[SearchHit]:
    """Drop exact and near duplicates of earlier claims, never conflict endpoints (each
    claim's tokens and distinctive values are taken once, not once per pair)."""
    kept: list[SearchHit] = []
    seen_statements: set[str] = set()
    kept_tokens: list[tuple[frozenset[str], frozenset[str]]] = []
    for hit in hits:
        normalized = _normalized_statement(hit.excerpt)
        tokens = _content_tokens(hit.excerpt)
        values = _distinctive_values(tokens)
        if hit.entity_id not in exempt:
            if normalized in seen_statements:
                continue
            if any(_near_duplicate(tokens, values, other) for other in kept_tokens):
                continue
        kept.append(hit)
        seen_statements.add(normalized)
        kept_tokens.append((tokens, values))
    return kept


def _source_of(hit: SearchHit) -> str:
    evidence = hit.provenance.get("evidence") or []
    return evidence[0]["artifact_id"] if evidence else hit.entity_id


def claim_window(distinct: Sequence[SearchHit], max_claims: int) -> list[SearchHit]:
    """At most ``max_claims`` in rank order, ≤2 per source artifact before back-filling."""
    if len(distinct) <= max_claims:
        return list(distinct)
    chosen: list[int] = []
    per_source: dict[str, int] = {}
    deferred: list[int] = []
    for index, hit in enumerate(distinct):
        source = _source_of(hit)
        if len(chosen) < max_claims and per_source.get(source, 0) < MAX_CLAIMS_PER_SOURCE:
            chosen.append(index)
            per_source[source] = per_source.get(source, 0) + 1
        else:
            deferred.append(index)
    chosen += deferred[: max_claims - len(chosen)]
    return [distinct[i] for i in sorted(chosen)]


# ---------------------------------------------------------------------------------------------
# Evidence and excerpts


def evidence_citation(locator: dict[str, Any]) -> str:
    span = None
    if locator.get("start_byte") is not None and locator.get("end_byte") is not None:
        span = (locator["start_byte"], locator["end_byte"])
    return span_citation(locator["artifact_id"], locator["revision_id"], span)


def _revision_facts(conn: Any, revision_id: str) -> tuple[str, str, str, int] | None:
    return conn.execute(
        "SELECT title, media_type, blob_hash, size_bytes FROM artifact_revisions WHERE id = ?",
        (revision_id,),
    ).fetchone()


def _evidence_excerpt(scope: ReadScope, media_type: str, blob_hash: str, size: int,
                      locator: dict[str, Any], max_bytes: int) -> tuple[str | None, bool]:
    """The cited bytes as text (bounded), or None for non-text content or a split code point."""
    if scope.cas is None:
        return None, False
    try:
        data = scope.cas.get(blob_hash, size)
    except IntegrityError:
        return None, False
    start, end = locator.get("start_byte"), locator.get("end_byte")
    cited = data if start is None or end is None else data[start:end]
    if not isinstance(content_for_output(media_type, cited), TextContent):
        return None, False
    return truncate_utf8(cited.decode("utf-8"), max_bytes)


def evidence_references(scope: ReadScope, locators: Sequence[dict[str, Any]],
                        max_excerpt_bytes: int) -> list[RecallEvidenceReference]:
    references = []
    for index, locator in enumerate(locators):
        facts = _revision_facts(scope.conn, locator["revision_id"])
        if facts is None:
            continue
        title, media_type, blob_hash, size = facts
        excerpt, truncated = None, False
        if index < limits.MAX_RECALL_EVIDENCE_EXCERPTS_PER_CLAIM:
            excerpt, truncated = _evidence_excerpt(scope, media_type, blob_hash, size, locator,
                                                   max_excerpt_bytes)
        references.append(RecallEvidenceReference(
            artifact_id=locator["artifact_id"], revision_id=locator["revision_id"],
            citation=evidence_citation(locator), start_byte=locator.get("start_byte"),
            end_byte=locator.get("end_byte"), title=title, media_type=media_type,
            excerpt=excerpt, excerpt_truncated=truncated,
        ))
    return references


def excerpt_terms(analysis: AnalyzedQuery, hit: SearchHit) -> list[tuple[str, ...]]:
    """The spellings to centre an excerpt on: matched units' variants and typo-matched words."""
    matched = set(hit.ranking.matched_terms) | set(hit.ranking.matched_phrase_groups)
    terms = [unit.variants for unit in analysis.units if unit.display in matched]
    terms += [(word,) for word in hit.ranking.trigram_matched_terms]
    return terms or [unit.variants for unit in analysis.units]


def windowed_excerpt(analysis: AnalyzedQuery, hit: SearchHit,
                     max_bytes: int) -> tuple[str, bool, str | None]:
    """(excerpt, truncated, excerpt_citation) for an artifact hit's matched window."""
    window = matched_window(hit.excerpt, excerpt_terms(analysis, hit), max_bytes)
    span = hit.provenance.get("retrieval_span")
    citation = None
    if window.truncated and span is not None:
        citation = span_citation(hit.entity_id, hit.revision_id, window.shifted(span["start_byte"]))
    return window.text, window.truncated, citation


# ---------------------------------------------------------------------------------------------
# The op


def check_recall_bounds(inp: RecallInput) -> None:
    check_limit("max_claims", inp.max_claims, limits.MAX_RECALL_CLAIMS)
    check_limit("max_artifact_refs", inp.max_artifact_refs, limits.MAX_RECALL_ARTIFACT_REFS)
    check_limit("max_excerpt_bytes", inp.max_excerpt_bytes, limits.MAX_RECALL_EXCERPT_BYTES)
    check_limit("max_candidate_claims", inp.max_candidate_claims,
                limits.MAX_RECALL_CANDIDATE_CLAIMS, minimum=0)
    check_limit("max_candidate_artifact_refs", inp.max_candidate_artifact_refs,
                limits.MAX_RECALL_CANDIDATE_ARTIFACT_REFS, minimum=0)


def recall_searches(scope: ReadScope, inp: Any) -> tuple[SearchRun, SearchRun]:
    """The two independent qualified searches recall is built from (claims, then artifacts)."""
    check_min_commit_seq(inp.min_commit_seq, scope.head)
    analysis = analyze(inp.query)
    common = dict(query=inp.query, horizon=inp.horizon, reason=inp.reason,
                  min_commit_seq=inp.min_commit_seq, recency=inp.recency.enabled,
                  qualified_only=True, analysis=analysis, semantic=inp.semantic.enabled)
    claims = run_search(scope, limit=min(inp.max_claims * CLAIM_SLATE_FACTOR, MAX_CLAIM_SLATE),
                        entity_types=frozenset({"claim"}),
                        with_candidates=inp.max_candidate_claims > 0, **common)
    artifacts = run_search(scope, limit=inp.max_artifact_refs, entity_types=frozenset({"artifact"}),
                           with_candidates=inp.max_candidate_artifact_refs > 0, **common)
    return claims, artifacts


def recall(scope: ReadScope, inp: RecallInput) -> RecallResult:
    check_recall_bounds(inp)
    with read_snapshot(scope.conn):
        claim_run, artifact_run = recall_searches(scope, inp)
        return assemble_recall(scope, inp, claim_run, artifact_run)


def assemble_recall(scope: ReadScope, inp: RecallInput, claim_run: SearchRun,
                    artifact_run: SearchRun) -> RecallResult:
    """The recall answer from its two searches (shared with memory.retrieve)."""
    analysis = claim_run.analysis
    slate_conflicts, _ = open_conflicts(scope.conn, [h.entity_id for h in claim_run.hits],
                                        scope.ambient, inp.horizon)
    endpoints = {c.left_id for c in slate_conflicts} | {c.right_id for c in slate_conflicts}
    distinct = collapse_duplicates(claim_run.hits, endpoints)
    kept = claim_window(distinct, inp.max_claims)
    conflicts, relation_ids = open_conflicts(scope.conn, [h.entity_id for h in kept],
                                             scope.ambient, inp.horizon)
    claims = [_recall_claim(scope, hit, relation_ids.get(hit.entity_id, []), inp.max_excerpt_bytes)
              for hit in kept]
    artifact_refs = [_artifact_reference(analysis, hit, inp.max_excerpt_bytes)
                     for hit in artifact_run.hits]
    candidate_claims = [_candidate_claim(hit, inp.max_excerpt_bytes)
                        for hit in claim_run.candidates[: inp.max_candidate_claims]]
    candidate_artifacts = [_candidate_artifact(analysis, hit, inp.max_excerpt_bytes)
                           for hit in artifact_run.candidates[: inp.max_candidate_artifact_refs]]
    claims_truncated = claim_run.truncated or len(distinct) > inp.max_claims
    presence = "claims" if claims else "artifacts_only" if artifact_refs else "none"
    any_candidates = claim_run.unqualified_candidate_count + artifact_run.unqualified_candidate_count
    return RecallResult(
        content_is_untrusted=True, query=inp.query, query_analysis=analysis.analysis, searched_horizons=[inp.horizon],
        semantic_claims=run_semantic(claim_run), semantic_artifacts=run_semantic(artifact_run),
        reranker_claims=reranker_status("claim", len(claim_run.hits)),
        reranker_artifacts=reranker_status("artifact", len(artifact_run.hits)),
        presence=presence, claims=claims, conflicts=conflicts, artifact_refs=artifact_refs,
        candidate_claims=candidate_claims, candidate_artifact_refs=candidate_artifacts,
        candidate_claims_truncated=_candidates_truncated(claim_run, inp.max_candidate_claims),
        candidate_artifact_refs_truncated=_candidates_truncated(
            artifact_run, inp.max_candidate_artifact_refs),
        candidates_hint=CANDIDATES_HINT if any_candidates else None,
        unqualified_claim_candidates=claim_run.unqualified_candidate_count,
        unqualified_artifact_candidates=artifact_run.unqualified_candidate_count,
        best_unqualified_claim_coverage=claim_run.best_unqualified_coverage,
        best_unqualified_artifact_coverage=artifact_run.best_unqualified_coverage,
        claims_truncated=claims_truncated, artifact_refs_truncated=artifact_run.truncated,
        claims_refine_hint=CLAIMS_REFINE_HINT.format(n=inp.max_claims) if claims_truncated else None,
        artifact_refs_refine_hint=(ARTIFACTS_REFINE_HINT.format(n=inp.max_artifact_refs)
                                   if artifact_run.truncated else None),
    )


def _candidates_truncated(run: SearchRun, asked: int) -> bool:
    return asked > 0 and (len(run.candidates) > asked or run.candidates_truncated)


def _recall_claim(scope: ReadScope, hit: SearchHit, relation_ids: list[str],
                  max_excerpt_bytes: int) -> RecallClaim:
    disputed = hit.status == "conflicted" or bool(relation_ids)
    return RecallClaim(
        claim_id=hit.entity_id, revision_id=hit.revision_id, claim_type=hit.provenance["claim_type"],
        status="disputed" if disputed else "current", statement=hit.excerpt, citation=hit.citation,
        evidence=evidence_references(scope, hit.provenance.get("evidence") or [], max_excerpt_bytes),
        conflict_relation_ids=relation_ids, score=hit.score, matched_by=hit.matched_by,
    )


def _artifact_reference(analysis: AnalyzedQuery, hit: SearchHit,
                        max_bytes: int) -> RecallArtifactReference:
    excerpt, truncated, excerpt_citation = windowed_excerpt(analysis, hit, max_bytes)
    return RecallArtifactReference(
        artifact_id=hit.entity_id, revision_id=hit.revision_id, citation=hit.citation,
        title=hit.title, status=hit.status, excerpt=excerpt, excerpt_truncated=truncated,
        excerpt_citation=excerpt_citation, score=hit.score, matched_by=hit.matched_by,
        risk_signals=hit_risk_signals(hit.title, hit.excerpt),
    )


def _signals(hit: SearchHit) -> RankingSignals:
    return RankingSignals(lexical_coverage=hit.ranking.lexical_coverage,
                          trigram_similarity=hit.ranking.trigram_similarity,
                          semantic_similarity=hit.ranking.semantic_similarity)


def _candidate_claim(hit: SearchHit, max_bytes: int) -> RecallCandidateClaim:
    statement, truncated = truncate_utf8(hit.excerpt, max_bytes)
    return RecallCandidateClaim(
        retrieval_tier="unqualified_candidate", claim_id=hit.entity_id, revision_id=hit.revision_id,
        claim_type=hit.provenance["claim_type"], statement=statement, statement_truncated=truncated,
        citation=hit.citation, matched_by=hit.matched_by, ranking_signals=_signals(hit),
    )


def _candidate_artifact(analysis: AnalyzedQuery, hit: SearchHit,
                        max_bytes: int) -> RecallCandidateArtifactReference:
    excerpt, truncated, excerpt_citation = windowed_excerpt(analysis, hit, max_bytes)
    return RecallCandidateArtifactReference(
        retrieval_tier="unqualified_candidate", artifact_id=hit.entity_id,
        revision_id=hit.revision_id, title=hit.title, citation=hit.citation, excerpt=excerpt,
        excerpt_truncated=truncated, excerpt_citation=excerpt_citation, matched_by=hit.matched_by,
        risk_signals=hit_risk_signals(hit.title, hit.excerpt), ranking_signals=_signals(hit),
    )
