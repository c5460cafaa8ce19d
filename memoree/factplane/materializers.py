"""Materializers: how a recall fills a cold band, and what it says about it (``materialize_notes``).

A materializer takes ``(cell, band, tslot)`` at the cell's decoded grid point and returns one of
three outcomes (emem-recall.md §5.4):

* ``Reading``: a value; the caller signs it as a Primary fact, persists it, notes ``materialized``;
* ``NoData``: the source *answered* "nothing here" (e.g. no CSV sample within the radius); the
  caller signs an Absence with a typed reason, persists it, notes ``materialized``;
* ``Skip``: nothing is signed. ``reason_class`` says why: transient ``timeout`` /
  ``upstream_error`` (retryable) or structural ``unknown_band`` / ``no_materializer`` /
  ``capability_unavailable`` (not retryable here). A skip is "unknown", never an absence:
  its note always carries ``absence: false``. A materializer that raises or runs past its
  timeout becomes a skip too.

Built in (offline, deterministic): the three ``cell.*`` bands (see ``memoree.factplane.identity``) and CSV
file bands (``memoree band add-file``): the sample nearest to the grid point by great-circle
distance (sphere, R = 6 371 008.8 m) within the band's radius, else an ``outside_coverage``
absence. Local values carry local source schemes (``emem.cell64``, ``local.file``), never an
upstream's, and never the ``direct_sensor`` class.

Real upstream sources are plugins: an entry point in the group ``memoree.materializers`` naming a
zero-argument callable that returns a ``Materializer`` (its ``bands()`` declare the bands it
fills, with their provenance classes). ``REGISTRY`` holds the built-ins plus every plugin that
loads.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, NamedTuple, Protocol

import msgspec
from msgspec import UNSET, UnsetType

from memoree.factplane.emem import cell64
from memoree.factplane.emem.facts import Derivation, Source
from memoree.factplane.identity import (
    BUILTIN_BANDS,
    SCHEME_CELL64,
    SCHEME_LOCAL_FILE,
    Band,
    cell_area_m2,
    fact_error,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "MaterializeNote",
    "MaterializeRequest",
    "Materializer",
    "MaterializerRegistry",
    "NoData",
    "REGISTRY",
    "Reading",
    "Skip",
    "parse_samples",
    "run_materializer",
]

ENTRY_POINT_GROUP = "memoree.materializers"
DEFAULT_TIMEOUT_S = 30.0
CSV_FN_KEY = "local.csv_nearest@1"
MAX_CSV_BYTES = 4 * 1024 * 1024
RETRYABLE_REASON_CLASSES = frozenset({"timeout", "upstream_error"})
REASON_CLASSES = ("timeout", "upstream_error", "unknown_band", "no_materializer",
                  "capability_unavailable")


class MaterializeRequest(NamedTuple):
    cell: str
    band: Band
    tslot: int
    lat: float  # the cell's decoded grid point
    lng: float


class Reading(msgspec.Struct, frozen=True, kw_only=True):
    value: Any
    sources: list[Source]
    derivation: Derivation
    confidence: float = 1.0


class NoData(msgspec.Struct, frozen=True, kw_only=True):
    reason: str  # an OpenAPI absence_reason that is not transient (e.g. outside_coverage)
    detail: str
    sources: list[Source]


class Skip(msgspec.Struct, frozen=True, kw_only=True):
    reason_class: str
    reason: str  # "<class_prefix>: human text"

    @property
    def retryable(self) -> bool:
        return self.reason_class in RETRYABLE_REASON_CLASSES


Outcome = Reading | NoData | Skip


class MaterializeNote(msgspec.Struct, kw_only=True):
    """One ``materialize_notes[]`` entry (unsigned; outside the receipt). Unset fields are omitted."""

    band: str
    cell: str
    status: str  # materialized | skipped
    ok: bool
    absence: bool  # always false on a skip
    fact_cid: str | UnsetType = UNSET
    reason: str | UnsetType = UNSET
    reason_class: str | UnsetType = UNSET
    retryable: bool | UnsetType = UNSET
    latency_ms: float | UnsetType = UNSET


def materialized_note(cell: str, band: str, fact_cid: str, *, absence: bool,
                      latency_ms: float) -> MaterializeNote:
    return MaterializeNote(band=band, cell=cell, status="materialized", ok=True, absence=absence,
                           fact_cid=fact_cid, latency_ms=round(latency_ms, 3))


def skipped_note(cell: str, band: str, skip: Skip, latency_ms: float | None = None) -> MaterializeNote:
    return MaterializeNote(band=band, cell=cell, status="skipped", ok=False, absence=False,
                           reason=skip.reason, reason_class=skip.reason_class,
                           retryable=skip.retryable,
                           latency_ms=UNSET if latency_ms is None else round(latency_ms, 3))


class Materializer(Protocol):
    """A source of values for some bands. ``inline`` ones are fast and local (no timeout thread)."""

    fn_key: str
    inline: bool

    def bands(self) -> Iterable[Band]: ...

    def serves(self, band: Band) -> bool: ...

    def materialize(self, request: MaterializeRequest) -> Outcome: ...


# --- built-in: values derived from the cell itself ---------------------------------------------


class CellMaterializer:
    """``cell.lat_deg``, ``cell.lng_deg``, ``cell.area_m2``: recomputable from the cell text."""

    fn_key = "cell@1"
    inline = True

    def bands(self) -> Iterable[Band]:
        return BUILTIN_BANDS.values()

    def serves(self, band: Band) -> bool:
        return band.source_kind == "builtin" and band.name in BUILTIN_BANDS

    def fn_keys(self) -> list[str]:
        return [band.materializer for band in BUILTIN_BANDS.values() if band.materializer]

    def materialize(self, request: MaterializeRequest) -> Outcome:
        value = {
            "cell.lat_deg": lambda: request.lat,
            "cell.lng_deg": lambda: request.lng,
            "cell.area_m2": lambda: cell_area_m2(request.cell),
        }[request.band.name]()
        return Reading(
            value=float(value),
            sources=[Source(scheme=SCHEME_CELL64, id=request.cell)],
            derivation=Derivation(fn_key=f"{request.band.name}@1"),
        )


# --- built-in: CSV file bands ---------------------------------------------------------------------


class Sample(NamedTuple):
    lat: float
    lng: float
    value: int | float


def parse_samples(data: bytes) -> list[Sample]:
    """``lat,lng,value`` rows (header required, extra columns ignored); refuses anything else."""
    if len(data) > MAX_CSV_BYTES:
        raise fact_error("invalid_argument", f"CSV must not exceed {MAX_CSV_BYTES} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise fact_error("invalid_argument", "CSV must be UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text))
    columns = {(name or "").strip().lower(): name for name in reader.fieldnames or []}
    missing = [c for c in ("lat", "lng", "value") if c not in columns]
    if missing:
        raise fact_error("invalid_argument", f"CSV header must name lat,lng,value; missing {missing}")
    samples = []
    for line, row in enumerate(reader, start=2):
        samples.append(_sample(line, *(row[columns[c]] for c in ("lat", "lng", "value"))))
    if not samples:
        raise fact_error("invalid_argument", "CSV has no samples")
    return samples


def _sample(line: int, lat: str | None, lng: str | None, value: str | None) -> Sample:
    try:
        lat_f, lng_f = float(lat or ""), float(lng or "")
        text = (value or "").strip()
        number: int | float = int(text) if text.lstrip("+-").isdigit() else float(text)
    except ValueError:
        raise fact_error("invalid_argument", f"CSV line {line}: lat, lng and value must be numbers") from None
    if not (math.isfinite(lat_f) and math.isfinite(lng_f)) or abs(lat_f) > 90 or abs(lng_f) > 180:
        raise fact_error("invalid_argument", f"CSV line {line}: lat/lng out of range")
    if isinstance(number, float) and not math.isfinite(number):
        raise fact_error("invalid_argument", f"CSV line {line}: value must be finite")
    return Sample(lat_f, lng_f, number)


def great_circle_m(lat1: float, lng1: float, lat2: float, lng2: float) -> float:
    """Haversine distance on the sphere of radius R = 6 371 008.8 m."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lng2 - lng1)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * cell64.EARTH_MEAN_RADIUS_M * math.asin(min(1.0, math.sqrt(h)))


def csv_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class CsvMaterializer:
    """File bands: the nearest sample within the radius, else a signed ``outside_coverage``."""

    fn_key = CSV_FN_KEY
    inline = True

    def __init__(self) -> None:
        self._cache: dict[str, list[Sample]] = {}
        self._lock = threading.Lock()

    def bands(self) -> Iterable[Band]:
        return ()

    def serves(self, band: Band) -> bool:
        return band.source_kind == "file"

    def fn_keys(self) -> list[str]:
        return [self.fn_key]

    def cached(self, band: Band) -> bool:
        with self._lock:
            return (band.csv_sha256 or "") in self._cache

    def samples(self, band: Band, data: bytes | None) -> list[Sample] | None:
        key = band.csv_sha256 or ""
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        if data is None or csv_sha256(data) != band.csv_sha256:
            return None
        samples = parse_samples(data)
        with self._lock:
            self._cache[key] = samples
        return samples

    def materialize(self, request: MaterializeRequest, data: bytes | None = None) -> Outcome:
        """``data`` is the band's CSV bytes; it may be omitted once :meth:`cached` is true."""
        band = request.band
        samples = self.samples(band, data)
        if samples is None:
            return Skip(reason_class="upstream_error",
                        reason=f"upstream_error: the data of file band {band.name} is unreadable")
        source = self._source(band)
        nearest, distance = _nearest(samples, request.lat, request.lng)
        radius = float(band.radius_m or 0.0)
        if distance > radius:
            return NoData(
                reason="outside_coverage",
                detail=(f"no sample of {band.dataset_id} within {radius:g} m of the cell's grid "
                        f"point (nearest is {distance:.1f} m away)"),
                sources=[source],
            )
        return Reading(
            value=nearest.value,
            sources=[source],
            derivation=Derivation(fn_key=self.fn_key, args={
                "sample_lat": nearest.lat, "sample_lng": nearest.lng,
                "distance_m": round(distance, 3), "radius_m": radius,
            }),
        )

    def _source(self, band: Band) -> Source:
        digest = bytes.fromhex(band.csv_sha256 or "")
        fields: dict[str, Any] = {"scheme": SCHEME_LOCAL_FILE,
                                  "id": f"{band.dataset_id}/{(band.csv_sha256 or '')[:16]}",
                                  "hash": digest}
        if band.captured_at:
            fields["captured_at"] = band.captured_at
        return Source(**fields)


def _nearest(samples: list[Sample], lat: float, lng: float) -> tuple[Sample, float]:
    best, best_distance = samples[0], math.inf
    for sample in samples:
        distance = great_circle_m(lat, lng, sample.lat, sample.lng)
        if distance < best_distance:
            best, best_distance = sample, distance
    return best, best_distance


# --- the registry ---------------------------------------------------------------------------------


class MaterializerRegistry:
    """Built-in materializers plus plugins; finds the one that serves a band."""

    def __init__(self, materializers: Iterable[Any] = ()) -> None:
        self._items: list[Any] = list(materializers)
        self.plugin_errors: list[str] = []

    def register(self, materializer: Any) -> None:
        self._items.insert(0, materializer)

    def unregister(self, materializer: Any) -> None:
        self._items = [m for m in self._items if m is not materializer]

    def for_band(self, band: Band) -> Any | None:
        return next((m for m in self._items if m.serves(band)), None)

    def plugin_bands(self) -> dict[str, Band]:
        """Bands that materializers declare themselves (built-ins and plugins)."""
        found: dict[str, Band] = {}
        for materializer in reversed(self._items):
            for band in materializer.bands():
                found[band.name] = band
        return found

    def fn_keys(self) -> list[str]:
        keys: list[str] = []
        for materializer in self._items:
            keys += getattr(materializer, "fn_keys", lambda m=materializer: [m.fn_key])()
        return sorted(set(keys))

    def csv(self) -> CsvMaterializer | None:
        return next((m for m in self._items if isinstance(m, CsvMaterializer)), None)

    def load_plugins(self) -> None:
        from importlib.metadata import entry_points

        for entry in entry_points(group=ENTRY_POINT_GROUP):
            try:
                self.register(entry.load()())
            except Exception as exc:  # a broken plugin must not take the responder down
                self.plugin_errors.append(f"{entry.name}: {exc}")


def default_registry() -> MaterializerRegistry:
    registry = MaterializerRegistry([CellMaterializer(), CsvMaterializer()])
    registry.load_plugins()
    return registry


REGISTRY = default_registry()

_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="memoree-materializer")


def run_materializer(materializer: Any, request: MaterializeRequest, *,
                     timeout_s: float = DEFAULT_TIMEOUT_S,
                     call: Callable[[], Outcome] | None = None) -> tuple[Outcome, float]:
    """Run one materializer; exceptions and timeouts become skips. Returns (outcome, ms)."""
    started = time.perf_counter()
    invoke = call or (lambda: materializer.materialize(request))
    try:
        if getattr(materializer, "inline", False):
            outcome = invoke()
        else:
            outcome = _pool.submit(invoke).result(timeout=timeout_s)
    except FutureTimeout:
        outcome = Skip(reason_class="timeout",
                       reason=f"timeout: {materializer.fn_key} gave no answer within {timeout_s:g} s")
    except Exception as exc:  # a failing source is an unknown, never an absence
        outcome = Skip(reason_class="upstream_error",
                       reason=f"upstream_error: {materializer.fn_key} failed: {exc}")
    if not isinstance(outcome, (Reading, NoData, Skip)):
        outcome = Skip(reason_class="upstream_error",
                       reason=f"upstream_error: {materializer.fn_key} returned {type(outcome).__name__}")
    return outcome, (time.perf_counter() - started) * 1000.0
