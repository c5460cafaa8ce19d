"""The dense channel inside one search: which visible items it adds, and which qualify by meaning.

This module owns the join between the nearest vectors (``queries.dense``) and the search
pipeline's candidates (``queries.candidates``): the nearest documents of a table that the
request's own filters (horizon, currentness, pins) let it see become candidates carrying their
similarity and, for an artifact, the passage that matched; their lexical units are checked like
any other candidate's, so fusion and qualification treat them alike. Acceptance by meaning follows
``queries.dense`` (a claim as the clear nearest visible claim or a near restatement, not when it
is near only through a word it shares with the query, exactly or by the typo channel's fuzzy
match), plus the two channels' agreement: a near
claim whose cited source qualifies by its words; the sources a qualifying near claim cites (they
join as candidates even when other documents are nearer); the artifact both channels put first;
and, where none of that and no claim's words qualify, the claim the question's own words point
to word by word (``queries.soft_match``, over its statement and the evidence this request sees)
when a second channel (the whole question's nearest claim, or the lexical first) agrees.
Anything else the channel finds is an unqualified lead. A dense-only artifact hit cites the exact
passage whose meaning matched (or the span its claim quotes).

The channel runs only for a table where no lexical hit already covers every query unit (then
meaning cannot add an answer words did not give), and only where the request leaves it on and
the store's vectors were built with the loaded model (``semantic_status``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memoree.projections.chunker import CHUNKER_VERSION, span_citation
from memoree.projections.embedding import model_status

from . import dense, soft_match
from .analysis import AnalyzedQuery
from .candidates import (
    TABLES,
    Candidate,
    Filters,
    Table,
    UnitMatches,
    docs_matching,
    qualify,
    unit_membership,
    visible_rows,
)
from .passages import Passage, chunk_bytes

__all__ = ["DenseTable", "add_dense_candidates", "cite_dense_only", "dense_passages", "fully_covered",
           "visible_revisions"]

CLAIM_POOL_FLOOR = 16
VOUCHED_MEMO = 16
# (analysis, evidence) of recent claim judgements: recall and probe search claims, then
# artifacts, with one analysis; the artifact search reuses what the claim search judged.
_VOUCHED: dict[tuple[Any, ...], tuple[Any, list[dict[str, Any]]]] = {}
_MEMO_LOCK = threading.Lock()
FIRST_ASK_FACTOR = 2
# The soft term match's lead over the next judged claim: the clear-nearest margin of
# ``queries.dense`` (CLAIM_ACCEPT_MARGIN), on the words' scale instead of the whole text's.
SOFT_ACCEPT_MARGIN = dense.CLAIM_ACCEPT_MARGIN
EVIDENCE_REFS = 4
EVIDENCE_TEXT_BYTES = 2048


@dataclass
class DenseTable:
    """One table the channel may add to: its filters, the candidates found so far and (when the
    lexical side computed them) its per-unit match lists."""

    table: Table
    filters: Filters
    pool: list[Candidate]
    matches: UnitMatches | None = None


def fully_covered(candidates: Sequence[Candidate]) -> bool:
    """Whether some lexical hit already matches every unit (the channel then stays out)."""
    return any(c.lexical_qualified and c.lexical_coverage == 1.0 for c in candidates)


def _membership(conn: Any, table: Table, analysis: AnalyzedQuery, matches: UnitMatches | None,
                fresh: Sequence[Candidate]) -> None:
    """Lexical units of candidates only the channel found: from the table's match lists where
    the lexical side read them, else one bounded lookup per unit."""
    if not fresh:
        return
    if matches is not None:
        found = unit_membership(conn, table, analysis, matches, fresh)
    else:
        doc_ids = [c.doc_id for c in fresh]
        found = [docs_matching(conn, table.word_index, f"{{{table.text_columns}}} : ({unit.fts_expression})",
                               doc_ids) for unit in analysis.units]
    for c in fresh:
        qualify(c, analysis, [c.doc_id in ids for ids in found])


def _nearest_visible(conn: Any, index: Any, target: DenseTable, analysis: AnalyzedQuery,
                     query_vector: Any, known: dict[tuple[str, str], Candidate],
                     wanted: int, floor: float = 0.0,
                     nearest_floor: float = dense.MIN_CANDIDATE_COSINE,
                     check_words: bool = True) -> list[tuple[Candidate, dense.DenseHit]]:
    """The ``wanted`` nearest documents (at least ``nearest_floor`` near) the filters let this
    request see, nearest first; a document already a candidate is returned as that candidate.
    ``check_words=False``: the new ones' lexical units are not looked up (they are only judged)."""
    # Documents already in the pool passed the filters; only the others need the owner join.
    pooled = {c.doc_id: c for c in target.pool}
    asked = wanted * FIRST_ASK_FACTOR
    while True:
        hits = dense.dense_hits(index, target.table.entity_type, query_vector, asked, nearest_floor)
        by_doc = {hit.doc_id: hit for hit in hits}
        joined = {c.doc_id: c for c in visible_rows(conn, target.table, target.filters,
                                                     [d for d in by_doc if d not in pooled], wanted)}
        found = [pooled.get(d) or joined[d] for d in by_doc if d in pooled or d in joined][:wanted]
        # Most near documents are usually visible; ask for more only when too few were.
        if len(found) >= wanted or len(hits) < asked or asked >= wanted * dense.VISIBILITY_SLICES:
            break
        asked *= 2
    chosen = [(known.get(c.key, c), by_doc[c.doc_id]) for c in found]
    if not check_words:
        return chosen
    # Without the table's match lists each unit costs a lookup: check only those near enough
    # (``floor``) for their words to matter to acceptance.
    _membership(conn, target.table, analysis, target.matches,
                [c for c, hit in chosen if c.key not in known
                 and (target.matches is not None or hit.similarity >= floor)])
    return chosen


def add_dense_candidates(conn: Any, index: Any, query: str, analysis: AnalyzedQuery,
                         query_vector: Any, tables: Sequence[DenseTable], claims_table: DenseTable,
                         sources_table: DenseTable, wanted: int, leads: bool = True) -> None:
    """Add the nearest visible items by meaning to each table's pool and decide which qualify.

    Claims are always scored, even for an artifacts-only search. A claim qualifies by meaning as
    ``queries.dense`` says, or when it is near (at least ``CLAIM_ACCEPT_COSINE``) and a visible
    source it cites qualifies by its words: the two channels agree on it. An artifact qualifies
    by meaning as the cited evidence of a near claim that qualifies (by meaning or by words)
    while itself at least the candidate floor near, or as the first artifact of both channels.
    Without ``leads`` (a search that keeps qualified hits only) artifacts are scanned only when
    one of those can happen.
    """
    by_type = {t.table.entity_type: t for t in tables}
    known = {c.key: c for t in tables for c in t.pool}
    memo_key = (id(analysis), id(conn), claims_table.filters, index.key, index.claims.count)
    with _MEMO_LOCK:
        remembered = _VOUCHED.get(memo_key)
    if "claim" not in by_type and remembered is not None and remembered[0] is analysis:
        evidence = remembered[1]  # this request's claim search already judged the claims
    else:
        evidence = _judge_claims(conn, index, query, analysis, query_vector, by_type, claims_table,
                                 sources_table, known, wanted)
        with _MEMO_LOCK:
            _VOUCHED[memo_key] = (analysis, evidence)
            while len(_VOUCHED) > VOUCHED_MEMO:
                _VOUCHED.pop(next(iter(_VOUCHED)))
    vouched = {ref.get("artifact_id") for ref in evidence}
    target = by_type.get("artifact")
    first_by_words = _first_by_words(target.pool) if target else None
    if target and (leads or vouched or first_by_words is not None):
        artifacts = _nearest_visible(conn, index, target, analysis, query_vector, known, wanted)
        agreed = _agreed_artifact(query, artifacts, first_by_words)
        near = {c.entity_id for c, _ in artifacts}
        artifacts += _evidence_sources(conn, index, target, analysis, query_vector, known,
                                       [ref for ref in evidence if ref.get("artifact_id") not in near])
        _mark(target.pool, known, [(c, hit, c.entity_id in vouched or c is agreed) for c, hit in artifacts])


def _judge_claims(conn: Any, index: Any, query: str, analysis: AnalyzedQuery, query_vector: Any,
                  by_type: dict[str, DenseTable], claims_table: DenseTable, sources_table: DenseTable,
                  known: dict[tuple[str, str], Candidate], wanted: int) -> list[dict[str, Any]]:
    """Decide which near claims qualify, by meaning or by agreement (marking them into the claim
    pool when this search covers claims); return the evidence the qualifying near claims cite."""
    claims = _nearest_visible(conn, index, claims_table, analysis, query_vector, known,
                              max(wanted, CLAIM_POOL_FLOOR), dense.CLAIM_ACCEPT_COSINE)
    similarities = [hit.similarity for _, hit in claims]
    accepted = [dense.claim_accepted(similarities, i)
                and dense.unmatched_similarity(query, _shared_words(c), hit) >= dense.UNMATCHED_MIN_COSINE
                for i, (c, hit) in enumerate(claims)]
    sourced = _cites_an_answering_source(conn, analysis, sources_table,
                                         [c for (c, hit), ok in zip(claims, accepted)
                                          if not ok and not c.qualified
                                          and hit.similarity >= dense.CLAIM_ACCEPT_COSINE])
    accepted = [ok or c.key in sourced for (c, _), ok in zip(claims, accepted)]
    if claims and not any(accepted) and not _answered_by_words(claims, by_type):
        chosen = _soft_choice(conn, index, query, analysis, query_vector, claims_table, sources_table, claims,
                              known, _first_by_words(by_type["claim"].pool) if "claim" in by_type else None)
        accepted = [ok or c is chosen for (c, _), ok in zip(claims, accepted)]
    if "claim" in by_type:
        _mark(by_type["claim"].pool, known, [(c, hit, ok) for (c, hit), ok in zip(claims, accepted)][:wanted])
    # A near claim that qualifies, by meaning or by its words, vouches for the sources it cites.
    return [ref for (c, hit), ok in zip(claims, accepted)
            if ok or (hit.similarity >= dense.CLAIM_ACCEPT_COSINE and c.qualified) for ref in c.evidence]


def _answered_by_words(claims: Sequence[tuple[Candidate, dense.DenseHit]],
                       by_type: dict[str, DenseTable]) -> bool:
    """Whether some claim already qualifies by its words (then words, not meaning, answer)."""
    pool = by_type["claim"].pool if "claim" in by_type else []
    return any(c.qualified for c in pool) or any(c.qualified for c, _ in claims)


def _soft_choice(conn: Any, index: Any, query: str, analysis: AnalyzedQuery, query_vector: Any,
                 claims_table: DenseTable, sources_table: DenseTable,
                 near: Sequence[tuple[Candidate, dense.DenseHit]], known: dict[tuple[str, str], Candidate],
                 first_by_words: Candidate | None) -> Candidate | None:
    """The near claim that the question's own words point to (``queries.soft_match``), when a
    second channel agrees: first by soft term match over the judged claims, ahead of the next by
    ``SOFT_ACCEPT_MARGIN``, and also the nearest claim by the whole question's meaning or the
    lexical channel's first claim. The judged claims are the near ones, made up to
    ``CLAIM_POOL_FLOOR`` with the nearest below the candidate floor (a small store's margins
    are then taken against as many claims as a large one's), plus the lexical first."""
    terms = soft_match.query_terms(query)
    if terms is None:
        return None
    judged = [c for c, _ in near]
    if len(judged) < CLAIM_POOL_FLOOR:
        seen = {c.key for c in judged}
        judged += [c for c, _ in _nearest_visible(conn, index, claims_table, analysis, query_vector, known,
                                                   CLAIM_POOL_FLOOR, nearest_floor=-1.0, check_words=False)
                   if c.key not in seen]
    if first_by_words is not None and all(c is not first_by_words for c in judged):
        judged.append(first_by_words)
    if len(judged) < 2:
        return None
    scores = soft_match.soft_scores(terms, _claim_texts(conn, sources_table, judged), [c.typo_units for c in judged])
    order = sorted(range(len(judged)), key=lambda i: -scores[i])
    if scores[order[0]] - scores[order[1]] < SOFT_ACCEPT_MARGIN:
        return None
    chosen = judged[order[0]]
    if all(c is not chosen for c, _ in near):
        return None  # not near enough by meaning to be a candidate at all
    return chosen if chosen is near[0][0] or chosen is first_by_words else None


def _claim_texts(conn: Any, sources: DenseTable, claims: Sequence[Candidate]) -> list[str]:
    """Each claim's statement with the title and cited text of its evidence that this request
    sees (each cited span read up to ``EVIDENCE_TEXT_BYTES``; a reference without a span, its
    text's start): nothing outside the caller's horizon is scored into an answer."""
    visible = visible_revisions(conn, sources, {ref["revision_id"] for c in claims
                                                 for ref in c.evidence[:EVIDENCE_REFS] if ref.get("revision_id")})
    refs = [(i, ref["revision_id"], ref.get("start_byte"), ref.get("end_byte"))
            for i, c in enumerate(claims) for ref in c.evidence[:EVIDENCE_REFS] if ref.get("revision_id") in visible]
    found: dict[int, list[str]] = {}
    if refs:
        values = ",".join("(?,?,?,?,?)" for _ in refs)
        params = [value for k, (i, revision, start, end) in enumerate(refs) for value in (
            k, i, revision, 1 + (start or 0),
            min(EVIDENCE_TEXT_BYTES, (end - start) if None not in (start, end) else EVIDENCE_TEXT_BYTES))]
        for i, title, text in conn.execute(
                f"WITH refs(k, i, revision_id, start, size) AS (VALUES {values}) "
                f"SELECT refs.i, d.title, substr(CAST(d.body AS BLOB), refs.start, refs.size) "
                f"FROM refs JOIN artifact_search_text d ON d.revision_id = refs.revision_id "
                f"ORDER BY refs.k", params):
            found.setdefault(i, []).append(f"{title}\n{bytes(text).decode('utf-8', 'ignore')}")
    return ["\n".join([c.statement, *found.get(i, [])]) for i, c in enumerate(claims)]


def visible_revisions(conn: Any, sources: DenseTable, revisions: set[str]) -> set[str]:
    """Which of these artifact revisions the request's filters let it see."""
    if not revisions:
        return set()
    ordered = sorted(revisions)
    marks = ",".join("?" * len(ordered))
    doc_ids = sorted(row[0] for row in conn.execute(
        f"SELECT doc_id FROM artifact_search_text WHERE revision_id IN ({marks})", ordered))
    pooled = {c.doc_id: c.revision_id for c in sources.pool}
    seen = {pooled[d] for d in doc_ids if d in pooled}
    rest = [d for d in doc_ids if d not in pooled]
    return seen | {c.revision_id for c in visible_rows(conn, sources.table, sources.filters, rest, len(rest))}


def _shared_words(c: Candidate) -> list[str]:
    """The query's words this candidate shares with it: matched exactly, or by the typo
    channel's fuzzy match (a query's "final" shares the model's token for it with "finalized")."""
    return c.matched_free + c.matched_phrases + c.trigram_matched_terms


def _first_by_words(pool: Sequence[Candidate]) -> Candidate | None:
    """The lexical channel's first artifact (best lexical score, then newest)."""
    lexical = [c for c in pool if c.lexical_candidate and c.lexical_score > 0]
    return min(lexical, key=lambda c: (-c.lexical_score, -c.commit_seq)) if lexical else None


def _agreed_artifact(query: str, artifacts: Sequence[tuple[Candidate, dense.DenseHit]],
                     first_by_words: Candidate | None) -> Candidate | None:
    """The artifact both channels put first: the lexical channel's first artifact when it is
    also the clear nearest visible artifact by meaning (the claims' acceptance rule, applied to
    artifacts) and near in the words it does not share with the query."""
    if first_by_words is None or not artifacts or artifacts[0][0] is not first_by_words:
        return None
    candidate, hit = artifacts[0]
    if not dense.claim_accepted([h.similarity for _, h in artifacts], 0):
        return None
    unshared = dense.unmatched_similarity(query, _shared_words(candidate), hit)
    return candidate if unshared >= dense.UNMATCHED_MIN_COSINE else None


def _cites_an_answering_source(conn: Any, analysis: AnalyzedQuery, sources: DenseTable,
                               claims: Sequence[Candidate]) -> set[tuple[str, str]]:
    """Keys of ``claims`` citing a source revision that this request sees and that matches the
    query's words well enough to qualify lexically."""
    cited = {c.key: {ref["revision_id"] for ref in c.evidence if ref.get("revision_id")} for c in claims}
    revisions = sorted(set().union(*cited.values())) if cited else []
    if not revisions:
        return set()
    marks = ",".join("?" * len(revisions))
    doc_of = dict(conn.execute(f"SELECT revision_id, doc_id FROM artifact_search_text "
                               f"WHERE revision_id IN ({marks})", tuple(revisions)).fetchall())
    pooled = {c.doc_id: c for c in sources.pool}
    cited_docs = set(doc_of.values())
    fresh = [c for c in visible_rows(conn, sources.table, sources.filters,
                                     [d for d in sorted(cited_docs) if d not in pooled], len(doc_of))]
    _membership(conn, sources.table, analysis, sources.matches, fresh)
    answering = {c.revision_id for c in [*(pooled[d] for d in cited_docs if d in pooled), *fresh]
                 if c.lexical_qualified or c.trigram_qualified}
    return {key for key, revs in cited.items() if revs & answering}


def _evidence_sources(conn: Any, index: Any, target: DenseTable, analysis: AnalyzedQuery,
                      query_vector: Any, known: dict[tuple[str, str], Candidate],
                      refs: Sequence[dict[str, Any]]) -> list[tuple[Candidate, dense.DenseHit]]:
    """The sources a qualified claim cites that were not among the near documents: each cited
    revision (and its artifact's current one) the filters let this request see, scored by its
    own nearest row and citing the claim's quoted span where it has one."""
    if not refs:
        return []
    artifact_ids = sorted({ref["artifact_id"] for ref in refs if ref.get("artifact_id")})
    revisions = sorted({ref["revision_id"] for ref in refs if ref.get("revision_id")})
    marks_a, marks_r = ",".join("?" * len(artifact_ids)), ",".join("?" * len(revisions)) or "NULL"
    doc_ids = [row[0] for row in conn.execute(
        f"SELECT d.doc_id FROM artifact_search_text d JOIN artifacts a ON a.id = d.artifact_id "
        f"WHERE a.id IN ({marks_a}) AND (d.revision_id = a.current_revision_id "
        f"OR d.revision_id IN ({marks_r})) ORDER BY d.doc_id DESC", (*artifact_ids, *revisions))]
    found = visible_rows(conn, target.table, target.filters, doc_ids, len(doc_ids))
    quoted = {ref["revision_id"]: (ref["start_byte"], ref["end_byte"]) for ref in refs
              if ref.get("revision_id") and None not in (ref.get("start_byte"), ref.get("end_byte"))}
    chosen = []
    for c in found:
        hit = dense.document_hit(index, "artifact", c.doc_id, query_vector)
        if hit is None or hit.similarity < dense.MIN_CANDIDATE_COSINE:
            continue
        span = quoted.get(c.revision_id, hit.span)
        chosen.append((known.get(c.key, c), dense.DenseHit(hit.doc_id, hit.similarity, span, hit.vector)))
    _membership(conn, target.table, analysis, target.matches, [c for c, _ in chosen if c.key not in known])
    return chosen


def _mark(pool: list[Candidate], known: dict[tuple[str, str], Candidate],
          found: Sequence[tuple[Candidate, dense.DenseHit, bool]]) -> None:
    for candidate, hit, ok in found:
        if candidate.key not in known:
            known[candidate.key] = candidate
            pool.append(candidate)
        candidate.semantic_similarity = hit.similarity
        candidate.semantic_span = hit.span
        candidate.semantic_qualified = ok


def _dense_only(c: Candidate) -> bool:
    return (c.entity_type == "artifact" and c.semantic_span is not None and not c.lexical_candidate
            and c.trigram_score is None and not c.typo_units)


def cite_dense_only(conn: Any, candidates: Sequence[Candidate]) -> None:
    """A dense-only artifact hit cites the exact passage whose meaning matched."""
    for c in candidates:
        if c.citation or not _dense_only(c):
            continue
        start, end = c.semantic_span
        c.excerpt = chunk_bytes(conn, c.revision_id, start, end).decode("utf-8")
        c.citation = span_citation(c.entity_id, c.revision_id, (start, end))
        c.cited_span = True
        c.retrieval_keys["retrieval_span"] = {
            "start_byte": start, "end_byte": end, "chunker_version": CHUNKER_VERSION,
            "coordinate_space": "immutable_artifact_bytes", "window": "semantic_passage",
        }


def dense_passages(candidates: Sequence[Candidate]) -> dict[str, list[Passage]]:
    """The matched passage of each dense-only artifact hit, as context.build's evidence."""
    return {c.revision_id: [Passage(c.semantic_span[0], c.semantic_span[1], c.excerpt,
                                    c.semantic_similarity or 0.0, frozenset())]
            for c in candidates if _dense_only(c) and c.citation}


def channel_ready(conn: Any, requested: bool) -> tuple[str, str]:
    """(state, reason) of the channel for one request: ``ready`` only where the model is
    loaded, the store's vectors were built with it, and the request did not turn it off."""
    model = model_status()
    if not model.available:
        return "disabled", model.reason
    if not requested:
        return "disabled", "turned off by the request (semantic.enabled=false); retrieval is lexical only"
    if not dense.vectors_ready(conn):
        return "disabled", "the vectors projection is not built with this model yet; run `memoree reindex`"
    return "ready", "local static embeddings fused with the lexical channel"
