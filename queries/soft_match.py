"""Soft term matching: how near, word by word, a text's words come to a query's words.

This module owns matching by meaning made of words instead of whole texts (late interaction,
max-sim): each term of a query is compared with every word of a text by the cosine of their
static vectors (the local model's token rows of the word summed and normalized,
``projections.embedding``), and the term's match in the text is its best cosine there, floored at
0 (1 where the text holds the word itself). A text's score is the weighted mean of its terms'
matches. One word-vector lexicon, one memory of each text's words and one kernel (``max_sim``)
serve two callers, each with the words, weights and rules its figures were measured with:

* **coverage** (``SoftMatcher``, ``coverage_terms``; ``queries.context_build`` orders its best
  candidate lines by it): words folded as the word index folds them, without this module's
  ``COVERAGE_STOPWORDS`` and numbers, terms of at least ``MIN_TERM_CHARS`` characters, weights
  given by the caller (the candidate lines' IDF), matches at most 1; a question's frame words
  (``queries.question_frame``: "kind", "describe") are not terms. A line that says "single
  parent" comes nearer "relationship status" than one that only names the speaker.
* **judgement** (``query_terms``, ``soft_scores``; ``queries.semantic``'s word-by-word acceptance):
  a question's letter words casefolded, without ``analysis.STOPWORDS`` and identifier-like pieces
  (an identifier is matched exactly by the lexical channel or not at all), weighed by the length
  of each word's summed token rows (a sum-pooled model's own weight for a word: "the" moves a
  text's vector little, "migration" much), against all letter words of the claim's text. A word
  and its prefix-negation ("uncompressed", "compressed": close vectors, opposite meanings) give
  each other no credit, nor does a word the typo channel matched only by its spelling.

Pure and deterministic: the same model, terms, weights and texts give the same numbers (a word's
vector does not depend on its batch, nor a text's score on the texts beside it). Word vectors and
each text's words are remembered per process, bounded (a conversation's lines and a store's
claims come back question after question); nothing depends on a store. Nothing here imports
numpy: it comes with the model, which the ``memoree call`` path never loads.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from memoree.projections.embedding import load_model

from .analysis import ENGLISH_STOPWORDS, STOPWORDS, is_identifier_like
from .memo import DigestMemo, text_digest
from .passages import folded_words
from .question_frame import is_frame_word

__all__ = ["QueryTerms", "SoftMatcher", "content_words", "coverage_terms", "letter_words",
           "max_sim", "query_terms", "soft_scores"]

# For coverage, a term or text word that is a function word is not compared.
COVERAGE_STOPWORDS = ENGLISH_STOPWORDS
MIN_TERM_CHARS = 3  # "s" of "Caroline's", "ll" of "it'll": pieces, not terms
NEGATING_PREFIXES = ("un", "in", "im", "il", "ir", "non", "dis")
MAX_QUERY_TERMS = 32  # a judged question's words
MAX_TEXT_WORDS = 512  # a judged claim text's words
MAX_WORDS = 16384  # remembered word vectors: 16 MiB of float32 rows at most, cleared when full
MAX_TEXTS = 8192  # remembered texts' word lists
_LETTERS = re.compile(r"[^\W\d_]{2,}")


# ---------------------------------------------------------------------------------------------
# Words


def content_words(text: str) -> tuple[str, ...]:
    """Coverage's words of a text: distinct, folded as the word index folds them, in order,
    without ``COVERAGE_STOPWORDS`` and numbers."""
    return tuple(word for word in dict.fromkeys(folded_words(text).split())
                 if word not in COVERAGE_STOPWORDS and not word.isdigit())


def letter_words(text: str, limit: int = MAX_TEXT_WORDS) -> tuple[str, ...]:
    """The judgement's words of a text: its first ``limit`` distinct runs of two or more
    letters, casefolded, in order."""
    return tuple(dict.fromkeys(w.casefold() for w in _LETTERS.findall(text)))[:limit]


_TEXT_WORDS: DigestMemo[tuple[str, ...]] = DigestMemo(MAX_TEXTS)


def _words_of(text: str, split: Callable[[str], tuple[str, ...]]) -> tuple[str, ...]:
    """``split(text)``, remembered by the text's digest (and which split made it)."""
    key = (split.__name__, text_digest(text))
    words = _TEXT_WORDS.get(key)
    if words is None:
        words = _TEXT_WORDS.put(key, split(text))
    return words


# ---------------------------------------------------------------------------------------------
# Word vectors and the max-sim kernel


class _Lexicon:
    """Each word's unit vector (a row of one growing matrix) and the length of its summed token
    rows, embedded once per process. Rows are read under ``lock``: a thread that clears or grows
    the lexicon never hands another a row of the wrong word."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.np = model.np
        self.rows: dict[str, int] = {}
        self.matrix = self.np.zeros((1024, model.table.shape[1]), dtype=self.np.float32)
        self.lengths = self.np.zeros(1024, dtype=self.np.float32)
        self.lock = threading.Lock()

    def ids(self, words: Sequence[str]) -> Any:
        """The rows of ``words`` (embedding the new ones), as an int array; under ``lock``."""
        missing = [w for w in dict.fromkeys(words) if w not in self.rows]
        if missing:
            if len(self.rows) + len(missing) > MAX_WORDS:
                self.rows.clear()
                missing = list(dict.fromkeys(words))
            needed = len(self.rows) + len(missing)
            if needed > self.matrix.shape[0]:
                self._grow(max(needed, min(2 * self.matrix.shape[0], MAX_WORDS)))
            start = len(self.rows)
            rows, lengths = self.model.embed_terms(missing)
            self.matrix[start:start + len(missing)] = rows
            self.lengths[start:start + len(missing)] = lengths
            for offset, word in enumerate(missing):
                self.rows[word] = start + offset
        return self.np.fromiter((self.rows[w] for w in words), dtype=self.np.intp, count=len(words))

    def _grow(self, size: int) -> None:
        kept = len(self.rows)
        matrix = self.np.zeros((size, self.matrix.shape[1]), dtype=self.np.float32)
        matrix[:kept] = self.matrix[:kept]
        lengths = self.np.zeros(size, dtype=self.np.float32)
        lengths[:kept] = self.lengths[:kept]
        self.matrix, self.lengths = matrix, lengths


_LEXICONS: dict[int, _Lexicon] = {}


def _lexicon(model: Any) -> _Lexicon:
    lexicon = _LEXICONS.get(id(model))
    if lexicon is None or lexicon.model is not model:
        lexicon = _LEXICONS[id(model)] = _Lexicon(model)
    return lexicon


def max_sim(model: Any, terms: Sequence[str], texts: Sequence[tuple[str, ...]],
            no_credit: Sequence[frozenset[str]] = ()) -> Any:
    """Each text's best cosine per term over its words, floored at 0: float32 ``(texts, terms)``
    (0 for a text without words). ``no_credit[j]``: words that give term ``j`` nothing."""
    np = model.np
    out = np.zeros((len(texts), len(terms)), dtype=np.float32)
    flat = [w for words in texts for w in words]
    if not terms or not flat:
        return out
    distinct = list(dict.fromkeys(flat))
    local = {word: i for i, word in enumerate(distinct)}
    lexicon = _lexicon(model)
    with lexicon.lock:
        rows = lexicon.ids([*terms, *distinct])  # one call: a reset inside keeps them all valid
        term_vectors = lexicon.matrix[rows[:len(terms)]]
        word_vectors = lexicon.matrix[rows[len(terms):]]
    # einsum, not a BLAS product: each entry is summed on its own (a text's figures never depend
    # on the texts beside it), and a few terms against a few hundred words is too small a
    # product for threads, which cost milliseconds on a busy machine (measured).
    cosines = np.einsum("ij,kj->ik", word_vectors, term_vectors)
    occurrences = cosines[np.fromiter((local[w] for w in flat), dtype=np.intp, count=len(flat))]
    lengths = np.fromiter((len(w) for w in texts), dtype=np.intp, count=len(texts))
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    if no_credit:
        _take_credit(occurrences, texts, starts, no_credit)
    filled = lengths > 0
    out[filled] = np.maximum.reduceat(occurrences, starts[filled], axis=0)
    np.maximum(out, 0.0, out=out)
    return out


def _take_credit(occurrences: Any, texts: Sequence[tuple[str, ...]], starts: Any,
                 no_credit: Sequence[frozenset[str]]) -> None:
    """Zero each term's cosine with the words that give it no credit, text by text."""
    excluded = frozenset().union(*no_credit)
    for start, words in zip(starts.tolist(), texts):
        if excluded.isdisjoint(words):
            continue
        positions = {w: i for i, w in enumerate(words)}
        for column, taboo in enumerate(no_credit):
            for word in taboo.intersection(positions):
                occurrences[start + positions[word], column] = 0.0


# ---------------------------------------------------------------------------------------------
# Coverage (context.build)


def coverage_terms(words: Sequence[str]) -> list[str]:
    """The words of ``words`` that are coverage terms: content words of at least
    ``MIN_TERM_CHARS`` characters that are not a question's frame words
    (``question_frame``), once each."""
    terms: list[str] = []
    for word in words:
        for part in content_words(word):
            if len(part) >= MIN_TERM_CHARS and not is_frame_word(part) and part not in terms:
                terms.append(part)
    return terms


class SoftMatcher:
    """Coverage terms with their weights, matched softly against texts."""

    def __init__(self, model: Any, terms: Sequence[str], weights: Sequence[float]) -> None:
        if len(terms) != len(weights):
            raise ValueError("one weight per term")
        self.model = model
        self.np = model.np
        self.terms = list(terms)
        self.weights = self.np.asarray([max(0.0, float(w)) for w in weights], dtype=self.np.float64)

    def matches(self, texts: Sequence[str]) -> Any:
        """Each text's best cosine per term, within [0, 1]: float32 ``(texts, terms)``."""
        found = max_sim(self.model, self.terms, [_words_of(text, content_words) for text in texts])
        return self.np.minimum(found, 1.0, out=found)

    def coverage(self, texts: Sequence[str]) -> list[float]:
        """Each text's soft coverage: its terms' matches, weighted mean (0 where no term has
        weight), rounded to 6 places so ties stay ties."""
        total = float(self.weights.sum())
        if total <= 0.0 or not texts:
            return [0.0] * len(texts)
        found = self.matches(texts).astype(self.np.float64) @ self.weights / total
        return [round(value, 6) for value in found.tolist()]


# ---------------------------------------------------------------------------------------------
# Judgement (recall's word-by-word acceptance)


@dataclass(frozen=True)
class QueryTerms:
    """A question's distinct content words and their weights (the lengths of their summed token
    rows)."""

    words: tuple[str, ...]
    weights: Any
    negations: tuple[frozenset[str], ...]  # per word: the words that negate it by a prefix


def query_terms(query: str) -> QueryTerms | None:
    """The question's content words (none of them a stopword or inside an identifier), or
    ``None`` where it has none or no model is loaded."""
    model = load_model()
    return None if model is None else _query_terms(model, query)


@functools.lru_cache(maxsize=256)
def _query_terms(model: Any, query: str) -> QueryTerms | None:
    """Once per distinct question per process (recall, then context.build, ask the same one)."""
    pieces = " ".join(piece for piece in query.split() if not is_identifier_like(piece))
    words = [w for w in letter_words(pieces, MAX_QUERY_TERMS * 2)
             if w not in STOPWORDS][:MAX_QUERY_TERMS]
    if not words:
        return None
    lexicon = _lexicon(model)
    with lexicon.lock:
        weights = lexicon.lengths[lexicon.ids(words)]
    weights.setflags(write=False)
    return QueryTerms(tuple(words), weights, tuple(_negating(w) for w in words))


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
    words = [_words_of(text, letter_words) for text in texts]
    total = float(terms.weights.sum())
    if total <= 0.0 or not any(words):
        return [0.0] * len(texts)
    best = max_sim(model, terms.words, words, terms.negations)
    scores = [0.0] * len(texts)
    for i, text_words in enumerate(words):
        if not text_words:
            continue
        spelled = {w.casefold() for w in by_spelling[i]} if i < len(by_spelling) else ()
        weights = terms.weights if not spelled else terms.weights * np.array(
            [word not in spelled for word in terms.words], dtype=terms.weights.dtype)
        scores[i] = round(float(best[i] @ weights) / total, 6)
    return scores
