"""Deterministic risk signals for retrieved, untrusted text (protocol §6.2).

This module owns the explainable substring tests that label instruction-like language in
context.build manifests and recall/retrieve artifact references. Beyond the reference's plain
lower-cased matching it also sees through Unicode disguises (zero-width and bidi controls,
Unicode tag characters, fullwidth/compatibility forms, accents and common homoglyphs) and reports
hidden or bidi characters as a signal of their own. An empty list is never a safety verdict.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from .memo import DigestMemo, text_digest

INSTRUCTION_OVERRIDE = "instruction_override_language"
ROLE_SPOOFING = "role_spoofing_language"
TOOL_EXECUTION = "tool_execution_language"
SENSITIVE_DATA = "sensitive_data_language"
HIDDEN_CHARACTERS = "hidden_unicode_characters"

SIGNAL_PHRASES: dict[str, tuple[str, ...]] = {
    INSTRUCTION_OVERRIDE: (
        "ignore previous",
        "ignore all previous",
        "disregard previous",
        "override the system",
        "forget your instructions",
    ),
    ROLE_SPOOFING: (
        "system prompt",
        "# system",
        "<system",
        "[system]",
        "developer message",
        "assistant:",
    ),
    TOOL_EXECUTION: ("tool_call", "function_call", "run this command", "execute this command"),
    SENSITIVE_DATA: ("api key", "access token", "private key", "environment variables"),
}

# Invisible characters that have no business in retrieved plain text.
ZERO_WIDTH_CHARACTERS = frozenset(
    "\u00ad\u180e\u200b\u2060\u2061\u2062\u2063\u2064\ufeff\ufff9\ufffa\ufffb"
)
# Embeddings, overrides and isolates: the "Trojan Source" reordering controls.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Direction marks are legitimate in right-to-left text, so they count only in text without it.
BIDI_MARKS = frozenset("\u200e\u200f\u061c")
# Joiners are legitimate between non-ASCII characters (emoji sequences, Persian, Indic scripts).
JOINERS = frozenset("\u200c\u200d")

_TAG_FIRST, _TAG_LAST = 0xE0000, 0xE007F
_BLACK_FLAG = "\U0001f3f4"
_CANCEL_TAG = "\U000e007f"
_RIGHT_TO_LEFT_CLASSES = frozenset({"R", "AL"})

# Latin lookalikes from Cyrillic and Greek that NFKC leaves alone.
_HOMOGLYPHS = str.maketrans(
    {
        "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o",
        "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "і": "i", "ї": "i", "ј": "j",
        "ѕ": "s", "ԁ": "d", "ɡ": "g", "ԛ": "q", "ԝ": "w", "ο": "o", "α": "a", "ε": "e",
        "ι": "i", "κ": "k", "ν": "v", "ρ": "p", "τ": "t", "υ": "u", "χ": "x",
    }
)


def risk_signals(text: str) -> list[str]:
    """Sorted, de-duplicated signal names for `text`."""
    if text.isascii():
        return _ascii_signals(text)
    key = text_digest(text)
    signals = _UNICODE_SIGNALS.get(key)
    if signals is None:
        signals = _UNICODE_SIGNALS.put(key, tuple(_unicode_signals(text)))
    return list(signals)


# Folding a non-ASCII text (NFKC, NFKD, marks, lookalikes) costs about a millisecond for a
# session's excerpt, and the same excerpts come back question after question: their signals
# are remembered per process by a digest of the text (the answer depends on the text alone).
_UNICODE_SIGNALS: DigestMemo[tuple[str, ...]] = DigestMemo(2048)


def _unicode_signals(text: str) -> list[str]:
    views = matching_views(text)
    signals = {
        name
        for name, phrases in SIGNAL_PHRASES.items()
        if any(phrase in view for view in views for phrase in phrases)
    }
    if has_hidden_characters(text):
        signals.add(HIDDEN_CHARACTERS)
    return sorted(signals)


def _ascii_signals(text: str) -> list[str]:
    """ASCII text has no hidden, compatibility, accented or lookalike characters, so its views
    are the lower-cased text and its whitespace-collapsed form (a fast path, same answer)."""
    lowered = text.lower()
    views = (lowered, " ".join(lowered.split()))
    return sorted(name for name, phrases in SIGNAL_PHRASES.items()
                  if any(phrase in view for view in views for phrase in phrases))


def hit_risk_signals(title: str, excerpt: str | None) -> list[str]:
    """Signals for a retrieved hit, tested over its title and excerpt as the reference does."""
    return risk_signals(title + "\n" + (excerpt or ""))


def matching_views(text: str) -> tuple[str, ...]:
    """The spellings phrases are tested against: the reference's, then de-obfuscated ones.

    Hidden characters are both removed ("ig<ZWSP>nore") and read as spaces ("ignore<ZWSP>
    previous"), because either may be how a model reads them.
    """
    decoded = decode_tag_characters(text)
    joined = fold_for_matching(strip_hidden_characters(decoded, replacement=""))
    spaced = fold_for_matching(strip_hidden_characters(decoded, replacement=" "))
    return (text.lower(), joined, spaced, fold_marks_and_homoglyphs(joined))


def fold_for_matching(text: str) -> str:
    """NFKC (fullwidth, ligatures, math letters), case-folded, with whitespace runs collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.split())


@functools.cache
def _character_classes() -> tuple[frozenset[str], re.Pattern[str], frozenset[str]]:
    """Every format (Cf) character, and a pattern of every combining mark, found once by
    scanning the planes that hold them (BMP, SMP and the tag plane), so the per-text work is
    done by C loops (``translate``, ``re.sub``, set operations) instead of per-character calls."""
    planes = (*range(0x20000), *range(0xE0000, 0xE1000))
    formats = frozenset(chr(cp) for cp in planes if unicodedata.category(chr(cp)) == "Cf")
    marks = [chr(cp) for cp in planes if unicodedata.combining(chr(cp))]
    return formats, re.compile("[" + "".join(re.escape(m) for m in marks) + "]+"), frozenset(marks)


_TAG_DECODING = {cp: cp - _TAG_FIRST for cp in range(0xE0020, 0xE007F)}
_SUSPECT = ZERO_WIDTH_CHARACTERS | BIDI_CONTROLS | BIDI_MARKS | JOINERS | frozenset(
    chr(cp) for cp in range(_TAG_FIRST, _TAG_LAST + 1))


def fold_marks_and_homoglyphs(text: str) -> str:
    """Drop combining marks ("ïgnore") and map Cyrillic/Greek lookalikes to Latin letters."""
    decomposed = unicodedata.normalize("NFKD", text)
    _, pattern, marks = _character_classes()
    unmarked = decomposed if marks.isdisjoint(decomposed) else pattern.sub("", decomposed)
    return unmarked.translate(_HOMOGLYPHS)


def strip_hidden_characters(text: str, replacement: str) -> str:
    """Replace every default-invisible format character (category Cf) with `replacement`."""
    formats = _character_classes()[0]
    present = formats.intersection(text)
    if not present:
        return text
    return text.translate({ord(char): replacement for char in present})


def decode_tag_characters(text: str) -> str:
    """Map Unicode tag characters (U+E0020–E007E) to the ASCII they smuggle."""
    return text.translate(_TAG_DECODING)


def has_hidden_characters(text: str) -> bool:
    """Zero-width, bidi-control or tag characters outside their legitimate uses."""
    if _SUSPECT.isdisjoint(text):
        return False
    has_right_to_left = any(
        unicodedata.bidirectional(char) in _RIGHT_TO_LEFT_CLASSES
        for char in text
        if char not in BIDI_MARKS
    )
    for index, char in enumerate(text):
        if char == "\ufeff" and index == 0:
            continue  # a leading byte-order mark is an encoding artefact, not a disguise
        if char in ZERO_WIDTH_CHARACTERS or char in BIDI_CONTROLS:
            return True
        if char in BIDI_MARKS and not has_right_to_left:
            return True
        if char in JOINERS and _touches_ascii(text, index):
            return True
        if _is_tag(char) and not _in_emoji_flag_sequence(text, index):
            return True
    return False


def _is_invisible(char: str) -> bool:
    return unicodedata.category(char) == "Cf"


def _is_tag(char: str) -> bool:
    return _TAG_FIRST <= ord(char) <= _TAG_LAST


def _touches_ascii(text: str, index: int) -> bool:
    before = text[index - 1] if index > 0 else ""
    after = text[index + 1] if index + 1 < len(text) else ""
    return not before or not after or before.isascii() or after.isascii()


def _in_emoji_flag_sequence(text: str, index: int) -> bool:
    """Subdivision flags (🏴 + tag letters + cancel tag) use tag characters legitimately."""
    start = index
    while start > 0 and _is_tag(text[start - 1]):
        start -= 1
    end = index
    while end + 1 < len(text) and _is_tag(text[end + 1]):
        end += 1
    return start > 0 and text[start - 1] == _BLACK_FLAG and text[end] == _CANCEL_TAG
