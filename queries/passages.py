"""Passage-level evidence: which lines of an artifact answer the query, with exact byte spans.

This module owns how an artifact hit is cited (§5.7, refined): the best chunk (chunker v1) is the
one matching the most phrases and units (chunk membership, no statistics), then the best passage
score; inside it, the hit's excerpt is the span with the query's units — the best passage (a
line; a long line is cut at sentences, a long sentence at whitespace, ≤ ``MAX_PASSAGE_BYTES``)
widened over its best-scoring neighbours up to ``HIT_WINDOW_BYTES`` — never the chunk's head.
Passages are scored like BM25 over the query units (term frequency saturated, length
normalized) with the horizon's IDF, so claims and passages share one scale. ``artifact_passages``
gives context.build every scored passage of an artifact's best-matching chunks. Bounded: at most
``MAX_SCORED_CHUNKS`` chunks (≤ 4 KiB each) are read per artifact.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from memoree.projections.chunker import CHUNKER_VERSION, span_citation
from memoree.projections.fts_vocab import fold
from memoree.projections.text import floor_char_boundary

from .analysis import AnalyzedQuery
from .candidates import Candidate
from .chunk_probe import clear_probe, fill_probe, probe_matching
from .memo import DigestMemo, text_digest

__all__ = ["Passage", "PassageScorer", "artifact_passages", "attach_citations", "bm25_sum", "claim_citation"]

MAX_PASSAGE_BYTES = 480
HIT_WINDOW_BYTES = 1024
MAX_SCORED_CHUNKS = 8
MAX_BLANK_OFFSETS = 4
K1 = 1.2
B = 0.75
AVERAGE_PASSAGE_WORDS = 24
CITATION_SPAN_LABEL = "artifact_citation_span_v1"
_SENTENCE_END = re.compile(rb"[.!?][ \t]+")
_TOKENS = re.compile(r"[^\W_]+")


def claim_citation(claim_id: str, revision_id: str) -> str:
    return f"memoree://claim/{claim_id}@{revision_id}"


class Passage(msgspec.Struct, frozen=True):
    """A line or sentence of a revision body: exact ``[start, end)`` bytes, its score and units.
    A frozen struct (compared and hashed by its fields, as a frozen dataclass would be): a
    bundle makes a few hundred per request, at a tenth of a frozen dataclass's cost each."""

    start: int
    end: int
    text: str
    score: float
    units: frozenset[int]
    words: int = 0  # tokens, and each matched unit's count: context.build rescores lines
    counts: tuple[tuple[int, int], ...] = ()

    @property
    def size(self) -> int:
        return self.end - self.start


class PassageScorer:
    """BM25 of a short text against the query units, with IDF supplied per unit.

    A text is tokenized once (words folded as the word index folds them); one-word units are
    counted by looking their spellings up, multi-word units by a phrase pattern."""

    def __init__(self, analysis: AnalyzedQuery, idf: Sequence[float],
                 corrections: dict[int, list[str]] | None = None) -> None:
        corrections = corrections or {}
        self.idf = list(idf)
        self.words: dict[str, int] = {}
        self.phrases: list[tuple[int, re.Pattern[str]]] = []
        for index, unit in enumerate(analysis.units):
            spellings = (unit.display,) if unit.phrase else (*unit.variants, *corrections.get(index, ()))
            for spelling in spellings:
                parts = _TOKENS.findall(fold(spelling))
                if len(parts) == 1:
                    self.words.setdefault(parts[0], index)
                elif parts:
                    self.phrases.append((index, _unit_pattern(tuple(parts))))
        self.spellings = frozenset(self.words)

    def score(self, text: str) -> tuple[float, frozenset[int]]:
        counts, words = self.counts(text)
        return self.bm25(counts, words), frozenset(counts)

    def counts(self, text: str) -> tuple[dict[int, int], int]:
        """How often each unit occurs in ``text``, and how many words ``text`` has."""
        return self.folded_counts(folded_words(text))

    def folded_counts(self, folded: str) -> tuple[dict[int, int], int]:
        """``counts`` of a text given as its ``folded_words``."""
        tokens = folded.split()  # a token holds no whitespace, so this gives the tokens back
        counts: dict[int, int] = {}
        for token in tokens:
            index = self.words.get(token)
            if index is not None:
                counts[index] = counts.get(index, 0) + 1
        self._add_phrase_counts(folded, counts)
        return counts, len(tokens)

    def _add_phrase_counts(self, folded: str, counts: dict[int, int]) -> None:
        """Add to ``counts`` how often each phrase unit occurs in the folded text."""
        for index, pattern in self.phrases:
            found = len(pattern.findall(folded))
            if found:
                counts[index] = counts.get(index, 0) + found

    def chunk_counts(self, chunk: "LinedChunk") -> dict[int, dict[int, int]]:
        """``folded_counts`` of each line of ``chunk`` that holds a unit, by line number (the
        others count nothing): the one-word spellings a line holds are found by intersecting
        sets, counted and placed by ``tuple.count``/``index``, and each line's units come in the
        order of their first token in the line (as ``folded_counts`` inserts them, so sums over
        them add in the same order)."""
        words = self.words
        spellings = self.spellings
        counted: dict[int, dict[int, int]] = {}
        for line, (tokens, distinct) in enumerate(zip(chunk.tokens, chunk.distinct)):
            found = spellings.intersection(distinct)
            if not found:
                continue
            if len(found) == 1:
                (token,) = found
                counted[line] = {words[token]: tokens.count(token)}
                continue
            counts: dict[int, int] = {}
            for _, token in sorted((tokens.index(token), token) for token in found):
                index = words[token]
                counts[index] = counts.get(index, 0) + tokens.count(token)
            counted[line] = counts
        if self.phrases:
            for line, (_, _, _, folded) in enumerate(chunk.lines):
                counts = counted.get(line, {})
                self._add_phrase_counts(folded, counts)
                if counts:
                    counted[line] = counts
        return counted

    def bm25(self, counts: dict[int, int], words: int, idf: Sequence[float] | None = None) -> float:
        """BM25 of unit ``counts`` in a text of ``words`` words (``idf``: other weights per unit)."""
        return round(bm25_sum(self.idf if idf is None else idf, counts.items(), words), 12)


def bm25_sum(weights: Sequence[float], counts: Iterable[tuple[int, int]], words: int) -> float:
    """The unrounded BM25 sum of (unit, count) pairs in a text of ``words`` words."""
    norm = K1 * (1 - B + B * (words or 1) / AVERAGE_PASSAGE_WORDS)
    return sum(weights[i] * tf * (K1 + 1) / (tf + norm) for i, tf in counts)


@functools.lru_cache(maxsize=4096)
def _unit_pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    """A phrase over space-joined folded tokens."""
    return re.compile(r"(?<!\S)" + " ".join(map(re.escape, words)) + r"(?!\S)")


def folded_words(text: str) -> str:
    """The text's tokens, folded as the word index folds them, joined by single spaces."""
    return " ".join(_TOKENS.findall(fold_text(text)))


def fold_text(text: str) -> str:
    """Lower-case without accents, as the word index compares words."""
    if text.isascii():
        return text.lower()
    return fold.__wrapped__(text)  # not through the per-word cache


# ---------------------------------------------------------------------------------------------
# Cutting a chunk into passages


def passage_spans(data: bytes, start: int, end: int) -> list[tuple[int, int]]:
    """Lines of ``data[start:end]`` (without their newline); long ones cut at sentences, then
    at whitespace, every piece ≤ MAX_PASSAGE_BYTES and on a code-point boundary."""
    spans = []
    position = start
    while position < end:
        newline = data.find(b"\n", position, end)
        line_end = end if newline < 0 else newline
        if line_end > position and data[position:line_end].strip():
            spans.extend(_cut_long(data, position, line_end))
        position = line_end + 1
    return spans


def _cut_long(data: bytes, start: int, end: int) -> list[tuple[int, int]]:
    pieces = []
    while end - start > MAX_PASSAGE_BYTES:
        limit = start + MAX_PASSAGE_BYTES
        cut = None
        for match in _SENTENCE_END.finditer(data, start + MAX_PASSAGE_BYTES // 4, limit):
            cut = match.end()
        if cut is None:
            space = data.rfind(b" ", start + MAX_PASSAGE_BYTES // 4, limit)
            cut = space + 1 if space > 0 else floor_char_boundary(data, limit)
        if cut <= start:
            cut = floor_char_boundary(data, limit) or limit
        pieces.append((start, cut))
        start = cut
    pieces.append((start, end))
    return pieces


def score_passages(data: bytes, start: int, end: int, scorer: PassageScorer, offset: int = 0) -> list[Passage]:
    """The scored passages of ``data[start:end]``, their spans moved by ``offset`` (where
    ``data`` starts in its revision). A line holding no unit is the chunk's remembered blank
    passage (``LinedChunk.blanks``): only the lines that match are made per query."""
    chunk = lined_chunk(data, start, end)
    passages = list(chunk.blanks(offset))
    for line, counts in scorer.chunk_counts(chunk).items():
        s, e, text, _ = chunk.lines[line]
        words = len(chunk.tokens[line])
        passages[line] = Passage(s + offset, e + offset, text, scorer.bm25(counts, words), frozenset(counts),
                                 words, tuple(sorted(counts.items())))
    return passages


@dataclass(eq=False)
class LinedChunk:
    """A chunk's passages as scoring needs them, whatever the query: each line's (start, end,
    text, folded words), its folded tokens and the set of them (made by C loops: splitting and
    hashing), so a query's words are intersected with each line's set rather than every token of
    every line looked up once per query."""

    lines: tuple[tuple[int, int, str, str], ...]
    tokens: tuple[tuple[str, ...], ...]
    distinct: tuple[frozenset[str], ...]
    _blanks: dict[int, tuple[Passage, ...]] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, lines: tuple[tuple[int, int, str, str], ...]) -> "LinedChunk":
        # A token holds no whitespace, so splitting the folded words gives the tokens back.
        tokens = tuple(tuple(folded.split()) for _, _, _, folded in lines)
        return cls(lines, tokens, tuple(map(frozenset, tokens)))

    def blanks(self, offset: int) -> tuple[Passage, ...]:
        """Each line as the passage it is where it holds no query unit: its span moved by
        ``offset``, no units, and the score ``PassageScorer.bm25`` gives no counts (``round(0,
        12)``: the int 0), whatever the query. Made once per offset (a chunk's bytes sit at one
        offset of their revision; a few offsets are kept, then the memory starts again).
        Passages are frozen, so sharing them between requests changes nothing."""
        found = self._blanks.get(offset)
        if found is None:
            if len(self._blanks) >= MAX_BLANK_OFFSETS:
                self._blanks.clear()
            found = self._blanks[offset] = tuple(
                Passage(s + offset, e + offset, text, round(0, 12), frozenset(), words, ())
                for (s, e, text, _), words in zip(self.lines, map(len, self.tokens)))
        return found


_LINED: DigestMemo[LinedChunk] = DigestMemo(1024)  # ~20 KiB a chunk


def lined_chunk(data: bytes, start: int, end: int) -> LinedChunk:
    """The passages of ``data[start:end]`` with what scoring them needs that does not depend on
    the query (``LinedChunk``), cut, folded and indexed once per process for the same bytes (a
    conversation's chunks come back question after question). Keyed by a digest of the bytes
    (``queries.memo``)."""
    key = (text_digest(data), start, end)
    lined = _LINED.get(key)
    if lined is None:
        lined = _LINED.put(key, LinedChunk.of(tuple((s, e, text, folded_words(text))
                                                    for s, e in passage_spans(data, start, end)
                                                    for text in (data[s:e].decode("utf-8", "replace"),))))
    return lined


# ---------------------------------------------------------------------------------------------
# Chunks and artifact citations


@dataclass(frozen=True)
class ChunkRow:
    chunk_id: int
    revision_id: str
    row_kind: str
    ordinal: int | None
    start_byte: int | None
    end_byte: int | None

    @property
    def order(self) -> int:
        return -1 if self.ordinal is None else self.ordinal


def chunks_of(conn: Any, revision_ids: Sequence[str]) -> dict[str, list[ChunkRow]]:
    marks = ",".join("?" * len(revision_ids))
    found: dict[str, list[ChunkRow]] = {}
    for row in conn.execute(
        "SELECT chunk_id, revision_id, row_kind, ordinal, start_byte, end_byte FROM artifact_chunks "
        f"WHERE revision_id IN ({marks}) ORDER BY chunk_id", tuple(revision_ids),
    ).fetchall():
        found.setdefault(row[1], []).append(ChunkRow(*row))
    return found


def chunk_bytes(conn: Any, revision_id: str, start: int, end: int) -> bytes:
    row = conn.execute("SELECT substr(CAST(body AS BLOB), ?, ?) FROM artifact_search_text "
                       "WHERE revision_id = ?", (start + 1, end - start, revision_id)).fetchone()
    return bytes(row[0]) if row else b""


@dataclass
class ChunkMatch:
    """Per chunk row: matched units and phrases (membership in the chunk index)."""

    units: dict[int, set[int]]

    def strength(self, analysis: AnalyzedQuery, chunk_id: int) -> tuple[int, int]:
        matched = self.units.get(chunk_id, set())
        phrases = sum(1 for i in matched if analysis.units[i].phrase)
        return phrases, len(matched)


def chunk_matches(conn: Any, analysis: AnalyzedQuery, chunks: Sequence[ChunkRow],
                  units: Sequence[int] | None = None,
                  expressions: Sequence[str] | None = None) -> ChunkMatch:
    """Which units each chunk row matches (``expressions``: each unit's MATCH expression, by
    default the unit's own); the rows must be in the connection's chunk probe (``fill_probe``)."""
    ids = [ch.chunk_id for ch in chunks]
    matched: dict[int, set[int]] = {}
    if not ids:
        return ChunkMatch(matched)
    for index, unit in enumerate(analysis.units):
        if units is not None and index not in units:
            continue
        expression = expressions[index] if expressions else unit.fts_expression
        for chunk_id in probe_matching(conn, expression, ids):
            matched.setdefault(chunk_id, set()).add(index)
    return ChunkMatch(matched)


def ranked_chunks(conn: Any, analysis: AnalyzedQuery, rows: Sequence[ChunkRow], match: ChunkMatch,
                  scorer: PassageScorer, every_match: bool) -> list[tuple[ChunkRow, list[Passage]]]:
    """The body chunks that match any unit (only those tied for the most phrases and units
    unless ``every_match``), best first (phrases, units, best passage, order), with their
    scored passages; at most MAX_SCORED_CHUNKS are read."""
    body = [ch for ch in rows if ch.row_kind == "body" and ch.chunk_id in match.units]
    body.sort(key=lambda ch: (tuple(-x for x in match.strength(analysis, ch.chunk_id)), ch.order))
    if body and not every_match:
        best = match.strength(analysis, body[0].chunk_id)
        body = [ch for ch in body if match.strength(analysis, ch.chunk_id) == best]
    scored = []
    for ch in body[:MAX_SCORED_CHUNKS]:
        data = chunk_bytes(conn, ch.revision_id, ch.start_byte, ch.end_byte)
        scored.append((ch, score_passages(data, 0, len(data), scorer, ch.start_byte)))
    scored.sort(key=lambda item: (tuple(-x for x in match.strength(analysis, item[0].chunk_id)),
                                  -max((p.score for p in item[1]), default=0.0), item[0].order))
    return scored


def hit_window(passages: Sequence[Passage], chunk: ChunkRow) -> tuple[int, int]:
    """The best passage widened over its better neighbour, line by line, ≤ HIT_WINDOW_BYTES."""
    if not passages:
        return chunk.start_byte, chunk.end_byte
    best = max(range(len(passages)), key=lambda i: (passages[i].score, -i))
    low = high = best
    while True:
        options = []
        if low > 0 and passages[high].end - passages[low - 1].start <= HIT_WINDOW_BYTES:
            options.append((passages[low - 1].score, 0, low - 1, high))
        if high + 1 < len(passages) and passages[high + 1].end - passages[low].start <= HIT_WINDOW_BYTES:
            options.append((passages[high + 1].score, 1, low, high + 1))
        if not options:
            break
        _, _, low, high = max(options)
    return passages[low].start, passages[high].end


def _cite_title(c: Candidate) -> None:
    c.excerpt = c.title
    c.citation = span_citation(c.entity_id, c.revision_id)
    c.retrieval_keys["retrieval_match"] = "title"


def cite_artifact(conn: Any, c: Candidate, ranked: Sequence[tuple[ChunkRow, list[Passage]]]) -> None:
    if not ranked:
        _cite_title(c)
        return
    chunk, passages = ranked[0]
    start, end = hit_window(passages, chunk)
    c.excerpt = chunk_bytes(conn, c.revision_id, start, end).decode("utf-8")
    c.citation = span_citation(c.entity_id, c.revision_id, (start, end))
    c.cited_span = True
    c.retrieval_keys["retrieval_span"] = {
        "start_byte": start, "end_byte": end, "chunker_version": CHUNKER_VERSION,
        "coordinate_space": "immutable_artifact_bytes",
    }


def attach_citations(conn: Any, analysis: AnalyzedQuery, candidates: Sequence[Candidate],
                     scorer: PassageScorer, every_passage: bool = False,
                     expressions: Sequence[str] | None = None) -> dict[str, list[Passage]]:
    """Excerpt and citation for each hit (claims whole; artifacts their best passage window);
    returns each cited artifact revision's scored passages, best chunks first (with
    ``every_passage``, those of every matching chunk, for context.build). ``expressions``: the
    units' MATCH expressions at the caller's horizon (``candidates.unit_expressions``)."""
    artifacts = []
    for c in candidates:
        if c.citation:
            continue
        if c.entity_type == "claim":
            c.excerpt, c.citation = c.statement, claim_citation(c.entity_id, c.revision_id)
        else:
            artifacts.append(c)
    if not artifacts:
        return {}
    rows = chunks_of(conn, [c.revision_id for c in artifacts])
    all_rows = [ch for c in artifacts for ch in rows.get(c.revision_id, [])]
    fill_probe(conn, [ch.chunk_id for ch in all_rows])
    try:
        match = chunk_matches(conn, analysis, all_rows, expressions=expressions)
        if any(c.typo_expressions for c in artifacts):
            typo_match = _typo_chunk_matches(conn, artifacts, rows)
            for chunk_id, units in typo_match.items():
                match.units.setdefault(chunk_id, set()).update(units)
    finally:
        clear_probe(conn)
    passages: dict[str, list[Passage]] = {}
    for c in artifacts:
        ranked = ranked_chunks(conn, analysis, rows.get(c.revision_id, []), match, scorer, every_passage)
        cite_artifact(conn, c, ranked)
        passages[c.revision_id] = [p for _, found in ranked for p in found]
    return passages


def _typo_chunk_matches(conn: Any, artifacts: Sequence[Candidate],
                        rows: dict[str, list[ChunkRow]]) -> dict[int, set[int]]:
    """Chunks holding a typo candidate's corrections (so a typo-only hit cites where they are)."""
    found: dict[int, set[int]] = {}
    for c in artifacts:
        if not c.typo_expressions:
            continue
        ids = [ch.chunk_id for ch in rows.get(c.revision_id, [])]
        for index, expression in c.typo_expressions:
            for chunk_id in probe_matching(conn, expression, ids):
                found.setdefault(chunk_id, set()).add(index)
    return found
