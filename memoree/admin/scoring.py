"""How an evaluation run is scored: per-case retrieval metrics, the aggregate, the baseline gate.

Pure functions over labels and case runs (``memoree.admin.evaluation`` produces the runs): recall,
precision, MRR and nDCG over returned labels, macro means (an undefined metric is left out; none
defined scores 1.0), packet sizes in 64-byte blocks, the suite's aggregate with its slices, and
the comparison with ``baseline.json`` (floors for macro metrics, ceilings for false-answer and
false-abstain rates, all within ``epsilon``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memoree.admin.evaluation import CaseRun

__all__ = [
    "DEFAULT_EPSILON", "aggregate", "compare_baseline", "macro", "mrr_metric", "ndcg_metric", "p95",
    "padded_size", "precision_metric", "rate", "recall_metric",
]

BLOCK_BYTES = 64
DEFAULT_EPSILON = 0.02
MACRO_FLOORS = ("macro_claim_recall", "macro_claim_precision", "macro_artifact_recall",
                "macro_artifact_precision")
RATE_CEILINGS = {"max_false_answer_rate": "false_answer_rate",
                 "max_false_abstain_rate": "false_abstain_rate"}


def recall_metric(direct: Sequence[str], returned: Sequence[str]) -> float | None:
    if not direct:
        return None
    return len(set(direct) & set(returned)) / len(set(direct))


def precision_metric(direct: Sequence[str], helpful: Sequence[str], returned: Sequence[str]) -> float:
    if not returned:
        return 1.0 if not direct else 0.0
    relevant = set(direct) | set(helpful)
    return sum(1 for label in returned if label in relevant) / len(returned)


def mrr_metric(direct: Sequence[str], returned: Sequence[str]) -> float | None:
    if len(set(direct)) != 1:
        return None
    target = direct[0]
    return next((1.0 / rank for rank, label in enumerate(returned, 1) if label == target), 0.0)


def ndcg_metric(direct: Sequence[str], helpful: Sequence[str], returned: Sequence[str]) -> float | None:
    gains = {**{label: 1 for label in helpful}, **{label: 2 for label in direct}}
    if not gains:
        return None
    dcg = sum(gains.get(label, 0) / math.log2(i + 2) for i, label in enumerate(returned))
    ideal = sorted(gains.values(), reverse=True)[: max(1, len(returned))]
    idcg = sum(gain / math.log2(i + 2) for i, gain in enumerate(ideal))
    return dcg / idcg


def macro(values: Sequence[float | None]) -> float:
    defined = [v for v in values if v is not None]
    return sum(defined) / len(defined) if defined else 1.0


def padded_size(document: Any) -> int:
    """Serialized bytes rounded up to 64-byte blocks."""
    size = len(json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    return -(-size // BLOCK_BYTES) * BLOCK_BYTES


def p95(values: Sequence[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def rate(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else 0.0


def aggregate(runs: Sequence[CaseRun]) -> dict[str, Any]:
    def mean(key: str, subset: Sequence[CaseRun] = runs) -> float:
        return macro([r.metrics.get(key) for r in subset])

    answerable = [r for r in runs if r.metrics.get("answerable")]
    unanswerable = [r for r in runs if "answerable" in r.metrics and not r.metrics["answerable"]]
    counters: dict[str, int] = {}
    for r in runs:
        for name, count in r.counters.items():
            counters[name] = counters.get(name, 0) + count
    recovered = [r.metrics["recovery_success"] for r in runs if "recovery_success" in r.metrics]
    one_call = [r.metrics["one_call_recovery_success"] for r in runs if "one_call_recovery_success" in r.metrics]
    leads = sum(r.metrics.get("probe_leads", 0) for r in runs)
    document: dict[str, Any] = {
        "case_count": len(runs),
        "passed_case_count": sum(1 for r in runs if not r.failures),
        "macro_claim_recall": mean("claim_recall"),
        "macro_claim_precision": mean("claim_precision"),
        "macro_artifact_recall": mean("artifact_recall"),
        "macro_artifact_precision": mean("artifact_precision"),
        "macro_claim_mrr": mean("claim_mrr"),
        "macro_artifact_mrr": mean("artifact_mrr"),
        "macro_claim_ndcg": mean("claim_ndcg"),
        "macro_artifact_ndcg": mean("artifact_ndcg"),
        "candidate_pool_recall_at_16": mean("candidate_pool_recall_at_16"),
        "candidate_pool_recall_at_32": mean("candidate_pool_recall_at_32"),
        "candidate_suggestion_recall": mean("candidate_suggestion_recall"),
        "probe_source_recall_at_5": mean("probe_source_recall_at_5"),
        "probe_source_recall_at_8": mean("probe_source_recall_at_8"),
        "probe_bait_lead_rate": rate(sum(r.metrics.get("probe_bait_leads", 0) for r in runs), leads),
        "recovery_success_rate": rate(sum(recovered), len(recovered)) if recovered else None,
        "one_call_recovery_success_rate": rate(sum(one_call), len(one_call)) if one_call else None,
        "one_call_bait_fetches": sum(r.metrics.get("one_call_bait_fetches", 0) for r in runs),
        "retrieve_packet_bytes_p95": p95([r.metrics["retrieve_packet_bytes"] for r in runs
                                           if "retrieve_packet_bytes" in r.metrics]),
        "false_answer_rate": rate(sum(1 for r in unanswerable if r.presence != "none"), len(unanswerable)),
        "false_abstain_rate": rate(sum(1 for r in answerable if r.presence == "none"), len(answerable)),
    }
    for name in ("forbidden_returns", "budget_violations", "citation_parity_violations",
                 "scope_violations", "citation_get_exactness_violations"):
        document[name] = counters.get(name, 0)
    slices: dict[str, list[CaseRun]] = {}
    for r in runs:
        slices.setdefault(r.case.get("slice", "correctness"), []).append(r)
    document["slices"] = {name: _slice_summary(members) for name, members in sorted(slices.items())}
    return document


def _slice_summary(members: Sequence[CaseRun]) -> dict[str, Any]:
    unanswerable = [r for r in members if not r.metrics.get("answerable", True)]
    return {
        "cases": len(members),
        "failed": sum(1 for r in members if r.failures),
        "macro_claim_recall": macro([r.metrics.get("claim_recall") for r in members]),
        "macro_claim_precision": macro([r.metrics.get("claim_precision") for r in members]),
        "macro_artifact_recall": macro([r.metrics.get("artifact_recall") for r in members]),
        "macro_artifact_precision": macro([r.metrics.get("artifact_precision") for r in members]),
        "macro_artifact_ndcg": macro([r.metrics.get("artifact_ndcg") for r in members]),
        "false_answer_rate": rate(sum(1 for r in unanswerable if r.presence != "none"), len(unanswerable)),
    }


def compare_baseline(baseline: dict[str, Any], metrics: dict[str, Any]) -> dict[str, Any]:
    epsilon = baseline.get("epsilon", DEFAULT_EPSILON)
    checked, regressions = [], []
    for name in MACRO_FLOORS:
        if name in baseline:
            checked.append(name)
            if metrics[name] + epsilon < baseline[name]:
                regressions.append(f"{name} {metrics[name]:.4f} is below the floor {baseline[name]}")
    for name, metric in RATE_CEILINGS.items():
        if name in baseline:
            checked.append(metric)
            if metrics[metric] > baseline[name] + epsilon:
                regressions.append(f"{metric} {metrics[metric]:.4f} is above the ceiling {baseline[name]}")
    if "max_forbidden_returns" in baseline:
        checked.append("forbidden_returns")
        if metrics["forbidden_returns"] > baseline["max_forbidden_returns"]:
            regressions.append(f"forbidden_returns {metrics['forbidden_returns']} is above "
                               f"{baseline['max_forbidden_returns']}")
    return {"epsilon": epsilon, "checked_metrics": checked, "regressions": regressions,
            "passed": not regressions}
