"""Fusion (`tiered_rrf_v2`) and the bounded recency nudge (`bounded_recency_v1`), §5.6 and §5.8.

This module owns how per-channel rankings become one order. Each retrieval channel is a
``Channel``: a name, an RRF weight and a function giving a candidate's score in that channel
(``None``: the channel did not find it). ``fuse`` ranks every channel's candidates (score DESC,
newest first, within each entity table), adds ``weight / (60 + rank)`` per channel, keeps exact-tier hits (every unit
matched lexically) ordered by the lexical channel alone and ahead of the rest, and sorts with
content-based tie-breaks. A new channel (a dense model, say) joins by appending a ``Channel``
to the tuple passed to ``fuse``; it can reorder only non-exact hits. Then recency adds a bonus
proportional to the fused score and lets a hit rise at most two places past same-rank neighbours.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .candidates import Candidate

__all__ = ["CHANNELS", "Channel", "MAX_PROMOTION", "SEMANTIC", "WITH_SEMANTIC", "apply_recency",
           "fuse", "qualification_rank"]

RRF_K = 60
MAX_PROMOTION = 2
SECONDS_PER_DAY = 86400


@dataclass(frozen=True)
class Channel:
    """One ranked list's contribution to fusion."""

    name: str
    weight: float
    score: Callable[[Candidate], float | None]
    reorders_exact_tier: bool = False


LEXICAL = Channel("lexical", 1.0, lambda c: c.lexical_score if c.lexical_candidate else None,
                  reorders_exact_tier=True)
TYPO = Channel("trigram", 0.7, lambda c: c.trigram_score)
SEMANTIC = Channel("semantic", 0.85, lambda c: c.semantic_similarity)
CHANNELS: tuple[Channel, ...] = (LEXICAL, TYPO)
WITH_SEMANTIC: tuple[Channel, ...] = (*CHANNELS, SEMANTIC)


def channel_ranks(candidates: Sequence[Candidate], channel: Channel) -> dict[int, int]:
    """1-based rank of each candidate the channel scored: best score, then newest, ranked
    within its entity table (a claim's and a document's scores are not on one scale: a short
    statement's BM25 is not comparable with a long document's), so the tables interleave."""
    ranks: dict[int, int] = {}
    for entity_type in ("artifact", "claim"):
        scored = [(channel.score(c), c) for c in candidates if c.entity_type == entity_type]
        ranked = sorted(((s, c) for s, c in scored if s is not None),
                        key=lambda pair: (-pair[0], -pair[1].commit_seq))
        ranks.update({id(c): rank for rank, (_, c) in enumerate(ranked, 1)})
    return ranks


def fuse(candidates: list[Candidate], channels: Sequence[Channel] = CHANNELS) -> list[Candidate]:
    """Score by tiered RRF over ``channels`` and sort with content-based tie-breaks."""
    ranks = [(channel, channel_ranks(candidates, channel)) for channel in channels]
    for c in candidates:
        c.exact_tier = c.lexical_qualified and c.lexical_coverage == 1.0
        fusion = 0.0
        for channel, rank in ranks:
            if id(c) in rank and (channel.reorders_exact_tier or not c.exact_tier):
                share = channel.weight / (RRF_K + rank[id(c)])
                c.channel_scores[channel.name] = share
                fusion += share
        c.fusion = round(fusion, 12)
        c.score = c.fusion
    return sorted(candidates, key=rank_key)


def rank_key(c: Candidate) -> tuple[Any, ...]:
    return (not c.exact_tier, -c.fusion, -len(c.matched_phrases), -c.lexical_coverage,
            -c.commit_seq, c.excerpt, c.entity_id)


# ---------------------------------------------------------------------------------------------
# Bounded recency (§5.8)

# (decay class, half-life days, max bonus ratio)
CLAIM_DECAY = {
    "observation": ("observation", 30, 0.10),
    "preference": ("preference", 180, 0.06),
    "procedure": ("procedure", 365, 0.04),
    "decision": ("decision", 730, 0.025),
    "constraint": ("constraint", 3650, 0.01),
    "fact": ("general", 180, 0.05),
}
ARTIFACT_KIND_DECAY = (
    (("log", "session", "trace", "observation"), ("ephemeral", 30, 0.10)),
    (("decision", "adr"), ("decision", 730, 0.025)),
    (("constraint", "policy", "spec"), ("constraint", 3650, 0.01)),
    (("procedure", "runbook"), ("procedure", 365, 0.04)),
)
GENERAL_DECAY = ("general", 180, 0.05)


@functools.lru_cache(maxsize=1 << 14)
def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def decay_for(candidate: Candidate) -> tuple[str, int, float]:
    return _decay(candidate.entity_type, candidate.kind)


@functools.lru_cache(maxsize=4096)
def _decay(entity_type: str, kind: str) -> tuple[str, int, float]:
    if entity_type == "claim":
        return CLAIM_DECAY.get(kind, GENERAL_DECAY)
    kind = kind.lower()
    for needles, decay in ARTIFACT_KIND_DECAY:
        if any(needle in kind for needle in needles):
            return decay
    return GENERAL_DECAY


def apply_recency(candidates: list[Candidate], enabled: bool, now: str) -> list[Candidate]:
    """Add the bounded bonus and let items rise ≤2 places past same-rank, lower-score neighbours."""
    evaluated = _instant(now)
    for position, c in enumerate(candidates, 1):
        c.lexical_position = position
        if c.entity_type == "claim" and c.valid_from is not None:
            c.effective_at, c.effective_at_basis = c.valid_from, "valid_from"
        else:
            c.effective_at, c.effective_at_basis = c.revision_created_at, "revision_created_at"
        c.decay_class, half_life, ratio = decay_for(c)
        c.recency_eligible = c.is_current(now) and c.effective_at <= now
        c.recency_bonus = 0.0
        if enabled and c.recency_eligible:
            age_days = max(0, int((evaluated - _instant(c.effective_at)).total_seconds())) / SECONDS_PER_DAY
            c.recency_bonus = round(c.fusion * ratio * 2 ** (-age_days / half_life), 12)
        c.score = round(c.fusion + c.recency_bonus, 12)
    ordered = _promote(candidates) if enabled else list(candidates)
    for position, c in enumerate(ordered, 1):
        c.final_position = position
    return ordered


def qualification_rank(c: Candidate) -> tuple[Any, ...]:
    return (c.exact_tier, c.lexical_qualified, c.trigram_qualified, c.semantic_qualified,
            len(c.matched_phrases), c.matched_unit_count)


def _promote(candidates: Sequence[Candidate]) -> list[Candidate]:
    result: list[Candidate] = []
    for index, item in enumerate(candidates):
        position = len(result)
        floor = max(0, index - MAX_PROMOTION)
        while (position > floor and qualification_rank(result[position - 1]) == qualification_rank(item)
               and item.score > result[position - 1].score):
            position -= 1
        result.insert(position, item)
    return result
