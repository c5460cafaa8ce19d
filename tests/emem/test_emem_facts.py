"""Tests for memoree.factplane.emem.facts: fact CBOR bytes, fact_cid, absences and the JSON view."""

from __future__ import annotations

import json

import blake3
import msgspec
import pytest

from memoree.factplane.emem import b32, cbor, facts
from memoree.factplane.emem.errors import EmemError
from memoree.factplane.emem.facts import AbsenceFact, Derivation, DerivativeFact, PrimaryFact, Source

PRODUCTION_FACT_CID = "yqbolgeoycqkvj3zkxukb4bjw4odhpwvfzqo3fbgwf4spk45zala"


class TestProductionVector:
    def test_cbor_bytes_match(self, production_fact: PrimaryFact, production_cbor: bytes) -> None:
        """The §2.6 production fact encodes to the published 509 bytes exactly."""
        body = facts.fact_cbor(production_fact)
        assert len(body) == 509
        assert body == production_cbor

    def test_blake3_and_cid(self, production_fact: PrimaryFact) -> None:
        """Its blake3 and its 52-character fact_cid match upstream's recall example."""
        assert facts.fact_digest(production_fact).hex() == (
            "c402e5988ec0a0aaa77955e8a0f029b71c33bed52e60ed9426b17927ab9dc816"
        )
        assert facts.fact_cid(production_fact) == PRODUCTION_FACT_CID

    def test_cid_of_stored_bytes(self, production_cbor: bytes) -> None:
        """fact_cid_of_cbor hashes stored bytes without decoding them."""
        assert facts.fact_cid_of_cbor(production_cbor) == PRODUCTION_FACT_CID

    def test_decode_stored_bytes(
        self, production_fact: PrimaryFact, production_cbor: bytes
    ) -> None:
        """Stored CBOR decodes to an equal fact that re-encodes to the same bytes."""
        decoded = facts.fact_from_cbor(production_cbor)
        assert decoded == production_fact
        assert facts.fact_cbor(decoded) == production_cbor

    def test_cid_is_the_merkle_leaf(self, production_fact: PrimaryFact) -> None:
        """base32-decoding the fact_cid gives back the 32-byte digest."""
        assert facts.parse_fact_cid(PRODUCTION_FACT_CID) == facts.fact_digest(production_fact)


class TestFactCid:
    def test_every_field_changes_the_cid(self, production_fact: PrimaryFact) -> None:
        """Changing any hashed field, including signer and signed_at, changes the fact_cid."""
        changes = {
            "band": "copdem30m.elevation_max",
            "tslot": 1,
            "value": 918,  # int, not float
            "unit": "m_msl",
            "confidence": 0.9,
            "privacy_class": "aggregate_only",
            "schema_cid": "other",
            "signer": bytes(32),
            "signed_at": "2026-05-28T19:54:33Z",
            "derivation": Derivation(fn_key="open_meteo_copdem90m@1"),
        }
        for name, value in changes.items():
            changed = msgspec.structs.replace(production_fact, **{name: value})
            assert facts.fact_cid(changed) != PRODUCTION_FACT_CID, name

    def test_optional_fields_are_omitted_not_null(self, production_fact: PrimaryFact) -> None:
        """An unset optional field is left out of the map, which shrinks the map length."""
        without_unit = msgspec.structs.replace(production_fact, unit=msgspec.UNSET)
        body = facts.fact_cbor(without_unit)
        assert body[0] == 0xAC  # map(12) instead of map(13)
        assert b"unit" not in body

    def test_parse_fact_cid_refuses_other_shapes(self) -> None:
        """Only 52 lowercase base32 characters with zero pad bits are a fact_cid."""
        for text in (
            "",
            PRODUCTION_FACT_CID[:26],
            PRODUCTION_FACT_CID.upper(),
            PRODUCTION_FACT_CID + "a",
            PRODUCTION_FACT_CID[:51] + "b",
        ):
            assert not facts.is_fact_cid(text)
            with pytest.raises(EmemError) as info:
                facts.parse_fact_cid(text)
            assert info.value.code == "invalid_argument"
        assert facts.is_fact_cid(PRODUCTION_FACT_CID)

    def test_served_via_is_hashed(self, production_fact: PrimaryFact) -> None:
        """served_via, when present, is the last field and part of the hash."""
        served = msgspec.structs.replace(
            production_fact, served_via=facts.ServedVia(tier="gpu", model="m", device="d")
        )
        assert facts.fact_cid(served) != PRODUCTION_FACT_CID
        assert facts.fact_cbor(served).endswith(
            cbor.encode("served_via") + cbor.encode({"tier": "gpu", "model": "m", "device": "d"})
        )


class TestValidation:
    def test_bad_cell(self, production_fact: PrimaryFact) -> None:
        """A fact's cell must be a geo cell64."""
        with pytest.raises(EmemError) as info:
            msgspec.structs.replace(production_fact, cell="dedi.zaf00.bafi.baba").__post_init__()
        assert info.value.code == "invalid_cell"

    def test_bad_signer_width(self) -> None:
        """signer must be 32 bytes."""
        with pytest.raises(EmemError):
            _absence(signer=bytes(31))

    def test_bad_signed_at(self) -> None:
        """signed_at must be YYYY-MM-DDTHH:MM:SSZ."""
        with pytest.raises(EmemError) as info:
            _absence(signed_at="2026-05-28T19:54:32+00:00")
        assert info.value.code == "invalid_signed_at_format"

    def test_bad_source_hash(self) -> None:
        """Source.hash must be 32 bytes when present."""
        with pytest.raises(EmemError):
            Source(scheme="local.file", id="x", hash=b"\x01")

    def test_non_canonical_cbor_refused(self, production_cbor: bytes) -> None:
        """Bytes with a foreign field are not accepted as a stored fact."""
        obj = cbor.decode(production_cbor)
        obj["extra"] = 1
        with pytest.raises(EmemError):
            facts.fact_from_cbor(cbor.encode(obj))


class TestDerivative:
    def test_shape_and_round_trip(self) -> None:
        """A derivative fact encodes kind first and tslot_window as a two-element array."""
        fact = DerivativeFact(
            cell="defi.zb400.bafi.baba",
            band="indices.ndvi_delta",
            tslot_window=(10, 12),
            op="delta",
            parents=["a" * 52, "b" * 52],
            value=-0.125,
            confidence=1.0,
            derivation=Derivation(fn_key="delta@1", args={"k": 2}),
            schema_cid="s",
            signer=bytes(range(32)),
            signed_at="2026-01-01T00:00:00Z",
        )
        body = facts.fact_cbor(fact)
        head = bytes.fromhex("ac") + cbor.encode("kind") + cbor.encode("derivative")
        assert body.startswith(head)
        assert cbor.encode("tslot_window") + bytes.fromhex("820a0c") in body
        assert facts.fact_from_cbor(body) == fact


class TestAbsence:
    def test_absence_body_and_reason(self) -> None:
        """An absence carries reason_cid of '<reason>: <detail>' and confidence 1.0 (f9 3c00)."""
        absence = _absence()
        assert absence.reason_text == "outside_coverage: west of the raster"
        assert absence.fact.reason_cid == (
            b32.encode(blake3.blake3(absence.reason_text.encode()).digest()[:16])
        )
        body = facts.fact_cbor(absence.fact)
        assert cbor.encode("confidence") + bytes.fromhex("f93c00") in body
        assert b"value" not in body  # NegativeFact has no value field on the wire

    def test_json_view_has_null_value_and_typed_reason(self) -> None:
        """The JSON view follows the OpenAPI: value null, absence_reason from the enum."""
        absence = _absence()
        view = facts.fact_json(absence.fact, reason_text=absence.reason_text)
        assert view["kind"] == "absence"
        assert view["value"] is None
        assert view["absence_reason"] == "outside_coverage"
        assert view["fact_cid"] == facts.fact_cid(absence.fact)

    def test_json_view_round_trips_to_same_cid(self) -> None:
        """Rebuilding an absence from its JSON view drops enrichments and restores the cid."""
        absence = _absence()
        view = facts.fact_json(absence.fact, reason_text=absence.reason_text)
        view = json.loads(json.dumps(view))
        assert facts.fact_from_builtins(view) == absence.fact

    def test_transient_reasons_refused(self) -> None:
        """upstream_error and upstream_timeout are skips, never signed absences."""
        for reason in ("upstream_error", "upstream_timeout"):
            with pytest.raises(EmemError):
                _absence(reason=reason)

    def test_unknown_reason_refused(self) -> None:
        """A reason outside the OpenAPI enum is refused."""
        with pytest.raises(EmemError):
            _absence(reason="ocean_or_no_land_dem")

    def test_reason_of_text(self) -> None:
        """absence_reason_of reads the enum value a reason text starts with, if any."""
        assert facts.absence_reason_of("gpu_unavailable: no device") == "gpu_unavailable"
        assert facts.absence_reason_of("ocean_or_no_land_dem: test") is None


class TestJsonView:
    def test_primary_view(self, production_fact: PrimaryFact) -> None:
        """The view keeps body fields, shows signer in base32 and adds cid and token."""
        view = facts.fact_json(production_fact)
        assert list(view)[:4] == ["kind", "cell", "band", "tslot"]
        assert view["confidence"] == 0.95
        assert view["signer"] == view["signer_pubkey_b32"]
        assert view["memory_token"] == f"emem:fact:{production_fact.cell}:{PRODUCTION_FACT_CID}"

    def test_primary_round_trip_through_json(self, production_fact: PrimaryFact) -> None:
        """JSON text of the view rebuilds the same fact (ints and floats keep their types)."""
        text = msgspec.json.encode(facts.fact_json(production_fact))
        rebuilt = facts.fact_from_builtins(msgspec.json.decode(text))
        assert facts.fact_cid(rebuilt) == PRODUCTION_FACT_CID

    def test_null_optionals_are_omitted(self, production_fact: PrimaryFact) -> None:
        """JSON null in an optional field means absent (as serde reads it); value keeps null."""
        view = facts.fact_json(production_fact)
        view["served_via"] = None
        view["sources"] = [{**view["sources"][0], "url": None, "hash": None}]
        assert facts.fact_cid(facts.fact_from_builtins(view)) == PRODUCTION_FACT_CID
        view["value"] = None
        assert facts.fact_from_builtins(view).value is None
        no_args = msgspec.structs.replace(production_fact, derivation=Derivation(fn_key="f@1"))
        view = facts.fact_json(no_args)
        view["derivation"]["args"] = None
        assert facts.fact_cid(facts.fact_from_builtins(view)) == facts.fact_cid(no_args)

    def test_signer_as_int_array_accepted(self, production_fact: PrimaryFact) -> None:
        """emem's serde form (signer as 32 ints) is accepted too."""
        view = facts.fact_json(production_fact)
        view["signer"] = list(production_fact.signer)
        assert facts.fact_cid(facts.fact_from_builtins(view)) == PRODUCTION_FACT_CID


def _absence(**overrides: object) -> facts.Absence:
    arguments: dict[str, object] = {
        "cell": "defi.zb400.bafi.baba",
        "band": "local.elevation",
        "tslot": 0,
        "reason": "outside_coverage",
        "detail": "west of the raster",
        "sources": [Source(scheme="local.file", id="dem/1", captured_at="2026-01-01T00:00:00Z")],
        "schema_cid": "memoree-schema",
        "signer": bytes(range(32)),
        "signed_at": "2026-06-01T00:00:00Z",
    }
    arguments.update(overrides)
    return facts.absence_fact(**arguments)  # type: ignore[arg-type]


def test_absence_fact_type() -> None:
    """absence_fact returns an AbsenceFact tagged 'absence'."""
    assert isinstance(_absence().fact, AbsenceFact)
