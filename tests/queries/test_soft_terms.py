"""Soft term matching: each of a question's content words scored by its nearest word in a text,
weighted by the model's own weight for the word, with negations and spelling-only matches kept out."""

from __future__ import annotations

import pytest

from memoree.projections.embedding import load_model
from memoree.queries.soft_terms import query_terms, soft_scores

pytestmark = pytest.mark.skipif(load_model() is None, reason="the embedding model is not installed")


def score(query: str, text: str, by_spelling: tuple[str, ...] = ()) -> float:
    terms = query_terms(query)
    assert terms is not None
    return soft_scores(terms, [text], [set(by_spelling)])[0]


def test_a_text_using_every_question_word_scores_one() -> None:
    """Each content word of the question found as such in the text gives the full score."""
    assert 1.0 == pytest.approx(score("When do the vault keys rotate?", "Vault keys rotate every quarter."))


def test_near_words_score_between_unrelated_and_exact() -> None:
    """A text that says the question's words in other words scores above an unrelated one."""
    near = score("Did the experimental build get smaller?", "The size experiment reduced the bundle.")
    unrelated = score("Did the experimental build get smaller?", "Invoices are stored in PostgreSQL.")
    assert unrelated < near < 1.0


def test_stopwords_and_identifier_pieces_are_not_terms() -> None:
    """Only plain content words are terms: stopwords and identifier-like pieces are left out."""
    terms = query_terms("What is SCOPED_ALPHA_01 in APP-BOUNDARY-101 for the cache?")
    assert terms is not None and ("cache",) == terms.words
    assert query_terms("SCOPED_ALPHA_01") is None


def test_a_function_word_weighs_less_than_a_content_word() -> None:
    """The weights are the lengths of the words' summed token rows: "go" moves a text less than "migration"."""
    terms = query_terms("go migration")
    assert terms is not None and terms.weights[0] < terms.weights[1]


def test_a_word_and_its_negation_by_prefix_are_not_near() -> None:
    """"uncompressed" and "compressed" embed close together but mean the opposite: no credit."""
    model = load_model()
    rows = model.embed(["uncompressed", "compressed"])
    assert float(rows[0] @ rows[1]) > 0.5
    assert score("uncompressed", "compressed archives") == score("uncompressed", "archives") < 0.5


def test_a_word_matched_only_by_its_spelling_counts_nothing() -> None:
    """A question word that the typo channel matched by spelling ("final" in "finalized") scores 0 there."""
    assert score("final approval", "finalized approval", ("final",)) < score("final approval", "finalized approval")
    assert 0.0 == score("final", "finalized contracts", ("final",))


def test_a_texts_score_does_not_depend_on_the_texts_beside_it() -> None:
    """Scored alone or among others, in any order, a text gets the same score."""
    terms = query_terms("Did the experimental build get smaller?")
    texts = ["The size experiment reduced the bundle.", "", "Invoices are stored in PostgreSQL.",
             "Deploys are frozen on Fridays."]
    together = soft_scores(terms, texts)
    assert [soft_scores(terms, [text])[0] for text in texts] == together
    assert together[::-1] == soft_scores(terms, texts[::-1]) and 0.0 == together[1]
