"""Evidence coverage on LoCoMo-format conversations (``memoree eval DIR`` for a LoCoMo folder).

This module owns the LoCoMo evaluation: reading a folder of conversation files (``26.json``, …,
each with ``speaker_a``/``speaker_b``, ``session_N`` turn lists, ``session_N_observation`` and
``qa``), loading each conversation through the ordinary protocol ops into a fresh temporary store
(one project per conversation, one Markdown artifact per session with one line per turn, one
claim per observation citing the exact byte span of each of its turns), asking every question of
categories 1-4 at the ambient horizon with ``context.build`` (2,000 and 6,000 bytes),
``memory.recall`` (defaults) and ``search`` (limit 10), and scoring what comes back as evidence
coverage: the share of a question's gold turns the answer contains. The same run scores a plain
baseline, SQLite FTS5 BM25 over single turns packed into the same byte budgets. Category 5
(adversarial) is report-only: how often ``memory.recall`` answers ``presence: none``.

The scoring rule is the one of ``shared/eval/locomo-dev/README.md``: a gold turn is found when
the returned text contains it (whitespace collapsed; its first 80 characters, or
``Speaker: text`` for a turn under 40 characters), or when a returned citation in that session's
revision covers it (overlaps at least half of its bytes, or lies inside it); a citation wider
than 1,500 bytes counts only for turns whose text is also in the text returned with it.
Citations are taken from anywhere in a result (``memoree://artifact/…`` strings and byte-span
locators), so the scorer follows the ops' result shapes as they change.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TextIO

from memoree.eventlog.db import sqlite3
from memoree.admin.evaluation import Client, CorpusError, SyntheticClock
from memoree.service.service import Service

__all__ = [
    "Answer", "Cited", "Conversation", "LocomoError", "LocomoOptions", "Question", "Turn",
    "TurnIndex", "answer_from_result", "baseline_expression", "evaluate_locomo", "format_table",
    "is_locomo_dir", "load_conversation", "normalize_dia_ids", "read_conversation",
    "read_dataset", "run_cli", "selected_questions", "turn_found",
]

WORKSPACE = "locomo"
ACTOR = "memoree-eval-locomo"
ARTIFACT_KIND = "conversation_session"
CLAIM_TYPE = "observation"
MEDIA_TYPE = "text/markdown; charset=utf-8"
WIDE_CITATION_BYTES = 1500
NEEDLE_CHARS = 80
SHORT_TURN_CHARS = 40
BUDGETS = (2000, 6000)
SEARCH_LIMIT = 10
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ADVERSARIAL = 5
OPS = ("context.build@2000", "context.build@6000", "memory.recall", "search@10")
BASELINES = ("bm25@2000", "bm25@6000")
# Each op is compared with the baseline at the budget an agent would give it; recall and search
# have no byte budget, so they are set against the 2,000-byte baseline (the acceptance bar).
RATIO_BASE = {"context.build@2000": "bm25@2000", "context.build@6000": "bm25@6000",
              "memory.recall": "bm25@2000", "search@10": "bm25@2000"}
# Question words and function words the baseline leaves out of its FTS5 query.
BASELINE_STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just me
might more most my myself no nor not now of off on once only or other our ours ourselves out over
own same she should so some such than that the their theirs them themselves then there these they
this those through to too under until up very was we were what when where which while who whom
why will with would you your yours yourself yourselves
""".split())
_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")
_DIA_SEPARATORS = re.compile(r"[,;\s]+")
_WORD = re.compile(r"\w+")
_CITATION = re.compile(r"memoree://artifact/([^@\s`#)\"'\]]+)@([^#\s`)\"'\]]+)(?:#(\d+)-(\d+))?")
_TEXT_KEYS = frozenset({"rendered_markdown", "statement", "excerpt"})


class LocomoError(ValueError):
    """The LoCoMo folder or one of its files is not in the expected format."""


# ---------------------------------------------------------------------------------------------
# The conversations


def collapse(text: str) -> str:
    """``text`` with every run of whitespace turned into one space, trimmed."""
    return " ".join(text.split())


@dataclass(frozen=True)
class Turn:
    """One turn as stored: its line in the session artifact and that line's byte span."""

    dia_id: str
    session: int
    speaker: str
    text: str
    caption: str | None
    start: int = 0
    end: int = 0

    @property
    def body(self) -> str:
        photo = f" (shares a photo: {self.caption})" if self.caption else ""
        return f"{self.speaker}: {self.text}{photo}"

    @property
    def line(self) -> str:
        return f"[{self.dia_id}] {self.body}"

    @property
    def needle(self) -> str:
        """What the returned text must contain for this turn to count as found."""
        if len(self.text) < SHORT_TURN_CHARS:
            return f"{self.speaker}: {self.text}"
        return self.text[:NEEDLE_CHARS]


@dataclass
class Session:
    number: int
    date: str
    text: str
    turns: list[Turn]
    artifact_id: str = ""
    revision_id: str = ""

    @property
    def size(self) -> int:
        return len(self.text.encode("utf-8"))


@dataclass(frozen=True)
class Observation:
    session: int
    speaker: str
    text: str
    dia_ids: tuple[str, ...]


@dataclass(frozen=True)
class Question:
    conversation: str
    index: int
    question: str
    category: int
    answer: Any
    gold: tuple[str, ...]
    dropped_evidence: tuple[str, ...]


@dataclass
class Conversation:
    name: str
    speaker_a: str
    speaker_b: str
    sessions: dict[int, Session]
    observations: list[Observation]
    questions: list[Question]
    dropped_observation_ids: int = 0

    @cached_property
    def turns(self) -> dict[str, Turn]:
        return {t.dia_id: t for s in self.sessions.values() for t in s.turns}

    @property
    def project_id(self) -> str:
        return f"conversation-{self.name}"

    @property
    def context(self) -> dict[str, str]:
        return {"workspace_id": WORKSPACE, "project_id": self.project_id}


def normalize_dia_ids(value: Any, known: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the turn ids ``value`` names that exist, the pieces dropped), in order, deduplicated.

    ``value`` is one id, a list of ids, or a malformed field: several ids in one string
    (``"D4:17, D4:19"``, ``"D8:6; D9:17"``), a stray colon (``"D:11:26"``) or leading zeros
    (``"D30:05"``).
    """
    known_ids = set(known)
    pieces: list[str] = []
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, str):
            pieces += [p for p in _DIA_SEPARATORS.split(item) if p]
        elif item is not None:
            pieces.append(str(item))
    kept: list[str] = []
    dropped: list[str] = []
    for piece in pieces:
        match = _DIA_ID.fullmatch(piece)
        dia_id = f"D{int(match[1])}:{int(match[2])}" if match else None
        if dia_id in known_ids:
            if dia_id not in kept:
                kept.append(dia_id)
        else:
            dropped.append(piece)
    return tuple(kept), tuple(dropped)


def session_document(number: int, date: str, speakers: tuple[str, str],
                     raw_turns: Sequence[dict[str, Any]]) -> tuple[str, list[Turn]]:
    """The session's Markdown text and its turns with their exact ``[start, end)`` byte spans."""
    heading = f"# Session {number}: {date}, {speakers[0]} and {speakers[1]}\n\n"
    parts, turns = [heading], []
    offset = len(heading.encode("utf-8"))
    for raw in raw_turns:
        if not isinstance(raw, dict) or not all(isinstance(raw.get(k), str) for k in ("dia_id", "speaker", "text")):
            raise LocomoError(f"session {number}: a turn is not an object with string dia_id, speaker and text")
        caption = collapse(str(raw.get("blip_caption") or "")) or None
        turn = Turn(raw["dia_id"], number, collapse(raw["speaker"]), collapse(raw["text"]), caption)
        size = len(turn.line.encode("utf-8"))
        turns.append(Turn(turn.dia_id, number, turn.speaker, turn.text, caption, offset, offset + size))
        parts.append(turn.line + "\n")
        offset += size + 1
    return "".join(parts), turns


def _require(document: dict[str, Any], key: str, kind: type, name: str) -> Any:
    value = document.get(key)
    if not isinstance(value, kind):
        raise LocomoError(f"{name}: {key!r} is missing or not a {kind.__name__}")
    return value


def read_conversation(path: Path) -> Conversation:
    """Parse one LoCoMo conversation file."""
    try:
        document = json.loads(path.read_text("utf-8"))
    except ValueError as exc:
        raise LocomoError(f"{path.name} is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise LocomoError(f"{path.name}: the file is not a JSON object")
    name = path.stem
    speakers = (_require(document, "speaker_a", str, path.name), _require(document, "speaker_b", str, path.name))
    sessions: dict[int, Session] = {}
    for key, value in document.items():
        match = _SESSION_KEY.fullmatch(key)
        if match and isinstance(value, list) and value:
            number = int(match[1])
            date = str(document.get(f"session_{number}_date_time", ""))
            try:
                text, turns = session_document(number, date, speakers, value)
            except LocomoError as exc:
                raise LocomoError(f"{path.name}: {exc}") from None
            sessions[number] = Session(number, date, text, turns)
    if not sessions:
        raise LocomoError(f"{path.name}: no session_N turn lists")
    sessions = dict(sorted(sessions.items()))
    known = [t.dia_id for s in sessions.values() for t in s.turns]
    conversation = Conversation(name, speakers[0], speakers[1], sessions, [], [])
    for number in sessions:
        observed = document.get(f"session_{number}_observation") or {}
        for speaker, rows in (observed.items() if isinstance(observed, dict) else []):
            for row in rows if isinstance(rows, list) else []:
                if not isinstance(row, list) or not row or not isinstance(row[0], str):
                    continue
                dia_ids, dropped = normalize_dia_ids(row[1] if len(row) > 1 else None, known)
                conversation.dropped_observation_ids += len(dropped)
                if dia_ids and row[0].strip():
                    conversation.observations.append(Observation(number, speaker, row[0].strip(), dia_ids))
    for index, qa in enumerate(_require(document, "qa", list, path.name)):
        if not isinstance(qa, dict) or not isinstance(qa.get("question"), str):
            raise LocomoError(f"{path.name}: qa[{index}] has no question")
        if not isinstance(qa.get("category"), int):
            raise LocomoError(f"{path.name}: qa[{index}] has no integer category")
        gold, dropped = normalize_dia_ids(qa.get("evidence") or [], known)
        conversation.questions.append(Question(
            name, index, qa["question"], qa["category"],
            qa.get("answer", qa.get("adversarial_answer")), gold, dropped))
    return conversation


def _conversation_files(directory: Path) -> list[Path]:
    def order(path: Path) -> tuple[int, str]:
        return (int(path.stem), "") if path.stem.isdigit() else (sys.maxsize, path.stem)

    return sorted((p for p in directory.glob("*.json") if p.is_file()), key=order)


def is_locomo_dir(directory: Path) -> bool:
    """True when ``directory`` holds LoCoMo conversation files rather than a Memoree corpus."""
    if not directory.is_dir() or (directory / "seed.jsonl").exists():
        return False
    for path in _conversation_files(directory)[:1]:
        try:
            document = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(document, dict) and "qa" in document and "session_1" in document
    return False


def read_dataset(directory: Path, only: Sequence[str] = ()) -> list[Conversation]:
    """The conversations of ``directory`` (just those named in ``only`` when given)."""
    files = _conversation_files(directory)
    if only:
        missing = sorted(set(only) - {p.stem for p in files})
        if missing:
            raise LocomoError(f"no conversation file {', '.join(m + '.json' for m in missing)} in {directory}")
        files = [p for p in files if p.stem in set(only)]
    if not files:
        raise LocomoError(f"{directory} holds no LoCoMo conversation files (*.json)")
    return [read_conversation(path) for path in files]


# ---------------------------------------------------------------------------------------------
# Loading through the protocol


def load_conversation(client: Client, conversation: Conversation) -> dict[str, int]:
    """Store each session as an artifact and each observation as a claim citing its turns."""
    context = conversation.context
    for session in conversation.sessions.values():
        result = client.ok("artifact.put", {
            "kind": ARTIFACT_KIND,
            "title": f"Session {session.number}: {session.date}, {conversation.speaker_a} and {conversation.speaker_b}",
            "media_type": MEDIA_TYPE, "content": {"type": "text", "data": session.text},
            "provenance": {"locomo_conversation": conversation.name, "session": session.number},
            "actor": ACTOR,
        }, context=context, key=f"locomo:{conversation.name}:session:{session.number}")
        session.artifact_id, session.revision_id = result["artifact_id"], result["revision_id"]
    turns = conversation.turns
    for index, observation in enumerate(conversation.observations):
        evidence = []
        for dia_id in observation.dia_ids:
            turn = turns[dia_id]
            session = conversation.sessions[turn.session]
            evidence.append({"artifact_id": session.artifact_id, "revision_id": session.revision_id,
                             "start_byte": turn.start, "end_byte": turn.end})
        client.ok("claim.assert", {"claim_type": CLAIM_TYPE, "statement": observation.text,
                                   "evidence": evidence, "actor": ACTOR},
                  context=context, key=f"locomo:{conversation.name}:observation:{index}")
    return {"sessions": len(conversation.sessions), "claims": len(conversation.observations),
            "turns": len(turns)}


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


# ---------------------------------------------------------------------------------------------
# The run


@dataclass(frozen=True)
class LocomoOptions:
    only: tuple[str, ...] = ()
    questions_per_conversation: int | None = None


@dataclass
class QuestionRun:
    question: Question
    found: dict[str, list[str]] = field(default_factory=dict)
    returned: dict[str, dict[str, int]] = field(default_factory=dict)
    latency_ms: dict[str, float] = field(default_factory=dict)
    presence: str | None = None
    errors: dict[str, str] = field(default_factory=dict)

    def coverage(self, op: str) -> float | None:
        if not self.question.gold or op not in self.found:
            return None
        return len(self.found[op]) / len(self.question.gold)

    def report(self) -> dict[str, Any]:
        q = self.question
        return {
            "conversation": q.conversation, "index": q.index, "question": q.question,
            "category": q.category, "category_name": CATEGORIES.get(q.category, "adversarial"),
            "answer": q.answer, "gold": list(q.gold), "dropped_evidence": list(q.dropped_evidence),
            "found": self.found, "coverage": {op: self.coverage(op) for op in self.found},
            "returned": self.returned, "presence": self.presence, "latency_ms": {k: round(v, 3) for k, v in self.latency_ms.items()},
            **({"errors": self.errors} if self.errors else {}),
        }


class Asker:
    """Asks one question through every op and scores each answer."""

    def __init__(self, client: Client, conversation: Conversation) -> None:
        self.client = client
        self.conversation = conversation
        self.index = TurnIndex(list(conversation.turns.values()))

    def timed(self, run: QuestionRun, name: str, op: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        started = time.perf_counter()
        envelope = self.client.send(op, payload, context=self.conversation.context)
        run.latency_ms[name] = (time.perf_counter() - started) * 1000
        if not envelope.get("ok"):
            error = envelope.get("error") or {}
            run.errors[name] = f"{error.get('code')}: {error.get('message')}"
            return None
        return envelope["result"]

    def score(self, run: QuestionRun, name: str, result: dict[str, Any] | None) -> None:
        self.record(run, name, answer_from_result(result) if result is not None else Answer(""))

    def record(self, run: QuestionRun, name: str, answer: Answer) -> None:
        run.found[name] = found_turns(answer, run.question, self.conversation)
        run.returned[name] = {"text_bytes": len(answer.text.encode("utf-8")),
                              "citations": len(answer.citations)}

    def ask(self, question: Question) -> QuestionRun:
        run = QuestionRun(question)
        query = {"query": question.question, "horizon": "ambient"}
        recall = self.timed(run, "memory.recall", "memory.recall", query)
        run.presence = (recall or {}).get("presence")
        if question.category not in CATEGORIES:
            return run
        self.score(run, "memory.recall", recall)
        for budget in BUDGETS:
            name = f"context.build@{budget}"
            self.score(run, name, self.timed(run, name, "context.build", {**query, "max_bytes": budget}))
        self.score(run, "search@10", self.timed(run, "search@10", "search", {**query, "limit": SEARCH_LIMIT}))
        for budget in BUDGETS:
            started = time.perf_counter()
            packed = self.index.pack(question.question, budget)
            run.latency_ms[f"bm25@{budget}"] = (time.perf_counter() - started) * 1000
            self.record(run, f"bm25@{budget}", Answer(packed))
        return run

    def close(self) -> None:
        self.index.close()


@contextmanager
def scratch_service() -> Iterator[Service]:
    """A service over a fresh temporary store (durability off: it is thrown away afterwards)."""
    folder = Path(tempfile.mkdtemp(prefix="memoree-locomo-"))
    service = Service(folder / "data", clock=SyntheticClock(), synchronous="OFF")
    try:
        yield service
    finally:
        service.close()
        shutil.rmtree(folder, ignore_errors=True)


def selected_questions(conversation: Conversation, options: LocomoOptions) -> list[Question]:
    limit = options.questions_per_conversation
    return conversation.questions if limit is None else conversation.questions[:max(0, limit)]


def evaluate_locomo(directory: Path, options: LocomoOptions = LocomoOptions(),
                    progress: Callable[[int], None] | None = None,
                    phase: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Load, ask, score; return the summary and (under ``questions``) every question's result."""
    conversations = read_dataset(directory, options.only)
    started = time.perf_counter()
    runs: list[QuestionRun] = []
    loaded: dict[str, dict[str, int]] = {}
    with scratch_service() as service:
        client = Client(service)
        for conversation in conversations:
            if phase:
                phase(f"loading conversation {conversation.name}")
            loaded[conversation.name] = load_conversation(client, conversation)
        load_s = time.perf_counter() - started
        for conversation in conversations:
            if phase:
                phase(f"asking conversation {conversation.name}")
            asker = Asker(client, conversation)
            try:
                for question in selected_questions(conversation, options):
                    runs.append(asker.ask(question))
                    if progress:
                        progress(len(runs))
            finally:
                asker.close()
    summary = summarize(runs)
    summary.update({
        "dataset": directory.name, "conversations": [c.name for c in conversations],
        "loaded": loaded, "options": {"only": list(options.only),
                                      "questions_per_conversation": options.questions_per_conversation},
        "dropped_observation_dia_ids": sum(c.dropped_observation_ids for c in conversations),
        "timings_s": {"load": round(load_s, 1), "total": round(time.perf_counter() - started, 1)},
    })
    summary["questions"] = [run.report() for run in runs]
    return summary


def question_total(directory: Path, options: LocomoOptions = LocomoOptions()) -> int:
    return sum(len(selected_questions(c, options)) for c in read_dataset(directory, options.only))


# ---------------------------------------------------------------------------------------------
# Aggregates and the table


def _percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def _cell(runs: Sequence[QuestionRun], op: str) -> dict[str, Any]:
    scored = [r for r in runs if r.coverage(op) is not None]
    if not scored:
        return {"n": 0, "coverage": None, "all_found": None}
    return {"n": len(scored), "coverage": sum(r.coverage(op) or 0.0 for r in scored) / len(scored),
            "all_found": sum(1 for r in scored if r.coverage(op) == 1.0) / len(scored)}


def summarize(runs: Sequence[QuestionRun]) -> dict[str, Any]:
    answerable = [r for r in runs if r.question.category in CATEGORIES]
    groups = {name: [r for r in answerable if r.question.category == c] for c, name in CATEGORIES.items()}
    groups["all"] = answerable
    coverage: dict[str, dict[str, Any]] = {}
    for op in (*OPS, *BASELINES):
        coverage[op] = {}
        for group, members in groups.items():
            cell = _cell(members, op)
            base = RATIO_BASE.get(op)
            if base:
                reference = _cell(members, base)["coverage"]
                cell["baseline"] = base
                cell["ratio"] = (cell["coverage"] / reference
                                 if reference and cell["coverage"] is not None else None)
            coverage[op][group] = cell
    latency = {}
    for op in (*OPS, *BASELINES):
        samples = [r.latency_ms[op] for r in runs if op in r.latency_ms]
        latency[op] = {"n": len(samples), **{k: _round(_percentile(samples, q))
                                             for k, q in (("p50", 50), ("p95", 95), ("max", 100))}}
    adversarial = [r for r in runs if r.question.category == ADVERSARIAL]
    def none_rate(members: Sequence[QuestionRun]) -> float | None:
        return sum(1 for r in members if r.presence == "none") / len(members) if members else None
    return {
        "question_count": len(runs), "answerable_count": len(answerable),
        "without_gold_turns": sum(1 for r in answerable if not r.question.gold),
        "errors": sum(len(r.errors) for r in runs),
        "coverage": coverage, "latency_ms": latency,
        "category_5": {"n": len(adversarial), "presence_none_rate": none_rate(adversarial),
                       "answerable_presence_none_rate": none_rate(answerable)},
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_table(summary: dict[str, Any]) -> str:
    """Readable Markdown tables: coverage per op x category (with the ratio), latency, category 5."""
    groups = [*CATEGORIES.values(), "all"]
    coverage = summary["coverage"]
    counts = {g: coverage[BASELINES[0]][g]["n"] for g in groups}
    lines = [f"LoCoMo {summary['dataset']}: conversations {', '.join(summary['conversations'])}; "
             f"{summary['answerable_count']} questions of categories 1-4 "
             f"({summary['without_gold_turns']} without gold turns are not scored)",
             "", "Evidence coverage: mean share of gold turns found (ratio to the same-run baseline)", "",
             "| op | " + " | ".join(f"{g} ({counts[g]})" for g in groups) + " |",
             "|---|" + "---|" * len(groups)]
    for op in (*BASELINES[:1], "context.build@2000", BASELINES[1], "context.build@6000",
               "memory.recall", "search@10"):
        cells = []
        for g in groups:
            cell = coverage[op][g]
            ratio = f" ({_fmt(cell['ratio'])}x)" if cell.get("ratio") is not None else ""
            cells.append(_fmt(cell["coverage"]) + ratio)
        label = op + (f" vs {RATIO_BASE[op]}" if op in RATIO_BASE else "")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Questions with every gold turn found", "",
              "| op | " + " | ".join(groups) + " |", "|---|" + "---|" * len(groups)]
    for op in (*BASELINES, *OPS):
        lines.append(f"| {op} | " + " | ".join(_fmt(coverage[op][g]["all_found"]) for g in groups) + " |")
    lines += ["", "Latency per request (ms; in-process service)", "", "| op | n | p50 | p95 | max |",
              "|---|---|---|---|---|"]
    for op, stats in summary["latency_ms"].items():
        lines.append(f"| {op} | {stats['n']} | {_fmt(stats['p50'])} | {_fmt(stats['p95'])} | {_fmt(stats['max'])} |")
    adversarial = summary["category_5"]
    lines += ["", f"Category 5 (adversarial, {adversarial['n']} questions): memory.recall presence none "
                  f"{_fmt(adversarial['presence_none_rate'], 3)}; on categories 1-4: "
                  f"{_fmt(adversarial['answerable_presence_none_rate'], 3)}"]
    if summary.get("errors"):
        lines.append(f"Requests that failed: {summary['errors']} (see --report)")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# The command


def write_report(path: Path, questions: Sequence[dict[str, Any]]) -> None:
    """One JSON object per question, one per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in questions:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def run_cli(directory: Path, *, only: Sequence[str] = (), questions: int | None = None,
            as_json: bool = False, report: Path | None = None,
            out: TextIO | None = None) -> int:
    """``memoree eval DIR`` on a LoCoMo folder: print the table (or JSON), write the report."""
    from memoree.cli.progress import progress_reporter

    out = out or sys.stdout
    options = LocomoOptions(only=tuple(only), questions_per_conversation=questions)
    try:
        total = question_total(directory, options)
        with progress_reporter(f"locomo {directory.name}", total) as reporter:
            summary = evaluate_locomo(directory, options, progress=reporter, phase=reporter.phase)
        if report is not None:
            write_report(report, summary["questions"])
    except (LocomoError, CorpusError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if as_json:
        document = {k: v for k, v in summary.items() if k != "questions"}
        out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    else:
        out.write(format_table(summary))
        if report is not None:
            out.write(f"Per-question results: {report}\n")
    return 0
