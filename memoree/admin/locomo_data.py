"""LoCoMo conversations as data: reading a folder of LoCoMo files (``26.json``, …) into typed
conversations, sessions, turns, observations and questions, with the session documents the
evaluation stores (one Markdown line per turn, each turn's exact byte span remembered) and the
normalisation of the dataset's malformed ``dia_id`` fields. No store, no scoring.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any


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
_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")
_DIA_SEPARATORS = re.compile(r"[,;\s]+")


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
