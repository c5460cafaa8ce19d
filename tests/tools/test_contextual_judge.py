"""The contextual judge's offline comparison runs on a tiny generated BERT and tiny dev sets (no figure is asserted)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from safetensors.numpy import save_file
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

from tests.admin.test_locomo import write_dataset
from tests.memoree.test_eval import write_corpus
from tools.bench import contextual_judge

WORDS = "the image queue is processed by workers who handles picture jobs signs certificates".split()


def tiny_bert(folder: Path, hidden: int = 8, layers: int = 2) -> Path:
    """A random two-layer BERT with the tensor names and files of a sentence-transformers folder."""
    folder.mkdir()
    vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS])}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tokenizer.save(str(folder / "tokenizer.json"))
    rng = np.random.default_rng(7)
    shapes = {"embeddings.word_embeddings.weight": (len(vocab), hidden), "embeddings.position_embeddings.weight": (64, hidden),
              "embeddings.token_type_embeddings.weight": (2, hidden), "embeddings.LayerNorm.weight": (hidden,),
              "embeddings.LayerNorm.bias": (hidden,)}
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            shapes[f"{p}attention.self.{name}.weight"], shapes[f"{p}attention.self.{name}.bias"] = (hidden, hidden), (hidden,)
        shapes.update({f"{p}attention.output.dense.weight": (hidden, hidden), f"{p}attention.output.dense.bias": (hidden,),
                       f"{p}attention.output.LayerNorm.weight": (hidden,), f"{p}attention.output.LayerNorm.bias": (hidden,),
                       f"{p}intermediate.dense.weight": (2 * hidden, hidden), f"{p}intermediate.dense.bias": (2 * hidden,),
                       f"{p}output.dense.weight": (hidden, 2 * hidden), f"{p}output.dense.bias": (hidden,),
                       f"{p}output.LayerNorm.weight": (hidden,), f"{p}output.LayerNorm.bias": (hidden,)})
    save_file({name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()},
              str(folder / "model.safetensors"))
    (folder / "config.json").write_text(f'{{"num_attention_heads": 2, "num_hidden_layers": {layers}}}')
    return folder


class TestContextualModel:
    def test_rows_are_unit_and_do_not_depend_on_the_batch(self, tmp_path: Path) -> None:
        """A text embeds to the same unit row alone as padded in a batch with longer texts, every time."""
        model, _ = contextual_judge.load_contextual(tiny_bert(tmp_path / "bert"))
        assert model is not None
        texts = ["workers", "the image queue is processed by workers", "who signs the certificates"]
        batch = model.embed(texts)
        alone = np.concatenate([model.embed([t]) for t in texts])
        assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
        assert np.allclose(batch, alone, atol=1e-5)
        assert np.array_equal(batch, model.embed(texts))
        assert model.embed([]).shape == (0, 8)

    def test_gelu_is_the_exact_one(self, tmp_path: Path) -> None:
        """The activation follows x * Phi(x) (erf form) closely, not only its tanh approximation."""
        import math
        model, _ = contextual_judge.load_contextual(tiny_bert(tmp_path / "bert"))
        x = np.linspace(-6, 6, 101, dtype=np.float32)
        exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.tolist()], dtype=np.float32)
        assert np.max(np.abs(model._gelu(x) - exact)) < 1e-5

    def test_a_folder_without_weights_is_named(self, tmp_path: Path) -> None:
        """A model folder lacking model.safetensors is reported, not failed on."""
        assert (None, f"no model.safetensors in {tmp_path}") == contextual_judge.load_contextual(tmp_path)


class TestContextualJudgeSmoke:
    def test_every_scorer_gets_a_row_on_both_sets(self, tmp_path: Path) -> None:
        """Each scorer is reported for the Memoree corpus and for LoCoMo, after the cost rows."""
        corpus = write_corpus(tmp_path / "v2", [
            {"case_id": "p_1", "slice": "paraphrase", "query": "who handles picture jobs",
             "expected_presence": "claims", "relevant_claims": ["fact"]},
            {"case_id": "n_1", "slice": "honest_none", "query": "who signs the certificates", "expected_presence": "none"}])
        rows = contextual_judge.main(["--corpus", str(corpus), "--locomo", str(write_dataset(tmp_path / "dev")),
                                      "--model", str(tiny_bert(tmp_path / "bert"))], out=lambda row: None)
        for name in contextual_judge.SCORERS:
            assert 2 == sum(row.startswith(f"| {name} |") for row in rows)
        assert any(row.startswith("| a question + 20 claims |") for row in rows)

    def test_a_missing_model_is_skipped_with_the_reason(self, tmp_path: Path) -> None:
        """Without the model nothing is measured, and the row says why."""
        rows = contextual_judge.main(["--model", str(tmp_path)], out=lambda row: None)
        assert [f"skipped: no model.safetensors in {tmp_path}"] == rows
