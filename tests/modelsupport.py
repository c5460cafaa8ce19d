"""What tests use to run a store as if the embedding model were not installed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from memoree.projections import embedding


@contextmanager
def model_absent(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Within the block the model probe finds no model (``embedding.DISABLE_ENV``); after it, the
    probe finds the installed one again."""
    monkeypatch.setenv(embedding.DISABLE_ENV, "off")
    embedding._probe.cache_clear()
    try:
        yield
    finally:
        monkeypatch.delenv(embedding.DISABLE_ENV)
        embedding._probe.cache_clear()
