"""Soft term matching: how near, word by word, a claim's text comes to a question's words.

This module owns a judgement by meaning made of words instead of whole texts. A static embedding
of a whole question is near every text of its register and topic; a question is answered by a
claim when most of *its own distinct words* each find a near word in what the claim says (its
statement, and the title and cited text of its evidence). So each content word of the question
is scored by its best cosine against the words of the claim's text (1.0 where the claim uses the
word itself), and the scores are averaged, each word weighted by the length of its summed token
rows in the model (a sum-pooled static model's own weight for a word: "the" moves a text's
vector little, "migration" much).

What is left out on purpose: the query's stopwords and identifier-like pieces (an identifier is
matched exactly by the lexical channel or not at all; its sub-words mean nothing), and a pair
of words where one is the other with a negating prefix ("uncompressed" and "compressed" embed
close together, and mean the opposite). Everything here depends only on the texts and the model,
so each claim text's word rows are remembered by the text's digest (``queries.memo``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from memoree.projections.embedding import load_model

from .analysis import STOPWORDS, is_identifier_like
from .memo import DigestMemo, text_digest

__all__ = ["QueryTerms", "query_terms", "soft_scores"]

NEGATING_PREFIXES = ("un", "in", "im", "il", "ir", "non", "dis")
MAX_QUERY_TERMS = 32
MAX_TEXT_WORDS = 512
_LETTERS = re.compile(r"[^\W\d_]{2,}")
_WORD_ROWS: DigestMemo[tuple[dict[str, int], Any]] = DigestMemo(4096)


@dataclass(frozen=True)
class QueryTerms:
    """A question's distinct content words, their unit rows (``(terms, 256)``) and weights."""

    words: tuple[str, ...]
    rows: Any
    weights: Any
    negations: tuple[frozenset[str], ...]  # per word: the words that negate it by a prefix


def _words(text: str, limit: int) -> list[str]:
    return list(dict.fromkeys(w.casefold() for w in _LETTERS.findall(text)))[:limit]


def query_terms(query: str) -> QueryTerms | None:
    """The question's content words (none of them a stopword or inside an identifier), or
    ``None`` where it has none or no model is loaded."""
    model = load_model()
    return None if model is None else _query_terms(model, query)


@functools.lru_cache(maxsize=256)
def _query_terms(model: Any, query: str) -> QueryTerms | None:
    """Once per distinct question per process (recall, then context.build, ask the same one)."""
    pieces = " ".join(piece for piece in query.split() if not is_identifier_like(piece))
    words = [w for w in _words(pieces, MAX_QUERY_TERMS * 2) if w not in STOPWORDS][:MAX_QUERY_TERMS]
    if not words:
        return None
    rows, weights = model.embed_terms(words)
    rows.setflags(write=False)
    weights.setflags(write=False)
    return QueryTerms(tuple(words), rows, weights, tuple(_negating(w) for w in words))


def _text_rows(model: Any, text: str) -> tuple[dict[str, int], Any]:
    """The text's distinct words (each with its row) and their unit rows, remembered."""
    key = text_digest(text)
    found = _WORD_ROWS.get(key)
    if found is None:
        words = _words(text, MAX_TEXT_WORDS)
        rows = model.embed(words) if words else model.np.zeros((0, model.table.shape[1]), model.np.float32)
        rows.setflags(write=False)
        found = _WORD_ROWS.put(key, ({w: i for i, w in enumerate(words)}, rows))
    return found


def _negating(word: str) -> frozenset[str]:
    """The words that are ``word`` with a negating prefix added or taken off."""
    added = {prefix + word for prefix in NEGATING_PREFIXES}
    removed = {word[len(prefix):] for prefix in NEGATING_PREFIXES
               if word.startswith(prefix) and len(word) - len(prefix) >= 3}
    return frozenset(added | removed)


def soft_scores(terms: QueryTerms, texts: Sequence[str],
                by_spelling: Sequence[Collection[str]] = ()) -> list[float]:
    """For each text, the weighted mean over the question's words of each word's best cosine
    against the text's words (0 for a text with none). ``by_spelling[i]``: the question's words
    that text ``i`` matches only by a spelling correction (the typo channel's "final" in
    "finalized"); they count 0 there: their embeddings share a token, not a meaning."""
    model = load_model()
    np = model.np
    entries = [_text_rows(model, text) for text in texts]
    total = float(terms.weights.sum())
    filled = [i for i, (positions, _) in enumerate(entries) if positions]
    if not filled or total <= 0.0:
        return [0.0] * len(texts)
    starts = np.cumsum([0] + [len(entries[i][0]) for i in filled[:-1]])
    # One product for every text's words; einsum sums each entry on its own, so a text's
    # scores never depend on the texts judged beside it.
    near = np.einsum("ij,kj->ik", np.concatenate([entries[i][1] for i in filled]), terms.rows)
    negating = frozenset().union(*terms.negations)
    for start, i in zip(starts, filled):
        positions = entries[i][0]
        if negating.isdisjoint(positions):
            continue
        for column, negations in enumerate(terms.negations):
            for word in negations.intersection(positions):
                near[start + positions[word], column] = 0.0
    best = np.maximum(np.maximum.reduceat(near, starts, axis=0), 0.0)
    scores = [0.0] * len(texts)
    for row, i in enumerate(filled):
        spelled = {w.casefold() for w in by_spelling[i]} if i < len(by_spelling) else ()
        weights = terms.weights if not spelled else terms.weights * np.array(
            [word not in spelled for word in terms.words], dtype=terms.weights.dtype)
        scores[i] = round(float(best[row] @ weights) / total, 6)
    return scores
