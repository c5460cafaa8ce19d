"""Chunker v1 and excerpt windows: exact `[start_byte, end_byte)` spans over artifact bodies.

This module owns how a revision body is cut into citation chunks (§5.7: structural blocks packed
to a 2 KiB target, 4 KiB maximum, 256 B minimum tail; the chunks partition the UTF-8 body
exactly) and how a long excerpt is narrowed to a term-centred window whose byte span is reported
exactly (§6.1), plus the span citation format those windows are re-anchored with. Pure functions.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from itertools import accumulate

import msgspec

from .text import ceil_char_boundary, floor_char_boundary

CHUNKER_VERSION = 1
TARGET_CHUNK_BYTES = 2048
MAX_CHUNK_BYTES = 4096
MIN_TAIL_BYTES = 256
MAX_TERM_OCCURRENCES = 512

_WHITESPACE_BYTES = frozenset(b" \t\n\r\x0b\x0c")
_FENCE_MARKERS = (b"```", b"~~~")
# Oversized-block cut points in order of preference, as zero-width lookaheads so overlapping
# candidates are all seen: (pattern, cut offset from the match, bytes the lookahead inspects).
_CUT_PREFERENCES = (
    (re.compile(rb"(?=\n\n)"), 2, 2),  # after a blank line
    (re.compile(rb"(?=\n)"), 1, 1),  # after a newline
    (re.compile(rb"(?=[.!?][ \t\n\r\x0b\x0c])"), 1, 2),  # after sentence punctuation + space
    (re.compile(rb"(?=[ \t\n\r\x0b\x0c])"), 0, 1),  # before whitespace
)

Span = tuple[int, int]
TermGroup = str | Sequence[str]


class Chunk(msgspec.Struct, frozen=True):
    """One citation chunk: its ordinal, exact byte span in the body, and its text."""

    ordinal: int
    start_byte: int
    end_byte: int
    text: str


class ExcerptWindow(msgspec.Struct, frozen=True):
    """The bytes actually shown from an excerpt, with their span relative to that excerpt."""

    text: str
    start_byte: int
    end_byte: int
    truncated: bool

    def shifted(self, offset: int) -> Span:
        """The window's span in a parent coordinate space that starts at `offset`."""
        return (offset + self.start_byte, offset + self.end_byte)


def chunk_body(body: str) -> list[Chunk]:
    """Chunk a revision body; the chunks' spans tile the UTF-8 encoding of `body` exactly."""
    data = body.encode("utf-8")
    return [
        Chunk(ordinal=ordinal, start_byte=start, end_byte=end, text=data[start:end].decode("utf-8"))
        for ordinal, (start, end) in enumerate(chunk_spans(data))
    ]


def chunk_spans(data: bytes) -> list[Span]:
    """Byte spans of chunker v1 over UTF-8 `data`: blocks, oversize splits, then packing."""
    pieces: list[Span] = []
    for start, end in structural_blocks(data):
        pieces.extend(split_oversized_block(data, start, end))
    return pack_pieces(pieces)


def structural_blocks(data: bytes) -> list[Span]:
    """Markdown-ish blocks: headings start one, fences are one, blank lines end one."""
    blocks: list[Span] = []
    block_start = 0
    fence: bytes | None = None

    def close_block(at: int) -> None:
        nonlocal block_start
        if at > block_start:
            blocks.append((block_start, at))
            block_start = at

    for line_start, line_end in _line_spans(data):
        content = data[line_start:line_end].lstrip(b" \t")
        if fence is not None:
            if content.startswith(fence):
                close_block(line_end)
                fence = None
            continue
        opening = _fence_marker(content)
        if opening is not None:
            close_block(line_start)
            fence = opening
        elif content.startswith(b"#"):
            close_block(line_start)
        elif not content.strip():
            close_block(line_end)
    close_block(len(data))
    return blocks


def split_oversized_block(data: bytes, start: int, end: int) -> list[Span]:
    """Split a block longer than 4 KiB at the last preferred boundary ≥ the 2 KiB target."""
    pieces: list[Span] = []
    while end - start > MAX_CHUNK_BYTES:
        cut = _preferred_cut(data, start)
        pieces.append((start, cut))
        start = cut
    pieces.append((start, end))
    return pieces


def pack_pieces(pieces: Sequence[Span]) -> list[Span]:
    """Merge adjacent pieces toward the target, never past the maximum; absorb a short tail."""
    chunks: list[Span] = []
    for start, end in pieces:
        if chunks and _should_merge(chunks[-1], end):
            chunks[-1] = (chunks[-1][0], end)
        else:
            chunks.append((start, end))
    if len(chunks) >= 2:
        tail_start, tail_end = chunks[-1]
        previous_start = chunks[-2][0]
        if tail_end - tail_start < MIN_TAIL_BYTES and tail_end - previous_start <= MAX_CHUNK_BYTES:
            chunks[-2:] = [(previous_start, tail_end)]
    return chunks


def matched_window(text: str, terms: Sequence[TermGroup], max_bytes: int) -> ExcerptWindow:
    """A ≤ max_bytes window of `text` centred on the most distinct matched terms.

    Each entry of `terms` is one distinct term: a string, or a sequence of alternative spellings
    (for example a unit's inflection variants). Without any occurrence the head window is used.
    """
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return ExcerptWindow(text=text, start_byte=0, end_byte=len(data), truncated=False)
    occurrences = term_occurrences(text, terms)
    if not occurrences:
        return head_window(text, max_bytes)
    best_span, best_count = None, -1
    for anchor in sorted({start for start, _, _ in occurrences}):
        span = _window_around(data, anchor, max_bytes)
        count = _distinct_terms_within(occurrences, span)
        if count > best_count:
            best_span, best_count = span, count
    start, end = best_span
    return ExcerptWindow(
        text=data[start:end].decode("utf-8"), start_byte=start, end_byte=end, truncated=True
    )


def head_window(text: str, max_bytes: int) -> ExcerptWindow:
    """The first ≤ max_bytes bytes of `text`, cut back to a code-point boundary."""
    data = text.encode("utf-8")
    end = floor_char_boundary(data, max(0, max_bytes))
    return ExcerptWindow(
        text=data[:end].decode("utf-8"), start_byte=0, end_byte=end, truncated=end < len(data)
    )


def term_occurrences(text: str, terms: Sequence[TermGroup]) -> list[tuple[int, int, int]]:
    """Case-insensitive (start_byte, end_byte, term_index) hits, in text order, at most 512.

    Words inside a term may be separated in the text by any run of non-word characters or `_`,
    as FTS5's tokenizer does: "cold start" also finds "Cold-Start".
    """
    found: list[tuple[int, int, int]] = []
    for index, group in enumerate(terms):
        for pattern in _term_patterns(group):
            for match in pattern.finditer(text):
                if match.end() > match.start():
                    found.append((match.start(), match.end(), index))
    if not text.isascii():  # an ASCII text's character offsets are its byte offsets
        byte_offsets = [0, *accumulate(len(char.encode("utf-8")) for char in text)]
        found = [(byte_offsets[start], byte_offsets[end], index) for start, end, index in found]
    return sorted(set(found))[:MAX_TERM_OCCURRENCES]


def span_citation(artifact_id: str, revision_id: str, span: Span | None = None) -> str:
    """`memoree://artifact/A@R#start-end`, or revision-only when there is no span."""
    base = f"memoree://artifact/{artifact_id}@{revision_id}"
    if span is None:
        return base
    return f"{base}#{span[0]}-{span[1]}"


def _line_spans(data: bytes) -> list[Span]:
    spans: list[Span] = []
    start = 0
    while start < len(data):
        newline = data.find(b"\n", start)
        end = len(data) if newline < 0 else newline + 1
        spans.append((start, end))
        start = end
    return spans


def _fence_marker(content: bytes) -> bytes | None:
    for marker in _FENCE_MARKERS:
        if content.startswith(marker):
            return marker
    return None


def _preferred_cut(data: bytes, start: int) -> int:
    """Last cut in [start+target, start+max], by preference; else the char-boundary ceiling."""
    low, high = start + TARGET_CHUNK_BYTES, start + MAX_CHUNK_BYTES
    for lookahead, cut_offset, width in _CUT_PREFERENCES:
        cuts = [
            match.start() + cut_offset
            for match in lookahead.finditer(data, low - cut_offset, high - cut_offset + width)
        ]
        if cuts:
            return cuts[-1]
    return floor_char_boundary(data, high)


def _should_merge(current: Span, next_end: int) -> bool:
    combined = next_end - current[0]
    if combined <= TARGET_CHUNK_BYTES:
        return True
    return current[1] - current[0] < MIN_TAIL_BYTES and combined <= MAX_CHUNK_BYTES


def _term_patterns(group: TermGroup) -> list[re.Pattern[str]]:
    spellings = [group] if isinstance(group, str) else list(group)
    patterns = (_spelling_pattern(spelling) for spelling in spellings)
    return [pattern for pattern in patterns if pattern is not None]


@functools.lru_cache(maxsize=4096)
def _spelling_pattern(spelling: str) -> re.Pattern[str] | None:
    """One spelling's pattern, compiled once per process: a request asks for a dozen spellings
    per excerpt, more than `re`'s own cache of 512 patterns keeps across requests."""
    words = re.findall(r"[^\W_]+", spelling)
    if not words:
        return None
    return re.compile(r"[\W_]+".join(map(re.escape, words)), re.IGNORECASE)


def _window_around(data: bytes, anchor: int, max_bytes: int) -> Span:
    """Start max_bytes/4 before the anchor (then just after a nearby space), run max_bytes."""
    lead = max_bytes // 4
    start = ceil_char_boundary(data, anchor - lead)
    start = _skip_partial_word(data, start, limit=min(anchor, start + lead // 2))
    end = floor_char_boundary(data, start + max_bytes)
    return start, end


def _skip_partial_word(data: bytes, start: int, limit: int) -> int:
    if start == 0 or data[start - 1] in _WHITESPACE_BYTES:
        return start
    for index in range(start, limit):
        if data[index] in _WHITESPACE_BYTES:
            return index + 1
    return start


def _distinct_terms_within(occurrences: Sequence[tuple[int, int, int]], span: Span) -> int:
    start, end = span
    return len({term for first, last, term in occurrences if first >= start and last <= end})
