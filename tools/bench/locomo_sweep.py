"""LoCoMo ``context.build`` coverage under other values of the retrieval's constants, one load.

    python -m tools.bench.locomo_sweep [--data ../shared/eval/locomo-dev] [--budget 2000]
        [--only 26] [--questions N] [--json FILE]
        --set TITLE_SHARE=1.0,2.0 [--set memoree.queries.fusion:NAME=V1,V2 ...]

Loads the conversations the way ``memoree eval`` does (``memoree.admin.locomo``) into one
scratch store, then asks every scored question (categories 1-4, with gold turns) through the
real ``context.build`` op at ``--budget`` bytes: first with the code as it is, then once per
value of each ``--set`` (one constant changed at a time, the others as they are; put back
afterwards). Each run is scored with the evaluation's rule against the same run's BM25-over-turns
page (``locomo_scoring.TurnIndex``), so a line reads like ``memoree eval``'s own figures: the
coverage, its ratio to BM25 overall, per category and per conversation, and how many questions
gain and lose against the unchanged code. With two or more conversations it also holds each one
out in turn, picks the setting (the unchanged code included) with the best ratio on the others,
and prints what that choice does to the held-out conversation: a setting that only fits the
set it was chosen on shows up there.

A name without ``module:`` is a constant of ``memoree.queries.context_build``. Only module-level
numbers can be set, and only those a function reads when it runs (a value imported by name into
another module, or bound as a default argument, does not change: a setting identical to the
unchanged code on every question says so). The store and its ids are made once per run of the
tool, and the clock is synthetic, so two settings differ only by the code's choices.
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoree.admin.eval_client import Client
from memoree.admin.locomo import LocomoOptions, load_conversation, scratch_service, selected_questions
from memoree.admin.locomo_data import CATEGORIES, Conversation, Question, read_dataset
from memoree.admin.locomo_scoring import Answer, TurnIndex, answer_from_result, found_turns

DEFAULT_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "eval" / "locomo-dev"
DEFAULT_MODULE = "memoree.queries.context_build"
UNCHANGED = "unchanged"
Key = tuple[str, int]


class SettingError(ValueError):
    """A ``--set`` that names no settable constant or gives a value that is not a number."""


@dataclass(frozen=True)
class Setting:
    """One constant at one value (``module`` None: the code unchanged)."""

    module: str | None = None
    name: str = ""
    value: float | int = 0

    @property
    def label(self) -> str:
        if self.module is None:
            return UNCHANGED
        short = self.name if self.module == DEFAULT_MODULE else f"{self.module}:{self.name}"
        return f"{short}={self.value}"


def parse_settings(texts: Sequence[str]) -> list[Setting]:
    """``[module:]NAME=V1,V2`` options as settings, each checked against its module now."""
    settings: list[Setting] = []
    for text in texts:
        target, _, values = text.partition("=")
        module_name, _, name = target.rpartition(":")
        module_name = module_name or DEFAULT_MODULE
        if not name or not values:
            raise SettingError(f"--set {text!r}: expected [module:]NAME=V1,V2")
        current = _current_value(module_name, name)
        for value in values.split(","):
            settings.append(Setting(module_name, name, _number(value, type(current), text)))
    return settings


def _current_value(module_name: str, name: str) -> float | int:
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SettingError(f"no module {module_name!r}") from exc
    current = getattr(module, name, None)
    if isinstance(current, bool) or not isinstance(current, (int, float)):
        raise SettingError(f"{module_name}.{name} is not a module-level number")
    return current


def _number(text: str, kind: type, option: str) -> float | int:
    try:
        return int(text) if kind is int else float(text)
    except ValueError as exc:
        raise SettingError(f"--set {option!r}: {text!r} is not a{'n integer' if kind is int else ' number'}") from exc


@contextmanager
def applied(setting: Setting) -> Iterator[None]:
    """The constant at the setting's value for the block, then back to what it was."""
    if setting.module is None:
        yield
        return
    module = importlib.import_module(setting.module)
    before = getattr(module, setting.name)
    setattr(module, setting.name, setting.value)
    try:
        yield
    finally:
        setattr(module, setting.name, before)


@dataclass
class Outcome:
    """One setting's coverage of every question, by (conversation, question index)."""

    setting: Setting
    coverage: dict[Key, float] = field(default_factory=dict)


class Sweep:
    """One loaded store and the BM25 page of every scored question at the budget."""

    def __init__(self, client: Client, conversations: Sequence[Conversation], budget: int,
                 options: LocomoOptions) -> None:
        self.client = client
        self.budget = budget
        self.asked: list[tuple[Conversation, Question]] = [
            (conversation, question) for conversation in conversations
            for question in selected_questions(conversation, options)
            if question.category in CATEGORIES and question.gold]
        self.groups = self._groups()
        self.baseline = self._baseline()

    def _groups(self) -> dict[str, dict[str, list[Key]]]:
        """The question keys per category name and per conversation."""
        by: dict[str, dict[str, list[Key]]] = {"category": defaultdict(list), "conversation": defaultdict(list)}
        for conversation, question in self.asked:
            by["category"][CATEGORIES[question.category]].append(key(conversation, question))
            by["conversation"][conversation.name].append(key(conversation, question))
        return by

    def _baseline(self) -> dict[Key, float]:
        """Each question's coverage by BM25 over its conversation's turns, packed into the budget."""
        coverage: dict[Key, float] = {}
        indexes: dict[str, TurnIndex] = {}
        try:
            for conversation, question in self.asked:
                index = indexes.get(conversation.name)
                if index is None:
                    index = indexes[conversation.name] = TurnIndex(list(conversation.turns.values()))
                page = Answer(index.pack(question.question, self.budget))
                coverage[key(conversation, question)] = share(page, question, conversation)
        finally:
            for index in indexes.values():
                index.close()
        return coverage

    def run(self, setting: Setting) -> Outcome:
        outcome = Outcome(setting)
        with applied(setting):
            for conversation, question in self.asked:
                result = self.client.ok("context.build", {"query": question.question, "horizon": "ambient",
                                                          "max_bytes": self.budget},
                                        context=conversation.context)
                outcome.coverage[key(conversation, question)] = share(answer_from_result(result), question,
                                                                      conversation)
        return outcome

    def ratio(self, outcome: Outcome, keys: Sequence[Key]) -> float:
        ours = sum(outcome.coverage[k] for k in keys)
        base = sum(self.baseline[k] for k in keys)
        return ours / base if base else float("nan")


def key(conversation: Conversation, question: Question) -> Key:
    return conversation.name, question.index


def share(answer: Answer, question: Question, conversation: Conversation) -> float:
    return len(found_turns(answer, question, conversation)) / len(question.gold)


def summary(sweep: Sweep, outcome: Outcome, unchanged: Outcome) -> dict[str, Any]:
    keys = list(outcome.coverage)
    groups = sweep.groups
    return {
        "setting": outcome.setting.label,
        "coverage": round(sum(outcome.coverage.values()) / len(keys), 4) if keys else None,
        "ratio": round(sweep.ratio(outcome, keys), 4),
        "categories": {name: round(sweep.ratio(outcome, ks), 4) for name, ks in sorted(groups["category"].items())},
        "conversations": {name: round(sweep.ratio(outcome, ks), 4)
                          for name, ks in sorted(groups["conversation"].items())},
        "gain": sum(outcome.coverage[k] > unchanged.coverage[k] for k in keys),
        "lose": sum(outcome.coverage[k] < unchanged.coverage[k] for k in keys),
    }


def held_out(sweep: Sweep, outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    """Per conversation: the setting chosen on the others, and its held-out ratio against the
    unchanged code's (``outcomes[0]``)."""
    by_conversation = sweep.groups["conversation"]
    if len(by_conversation) < 2:
        return []
    folds = []
    for name, held in sorted(by_conversation.items()):
        rest = [k for other, ks in by_conversation.items() if other != name for k in ks]
        chosen = max(outcomes, key=lambda o: sweep.ratio(o, rest))  # the first wins a tie: unchanged
        folds.append({"held_out": name, "chosen": chosen.setting.label,
                      "ratio": round(sweep.ratio(chosen, held), 4),
                      "unchanged": round(sweep.ratio(outcomes[0], held), 4)})
    return folds


def format_row(row: dict[str, Any]) -> str:
    categories = " ".join(f"{name} {value:.4f}x" for name, value in row["categories"].items())
    conversations = " / ".join(f"{value:.3f}" for value in row["conversations"].values())
    return (f"{row['setting']:<28} {row['coverage']:.4f} ({row['ratio']:.4f}x) | {categories} | "
            f"{conversations} | +{row['gain']}/-{row['lose']}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--questions", type=int, default=None, help="per conversation")
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="[MODULE:]NAME=V1,V2")
    parser.add_argument("--json", type=Path, default=None, help="write the rows and folds here")
    args = parser.parse_args(argv)
    try:
        settings = parse_settings(args.settings)
    except SettingError as exc:
        parser.error(str(exc))
    if not args.data.is_dir():
        print(f"locomo_sweep: skipped, no LoCoMo folder at {args.data}")
        return {}
    options = LocomoOptions(only=tuple(args.only), questions_per_conversation=args.questions)
    conversations = read_dataset(args.data, options.only)
    with scratch_service() as service:
        client = Client(service)
        for conversation in conversations:
            load_conversation(client, conversation)
        sweep = Sweep(client, conversations, args.budget, options)
        print(f"context.build@{args.budget}, {len(sweep.asked)} questions; per conversation: "
              f"{' / '.join(sorted(sweep.groups['conversation']))}")
        outcomes = []
        rows = []
        for setting in [Setting(), *settings]:
            outcomes.append(sweep.run(setting))
            rows.append(summary(sweep, outcomes[-1], outcomes[0]))
            print(format_row(rows[-1]), flush=True)
    folds = held_out(sweep, outcomes)
    for fold in folds:
        print(f"held out {fold['held_out']}: chose {fold['chosen']}, {fold['ratio']:.4f}x "
              f"(unchanged {fold['unchanged']:.4f}x)")
    report = {"budget": args.budget, "questions": len(sweep.asked), "rows": rows, "held_out": folds}
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1) + "\n", "utf-8")
    return report


if __name__ == "__main__":
    main()
