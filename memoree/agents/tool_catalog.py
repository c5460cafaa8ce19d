"""What an MCP tool's parameters mean and how far they go, where the op declaration says nothing.

Data only, read by the MCP server: titles and behaviour hints are declared with each op
(``memoree.protocol.ops``), and so are parameter texts an op wants to word itself; every other
input field gets a description here, by field name with per-op overrides, and the integer and
string bounds the server enforces (from ``memoree.limits`` and the query modules), so a generic
client can build a valid call from the schema alone.
"""

from __future__ import annotations

from typing import Any

from memoree import limits

__all__ = ["BOUNDS", "DESCRIPTIONS", "OVERRIDES", "bounds_for", "describe_field"]

_HORIZON = ("Where to look: 'ambient' (default: this project, and this task if one is set), "
            "'workspace' or 'personal' (everything); a broader horizon needs a reason.")
_REASON = "Why a broader horizon is needed (required for workspace and personal; ignored for ambient)."
_MIN_SEQ = ("Only answer once the store has applied this commit_seq (read-your-writes after a "
            "mutation); INDEX_NOT_READY (retryable) otherwise.")
_CONTENT = ('The bytes: {"type": "text", "data": "..."} for UTF-8 text or {"type": "base64", '
            '"data": "..."} for anything else. A plain string is taken as text.')

DESCRIPTIONS: dict[str, str] = {
    "actor": "Who makes this change (free text, recorded with the revision).",
    "artifact_id": "The artifact's id (art_...).",
    "revision_id": "An exact revision id (arev_... or crev_...); default: the current revision.",
    "claim_id": "The claim's id (clm_...).",
    "if_revision": "The revision id you read last; the change is refused with REVISION_CONFLICT if it is no longer current.",
    "title": "A short human title.",
    "kind": "What sort of artifact this is, free-form (decision, note, document, runbook, ...).",
    "media_type": "The content's media type, e.g. text/markdown; charset=utf-8 (must contain '/').",
    "content": _CONTENT,
    "provenance": "Where the content came from: a JSON object kept with the revision.",
    "statement": "The claim itself, as one self-contained sentence.",
    "claim_type": "fact, decision, constraint, preference, procedure or observation.",
    "confidence": "How sure, from 0 to 1 (optional).",
    "evidence": "Exact evidence: each item names an artifact revision and optionally a [start_byte, end_byte) span of its bytes.",
    "start_byte": "First byte of the cited span (0-based, inclusive); give it with end_byte.",
    "end_byte": "End of the cited span (exclusive); give it with start_byte.",
    "valid_from": "When the claim starts to hold (RFC 3339); optional.",
    "valid_until": "When the claim stops holding (RFC 3339, after valid_from); optional.",
    "reason": "Why (kept with the change).",
    "horizon": _HORIZON,
    "query": "What to look for, in plain words.",
    "limit": "The most items to return.",
    "min_commit_seq": _MIN_SEQ,
    "recency": "The bounded recency nudge; {\"enabled\": false} gives pure lexical order.",
    "enabled": "Whether the recency nudge is applied.",
    "include_historical": "Also return superseded, retracted and forgotten items.",
    "include_content": "Return the content bytes too (false: metadata only).",
    "include_stale": "Also list conflict cases whose claims have since changed.",
    "before_commit_seq": "Cursor: only items older than this commit_seq (from next_before_commit_seq of the previous page).",
    "before_revision_number": "Cursor: only revisions older than this number (from next_before_revision_number).",
    "before_case_sequence": "Cursor: only cases older than this sequence (from next_before_case_sequence).",
    "entity_type": "'artifact' or 'claim'.",
    "entity_id": "The anchor's id (art_... or clm_...).",
    "direction": "'outgoing', 'incoming' or 'both' (default).",
    "relation": "derived_from, supports, contradicts, supersedes, references or duplicates.",
    "source_type": "The source's type: 'artifact' or 'claim'.",
    "source_id": "The source's id (for supersedes: the newer item).",
    "target_type": "The target's type: 'artifact' or 'claim'.",
    "target_id": "The target's id (for supersedes: the older item).",
    "metadata": "Free JSON object kept with the relation.",
    "citation": "A memoree://artifact/ART@REV#start-end citation as recall and search return it.",
    "max_bytes": "The most bytes to return.",
    "max_claims": "The most current claims to return.",
    "max_artifact_refs": "The most artifact references to return.",
    "max_excerpt_bytes": "The most bytes per evidence excerpt.",
    "max_candidate_claims": "How many unqualified candidate claims to add (0: none).",
    "max_candidate_artifact_refs": "How many unqualified candidate artifacts to add (0: none).",
    "max_leads": "The most leads to return.",
    "max_recovery_leads": "The most leads the recovery step may use.",
    "max_recovery_bytes": "The most evidence bytes the recovery step may return.",
    "reformulation": "A second wording of the query for the recovery step (optional).",
    "original_query": "The query as the user asked it, when query is a rewording (optional).",
    "profile": "Also return timings of each stage.",
    "status": "Which lifecycle states to list.",
    "items": "The mutations, in order; each {op, input, idempotency_key?} (key default: this call's key + '#index').",
    "op": "The mutation: artifact.put, artifact.revise, artifact.append, artifact.forget, claim.assert, claim.revise, claim.retract or relation.put.",
    "input": "That mutation's input, exactly as its own tool takes it.",
    "idempotency_key": "Names this logical mutation; reuse it only for an exact retry.",
    "type": "'text' or 'base64'.",
    "data": "The text itself, or its standard base64 with padding.",
    "cell": "The emem cell id the facts are about.",
    "band": "One band name to recall (merged into bands).",
    "bands": "Band names to recall ([] means every band).",
    "tslot": "The time slot to recall.",
    "as_of_tslot": "Recall as of this time slot.",
    "as_of_signed_at": "Recall as signed at or before this time (RFC 3339).",
    "scope": "The emem scope: user_id, agent_id, run_id, org_id.",
    "user_id": "emem user id.", "agent_id": "emem agent id.", "run_id": "emem run id.", "org_id": "emem organisation id.",
    "deterministic": "Only facts of deterministic provenance classes.",
}

OVERRIDES: dict[tuple[str, str], str] = {
    ("artifact.list", "title"): "Only artifacts with exactly this title.",
    ("artifact.list", "kind"): "Only artifacts of this kind.",
    ("artifact.list", "provenance"): "Only artifacts whose provenance has these top-level values (exact match).",
    ("artifact.list", "status"): "'active' (default), 'forgotten' or 'any'.",
    ("claim.list", "status"): "'current' (default: active or conflicted), 'active', 'conflicted', 'superseded', 'retracted' or 'any'.",
    ("claim.list", "claim_type"): "Only claims of this type.",
    ("claim.list", "actor"): "Only claims whose current revision was written by this actor.",
    ("claim.list", "artifact_id"): "Only claims whose evidence cites this artifact.",
    ("artifact.append", "content"): "The bytes to add after the current ones. " + _CONTENT,
    ("artifact.append", "title"): "A new title (default: keep the current one).",
    ("artifact.append", "provenance"): "New provenance (default: keep the current one).",
    ("artifact.revise", "title"): "A new title (default: keep the current one).",
    ("artifact.revise", "media_type"): "A new media type (default: keep the current one).",
    ("artifact.revise", "provenance"): "Provenance of the new revision (default {}: not inherited).",
    ("artifact.forget", "reason"): "Why it is forgotten (required, kept in the log).",
    ("artifact.purge", "reason"): "Why the bytes are erased (required, kept in the log).",
    ("claim.retract", "reason"): "Why the claim is withdrawn (required, kept in the log).",
    ("claim.revise", "evidence"): "The new revision's evidence (replaced, not merged; omit for none).",
    ("claim.revise", "confidence"): "The new revision's confidence (replaced, not merged).",
    ("relation.list", "relation"): "Only relations of this type.",
    ("search", "limit"): "The most hits to return.",
    ("context.build", "max_bytes"): "The bundle's byte budget (Markdown, newlines included).",
    ("citation.get", "max_bytes"): "The most bytes to return; a longer span is cut at a UTF-8 boundary.",
    ("fact.recall", "provenance"): "Only facts of these provenance classes.",
}

BOUNDS: dict[tuple[str | None, str], dict[str, int]] = {
    (None, "limit"): {"minimum": 1, "maximum": limits.MAX_HISTORY_ITEMS},
    ("search", "limit"): {"minimum": 1, "maximum": limits.MAX_SEARCH_ITEMS},
    ("context.build", "limit"): {"minimum": 1, "maximum": limits.MAX_SEARCH_ITEMS},
    ("artifact.list", "limit"): {"minimum": 1, "maximum": limits.MAX_LIST_ITEMS},
    ("claim.list", "limit"): {"minimum": 1, "maximum": limits.MAX_LIST_ITEMS},
    ("relation.list", "limit"): {"minimum": 1, "maximum": limits.MAX_RELATION_LIST_ITEMS},
    ("conflict.list", "limit"): {"minimum": 1, "maximum": limits.MAX_CONFLICT_LIST_ITEMS},
    (None, "max_claims"): {"minimum": 1, "maximum": limits.MAX_RECALL_CLAIMS},
    (None, "max_artifact_refs"): {"minimum": 1, "maximum": limits.MAX_RECALL_ARTIFACT_REFS},
    (None, "max_excerpt_bytes"): {"minimum": 1, "maximum": limits.MAX_RECALL_EXCERPT_BYTES},
    (None, "max_candidate_claims"): {"minimum": 0, "maximum": limits.MAX_RECALL_CANDIDATE_CLAIMS},
    (None, "max_candidate_artifact_refs"): {"minimum": 0, "maximum": limits.MAX_RECALL_CANDIDATE_ARTIFACT_REFS},
    (None, "max_leads"): {"minimum": 1, "maximum": 8},
    (None, "max_recovery_leads"): {"minimum": 1, "maximum": 8},
    (None, "max_recovery_bytes"): {"minimum": 1, "maximum": 12 * limits.KIB},
    ("citation.get", "max_bytes"): {"minimum": 4, "maximum": 8192},
    ("context.build", "max_bytes"): {"minimum": 0, "maximum": limits.MAX_ARTIFACT_BYTES},
    (None, "before_commit_seq"): {"minimum": 1},
    (None, "before_revision_number"): {"minimum": 1},
    (None, "before_case_sequence"): {"minimum": 1},
    (None, "start_byte"): {"minimum": 0, "maximum": limits.MAX_ARTIFACT_BYTES},
    (None, "end_byte"): {"minimum": 0, "maximum": limits.MAX_ARTIFACT_BYTES},
    (None, "confidence"): {"minimum": 0, "maximum": 1},
    (None, "items"): {"minItems": 1, "maxItems": limits.MAX_BATCH_REQUESTS},
    (None, "evidence"): {"maxItems": limits.MAX_EVIDENCE_ITEMS},
    (None, "query"): {"minLength": 1, "maxLength": limits.MAX_QUERY_BYTES},
    (None, "title"): {"minLength": 1, "maxLength": limits.MAX_TITLE_BYTES},
    (None, "kind"): {"minLength": 1, "maxLength": limits.MAX_KIND_BYTES},
    (None, "media_type"): {"minLength": 3, "maxLength": limits.MAX_MEDIA_TYPE_BYTES},
    (None, "statement"): {"minLength": 1, "maxLength": limits.MAX_CLAIM_STATEMENT_BYTES},
    (None, "reason"): {"minLength": 1, "maxLength": limits.MAX_REASON_BYTES},
    (None, "actor"): {"minLength": 1, "maxLength": limits.MAX_ACTOR_BYTES},
    (None, "citation"): {"minLength": 1, "maxLength": 1024},
    (None, "idempotency_key"): {"minLength": 1, "maxLength": limits.MAX_IDEMPOTENCY_KEY_BYTES},
    **{(None, name): {"minLength": 1, "maxLength": limits.MAX_ENTITY_ID_BYTES}
       for name in ("artifact_id", "revision_id", "claim_id", "if_revision", "entity_id",
                    "source_id", "target_id")},
}


_HORIZON_READS = {"memory.recall", "memory.retrieve", "memory.probe", "search", "context.build",
                  "artifact.list", "claim.list", "relation.list", "conflict.list"}


def describe_field(op: str, name: str) -> str:
    if name == "reason" and op in _HORIZON_READS:
        return _REASON
    return OVERRIDES.get((op, name)) or DESCRIPTIONS.get(name) or name.replace("_", " ")


def bounds_for(op: str, name: str) -> dict[str, Any]:
    return dict(BOUNDS.get((op, name)) or BOUNDS.get((None, name)) or {})
