"""``memory.probe`` (protocol §1.3, 0.5.0): a compact list of unqualified leads worth fetching.

This module owns what an agent sees when recall abstains but it wants to look further on its
own: only the *unqualified* candidate partitions of the qualified claim and artifact searches
(limit 8 each), turned into at most eight leads. Claim-backed leads come first (claims grouped
by the artifact revision their first evidence cites) with a floor of two raw-artifact slots; a
raw lead whose exact span overlaps a claim lead's span in the same revision is dropped. Each
lead names at most three sources by exact citation and never carries content: fetching is the
caller's explicit next step (``citation.get``). Without a dense model, whole-revision evidence
stays ``revision_only``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from memoree import limits
from memoree.errors import InvalidRequest
from memoree.inputs import ProbeInput, check_limit

from .recall import evidence_citation
from .search import ReadScope, SearchHit, SearchRun, analyze, check_min_commit_seq, read_snapshot, run_search

__all__ = ["Lead", "LeadSource", "ProbeResult", "build_leads", "probe", "probe_runs", "select_leads"]

MAX_LEADS = 8
PROBE_SEARCH_LIMIT = 8
MAX_LEAD_TITLE_BYTES = 48
MAX_SOURCES_PER_LEAD = 3
MAX_LEAD_SPAN_BYTES = 4 * limits.KIB
RAW_ARTIFACT_FLOOR = 2
ELLIPSIS = "…"


class LeadSource(msgspec.Struct, kw_only=True, omit_defaults=True):
    citation: str
    locator_origin: str
    locator_policy_version: str | None = None
    source_revision_hash: str | None = None
    parent_citation: str | None = None


class Lead(msgspec.Struct, kw_only=True):
    title: str
    sources: list[LeadSource]
    evidence_locator_set_complete: bool


class ProbeResult(msgspec.Struct, kw_only=True):
    content_is_untrusted: bool
    retrieval_tier: str
    original_query: str
    probe_query: str
    reformulation_applied: bool
    leads: list[Lead]
    available_count: int
    truncated: bool


def short_title(text: str) -> str:
    data = " ".join(text.split()).encode("utf-8")
    if len(data) <= MAX_LEAD_TITLE_BYTES:
        return data.decode("utf-8")
    cut = MAX_LEAD_TITLE_BYTES - len(ELLIPSIS.encode("utf-8"))
    return data[:cut].decode("utf-8", "ignore").rstrip() + ELLIPSIS


def _revision_meta(conn: Any, revision_id: str) -> tuple[str, str] | None:
    return conn.execute("SELECT title, blob_hash FROM artifact_revisions WHERE id = ?",
                        (revision_id,)).fetchone()


def _span_of(locator: dict[str, Any]) -> tuple[int, int] | None:
    if locator.get("start_byte") is None or locator.get("end_byte") is None:
        return None
    return (locator["start_byte"], locator["end_byte"])


class _ClaimGroup:
    """Claims whose first evidence cites the same artifact revision (or one evidence-less claim)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.hits: list[SearchHit] = []

    def locators(self) -> list[dict[str, Any]]:
        seen: set[str] = set()
        found = []
        for hit in self.hits:
            for locator in hit.provenance.get("evidence") or []:
                citation = evidence_citation(locator)
                if citation not in seen:
                    seen.add(citation)
                    found.append(locator)
        return found


def _claim_lead(conn: Any, group: _ClaimGroup) -> tuple[Lead, list[tuple[str, tuple[int, int]]]]:
    locators = group.locators()
    sources: list[LeadSource] = []
    spans: list[tuple[str, tuple[int, int]]] = []
    span_bytes = 0
    for locator in locators:
        span = _span_of(locator)
        size = span[1] - span[0] if span else 0
        if len(sources) == MAX_SOURCES_PER_LEAD or span_bytes + size > MAX_LEAD_SPAN_BYTES:
            break
        meta = _revision_meta(conn, locator["revision_id"])
        sources.append(LeadSource(
            citation=evidence_citation(locator),
            locator_origin="claim_exact" if span else "revision_only",
            source_revision_hash=meta[1] if meta else None,
        ))
        span_bytes += size
        if span:
            spans.append((locator["revision_id"], span))
    if locators:
        meta = _revision_meta(conn, locators[0]["revision_id"])
        title = meta[0] if meta else group.hits[0].excerpt
    else:
        title = group.hits[0].excerpt
        sources.append(LeadSource(citation=group.hits[0].citation, locator_origin="revision_only"))
    complete = len(sources) == len(locators) or not locators
    return Lead(title=short_title(title), sources=sources, evidence_locator_set_complete=complete), spans


def _raw_lead(conn: Any, hit: SearchHit) -> tuple[Lead, tuple[int, int] | None]:
    span_info = hit.provenance.get("retrieval_span")
    span = (span_info["start_byte"], span_info["end_byte"]) if span_info else None
    meta = _revision_meta(conn, hit.revision_id)
    source = LeadSource(
        citation=hit.citation, locator_origin="artifact_exact" if span else "revision_only",
        locator_policy_version="artifact_citation_span_v1" if span else None,
        source_revision_hash=meta[1] if meta else None,
    )
    return Lead(title=short_title(hit.title), sources=[source], evidence_locator_set_complete=True), span


def _overlaps(span: tuple[int, int], others: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in others)


def build_leads(conn: Any, claim_run: SearchRun, artifact_run: SearchRun) -> tuple[list[Lead], list[Lead]]:
    """Claim-backed leads (grouped by first evidence revision) and non-overlapping raw leads."""
    groups: dict[str, _ClaimGroup] = {}
    for hit in claim_run.candidates:
        evidence = hit.provenance.get("evidence") or []
        key = f"{evidence[0]['artifact_id']}@{evidence[0]['revision_id']}" if evidence else hit.entity_id
        groups.setdefault(key, _ClaimGroup(key)).hits.append(hit)
    claim_leads: list[Lead] = []
    claimed_spans: dict[str, list[tuple[int, int]]] = {}
    for group in groups.values():
        lead, spans = _claim_lead(conn, group)
        claim_leads.append(lead)
        for revision_id, span in spans:
            claimed_spans.setdefault(revision_id, []).append(span)
    raw_leads = []
    for hit in artifact_run.candidates:
        lead, span = _raw_lead(conn, hit)
        if span is not None and _overlaps(span, claimed_spans.get(hit.revision_id, [])):
            continue
        raw_leads.append(lead)
    return claim_leads, raw_leads


def select_leads(claim_leads: list[Lead], raw_leads: list[Lead], max_leads: int) -> list[Lead]:
    """Claim-backed leads first, but keep up to two slots for raw artifact leads."""
    raw_slots = min(RAW_ARTIFACT_FLOOR, len(raw_leads), max_leads)
    chosen = claim_leads[: max_leads - raw_slots]
    return chosen + raw_leads[: max_leads - len(chosen)]


def probe_runs(scope: ReadScope, query: str, inp: Any) -> tuple[SearchRun, SearchRun]:
    analysis = analyze(query)
    common = dict(query=query, horizon=inp.horizon, reason=inp.reason, limit=PROBE_SEARCH_LIMIT,
                  min_commit_seq=inp.min_commit_seq, recency=inp.recency.enabled,
                  qualified_only=True, analysis=analysis, with_candidates=True,
                  semantic=inp.semantic.enabled)
    claims = run_search(scope, entity_types=frozenset({"claim"}), **common)
    artifacts = run_search(scope, entity_types=frozenset({"artifact"}), **common)
    return claims, artifacts


def probe(scope: ReadScope, inp: ProbeInput) -> ProbeResult:
    check_limit("max_leads", inp.max_leads, MAX_LEADS)
    if inp.original_query is not None and not inp.original_query.strip():
        raise InvalidRequest("original_query must not be empty")
    if inp.original_query is not None and len(inp.original_query.encode("utf-8")) > limits.MAX_QUERY_BYTES:
        raise InvalidRequest(f"original_query must not exceed {limits.MAX_QUERY_BYTES} bytes")
    check_min_commit_seq(inp.min_commit_seq, scope.head)
    with read_snapshot(scope.conn):
        claim_run, artifact_run = probe_runs(scope, inp.query, inp)
        claim_leads, raw_leads = build_leads(scope.conn, claim_run, artifact_run)
    available = len(claim_leads) + len(raw_leads)
    original = inp.original_query if inp.original_query is not None else inp.query
    return ProbeResult(
        content_is_untrusted=True, retrieval_tier="unqualified_candidate", original_query=original,
        probe_query=inp.query, reformulation_applied=original != inp.query,
        leads=select_leads(claim_leads, raw_leads, inp.max_leads), available_count=available,
        truncated=available > inp.max_leads,
    )
