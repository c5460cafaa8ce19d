"""The emem REST surface (starlette): ``POST /v1/recall``, ``POST /v1/verify_receipt``,
``GET /v1/bands``, ``GET /v1/errors``, ``GET /.well-known/emem.json`` and ``GET /openapi.json``.

The app never touches the store: each endpoint turns its request into one protocol request and
hands the bytes to ``submit`` (the daemon's ``Writer.submit``), so every store access stays on the
single writer thread. A success answers with the protocol result's bytes as they are (a signed
receipt is byte-for-byte or nothing); every failure, including unknown routes, wrong methods,
malformed bodies and unexpected errors, is an ``emem.error.v1`` envelope whose ``code`` is listed
by ``GET /v1/errors`` with its HTTP status.

pydantic earns its place here, at the HTTP edge only: the request models validate bodies (strict
types, unknown fields refused, the offending field named in ``message``) and, with the response
models, generate ``/openapi.json``, which describes exactly these endpoints. Responses are not
re-validated through pydantic (that would reshape signed bytes); the protocol types stay msgspec.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import Future
from typing import Annotated, Any, Literal, NamedTuple

import msgspec
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.json_schema import models_json_schema
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from memoree.factplane.emem.cell64 import CELL64_PATTERN

__all__ = ["ERROR_CATALOGUE", "build_app", "openapi_document"]

ERROR_SCHEMA = "emem.error.v1"
MAX_BODY_BYTES = 1024 * 1024
Submit = Callable[[bytes], Future[bytes]]


# --- the error catalogue --------------------------------------------------------------------------


class ErrorCode(NamedTuple):
    status: int
    meaning: str
    recover: str


ERROR_CATALOGUE: dict[str, ErrorCode] = {
    "invalid_argument": ErrorCode(400, "The request body or a field is malformed; `message` names the field.", "Fix the named field and retry."),
    "invalid_cell": ErrorCode(400, "`cell` is not a geo cell64 (four dotted alphabet symbols with the geo prefix).", "Send a cell64 such as defi.zb493.xuqA.zcb5f."),
    "invalid_temporal_bound": ErrorCode(400, "`as_of_tslot` is before the requested `tslot`.", "Send as_of_tslot >= tslot, or drop one of them."),
    "invalid_signed_at_format": ErrorCode(400, "`as_of_signed_at` is not an RFC 3339 timestamp.", "Send e.g. 2026-05-29T00:00:00Z."),
    "tslot_mismatch": ErrorCode(400, "The tslot does not fit the band's tempo.", "Static bands only have tslot 0."),
    "band_not_in_registry": ErrorCode(404, "The band is not registered at this responder.", "GET /v1/bands lists the bands served here."),
    "not_found": ErrorCode(404, "No such route.", "See GET /openapi.json for the routes served."),
    "method_not_allowed": ErrorCode(405, "The route exists but not with this HTTP method.", "Use the method named in the Allow header."),
    "payload_too_large": ErrorCode(413, f"The request body exceeds {MAX_BODY_BYTES} bytes.", "Send a smaller body."),
    "bad_signature": ErrorCode(422, "A public key, signature or key encoding is malformed.", "Send base32 (lowercase, unpadded) keys and signatures."),
    "bad_merkle_proof": ErrorCode(422, "A receipt's merkle_proof is malformed.", "Send the receipt exactly as it was served."),
    "canonical_encoding_divergence": ErrorCode(500, "Stored bytes are not the canonical encoding of what they decode to.", "Report it: the store needs `memoree verify`."),
    "internal": ErrorCode(500, "An unexpected failure; nothing about the request is known to be wrong.", "Retry later; report it if it persists."),
}
_NEXT_STEPS = ["GET /openapi.json describes every route", "GET /v1/bands lists the bands served here"]
_PROTOCOL_TO_EMEM = {"INVALID_REQUEST": "invalid_argument", "NOT_FOUND": "not_found",
                     "CONTENT_TOO_LARGE": "payload_too_large"}


class EmemHttpError(Exception):
    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code if code in ERROR_CATALOGUE else "internal"
        self.message = message
        self.details = details
        self.headers = headers


def error_response(exc: EmemHttpError, path: str, request_id: str | None = None) -> Response:
    body: dict[str, Any] = {"schema": ERROR_SCHEMA, "code": exc.code, "message": exc.message,
                            "path": path}
    if exc.details:
        body["details"] = exc.details
    if request_id is not None:
        body["request_id"] = request_id
    return JSONResponse(body, status_code=ERROR_CATALOGUE[exc.code].status, headers=exc.headers)


def _from_protocol_error(error: dict[str, Any]) -> EmemHttpError:
    details = dict(error.get("details") or {})
    code = details.pop("emem_code", None) or _PROTOCOL_TO_EMEM.get(error.get("code", ""), "internal")
    message = str(error.get("message", "")).removeprefix("invalid request: ")
    return EmemHttpError(code, message, details or None)


# --- the REST contract (pydantic) -----------------------------------------------------------------

ProvenanceLiteral = Literal["direct_sensor", "deterministic_index", "estimator",
                            "attested_execution", "model_output", "human_curated", "unclassified"]
Cell64 = Annotated[str, Field(pattern=CELL64_PATTERN, min_length=19, max_length=23)]
FactCid = Annotated[str, Field(pattern=r"^[a-z2-7]{52}$", min_length=52, max_length=52)]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class RecallScope(_Request):
    """emem's multi-tenant four-tuple; set fields filter to facts written under exactly it."""

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    org_id: str | None = None


class RecallReq(_Request):
    cell: str = Field(description="cell64 string (a non-geo or malformed one answers invalid_cell)")
    band: str | None = Field(None, description="one band, merged first into `bands`")
    bands: list[str] | None = Field(None, description="bands to ensure; omitted or [] means every band at the cell, and then nothing is materialized")
    tslot: int | None = Field(None, ge=0)
    as_of_tslot: int | None = Field(None, ge=0, description="Bi-temporal valid-time bound.")
    as_of_signed_at: str | None = Field(None, description="Bi-temporal transaction-time bound (RFC 3339).",
                                        json_schema_extra={"format": "date-time"})
    scope: RecallScope | None = None
    provenance: list[ProvenanceLiteral] | None = Field(None, description="keep only facts whose band's provenance class is listed (before signing)")
    deterministic: bool | None = Field(None, description="true keeps direct_sensor and deterministic_index; false keeps the rest; intersected with `provenance`")


class VerifyReceiptReq(_Request):
    receipt: dict[str, Any] = Field(description="the receipt exactly as it was served")
    pubkey_b32: str | None = Field(None, description="verify under this key instead of the receipt's `responder`")


class _Response(BaseModel):
    model_config = ConfigDict(extra="allow")


class Cost(_Response):
    credits: float
    latency_p50_ms: float
    latency_p99_ms: float
    source_freshness_s: int | None = Field(description="age of the stalest dated source; null when nothing is datable")
    was_cached: bool


class MerkleProofOut(_Response):
    leaf_index: int
    path: list[list[int]]
    root: list[int]
    version: int | None = None


class AsOfOut(_Response):
    valid_time: int | None = None
    transaction_time: str | None = None


class Receipt(_Response):
    """Ed25519-signed receipt (preimage_version 2). Store and forward its exact bytes."""

    request_id: str
    served_at: str
    primitive: str
    cells: list[str]
    fact_cids: list[str]
    schema_cid: str
    registry_cid: str
    responder: str
    responder_key_epoch: int
    responder_pubkey_b32: str
    signature: str
    source_versions: dict[str, str] | None = None
    merkle_proof: MerkleProofOut | None = None
    scope: RecallScope | None = None
    as_of: AsOfOut | None = None
    cost: Cost | None = None
    preimage_version: int | None = None


class Fact(_Response):
    kind: Literal["primary", "absence"]
    cell: Cell64
    band: str
    tslot: int = Field(ge=0)
    value: Any = Field(description="number, array of numbers or class id; null for an absence")
    fact_cid: FactCid
    receipt: Receipt
    unit: str | None = None
    provenance: str | None = Field(None, description="source scheme of the fact's first source")
    absence_reason: Literal["unavailable_capability", "outside_coverage",
                            "archetype_seed_unavailable", "gpu_unavailable", "upstream_error",
                            "upstream_timeout"] | None = None


class MaterializeNote(_Response):
    band: str
    cell: str
    status: Literal["materialized", "skipped"]
    ok: bool
    absence: bool
    fact_cid: str | None = None
    reason: str | None = None
    reason_class: Literal["timeout", "upstream_error", "unknown_band", "no_materializer",
                          "capability_unavailable"] | None = None
    retryable: bool | None = None
    latency_ms: float | None = None


class SignedResponse(_Response):
    facts: list[Fact]
    receipt: Receipt
    bands_already_attested_at_cell: list[str]
    materialize_notes: list[MaterializeNote]
    caveats: list[str]
    bands_cid: str
    temporal_advice: dict[str, Any] | None = None


class VerifyReceiptResponse(_Response):
    valid: bool
    signature_valid: bool
    merkle_proof_valid: bool | None
    reason: Literal["signature_invalid", "merkle_proof_invalid",
                    "receipt_reshaped_after_signing"] | None = None
    failed_check: str | None = None
    failure_detail: str | None = None
    signer_pubkey_b32: str | None
    preimage_version: int
    preimage_blake3_hex: str | None
    primitive: str
    served_at: str
    fact_cids_count: int


class ErrorEnvelope(_Response):
    schema_: Literal["emem.error.v1"] = Field(alias="schema")
    code: str
    message: str
    path: str | None = None
    details: dict[str, Any] | None = None
    request_id: str | None = None


class ErrorCodeEntry(_Response):
    code: str
    http_status: int
    meaning: str
    recover: str


class ErrorCatalogue(_Response):
    schema_: Literal["emem.errors.v1"] = Field(alias="schema")
    codes: list[ErrorCodeEntry]
    next: list[str]


class ResponderKey(_Response):
    pubkey_b32: str
    key_epoch: int


class WellKnown(_Response):
    responder: ResponderKey
    key_epoch: int
    signature_alg: str
    hash_alg: str
    cid_encoding: str


class BandList(_Response):
    bands: list[dict[str, Any]]
    materializers: list[str]


# --- endpoints ------------------------------------------------------------------------------------


class _Envelope(msgspec.Struct):
    ok: bool
    result: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"null"))
    error: dict[str, Any] | None = None


_envelope = msgspec.json.Decoder(_Envelope)


def _raw_json(content: bytes, status: int = 200) -> Response:
    return Response(content, status_code=status, media_type="application/json")


class Api:
    """The endpoints, each a protocol request through ``submit``."""

    def __init__(self, submit: Submit) -> None:
        self.submit = submit

    async def call(self, op: str, payload: dict[str, Any]) -> bytes:
        from memoree.ids import new_id

        request = {"v": 1, "request_id": new_id("req"), "op": op, "input": payload}
        raw = await asyncio.wrap_future(self.submit(json.dumps(request).encode()))
        envelope = _envelope.decode(raw)
        if not envelope.ok:
            raise _from_protocol_error(envelope.error or {})
        return bytes(envelope.result)

    async def recall(self, request: Request) -> Response:
        req = await _body(request, RecallReq)
        return _raw_json(await self.call("fact.recall", req.model_dump(exclude_none=True)))

    async def verify_receipt(self, request: Request) -> Response:
        req = await _body(request, VerifyReceiptReq)
        return _raw_json(await self.call("receipt.verify", req.model_dump(exclude_none=True)))

    async def bands(self, request: Request) -> Response:
        return _raw_json(await self.call("band.list", {}))

    async def well_known(self, request: Request) -> Response:
        return _raw_json(await self.call("fact.identity", {}))

    async def errors(self, request: Request) -> Response:
        return JSONResponse(error_catalogue())

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi_document())


async def _body(request: Request, model: type[BaseModel]) -> Any:
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise EmemHttpError("payload_too_large", f"the body is {len(raw)} bytes; at most {MAX_BODY_BYTES}")
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first.get("loc", ())) or "body"
        kind = first.get("type", "")
        message = (f"missing field `{field}`" if kind == "missing" else
                   f"unknown field `{field}`" if kind == "extra_forbidden" else
                   f"invalid body: {first.get('msg', 'not valid JSON')}" if field == "body" else
                   f"field `{field}`: {first.get('msg')}")
        raise EmemHttpError("invalid_argument", message, {"field": field}) from None


def error_catalogue() -> dict[str, Any]:
    return {
        "schema": "emem.errors.v1",
        "codes": [{"code": code, "http_status": entry.status, "meaning": entry.meaning,
                   "recover": entry.recover} for code, entry in ERROR_CATALOGUE.items()],
        "next": list(_NEXT_STEPS),
    }


async def _on_emem_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, EmemHttpError)
    return error_response(exc, request.url.path)


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(
        exc.status_code, "invalid_argument" if exc.status_code < 500 else "internal")
    return error_response(EmemHttpError(code, str(exc.detail), headers=exc.headers), request.url.path)


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    from memoree.log import logger

    logger().error("http_request_failed", path=request.url.path, exc_info=exc)
    return error_response(EmemHttpError("internal", f"internal error: {type(exc).__name__}"),
                          request.url.path)


def build_app(submit: Submit) -> Starlette:
    api = Api(submit)
    routes = [
        Route("/v1/recall", api.recall, methods=["POST"]),
        Route("/v1/verify_receipt", api.verify_receipt, methods=["POST"]),
        Route("/v1/bands", api.bands, methods=["GET"]),
        Route("/v1/errors", api.errors, methods=["GET"]),
        Route("/.well-known/emem.json", api.well_known, methods=["GET"]),
        Route("/openapi.json", api.openapi, methods=["GET"]),
    ]
    return Starlette(routes=routes, exception_handlers={
        EmemHttpError: _on_emem_error, HTTPException: _on_http_error, Exception: _on_unexpected,
    })


# --- /openapi.json ----------------------------------------------------------------------------------

_OPERATIONS: list[tuple[str, str, str, str, type[BaseModel] | None, type[BaseModel]]] = [
    ("/v1/recall", "post", "emem_recall", "recall facts (ensure: reuses what exists, materializes what is missing)", RecallReq, SignedResponse),
    ("/v1/verify_receipt", "post", "emem_verify_receipt", "verify a receipt; says which check failed, and whether it was reshaped after signing", VerifyReceiptReq, VerifyReceiptResponse),
    ("/v1/bands", "get", "emem_bands", "the bands served here, with their provenance classes", None, BandList),
    ("/v1/errors", "get", "emem_errors", "the emem.error.v1 code catalogue with HTTP statuses", None, ErrorCatalogue),
    ("/.well-known/emem.json", "get", "emem_well_known", "the responder's public key and key epoch", None, WellKnown),
    ("/openapi.json", "get", "openapi", "this document", None, _Response),
]


def openapi_document() -> dict[str, Any]:
    request_models = [m for *_, m, _ in _OPERATIONS if m is not None]
    response_models = [m for *_, m in _OPERATIONS if m is not _Response] + [ErrorEnvelope]
    _, top = models_json_schema(
        [(m, "validation") for m in request_models] + [(m, "serialization") for m in response_models],
        ref_template="#/components/schemas/{model}",
    )
    paths: dict[str, Any] = {}
    for path, method, op_id, summary, request_model, response_model in _OPERATIONS:
        success = ({"type": "object"} if response_model is _Response
                   else {"$ref": f"#/components/schemas/{response_model.__name__}"})
        operation: dict[str, Any] = {
            "operationId": op_id, "summary": summary,
            "responses": {
                "200": {"description": "ok", "content": {"application/json": {"schema": success}}},
                "default": {"description": "error: the emem.error.v1 envelope; branch on `code` (GET /v1/errors)",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}}},
            },
        }
        if request_model is not None:
            operation["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{request_model.__name__}"}}}}
        paths.setdefault(path, {})[method] = operation
    from memoree import __version__

    return {
        "openapi": "3.1.0",
        "info": {"title": "memoree emem Recall API", "version": __version__,
                 "description": "An emem-compatible recall surface served by a local memoree "
                                "daemon: signed facts by (cell64, band, tslot), Ed25519 receipts "
                                "(preimage v2), lazy local materializers."},
        "paths": paths,
        "components": {"schemas": top.get("$defs", {})},
    }
