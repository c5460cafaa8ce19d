"""The signed fact plane's identity: provenance classes, bands, manifests, and attestation receipts.

Owns what every part of the fact plane (commands, projection, recall, REST) must agree on:

* the seven provenance classes and what each promises (emem-recall.md §5.2);
* the ``Band`` record: a named reading with a unit, a tempo and a provenance class. Classes belong
  to the band, never to a fact. Three bands are built in and need no registration event:

  ========== ======== ==================================================================
  band       unit     value, for the cell's decoded grid point (lat_q, lng_q)
  ========== ======== ==================================================================
  cell.lat_deg   deg  ``lat_q / (2**21 - 1) * 180 - 90``
  cell.lng_deg   deg  ``lng_q / (2**22 - 1) * 360 - 180``
  cell.area_m2   m2   ``R**2 * dlng * |sin(lat_max) - sin(lat_min)|`` over the cell's bbox
                      (grid point +/- half a pitch, lat clipped to +/-90, angles in radians,
                      ``dlng = 360 / (2**22 - 1)`` degrees, R = 6 371 008.8 m, a sphere)
  ========== ======== ==================================================================

  all ``deterministic_index``, tempo ``static`` (tslot 0), source
  ``{scheme: "emem.cell64", id: <cell64>}``, derivation ``fn_key`` ``<band>@1``, confidence 1.0;
  any third party recomputes them from the cell text alone;
* our own manifests and their cids (``schema_cid``, ``registry_cid``, ``bands_cid``,
  ``sources_cid``): these are memoree's, not emem.dev's, and are labelled so;
* the per-fact attestation receipt, rebuilt byte-for-byte from a ``fact.attested`` event;
* ``FactPlaneError``: an ``INVALID_REQUEST``/``NOT_FOUND`` carrying the emem wire code in
  ``details.emem_code`` so the REST layer answers with the right ``emem.error.v1`` code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import msgspec

from memoree.factplane.emem import b32, cbor, cell64
from memoree.factplane.emem.batch_merkle import MerkleProof
from memoree.factplane.emem.ids import blake3_digest
from memoree.factplane.emem.receipts import Receipt, Scope as EmemScope
from memoree.errors import InvalidRequest, NotFound

__all__ = [
    "BUILTIN_BANDS",
    "Band",
    "FactPlaneError",
    "PROVENANCE_CLASSES",
    "ProvenanceClass",
    "attestation_receipt",
    "bands_cid",
    "cell_area_m2",
    "emem_scope",
    "fact_error",
    "manifest_source_versions",
    "scope_key",
]

PRIVACY_PUBLIC = "public"
SCHEME_CELL64 = "emem.cell64"
SCHEME_LOCAL_FILE = "local.file"
SCHEME_AGENT = "memoree.agent"
LOCAL_SCHEMES = (SCHEME_CELL64, SCHEME_LOCAL_FILE, SCHEME_AGENT)
ATTEST_PRIMITIVE = "emem.attest"
RECALL_PRIMITIVE = "emem.recall"

# Dotted scalar keys, lowercase: "topic.dimension[.more]".
BAND_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*(?:\.[a-z0-9][a-z0-9_-]*)+")
MAX_BAND_NAME_BYTES = 128
RESERVED_BAND_PREFIXES = ("cell.",)


class ProvenanceClass(NamedTuple):
    name: str
    is_deterministic: bool
    tamper_evidence: str
    trust_rank: int
    caution: str | None


PROVENANCE_CLASSES: dict[str, ProvenanceClass] = {
    c.name: c
    for c in (
        ProvenanceClass("direct_sensor", True, "recomputable_from_source", 5, None),
        ProvenanceClass("deterministic_index", True, "recomputable_from_source", 4, None),
        ProvenanceClass("estimator", False, "rerunnable_from_signed_inputs", 3,
                        "an estimate: rerun it from its signed inputs before relying on it"),
        ProvenanceClass("attested_execution", False, "verified_execution_trace", 3,
                        "trust rests on the execution trace, not on a recomputable source"),
        ProvenanceClass("model_output", False, "signed_model_checkpoint", 2,
                        "a model's output: it can be wrong in ways the source is not"),
        ProvenanceClass("human_curated", False, "attester_only", 1,
                        "attested by an agent or a person: only the attester vouches for it"),
        ProvenanceClass("unclassified", False, "attester_only", 0,
                        "unclassified provenance: treat as an unverified claim"),
    )
}
DETERMINISTIC_CLASSES = frozenset(n for n, c in PROVENANCE_CLASSES.items() if c.is_deterministic)
# A value computed or recorded on this machine is never labelled as an instrument reading.
REGISTRABLE_CLASSES = frozenset(PROVENANCE_CLASSES) - {"direct_sensor"}


class FactPlaneError(InvalidRequest):
    """An invalid fact-plane request; ``details.emem_code`` is its emem.error.v1 code."""


class FactNotFound(NotFound):
    """A missing band or fact; ``details.emem_code`` is its emem.error.v1 code."""


def fact_error(emem_code: str, message: str, **details: Any) -> FactPlaneError:
    return FactPlaneError(message, details={"emem_code": emem_code, **details})


class Band(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A band as recall, attest and the manifests see it (built in, registered or a plugin's)."""

    name: str
    unit: str
    tempo: str
    provenance_class: str
    source_kind: str  # builtin | attested | file | plugin
    privacy_class: str = PRIVACY_PUBLIC
    description: str | None = None
    materializer: str | None = None  # fn_key of the function that fills it, if any
    dataset_id: str | None = None
    csv_sha256: str | None = None
    radius_m: float | None = None
    sample_count: int | None = None
    captured_at: str | None = None
    commit_seq: int | None = None

    @property
    def klass(self) -> ProvenanceClass:
        return PROVENANCE_CLASSES.get(self.provenance_class, PROVENANCE_CLASSES["unclassified"])

    def metadata(self) -> dict[str, Any]:
        """The unsigned ``band_metadata`` block recall puts beside each fact."""
        klass = self.klass
        block: dict[str, Any] = {
            "unit": self.unit, "tempo": self.tempo, "provenance_class": klass.name,
            "is_deterministic": klass.is_deterministic, "tamper_evidence": klass.tamper_evidence,
            "source_kind": self.source_kind,
        }
        if klass.caution:
            block["caution"] = klass.caution
        return block


def _builtin(name: str, unit: str, description: str) -> Band:
    return Band(name=name, unit=unit, tempo="static", provenance_class="deterministic_index",
                source_kind="builtin", description=description, materializer=f"{name}@1")


BUILTIN_BANDS: dict[str, Band] = {
    band.name: band
    for band in (
        _builtin("cell.lat_deg", "deg", "latitude of the cell's grid point: lat_q/(2^21-1)*180-90"),
        _builtin("cell.lng_deg", "deg", "longitude of the cell's grid point: lng_q/(2^22-1)*360-180"),
        _builtin("cell.area_m2", "m2", "spherical area of the cell's bbox: R^2*dlng*|sin(lat1)-sin(lat0)|, R=6371008.8 m"),
    )
}


def check_band_name(name: str, *, for_registration: bool = False) -> str:
    """A dotted lowercase band key; built-in prefixes are reserved for registration."""
    if not isinstance(name, str) or len(name.encode("utf-8")) > MAX_BAND_NAME_BYTES or \
            BAND_NAME.fullmatch(name) is None:
        raise fact_error("invalid_argument",
                         f"band must be a dotted lowercase key such as 'soil.ph', got {name!r}",
                         field="band")
    if for_registration and name.startswith(RESERVED_BAND_PREFIXES):
        raise fact_error("invalid_argument", f"band prefix of {name!r} is reserved for built-in bands",
                         field="band")
    return name


def cell_area_m2(cell: str) -> float:
    """The spherical area of a cell's bbox (see the module docstring for the formula)."""
    box = cell64.bbox(cell)
    radius = cell64.EARTH_MEAN_RADIUS_M
    dlng = math.radians(box.max_lng - box.min_lng)
    band = abs(math.sin(math.radians(box.max_lat)) - math.sin(math.radians(box.min_lat)))
    return radius * radius * dlng * band


# --- manifests: memoree's own, hashed like emem's (blake3 over our CBOR, base32) ---------------

SCHEMA_MANIFEST = {
    "manifest": "memoree-emem-schema",
    "version": "v1",
    "fact": "emem fact (primary|absence): ciborium field order, kind first, confidence f32",
    "fact_cid": "base32(blake3(cbor(fact))), 32 bytes",
    "attestation": "v1 (domain-separated), batch merkle v1",
    "receipt": "preimage v2 (merkle binding always signed)",
}


def manifest_cid(document: Any) -> str:
    return b32.encode(blake3_digest(cbor.encode(document)))


SCHEMA_CID = manifest_cid(SCHEMA_MANIFEST)


def registry_cid(fn_keys: Iterable[str]) -> str:
    """The function registry in force: the sorted materializer fn_keys."""
    return manifest_cid({"manifest": "memoree-functions", "version": "v1",
                         "functions": sorted(set(fn_keys))})


def bands_cid(bands: Iterable[Band]) -> str:
    """The band manifest in force: every band's name, unit, tempo, class and source kind."""
    entries = [
        {"key": b.name, "unit": b.unit, "tempo": b.tempo, "provenance_class": b.provenance_class,
         "source_kind": b.source_kind}
        for b in sorted(bands, key=lambda b: b.name.encode("utf-8"))
    ]
    return manifest_cid({"manifest": "memoree-bands", "version": "v1", "bands": entries})


def sources_cid(schemes: Iterable[str]) -> str:
    return manifest_cid({"manifest": "memoree-sources", "version": "v1",
                         "schemes": sorted(set(schemes))})


def manifest_source_versions(bands: Iterable[Band], fn_keys: Iterable[str],
                             schemes: Iterable[str] = LOCAL_SCHEMES) -> dict[str, str]:
    """``source_versions`` as a receipt binds it (bytewise key order)."""
    return cbor.sorted_map({
        "bands_cid": bands_cid(bands),
        "registry_cid": registry_cid(fn_keys),
        "schema_cid": SCHEMA_CID,
        "sources_cid": sources_cid(schemes),
    })


# --- scope ---------------------------------------------------------------------------------------

SCOPE_FIELDS = ("user_id", "agent_id", "run_id", "org_id")


def emem_scope(fields: Mapping[str, Any] | Any | None) -> EmemScope | None:
    """An emem scope from a mapping or struct; ``None`` when every field is absent (= no scope)."""
    if fields is None:
        return None
    get = fields.get if isinstance(fields, Mapping) else (lambda name: getattr(fields, name, None))
    values = {name: get(name) for name in SCOPE_FIELDS if get(name) is not None}
    return EmemScope(**values) if values else None


def scope_key(scope: EmemScope | None) -> str | None:
    """The index key of an exact four-tuple: the receipt's scope digest (hex); None for global."""
    from memoree.factplane.emem.receipts import scope_digest_hex

    return scope_digest_hex(scope)


# --- the attestation receipt of one fact --------------------------------------------------------


def attestation_receipt(
    *, cell: str, fact_cid: str, proof: MerkleProof, scope: EmemScope | None,
    request_id: str, served_at: str, primitive: str, source_versions: Mapping[str, str],
    responder: bytes, responder_key_epoch: int, signature: bytes = b"",
) -> Receipt:
    """The receipt a responder signs when it attests one fact (signature empty until signed)."""
    return Receipt(
        request_id=request_id, served_at=served_at, primitive=primitive, cells=(cell,),
        fact_cids=(fact_cid,), schema_cid=source_versions.get("schema_cid", SCHEMA_CID),
        registry_cid=source_versions.get("registry_cid", ""),
        source_versions=dict(source_versions), scope=scope, merkle_proof=proof,
        preimage_version=2 if signature else 0, responder=responder,
        responder_key_epoch=responder_key_epoch, signature=signature,
    )
