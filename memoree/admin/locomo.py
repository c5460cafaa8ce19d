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

Reading the files lives in ``locomo_data``, the scoring rule and the baseline in
``locomo_scoring``; this module loads, asks, summarises and reports.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from memoree.admin.eval_client import Client, SyntheticClock
from memoree.admin.evaluation import CorpusError
from memoree.admin.locomo_data import (
    ACTOR,
    ADVERSARIAL,
    ARTIFACT_KIND,
    BASELINES,
    BUDGETS,
    CATEGORIES,
    CLAIM_TYPE,
    MEDIA_TYPE,
    OPS,
    RATIO_BASE,
    SEARCH_LIMIT,
    Conversation,
    LocomoError,
    Observation,
    Question,
    Turn,
    is_locomo_dir,
    normalize_dia_ids,
    read_conversation,
    read_dataset,
)
from memoree.admin.locomo_scoring import (
    Answer,
    Cited,
    TurnIndex,
    answer_from_result,
    baseline_expression,
    found_turns,
    turn_found,
)
from memoree.service.service import Service

__all__ = [
    "Answer", "Cited", "Conversation", "LocomoError", "LocomoOptions", "Question", "Turn",
    "TurnIndex", "answer_from_result", "baseline_expression", "evaluate_locomo", "format_table",
    "is_locomo_dir", "load_conversation", "normalize_dia_ids", "read_conversation",
    "read_dataset", "run_cli", "selected_questions", "turn_found",
]

# ---------------------------------------------------------------------------------------------
# Loading through the protocol


def load_conversation(client: Client, conversation: Conversation) -> dict[str, int]:
    """Store each session as an artifact and each observation as a claim citing its turns: the
    sessions in one ``batch`` request, then the claims (they cite the sessions' revisions)."""
    context = conversation.context
    sessions = list(conversation.sessions.values())
    results = client.ok_many([("artifact.put", {
        "kind": ARTIFACT_KIND,
        "title": f"Session {session.number}: {session.date}, {conversation.speaker_a} and {conversation.speaker_b}",
        "media_type": MEDIA_TYPE, "content": {"type": "text", "data": session.text},
        "provenance": {"locomo_conversation": conversation.name, "session": session.number},
        "actor": ACTOR,
    }, context, f"locomo:{conversation.name}:session:{session.number}") for session in sessions])
    for session, result in zip(sessions, results):
        session.artifact_id, session.revision_id = result["artifact_id"], result["revision_id"]
    client.ok_many([("claim.assert", {"claim_type": CLAIM_TYPE, "statement": observation.text,
                                      "evidence": _evidence(conversation, observation), "actor": ACTOR},
                     context, f"locomo:{conversation.name}:observation:{index}")
                    for index, observation in enumerate(conversation.observations)])
    return {"sessions": len(conversation.sessions), "claims": len(conversation.observations),
            "turns": len(conversation.turns)}


def _evidence(conversation: Conversation, observation: Observation) -> list[dict[str, Any]]:
    """The exact byte spans of an observation's turns in their stored sessions."""
    evidence = []
    for dia_id in observation.dia_ids:
        turn = conversation.turns[dia_id]
        session = conversation.sessions[turn.session]
        evidence.append({"artifact_id": session.artifact_id, "revision_id": session.revision_id,
                         "start_byte": turn.start, "end_byte": turn.end})
    return evidence


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
