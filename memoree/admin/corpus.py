"""An evaluation corpus on disk: ``baseline.json``, ``seed.jsonl``, ``cases.jsonl`` and the optional
``probe-recovery.json``, loaded and checked for version and shape before anything is seeded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Corpus", "CorpusError", "load_corpus"]


class CorpusError(Exception):
    """The corpus itself is inconsistent (labels, quotes, versions)."""


def _jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError as exc:
                raise CorpusError(f"{path.name} line {number} is not JSON: {exc}") from None
    return rows


@dataclass
class Corpus:
    directory: Path
    baseline: dict[str, Any]
    seeds: list[dict[str, Any]]
    cases: list[dict[str, Any]]
    recovery: dict[str, dict[str, Any]]


def load_corpus(directory: Path) -> Corpus:
    baseline = json.loads((directory / "baseline.json").read_text("utf-8"))
    seeds = _jsonl(directory / "seed.jsonl")
    cases = _jsonl(directory / "cases.jsonl")
    recovery_path = directory / "probe-recovery.json"
    recovery = {}
    if recovery_path.exists():
        recovery = {c["case_id"]: c for c in json.loads(recovery_path.read_text("utf-8"))["cases"]}
    version = baseline.get("schema_version")
    for row in [*seeds, *cases]:
        if row.get("schema_version") != version:
            raise CorpusError(f"schema_version {row.get('schema_version')} differs from the baseline's {version}")
    if baseline.get("corpus_version") != directory.name:
        raise CorpusError(f"baseline corpus_version {baseline.get('corpus_version')!r} is not {directory.name!r}")
    for case in cases:
        answerable = bool(case.get("relevant_claims") or case.get("relevant_artifacts"))
        if "answerable" in case and case["answerable"] != answerable:
            raise CorpusError(f"case {case['case_id']}: answerable disagrees with its direct gold")
    return Corpus(directory, baseline, seeds, cases, recovery)
