"""``memory.retrieve`` (protocol §1.3, 0.6.0): recall plus at most one bounded recovery step.

This module owns the one-call packet: a recall (no candidates); when no claim qualified and the
question is not about the current source, one probe (on the caller's reformulation if given)
whose claim-exact leads are fetched with citation.get under tight byte bounds, and only the
fetched spans that share a content word with the routed question are kept
(``recovery_lexical_relation_v1``). Recovered spans are labelled ``unqualified_evidence`` and
never change presence. Without qualified claims the packet also says what to do next
(``retrieval_next_action_v1``). Without write-time anchors there is no anchor routing, so the
stored-vocabulary suggestion is always empty.
"""

from __future__ import annotations

import re
import time

import msgspec

from memoree import limits
from memoree.errors import CitationError, InvalidRequest
from memoree.inputs import CitationGetInput, RecallInput, RetrieveInput, check_limit

from .analysis import STOPWORDS, QueryAnalysis, inflection_stem
from .citations import citation_get
from .probe import build_leads, probe_runs, select_leads
from .recall import (
    ConflictSummary,
    RecallEvidenceReference,
    assemble_recall,
    check_recall_bounds,
    recall_searches,
)
from .search import ReadScope, read_snapshot

__all__ = ["RetrieveResult", "retrieve"]

QUALIFICATION_POLICY = "deterministic_authority_only_v1"
RECOVERY_POLICY = "unqualified_exact_evidence_v1"
RELEVANCE_POLICY = "recovery_lexical_relation_v1"
NEXT_ACTION_POLICY = "retrieval_next_action_v1"
CURRENT_SOURCE_RULE = ("Memory records what was known and decided; for the current state of code or "
                       "live systems the repository or the live source is authoritative.")
RECOVERY_WARNING = ("Unqualified evidence: these spans did not pass qualification. Read them as leads "
                    "and verify them before relying on them.")
FETCHABLE_ORIGINS = ("claim_exact", "semantic_resolved")
MAX_RECOVERY_LEADS = 8
MAX_RECOVERY_BYTES = 12 * limits.KIB
MAX_FETCH_BYTES_PER_REFERENCE = 1536
MAX_REFERENCES = 9
MIN_FETCH_BYTES = 4
_WORD = re.compile(r"\w+")


class Authority(msgspec.Struct, kw_only=True):
    memory_snapshot_commit_seq: int
    retrieved_at: str
    qualification_policy: str
    recovery_policy: str
    current_source_rule: str


class RetrieveClaim(msgspec.Struct, kw_only=True):
    claim_id: str
    revision_id: str
    claim_type: str
    status: str
    statement: str
    citation: str
    evidence: list[RecallEvidenceReference]
    conflict_relation_ids: list[str]


class RetrieveArtifactReference(msgspec.Struct, kw_only=True, omit_defaults=True):
    artifact_id: str
    revision_id: str
    title: str
    citation: str
    excerpt: str
    excerpt_truncated: bool
    excerpt_citation: str | None = None
    risk_signals: list[str]


class RecoveredEvidence(msgspec.Struct, kw_only=True):
    retrieval_tier: str
    title: str
    citation: str
    content: str
    media_type: str
    truncated: bool


class Recovery(msgspec.Struct, kw_only=True):
    retrieval_tier: str
    original_query_preserved: bool
    reformulation_applied: bool
    available_leads: int
    returned_references: int
    returned_content_bytes: int
    references_truncated: bool
    relevance_policy: str
    suppressed_references: int
    anchor_routed_references: int
    evidence: list[RecoveredEvidence]
    warning: str


class NextAction(msgspec.Struct, kw_only=True):
    policy_version: str
    reason: str
    action: str
    detail: str
    unmatched_units: list[str]
    stored_vocabulary: list[str]


class RetrieveResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    content_is_untrusted: bool
    presence: str
    searched_horizon: str
    query_analysis: QueryAnalysis
    authority: Authority
    claims: list[RetrieveClaim]
    claims_truncated: bool
    conflicts: list[ConflictSummary]
    artifact_refs: list[RetrieveArtifactReference]
    next_action: NextAction | None = None
    recovery: Recovery | None = None
    profile: dict[str, float] | None = None


def _folded_words(text: str) -> set[str]:
    return {inflection_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS}


def _check(inp: RetrieveInput) -> None:
    check_limit("max_recovery_leads", inp.max_recovery_leads, MAX_RECOVERY_LEADS)
    check_limit("max_recovery_bytes", inp.max_recovery_bytes, MAX_RECOVERY_BYTES)
    if inp.reformulation is not None:
        if not inp.reformulation.strip():
            raise InvalidRequest("reformulation must not be empty")
        if len(inp.reformulation.encode("utf-8")) > limits.MAX_QUERY_BYTES:
            raise InvalidRequest(f"reformulation must not exceed {limits.MAX_QUERY_BYTES} bytes")
        if inp.reformulation == inp.query:
            raise InvalidRequest("reformulation must differ from query")


def retrieve(scope: ReadScope, inp: RetrieveInput) -> RetrieveResult:
    _check(inp)
    recall_input = RecallInput(
        query=inp.query, horizon=inp.horizon, reason=inp.reason, max_claims=inp.max_claims,
        max_artifact_refs=inp.max_artifact_refs, max_excerpt_bytes=inp.max_excerpt_bytes,
        min_commit_seq=inp.min_commit_seq, recency=inp.recency, semantic=inp.semantic,
    )
    check_recall_bounds(recall_input)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    with read_snapshot(scope.conn):
        claim_run, artifact_run = recall_searches(scope, recall_input)
        recalled = assemble_recall(scope, recall_input, claim_run, artifact_run)
        timings["recall_ms"] = (time.perf_counter() - started) * 1000
        analysis = claim_run.analysis
        needs_recovery = (recalled.presence != "claims"
                          and analysis.analysis.retrieval_profile.intent_hint != "current_source")
        recovery = _recover(scope, inp, timings) if needs_recovery else None
    return RetrieveResult(
        content_is_untrusted=True, presence=recalled.presence, searched_horizon=inp.horizon,
        query_analysis=recalled.query_analysis,
        authority=Authority(memory_snapshot_commit_seq=scope.head, retrieved_at=scope.now,
                            qualification_policy=QUALIFICATION_POLICY, recovery_policy=RECOVERY_POLICY,
                            current_source_rule=CURRENT_SOURCE_RULE),
        claims=[RetrieveClaim(claim_id=c.claim_id, revision_id=c.revision_id, claim_type=c.claim_type,
                              status=c.status, statement=c.statement, citation=c.citation,
                              evidence=c.evidence, conflict_relation_ids=c.conflict_relation_ids)
                for c in recalled.claims],
        claims_truncated=recalled.claims_truncated, conflicts=recalled.conflicts,
        artifact_refs=[RetrieveArtifactReference(
            artifact_id=a.artifact_id, revision_id=a.revision_id, title=a.title, citation=a.citation,
            excerpt=a.excerpt, excerpt_truncated=a.excerpt_truncated, excerpt_citation=a.excerpt_citation,
            risk_signals=a.risk_signals) for a in recalled.artifact_refs],
        next_action=_next_action(recalled.presence, analysis.analysis.content_units)
        if recalled.presence != "claims" else None,
        recovery=recovery,
        profile={k: round(v, 3) for k, v in timings.items()} if inp.profile else None,
    )


def _next_action(presence: str, units: list[str]) -> NextAction:
    reason = "no_qualified_match" if presence == "none" else "artifacts_without_claims"
    return NextAction(
        policy_version=NEXT_ACTION_POLICY, reason=reason, action="requery_with_stored_vocabulary",
        detail=("No claim qualified for this question. Re-ask with words the stored memory uses "
                "(identifiers, titles, exact terms) rather than a paraphrase."),
        unmatched_units=list(units), stored_vocabulary=[],
    )


def _recover(scope: ReadScope, inp: RetrieveInput, timings: dict[str, float]) -> Recovery | None:
    started = time.perf_counter()
    routed = inp.reformulation or inp.query
    claim_run, artifact_run = probe_runs(scope, routed, inp)
    claim_leads, raw_leads = build_leads(scope.conn, claim_run, artifact_run)
    leads = select_leads(claim_leads, raw_leads, inp.max_recovery_leads)
    timings["probe_ms"] = (time.perf_counter() - started) * 1000
    if not leads:
        return None
    question = _folded_words(routed)
    evidence: list[RecoveredEvidence] = []
    used = suppressed = 0
    truncated = False
    for lead in leads:
        source = next((s for s in lead.sources if s.locator_origin in FETCHABLE_ORIGINS), None)
        if source is None:
            continue
        budget = min(MAX_FETCH_BYTES_PER_REFERENCE, inp.max_recovery_bytes - used)
        if len(evidence) == MAX_REFERENCES or budget < MIN_FETCH_BYTES:
            truncated = True
            break
        try:
            fetched = citation_get(scope.conn, scope.cas,
                                   CitationGetInput(citation=source.citation, max_bytes=budget))
        except CitationError:
            continue
        if not question & _folded_words(fetched.content):
            suppressed += 1
            continue
        used += fetched.byte_count
        evidence.append(RecoveredEvidence(
            retrieval_tier="unqualified_evidence", title=lead.title, citation=fetched.citation,
            content=fetched.content, media_type=fetched.media_type, truncated=fetched.truncated))
    timings["fetch_ms"] = (time.perf_counter() - started) * 1000 - timings["probe_ms"]
    return Recovery(
        retrieval_tier="unqualified_evidence", original_query_preserved=True,
        reformulation_applied=inp.reformulation is not None,
        available_leads=len(claim_leads) + len(raw_leads), returned_references=len(evidence),
        returned_content_bytes=used, references_truncated=truncated, relevance_policy=RELEVANCE_POLICY,
        suppressed_references=suppressed, anchor_routed_references=0, evidence=evidence,
        warning=RECOVERY_WARNING,
    )
