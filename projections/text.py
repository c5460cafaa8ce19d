"""Text handling shared by the artifact projections: which bodies are indexed, and UTF-8 bytes.

This module owns the artifact.put body-indexing rule (§1.3: textual media types whose bytes are
valid UTF-8) and the small byte-offset helpers that keep every span on a code-point boundary.
"""

from __future__ import annotations

TEXTUAL_APPLICATION_SUBTYPES = frozenset(
    {"json", "xml", "yaml", "x-yaml", "toml", "javascript", "sql", "graphql"}
)


def is_textual_media_type(media_type: str) -> bool:
    """True for text/*, *+json, *+xml, image/svg+xml and the listed application/* types."""
    essence = media_type.split(";", 1)[0].strip().lower()
    kind, slash, subtype = essence.partition("/")
    if not slash:
        return False
    if kind == "text":
        return True
    if subtype.endswith(("+json", "+xml")):
        return True
    return kind == "application" and subtype in TEXTUAL_APPLICATION_SUBTYPES


def body_index_text(media_type: str, data: bytes) -> str:
    """The text a revision's body contributes to the indexes: empty unless textual UTF-8."""
    if not is_textual_media_type(media_type):
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return ""


def is_char_boundary(data: bytes, index: int) -> bool:
    """Whether a byte offset falls between UTF-8 code points (both ends count)."""
    if index <= 0 or index >= len(data):
        return index in (0, len(data))
    return not _is_continuation_byte(data[index])


def floor_char_boundary(data: bytes, index: int) -> int:
    """The largest code-point boundary at or below `index` (clamped to the data)."""
    index = max(0, min(index, len(data)))
    while index > 0 and index < len(data) and _is_continuation_byte(data[index]):
        index -= 1
    return index


def ceil_char_boundary(data: bytes, index: int) -> int:
    """The smallest code-point boundary at or above `index` (clamped to the data)."""
    index = max(0, min(index, len(data)))
    while index < len(data) and _is_continuation_byte(data[index]):
        index += 1
    return index


def truncate_utf8(text: str, max_bytes: int) -> tuple[str, bool]:
    """The longest prefix of `text` within `max_bytes` UTF-8 bytes, and whether it was cut."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, False
    end = floor_char_boundary(data, max(0, max_bytes))
    return data[:end].decode("utf-8"), True


def _is_continuation_byte(byte: int) -> bool:
    return byte & 0xC0 == 0x80
