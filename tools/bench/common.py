"""Shared helpers for the benchmarks: timing, percentiles and the result table."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Row", "percentile", "print_table", "rate", "timed"]


@dataclass
class Row:
    name: str
    ours: float
    baseline: float
    unit: str
    baseline_name: str
    higher_is_better: bool = True

    @property
    def ratio(self) -> float:
        return self.ours / self.baseline if self.baseline else float("nan")


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def print_table(rows: list[Row]) -> None:
    header = f"| {'benchmark':<44} | {'ours':>12} | {'baseline':>12} | {'ratio':>6} | baseline is |"
    print(header)
    print("|" + "-" * 46 + "|" + "-" * 14 + "|" + "-" * 14 + "|" + "-" * 8 + "|" + "-" * 13 + "|")
    for row in rows:
        print(f"| {row.name:<44} | {row.ours:>10.2f} {row.unit:<1} | {row.baseline:>10.2f} {row.unit:<1} | "
              f"{row.ratio:>5.2f}x | {row.baseline_name} |")
