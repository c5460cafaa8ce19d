"""The local text-embedding model: which one, whether it is installed, and text -> unit vector.

memoree embeds with WordLlama's ``l2_supercat`` static token embeddings (MIT), which the
``wordllama`` wheel ships (256 dimensions, 16 MB, plus its tokenizer file): nothing is downloaded,
ever. This module reads those two files straight from the installed package (the package's own
loader looks for the tokenizer in the wrong folder and then tries to download it), tokenizes with
``tokenizers`` (word by word through a cache where that gives the same ids,
``projections.pieces``), sums the token rows and normalizes. A static model has no attention, so the
same text always gives the same vector, on any batch, which is what makes the ``vectors``
projection a deterministic function of the log and the model version.

Loading is lazy and happens once per process (the daemon or an embedded engine); nothing here is
imported on the ``memoree call`` path, and numpy is imported only when a model is loaded. Where
the package is missing or ``MEMOREE_SEMANTIC=off`` is set, ``load_model()`` returns ``None`` and
``model_status()`` says why: retrieval is then lexical, never an error.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from bisect import bisect_left
from itertools import accumulate
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .pieces import ID_BYTES, PieceTokenizer

__all__ = [
    "DIMENSIONS", "MODEL_ID", "Model", "ModelStatus", "common_axis", "load_model", "model_status",
    "quantize", "quantize_block", "split_rows",
]

MODEL_ID = "wordllama/l2_supercat_256"
PACKAGE = "wordllama"
WEIGHTS_FILE = "weights/l2_supercat_256.safetensors"
TOKENIZER_FILE = "tokenizers/l2_supercat_tokenizer_config.json"
TENSOR_KEY = "embedding.weight"
DIMENSIONS = 256
# Embedding a text past this many tokens adds nothing an average can still tell apart, and it
# bounds the work one write or one query can cause (a 64 KiB query word is ~16k tokens).
MAX_TOKENS = 2048
# Token rows gathered at once when summing a batch of texts: 2 MB of float32 rows, summed while
# still in cache (8,192 took 25% longer, measured on the bench corpus).
GATHER_TOKENS = 2048
QUANT_SCALE = 127.0
DISABLE_ENV = "MEMOREE_SEMANTIC"


@dataclass(frozen=True)
class ModelStatus:
    """Whether the model can be used here, and if not, why."""

    available: bool
    model_id: str
    revision: str | None
    dimensions: int
    reason: str


class Model:
    """A loaded static embedding model: ``embed(texts)`` -> unit float32 rows."""

    def __init__(self, folder: Path, revision: str) -> None:
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.np = np
        self.folder = folder
        self.revision = revision
        self.table = np.ascontiguousarray(load_file(str(folder / WEIGHTS_FILE))[TENSOR_KEY], dtype=np.float32)
        tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self.tokenizer = PieceTokenizer(tokenizer, folder / TOKENIZER_FILE)
        # Every id the tokenizer can give has a row: no clipping per text.
        self.ids_in_table = tokenizer.get_vocab_size(with_added_tokens=True) <= self.table.shape[0]
        self.common_axis = common_axis(np, self.table)

    def embed(self, texts: list[str]) -> Any:
        """One unit vector per text (all zeros for a text with no tokens), float32 ``(n, 256)``."""
        return self._normalized(self._token_sums(texts))

    def embed_terms(self, words: list[str]) -> tuple[Any, Any]:
        """(unit rows, lengths) of single words: a word's summed token rows are how far it
        moves a text's sum, so their length is the model's own weight for the word."""
        sums = self._token_sums(words)
        lengths = self.np.sqrt(self.np.einsum("ij,ij->i", sums, sums))
        return self._normalized(sums), lengths

    def embed_documents(self, documents: list[tuple[str, list[str]]]) -> Any:
        """For each (title, passages): the title's unit vector, then each passage's read under
        the title (the title's token rows added to the passage's), all tokenized in one batch
        with each title tokenized once. Rows in order, float32 ``(titles + passages, 256)``."""
        np = self.np
        texts = [text for title, passages in documents for text in (title, *passages)]
        sums = self._token_sums(texts)
        if len(documents) == 1:  # one write's document: every row after the first is a passage
            sums[1:] += sums[0]
            return self._normalized(sums)
        titles, position = [], 0
        for _, passages in documents:
            titles += [position] * (1 + len(passages))
            position += 1 + len(passages)
        rows = sums[titles]
        passage = np.arange(len(texts)) != np.asarray(titles, dtype=np.intp)
        rows[passage] += sums[passage]
        return self._normalized(rows)

    def _token_sums(self, texts: list[str]) -> Any:
        """Each text's token rows summed, float32 ``(n, 256)`` (zeros for a text with no tokens).

        Each text's rows are summed on their own, row after row (a reduction over a contiguous
        block of that text's rows alone): a vector never depends on which other texts shared
        its batch, so a replay in bulk rebuilds what one write stored. The rows of many texts
        are gathered at once, in blocks of about ``GATHER_TOKENS`` that end at a text's end."""
        np = self.np
        packed = self.tokenizer.encode_packed(texts, MAX_TOKENS)
        sums = np.zeros((len(texts), self.table.shape[1]), dtype=np.float32)
        ids = np.frombuffer(b"".join(packed), dtype=np.int32)
        if not self.ids_in_table:
            ids = np.clip(ids, 0, self.table.shape[0] - 1)
        ends = list(accumulate(len(text_ids) // ID_BYTES for text_ids in packed))
        start = block_start = block_end = 0
        block = None
        for i, end in enumerate(ends):
            if end == start:
                continue
            if end > block_end:
                block_start = start
                block_end = ends[min(len(ends) - 1, bisect_left(ends, start + GATHER_TOKENS))]
                block = self.table[ids[block_start:block_end]]
            sums[i] = np.add.reduce(block[start - block_start:end - block_start], axis=0)
            start = end
        return sums

    def _normalized(self, block: Any) -> Any:
        np = self.np
        norms = np.sqrt(np.einsum("ij,ij->i", block, block))
        if norms.all():
            block /= norms[:, None]
            return block
        good = norms > 0
        block[good] /= norms[good, None]
        block[~good] = 0.0
        return block


def common_axis(np: Any, table: Any) -> Any:
    """The unit direction of the mean token row: the direction every text's embedding leans
    toward, whatever it says. A fixed function of the model's weights (summed in float64 and
    rounded, so the same weights give the same axis on any machine), never of a store's rows;
    the dense channel's sign-bit prefilter takes bits only of what lies off this axis."""
    mean = np.round(table.astype(np.float64).mean(axis=0), 9)
    norm = float(np.sqrt(mean @ mean))
    if norm == 0.0:
        return np.zeros(table.shape[1], dtype=np.float32)
    axis = (mean / norm).astype(np.float32)
    axis.setflags(write=False)
    return axis


def quantize(np: Any, vectors: Any) -> list[bytes]:
    """Unit float32 rows -> int8 rows (``round(x * 127)``), the bytes the projection stores."""
    return split_rows(quantize_block(np, vectors), vectors.shape[1])


def quantize_block(np: Any, vectors: Any) -> bytes:
    """``quantize``'s rows as one bytes object, row after row."""
    scaled = np.rint(vectors * np.float32(QUANT_SCALE))
    return np.clip(scaled, -127, 127).astype(np.int8).tobytes()


def split_rows(block: bytes, width: int = DIMENSIONS) -> list[bytes]:
    """A block of int8 rows -> one bytes object per row."""
    return [block[start:start + width] for start in range(0, len(block), width)]


def _package_folder() -> tuple[Path | None, str | None]:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None, None
    folder = Path(next(iter(spec.submodule_search_locations)))
    try:
        from importlib.metadata import version

        revision = version(PACKAGE)
    except Exception:  # noqa: BLE001 - an unreadable dist-info only loses the revision label
        revision = "unknown"
    return folder, revision


def _disabled_by_environment() -> bool:
    return os.environ.get(DISABLE_ENV, "").strip().lower() in {"0", "off", "false", "no", "disabled"}


@functools.cache
def _probe() -> tuple[ModelStatus, Model | None]:
    if _disabled_by_environment():
        return ModelStatus(False, MODEL_ID, None, DIMENSIONS,
                           f"turned off by {DISABLE_ENV}; retrieval is lexical only"), None
    folder, revision = _package_folder()
    if folder is None or not (folder / WEIGHTS_FILE).is_file() or not (folder / TOKENIZER_FILE).is_file():
        return ModelStatus(False, MODEL_ID, None, DIMENSIONS,
                           "the embedding model is not installed (pip install wordllama); "
                           "retrieval is lexical only"), None
    try:
        model = Model(folder, revision or "unknown")
    except Exception as exc:  # noqa: BLE001 - a broken install answers lexically, never errors
        return ModelStatus(False, MODEL_ID, revision, DIMENSIONS,
                           f"the embedding model could not be loaded ({type(exc).__name__}); "
                           "retrieval is lexical only"), None
    return ModelStatus(True, MODEL_ID, revision, DIMENSIONS, "local static embedding model loaded"), model


def load_model() -> Model | None:
    """The process's model (loaded on first use), or ``None`` where it cannot be used."""
    return _probe()[1]


def model_status() -> ModelStatus:
    return _probe()[0]
