"""Tests for memoree.factplane.emem.receipts: preimage bytes, digests, signatures and verdicts (§3)."""

from __future__ import annotations

import blake3
import msgspec
import pytest

from memoree.factplane.emem import batch_merkle as bm
from memoree.factplane.emem import facts, receipts, signing
from memoree.factplane.emem.errors import EmemError
from memoree.factplane.emem.receipts import AsOf, FieldRef, Receipt, Scope

PRODUCTION_FACT_CID = "yqbolgeoycqkvj3zkxukb4bjw4odhpwvfzqo3fbgwf4spk45zala"
TEST_SOURCE_VERSIONS = {
    "bands_cid": "test-bands",
    "registry_cid": "test-registry",
    "schema_cid": "test-schema",
    "sources_cid": "test-sources",
}
V1_FROZEN_STREAM = (
    "656d656d2e707265696d6167652e763100070000007265636569707401030000005249440214000000"
    "323032362d30362d31325430303a30303a30305a03020000006161050200000062620602000000636307"
    "0b000000656d656d2e726563616c6c08020000000500000063656c6c410500000063656c6c4209010000"
    "0003000000666331"
)
FROZEN_PROOF = bm.MerkleProof(
    root=b"\xaa" * 32, leaf_index=5, path=(b"\x11" * 32, b"\x22" * 32), version=1
)


def doc_receipt(**overrides: object) -> Receipt:
    """The docs/protocol.md §7.2 example body."""
    fields: dict[str, object] = {
        "request_id": "01HZX0K9V3",
        "served_at": "2026-05-08T11:22:33Z",
        "primitive": "emem.recall",
        "cells": ("dedi.zaf00.bafi.baba", "dedi.zaf00.bafi.babe"),
        "fact_cids": ("bn7cabcdefghij1234567890ab",),
    }
    fields.update(overrides)
    return Receipt(**fields)  # type: ignore[arg-type]


def vector_receipt() -> Receipt:
    """The §3.8 end-to-end receipt, before signing."""
    proof = bm.build_tree([facts.parse_fact_cid(PRODUCTION_FACT_CID)], 1).proofs[0]
    return Receipt(
        request_id="01JTESTVECTOR0000000000000",
        served_at="2026-06-01T00:00:00Z",
        primitive="emem.recall",
        cells=("defi.zb493.xuqA.zcb5f",),
        fact_cids=(PRODUCTION_FACT_CID,),
        source_versions=TEST_SOURCE_VERSIONS,
        merkle_proof=proof,
    )


def sign_v1(receipt: Receipt, seed: bytes) -> Receipt:
    """Sign under the legacy v1 rule, as an older responder would have."""
    legacy = msgspec.structs.replace(
        receipt, preimage_version=1, responder=signing.public_key(seed)
    )
    digest = receipts.receipt_digest(legacy)
    return msgspec.structs.replace(legacy, signature=signing.sign_digest(seed, digest))


class TestFrozenUpstreamVectors:
    def test_v1_raw_stream(self) -> None:
        """The frozen v1 wire stream reproduces byte-for-byte."""
        stream = receipts.preimage_stream_v1(
            request_id="RID",
            served_at="2026-06-12T00:00:00Z",
            scope_hex="aa",
            edges_hex="bb",
            manifest_hex="cc",
            primitive="emem.recall",
            cells=["cellA", "cellB"],
            fact_cids=["fc1"],
        )
        assert stream.hex() == V1_FROZEN_STREAM

    def test_merkle_binding_absent(self) -> None:
        """With no proof, segment 0x0b binds the constant ABSENT digest."""
        assert receipts.merkle_binding_v2(None).hex() == (
            "734fa6cf403c2b204f3d86a43cc51873b4d6477326e9c712c5eb51bb303aeab2"
        )

    def test_merkle_binding_with_proof(self) -> None:
        """A proof binds root, leaf_index, path and version."""
        assert receipts.merkle_binding_v2(FROZEN_PROOF).hex() == (
            "361c2db6e05ce0f66fcee3d2c16d4ae86b348073ef9c0b45ce88300f5593558a"
        )

    def test_v2_digest(self) -> None:
        """The frozen v2 digest with no optional segments reproduces."""
        stream = receipts.preimage_stream_v2(
            merkle_hex=receipts.merkle_binding_v2(FROZEN_PROOF).hex(),
            request_id="RID",
            served_at="2026-06-12T00:00:00Z",
            primitive="emem.recall",
            cells=["cellA", "cellB"],
            fact_cids=["fc1"],
        )
        assert blake3.blake3(stream).hexdigest() == (
            "ce4ab6af99f35f02f5228db976c5ed31b66895474f9f18a7ddad241b6a0606be"
        )

    def test_protocol_doc_v1_digests(self) -> None:
        """The two docs/protocol.md §7.2 v1 digests reproduce."""
        assert receipts.receipt_digest(doc_receipt(), 1).hex() == (
            "eea12d3ae157cd40fb427ca0937e8f71a0af8faed3779ace0869764e872fefe3"
        )
        assert receipts.receipt_digest(doc_receipt(cells=()), 1).hex() == (
            "da65c4ee7514a370b8158f103a085461850cb5776761781a38d2aeaa278885c0"
        )


class TestDerivedVectors:
    def test_doc_body_under_v2(self) -> None:
        """The §7.2 body under v2 with the ABSENT marker has the derived digest."""
        assert receipts.receipt_digest(doc_receipt(), 2).hex() == (
            "d58a554529d17247e9b80345c8f88258a4374b09eb0bb45db97cce495980a5ad"
        )

    def test_v0_pipe_rule(self) -> None:
        """The v0 text preimage has trailing commas and is hashed as-is."""
        text = receipts.receipt_preimage(doc_receipt(), 0)
        assert text == (
            b"01HZX0K9V3|2026-05-08T11:22:33Z|emem.recall|"
            b"dedi.zaf00.bafi.baba,dedi.zaf00.bafi.babe,|bn7cabcdefghij1234567890ab,"
        )
        assert receipts.receipt_digest(doc_receipt()).hex() == (
            "69abc3c960b335cdbe6c512facf52b2fcd8e6b017e56979c7a1ac8fe8b644671"
        )

    def test_scope_digest(self) -> None:
        """Scope hashes the CBOR map of its set fields in user, agent, run, org order."""
        assert receipts.scope_digest_hex(Scope(org_id="acme-co", user_id="alice")) == (
            "237d4c851b78a4b1ae843c5afcd21c6a821c5baf04f2b3d98a066f3d22c170e3"
        )
        assert receipts.scope_digest_hex(Scope()) is None

    def test_as_of_digest(self) -> None:
        """as_of hashes {valid_time, transaction_time}."""
        bound = AsOf(valid_time=1_700_000_000, transaction_time="2026-05-29T00:00:00Z")
        assert receipts.as_of_digest_hex(bound) == (
            "e216e350f72cce38cae95cb08e0f91a404a8f495ef5a9f7e78a41074fcf9ddf9"
        )

    def test_as_of_spellings_share_a_digest(self) -> None:
        """Equivalent UTC spellings of transaction_time give one digest; other offsets do not."""
        spellings = [
            "2026-05-29T00:00:00Z",
            "2026-05-29T00:00:00+00:00",
            "2026-05-29T00:00:00.250-00:00",
            "2026-05-29 00:00:00Z",
        ]
        digests = {receipts.as_of_digest_hex(AsOf(transaction_time=s)) for s in spellings}
        assert len(digests) == 1
        assert (
            receipts.as_of_digest_hex(AsOf(transaction_time="2026-05-29T05:30:00+05:30"))
            not in digests
        )

    def test_manifest_digest(self) -> None:
        """source_versions hash as a bytewise-sorted map whatever their input order."""
        shuffled = dict(reversed(list(TEST_SOURCE_VERSIONS.items())))
        assert receipts.manifest_digest_hex(shuffled) == (
            "daa2f815af0e515774f191fae9dd6f4b52a17bb8e04b441f9928067e30da5a6e"
        )

    def test_edges_digest(self) -> None:
        """Edge cids are sorted before hashing."""
        assert receipts.edges_digest_hex(["ecid-2", "ecid-1"]) == (
            "b94af13abfe69331f353c54b56be1f29466a0fe9c4e9f4e68bfbf395501c64a0"
        )


class TestEndToEndSignature:
    def test_test_seed_public_key(self, test_seed: bytes) -> None:
        """The 0x00..0x1f seed has the published public key."""
        assert signing.public_key(test_seed).hex() == (
            "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"
        )
        assert signing.public_key_b32(test_seed) == (
            "aoqqpp7tzyil4hlq3umoos6atft6jvrqtosq2xy53sdgiesvgg4a"
        )

    def test_merkle_hex_digest_and_signature(self, test_seed: bytes) -> None:
        """The signed v2 receipt reproduces merkle_hex, digest and signature."""
        signed = receipts.sign_receipt(vector_receipt(), test_seed)
        assert signed.preimage_version == 2
        assert receipts.merkle_binding_v2(signed.merkle_proof).hex() == (
            "87b8fb04f955852b7df3d2c411b3e01469b8ad29f731b702e6d5b5c1df75eea2"
        )
        assert receipts.receipt_digest(signed).hex() == (
            "777981ec86ed945b028dca365a98f19aa459bc3b5ff99ab6fe5b8386df00aeaf"
        )
        assert signed.signature.hex() == (
            "771e17add414a278ebf1d68ab2bb2acf135cbea9c7d84352298016e332f485ac"
            "64ea488058005f0013ebf9ef9a830a575fbe761c840f507a47c3768a2967a40f"
        )

    def test_absent_and_v1_digests(self, test_seed: bytes) -> None:
        """The same receipt with the proof removed, and under v1, has the derived digests."""
        signed = receipts.sign_receipt(vector_receipt(), test_seed)
        stripped = msgspec.structs.replace(signed, merkle_proof=None)
        assert receipts.receipt_digest(stripped).hex() == (
            "a5200fd2c91323d6af5e9e4d7189de05444f4db5d85196e364a0fbc88886d83c"
        )
        assert receipts.receipt_digest(signed, 1).hex() == (
            "5afa8c277613dd7c84f1fec1d7060da57e9c7b400f079df749eac78a15521e2a"
        )

    def test_epoch_is_carried_not_signed(self, test_seed: bytes) -> None:
        """The key epoch travels on the receipt but does not change the signature."""
        at_zero = receipts.sign_receipt(vector_receipt(), test_seed)
        at_three = receipts.sign_receipt(vector_receipt(), test_seed, key_epoch=3)
        assert at_three.responder_key_epoch == 3
        assert at_three.signature == at_zero.signature

    def test_nacl_signing_key_accepted(self, test_seed: bytes) -> None:
        """A nacl SigningKey and its seed sign identically."""
        from nacl.signing import SigningKey

        by_key = receipts.sign_receipt(vector_receipt(), SigningKey(test_seed))
        assert by_key.signature == receipts.sign_receipt(vector_receipt(), test_seed).signature


class TestVerify:
    def test_untouched_receipt(self, test_seed: bytes) -> None:
        """An untouched v2 receipt is valid with a valid proof."""
        verdict = receipts.verify_receipt(receipts.sign_receipt(vector_receipt(), test_seed))
        assert verdict.valid and verdict.signature_valid and verdict.merkle_proof_valid
        assert verdict.reason is None and verdict.failed_check is None

    def test_no_proof_means_null_proof_validity(self, test_seed: bytes) -> None:
        """A receipt signed with the ABSENT marker is valid with merkle_proof_valid None."""
        signed = receipts.sign_receipt(doc_receipt(), test_seed)
        verdict = receipts.verify_receipt(signed)
        assert verdict.valid and verdict.merkle_proof_valid is None

    def test_stripped_proof_detected(self, test_seed: bytes) -> None:
        """Removing a v2 proof breaks the signature (the ABSENT marker is signed)."""
        signed = receipts.sign_receipt(vector_receipt(), test_seed)
        verdict = receipts.verify_receipt(msgspec.structs.replace(signed, merkle_proof=None))
        assert not verdict.valid and not verdict.signature_valid
        assert verdict.reason == "signature_invalid" and verdict.failed_check == "signature"

    def test_downgrade_to_v1_does_not_verify(self, test_seed: bytes) -> None:
        """A v2 receipt relabelled as v1 (or v0) fails: the digests differ."""
        signed = receipts.sign_receipt(vector_receipt(), test_seed)
        for version in (0, 1):
            verdict = receipts.verify_receipt(
                msgspec.structs.replace(signed, preimage_version=version)
            )
            assert not verdict.signature_valid

    def test_tampered_field(self, test_seed: bytes) -> None:
        """Changing any signed field breaks the signature."""
        signed = receipts.sign_receipt(vector_receipt(), test_seed)
        for change in (
            {"cells": ("defi.zb400.bafi.baba",)},
            {"request_id": "X"},
            {"served_at": "2026-06-01T00:00:01Z"},
            {"primitive": "emem.verify"},
            {"scope": Scope(user_id="u")},
            {"edge_cids": ("e",)},
            {"as_of": AsOf(valid_time=1)},
            {"field": FieldRef(aoi_cid="a", derivation_cid="d")},
            {"source_versions": {}},
        ):
            assert not receipts.verify_receipt(msgspec.structs.replace(signed, **change)).valid

    def test_unsigned_fields_do_not_matter(self, test_seed: bytes) -> None:
        """intent, cost, schema_cid and registry_cid are not in the preimage."""
        signed = receipts.sign_receipt(vector_receipt(), test_seed)
        changed = msgspec.structs.replace(
            signed,
            intent="why",
            cost={"credits": 0, "source_freshness_s": None},
            schema_cid="s",
            registry_cid="r",
        )
        assert receipts.verify_receipt(changed).valid

    def test_wrong_key(self, test_seed: bytes) -> None:
        """Verifying under another key fails on the signature check."""
        signed = receipts.sign_receipt(vector_receipt(), test_seed)
        other = signing.public_key_b32(bytes(32))
        verdict = receipts.verify_receipt(signed, public_key=other)
        assert verdict.failed_check == "signature" and verdict.signer_pubkey_b32 == other

    def test_malformed_key(self, test_seed: bytes) -> None:
        """A malformed public key fails the public_key check."""
        signed = receipts.sign_receipt(vector_receipt(), test_seed)
        verdict = receipts.verify_receipt(signed, public_key="not-base32")
        assert verdict.failed_check == "public_key" and not verdict.valid

    def test_unknown_version(self, test_seed: bytes) -> None:
        """An unknown preimage_version fails the preimage_version check."""
        signed = receipts.sign_receipt(vector_receipt(), test_seed)
        verdict = receipts.verify_receipt(msgspec.structs.replace(signed, preimage_version=3))
        assert verdict.failed_check == "preimage_version"

    def test_v1_proof_swap_detected_by_proof_check(self, test_seed: bytes) -> None:
        """Under v1 the proof is unsigned: a bad proof keeps the signature but fails the receipt."""
        signed = sign_v1(vector_receipt(), test_seed)
        swapped = msgspec.structs.replace(signed, merkle_proof=FROZEN_PROOF)
        verdict = receipts.verify_receipt(swapped)
        assert verdict.signature_valid and verdict.merkle_proof_valid is False
        assert not verdict.valid and verdict.reason == "merkle_proof_invalid"

    def test_v1_stripped_proof_goes_unnoticed(self, test_seed: bytes) -> None:
        """A v1 receipt with its proof removed still verifies (why v2 exists)."""
        signed = sign_v1(vector_receipt(), test_seed)
        verdict = receipts.verify_receipt(msgspec.structs.replace(signed, merkle_proof=None))
        assert verdict.valid and verdict.merkle_proof_valid is None

    def test_v0_receipt_verifies(self, test_seed: bytes) -> None:
        """A legacy v0 (pipe rule) receipt verifies under its own rule."""
        legacy = msgspec.structs.replace(doc_receipt(), responder=signing.public_key(test_seed))
        signed = msgspec.structs.replace(
            legacy, signature=signing.sign_digest(test_seed, receipts.receipt_digest(legacy))
        )
        assert receipts.verify_receipt(signed).valid


class TestReshapeDiagnosis:
    def test_stripped_proof_is_reshaped(self, test_seed: bytes) -> None:
        """With the recorded proof, a stripped v2 proof is named receipt_reshaped_after_signing."""
        signed = receipts.sign_receipt(vector_receipt(), test_seed)
        verdict = receipts.verify_receipt(
            msgspec.structs.replace(signed, merkle_proof=None), recorded_proof=signed.merkle_proof
        )
        assert not verdict.valid
        assert verdict.reason == "receipt_reshaped_after_signing"
        assert "merkle_proof was removed" in verdict.failure_detail

    def test_dropped_version_is_reshaped(self, test_seed: bytes) -> None:
        """A dropped preimage_version is diagnosed, and the untouched proof still checks."""
        signed = receipts.sign_receipt(vector_receipt(), test_seed)
        verdict = receipts.verify_receipt(
            msgspec.structs.replace(signed, preimage_version=0), recorded_proof=signed.merkle_proof
        )
        assert verdict.reason == "receipt_reshaped_after_signing"
        assert verdict.merkle_proof_valid is True and not verdict.valid

    def test_only_untouched_body_is_rescued(self, test_seed: bytes) -> None:
        """Restoring the proof does not rescue a body that was also changed."""
        signed = receipts.sign_receipt(vector_receipt(), test_seed)
        reshaped = msgspec.structs.replace(signed, merkle_proof=None, request_id="other")
        verdict = receipts.verify_receipt(reshaped, recorded_proof=signed.merkle_proof)
        assert verdict.reason == "signature_invalid"


class TestJson:
    def test_openapi_shape(self, test_seed: bytes) -> None:
        """Keys and signatures are base32 strings; proofs are int arrays; version present."""
        view = receipts.receipt_to_json(receipts.sign_receipt(vector_receipt(), test_seed))
        expected_key = signing.public_key_b32(test_seed)
        assert view["responder"] == view["responder_pubkey_b32"] == expected_key
        assert isinstance(view["signature"], str) and len(view["signature"]) == 103
        assert view["preimage_version"] == 2
        assert view["merkle_proof"]["version"] == 1
        assert "scope" not in view and "as_of" not in view and "edge_cids" not in view

    def test_round_trip_verifies(self, test_seed: bytes) -> None:
        """A receipt survives JSON text and still verifies."""
        signed = receipts.sign_receipt(
            msgspec.structs.replace(
                vector_receipt(),
                scope=Scope(user_id="alice"),
                edge_cids=("e1",),
                as_of=AsOf(transaction_time="2026-05-29T00:00:00+00:00"),
            ),
            test_seed,
        )
        text = msgspec.json.encode(receipts.receipt_to_json(signed))
        parsed = receipts.receipt_from_json(msgspec.json.decode(text))
        assert parsed == signed
        assert parsed.as_of.transaction_time == "2026-05-29T00:00:00+00:00"  # raw string kept
        assert receipts.verify_receipt(parsed).valid

    def test_serde_int_array_form(self, test_seed: bytes) -> None:
        """emem's serde form (responder and signature as int arrays) parses too."""
        signed = receipts.sign_receipt(vector_receipt(), test_seed)
        view = receipts.receipt_to_json(signed)
        view["responder"] = list(signed.responder)
        view["signature"] = list(signed.signature)
        assert receipts.verify_receipt(receipts.receipt_from_json(view)).valid

    def test_missing_version_means_v0(self, test_seed: bytes) -> None:
        """A receipt without preimage_version is read as v0."""
        view = receipts.receipt_to_json(receipts.sign_receipt(vector_receipt(), test_seed))
        del view["preimage_version"]
        assert receipts.receipt_from_json(view).preimage_version == 0

    def test_malformed(self) -> None:
        """Non-objects and bad field types are refused with typed errors."""
        with pytest.raises(EmemError):
            receipts.receipt_from_json([])
        with pytest.raises(EmemError) as info:
            receipts.receipt_from_json(
                {"request_id": "r", "served_at": "s", "primitive": "p", "cells": "not-a-list"}
            )
        assert info.value.code == "invalid_argument"
        with pytest.raises(EmemError) as info:
            receipts.receipt_from_json(
                {"request_id": "r", "served_at": "s", "primitive": "p", "signature": "NOT BASE32"}
            )
        assert info.value.code == "bad_signature"
