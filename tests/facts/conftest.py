"""Fixtures for the signed fact plane: a service on a settable clock, and fact-plane helpers."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memoree.factplane.emem import cell64
from memoree.service.service import Service
from tests.conftest import Caller

CELL = "defi.zb493.xuqA.zcb5f"  # Bengaluru, the spec's locate vector
CELL_LAT, CELL_LNG = cell64.decode(CELL)
FAR_CELL = cell64.encode(48.8566, 2.3522)  # Paris
CTX = {"workspace_id": "wsp_facts", "project_id": "prj_facts"}


class Clock:
    """A settable clock in the log's stored format (``...HH:MM:SS.ffffffZ``)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 6, 1, 12, 0, 0, tzinfo=timezone.utc)

    def __call__(self) -> str:
        self.now += timedelta(microseconds=1)
        return self.now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class FactCaller(Caller):
    """A protocol caller with shortcuts for the fact plane's ops."""

    def recall(self, **payload: Any) -> dict[str, Any]:
        payload.setdefault("cell", CELL)
        return self.ok("fact.recall", payload, context=None)["result"]

    def register(self, band: str, unit: str = "u", **fields: Any) -> dict[str, Any]:
        return self.ok("band.register", {"band": band, "unit": unit, **fields},
                       key=f"band-{band}-{self.counter}")

    def attest(self, band: str, value: Any, **fields: Any) -> dict[str, Any]:
        fields.setdefault("cell", CELL)
        return self.ok("fact.attest", {"band": band, "value": value, **fields},
                       key=f"attest-{band}-{self.counter}")

    def events(self, after: int = 0) -> list[str]:
        return [event.type for event in self.service.engine.log.read(after=after)]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fact_service(tmp_path: Path, clock: Clock) -> Iterator[Service]:
    svc = Service(tmp_path / "data", clock=clock)
    yield svc
    svc.close()


@pytest.fixture
def facts(fact_service: Service) -> FactCaller:
    caller = FactCaller(fact_service)
    return caller


def csv_text(*rows: tuple[float, float, Any]) -> str:
    return "lat,lng,value\n" + "".join(f"{lat},{lng},{value}\n" for lat, lng, value in rows)
