"""The reliability suite's switches and figures: ``--soak``, run sizes, and the summary table.

Every test reports what it did (operations, faults injected, acknowledged losses, typed errors)
through ``figures.add``; the numbers travel as pytest user properties, so they reach the
controlling process under pytest-xdist too, and ``pytest_terminal_summary`` prints one table at
the end of the session. ``--soak`` switches every test from its CI size to its larger size.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

PROPERTY = "reliability_figures"
SHIM_SOURCE = Path(__file__).with_name("faultshim.c")
_collected: list[dict[str, Any]] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak", action="store_true", default=False,
                     help="reliability suite: run the larger soak sizes instead of the CI sizes")


@dataclass(frozen=True)
class Sizes:
    """How much each reliability test does; CI sizes by default, soak sizes with ``--soak``."""

    soak: bool
    crash_mutations: int
    crash_kills: int
    power_cuts: int
    power_writes_per_cut: int
    fault_workload_mutations: int
    fault_write_points: int | None  # None: every write of the workload
    fault_enospc_points: int
    replay_examples: int
    replay_steps: int
    backup_kills: int
    hostile_requests: int
    context_budgets: int


CI_SIZES = Sizes(soak=False, crash_mutations=2000, crash_kills=10, power_cuts=6, power_writes_per_cut=40,
                 fault_workload_mutations=4, fault_write_points=40, fault_enospc_points=16, replay_examples=20,
                 replay_steps=25, backup_kills=4, hostile_requests=1000, context_budgets=60)
SOAK_SIZES = Sizes(soak=True, crash_mutations=10000, crash_kills=25, power_cuts=16, power_writes_per_cut=120,
                   fault_workload_mutations=4, fault_write_points=None, fault_enospc_points=80, replay_examples=100,
                   replay_steps=50, backup_kills=10, hostile_requests=5000, context_budgets=400)


@pytest.fixture(scope="session")
def sizes(request: pytest.FixtureRequest) -> Sizes:
    return SOAK_SIZES if request.config.getoption("--soak", default=False) else CI_SIZES


class Figures:
    """Collects one test's figures as a user property (so xdist carries them to the controller)."""

    def __init__(self, node: pytest.Item) -> None:
        self.node = node

    def add(self, area: str, *, operations: int = 0, faults: int = 0, acked_losses: int = 0,
            typed_errors: int = 0, errors: int = 0, note: str = "") -> None:
        self.node.user_properties.append((PROPERTY, {
            "area": area, "operations": operations, "faults": faults, "acked_losses": acked_losses,
            "typed_errors": typed_errors, "errors": errors, "note": note,
        }))


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    return Figures(request.node)


@pytest.fixture(scope="session")
def faultshim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The LD_PRELOAD fault and durable-image shim, compiled once per worker."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler (gcc/cc) to build the LD_PRELOAD fault shim")
    target = tmp_path_factory.mktemp("faultshim") / "faultshim.so"
    result = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(target), str(SHIM_SOURCE),
                             "-ldl", "-lpthread"], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        pytest.skip(f"the fault shim does not build here: {result.stderr[-400:]}")
    return target


@pytest.fixture
def reaper() -> Iterator[list[Any]]:
    """Processes a test starts; every one still alive at teardown is killed and reaped."""
    processes: list[Any] = []
    yield processes
    for process in processes:
        process.stop()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call":
        return
    for name, value in getattr(report, "user_properties", ()):
        if name == PROPERTY:
            _collected.append(dict(value))


def _summary_rows() -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for figure in sorted(_collected, key=lambda f: f["area"].lower()):
        row = rows.setdefault(figure["area"], {"area": figure["area"], "operations": 0, "faults": 0,
                                               "acked_losses": 0, "typed_errors": 0, "errors": 0, "notes": []})
        for field in ("operations", "faults", "acked_losses", "typed_errors", "errors"):
            row[field] += figure[field]
        if figure["note"] and figure["note"] not in row["notes"]:
            row["notes"].append(figure["note"])
    return list(rows.values())


def _typed_share(typed: int, errors: int) -> str:
    return "—" if not errors else f"{typed}/{errors} ({100.0 * typed / errors:.0f}%)"


def summary_lines(rows: list[dict[str, Any]], soak: bool) -> list[str]:
    """The summary table as Markdown lines (also what the README shows)."""
    lines = [f"Reliability figures ({'soak' if soak else 'CI'} size)", "",
             "| area | operations | faults injected | acknowledged losses | typed errors | notes |",
             "|---|---:|---:|---:|---:|---|"]
    total = {"operations": 0, "faults": 0, "acked_losses": 0, "typed_errors": 0, "errors": 0}
    for row in rows:
        for field in total:
            total[field] += row[field]
        lines.append(f"| {row['area']} | {row['operations']:,} | {row['faults']:,} | {row['acked_losses']} | "
                     f"{_typed_share(row['typed_errors'], row['errors'])} | {'; '.join(row['notes'])} |")
    lines.append(f"| **total** | {total['operations']:,} | {total['faults']:,} | {total['acked_losses']} | "
                 f"{_typed_share(total['typed_errors'], total['errors'])} | |")
    return lines


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    rows = _summary_rows()
    if not rows:
        return
    terminalreporter.write_sep("=", "reliability summary")
    for line in summary_lines(rows, bool(config.getoption("--soak", default=False))):
        terminalreporter.write_line(line)
