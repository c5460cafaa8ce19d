"""Soft term matching: query terms matched against a text's words by the static model's vectors."""

from __future__ import annotations

import pytest

from memoree.projections.embedding import load_model
from memoree.queries import soft_match
from memoree.queries.memo import DigestMemo
from memoree.queries.soft_match import SoftMatcher, content_words, query_terms


@pytest.fixture
def model():  # type: ignore[no-untyped-def]
    found = load_model()
    if found is None:
        pytest.skip("the embedding model is not installed here")
    return found


class TestWords:
    def test_content_words_are_folded_distinct_and_without_stopwords_or_numbers(self) -> None:
        """Stopwords and numbers go, case and accents fold, a repeated word counts once."""
        assert ("cafe", "paris") == content_words("The Café in Paris, the CAFE, 2023")

    def test_query_terms_drop_word_pieces(self) -> None:
        """The "s" of a possessive is not a term; a term is kept once."""
        assert ["caroline", "relationship", "status"] == query_terms(["caroline", "s", "relationship", "status", "Status"])


class TestMatching:
    def test_a_text_holding_a_term_matches_it_fully(self, model) -> None:  # type: ignore[no-untyped-def]
        """The word itself has cosine 1 with itself: a text with every term covers 1."""
        matcher = SoftMatcher(model, ["painting", "lake"], [2.0, 1.0])
        assert [1.0] == matcher.coverage(["Melanie: my painting of the lake"])

    def test_a_near_word_counts_more_than_an_unrelated_one(self, model) -> None:  # type: ignore[no-untyped-def]
        """No shared word: a line about art comes nearer "painting" than one about trains."""
        matcher = SoftMatcher(model, ["painting"], [1.0])
        art, train = matcher.coverage(["I love art and museums", "the train was late"])
        assert art > train >= 0.0

    def test_coverage_is_the_weighted_mean_of_each_terms_best_match(self, model) -> None:  # type: ignore[no-untyped-def]
        """A text holding only the heavier term covers that term's share of the weight."""
        matcher = SoftMatcher(model, ["painting", "zebra"], [3.0, 1.0])
        matches = matcher.matches(["painting"])[0]
        assert 1.0 == pytest.approx(float(matches[0]))
        expected = (3.0 * 1.0 + 1.0 * float(matches[1])) / 4.0
        assert expected == pytest.approx(matcher.coverage(["painting"])[0], abs=1e-6)

    def test_a_text_without_content_words_and_terms_without_weight_cover_nothing(self, model) -> None:  # type: ignore[no-untyped-def]
        """Only stopwords: 0; all weights 0: 0 for every text; no terms: 0."""
        assert [0.0] == SoftMatcher(model, ["painting"], [1.0]).coverage(["it is what it is"])
        assert [0.0, 0.0] == SoftMatcher(model, ["painting"], [0.0]).coverage(["painting", "art"])
        assert [0.0] == SoftMatcher(model, [], []).coverage(["painting"])

    def test_one_weight_per_term(self, model) -> None:  # type: ignore[no-untyped-def]
        """A mismatched weight list is a programming error, said at once."""
        with pytest.raises(ValueError):
            SoftMatcher(model, ["painting"], [])

    def test_a_texts_coverage_does_not_depend_on_the_other_texts_or_what_is_remembered(
            self, model, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
        """The same text gets the same figure alone, in a batch, and after the word memory was
        cleared for being full."""
        matcher = SoftMatcher(model, ["relationship", "status"], [1.5, 1.0])
        line = "It'll be tough as a single parent"
        alone = matcher.coverage([line])[0]
        batch = matcher.coverage(["Caroline: thanks!", line, "we went hiking"])[1]
        monkeypatch.setattr(soft_match, "MAX_WORDS", 4)
        monkeypatch.setattr(soft_match, "_TEXT_WORDS", DigestMemo(2))
        soft_match._LEXICONS.clear()
        small = matcher.coverage(["hiking boots and tents", line])[1]
        soft_match._LEXICONS.clear()
        assert alone == batch == small

    def test_threads_matching_at_once_get_what_one_thread_gets(
            self, model, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
        """Four threads share the word memory while it is cleared over and over (a bound of 8
        words): each text's figure is the one a lone call gives."""
        from concurrent.futures import ThreadPoolExecutor

        matcher = SoftMatcher(model, ["painting", "weekend"], [1.0, 2.0])
        texts = [f"{a} and {b} on sunday" for a in ("art", "laundry", "hiking", "bills", "museum")
                 for b in ("saturday", "trains", "canvas", "music")]
        expected = [matcher.coverage([text])[0] for text in texts]
        monkeypatch.setattr(soft_match, "MAX_WORDS", 8)
        soft_match._LEXICONS.clear()
        with ThreadPoolExecutor(4) as pool:
            found = list(pool.map(lambda i: matcher.coverage([texts[i % len(texts)]])[0], range(400)))
        soft_match._LEXICONS.clear()
        assert [expected[i % len(texts)] for i in range(400)] == found
