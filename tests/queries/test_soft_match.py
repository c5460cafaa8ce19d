"""Soft term matching: a query's terms matched against a text's words by the static model's
vectors, for coverage (caller's weights) and for the word-by-word judgement (the model's weights,
with negations and spelling-only matches kept out)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from memoree.projections.embedding import load_model
from memoree.queries import soft_match
from memoree.queries.memo import DigestMemo
from memoree.queries.soft_match import (
    SoftMatcher,
    content_words,
    coverage_terms,
    letter_words,
    max_sim,
    query_terms,
    soft_scores,
)


@pytest.fixture
def model():  # type: ignore[no-untyped-def]
    found = load_model()
    if found is None:
        pytest.skip("the embedding model is not installed here")
    return found


@pytest.fixture
def tiny_memories(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Word memories small enough to be cleared for being full over and over."""
    monkeypatch.setattr(soft_match, "MAX_WORDS", 8)
    monkeypatch.setattr(soft_match, "_TEXT_WORDS", DigestMemo(2))
    soft_match._LEXICONS.clear()
    yield
    soft_match._LEXICONS.clear()


def score(query: str, text: str, by_spelling: tuple[str, ...] = ()) -> float:
    terms = query_terms(query)
    assert terms is not None
    return soft_scores(terms, [text], [set(by_spelling)])[0]


class TestWords:
    def test_content_words_are_folded_distinct_and_without_stopwords_or_numbers(self) -> None:
        """Stopwords and numbers go, case and accents fold, a repeated word counts once."""
        assert ("cafe", "paris") == content_words("The Café in Paris, the CAFE, 2023")

    def test_coverage_terms_drop_word_pieces(self) -> None:
        """The "s" of a possessive is not a term; a term is kept once."""
        assert ["caroline", "relationship", "status"] == coverage_terms(["caroline", "s", "relationship", "status", "Status"])

    def test_coverage_terms_leave_out_the_questions_frame_words(self) -> None:
        """"kind" and "make" frame the question; what it asks about is the pot."""
        assert ["pot", "mel"] == coverage_terms(["kind", "pot", "mel", "make"])

    def test_letter_words_are_casefolded_distinct_runs_of_letters_up_to_a_limit(self) -> None:
        """Digits, underscores and one-letter runs split or go; stopwords stay; the first ``limit`` are kept."""
        assert ("the", "vault", "keys", "rotate") == letter_words("The vault_keys rotate x 2024 VAULT Keys")
        assert ("the", "vault") == letter_words("The vault_keys rotate", limit=2)

    def test_question_terms_leave_out_stopwords_and_identifier_pieces(self, model) -> None:  # type: ignore[no-untyped-def]
        """Only plain content words are terms: stopwords and identifier-like pieces are left out."""
        terms = query_terms("What is SCOPED_ALPHA_01 in APP-BOUNDARY-101 for the cache?")
        assert terms is not None and ("cache",) == terms.words
        assert query_terms("SCOPED_ALPHA_01") is None


class TestMaxSim:
    def test_each_terms_match_is_its_best_cosine_over_the_texts_words_floored_at_zero(self, model) -> None:  # type: ignore[no-untyped-def]
        """A text holding the word matches it by 1; a text without words matches nothing."""
        found = max_sim(model, ["painting", "lake"], [("my", "painting"), (), ("lake", "painting")])
        assert [1.0, 1.0] == pytest.approx(found[2].tolist(), abs=1e-6)
        assert 1.0 == pytest.approx(float(found[0, 0]), abs=1e-6) and 0.0 <= found[0, 1] < 1.0
        assert [0.0, 0.0] == found[1].tolist()

    def test_a_word_without_credit_for_a_term_gives_it_nothing(self, model) -> None:  # type: ignore[no-untyped-def]
        """The word itself, listed as no credit for its term, counts 0 for that term only."""
        found = max_sim(model, ["painting", "art"], [("painting", "art")], [frozenset({"painting"}), frozenset()])
        assert float(found[0, 0]) < 1.0 and 1.0 == pytest.approx(float(found[0, 1]), abs=1e-6)

    def test_figures_do_not_depend_on_the_other_texts_or_what_is_remembered(self, model, tiny_memories) -> None:  # type: ignore[no-untyped-def]
        """A text's row is the same alone, in a batch, and after the word memory was cleared for being full."""
        texts = [("single", "parent", "tough"), ("thanks",), ("hiking", "boots", "tents", "trail")]
        together = max_sim(model, ["relationship", "status"], texts)
        alone = [max_sim(model, ["relationship", "status"], [t])[0].tolist() for t in texts]
        assert alone == together.tolist()

    def test_threads_matching_at_once_get_what_one_thread_gets(self, model, tiny_memories) -> None:  # type: ignore[no-untyped-def]
        """Four threads share the word memory while it is cleared over and over (a bound of 8
        words): each text's figure, by either caller's rule, is the one a lone call gives."""
        matcher = SoftMatcher(model, ["painting", "weekend"], [1.0, 2.0])
        terms = query_terms("painting weekend")
        texts = [f"{a} and {b} on sunday" for a in ("art", "laundry", "hiking", "bills", "museum")
                 for b in ("saturday", "trains", "canvas", "music")]
        expected = [(matcher.coverage([text])[0], soft_scores(terms, [text])[0]) for text in texts]

        def both(i: int) -> tuple[float, float]:
            text = texts[i % len(texts)]
            return matcher.coverage([text])[0], soft_scores(terms, [text])[0]

        with ThreadPoolExecutor(4) as pool:
            found = list(pool.map(both, range(400)))
        assert [expected[i % len(texts)] for i in range(400)] == found


class TestCoverage:
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


class TestJudgement:
    def test_a_text_using_every_question_word_scores_one(self, model) -> None:  # type: ignore[no-untyped-def]
        """Each content word of the question found as such in the text gives the full score."""
        assert 1.0 == pytest.approx(score("When do the vault keys rotate?", "Vault keys rotate every quarter."))

    def test_near_words_score_between_unrelated_and_exact(self, model) -> None:  # type: ignore[no-untyped-def]
        """A text that says the question's words in other words scores above an unrelated one."""
        near = score("Did the experimental build get smaller?", "The size experiment reduced the bundle.")
        unrelated = score("Did the experimental build get smaller?", "Invoices are stored in PostgreSQL.")
        assert unrelated < near < 1.0

    def test_a_function_word_weighs_less_than_a_content_word(self, model) -> None:  # type: ignore[no-untyped-def]
        """The weights are the lengths of the words' summed token rows: "go" moves a text less than "migration"."""
        terms = query_terms("go migration")
        assert terms is not None and terms.weights[0] < terms.weights[1]

    def test_a_word_and_its_negation_by_prefix_are_not_near(self, model) -> None:  # type: ignore[no-untyped-def]
        """"uncompressed" and "compressed" embed close together but mean the opposite: no credit."""
        rows = model.embed(["uncompressed", "compressed"])
        assert float(rows[0] @ rows[1]) > 0.5
        assert score("uncompressed", "compressed archives") == score("uncompressed", "archives") < 0.5

    def test_a_word_matched_only_by_its_spelling_counts_nothing(self, model) -> None:  # type: ignore[no-untyped-def]
        """A question word that the typo channel matched by spelling ("final" in "finalized") scores 0 there."""
        assert score("final approval", "finalized approval", ("final",)) < score("final approval", "finalized approval")
        assert 0.0 == score("final", "finalized contracts", ("final",))

    def test_a_texts_score_does_not_depend_on_the_texts_beside_it(self, model) -> None:  # type: ignore[no-untyped-def]
        """Scored alone or among others, in any order, a text gets the same score."""
        terms = query_terms("Did the experimental build get smaller?")
        texts = ["The size experiment reduced the bundle.", "", "Invoices are stored in PostgreSQL.",
                 "Deploys are frozen on Fridays."]
        together = soft_scores(terms, texts)
        assert [soft_scores(terms, [text])[0] for text in texts] == together
        assert together[::-1] == soft_scores(terms, texts[::-1]) and 0.0 == together[1]
