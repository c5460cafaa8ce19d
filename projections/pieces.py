"""Tokenizing for the static embedding model: a text's ids as its pieces' ids, each piece's cached.

This module owns how ``projections.embedding`` turns text into token ids cheaply while giving
exactly the ids of the model's own tokenizer. WordLlama's tokenizer is a SentencePiece-style BPE
with no pre-tokenizer: it normalizes the whole text (``▁`` prepended, every space made ``▁``) and
runs BPE over that one long string, so nothing it computes is reused from one text to the next.
But a BPE merge can only join two symbols into a token of the vocabulary, and when no token of
the vocabulary holds a character other than ``▁`` followed by ``▁``, no merge can ever join the
end of one word to the ``▁`` that starts the next. The normalized text then splits at the start
of every run of ``▁`` into pieces that BPE tokenizes independently, and the ids of the text are
the ids of its pieces, in order. Pieces repeat (words do), so each piece's ids are kept in a
bounded cache, packed as native int32 bytes: a text costs a regular-expression split, one
dictionary lookup per word and one ``bytes.join``, and never builds a Python int per token.

The split is used only where it is exact: ``PieceTokenizer`` checks the tokenizer's configuration
(that normalizer, no pre-tokenizer, a BPE model without dropout) and the vocabulary property when
it is built, and hands any text that holds one of the tokenizer's added tokens (``<s>`` ...,
matched before normalization) to the tokenizer itself; so does a tokenizer that fails the check.
"""

from __future__ import annotations

import json
import re
from array import array
from pathlib import Path
from typing import Any

__all__ = ["PieceTokenizer", "pieces_are_independent"]

SPACE = "\u2581"
_PIECE = re.compile(f"{SPACE}+[^{SPACE}]*")
EXPECTED_NORMALIZER = {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": SPACE},
    {"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
]}
# Longer pieces (a URL, a hash, a run of code) rarely repeat: tokenized each time, never kept.
MAX_CACHED_PIECE_CHARS = 48
ID_BYTES = array("i").itemsize
CACHE_PIECES = 1 << 18  # ~60 MB at most; emptied when full (speed only, never the ids)


def pieces_are_independent(config: dict[str, Any]) -> bool:
    """Whether a tokenizer configuration (``tokenizer.json``) tokenizes a normalized text as the
    concatenation of its ``▁``-run-led pieces (see the module docstring)."""
    model = config.get("model") or {}
    if config.get("normalizer") != EXPECTED_NORMALIZER or config.get("pre_tokenizer") is not None:
        return False
    if model.get("type") != "BPE" or model.get("dropout") not in (None, 0, 0.0):
        return False
    vocabulary = model.get("vocab") or {}
    return not any(SPACE in token.lstrip(SPACE) for token in vocabulary)


class PieceTokenizer:
    """The ids the wrapped ``tokenizers.Tokenizer`` gives (no special tokens): ``encode(texts)``
    as lists, ``encode_packed(texts, limit)`` as native int32 bytes cut at ``limit`` ids."""

    def __init__(self, tokenizer: Any, config_file: Path) -> None:
        config = json.loads(config_file.read_text(encoding="utf-8"))
        self.tokenizer = tokenizer
        self.bpe = tokenizer.model
        self.split = pieces_are_independent(config)
        self.added = tuple(token["content"] for token in config.get("added_tokens") or [])
        self.cache: dict[str, bytes] = {}

    def encode(self, texts: list[str]) -> list[list[int]]:
        return [array("i", packed).tolist() for packed in self.encode_packed(texts)]

    def encode_packed(self, texts: list[str], limit: int | None = None) -> list[bytes]:
        cut = None if limit is None else limit * ID_BYTES
        if not self.split:
            return [array("i", ids).tobytes()[:cut] for ids in self._whole(texts)]
        out: list[bytes | None] = [None if self._has_added(text) else self._pieced(text)[:cut] for text in texts]
        if None in out:
            left = [i for i, ids in enumerate(out) if ids is None]
            for i, ids in zip(left, self._whole([texts[i] for i in left])):
                out[i] = array("i", ids).tobytes()[:cut]
        return out  # type: ignore[return-value]

    def _has_added(self, text: str) -> bool:
        return any(token in text for token in self.added)

    def _whole(self, texts: list[str]) -> list[list[int]]:
        if not texts:
            return []
        # encode_batch_fast gives the same ids without computing character offsets (not used here).
        encode = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)
        return [item.ids for item in encode(texts, add_special_tokens=False)]

    def _pieced(self, text: str) -> bytes:
        if not text:  # the normalizer prepends nothing to an empty text
            return b""
        if SPACE in text or "  " in text or text[0] == " ":
            keys = _PIECE.findall(SPACE + text.replace(" ", SPACE))  # each key is its piece
        else:
            # Every run of the marker is one long: the pieces are the marker and each word.
            keys = text.split(" ")
        found = list(map(self.cache.get, keys))
        if None in found:
            for i, ids in enumerate(found):
                if ids is None:
                    found[i] = self._piece(keys[i])
        return b"".join(found)  # type: ignore[arg-type]

    def _piece(self, key: str) -> bytes:
        """The ids of a piece, cached under ``key``: the piece itself, or the word it starts
        with the marker (a word never holds the marker, so the two kinds of key never meet)."""
        piece = key if key.startswith(SPACE) else SPACE + key
        ids = array("i", [token.id for token in self.bpe.tokenize(piece)]).tobytes()
        if len(key) <= MAX_CACHED_PIECE_CHARS:
            if len(self.cache) >= CACHE_PIECES:
                self.cache.clear()
            self.cache[key] = ids
        return ids
