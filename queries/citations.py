"""``citation.get`` (protocol §1.3, 0.5.0): fetch exactly the bytes a span citation names.

This module owns the one accepted citation form, ``memoree://artifact/<art>@<rev>#<start>-<end>``,
and the exact fetch behind it: a global read (no scope check; forgotten artifacts still answer),
text content only, both ends on UTF-8 code-point boundaries, at most ``max_bytes`` returned with
the citation rewritten to name exactly the returned bytes. Every refusal is a CITATION_ERROR whose
``details.citation_error`` names the kind and whose ``next_action`` says what to do instead.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from memoree.errors import CitationError
from memoree.inputs import CitationGetInput
from memoree.projections.chunker import span_citation
from memoree.projections.text import floor_char_boundary, is_char_boundary

from memoree.projections.records import TextContent, content_for_output

__all__ = ["CitationResult", "citation_get", "parse_citation"]

MAX_CITATION_BYTES = 1024
MIN_FETCH_BYTES = 4  # the longest UTF-8 code point, so a fetch always returns something
MAX_FETCH_BYTES = 8192
MAX_ID_BYTES = 256
PREFIX = "memoree://artifact/"
_SPAN = re.compile(r"([0-9]+)-([0-9]+)")

NEXT_ACTIONS = {
    "malformed_citation": "Use a citation of the form memoree://artifact/<artifact_id>@<revision_id>#<start>-<end> as returned by search or recall.",
    "span_out_of_range": "Use a span inside the revision: start < end <= total_byte_count.",
    "unknown_artifact": "Check the artifact id; search or recall returns valid citations.",
    "unknown_revision": "Check the revision id; artifact.history lists the artifact's revisions.",
    "range_required": "Add a #start-end byte span, or read the whole revision with artifact.get.",
    "non_text_content": "Read the bytes with artifact.get; only text content is returned by citation.get.",
    "utf8_boundary": "Move the span ends onto UTF-8 code-point boundaries.",
    "invalid_output_limit": f"Set max_bytes between {MIN_FETCH_BYTES} and {MAX_FETCH_BYTES}.",
}


class CitationResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    content_is_untrusted: bool
    citation: str
    content: str
    byte_count: int
    media_type: str
    truncated: bool
    remaining_bytes: int | None = None


def _refuse(kind: str, message: str, **details: Any) -> CitationError:
    return CitationError(
        f"citation error ({kind}): {message}",
        details={"citation_error": kind, **details, "next_action": NEXT_ACTIONS[kind]},
    )


def parse_citation(citation: str) -> tuple[str, str, tuple[int, int] | None]:
    """``(artifact_id, revision_id, span or None)``; CITATION_ERROR malformed_citation otherwise."""
    if not 1 <= len(citation.encode("utf-8", "replace")) <= MAX_CITATION_BYTES:
        raise _refuse("malformed_citation", f"a citation is 1 to {MAX_CITATION_BYTES} bytes")
    if not citation.startswith(PREFIX):
        raise _refuse("malformed_citation", f"a citation starts with {PREFIX}")
    reference, hash_sign, fragment = citation[len(PREFIX):].partition("#")
    artifact_id, at, revision_id = reference.partition("@")
    if not at or not _valid_id(artifact_id) or not _valid_id(revision_id):
        raise _refuse("malformed_citation", "expected <artifact_id>@<revision_id>")
    if not hash_sign:
        return artifact_id, revision_id, None
    match = _SPAN.fullmatch(fragment)
    if match is None:
        raise _refuse("malformed_citation", "the fragment must be #<start>-<end> in decimal bytes")
    return artifact_id, revision_id, (int(match.group(1)), int(match.group(2)))


def _valid_id(value: str) -> bool:
    return (bool(value) and len(value.encode("utf-8", "replace")) <= MAX_ID_BYTES
            and "@" not in value and "#" not in value)


def citation_get(conn: Any, cas: Any, inp: CitationGetInput) -> CitationResult:
    if not MIN_FETCH_BYTES <= inp.max_bytes <= MAX_FETCH_BYTES:
        raise _refuse("invalid_output_limit",
                      f"max_bytes must be between {MIN_FETCH_BYTES} and {MAX_FETCH_BYTES}",
                      max_bytes=inp.max_bytes)
    artifact_id, revision_id, span = parse_citation(inp.citation)
    row = conn.execute(
        "SELECT r.media_type, r.blob_hash, r.size_bytes FROM artifact_revisions r "
        "WHERE r.id = ? AND r.artifact_id = ?", (revision_id, artifact_id),
    ).fetchone()
    if row is None:
        known = conn.execute("SELECT 1 FROM artifacts WHERE id = ?", (artifact_id,)).fetchone()
        kind = "unknown_revision" if known else "unknown_artifact"
        raise _refuse(kind, f"artifact {artifact_id} revision {revision_id} does not exist",
                      artifact_id=artifact_id, revision_id=revision_id)
    media_type, blob_hash, size = row
    if span is None:
        raise _refuse("range_required", "citation.get fetches a byte span, not a whole revision",
                      citation=span_citation(artifact_id, revision_id), media_type=media_type,
                      total_byte_count=size)
    start, end = span
    if start >= end or end > size:
        raise _refuse("span_out_of_range", f"span {start}-{end} is outside 0-{size}",
                      start_byte=start, end_byte=end, total_byte_count=size)
    data = cas.get(blob_hash, size)
    if not isinstance(content_for_output(media_type, data), TextContent):
        raise _refuse("non_text_content", f"revision {revision_id} is not returned as text",
                      media_type=media_type)
    if not (is_char_boundary(data, start) and is_char_boundary(data, end)):
        raise _refuse("utf8_boundary", f"span {start}-{end} splits a UTF-8 code point",
                      start_byte=start, end_byte=end)
    returned_end = end
    if end - start > inp.max_bytes:
        returned_end = floor_char_boundary(data, start + inp.max_bytes)
    truncated = returned_end < end
    return CitationResult(
        content_is_untrusted=True,
        citation=span_citation(artifact_id, revision_id, (start, returned_end)),
        content=data[start:returned_end].decode("utf-8"), byte_count=returned_end - start,
        media_type=media_type, truncated=truncated,
        remaining_bytes=end - returned_end if truncated else None,
    )
