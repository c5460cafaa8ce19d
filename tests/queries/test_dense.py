"""The dense channel: meaning finds what words miss, inside the same horizon, and never answers
an unanswerable question; it can be turned off per request and is absent without the model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memoree.projections import embedding
from tests.conftest import CTX, Caller
from tests.modelsupport import model_absent

SIBLING = {"workspace_id": CTX["workspace_id"], "project_id": "prj_sibling"}
QUESTION = "How are passwords stored?"


def claim(call: Caller, statement: str, *, evidence: list[dict[str, Any]] | None = None,
          context: dict[str, Any] = CTX) -> dict[str, Any]:
    call.counter += 1
    return call.ok("claim.assert", {"claim_type": "decision", "statement": statement,
                                    "evidence": evidence or []}, key=f"c-{call.counter}",
                   context=context)["result"]


def seed(call: Caller) -> dict[str, Any]:
    """A decision worded unlike ``QUESTION``, its source, and unrelated claims around it."""
    source = call.put_text("Security notes: user credentials are hashed with argon2 before writing.",
                           title="security notes")
    made = claim(call, "User credentials are hashed with argon2",
                 evidence=[{"artifact_id": source["artifact_id"], "revision_id": source["revision_id"]}])
    claim(call, "The billing service stores invoices in PostgreSQL")
    claim(call, "Search results are ranked with BM25")
    return {"source": source, "claim": made}


def recall(call: Caller, query: str, context: dict[str, Any] = CTX, **fields: Any) -> dict[str, Any]:
    return call.ok("memory.recall", {"query": query, **fields}, context=context)["result"]


def without_clock(document: Any) -> Any:
    """A response with its evaluation instant removed (two requests are never at one instant)."""
    if isinstance(document, dict):
        return {k: without_clock(v) for k, v in document.items() if k != "evaluated_at"}
    if isinstance(document, list):
        return [without_clock(v) for v in document]
    return document


@pytest.fixture
def model_missing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with model_absent(monkeypatch):
        yield


class TestMeaning:
    """A question that shares no word with a claim still finds it, with its evidence."""

    def test_a_paraphrase_recalls_the_claim_and_its_source(self, call: Caller) -> None:
        """The claim and the artifact it cites come back; the ranking says the dense channel found them."""
        made = seed(call)
        result = recall(call, QUESTION)
        assert "claims" == result["presence"] and "ready" == result["semantic_claims"]["state"]
        assert [made["claim"]["claim_id"]] == [c["claim_id"] for c in result["claims"]]
        assert [made["source"]["artifact_id"]] == [a["artifact_id"] for a in result["artifact_refs"]]
        hit = call.ok("search", {"query": QUESTION})["result"]["hits"][0]
        assert hit["ranking"]["semantic_qualified"] and not hit["ranking"]["lexical_qualified"]
        assert hit["ranking"]["semantic_similarity"] > 0 and "local_dense_context_v3" in hit["matched_by"]

    def test_the_channel_sees_only_the_callers_horizon(self, call: Caller) -> None:
        """A claim in a sibling project is never found ambiently, by meaning or otherwise."""
        claim(call, "User credentials are hashed with argon2", context=SIBLING)
        result = recall(call, QUESTION)
        assert "none" == result["presence"]
        hits = call.ok("search", {"query": QUESTION})["result"]["hits"]
        assert all(h["context"]["project_id"] == CTX["project_id"] for h in hits)

    def test_an_artifact_that_is_only_near_is_a_lead_not_an_answer(self, call: Caller) -> None:
        """A note near the question that no claim cites may be a search candidate, never a recall answer."""
        call.put_text("Musings on how one might keep user secrets safe some day.", title="idle thoughts")
        result = recall(call, QUESTION)
        assert "none" == result["presence"]
        hits = call.ok("search", {"query": QUESTION})["result"]["hits"]
        assert hits and all(h["ranking"]["semantic_similarity"] and not h["ranking"]["qualified"] for h in hits)


    def test_a_qualified_claim_brings_its_cited_source(self, call: Caller) -> None:
        """The source a qualifying claim cites is returned with it, qualified by meaning and cited by
        an exact span, even when many other notes are nearer the question than the source."""
        text = "Release train notes.\nUser credentials are hashed with argon2 before writing.\nMisc."
        source = call.put_text(text, title="release train")
        start = text.encode().index(b"User")
        end = start + len("User credentials are hashed with argon2 before writing.")
        evidence = [{"artifact_id": source["artifact_id"], "revision_id": source["revision_id"],
                     "start_byte": start, "end_byte": end}]
        claim(call, "User credentials are hashed with argon2", evidence=evidence)
        for n in range(12):
            call.put_text(f"Password storage musings number {n}: how are passwords kept safe?",
                          title=f"password musings {n}")
        result = recall(call, QUESTION)
        assert source["artifact_id"] in [a["artifact_id"] for a in result["artifact_refs"]]
        hits = call.ok("search", {"query": QUESTION, "limit": 40})["result"]["hits"]
        cited = next(h for h in hits if h["entity_id"] == source["artifact_id"])
        assert cited["ranking"]["semantic_qualified"] and "#" in cited["citation"]

    def test_a_near_claim_whose_source_answers_by_words_qualifies(self, call: Caller) -> None:
        """Both channels agree: the claim is near by meaning and its cited source matches the words."""
        source = call.put_text("Vault rotation runbook: the vault keys rotate every quarter on the first Monday.",
                               title="vault rotation runbook")
        made = claim(call, "Encryption keys are renewed each quarter",
                     evidence=[{"artifact_id": source["artifact_id"], "revision_id": source["revision_id"]}])
        claim(call, "The billing service stores invoices in PostgreSQL")
        result = recall(call, "when do vault keys rotate")
        assert made["claim_id"] in [c["claim_id"] for c in result["claims"]]


class TestWordByWord:
    """A claim the question's own words point to, one near word each, answers when a second
    channel agrees (the whole question's meaning or the lexical channel puts it first)."""

    NOTES = (("The billing service stores invoices in PostgreSQL", "billing notes"),
             ("Search results are ranked with BM25", "search notes"),
             ("Webhook retries back off exponentially", "webhook notes"),
             ("Deploys are frozen on Fridays", "deploy notes"),
             ("User credentials are hashed with argon2", "security notes"))

    def sourced(self, call: Caller, statement: str, title: str) -> dict[str, Any]:
        source = call.put_text(f"{statement} (recorded in the {title})", title=title)
        return claim(call, statement, evidence=[{"artifact_id": source["artifact_id"],
                                                 "revision_id": source["revision_id"]}])

    def test_words_and_the_whole_meaning_agree(self, call: Caller) -> None:
        """The claim is the nearest by meaning, too far for the whole-text rule alone, and its
        text (with its source's title) has a near word for each question word."""
        made = self.sourced(call, "The nightly exporter now writes compact archives.", "exporter size experiment")
        for statement, title in self.NOTES:
            self.sourced(call, statement, title)
        question = "Is the experimental export output smaller?"
        result = recall(call, question)
        assert [made["claim_id"]] == [c["claim_id"] for c in result["claims"]]
        hit = next(h for h in call.ok("search", {"query": question})["result"]["hits"] if h["entity_type"] == "claim")
        assert hit["ranking"]["semantic_qualified"] and hit["ranking"]["semantic_similarity"] < 0.24

    def test_words_and_the_lexical_channel_agree(self, call: Caller) -> None:
        """The claim sharing the question's rarest word is the lexical channel's first and the
        first word by word, while another claim is nearer by the whole text through a spelling
        ("final" in "finalized"): the first answers, the other does not."""
        made = self.sourced(call, "The night shift alone owns the terminal handover; day staff may observe it "
                                  "but never start it.", "shift ownership")
        decoy = self.sourced(call, "Finalized rosters are posted by the scheduling desk.", "roster notes")
        for statement, title in self.NOTES:
            self.sourced(call, statement, title)
        result = recall(call, "Who is allowed to issue the final handover?")
        assert [made["claim_id"]] == [c["claim_id"] for c in result["claims"]]
        assert decoy["claim_id"] not in [c["claim_id"] for c in result["claims"]]

    def test_two_claims_equally_near_word_by_word_answer_nothing(self, call: Caller) -> None:
        """Where two claims share the question's words alike, neither leads: presence stays none."""
        for statement, title in self.NOTES:
            self.sourced(call, statement, title)
        self.sourced(call, "The nightly exporter writes compact archives.", "exporter notes")
        self.sourced(call, "The weekly exporter writes compact archives.", "exporter notes")
        assert "none" == recall(call, "Is the export output smaller?")["presence"]


class TestHonestNone:
    """Nearness alone does not answer a question memory cannot answer."""

    def test_an_unanswerable_question_stays_none(self, call: Caller) -> None:
        """A question about something never stored gets presence none."""
        seed(call)
        assert "none" == recall(call, "Who signs the mobile application certificates?")["presence"]

    def test_a_shared_topic_word_alone_is_no_answer(self, call: Caller) -> None:
        """A claim that is near only because it shares the query's topic word does not qualify."""
        claim(call, "Webhook retries back off exponentially")
        assert "none" == recall(call, "webhook signing secret rotation")["presence"]

    def test_a_word_shared_only_by_its_spelling_is_no_answer_either(self, call: Caller) -> None:
        """A claim near the query only through a word the typo channel matches ("final" in
        "finalized": one model token) does not qualify; the rest of the query is far from it."""
        claim(call, "Finalized contracts are stored in the vault.")
        claim(call, "The billing service stores invoices in PostgreSQL")
        claim(call, "Search results are ranked with BM25")
        result = recall(call, "Who gives final sign-off?")
        assert "none" == result["presence"]
        hits = call.ok("search", {"query": "Who gives final sign-off?"})["result"]["hits"]
        near = next(h for h in hits if h["entity_type"] == "claim" and "Finalized" in h["excerpt"])
        assert near["ranking"]["trigram_matched_terms"] and not near["ranking"]["qualified"]


class TestTurningItOff:
    """semantic.enabled=false, or a store without the model, gives the lexical answer."""

    def test_off_per_request_equals_the_lexical_answer(self, call: Caller, monkeypatch: pytest.MonkeyPatch) -> None:
        """The hits with the channel turned off are exactly those of the same store without a model."""
        seed(call)
        request = {"query": QUESTION, "recency": {"enabled": False}}
        off = call.ok("search", {**request, "semantic": {"enabled": False}})["result"]
        on = call.ok("search", request)["result"]
        assert off["hits"] != on["hits"] and "disabled" == off["semantic"]["state"]
        with model_absent(monkeypatch):
            lexical = call.ok("search", request)["result"]
        assert without_clock(lexical["hits"]) == without_clock(off["hits"])
        assert lexical["retrieval_mode"] == off["retrieval_mode"] != on["retrieval_mode"]

    def test_a_store_without_the_model_answers_lexically_and_says_so(self, call: Caller, model_missing: None) -> None:
        """No error: recall answers from words, and capabilities/doctor report the channel off."""
        seed(call)
        result = recall(call, "credentials argon2")
        assert "claims" == result["presence"] and "disabled" == result["semantic_claims"]["state"]
        for op in ("capabilities", "doctor"):
            semantic = call.ok(op, {})["result"]["semantic"]
            assert (False, embedding.MODEL_ID) == (semantic["enabled"], semantic["model_id"])
            assert "lexical" in semantic["reason"]

    def test_the_status_counts_what_is_indexed(self, call: Caller) -> None:
        """A search's semantic status counts every revision written as eligible and indexed."""
        seed(call)
        status = call.ok("search", {"query": QUESTION})["result"]["semantic"]
        assert (4, 4, 1.0) == (status["eligible_revision_count"], status["indexed_revision_count"],
                               status["coverage"])

    def test_capabilities_name_the_model(self, call: Caller) -> None:
        """With the model installed, capabilities name it, its revision and dimensions, and say it is on."""
        semantic = call.ok("capabilities", {})["result"]["semantic"]
        assert (embedding.MODEL_ID, embedding.DIMENSIONS, True) == (
            semantic["model_id"], semantic["dimensions"], semantic["enabled"])
        assert semantic["model_revision"]


def int8_rows(np: Any, vectors: Any) -> list[bytes]:
    return embedding.quantize(np, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))


def loaded_rows(np: Any, blobs: list[bytes], axis: Any, chunks: int = 1) -> Any:
    """A table's in-memory rows (claim layout), appended in ``chunks`` pieces as a reader does."""
    from memoree.queries import dense

    rows = dense._Rows()
    table = [(i, i, blob) for i, blob in enumerate(blobs)]
    step = -(-len(table) // chunks)
    for start in range(0, len(table), step):
        rows.append(np, table[start:start + step], False, axis)
    return rows


def clustered_set(np: Any, axis: Any, count: int) -> Any:
    """Unit-ish rows in 60 topic clusters that all lean along ``axis`` (as real texts lean along
    the model's mean token direction), as float32 ``(count, 256)``."""
    rng = np.random.default_rng(11)
    centres = rng.normal(size=(60, 256)).astype(np.float32) / 16
    members = rng.integers(60, size=count)
    noise = rng.normal(size=(count, 256)).astype(np.float32) / 16
    return (1.6 * axis)[None, :] + 0.5 * centres[members] + noise


class TestPrefilterCentring:
    """The sign-bit prefilter's bits are taken off a direction fixed by the model's weights."""

    def test_the_common_axis_is_a_fixed_function_of_the_model(self) -> None:
        """Two loads of the same weights give the same axis, byte for byte, and it is the unit
        direction of the mean token row."""
        model = embedding.load_model()
        np = model.np
        again = embedding.common_axis(np, model.table.copy())
        assert model.common_axis.tobytes() == again.tobytes()
        mean = model.table.astype(np.float64).mean(axis=0)
        assert abs(float(np.linalg.norm(model.common_axis)) - 1.0) < 1e-5
        assert float(model.common_axis @ (mean / np.linalg.norm(mean))) > 0.9999

    def test_a_vectors_bits_do_not_depend_on_what_else_is_stored(self) -> None:
        """One stored vector gets the same sign bits alone, among other rows, and among
        different rows loaded in another number of pieces."""
        from memoree.queries import dense

        model = embedding.load_model()
        np = model.np
        rng = np.random.default_rng(5)
        probe = int8_rows(np, clustered_set(np, model.common_axis, 1))[0]
        first = int8_rows(np, rng.normal(size=(3000, 256)).astype(np.float32))
        second = int8_rows(np, clustered_set(np, model.common_axis, 5000))
        alone = dense.sign_bits(np, np.frombuffer(probe, dtype=np.int8)[None, :], model.common_axis)[:, 0]
        among_first = loaded_rows(np, [*first[:1700], probe, *first[1700:]], model.common_axis)
        among_second = loaded_rows(np, [*second[:4321], probe, *second[4321:]], model.common_axis, chunks=7)
        assert alone.tobytes() == among_first.bits[:, 1700].tobytes() == among_second.bits[:, 4321].tobytes()

    def test_centred_bits_keep_more_of_the_true_nearest_rows_than_raw_signs(self) -> None:
        """On a clustered set leaning along the model's axis, the prefilter keeping 2% of the rows
        holds more of each query's exact 10 nearest rows with centred bits than with raw signs."""
        from memoree.queries import dense

        model = embedding.load_model()
        np = model.np
        blobs = int8_rows(np, clustered_set(np, model.common_axis, 6000))
        stored = np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(blobs), -1)
        rng = np.random.default_rng(3)
        queries = stored[rng.choice(len(blobs), 60, replace=False)].astype(np.float32) / 127
        queries += rng.normal(size=queries.shape).astype(np.float32) / 20
        recall = {}
        for name, axis in (("centred", model.common_axis), ("raw", None)):
            rows = loaded_rows(np, blobs, axis)
            kept = 0
            for query in queries:
                truth = np.argsort(-(stored.astype(np.float32) @ query), kind="stable")[:10]
                kept += len(set(truth) & set(dense.prefiltered(np, rows, query, axis, 120).tolist()))
            recall[name] = kept / (10 * len(queries))
        assert recall["centred"] > recall["raw"], recall
