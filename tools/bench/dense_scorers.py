"""Ways to score a claim against a question by meaning, compared offline on the dev sets.

    python -m tools.bench.dense_scorers [--corpus ../shared/eval/memoree-corpus/v2]
                                        [--locomo ../shared/eval/locomo-dev]

No store and no fusion: each question is scored against every claim of its corpus (v2: the seeded
claims; LoCoMo: the observations of its conversation) with the local model, by each scorer:

* ``sentence``: cosine of the question's and the statement's embeddings (what the channel does);
* ``claim+evidence``: the statement embedded together with the text its evidence quotes;
* ``content words``: the question without function words;
* ``off common axis``: both vectors with their part along the model's common axis removed;
* ``word max-sim``: each content word of the question scored by its nearest statement word, averaged;
* ``sentence+word``: the mean of ``sentence`` and ``word max-sim``;
* ``evidence, content, off axis``: the three changes above that touch the vectors, together;
* ``soft terms``: the acceptance's word-by-word judgement (``queries.soft_match``) over the
  statement, its evidence text and its source's title.

A last table measures the rule the channel ships for that judgement, over each question's 16
nearest claims by the sentence cosine (as the channel judges them): the first by soft terms,
ahead of the next by 0.08 and also first by the sentence cosine, is accepted; against the
whole-text rule (first claim at least 0.24 and 0.08 ahead), per LoCoMo category. (Its other
agreement, with the lexical channel's first claim, needs a store's BM25 and is not modelled.)

What the acceptance rule needs is a clear nearest claim that is right, and no clear nearest for a
question memory cannot answer. So v2 reports, per scorer, how many paraphrase questions have their
gold claim first and by what margin over the runner-up, against the largest margin any
unanswerable question's first claim has (a paraphrase is separable only above it). LoCoMo
reports how often the first claim cites a gold turn (answerable questions), the share of gold
turns cited by the first 5 and 10 claims, and, when the third of answerable questions with the
largest margins is accepted, the precision and the share of adversarial (category 5) questions
that the same margin would accept; and the same for the channel's own rule (first claim at least
0.24, ahead of the next by 0.08) and for that rule with a 0.06 margin. Either part is skipped,
with the reason, when its folder is absent.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoree.admin.corpus import load_corpus
from memoree.admin.locomo_data import read_dataset
from memoree.projections.embedding import load_model
from memoree.queries import soft_match

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "eval"
ADVERSARIAL = 5
JUDGED = 16  # claims the channel judges per question (semantic.CLAIM_POOL_FLOOR)
SOFT_MARGIN = 0.08
ACCEPTED_SHARE = 1 / 3
RULES = ((0.24, 0.08), (0.24, 0.06))  # (first claim at least, ahead of the next by)
_WORD = re.compile(r"\w+")
FUNCTION_WORDS = frozenset(
    "a an the is are was were be been being do does did of to in on at by for with from as and or not no "
    "can could may might must shall should will would it its this that these those what which who whom "
    "whose where when why how if then than so such into after before under over about any all each every "
    "some other another one own only just also very there their they them we you i he she his her our "
    "your my me us has have had having get gets got become became".split())


@dataclass(frozen=True)
class ClaimText:
    statement: str
    evidence: str
    title: str = ""


@dataclass(frozen=True)
class Question:
    text: str
    gold: frozenset[int]  # positions of the claims that answer it (v2) or cite a gold turn (LoCoMo)
    answerable: bool
    adversarial: bool = False
    turns: frozenset[str] = frozenset()
    category: int = 0


class Scorers:
    """Every scorer over one set of claims (embeddings computed once per set)."""

    def __init__(self, model: Any, claims: Sequence[ClaimText]) -> None:
        self.model, self.np = model, model.np
        np = self.np
        self.texts = [f"{c.statement}\n{c.title}\n{c.evidence}" for c in claims]
        self.statements = model.embed([c.statement for c in claims])
        self.with_evidence = self._unit(self.statements + model.embed([c.evidence for c in claims]))
        self.off_axis = self._off(self.statements)
        self.evidence_off_axis = self._off(self.statements + model.embed([c.evidence for c in claims]))
        words = sorted({w.casefold() for c in claims for w in _WORD.findall(c.statement)})
        index = {w: i for i, w in enumerate(words)}
        self.words = model.embed(words) if words else np.zeros((0, self.statements.shape[1]), np.float32)
        self.word_sets = [np.array(sorted({index[w.casefold()] for w in _WORD.findall(c.statement)}), dtype=np.int64)
                          for c in claims]

    def _unit(self, rows: Any) -> Any:
        norms = self.np.linalg.norm(rows, axis=-1, keepdims=True)
        return rows / self.np.maximum(norms, 1e-9)

    def _off(self, rows: Any) -> Any:
        axis = self.model.common_axis
        return self._unit(rows - (rows @ axis)[..., None] * axis)

    def score(self, name: str, question: str) -> Any:
        embed = lambda text: self.model.embed([text])[0]  # noqa: E731
        if name == "sentence":
            return self.statements @ embed(question)
        if name == "claim+evidence":
            return self.with_evidence @ embed(question)
        if name == "content words":
            return self.statements @ embed(" ".join(content_words(question)))
        if name == "off common axis":
            return self.off_axis @ self._off(embed(question))
        if name == "word max-sim":
            return self._max_sim(question)
        if name == "sentence+word":
            return (self.statements @ embed(question) + self._max_sim(question)) / 2
        if name == "evidence, content, off axis":
            return self.evidence_off_axis @ self._off(embed(" ".join(content_words(question))))
        if name == "soft terms":
            return self.soft(question, range(len(self.texts)))
        raise ValueError(f"unknown scorer {name}")

    def soft(self, question: str, positions: Sequence[int]) -> Any:
        terms = soft_match.query_terms(question)
        if terms is None:
            return self.np.zeros(len(positions), dtype=self.np.float32)
        return self.np.array(soft_match.soft_scores(terms, [self.texts[i] for i in positions]), dtype=self.np.float32)

    def soft_choice(self, question: str) -> int | None:
        """The claim the shipped word-by-word rule accepts, or ``None``."""
        np = self.np
        sentence = self.score("sentence", question)
        judged = np.argsort(-sentence, kind="stable")[:JUDGED]
        if len(judged) < 2:
            return None
        soft = self.soft(question, judged)
        order = np.argsort(-soft, kind="stable")
        if soft[order[0]] - soft[order[1]] < SOFT_MARGIN or order[0] != 0:
            return None
        return int(judged[0])

    def _max_sim(self, question: str) -> Any:
        np = self.np
        asked = [w.casefold() for w in content_words(question)]
        if not asked or len(self.words) == 0:
            return np.zeros(len(self.word_sets), dtype=np.float32)
        near = self.model.embed(asked) @ self.words.T
        return np.array([near[:, s].max(axis=1).mean() if len(s) else 0.0 for s in self.word_sets], dtype=np.float32)


SCORERS = ("sentence", "claim+evidence", "content words", "off common axis", "word max-sim", "sentence+word",
           "evidence, content, off axis", "soft terms")


def content_words(text: str) -> list[str]:
    words = _WORD.findall(text)
    return [w for w in words if w.casefold() not in FUNCTION_WORDS] or words


def first_and_margin(np: Any, scores: Any) -> tuple[int, float]:
    """The first claim's position and its lead over the runner-up."""
    order = np.argsort(-scores, kind="stable")
    runner_up = float(scores[order[1]]) if len(order) > 1 else 0.0
    return int(order[0]), float(scores[order[0]]) - runner_up


# ---------------------------------------------------------------------------------------------
# The Memoree corpus


def corpus_sets(folder: Path) -> tuple[list[ClaimText], list[Question]]:
    """The corpus's claims and its ambient paraphrase and unanswerable questions."""
    corpus = load_corpus(folder)
    texts = {s["label"]: s["content"]["data"] for s in corpus.seeds
             if s["entity"] == "artifact" and s.get("content", {}).get("type") == "text"}
    titles = {s["label"]: s.get("title", "") for s in corpus.seeds if s["entity"] == "artifact"}
    seeded = [s for s in corpus.seeds if s["entity"] == "claim"]
    position = {s["label"]: i for i, s in enumerate(seeded)}
    claims = [ClaimText(s["statement"], " ".join(e.get("quote") or texts.get(e["artifact_label"], "")
                                                 for e in s.get("evidence", [])),
                        " ".join(titles.get(e["artifact_label"], "") for e in s.get("evidence", []))) for s in seeded]
    questions = []
    for case in corpus.cases:
        if case.get("horizon", "ambient") != "ambient":
            continue
        gold = frozenset(position[label] for label in case.get("relevant_claims", []) if label in position)
        answerable = bool(case.get("relevant_claims") or case.get("relevant_artifacts"))
        if case.get("slice") == "paraphrase" and gold or not answerable:
            questions.append(Question(case["query"], gold, answerable))
    return claims, questions


def corpus_rows(model: Any, folder: Path) -> list[str]:
    claims, questions = corpus_sets(folder)
    scorers, np = Scorers(model, claims), model.np
    rows = [f"Memoree corpus {folder.name}: {sum(q.answerable for q in questions)} paraphrase questions "
            f"with a gold claim, {sum(not q.answerable for q in questions)} unanswerable",
            "| scorer | gold claim first | margins of those (sorted) | largest unanswerable margin | first and above it |",
            "|---|---|---|---|---|"]
    for name in SCORERS:
        firsts = [(q, *first_and_margin(np, scorers.score(name, q.text))) for q in questions]
        right = sorted(margin for q, first, margin in firsts if q.answerable and first in q.gold)
        worst = max((margin for q, _, margin in firsts if not q.answerable), default=0.0)
        rows.append(f"| {name} | {len(right)} | {', '.join(f'{m:.3f}' for m in right)} | {worst:.3f} | "
                    f"{sum(m > worst for m in right)} |")
    picked = [(q, scorers.soft_choice(q.text)) for q in questions]
    rows += ["", f"Soft terms rule (+{SOFT_MARGIN}, and first by the whole text): paraphrases answered right "
             f"{sum(c is not None and c in q.gold for q, c in picked if q.answerable)}, wrong "
             f"{sum(c is not None and c not in q.gold for q, c in picked if q.answerable)}; unanswerable answered "
             f"{sum(c is not None for q, c in picked if not q.answerable)}"]
    return rows


# ---------------------------------------------------------------------------------------------
# LoCoMo


def locomo_rows(model: Any, folder: Path) -> list[str]:
    np = model.np
    found: dict[str, list[tuple[float, float, float]]] = {name: [] for name in SCORERS}
    firsts: dict[str, list[tuple[Question, int, float, float]]] = {name: [] for name in SCORERS}
    choices: list[tuple[Question, int | None, int | None]] = []
    for conversation in read_dataset(folder):
        turns = conversation.turns
        observations = conversation.observations
        sessions = conversation.sessions
        claims = [ClaimText(o.text, " ".join(turns[d].body for d in o.dia_ids if d in turns),
                            f"Session {o.session}: {sessions[o.session].date if o.session in sessions else ''}, "
                            f"{conversation.speaker_a} and {conversation.speaker_b}") for o in observations]
        scorers = Scorers(model, claims)
        for q in conversation.questions:
            gold_turns = frozenset(q.gold)
            gold = frozenset(i for i, o in enumerate(observations) if gold_turns & set(o.dia_ids))
            question = Question(q.question, gold, q.category != ADVERSARIAL and bool(gold_turns),
                                q.category == ADVERSARIAL, gold_turns, q.category)
            choices.append((question, scorers.soft_choice(q.question), _sentence_choice(np, scorers, q.question)))
            for name in SCORERS:
                scores = scorers.score(name, q.question)
                first, margin = first_and_margin(np, scores)
                firsts[name].append((question, first, margin, float(scores[first])))
                if question.answerable:
                    order = np.argsort(-scores, kind="stable")
                    cited = lambda k: len(gold_turns & {d for i in order[:k] for d in observations[i].dia_ids})  # noqa: E731
                    found[name].append((float(first in gold), cited(5) / len(gold_turns), cited(10) / len(gold_turns)))
    rows = [f"LoCoMo {folder.name}: {len(found['sentence'])} answerable questions, "
            f"{sum(q.adversarial for q, *_ in firsts['sentence'])} adversarial",
            "| scorer | first claim right | gold turns cited @5 | @10 | precision, top third by margin | adversarial accepted at that margin | "
            + " | ".join(f">= {floor}, +{margin}: answerable accepted, precision, adversarial accepted" for floor, margin in RULES)
            + " |", "|---|---|---|---|---|---|" + "---|" * len(RULES)]
    for name in SCORERS:
        right, at5, at10 = (float(np.mean(column)) for column in zip(*found[name]))
        answerable = sorted(((m, first in q.gold) for q, first, m, _ in firsts[name] if q.answerable), reverse=True)
        accepted = answerable[:max(1, round(len(answerable) * ACCEPTED_SHARE))]
        cut = accepted[-1][0]
        adversarial = [m for q, _, m, _ in firsts[name] if q.adversarial]
        rules = []
        for floor, lead in RULES:
            passed = [(q, first in q.gold) for q, first, m, top in firsts[name] if top >= floor and m >= lead]
            right_ones = [ok for q, ok in passed if q.answerable]
            rules.append(f"{len(right_ones)}, {np.mean(right_ones) if right_ones else 0.0:.3f}, "
                         f"{sum(q.adversarial for q, _ in passed) / max(1, len(adversarial)):.3f}")
        rows.append(f"| {name} | {right:.3f} | {at5:.3f} | {at10:.3f} | {np.mean([ok for _, ok in accepted]):.3f} | "
                    f"{sum(m >= cut for m in adversarial) / max(1, len(adversarial)):.3f} | " + " | ".join(rules) + " |")
    return rows + [""] + acceptance_rows(choices)


def _sentence_choice(np: Any, scorers: Scorers, question: str) -> int | None:
    """The claim the whole-text rule accepts (first at least 0.24, 0.08 ahead), or ``None``."""
    scores = scorers.score("sentence", question)
    first, margin = first_and_margin(np, scores)
    return first if scores[first] >= RULES[0][0] and margin >= RULES[0][1] else None


def acceptance_rows(choices: Sequence[tuple[Question, int | None, int | None]]) -> list[str]:
    """Per category: the share of questions each rule accepts, and of the accepted answerable
    ones, the share whose claim cites a gold turn."""
    rows = ["Acceptance rules by category: accepted share (of those answerable, first claim right)",
            "| category | questions | whole text (>= 0.24, +0.08) | soft terms (+0.08, and first by the whole text) | "
            "either |", "|---|---|---|---|---|"]
    for category in sorted({q.category for q, _, _ in choices}):
        group = [(q, soft, sentence) for q, soft, sentence in choices if q.category == category]
        cells = []
        for pick in (lambda soft, sentence: sentence, lambda soft, sentence: soft,
                     lambda soft, sentence: sentence if sentence is not None else soft):
            taken = [(q, pick(soft, sentence)) for q, soft, sentence in group if pick(soft, sentence) is not None]
            right = [chosen in q.gold for q, chosen in taken if q.answerable]
            cells.append(f"{len(taken) / len(group):.3f}" + (f" ({sum(right) / len(right):.3f})" if right else ""))
        rows.append(f"| {category} | {len(group)} | " + " | ".join(cells) + " |")
    return rows


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=SHARED / "memoree-corpus" / "v2")
    parser.add_argument("--locomo", type=Path, default=SHARED / "locomo-dev")
    args = parser.parse_args(argv)
    model = load_model()
    if model is None:
        rows = ["skipped: the embedding model is not installed here"]
    else:
        rows = corpus_rows(model, args.corpus) if args.corpus.is_dir() else [f"skipped: no corpus at {args.corpus}"]
        rows += [""] + (locomo_rows(model, args.locomo) if args.locomo.is_dir()
                        else [f"skipped: no LoCoMo folder at {args.locomo}"])
    for row in rows:
        out(row)
    return rows


if __name__ == "__main__":
    main()
