"""Word-by-word tokenizing gives exactly the ids of the model's own tokenizer, for any text."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoree.projections import embedding
from memoree.projections.pieces import PieceTokenizer, pieces_are_independent

AWKWARD = [
    "", " ", "   ", "\n", "\t", "a", " a", "a ", "  two  spaces  ", "tab\tand\nnewline\r\nend",
    "literal \u2581 lower block \u2581\u2581 twice", "\u2581", "emoji 🦘🐨 and ZWJ 👩‍💻", "日本語のテキスト 中文",
    "accents: café naïve Ærøskøbing", "<s> a special token </s> and <unk>", "x<s>y", "</s>",
    "a" * 200, "https://example.com/a/very/long/path?with=query&and=more#fragment" * 3,
    "TKT-000123, ids: 0xDEADBEEF; e-mail@example.org", "line one\n\nline three\n   indented",
    "trailing spaces     ", "     leading spaces", "\u00a0no-break\u00a0space\u3000ideographic",
]


def folder() -> Path:
    found, _ = embedding._package_folder()
    if found is None:
        pytest.skip("the embedding model is not installed")
    return found


@pytest.fixture(scope="module")
def tokenizers() -> tuple[Any, PieceTokenizer]:
    from tokenizers import Tokenizer

    config = folder() / embedding.TOKENIZER_FILE
    reference = Tokenizer.from_file(str(config))
    return reference, PieceTokenizer(Tokenizer.from_file(str(config)), config)


def reference_ids(reference: Any, texts: list[str]) -> list[list[int]]:
    return [item.ids for item in reference.encode_batch(texts, add_special_tokens=False)]


class TestSameIds:
    """The piece cache never changes an id, whatever the text and whatever is cached."""

    def test_the_shipped_tokenizer_is_split_word_by_word(self, tokenizers: tuple[Any, PieceTokenizer]) -> None:
        """WordLlama's tokenizer passes the check, so the fast path is the one in use."""
        assert tokenizers[1].split

    def test_awkward_texts_give_the_reference_ids(self, tokenizers: tuple[Any, PieceTokenizer]) -> None:
        """Blank texts, runs of spaces, literal ▁, byte-fallback characters and special tokens."""
        reference, pieced = tokenizers
        assert reference_ids(reference, AWKWARD) == pieced.encode(AWKWARD)
        assert reference_ids(reference, AWKWARD) == pieced.encode(AWKWARD)  # now from the cache

    def test_a_texts_ids_do_not_depend_on_what_was_cached_before(
            self, tokenizers: tuple[Any, PieceTokenizer]) -> None:
        """The same passages, tokenized alone in a fresh cache and in a batch after others, agree."""
        from tokenizers import Tokenizer

        rng = random.Random(7)
        words = ["deploy", "Deploys", "Friday", "on", "the", "sync,", "re-run", "naïve", "42", "🦘", "x\u2581y"]
        texts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 30))) for _ in range(200)]
        reference, pieced = tokenizers
        config = folder() / embedding.TOKENIZER_FILE
        fresh = PieceTokenizer(Tokenizer.from_file(str(config)), config)
        assert [fresh.encode([text])[0] for text in reversed(texts)][::-1] == pieced.encode(texts)
        assert pieced.encode(texts) == reference_ids(reference, texts)

    def test_a_batch_of_uncached_words_filling_the_cache_gives_the_reference_ids(
            self, tokenizers: tuple[Any, PieceTokenizer], monkeypatch: pytest.MonkeyPatch) -> None:
        """A fresh cache, words tokenized together for a whole batch, the cache emptied while
        they are remembered, trailing and repeated spaces, long words: the reference ids."""
        from tokenizers import Tokenizer

        from memoree.projections import pieces

        monkeypatch.setattr(pieces, "CACHE_PIECES", 50)
        rng = random.Random(11)
        syllables = ["ka", "lo", "mi", "ré", "zu", "ŋa", "42", "-", ",", "\n"]
        words = ["".join(rng.choices(syllables, k=rng.randint(1, 30))) for _ in range(300)]
        texts = [rng.choice([" ", "  ", "\n "]).join(rng.choices(words, k=rng.randint(0, 40)))
                 + rng.choice(["", " ", "   "]) for _ in range(120)]
        config = folder() / embedding.TOKENIZER_FILE
        fresh = PieceTokenizer(Tokenizer.from_file(str(config)), config)
        reference = tokenizers[0]
        assert fresh.encode(texts) == reference_ids(reference, texts)
        assert fresh.encode(texts[::-1]) == reference_ids(reference, texts[::-1])

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.text(alphabet=st.sampled_from(list("ab é\u2581 \n\t<s/>🦘日")) | st.characters(),
                            max_size=60), max_size=4))
    def test_any_text_gives_the_reference_ids(self, tokenizers: tuple[Any, PieceTokenizer],
                                              texts: list[str]) -> None:
        """Generated texts (any characters, spaces and ▁ dense) tokenize to the reference ids."""
        texts = [text for text in texts if not any(0xD800 <= ord(c) <= 0xDFFF for c in text)]
        reference, pieced = tokenizers
        assert reference_ids(reference, texts) == pieced.encode(texts)


class TestTheCheck:
    """A tokenizer whose merges could cross a word boundary is never split."""

    def test_a_vocabulary_with_a_token_across_a_space_fails_the_check(self) -> None:
        """One token holding a letter followed by ▁ is enough to refuse the split."""
        config = json.loads((folder() / embedding.TOKENIZER_FILE).read_text(encoding="utf-8"))
        assert pieces_are_independent(config)
        config["model"]["vocab"] = {**config["model"]["vocab"], "s\u2581the": 32000}
        assert not pieces_are_independent(config)

    def test_a_different_normalizer_or_a_pre_tokenizer_fails_the_check(self) -> None:
        """The split assumes exactly the shipped normalization and no pre-tokenizer."""
        config = json.loads((folder() / embedding.TOKENIZER_FILE).read_text(encoding="utf-8"))
        assert not pieces_are_independent({**config, "normalizer": None})
        assert not pieces_are_independent({**config, "pre_tokenizer": {"type": "Whitespace"}})
        assert not pieces_are_independent({**config, "model": {**config["model"], "dropout": 0.1}})
