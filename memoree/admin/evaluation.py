"""The retrieval evaluator (protocol §10): seed a fresh store, run every gold case, score, gate.

This module owns ``memoree eval CORPUS_DIR``: it loads ``seed.jsonl`` through the ordinary
protocol mutations (``Service.handle_bytes`` with JSON requests, explicit contexts, keys
``eval:<line>:<label>``) into a fresh temporary store, runs each case of ``cases.jsonl`` through
memory.recall, search, a diagnostic broad search, context.build, memory.probe and
memory.retrieve (plus the frozen recovery checks of ``probe-recovery.json``), records per-case
failures (fatal when the case's gate is ``hard``), computes macro metrics, and compares them with
``baseline.json``. The store's clock is synthetic (one second per call from a fixed instant), so
two runs give the same report apart from ``timings``. Model gates (semantic probe recall, packet
budgets) apply only with a semantic model, which this build does not have; their figures are
reported, never gated. A stage a build lacks would be listed under ``skipped_stages``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoree.eventlog.events import Scope
from memoree.eventlog.scope import visible_at
from memoree.admin.corpus import CorpusError, load_corpus
from memoree.admin.eval_client import Client, SyntheticClock
from memoree.admin.scoring import (
    DEFAULT_EPSILON,
    aggregate,
    compare_baseline,
    mrr_metric,
    ndcg_metric,
    p95,
    padded_size,
    precision_metric,
    recall_metric,
)
from memoree.service.service import Service

__all__ = ["CorpusError", "EvalOptions", "SuiteTimeout", "evaluate", "main_report"]  # CorpusError: from .corpus

REPORT_SCHEMA_VERSION = 1
EVAL_ACTOR = "memoree-eval"
BAIT_PREFIX = "embedding_bait_"
RECALL_CANDIDATES = 3
SEARCH_LIMIT = 100
POOL_LIMIT = 32
PROBE_DEPTHS = (8, 5)
SKIPPED_STAGES: dict[str, str] = {}


class SuiteTimeout(Exception):
    """The whole suite ran past its hard deadline."""


@dataclass(frozen=True)
class EvalOptions:
    case_ids: tuple[str, ...] = ()
    suite_timeout_ms: int = 600_000
    case_timeout_ms: int = 60_000


# ---------------------------------------------------------------------------------------------
# Seeding


@dataclass
class Seeded:
    """Label ↔ id maps and each seeded entity's owner and text."""

    ids: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    owners: dict[str, Scope] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    revisions: dict[str, str] = field(default_factory=dict)

    def record(self, label: str, entity: str, entity_id: str, owner: Scope) -> None:
        if label in self.ids:
            raise CorpusError(f"duplicate seed label {label}")
        self.ids[label], self.labels[entity_id] = entity_id, label
        self.kinds[label], self.owners[label] = entity, owner


def _scope(context: dict[str, Any]) -> Scope:
    return Scope(context["workspace_id"], context["project_id"], context.get("task_id"),
                 context.get("component"))


def _artifact_text(seed: dict[str, Any]) -> str:
    text = seed["content"]["data"]
    repeat = seed.get("content_repeat")
    if repeat:
        text += repeat["unit"] * repeat["count"] + repeat.get("suffix", "")
    return text


def _quote_span(text: str, quote: str, label: str) -> tuple[int, int]:
    data, needle = text.encode("utf-8"), quote.encode("utf-8")
    start = data.find(needle)
    if start < 0 or data.find(needle, start + 1) >= 0:
        raise CorpusError(f"seed {label}: the quote must occur exactly once in the cited artifact")
    return start, start + len(needle)


def seed_store(client: Client, seeds: Sequence[dict[str, Any]]) -> Seeded:
    """Send the seeds in order; each run of consecutive artifacts goes in one ``batch`` request
    (a claim or relation cites what came before it, so it waits for the run before it)."""
    seeded = Seeded()
    artifacts: list[tuple[int, dict[str, Any]]] = []
    for index, seed in enumerate(seeds):
        if seed["entity"] == "artifact":
            artifacts.append((index, seed))
            continue
        _seed_artifacts(client, seeded, artifacts)
        artifacts = []
        _seed_other(client, seeded, index, seed)
    _seed_artifacts(client, seeded, artifacts)
    return seeded


def _seed_artifacts(client: Client, seeded: Seeded, run: list[tuple[int, dict[str, Any]]]) -> None:
    texts = [_artifact_text(seed) if seed["content"]["type"] == "text" else None for _, seed in run]
    results = client.ok_many([("artifact.put", {
        "kind": seed["kind"], "title": seed["title"],
        "media_type": seed.get("media_type", "text/plain; charset=utf-8"),
        "content": {"type": "text", "data": text} if text is not None else seed["content"],
        "provenance": {"eval_label": seed["label"]}, "actor": EVAL_ACTOR,
    }, seed["context"], f"eval:{index}:{seed['label']}") for (index, seed), text in zip(run, texts)])
    for (_, seed), text, result in zip(run, texts, results):
        label = seed["label"]
        seeded.record(label, "artifact", result["artifact_id"], _scope(seed["context"]))
        seeded.revisions[label] = result["revision_id"]
        seeded.texts[label] = text or ""


def _seed_other(client: Client, seeded: Seeded, index: int, seed: dict[str, Any]) -> None:
    label, context, entity = seed["label"], seed["context"], seed["entity"]
    key = f"eval:{index}:{label}"
    if entity == "claim":
        payload = {"claim_type": seed["claim_type"], "statement": seed["statement"],
                   "evidence": [_evidence(seeded, e, label) for e in seed.get("evidence", [])],
                   "actor": EVAL_ACTOR}
        for bound in ("valid_from", "valid_until"):
            if seed.get(bound):
                payload[bound] = seed[bound]
        result = client.ok("claim.assert", payload, context=context, key=key)
        seeded.record(label, "claim", result["claim_id"], _scope(context))
    elif entity == "relation":
        source, target = seed["source_label"], seed["target_label"]
        client.ok("relation.put", {
            "source_type": seeded.kinds[source], "source_id": seeded.ids[source],
            "relation": seed["relation"], "target_type": seeded.kinds[target],
            "target_id": seeded.ids[target], "metadata": {"eval_label": label},
        }, context=context, key=key)
    else:
        raise CorpusError(f"seed {label}: unknown entity {entity!r}")


def _evidence(seeded: Seeded, evidence: dict[str, Any], label: str) -> dict[str, Any]:
    source = evidence["artifact_label"]
    if seeded.kinds.get(source) != "artifact":
        raise CorpusError(f"seed {label}: evidence label {source} is not a seeded artifact")
    locator = {"artifact_id": seeded.ids[source], "revision_id": seeded.revisions[source]}
    if evidence.get("quote"):
        start, end = _quote_span(seeded.texts[source], evidence["quote"], label)
        locator.update(start_byte=start, end_byte=end)
    return locator


# ---------------------------------------------------------------------------------------------
# One case


@dataclass
class CaseRun:
    case: dict[str, Any]
    failures: list[str] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    presence: str = "none"
    returned_claims: list[str] = field(default_factory=list)
    returned_artifacts: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)

    def fail(self, counter: str | None, message: str) -> None:
        self.failures.append(message)
        if counter:
            self.counters[counter] = self.counters.get(counter, 0) + 1

    def report(self) -> dict[str, Any]:
        case = self.case
        return {
            "case_id": case["case_id"], "slice": case.get("slice", "correctness"),
            "gate": case.get("gate", "hard"), "horizon": case.get("horizon", "ambient"),
            "expected_presence": case["expected_presence"], "presence": self.presence,
            "returned_claims": self.returned_claims, "returned_artifacts": self.returned_artifacts,
            "metrics": self.metrics, "failures": self.failures, "passed": not self.failures,
        }


class CaseEvaluator:
    """Runs one case's reads and checks them against its gold labels."""

    def __init__(self, client: Client, seeded: Seeded, recovery: dict[str, dict[str, Any]]) -> None:
        self.client = client
        self.seeded = seeded
        self.recovery = recovery

    def label(self, entity_id: str) -> str:
        return self.seeded.labels.get(entity_id, entity_id)

    def run(self, case: dict[str, Any]) -> CaseRun:
        run = CaseRun(case)
        horizon = case.get("horizon", "ambient")
        base = {"query": case["query"], "horizon": horizon}
        if case.get("reason"):
            base["reason"] = case["reason"]
        context = case["context"]
        recall = self.client.send("memory.recall", {
            **base, "max_claims": case.get("max_claims", 5),
            "max_artifact_refs": case.get("max_artifact_refs", 3),
            "max_excerpt_bytes": case.get("max_excerpt_bytes", 320),
            "max_candidate_claims": RECALL_CANDIDATES, "max_candidate_artifact_refs": RECALL_CANDIDATES,
        }, context=context)
        search = self.client.send("search", {**base, "limit": SEARCH_LIMIT}, context=context)
        pool = self.client.send("search", {**base, "limit": POOL_LIMIT, "recency": {"enabled": False}},
                                context=context)
        bundle = self.client.send("context.build", {
            **base, "limit": case.get("max_claims", 5) + case.get("max_artifact_refs", 3),
            "max_bytes": case.get("max_context_bytes", 4096),
        }, context=context)
        for op, envelope in (("memory.recall", recall), ("search", search), ("search", pool),
                             ("context.build", bundle)):
            if not envelope["ok"]:
                run.fail(None, f"{op} failed: {envelope['error']['code']}: {envelope['error']['message']}")
        if run.failures:
            return run
        self.check_recall(run, recall["result"], horizon)
        self.check_citation_parity(run, recall["result"], search["result"])
        self.check_references(run, recall["result"])
        self.check_context(run, bundle["result"], case, horizon)
        self.score(run, recall["result"], pool["result"])
        self.probe_and_recover(run, base, context)
        self.retrieve(run, base, context)
        return run

    # -- checks ----------------------------------------------------------------------------

    def check_recall(self, run: CaseRun, recall: dict[str, Any], horizon: str) -> None:
        case = run.case
        run.presence = recall["presence"]
        run.returned_claims = [self.label(c["claim_id"]) for c in recall["claims"]]
        run.returned_artifacts = [self.label(a["artifact_id"]) for a in recall["artifact_refs"]]
        if recall["presence"] != case["expected_presence"]:
            run.fail(None, f"presence {recall['presence']} != expected {case['expected_presence']}")
        if recall["searched_horizons"] != [horizon]:
            run.fail(None, f"searched_horizons {recall['searched_horizons']} != [{horizon}]")
        for label in case.get("relevant_claims", []):
            if label not in run.returned_claims:
                run.fail(None, f"relevant claim {label} missing from recall")
        for label in case.get("relevant_artifacts", []):
            if label not in run.returned_artifacts:
                run.fail(None, f"relevant artifact {label} missing from recall")
        forbidden = set(case.get("forbidden", []))
        for label in run.returned_claims + run.returned_artifacts:
            if label in forbidden or label.startswith(BAIT_PREFIX):
                run.fail("forbidden_returns", f"forbidden label {label} returned")
        got = {frozenset((self.label(c["left_id"]), self.label(c["right_id"]))) for c in recall["conflicts"]}
        for pair in case.get("expected_conflicts", []):
            if frozenset(pair) not in got:
                run.fail(None, f"expected conflict {pair} missing")
        refs = {self.label(a["artifact_id"]): a for a in recall["artifact_refs"]}
        if case.get("require_artifact_spans"):
            for label in case.get("relevant_artifacts", []):
                if label in refs and "#" not in refs[label]["citation"]:
                    run.fail(None, f"relevant artifact {label} cited without a byte span")
        for label in run.returned_claims + run.returned_artifacts:
            if not self.visible(label, case["context"], horizon):
                run.fail("scope_violations", f"{label} is outside the {horizon} horizon")

    def visible(self, label: str, context: dict[str, Any], horizon: str) -> bool:
        owner = self.seeded.owners.get(label)
        if owner is None:
            return True
        pinned = {p.removeprefix("memoree://artifact/").split("@", 1)[0] for p in context.get("pins", [])}
        return visible_at(owner, _scope(context), horizon) or self.seeded.ids.get(label) in pinned

    def check_citation_parity(self, run: CaseRun, recall: dict[str, Any], search: dict[str, Any]) -> None:
        cited = {hit["citation"] for hit in search["hits"]}
        for item in recall["claims"] + recall["artifact_refs"]:
            if item["citation"] not in cited:
                run.fail("citation_parity_violations", f"recall citation {item['citation']} is not a search citation")

    def fetch(self, citation: str) -> str | None:
        envelope = self.client.send("citation.get", {"citation": citation})
        return envelope["result"]["content"] if envelope["ok"] else None

    def check_span(self, run: CaseRun, citation: str, expected: str) -> None:
        content = self.fetch(citation)
        if content != expected:
            run.fail("citation_get_exactness_violations", f"{citation} does not fetch its excerpt")

    def check_references(self, run: CaseRun, recall: dict[str, Any]) -> None:
        for claim in recall["claims"]:
            for ref in claim["evidence"]:
                if ref.get("start_byte") is None or ref.get("excerpt") is None or ref["excerpt_truncated"]:
                    continue
                self.check_span(run, ref["citation"], ref["excerpt"])
        for ref in recall["artifact_refs"] + recall["candidate_artifact_refs"]:
            anchored = ref.get("excerpt_citation") or (ref["citation"] if "#" in ref["citation"] and not ref["excerpt_truncated"] else None)
            if anchored is not None:
                self.check_span(run, anchored, ref["excerpt"])

    def check_context(self, run: CaseRun, bundle: dict[str, Any], case: dict[str, Any], horizon: str) -> None:
        max_bytes = case.get("max_context_bytes", 4096)
        rendered = bundle["rendered_markdown"]
        if (bundle["max_bytes"] != max_bytes or bundle["used_bytes"] > max_bytes
                or len(rendered.encode("utf-8")) != bundle["used_bytes"]):
            run.fail("budget_violations", "context.build exceeded or misreported its byte budget")
        for item in bundle["manifest"]:
            label = self.label(item["entity_id"])
            if not self.visible(label, case["context"], horizon):
                run.fail("scope_violations", f"{label} in the context bundle is outside the horizon")
            if item["entity_type"] == "claim":
                for locator in item["provenance"].get("evidence") or []:
                    citation = _locator_citation(locator)
                    if citation not in rendered:
                        run.fail(None, f"context bundle does not render evidence {citation}")

    # -- metrics ---------------------------------------------------------------------------

    def score(self, run: CaseRun, recall: dict[str, Any], pool: dict[str, Any]) -> None:
        case = run.case
        claims, artifacts = run.returned_claims, run.returned_artifacts
        direct_claims, direct_artifacts = case.get("relevant_claims", []), case.get("relevant_artifacts", [])
        helpful_claims, helpful_artifacts = case.get("helpful_claims", []), case.get("helpful_artifacts", [])
        direct = direct_claims + direct_artifacts
        pool_labels = [self.label(h["entity_id"]) for h in pool["hits"]]
        suggested = [self.label(c["claim_id"]) for c in recall["candidate_claims"]]
        suggested += [self.label(a["artifact_id"]) for a in recall["candidate_artifact_refs"]]
        run.metrics.update({
            "claim_recall": recall_metric(direct_claims, claims),
            "claim_precision": precision_metric(direct_claims, helpful_claims, claims),
            "artifact_recall": recall_metric(direct_artifacts, artifacts),
            "artifact_precision": precision_metric(direct_artifacts, helpful_artifacts, artifacts),
            "claim_mrr": mrr_metric(direct_claims, claims),
            "artifact_mrr": mrr_metric(direct_artifacts, artifacts),
            "claim_ndcg": ndcg_metric(direct_claims, helpful_claims, claims),
            "artifact_ndcg": ndcg_metric(direct_artifacts, helpful_artifacts, artifacts),
            "candidate_pool_recall_at_16": recall_metric(direct, pool_labels[:16]),
            "candidate_pool_recall_at_32": recall_metric(direct, pool_labels[:32]),
            "candidate_suggestion_recall": recall_metric(direct, claims + artifacts + suggested),
            "answerable": bool(direct),
            "recall_packet_bytes": padded_size(_normalized(recall)),
        })

    def probe_and_recover(self, run: CaseRun, base: dict[str, Any], context: dict[str, Any]) -> None:
        case = run.case
        frozen = self.recovery.get(case["case_id"])
        query = frozen["probe_query"] if frozen else case["query"]
        targets = (frozen or {}).get("selected_sources") or case.get("relevant_artifacts", [])
        leads_by_depth: dict[int, list[dict[str, Any]]] = {}
        for depth in PROBE_DEPTHS:
            payload = {**base, "query": query, "max_leads": depth}
            if frozen:
                payload["original_query"] = case["query"]
            envelope = self.client.send("memory.probe", payload, context=context)
            if not envelope["ok"]:
                run.fail(None, f"memory.probe failed: {envelope['error']['code']}")
                return
            leads_by_depth[depth] = envelope["result"]["leads"]
            run.metrics[f"probe_bytes_at_{depth}"] = padded_size(_normalized(envelope["result"]))
            cited = [self.label(_artifact_of(s["citation"])) for lead in envelope["result"]["leads"]
                     for s in lead["sources"]]
            if frozen:
                run.metrics[f"probe_source_recall_at_{depth}"] = recall_metric(targets, cited)
        deepest = leads_by_depth[max(PROBE_DEPTHS)]
        bait = [lead for lead in deepest
                if any(self.label(_artifact_of(s["citation"])).startswith(BAIT_PREFIX) for s in lead["sources"])]
        run.metrics["probe_leads"] = len(deepest)
        run.metrics["probe_bait_leads"] = len(bait)
        if frozen:
            self.recover(run, frozen, deepest, base, context)

    def retrieve(self, run: CaseRun, base: dict[str, Any], context: dict[str, Any]) -> None:
        """The one-call packet: its size, latency, and whether recovery reached a selected source."""
        frozen = self.recovery.get(run.case["case_id"])
        payload = {**base, "max_claims": run.case.get("max_claims", 5),
                   "max_artifact_refs": run.case.get("max_artifact_refs", 3),
                   "max_excerpt_bytes": run.case.get("max_excerpt_bytes", 320)}
        if frozen and frozen["probe_query"] != run.case["query"]:
            payload["reformulation"] = frozen["probe_query"]
        started = time.perf_counter()
        envelope = self.client.send("memory.retrieve", payload, context=context)
        run.latencies.append((time.perf_counter() - started) * 1000)
        if not envelope["ok"]:
            run.fail(None, f"memory.retrieve failed: {envelope['error']['code']}")
            return
        result = envelope["result"]
        run.metrics["retrieve_packet_bytes"] = padded_size(_normalized(result))
        if result["presence"] != run.presence:
            run.fail(None, f"memory.retrieve presence {result['presence']} != recall presence {run.presence}")
        if frozen:
            evidence = (result.get("recovery") or {}).get("evidence", [])
            cited = {self.label(_artifact_of(e["citation"])) for e in evidence}
            run.metrics["one_call_recovery_success"] = bool(cited & set(frozen["selected_sources"]))
            run.metrics["one_call_bait_fetches"] = sum(1 for label in cited if label.startswith(BAIT_PREFIX))

    def recover(self, run: CaseRun, frozen: dict[str, Any], leads: list[dict[str, Any]],
                base: dict[str, Any], context: dict[str, Any]) -> None:
        fetched = 0
        for lead in leads:
            for source in lead["sources"]:
                if "#" in source["citation"] and self.label(_artifact_of(source["citation"])) in frozen["selected_sources"]:
                    fetched += len((self.fetch(source["citation"]) or "").encode("utf-8"))
        run.metrics["recovery_fetched_bytes"] = fetched
        refined = frozen.get("refined_query")
        if not refined:
            return
        envelope = self.client.send("memory.recall", {**base, "query": refined}, context=context)
        if not envelope["ok"]:
            run.metrics["recovery_success"] = False
            return
        labels = {self.label(c["claim_id"]) for c in envelope["result"]["claims"]}
        labels |= {self.label(a["artifact_id"]) for a in envelope["result"]["artifact_refs"]}
        direct = set(run.case.get("relevant_claims", []) + run.case.get("relevant_artifacts", []))
        supported = frozen.get("verdict") == "supported"
        run.metrics["recovery_success"] = (bool(direct & labels) if supported
                                           else envelope["result"]["presence"] == "none")


def _locator_citation(locator: dict[str, Any]) -> str:
    base = f"memoree://artifact/{locator['artifact_id']}@{locator['revision_id']}"
    if locator.get("start_byte") is not None and locator.get("end_byte") is not None:
        return f"{base}#{locator['start_byte']}-{locator['end_byte']}"
    return base


def _artifact_of(citation: str) -> str:
    reference = citation.split("://", 1)[-1].split("/", 1)[-1]
    return reference.split("@", 1)[0]


_CLOCK_KEYS = frozenset({"evaluated_at", "effective_at", "score", "fusion_score", "recency_bonus",
                         "revision_created_at", "created_at"})


def _normalized(document: Any) -> Any:
    """The document with clock-derived values blanked, so sizes do not depend on the clock."""
    if isinstance(document, dict):
        return {k: (0 if k in _CLOCK_KEYS else _normalized(v)) for k, v in document.items()}
    if isinstance(document, list):
        return [_normalized(v) for v in document]
    return document


# ---------------------------------------------------------------------------------------------
# The suite


@contextmanager
def temporary_service() -> Iterator[Service]:
    """A service over a fresh, private, temporary store, removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="memoree-eval-"))
    service = Service(folder / "data", clock=SyntheticClock())
    try:
        yield service
    finally:
        service.close()
        shutil.rmtree(folder, ignore_errors=True)


def evaluate(corpus_dir: Path, options: EvalOptions = EvalOptions(),
             monotonic: Callable[[], float] = time.monotonic,
             progress: Callable[[str, int, int], None] = lambda label, done, total: None) -> dict[str, Any]:
    """Run the suite and return the report (``passed`` says whether the run passes);
    ``progress(label, done, total)`` hears of each step (seeding, then each case)."""
    corpus = load_corpus(corpus_dir)
    cases = [c for c in corpus.cases if not options.case_ids or c["case_id"] in options.case_ids]
    started = monotonic()
    runs: list[CaseRun] = []
    slow_cases: list[str] = []
    with temporary_service() as service:
        client = Client(service)
        progress(f"seeding {len(corpus.seeds)} records", 0, len(cases))
        seeded = seed_store(client, corpus.seeds)
        seeded_at = monotonic()
        evaluator = CaseEvaluator(client, seeded, corpus.recovery)
        for done, case in enumerate(cases):
            progress("cases", done, len(cases))
            case_started = monotonic()
            runs.append(evaluator.run(case))
            if (monotonic() - case_started) * 1000 > options.case_timeout_ms:
                slow_cases.append(case["case_id"])
            if (monotonic() - started) * 1000 > options.suite_timeout_ms:
                raise SuiteTimeout(f"the suite passed its {options.suite_timeout_ms} ms deadline")
    metrics = aggregate(runs)
    complete = len(runs) == len(corpus.cases)
    baseline = compare_baseline(corpus.baseline, metrics) if complete else {
        "epsilon": corpus.baseline.get("epsilon", DEFAULT_EPSILON), "checked_metrics": [],
        "regressions": [], "passed": None}
    hard_failures = [f"{r.case['case_id']}: {failure}" for r in runs
                     if r.case.get("gate", "hard") == "hard" for failure in r.failures]
    passed = not hard_failures and (baseline["passed"] is not False)
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "corpus_version": corpus.baseline.get("corpus_version"),
        "isolated_temporary_store": True,
        "cases": [r.report() for r in runs],
        "aggregate": metrics,
        "baseline": baseline,
        "hard_failures": hard_failures,
        "report_failures": [f"{r.case['case_id']}: {failure}" for r in runs
                            if r.case.get("gate", "hard") != "hard" for failure in r.failures],
        "requested_case_count": len(cases),
        "completed_case_count": len(runs),
        "complete": complete,
        "timed_out": False,
        "slow_cases": slow_cases,
        "skipped_stages": SKIPPED_STAGES,
        "options": {"case_ids": list(options.case_ids), "suite_timeout_ms": options.suite_timeout_ms,
                    "case_timeout_ms": options.case_timeout_ms},
        "timings": {"seed_ms": round((seeded_at - started) * 1000),
                    "retrieve_latency_p95_ms": p95([ms for r in runs for ms in r.latencies]),
                    "total_ms": round((monotonic() - started) * 1000)},
        "passed": passed,
    }


def main_report(corpus_dir: Path, options: EvalOptions = EvalOptions(),
                progress: Callable[[str, int, int], None] = lambda label, done, total: None,
                ) -> tuple[dict[str, Any] | None, int]:
    """(report, exit code): 0 when passed, 1 when not, 124 on the suite deadline (no report)."""
    try:
        report = evaluate(corpus_dir, options, progress=progress)
    except SuiteTimeout:
        return None, 124
    return report, 0 if report["passed"] else 1
