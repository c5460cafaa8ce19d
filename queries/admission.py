"""Claims from beyond a qualified search's window that ``context.build`` may also weigh.

This module owns which claims, besides the search's hits, compete for a context bundle's bytes:
the horizon's active, current claims that the claim table's own word index matches with at
least ``MIN_ADMITTED_UNITS`` of the query's units (the ``ADMISSION_POOL`` with the most summed
unit IDF, under the request's horizon and visibility filters), that are not hits already.
``queries.context_build`` scores each like a hit's claim, the BM25 of its statement times its soft
coverage of the query, at ``ADMITTED_SHARE``, so one gets in only where it outweighs the hits'
own evidence. An observation that answers a question often sits in a session the first hits do
not reach (a multi-hop answer is spread over several), and a claim beyond the window brings the
citation of its turn with it.

Admission never answers a question the search left unanswered (no qualified hit: no admission),
runs only with the dense channel ready (the soft coverage orders what it admits), and never
admits a conflicted, expired, future or superseded claim (its contradiction would not be listed
with the hits' conflicts). An admitted claim's ``matched_by`` says it was admitted, not ranked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .candidates import (
    TABLES,
    Candidate,
    UnitMatches,
    horizon_of,
    match_units,
    table_horizon,
    unit_expressions,
    visible_rows,
)
from .passages import claim_citation
from .search import ReadScope, SearchHit, SearchRun, as_hit

__all__ = ["ADMISSION_LABEL", "admitted_claims"]

ADMISSION_POOL = 64
MIN_ADMITTED_UNITS = 2
ADMISSION_LABEL = "context_admission_v1"


def admitted_claims(scope: ReadScope, run: SearchRun) -> list[SearchHit]:
    """The claims beyond ``run``'s hits that may compete for the bundle (see the module)."""
    if not run.hits or run.scorer is None or run.semantic is None or run.semantic.state != "ready":
        return []
    hits = {hit.entity_id for hit in run.hits if hit.entity_type == "claim"}
    found = []
    for candidate in claim_pool(scope, run):
        if candidate.entity_id in hits or not admissible(candidate, scope.now):
            continue
        if len(run.scorer.score(candidate.statement)[1]) < MIN_ADMITTED_UNITS:
            continue
        found.append(admitted_hit(candidate, run, scope.now))
    return found


def claim_pool(scope: ReadScope, run: SearchRun) -> list[Candidate]:
    """The ``ADMISSION_POOL`` visible claims (current revisions, the request's horizon) that the
    claim index matches with at least ``MIN_ADMITTED_UNITS`` of the query's units, most summed
    unit IDF first (newest first on ties). Counting units from the index's match lists first
    means only those claims' rows are read."""
    idf: Sequence[float] = run.idf.get("claim") or []
    if len(idf) != len(run.analysis.units):
        return []
    table = TABLES["claim"]
    matches = run.matches.get("claim") or claim_matches(scope, run)
    units: dict[int, int] = {}
    weight: dict[int, float] = {}
    for index, doc_ids in enumerate(matches.lists):
        for doc_id in doc_ids:
            units[doc_id] = units.get(doc_id, 0) + 1
            weight[doc_id] = weight.get(doc_id, 0.0) + idf[index]
    ranked = sorted((doc_id for doc_id, count in units.items() if count >= MIN_ADMITTED_UNITS),
                    key=lambda doc_id: (-weight[doc_id], -doc_id))
    filters = table.filters(scope.ambient, scope.pins, scope.now, run.horizon, False)
    return visible_rows(scope.conn, table, filters, ranked, ADMISSION_POOL)


def claim_matches(scope: ReadScope, run: SearchRun) -> UnitMatches:
    """The claim index's match list per query unit at the run's horizon: what ``run_search``
    read for the claim table (``SearchRun.matches``, same scope and snapshot), read again only
    for a run that did not search claims."""
    horizon = table_horizon(scope.conn, "claim", horizon_of(scope.ambient, run.horizon))
    expressions = unit_expressions(scope.conn, horizon, run.analysis, scope.pins)
    return match_units(scope.conn, TABLES["claim"], horizon, run.analysis, scope.pins, expressions)


def admissible(candidate: Candidate, now: str) -> bool:
    """Active and current: a conflicted claim's contradiction is listed only for hits."""
    return candidate.status == "active" and candidate.is_current(now)


def admitted_hit(candidate: Candidate, run: SearchRun, now: str) -> SearchHit:
    """The claim as a hit of the bundle: its statement, its citation, and ``matched_by`` saying
    it matched words (``lexical_candidate_v1``: its qualification is not computed) and was
    admitted, not ranked by the search."""
    candidate.excerpt = candidate.statement
    candidate.citation = claim_citation(candidate.entity_id, candidate.revision_id)
    candidate.lexical_candidate = True
    hit: Any = as_hit(candidate, run.analysis, now, False)  # not ranked: no recency bonus either
    hit.matched_by = [*hit.matched_by, ADMISSION_LABEL]
    return hit
