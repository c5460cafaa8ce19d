"""Projections: tables derived from the event log, rebuilt by replaying it.

``sync_projectors()`` lists, in apply order, the projectors that run inside each mutation's
transaction; the idempotency projector runs last because it records each mutation's result as
the other projections show it.
"""

from __future__ import annotations

from .base import Projector
from .entities import EntitiesProjector
from .idempotency import IdempotencyProjector

__all__ = ["EntitiesProjector", "IdempotencyProjector", "Projector", "sync_projectors"]


def sync_projectors() -> list[Projector]:
    """Fresh instances of every synchronous projector, in apply order."""
    return [EntitiesProjector(), IdempotencyProjector()]
