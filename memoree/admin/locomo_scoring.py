"""Scoring LoCoMo answers: what an op's result returned (text and citations, taken from anywhere
in it), whether a gold turn is found in it (the rule of ``shared/eval/locomo-dev/README.md``),
and the same-run baseline, SQLite FTS5 BM25 over single turns packed into a byte budget.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from memoree.admin.locomo_data import (
    WIDE_CITATION_BYTES,
    Conversation,
    Question,
    Session,
    Turn,
    collapse,
)
from memoree.eventlog.db import sqlite3
from memoree.queries.analysis import ENGLISH_STOPWORDS

__all__ = ["Answer", "Cited", "TurnIndex", "answer_from_result", "baseline_expression", "covers",
           "found_turns", "turn_found"]

BASELINE_STOPWORDS = ENGLISH_STOPWORDS  # the folder README's "common stopwords"
_WORD = re.compile(r"\w+")
_CITATION = re.compile(r"memoree://artifact/([^@\s`#)\"'\]]+)@([^#\s`)\"'\]]+)(?:#(\d+)-(\d+))?")
_TEXT_KEYS = frozenset({"rendered_markdown", "statement", "excerpt"})
# ---------------------------------------------------------------------------------------------
# What an answer holds, and the scoring rule


@dataclass(frozen=True)
class Cited:
    """A returned citation of ``[start, end)`` in one revision (``None`` bounds: the whole revision)."""

    revision_id: str
    start: int | None = None
    end: int | None = None


@dataclass
class Answer:
    """The text an op returned and the citations returned with it."""

    text: str
    citations: list[Cited] = field(default_factory=list)
    presence: str | None = None

    def __post_init__(self) -> None:
        self.collapsed = collapse(self.text)


def _strings(document: Any, keys: frozenset[str] | None = None) -> Iterator[str]:
    """String values anywhere in ``document`` (only those under ``keys`` when given)."""
    if isinstance(document, dict):
        for key, value in document.items():
            if isinstance(value, str):
                if keys is None or key in keys:
                    yield value
            else:
                yield from _strings(value, keys)
    elif isinstance(document, list):
        for value in document:
            yield from _strings(value, keys)


def _locators(document: Any) -> Iterator[Cited]:
    """Byte-span locators (``revision_id`` with ``start_byte``/``end_byte``) anywhere in ``document``."""
    if isinstance(document, dict):
        start, end = document.get("start_byte"), document.get("end_byte")
        if isinstance(document.get("revision_id"), str) and isinstance(start, int) and isinstance(end, int):
            yield Cited(document["revision_id"], start, end)
        for value in document.values():
            yield from _locators(value)
    elif isinstance(document, list):
        for value in document:
            yield from _locators(value)


def answer_from_result(result: dict[str, Any]) -> Answer:
    """The returned text (markdown, statements, excerpts) and every artifact citation of a result."""
    cited: set[Cited] = set(_locators(result))
    for text in _strings(result):
        for match in _CITATION.finditer(text):
            start = int(match[3]) if match[3] is not None else None
            end = int(match[4]) if match[4] is not None else None
            cited.add(Cited(match[2], start, end))
    text = "\n".join(_strings(result, _TEXT_KEYS))
    presence = result.get("presence") if isinstance(result.get("presence"), str) else None
    return Answer(text, sorted(cited, key=lambda c: (c.revision_id, c.start or 0, c.end or 0)), presence)


def covers(citation: Cited, turn: Turn, session_size: int) -> bool:
    """The citation overlaps at least half of the turn's bytes, or lies inside the turn."""
    start = 0 if citation.start is None else citation.start
    end = session_size if citation.end is None else citation.end
    overlap = min(end, turn.end) - max(start, turn.start)
    inside = turn.start <= start < end <= turn.end
    return inside or (overlap > 0 and 2 * overlap >= turn.end - turn.start)


def turn_found(answer: Answer, turn: Turn, session: Session) -> bool:
    """The scoring rule for one gold turn (see the module docstring)."""
    contained = turn.needle in answer.collapsed
    if contained:
        return True
    for citation in answer.citations:
        if citation.revision_id != session.revision_id or not covers(citation, turn, session.size):
            continue
        start = 0 if citation.start is None else citation.start
        end = session.size if citation.end is None else citation.end
        if end - start <= WIDE_CITATION_BYTES:
            return True
        # A wider citation counts only with the turn's text. The text returned with any citation
        # is at most the op's whole returned text, which does not hold it (checked above).
    return False


def found_turns(answer: Answer, question: Question, conversation: Conversation) -> list[str]:
    turns = conversation.turns
    return [dia_id for dia_id in question.gold
            if turn_found(answer, turns[dia_id], conversation.sessions[turns[dia_id].session])]


# ---------------------------------------------------------------------------------------------
# The baseline: FTS5 BM25 over single turns


def baseline_expression(question: str) -> str | None:
    """The question's words minus stopwords, each quoted, OR-joined (None when nothing is left)."""
    words: list[str] = []
    for word in _WORD.findall(question.lower()):
        if word not in BASELINE_STOPWORDS and word not in words:
            words.append(word)
    return " OR ".join(f'"{word}"' for word in words) or None


class TurnIndex:
    """One conversation's turns in a plain FTS5 table, one row per turn."""

    def __init__(self, turns: Sequence[Turn]) -> None:
        self.turns = list(turns)
        self.conn = sqlite3.connect(":memory:", check_same_thread=False)
        self.conn.execute("CREATE VIRTUAL TABLE turns USING fts5(body, "
                          "tokenize='porter unicode61 remove_diacritics 2')")
        self.conn.executemany("INSERT INTO turns (rowid, body) VALUES (?, ?)",
                              [(i, t.body) for i, t in enumerate(self.turns)])

    def ranked(self, question: str) -> list[Turn]:
        expression = baseline_expression(question)
        if expression is None:
            return []
        rows = self.conn.execute("SELECT rowid FROM turns WHERE turns MATCH ? ORDER BY bm25(turns)",
                                 (expression,)).fetchall()
        return [self.turns[row[0]] for row in rows]

    def pack(self, question: str, budget: int) -> str:
        """Lines ``[D1:3] Speaker: text`` in rank order, each added while it still fits."""
        lines, used = [], 0
        for turn in self.ranked(question):
            size = len(turn.line.encode("utf-8")) + 1
            if used + size <= budget:
                lines.append(turn.line + "\n")
                used += size
        return "".join(lines)

    def close(self) -> None:
        self.conn.close()
