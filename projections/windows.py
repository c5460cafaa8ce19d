"""Passage windows for the vectors projection: which spans of an artifact's text get a vector.

A pure function of the text, shared by the vectors projector and the replay's embedding worker
(``projections.embed_worker``), so whichever process embeds a revision cuts it the same way:
whole lines packed into windows of at most ``PASSAGE_BYTES`` (a longer line split at spaces,
never inside a character), each an exact ``[start_byte, end_byte)`` of the text, the first
``MAX_PASSAGES`` of them.
"""

from __future__ import annotations

__all__ = ["MAX_PASSAGES", "PASSAGE_BYTES", "document_passages", "passage_spans"]

PASSAGE_BYTES = 512
# A revision's passages past this many are not embedded: they bound one write's work (the first
# 256 KiB of text are covered; lexical search still covers all of it).
MAX_PASSAGES = 512


def document_passages(body: str) -> tuple[list[tuple[int, int]], list[str]]:
    """The spans a revision's text is embedded in (at most ``MAX_PASSAGES``) and their texts."""
    data = body.encode("utf-8")
    spans = passage_spans(data)[:MAX_PASSAGES]
    return spans, [data[start:end].decode("utf-8") for start, end in spans]


def _char_start(data: bytes, index: int) -> int:
    """The nearest index at or before ``index`` that starts a UTF-8 character."""
    while 0 < index < len(data) and (data[index] & 0xC0) == 0x80:
        index -= 1
    return index


def _split_long(data: bytes, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    spans = []
    while end - start > limit:
        cut = data.rfind(b" ", start + 1, start + limit)
        cut = cut + 1 if cut > start else _char_start(data, start + limit)
        if cut <= start:  # a character wider than the limit cannot happen for limit >= 4
            cut = start + limit
        spans.append((start, cut))
        start = cut
    spans.append((start, end))
    return spans


def passage_spans(data: bytes, limit: int = PASSAGE_BYTES) -> list[tuple[int, int]]:
    """Windows of whole lines (a longer line split at spaces), each at most ``limit`` bytes,
    that together cover the non-blank text; spans are exact byte offsets into ``data``."""
    spans: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    position = 0
    for line in data.splitlines(keepends=True):
        start, end = position, position + len(line)
        position = end
        if not line.strip():
            continue
        if current is not None and end - current[0] <= limit:
            current = (current[0], end)
            continue
        if current is not None:
            spans.append(current)
        pieces = _split_long(data, start, end, limit)
        spans.extend(pieces[:-1])
        current = pieces[-1]
    if current is not None:
        spans.append(current)
    return spans
