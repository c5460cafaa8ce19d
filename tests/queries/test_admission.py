"""Claims from beyond the search's window in context.build (``queries.admission``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from memoree.eventlog.events import Scope
from memoree.queries.admission import ADMISSION_LABEL, admitted_claims
from memoree.queries.context_build import pack
from memoree.queries.search import ReadScope, read_snapshot, run_search
from tests.conftest import CTX, Caller
from tests.queries.test_search import claim

OTHER_PROJECT = {"workspace_id": "wsp_test", "project_id": "prj_other"}
QUERY = "Which hobby does Ann enjoy on weekends?"
FIRST = "Ann enjoys her hobby on weekends: painting"
BEYOND = "Ann likes hiking in the hills on weekends"


@pytest.fixture(autouse=True)
def with_model() -> None:
    from memoree.projections.embedding import load_model

    if load_model() is None:
        pytest.skip("the embedding model is not installed here")


def build(call: Caller, query: str = QUERY, **fields: Any) -> dict[str, Any]:
    return call.ok("context.build", {"query": query, "max_bytes": 4000, **fields})["result"]


def one_hit_run(call: Caller, semantic: bool = True) -> tuple[ReadScope, Any]:
    """A qualified search for ``QUERY`` with a window of one hit, and the scope it ran in."""
    engine = call.service.engine
    scope = ReadScope(conn=engine.conn, ambient=Scope(CTX["workspace_id"], CTX["project_id"], None, None),
                      pins=(), now=engine.handler.clock(), head=engine.head())
    return scope, run_search(scope, query=QUERY, limit=1, qualified_only=True, every_passage=True,
                             semantic=semantic)


def admitted_texts(call: Caller, **fields: Any) -> list[str]:
    scope, run = one_hit_run(call, **fields)
    with read_snapshot(scope.conn):
        return [hit.excerpt for hit in admitted_claims(scope, run)]


def test_a_claim_beyond_the_window_that_matches_the_question_is_admitted(call: Caller) -> None:
    """With a window of one hit, a second claim holding two of the question's words is admitted."""
    claim(call, FIRST)
    claim(call, BEYOND)
    assert [BEYOND] == admitted_texts(call)


def test_an_admitted_claim_takes_a_free_slot_of_the_bundle(call: Caller) -> None:
    """Packed with room for two sections and one hit, the admitted claim is shown beside it,
    its manifest reason saying it was admitted."""
    claim(call, FIRST)
    claim(call, BEYOND)
    scope, run = one_hit_run(call)
    with read_snapshot(scope.conn):
        admitted_hits = admitted_claims(scope, run)
        sections = pack(scope.conn, dataclasses.replace(run, limit=2), 4000, QUERY, admitted_hits)
    assert [FIRST, BEYOND] == sorted((s.hit.excerpt for s in sections), key=[FIRST, BEYOND].index)
    assert ADMISSION_LABEL in admitted_hits[0].matched_by


def test_the_bundle_never_holds_more_sections_than_the_limit(call: Caller) -> None:
    """With a limit of one, the bundle shows one item, though a claim beyond the window was
    admitted to compete for it, and nothing is counted as omitted."""
    claim(call, FIRST)
    claim(call, BEYOND)
    result = build(call, limit=1)
    assert 1 == len(result["manifest"]) and 0 == result["omitted_count"]
    assert len(result["rendered_markdown"].encode()) == result["used_bytes"] <= 4000


def test_a_claim_with_a_single_query_word_is_not_admitted(call: Caller) -> None:
    """A claim beyond the window that shares one word with the question stays out."""
    claim(call, FIRST)
    claim(call, "Weekends are busy at the market")
    assert [] == admitted_texts(call)


def test_nothing_outside_the_horizon_is_admitted(call: Caller) -> None:
    """A matching claim of another project is never admitted at the ambient horizon."""
    claim(call, FIRST)
    claim(call, BEYOND, context=OTHER_PROJECT)
    assert [] == admitted_texts(call)


def test_a_search_without_a_qualified_hit_admits_nothing(call: Caller) -> None:
    """The same search with its window emptied (no qualified hit: the question is unanswered)
    admits no claim, where with its one hit it admits the other."""
    claim(call, FIRST)
    claim(call, BEYOND)
    scope, run = one_hit_run(call)
    with read_snapshot(scope.conn):
        assert [BEYOND] == [hit.excerpt for hit in admitted_claims(scope, run)]
        assert [] == admitted_claims(scope, dataclasses.replace(run, hits=[]))


def test_an_expired_claim_is_not_admitted(call: Caller) -> None:
    """Only current claims are admitted: one whose validity ended stays out."""
    claim(call, FIRST)
    claim(call, BEYOND, valid_until="2000-01-01T00:00:00Z")
    assert [] == admitted_texts(call)
def test_with_the_channel_off_nothing_is_admitted(call: Caller) -> None:
    """A search with the dense channel off (semantic.enabled=false) admits no claim: the bundle
    is built from its hits alone."""
    claim(call, FIRST)
    claim(call, BEYOND)
    assert [] == admitted_texts(call, semantic=False)


def test_the_pool_from_the_runs_match_lists_is_the_pool_read_afresh(call: Caller) -> None:
    """Admission reads the claim match lists the search read in the same snapshot; reading
    them again instead gives the same pool, in the same order."""
    from memoree.queries.admission import claim_pool

    claim(call, FIRST)
    claim(call, BEYOND)
    claim(call, "Ann paints on weekends and hikes on holidays")
    scope, run = one_hit_run(call)
    assert "claim" in run.matches
    with read_snapshot(scope.conn):
        reused = [c.revision_id for c in claim_pool(scope, run)]
        afresh = [c.revision_id for c in claim_pool(scope, dataclasses.replace(run, matches={}))]
    assert reused and reused == afresh
