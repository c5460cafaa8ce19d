"""The search pipeline (§5): qualification, typo channel, fusion, recency, horizons, citations."""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memoree.cli.app import app
from memoree.eventlog.timefmt import format_instant
from memoree.projections.records import OwnerContext
from memoree.queries.search import MAX_PROMOTION, Candidate, _promote, qualification_rank, with_artifact_floor
from memoree.service.service import Service
from tests.conftest import CTX, Caller

SIBLING = {"workspace_id": CTX["workspace_id"], "project_id": "prj_sibling"}
OPTIONAL_RANKING_FIELDS = {"trigram_similarity", "semantic_similarity"}


def put(call: Caller, text: str, *, title: str = "note", kind: str = "note",
        context: dict[str, Any] = CTX, media_type: str | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"kind": kind, "title": title, "content": {"type": "text", "data": text}}
    if media_type:
        payload["media_type"] = media_type
    call.counter += 1
    return call.ok("artifact.put", payload, key=f"put-{call.counter}", context=context)["result"]


def claim(call: Caller, statement: str, *, claim_type: str = "fact", context: dict[str, Any] = CTX,
          evidence: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    call.counter += 1
    payload = {"claim_type": claim_type, "statement": statement, "evidence": evidence or [], **extra}
    return call.ok("claim.assert", payload, key=f"claim-{call.counter}", context=context)["result"]


def search(call: Caller, query: str, context: dict[str, Any] = CTX, **fields: Any) -> dict[str, Any]:
    return call.ok("search", {"query": query, **fields}, context=context)["result"]


def titles(result: dict[str, Any]) -> list[str]:
    return [hit["title"] for hit in result["hits"]]


def content_bytes(call: Caller, artifact_id: str, revision_id: str) -> bytes:
    content = call.ok("artifact.get", {"artifact_id": artifact_id, "revision_id": revision_id},
                      context=None)["result"]["content"]
    return content["data"].encode() if content["type"] == "text" else base64.b64decode(content["data"])


def stepping_clock(start: datetime, step: timedelta) -> Callable[[], str]:
    ticks = itertools.count()
    return lambda: format_instant(start + step * next(ticks))


@pytest.fixture
def clocked(tmp_path: Path) -> Iterator[Callable[..., Caller]]:
    """Callers over fresh stores with a chosen clock (and id factory)."""
    services: list[Service] = []

    def make(clock: Callable[[], str], name: str = "data", **options: Any) -> Caller:
        service = Service(tmp_path / name, clock=clock, **options)
        services.append(service)
        return Caller(service)

    yield make
    for service in services:
        service.close()


class TestQualification:
    """A hit qualifies on its whole revision: every phrase and enough units must match."""

    def test_three_units_need_two_matches_and_unqualified_hits_stay_in_search(self, call: Caller) -> None:
        """With three units two must match; a one-unit match is returned but marked unqualified."""
        put(call, "The cache layer uses Redis", title="both")
        put(call, "Redis is fast", title="one")
        result = search(call, "cache redis layer")
        by_title = {hit["title"]: hit for hit in result["hits"]}
        assert by_title["both"]["ranking"]["qualified"] and by_title["both"]["ranking"]["exact_tier"]
        assert not by_title["one"]["ranking"]["qualified"]
        assert "lexical_candidate_v1" in by_title["one"]["matched_by"]
        assert (2, 1) == (result["query_analysis"]["required_matches"], result["unqualified_candidate_count"])

    def test_hyphenated_identifiers_are_mandatory_phrases(self, call: Caller) -> None:
        """APP-BOUNDARY-101 must occur as a phrase; its parts scattered do not qualify."""
        put(call, "APP-BOUNDARY-101 is accepted", title="exact")
        put(call, "the app has a boundary of 101 items", title="scattered")
        hits = search(call, "APP-BOUNDARY-101 accepted")["hits"]
        qualified = [hit["title"] for hit in hits if hit["ranking"]["qualified"]]
        assert ["exact"] == qualified

    def test_qualification_is_document_level_across_title_and_body(self, call: Caller) -> None:
        """One unit in the title and one in the body still qualify the revision."""
        put(call, "It keeps a write-ahead journal.", title="Durability of SQLite")
        hit = search(call, "sqlite journal")["hits"][0]
        assert hit["ranking"]["qualified"] and 1.0 == hit["ranking"]["lexical_coverage"]

    def test_inflections_fold_onto_one_unit(self, call: Caller) -> None:
        """"retries" finds "retry" and counts as one unit."""
        put(call, "The retry policy backs off", title="policy")
        hit = search(call, "retries policy")["hits"][0]
        assert (["retries", "policy"], 2) == (hit["ranking"]["matched_terms"], hit["ranking"]["matched_unit_count"])

    def test_frame_words_rank_below_the_words_a_question_is_about(self, call: Caller) -> None:
        """A line that shares the question's frame ("kind", "make") ranks below one that shares
        its subject ("pot"), though it matches more units."""
        put(call, "Mel said it was kind of her to make tea", title="frame")
        put(call, "Mel painted a pot", title="subject")
        put(call, "Mel went hiking", title="other")
        hits = search(call, "What kind of pot did Mel make?")["hits"]
        assert ["subject", "frame"] == [h["title"] for h in hits if h["ranking"]["qualified"]]
        assert 3 == next(h for h in hits if h["title"] == "frame")["ranking"]["matched_unit_count"]

    def test_bad_queries_and_bounds_are_invalid_requests(self, call: Caller) -> None:
        """Empty queries, limits outside 1..100 and unknown recency fields are rejected."""
        for payload in ({"query": "   "}, {"query": "x", "limit": 0}, {"query": "x", "limit": 101},
                        {"query": "x", "recency": {"enabled": True, "extra": 1}}, {"query": "x", "extra": 1}):
            envelope = call("search", payload)
            assert "INVALID_REQUEST" == envelope["error"]["code"], payload

    def test_a_claim_holding_a_long_questions_rare_words_qualifies(self, call: Caller) -> None:
        """A short statement with a long question's two rarest words qualifies (a third of the
        IDF the horizon holds) although it matches fewer than required_matches units; a
        document must still match required_matches, and so must a claim of common words."""
        for i in range(8):
            claim(call, f"Tim wrote about his plans during week {i} of the term")
            put(call, f"Tim talks about his plans during week {i}", title=f"session {i}")
        claim(call, "Tim is excited about Universal Studios")
        put(call, "A leaflet about Universal Studios", title="leaflet")
        question = "Which states might Tim visit during September based on his plans for Universal Studios?"
        hits = search(call, question)["hits"]
        assert 6 <= len(search(call, question)["query_analysis"]["content_units"])
        qualified = [h["excerpt"] if h["entity_type"] == "claim" else h["title"]
                     for h in hits if h["ranking"]["qualified"]]
        assert "Tim is excited about Universal Studios" in qualified
        assert "leaflet" not in qualified
        assert not any("wrote about his plans" in text for text in qualified)


class TestTypoChannel:
    """The typo channel corrects only words the horizon lacks, from the horizon's vocabulary."""

    def test_a_typo_query_finds_the_document_through_its_corrections(self, call: Caller) -> None:
        """"authoritatve sqlte" (one deletion each) matches by correction and qualifies."""
        put(call, "SQLite is authoritative for durable agent memory.", title="storage")
        hit = search(call, "sqlte authoritatve")["hits"][0]
        assert hit["ranking"]["trigram_qualified"] and not hit["ranking"]["lexical_qualified"]
        assert "trigram_typo_v1" in hit["matched_by"] and hit["ranking"]["trigram_similarity"] > 0.7

    def test_no_correction_for_words_the_horizon_holds(self, call: Caller) -> None:
        """Words that match exactly are never corrected, so a near miss is not a hit."""
        put(call, "SQLite is authoritative", title="exact")
        put(call, "SQLight is authoritativ", title="near miss")
        result = search(call, "sqlite authoritative")
        assert ["exact"] == titles(result)
        assert all("trigram" not in label for hit in result["hits"] for label in hit["matched_by"])

    def test_edits_swaps_and_abbreviations_are_corrected(self, call: Caller) -> None:
        """An insertion, a substitution, an adjacent swap and a prefix abbreviation each find it."""
        put(call, "The performance gates run in the browser harness.", title="gates")
        for query in ("performance gatess", "performance gotes", "performance gaets", "perf gates"):
            hit = search(call, query)["hits"][0]
            assert "gates" == hit["title"] and hit["ranking"]["qualified"], query

    def test_corrections_come_only_from_the_callers_horizon(self, call: Caller) -> None:
        """A word that exists only in another project is not a correction here."""
        put(call, "The ledger rotates weekly", title="here")
        put(call, "The lodger rotates weekly", title="sibling", context=SIBLING)
        assert ["here"] == titles(search(call, "lodgr rotates"))
        assert not any(h["ranking"]["trigram_qualified"] for h in search(call, "lodgr")["hits"])


class TestDeterministicRanking:
    """Identical memories rank identically; ids never break ties."""

    def populate(self, call: Caller) -> None:
        for i in range(6):
            put(call, f"deploy runbook step {i}: restart the cache service", title=f"step {i}", kind="runbook")
        claim(call, "Deploys restart the cache service", claim_type="procedure")

    def test_two_stores_with_the_same_memory_rank_the_same(self, clocked: Callable[..., Caller]) -> None:
        """Two stores fed the same writes at the same times (different random ids) rank alike."""
        start = datetime(2026, 1, 1, tzinfo=timezone.utc)
        left = clocked(stepping_clock(start, timedelta(hours=1)), "left")
        right = clocked(stepping_clock(start, timedelta(hours=1)), "right")
        for caller in (left, right):
            self.populate(caller)

        def ranked(caller: Caller) -> list[tuple[Any, ...]]:
            return [(h["title"], h["excerpt"], h["score"], h["ranking"]["final_position"])
                    for h in search(caller, "restart cache service")["hits"]]

        assert ranked(left) == ranked(right)
        assert len(ranked(left)) == 7

    def test_equal_scores_order_newest_first_not_by_id(self, clocked: Callable[..., Caller]) -> None:
        """Identical texts tie on every score and fall back to commit order, newest first."""
        ids = iter(f"{n:03d}" for n in range(999, 0, -1))
        caller = clocked(stepping_clock(datetime(2026, 1, 1, tzinfo=timezone.utc), timedelta(0)),
                         id_factory=lambda prefix: f"{prefix}_{next(ids)}")
        first = put(caller, "identical words here", title="same")
        second = put(caller, "identical words here", title="same")
        hits = search(caller, "identical words", recency={"enabled": False})["hits"]
        assert [second["artifact_id"], first["artifact_id"]] == [h["entity_id"] for h in hits]
        assert second["artifact_id"] < first["artifact_id"]  # an id-first tie-break would flip them


class TestBoundedRecency:
    """Recency nudges within a qualification rank, at most two places, never changing membership."""

    def store(self, clocked: Callable[..., Caller]) -> Caller:
        old = datetime(2020, 1, 1, tzinfo=timezone.utc)
        times = [old + timedelta(days=i) for i in range(8)] + [datetime(2026, 6, 1, tzinfo=timezone.utc)] * 50
        iterator = iter(times)
        caller = clocked(lambda: format_instant(next(iterator)))
        for i in range(6):
            put(caller, f"incident timeline {i} for the payment gateway", title=f"old {i}", kind="decision")
        put(caller, "payment gateway incident timeline " + "with diluting filler words " * 30,
            title="fresh", kind="session log")
        return caller

    def test_recency_promotes_at_most_two_places_and_keeps_membership(self, clocked: Callable[..., Caller]) -> None:
        """The fresh log rises by at most two places; the hit set is the same with recency off."""
        caller = self.store(clocked)
        on = search(caller, "payment gateway incident")
        off = search(caller, "payment gateway incident", recency={"enabled": False})
        assert sorted(titles(on)) == sorted(titles(off))
        for hit in on["hits"]:
            ranking = hit["ranking"]
            assert ranking["final_position"] >= ranking["lexical_position"] - MAX_PROMOTION
        fresh = next(h for h in on["hits"] if h["title"] == "fresh")["ranking"]
        assert fresh["recency_bonus"] > 0 and fresh["final_position"] < fresh["lexical_position"]
        assert "bounded_recency_v1" in on["retrieval_mode"]

    def test_disabled_recency_is_pure_lexical_order(self, clocked: Callable[..., Caller]) -> None:
        """With recency off, final positions equal lexical positions and no bonus is given."""
        off = search(self.store(clocked), "payment gateway incident", recency={"enabled": False})
        assert all(h["ranking"]["final_position"] == h["ranking"]["lexical_position"] and
                   h["ranking"]["recency_bonus"] == 0 for h in off["hits"])
        assert "bounded_recency_v1" not in off["retrieval_mode"]

    def test_every_ranking_field_is_populated(self, call: Caller) -> None:
        """Every ranking field has a value (similarities are null only for channels that did not score)."""
        put(call, "ranking fields are all present", title="r")
        ranking = search(call, "ranking fields")["hits"][0]["ranking"]
        assert all(value is not None for key, value in ranking.items() if key not in OPTIONAL_RANKING_FIELDS)
        assert {"bounded_recency_v1", "tiered_rrf_v2", "trigram_typo_v1", "lexical_qualification_v2"} <= {v for v in ranking.values() if isinstance(v, str)}

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.tuples(st.integers(0, 2), st.floats(0, 1, allow_nan=False)), min_size=0, max_size=25))
    def test_promotion_never_moves_more_than_two_places(self, items: list[tuple[int, float]]) -> None:
        """For any scores and ranks the rerank is a permutation moving no item up more than two places."""
        candidates = []
        for index, (tier, score) in enumerate(items):
            c = Candidate(entity_type="artifact", entity_id=f"a{index}", revision_id=f"r{index}", doc_id=index,
                          commit_seq=index, title="t", status="active",
                          owner=OwnerContext(workspace_id="w", project_id="p", pins=[]),
                          revision_created_at="", is_current_revision=True, kind="note")
            c.matched_free = ["x"] * tier
            c.score = score
            candidates.append(c)
        result = _promote(candidates)
        assert sorted(map(id, result)) == sorted(map(id, candidates))
        for final, c in enumerate(result):
            original = candidates.index(c)
            assert final >= original - MAX_PROMOTION
            if final < original:
                assert all(qualification_rank(o) == qualification_rank(c) for o in candidates[final:original])


class TestCurrentness:
    """Current-only retrieval hides future, expired, retracted, superseded and forgotten knowledge."""

    def test_future_and_expired_claims_appear_only_with_history(self, call: Caller) -> None:
        """Validity windows are half-open and evaluated at one instant; history labels them."""
        claim(call, "quota limit applies later", valid_from="2999-01-01T00:00:00Z")
        claim(call, "quota limit applied before", valid_until="2000-01-01T00:00:00Z")
        claim(call, "quota limit applies now", valid_from="2000-01-01T00:00:00Z")
        assert ["fact claim"] == titles(search(call, "quota limit"))
        historical = search(call, "quota limit", include_historical=True)["hits"]
        states = sorted((h["excerpt"], h["provenance"]["temporal_state"], h["provenance"]["is_current"]) for h in historical)
        assert [("quota limit applied before", "expired", False), ("quota limit applies later", "future", False),
                ("quota limit applies now", "current", True)] == states

    def test_lifecycle_changes_leave_current_retrieval(self, call: Caller) -> None:
        """Retracted and superseded claims, forgotten artifacts and old revisions are historical only."""
        retracted = claim(call, "legacy scheduler owns cron jobs")
        call.ok("claim.retract", {"claim_id": retracted["claim_id"], "reason": "wrong"}, key="retract")
        old = claim(call, "scheduler version one owns cron")
        new = claim(call, "scheduler version two owns cron")
        call.ok("relation.put", {"source_type": "claim", "source_id": new["claim_id"], "relation": "supersedes",
                                 "target_type": "claim", "target_id": old["claim_id"]}, key="sup")
        gone = put(call, "scheduler notes about cron", title="forgotten notes")
        call.ok("artifact.forget", {"artifact_id": gone["artifact_id"], "reason": "obsolete"}, key="forget")
        revised = put(call, "scheduler draft cron v1", title="draft")
        call.ok("artifact.revise", {"artifact_id": revised["artifact_id"], "if_revision": revised["revision_id"],
                                    "content": {"type": "text", "data": "final text"}}, key="revise")
        current = search(call, "scheduler cron")
        assert [new["claim_id"]] == [h["entity_id"] for h in current["hits"]]
        historical = search(call, "scheduler cron", include_historical=True)["hits"]
        statuses = {(h["entity_id"], h["status"], h["provenance"]["is_current"]) for h in historical}
        assert {(retracted["claim_id"], "retracted", False), (old["claim_id"], "superseded", False),
                (gone["artifact_id"], "forgotten", False), (new["claim_id"], "active", True)} <= statuses
        draft = next(h for h in historical if h["entity_id"] == revised["artifact_id"])
        assert not draft["provenance"]["is_current_revision"]


class TestHorizons:
    """Ambient by default; broader horizons need a reason; pins widen only artifact retrieval."""

    def test_sibling_projects_need_an_explicit_workspace_horizon(self, call: Caller) -> None:
        """A sibling project's artifact is invisible at ambient and visible at workspace with a reason."""
        put(call, "codename ORBIT7421 lives here", title="sibling", context=SIBLING)
        ambient = search(call, "ORBIT7421")
        assert [] == ambient["hits"] and ambient["broaden_hint"].startswith("No ambient matches")
        denied = call("search", {"query": "ORBIT7421", "horizon": "workspace"})
        assert "INVALID_REQUEST" == denied["error"]["code"]
        broad = call.ok("search", {"query": "ORBIT7421", "horizon": "workspace", "reason": "cross-project"})
        assert ["sibling"] == titles(broad["result"]) and broad["context"]["broadened"]

    def test_task_rows_are_visible_only_inside_their_task(self, call: Caller) -> None:
        """Project-level and own-task rows are ambient; another task's rows are not."""
        put(call, "shared rollout plan", title="project level")
        put(call, "rollout plan for task a", title="task a", context={**CTX, "task_id": "tsk_a"})
        put(call, "rollout plan for task b", title="task b", context={**CTX, "task_id": "tsk_b"})
        seen = sorted(titles(search(call, "rollout plan", context={**CTX, "task_id": "tsk_a"})))
        assert ["project level", "task a"] == seen
        assert 3 == len(search(call, "rollout plan")["hits"])

    def test_pins_make_foreign_artifacts_searchable_but_never_claims(self, call: Caller) -> None:
        """A bare pin shows the current revision; an ART@REV pin shows exactly that old revision."""
        foreign = put(call, "pinned glossary of terms", title="glossary", context=SIBLING)
        claim(call, "pinned glossary claim", context=SIBLING)
        revised = call.ok("artifact.revise", {"artifact_id": foreign["artifact_id"], "if_revision": foreign["revision_id"],
                                              "content": {"type": "text", "data": "pinned glossary v2"}},
                          key="rev", context=SIBLING)["result"]
        bare = search(call, "pinned glossary", context={**CTX, "pins": [foreign["artifact_id"]]})
        assert [revised["revision_id"]] == [h["revision_id"] for h in bare["hits"]]
        exact_pin = f"memoree://artifact/{foreign['artifact_id']}@{foreign['revision_id']}"
        exact = search(call, "pinned glossary", context={**CTX, "pins": [exact_pin]})
        assert [foreign["revision_id"]] == [h["revision_id"] for h in exact["hits"]]


class TestCitations:
    """Artifact hits cite the best chunk's exact bytes, or the revision when the title matched."""

    def test_every_span_citation_names_the_exact_excerpt_bytes(self, call: Caller) -> None:
        """Across short, long and multi-byte bodies, bytes[start:end] equals the excerpt."""
        filler = "Ünïcode filler paragraph about nothing in particular.\n\n" * 200
        put(call, filler + "The needle keyword zebraflux sits here.\n\n" + filler, title="long doc")
        put(call, "short body with zebraflux", title="short doc")
        hits = search(call, "zebraflux")["hits"]
        assert 2 == len(hits)
        for hit in hits:
            assert "#" in hit["citation"]
            span = hit["provenance"]["retrieval_span"]
            data = content_bytes(call, hit["entity_id"], hit["revision_id"])
            assert data[span["start_byte"]:span["end_byte"]].decode() == hit["excerpt"]
            assert "zebraflux" in hit["excerpt"] and "artifact_citation_span_v1" in hit["matched_by"]
            assert hit["citation"].endswith(f"#{span['start_byte']}-{span['end_byte']}")

    def test_the_best_chunk_has_most_units_then_the_best_bm25(self, call: Caller) -> None:
        """A chunk matching more query units wins over a denser one; among chunks matching the
        same units, the one BM25 ranks higher (the denser) is cited."""
        filler = "Plain filler sentence without the words we look for here.\n\n" * 40  # ~2.4 KB: own chunk
        sparse = "A long paragraph mentions quokka once. " + "Many other words follow it. " * 60 + "\n\n"
        dense = "quokka quokka quokka: a short dense paragraph.\n\n"
        both = "quokka and wallaby together in one paragraph.\n\n"
        put(call, sparse + filler + dense + filler, title="tie on units")
        put(call, dense + filler + both + filler, title="more units")
        hits = {h["title"]: h for h in search(call, "quokka")["hits"]}
        assert "dense paragraph" in hits["tie on units"]["excerpt"]
        two_units = {h["title"]: h for h in search(call, "quokka wallaby")["hits"]}
        assert "wallaby" in two_units["more units"]["excerpt"]

    def test_a_title_only_match_cites_the_revision_without_a_span(self, call: Caller) -> None:
        """When only the title matches, the excerpt is the title and the citation has no span."""
        put(call, "body text without the identifier", title="ORBITAL-TITLE-742 record")
        hit = search(call, "ORBITAL-TITLE-742")["hits"][0]
        assert ("ORBITAL-TITLE-742 record", "title") == (hit["excerpt"], hit["provenance"]["retrieval_match"])
        assert "#" not in hit["citation"]

    def test_binary_artifacts_are_title_searchable_only(self, call: Caller) -> None:
        """Non-textual media types index the title, never the bytes."""
        put(call, "secret body words", title="diagram", media_type="application/octet-stream")
        assert [] == search(call, "secret body")["hits"]
        assert ["diagram"] == titles(search(call, "diagram"))


class TestTruncationAndReadiness:
    """Truncation is reported with hints; a future min_commit_seq is INDEX_NOT_READY."""

    def test_truncated_results_carry_a_refine_hint(self, call: Caller) -> None:
        """More hits than the limit sets truncated and a refine hint naming the limit."""
        for i in range(4):
            put(call, f"alpha beta {i}", title=f"t{i}")
        result = search(call, "alpha beta", limit=2)
        assert (2, True) == (len(result["hits"]), result["truncated"])
        assert "limit of 2" in result["refine_hint"] and "broaden_hint" not in result

    def test_min_commit_seq_is_a_compare_against_the_head(self, call: Caller) -> None:
        """At or below the head the write is visible; beyond it the read is retryably refused."""
        written = call.ok("artifact.put", {"kind": "n", "title": "fresh write", "content": {"type": "text", "data": "x"}}, key="k")
        visible = search(call, "fresh write", min_commit_seq=written["commit_seq"])
        assert ["fresh write"] == titles(visible)
        refused = call("search", {"query": "fresh write", "min_commit_seq": written["commit_seq"] + 1})
        error = refused["error"]
        assert ("INDEX_NOT_READY", True) == (error["code"], error["retryable"])
        assert {"requested_commit_seq": written["commit_seq"] + 1, "current_commit_seq": written["commit_seq"]} == error["details"]


class TestCommandLine:
    """The retrieval wrappers build the protocol requests and print the envelopes."""

    def test_search_recall_context_probe_and_citation_commands(self, tmp_path: Path) -> None:
        """Each wrapper answers ok through the in-process path with the ambient context."""
        env = {"MEMOREE_IN_PROCESS": "1", "MEMOREE_CONTEXT": json.dumps(CTX), "MEMOREE_HOME": str(tmp_path / "home")}
        runner = CliRunner()
        base = ["--data-dir", str(tmp_path / "data")]

        def run(*args: str) -> dict[str, Any]:
            result = runner.invoke(app, [*base, *args], env=env)
            assert 0 == result.exit_code, result.stdout
            return json.loads(result.stdout)

        service = Service(tmp_path / "data")
        put(Caller(service), "The retry budget is three attempts.", title="retry policy")
        service.close()
        hit = run("search", "retry", "budget", "--no-recency")["result"]["hits"][0]
        assert "bounded_recency_v1" not in hit["matched_by"]
        assert "artifacts_only" == run("recall", "retry", "budget")["result"]["presence"]
        bundle = run("context", "build", "retry", "budget", "--max-bytes", "2000")["result"]
        assert bundle["used_bytes"] <= 2000 and bundle["manifest"]
        assert run("probe", "retry")["result"]["content_is_untrusted"]
        fetched = run("citation", "get", hit["citation"])["result"]
        assert fetched["content"] == hit["excerpt"]
        broadened = runner.invoke(app, [*base, "search", "retry", "--horizon", "workspace"], env=env)
        assert 2 == broadened.exit_code


def _ranked(kinds: str) -> list[Candidate]:
    """Candidates in rank order, ``a`` an artifact and ``c`` a claim each, all qualified."""
    made = []
    for index, kind in enumerate(kinds):
        entity_type = "artifact" if kind == "a" else "claim"
        made.append(Candidate(entity_type=entity_type, entity_id=f"{kind}{index}", revision_id=f"r{index}",
                              doc_id=index, commit_seq=index, title="t", status="active",
                              owner=OwnerContext(workspace_id="w", project_id="p", pins=[]),
                              revision_created_at="", is_current_revision=True, kind="note"))
    return made


class TestArtifactFloor:
    """A bundle's window keeps room for a second session when claims would fill it."""

    def test_the_next_artifact_takes_the_lowest_claims_place(self) -> None:
        """Nine claims and one artifact in a window of ten: the next artifact replaces the last claim."""
        ranked = _ranked("ccccacccccca")
        window = with_artifact_floor(ranked, 10, 2)
        assert [c.entity_id for c in window] == [c.entity_id for c in ranked[:9]] + ["a11"]

    def test_no_floor_and_a_full_floor_keep_the_first_limit(self) -> None:
        """Without a floor, or with enough artifacts already, the window is the first ``limit`` hits."""
        ranked = _ranked("cacaccccccca")
        assert with_artifact_floor(ranked, 10, 0) == ranked[:10]
        assert with_artifact_floor(ranked, 10, 2) == ranked[:10]

    def test_exact_tier_and_conflicted_claims_never_give_way(self) -> None:
        """Only an ordinary claim yields its place; with none left the window stays short of the floor."""
        ranked = _ranked("ccccccaa")
        ranked[0].exact_tier = True
        ranked[1].status = "conflicted"
        ranked[2].retained_for_conflict = True
        assert with_artifact_floor(ranked[:3] + ranked[6:], 3, 2) == ranked[:3]
        ranked[2].retained_for_conflict = False
        assert [c.entity_id for c in with_artifact_floor(ranked, 6, 3)] == ["c0", "c1", "c2", "c3", "a6", "a7"]

    def test_the_floor_takes_at_most_half_the_window(self) -> None:
        """A window of one keeps its claim, and one of three gives a single place to an artifact."""
        ranked = _ranked("cccaa")
        assert with_artifact_floor(ranked, 1, 2) == ranked[:1]
        assert [c.entity_id for c in with_artifact_floor(ranked, 3, 2)] == ["c0", "c1", "a3"]
