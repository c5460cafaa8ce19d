"""Frame words: the words that frame a question ("kind", "describe", "make") weigh less than
the words that name what it is about."""

from __future__ import annotations

from memoree.queries.analysis import analyze_query
from memoree.queries.question_frame import FRAME_WEIGHT, asks_when, frame_weights, is_frame_unit, is_frame_word


class TestFrameWords:
    def test_every_listed_inflection_is_a_frame_word(self) -> None:
        """Regular and irregular forms are spelled out: "described", "said", "took", "thought"."""
        assert all(is_frame_word(w) for w in ("kinds", "described", "said", "took", "thought", "shared"))

    def test_content_words_that_fold_from_frame_words_are_not_frame_words(self) -> None:
        """What the word index would fold together stays apart here: "typing", "longing", "user"."""
        assert not any(is_frame_word(w) for w in ("typing", "longing", "user", "maker", "pottery"))

    def test_only_single_free_words_are_frame_units(self) -> None:
        """A quoted phrase names content even when its words frame questions elsewhere."""
        units = analyze_query('What kind of pot did Mel make? "kind of"').units
        assert [u.display for u in units if is_frame_unit(u)] == ["kind", "make"]

    def test_frame_units_rank_at_the_frame_weight(self) -> None:
        """Each unit's share of its IDF: the frame weight for frame words, 1 for the rest."""
        units = analyze_query("Which books did Caroline describe?").units
        assert frame_weights(units) == [1.0, 1.0, FRAME_WEIGHT]


class TestWhen:
    def test_questions_about_a_time_ask_when(self) -> None:
        """An opening "When", "what year", "which month", "how long ago" ask for a time."""
        assert all(map(asks_when, ("When did Mel paint a sunrise?", "What year did Jon move?",
                                   "In which month did Ann run?", "How long ago was the trip?")))

    def test_when_as_a_conjunction_does_not(self) -> None:
        """"What did she do when it rained?" asks what, not when."""
        assert not any(map(asks_when, ("What did she do when it rained?", "Whenever she sings, who listens?")))
