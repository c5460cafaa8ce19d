"""Soft term matching: how much of a query's weight a text's words come near, by word vectors.

This module owns one ranking signal that needs no shared word: each query term (a content word)
is compared with every content word of a text by the cosine of their static vectors (the local
model's token rows of the word summed and normalized, ``projections.embedding``); the term's
match in the text is its best cosine there, floored at 0 (late interaction, max-sim: 1 when the
text holds the word itself), and the text's **soft coverage** is the weighted mean of its terms'
matches (weights: the caller's IDF per term). A line that says "single parent" comes nearer
"relationship status" than one that only names the speaker, and a line holding every rare word of
the question covers 1.

Pure and deterministic: the same model, terms, weights and texts give the same numbers (a word's
vector does not depend on its batch). Word vectors and each text's words are remembered per
process, bounded (a conversation's lines come back question after question); nothing depends on
a store. Nothing here is imported on the ``memoree call`` path; numpy comes with the model.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from .memo import DigestMemo, text_digest
from .passages import folded_words

__all__ = ["SoftMatcher", "content_words", "query_terms"]

# Function words a question and its answer share without saying anything about it (the usual
# English list); a term or text word that is one of them is not compared.
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just me
might more most my myself no nor not now of off on once only or other our ours ourselves out over
own same she should so some such than that the their theirs them themselves then there these they
this those through to too under until up very was we were what when where which while who whom
why will with would you your yours yourself yourselves
""".split())
MIN_TERM_CHARS = 3  # "s" of "Caroline's", "ll" of "it'll": pieces, not terms
MAX_WORDS = 16384  # remembered word vectors: 16 MiB of float32 rows at most, cleared when full
MAX_TEXTS = 8192  # remembered texts' word lists


def content_words(text: str) -> tuple[str, ...]:
    """The text's distinct words, folded as the word index folds them, in order, without
    stopwords and numbers."""
    return tuple(word for word in dict.fromkeys(folded_words(text).split())
                 if word not in STOPWORDS and not word.isdigit())


def query_terms(words: Sequence[str]) -> list[str]:
    """The words of ``words`` that are soft-matching terms: content words of at least
    ``MIN_TERM_CHARS`` characters, once each."""
    terms: list[str] = []
    for word in words:
        for part in content_words(word):
            if len(part) >= MIN_TERM_CHARS and part not in terms:
                terms.append(part)
    return terms


class _Lexicon:
    """Each word's unit vector (a row of one growing matrix), embedded once per process. Rows
    are read under ``lock``: a thread that clears or grows the lexicon never hands another a
    row of the wrong word."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.np = model.np
        self.rows: dict[str, int] = {}
        self.matrix = self.np.zeros((1024, model.table.shape[1]), dtype=self.np.float32)
        self.lock = threading.Lock()

    def ids(self, words: Sequence[str]) -> Any:
        """The rows of ``words`` (embedding the new ones), as an int array."""
        missing = [w for w in dict.fromkeys(words) if w not in self.rows]
        if missing:
            if len(self.rows) + len(missing) > MAX_WORDS:
                self.rows.clear()
                missing = list(dict.fromkeys(words))
            needed = len(self.rows) + len(missing)
            if needed > self.matrix.shape[0]:
                size = max(needed, min(2 * self.matrix.shape[0], MAX_WORDS))
                grown = self.np.zeros((size, self.matrix.shape[1]),
                                      dtype=self.np.float32)
                grown[:len(self.rows)] = self.matrix[:len(self.rows)]
                self.matrix = grown
            start = len(self.rows)
            self.matrix[start:start + len(missing)] = self.model.embed(missing)
            for offset, word in enumerate(missing):
                self.rows[word] = start + offset
        return self.np.fromiter((self.rows[w] for w in words), dtype=self.np.intp, count=len(words))


_LEXICONS: dict[int, _Lexicon] = {}
_TEXT_WORDS: DigestMemo[tuple[str, ...]] = DigestMemo(MAX_TEXTS)


def _lexicon(model: Any) -> _Lexicon:
    lexicon = _LEXICONS.get(id(model))
    if lexicon is None or lexicon.model is not model:
        lexicon = _LEXICONS[id(model)] = _Lexicon(model)
    return lexicon


def _words_of(text: str) -> tuple[str, ...]:
    key = text_digest(text)
    words = _TEXT_WORDS.get(key)
    if words is None:
        words = _TEXT_WORDS.put(key, content_words(text))
    return words


class SoftMatcher:
    """Query terms with their weights, matched softly against texts."""

    def __init__(self, model: Any, terms: Sequence[str], weights: Sequence[float]) -> None:
        if len(terms) != len(weights):
            raise ValueError("one weight per term")
        self.model = model
        self.np = model.np
        self.terms = list(terms)
        self.weights = self.np.asarray([max(0.0, float(w)) for w in weights], dtype=self.np.float64)

    def matches(self, texts: Sequence[str]) -> Any:
        """Each text's best cosine per term, floored at 0: float32 ``(texts, terms)``."""
        np = self.np
        out = np.zeros((len(texts), len(self.terms)), dtype=np.float32)
        if not self.terms or not texts:
            return out
        words = [_words_of(text) for text in texts]
        flat = [w for text_words in words for w in text_words]
        if not flat:
            return out
        distinct = list(dict.fromkeys(flat))
        local = {word: i for i, word in enumerate(distinct)}
        lexicon = _lexicon(self.model)
        with lexicon.lock:
            rows = lexicon.ids([*self.terms, *distinct])  # one call: a reset inside keeps them all valid
            term_vectors = lexicon.matrix[rows[:len(self.terms)]]
            word_vectors = lexicon.matrix[rows[len(self.terms):]]
        # einsum, not a BLAS product: a few terms against a few hundred words is too small a
        # product for threads, which cost milliseconds on a busy machine (measured).
        cosines = np.einsum("ij,kj->ik", word_vectors, term_vectors)
        occurrences = cosines[np.fromiter((local[w] for w in flat), dtype=np.intp, count=len(flat))]
        lengths = np.fromiter((len(w) for w in words), dtype=np.intp, count=len(words))
        filled = lengths > 0
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[filled]
        out[filled] = np.maximum.reduceat(occurrences, starts, axis=0)
        np.clip(out, 0.0, 1.0, out=out)
        return out

    def coverage(self, texts: Sequence[str]) -> list[float]:
        """Each text's soft coverage: its terms' matches, weighted mean (0 where no term has
        weight), rounded to 6 places so ties stay ties."""
        total = float(self.weights.sum())
        if total <= 0.0 or not texts:
            return [0.0] * len(texts)
        found = self.matches(texts).astype(self.np.float64) @ self.weights / total
        return [round(value, 6) for value in found.tolist()]
