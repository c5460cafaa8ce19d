"""The typo channel (`trigram_typo_v1` labels): corrections for words the horizon does not hold.

This module owns typo tolerance with bounded work. It runs only for a free unit whose word
(3..32 characters) matches nothing in the table at the caller's horizon. Corrections come from
the projection's vocabulary by index lookups, never by scanning text: words one edit away (the
symmetric-deletion index: one insertion, deletion, substitution or adjacent swap) and, for words
of four or more characters, words the query word abbreviates (a prefix, at most
``PREFIX_CANDIDATES`` per scope). A correction must be in the horizon's vocabulary, be similar
enough (normalized edit distance with adjacent swaps as one edit, optimal string alignment,
computed by rapidfuzz in C: ≥ 0.80 for a one-word query, ≥ 0.72 otherwise; prefixes count as
matched) and match an in-horizon document. At most
``MAX_CORRECTIONS`` per word are kept, most similar first; the documents they match become typo
candidates, qualified when enough units match exactly or through a correction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rapidfuzz.distance import OSA

from memoree.projections.fts_vocab import MAX_VOCAB_WORD, MIN_VOCAB_WORD, deletion_lookup_keys, deletions, fold

from .analysis import AnalyzedQuery, fts_phrase
from .candidates import Candidate, Horizon, Table, UnitMatches, known_terms, match_expression_docs, unit_idf

__all__ = ["Correction", "TypoUnit", "corrections_for", "fuzzy_qualify", "typo_idf", "typo_units"]

SINGLE_WORD_SIMILARITY = 0.80
SEVERAL_WORDS_SIMILARITY = 0.72
MIN_PREFIX_WORD = 4
PREFIX_CANDIDATES = 32
MAX_CORRECTIONS = 3


@dataclass(frozen=True)
class Correction:
    term: str
    similarity: float
    prefix: bool


@dataclass(frozen=True)
class TypoUnit:
    """A unit the horizon lacks, its accepted corrections and the documents they match."""

    index: int
    word: str
    corrections: tuple[Correction, ...]
    docs: tuple[int, ...]

    @property
    def similarity(self) -> float:
        return max(c.similarity for c in self.corrections)


def _one_edit_terms(conn: Any, word: str) -> set[str]:
    keys = deletion_lookup_keys(deletions(word) | {word})
    marks = ",".join("?" * len(keys))
    found = {row[0] for row in conn.execute(
        f"SELECT term FROM search_term_deletions WHERE deletion IN ({marks})", keys)}
    return found | deletions(word)


def _prefix_terms(conn: Any, horizon: Horizon, word: str) -> set[str]:
    if len(word) < MIN_PREFIX_WORD:
        return set()
    found: set[str] = set()
    for scope in horizon.scopes:
        found.update(row[0] for row in conn.execute(
            "SELECT term FROM search_terms WHERE scope = ? AND term > ? AND term < ? "
            "ORDER BY term LIMIT ?", (scope, word, word + "\U0010ffff", PREFIX_CANDIDATES)))
    return found


def corrections_for(conn: Any, horizon: Horizon, word: str, threshold: float) -> list[Correction]:
    """The horizon vocabulary's nearest spellings of ``word``, best first (bounded lookups)."""
    if not MIN_VOCAB_WORD <= len(word) <= MAX_VOCAB_WORD:
        return []
    near = {t for t in _one_edit_terms(conn, word) if len(t) >= MIN_VOCAB_WORD and t != word}
    prefixed = _prefix_terms(conn, horizon, word)
    known = known_terms(conn, horizon, sorted(near)) | prefixed
    found = []
    for term in known:
        similarity = OSA.normalized_similarity(word, term)
        prefix = term in prefixed
        if similarity >= threshold or prefix:
            found.append(Correction(term, round(similarity, 12), prefix))
    found.sort(key=lambda c: (c.prefix, -c.similarity, len(c.term), c.term))
    return found[:MAX_CORRECTIONS]


def typo_units(conn: Any, table: Table, horizon: Horizon, analysis: AnalyzedQuery,
               matches: UnitMatches) -> list[TypoUnit]:
    """Corrections for every free unit whose word matches nothing at this horizon."""
    words = [u.display for u in analysis.units if not u.phrase]
    threshold = SINGLE_WORD_SIMILARITY if len(words) == 1 else SEVERAL_WORDS_SIMILARITY
    found = []
    for index, unit in enumerate(analysis.units):
        if unit.phrase or matches.lists[index]:
            continue
        word = fold(unit.display)
        corrections = corrections_for(conn, horizon, word, threshold)
        if not corrections:
            continue
        expression = " OR ".join(fts_phrase(c.term) for c in corrections)
        docs, _ = match_expression_docs(conn, table, horizon, expression, matches.pinned)
        if docs:
            found.append(TypoUnit(index, unit.display, tuple(corrections), tuple(docs)))
    return found


def required_units(analysis: AnalyzedQuery) -> int:
    n = len(analysis.units)
    return 1 if n <= 1 else min(n, max(analysis.required_matches, math.ceil(3 * n / 5)))


def fuzzy_qualify(candidate: Candidate, analysis: AnalyzedQuery, exact: Sequence[bool],
                  typos: Sequence[TypoUnit], idf: Sequence[float]) -> None:
    """Typo fields of a candidate from its exact unit matches and the corrections it matches."""
    by_unit = {t.index: t for t in typos if candidate.doc_id in t.docs}
    if not by_unit:
        return
    similarities, matched, score = [], [], 0.0
    for index, unit in enumerate(analysis.units):
        if exact[index]:
            similarities.append(1.0)
            matched.append(unit.display)
            score += idf[index]
        elif index in by_unit:
            similarities.append(by_unit[index].similarity)
            matched.append(unit.display)
            score += idf[index] * by_unit[index].similarity
        else:
            similarities.append(0.0)
    phrases_ok = all(hit for unit, hit in zip(analysis.units, exact) if unit.phrase)
    candidate.trigram_score = round(score, 12)
    candidate.typo_units = [by_unit[i].word for i in sorted(by_unit)]
    candidate.trigram_matched_terms = matched
    candidate.trigram_similarity = round(sum(similarities) / len(similarities), 12)
    candidate.trigram_qualified = phrases_ok and len(matched) >= required_units(analysis)


def typo_idf(typos: Sequence[TypoUnit], doc_count: int, idf: list[float]) -> list[float]:
    """IDF per unit with each corrected unit's frequency taken from its corrections' matches."""
    result = list(idf)
    for t in typos:
        result[t.index] = unit_idf(len(t.docs), doc_count)
    return result
