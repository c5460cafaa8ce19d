"""Frame words of questions: the words that frame what a question asks, not what it is about.

This module owns which query words are **frame words** and how much they weigh. "What kind of
pot did Mel make?" asks about a pot; "kind" and "make" say what shape the answer has ("kind of",
"how many", "how long", "what did she say", "would she likely") and appear in many lines that
have nothing to do with the pot ("I'd make it", "that's kind of you"). A frame word is still a
query unit (it still finds candidates and counts toward qualification), but the search ranks by
``FRAME_WEIGHT`` of its IDF, and soft coverage leaves it out of the terms it compares
(``queries.soft_match``): a line's meaning should come near the question's subject, not near
"describe".

The list is closed and explicit, every inflection spelled out, because the word index's folding
(``analysis.inflection_variants``) would also make content words of them ("typing" from "type",
"longing" from "long", "user" from "use"). It also says which questions ask **when**
(``asks_when``): their answer is a date, which a bundle can show only where it shows the source
that carries it. Pure: no I/O, no model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .analysis import QueryUnit

__all__ = ["FRAME_WEIGHT", "FRAME_WORDS", "asks_when", "frame_weights", "is_frame_unit", "is_frame_word"]

FRAME_WEIGHT = 0.2

FRAME_WORDS = frozenset("""
kind kinds type types way ways thing things
many much long often likely probably
describe describes described describing mention mentions mentioned mentioning
say says said saying share shares shared sharing tell tells told telling
get gets got gotten getting take takes took taken taking make makes made making
give gives gave given giving use uses used using think thinks thought thinking
""".split())

_WHEN = re.compile(r"^\W*when\b|\b(?:what|which) (?:year|month|date|day)\b|\bhow long ago\b", re.IGNORECASE)


def is_frame_word(word: str) -> bool:
    """Whether a lower-cased word is a frame word (one of ``FRAME_WORDS``, spelled exactly)."""
    return word in FRAME_WORDS


def is_frame_unit(unit: QueryUnit) -> bool:
    """A single free word that is a frame word; a quoted phrase is always content."""
    return not unit.phrase and len(unit.tokens) == 1 and is_frame_word(unit.tokens[0])


def frame_weights(units: Sequence[QueryUnit]) -> list[float]:
    """Each unit's share of its IDF in ranking: ``FRAME_WEIGHT`` for a frame unit, else 1."""
    return [FRAME_WEIGHT if is_frame_unit(unit) else 1.0 for unit in units]


def asks_when(question: str) -> bool:
    """A question about a time: it opens with "When", or asks "what year / month / date / day"
    or "how long ago" (not "when" as a conjunction: "What did she do when it rained?")."""
    return _WHEN.search(question) is not None
