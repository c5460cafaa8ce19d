"""Projections: tables derived from the event log, rebuilt by replaying it.

Owns the projectors (entities, relations, conflicts, fts, keys, facts, idempotency), the runner
that applies events and advances checkpoints in one transaction (``base``), blue/green rebuilds
(``beside``), and the read records that both the write side and the read side use: how an
artifact, claim, relation, band or fact row reads back (``records``, ``relations``,
``fact_rows``, ``fact_results``). It imports the event log and the kernel only.

``sync_projectors()`` lists, in apply order, the projectors that run inside each mutation's
transaction; the idempotency projector runs last because it records each mutation's result as
the other projections show it.
"""

from __future__ import annotations

from memoree.eventlog.cas import ContentStore

from .base import Projector
from .conflicts import ConflictsProjector
from .entities import EntitiesProjector
from .facts import FactsProjector
from .fts import FtsProjector
from .idempotency import IdempotencyProjector
from .keys import KeysProjector
from .relations import RelationsProjector
from .vectors import VectorsProjector

__all__ = [
    "ConflictsProjector", "EntitiesProjector", "FtsProjector", "IdempotencyProjector", "KeysProjector", "Projector",
    "RelationsProjector", "VectorsProjector", "sync_projectors",
]


def sync_projectors(cas: ContentStore) -> list[Projector]:
    """Fresh instances of every synchronous projector, in apply order (fts reads bodies from ``cas``)."""
    # relations before conflicts: conflict cases read the relation rows already projected;
    # vectors after fts: it embeds the index text fts has just written.
    return [EntitiesProjector(), RelationsProjector(), ConflictsProjector(), FtsProjector(cas),
            VectorsProjector(), KeysProjector(), FactsProjector(), IdempotencyProjector()]
