"""Where ``context.build`` loses LoCoMo's gold turns: for each question, where each went.

    python -m tools.bench.bundle_diag [--data ../shared/eval/locomo-dev] [--only 26]
                                      [--questions N] [--budget 2000] [--report FILE]

Loads the conversations the way ``memoree eval`` does (``memoree.admin.locomo``) into a scratch
store, asks every scored question (categories 1-4) through the real ``context.build`` op, and
scores the answer with the evaluation's rule. Then, for the same question, it rebuilds the
bundle's candidate items in process (``context_build.bundle_search``, the op's own search; the
admitted claims; ``context_build.evidence_items``: the ranked list the packer walks) and puts
every gold turn in one place:

* ``in_bundle``: the answer holds it (text or citation, the scoring rule);
* ``cut``: an item holding it ranks above the last item the bundle shows, yet it is not shown
  (the bytes, or the bundle's section limit, kept it out);
* ``far_down``: the first item holding it ranks below everything the bundle shows;
* ``no_candidate``: no item holds it (no line of a hit's matching chunks, no claim among the
  hits or admitted ones cites it), split by whether its session is among the artifact hits.

An item holds a turn when its span overlaps the turn's bytes: a line (a passage of the session),
or a claim whose evidence cites them. The table gives the counts per category; ``--report``
writes one JSON line per question (its turns' places and the first item holding each). No
timing: this is a diagnostic of coverage, not a benchmark.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoree.admin.eval_client import Client
from memoree.admin.locomo import LocomoOptions, load_conversation, scratch_service, selected_questions
from memoree.admin.locomo_data import CATEGORIES, Conversation, Question, read_dataset
from memoree.admin.locomo_scoring import answer_from_result, found_turns
from memoree.eventlog.events import Scope
from memoree.queries.admission import admitted_claims
from memoree.queries.context_build import bundle_search, evidence_items
from memoree.queries.search import ReadScope, read_snapshot

DEFAULT_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "eval" / "locomo-dev"
PLACES = ("in_bundle", "cut", "far_down", "no_candidate_session_hit", "no_candidate_session_beyond")
Span = tuple[str, int, int]


@dataclass(frozen=True)
class Candidates:
    """A question's ranked bundle items, each as the spans it holds, and the artifact hits."""

    spans: list[list[Span]]
    hit_revisions: frozenset[str]


def place(turn: Span, found: bool, candidates: Candidates, shown: Sequence[int]) -> tuple[str, int | None]:
    """Where one gold turn went, and the rank of the first item holding it (``None``: no item).
    ``shown``: the ranks of the items the bundle shows."""
    first = next((rank for rank, spans in enumerate(candidates.spans)
                  if any(_overlap(turn, span) for span in spans)), None)
    if found:
        return "in_bundle", first
    if first is None:
        beyond = "session_hit" if turn[0] in candidates.hit_revisions else "session_beyond"
        return f"no_candidate_{beyond}", None
    return ("cut" if shown and first < max(shown) else "far_down"), first


def _overlap(a: Span, b: Span) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def item_spans(item: Any) -> list[Span]:
    """The spans a bundle item holds: its line, or the evidence its claim cites."""
    hit = item.hit
    if item.passage is not None:
        return [(hit.revision_id, item.passage.start, item.passage.end)]
    if hit.entity_type == "claim":
        return [(loc["revision_id"], loc["start_byte"], loc["end_byte"])
                for loc in hit.provenance.get("evidence") or []
                if loc.get("start_byte") is not None and loc.get("end_byte") is not None]
    return []


def shown_ranks(candidates: Candidates, items: Sequence[Any], manifest: Sequence[dict[str, Any]]) -> list[int]:
    """The ranks of the items the bundle shows: its claims, and lines inside a shown excerpt."""
    claims = {m["entity_id"] for m in manifest if m["entity_type"] == "claim"}
    excerpts = [(m["revision_id"], p["start_byte"], p["end_byte"]) for m in manifest
                if m["entity_type"] == "artifact" for p in m["passages"]]
    shown = []
    for rank, (item, spans) in enumerate(zip(items, candidates.spans)):
        if item.hit.entity_type == "claim" and item.passage is None:
            if item.hit.entity_id in claims:
                shown.append(rank)
        elif spans and any(s[0] == e[0] and e[1] <= s[1] and s[2] <= e[2] for s in spans for e in excerpts):
            shown.append(rank)
    return shown


class Diagnosis:
    """One loaded store: asks a question through the op, then rebuilds its candidate items."""

    def __init__(self, service: Any, conversation: Conversation, budget: int) -> None:
        self.service = service
        self.client = Client(service)
        self.conversation = conversation
        self.budget = budget

    def scope(self) -> ReadScope:
        engine = self.service.engine
        return ReadScope(conn=engine.conn, ambient=Scope(**self.conversation.context), pins=(),
                         now=engine.handler.clock(), head=engine.head(), cas=engine.cas)

    def candidates(self, question: str) -> tuple[Candidates, list[Any]]:
        scope = self.scope()
        with read_snapshot(scope.conn):
            run = bundle_search(scope, question)
            items = evidence_items(run, question, admitted_claims(scope, run))
        hits = frozenset(h.revision_id for h in run.hits if h.entity_type == "artifact")
        return Candidates([item_spans(item) for item in items], hits), items

    def diagnose(self, question: Question) -> dict[str, Any]:
        result = self.client.ok("context.build", {"query": question.question, "horizon": "ambient",
                                                  "max_bytes": self.budget},
                                context=self.conversation.context)
        found = set(found_turns(answer_from_result(result), question, self.conversation))
        candidates, items = self.candidates(question.question)
        shown = shown_ranks(candidates, items, result["manifest"])
        turns = {}
        for dia_id in question.gold:
            turn = self.conversation.turns[dia_id]
            span = (self.conversation.sessions[turn.session].revision_id, turn.start, turn.end)
            where, first = place(span, dia_id in found, candidates, shown)
            turns[dia_id] = {"place": where, "first_item": first}
        return {"conversation": question.conversation, "index": question.index,
                "question": question.question, "category": question.category,
                "items": len(items), "shown_items": len(shown),
                "last_shown": max(shown) if shown else None, "turns": turns}


def diagnose_all(conversations: Sequence[Conversation], budget: int,
                 options: LocomoOptions = LocomoOptions()) -> list[dict[str, Any]]:
    rows = []
    with scratch_service() as service:
        client = Client(service)
        for conversation in conversations:
            load_conversation(client, conversation)
        for conversation in conversations:
            diagnosis = Diagnosis(service, conversation, budget)
            for question in selected_questions(conversation, options):
                if question.category in CATEGORIES and question.gold:
                    rows.append(diagnosis.diagnose(question))
    return rows


def tally(rows: Sequence[dict[str, Any]]) -> dict[str, Counter[str]]:
    """Gold turns per place, per category name and in all."""
    counts: dict[str, Counter[str]] = {name: Counter() for name in (*CATEGORIES.values(), "all")}
    for row in rows:
        for turn in row["turns"].values():
            counts[CATEGORIES[row["category"]]][turn["place"]] += 1
            counts["all"][turn["place"]] += 1
    return counts


def far_down_distances(rows: Sequence[dict[str, Any]]) -> Counter[str]:
    """How far below the last shown item the ``far_down`` turns' first items rank."""
    bands: Counter[str] = Counter()
    for row in rows:
        for turn in row["turns"].values():
            if turn["place"] == "far_down":
                gap = turn["first_item"] - (row["last_shown"] if row["last_shown"] is not None else -1)
                bands["1-5" if gap <= 5 else "6-20" if gap <= 20 else "21-60" if gap <= 60 else "61+"] += 1
    return bands


def format_tally(counts: dict[str, Counter[str]], bands: Counter[str]) -> str:
    lines = ["| gold turns | " + " | ".join(PLACES) + " | total |", "|---|" + "---|" * (len(PLACES) + 1)]
    for name, found in counts.items():
        lines.append(f"| {name} | " + " | ".join(str(found[p]) for p in PLACES) + f" | {sum(found.values())} |")
    lines.append("")
    lines.append("far_down, ranks below the last shown item: "
                 + ", ".join(f"{band}: {bands[band]}" for band in ("1-5", "6-20", "21-60", "61+")))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Counter[str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--questions", type=int, default=None, help="per conversation")
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--report", type=Path, default=None, help="one JSON line per question")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"bundle_diag: skipped, no LoCoMo folder at {args.data}")
        return {}
    options = LocomoOptions(only=tuple(args.only), questions_per_conversation=args.questions)
    rows = diagnose_all(read_dataset(args.data, options.only), args.budget, options)
    if args.report is not None:
        with args.report.open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    counts = tally(rows)
    print(format_tally(counts, far_down_distances(rows)))
    return counts


if __name__ == "__main__":
    main()
