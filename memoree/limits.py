"""Every protocol size bound, in one place; ``capabilities`` reports these values.

Byte bounds count UTF-8 bytes, never characters (msgspec's ``max_length`` counts characters, so
the service checks byte lengths itself).
"""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB

MAX_ARTIFACT_BYTES = 8 * MIB
MAX_ENCODED_CONTENT_BYTES = 12 * MIB
MAX_FRAME_BYTES = 24 * MIB
MAX_CONCURRENT_CONNECTIONS = 4
MAX_BATCH_REQUESTS = 1000
MAX_REQUEST_ID_BYTES = 256
MAX_IDEMPOTENCY_KEY_BYTES = 512
MAX_CONTEXT_ID_BYTES = 256
MAX_PINS = 128
MAX_PIN_BYTES = 512
MAX_ENTITY_ID_BYTES = 256
MAX_QUERY_BYTES = 8 * KIB
MAX_QUERY_WORDS = 48
MAX_TITLE_BYTES = 4 * KIB
MAX_KIND_BYTES = 128
MAX_MEDIA_TYPE_BYTES = 512
MAX_CLAIM_STATEMENT_BYTES = 128 * KIB
MAX_METADATA_BYTES = 64 * KIB
MAX_ACTOR_BYTES = 1 * KIB
MAX_REASON_BYTES = 64 * KIB
MAX_EVIDENCE_ITEMS = 128
MAX_SEARCH_ITEMS = 100
MAX_RECALL_CLAIMS = 10
MAX_RECALL_ARTIFACT_REFS = 20
MAX_RECALL_CANDIDATE_CLAIMS = 16
MAX_RECALL_CANDIDATE_ARTIFACT_REFS = 16
MAX_RECALL_EXCERPT_BYTES = 1024
MAX_RECALL_EVIDENCE_EXCERPTS_PER_CLAIM = 4
MAX_HISTORY_ITEMS = 100
MAX_RELATION_LIST_ITEMS = 100
MAX_CONFLICT_LIST_ITEMS = 100
DEFAULT_HISTORY_ITEMS = 50
MAX_LIST_ITEMS = 100
DEFAULT_LIST_ITEMS = 50
MAX_LIST_PROVENANCE_KEYS = 8
INLINE_BLOB_BYTES = 16 * KIB

CAPABILITY_LIMITS = {
    "max_frame_bytes": MAX_FRAME_BYTES,
    "max_concurrent_connections": MAX_CONCURRENT_CONNECTIONS,
    "max_artifact_bytes": MAX_ARTIFACT_BYTES,
    "max_encoded_content_bytes": MAX_ENCODED_CONTENT_BYTES,
    "max_request_id_bytes": MAX_REQUEST_ID_BYTES,
    "max_idempotency_key_bytes": MAX_IDEMPOTENCY_KEY_BYTES,
    "max_query_bytes": MAX_QUERY_BYTES,
    "max_title_bytes": MAX_TITLE_BYTES,
    "max_claim_statement_bytes": MAX_CLAIM_STATEMENT_BYTES,
    "max_metadata_bytes": MAX_METADATA_BYTES,
    "max_reason_bytes": MAX_REASON_BYTES,
    "max_evidence_items": MAX_EVIDENCE_ITEMS,
    "max_search_items": MAX_SEARCH_ITEMS,
    "max_recall_claims": MAX_RECALL_CLAIMS,
    "max_recall_artifact_refs": MAX_RECALL_ARTIFACT_REFS,
    "max_recall_candidate_claims": MAX_RECALL_CANDIDATE_CLAIMS,
    "max_recall_candidate_artifact_refs": MAX_RECALL_CANDIDATE_ARTIFACT_REFS,
    "max_recall_excerpt_bytes": MAX_RECALL_EXCERPT_BYTES,
    "max_recall_evidence_excerpts_per_claim": MAX_RECALL_EVIDENCE_EXCERPTS_PER_CLAIM,
    "max_history_items": MAX_HISTORY_ITEMS,
    "max_relation_list_items": MAX_RELATION_LIST_ITEMS,
    "max_conflict_list_items": MAX_CONFLICT_LIST_ITEMS,
    "max_list_items": MAX_LIST_ITEMS,
}
