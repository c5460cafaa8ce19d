"""Tests for memoree.factplane.emem.attestation: signing a batch of facts, such as one absence."""

from __future__ import annotations

import blake3
import pytest

from memoree.factplane.emem import batch_merkle as bm
from memoree.factplane.emem import facts, preimage, signing
from memoree.factplane.emem.attestation import attest_facts, attestation_digest, check_attestation
from memoree.factplane.emem.errors import EmemError


def absence(seed: bytes, band: str = "local.elevation") -> facts.AbsenceFact:
    return facts.absence_fact(
        cell="defi.zb400.bafi.baba",
        band=band,
        tslot=0,
        reason="outside_coverage",
        detail="west of the raster",
        sources=[facts.Source(scheme="local.file", id="dem/1", captured_at="2026-01-01T00:00:00Z")],
        schema_cid="memoree-schema",
        signer=signing.public_key(seed),
        signed_at="2026-06-01T00:00:00Z",
    ).fact


class TestDigest:
    def test_v1_layout(self) -> None:
        """v1 signs blake3 of DOMAIN('attestation') and three segments."""
        root = bytes(range(32))
        stream = (
            preimage.domain("attestation")
            + preimage.segment(1, root)
            + preimage.segment(2, "reg")
            + preimage.segment(3, "sch")
        )
        assert attestation_digest(root, "reg", "sch") == blake3.blake3(stream).digest()

    def test_v0_layout(self) -> None:
        """v0 signs blake3 of root, registry_cid and schema_cid concatenated."""
        root = bytes(range(32))
        assert attestation_digest(root, "reg", "sch", 0) == blake3.blake3(root + b"regsch").digest()

    def test_versions_differ(self) -> None:
        """The two rules never share a digest, and unknown versions are refused."""
        root = bytes(32)
        assert attestation_digest(root, "r", "s", 0) != attestation_digest(root, "r", "s", 1)
        with pytest.raises(EmemError):
            attestation_digest(root, "r", "s", 2)


class TestAttest:
    def test_single_absence(self, test_seed: bytes) -> None:
        """A single-fact attestation has root promote(leaf), an empty path, and verifies."""
        fact = absence(test_seed)
        batch = attest_facts([fact], key=test_seed, registry_cid="reg", schema_cid="memoree-schema")
        leaf = facts.fact_digest(fact)
        assert batch.batch_root == bm.promote_leaf(leaf, 1)
        proof = batch.proofs[facts.fact_cid(fact)]
        assert proof.path == () and bm.verify_proof(leaf, proof)
        check_attestation(
            [fact],
            batch_root=batch.batch_root,
            attester=batch.attester,
            registry_cid="reg",
            schema_cid="memoree-schema",
            signature=batch.signature,
            preimage_version=1,
        )

    def test_tampering_detected(self, test_seed: bytes) -> None:
        """A changed fact set or registry fails verify-on-write."""
        fact = absence(test_seed)
        batch = attest_facts([fact], key=test_seed, registry_cid="reg", schema_cid="s")
        common = {
            "batch_root": batch.batch_root,
            "attester": batch.attester,
            "schema_cid": "s",
            "signature": batch.signature,
            "preimage_version": 1,
        }
        with pytest.raises(EmemError):
            check_attestation([absence(test_seed, "other.band")], registry_cid="reg", **common)
        with pytest.raises(EmemError) as info:
            check_attestation([fact], registry_cid="other", **common)
        assert info.value.code == "bad_signature"

    def test_refuses_foreign_signer_and_duplicates(self, test_seed: bytes) -> None:
        """Facts must carry the attesting key, and a v1 batch has no duplicates."""
        fact = absence(test_seed)
        with pytest.raises(EmemError):
            attest_facts([fact], key=bytes(32), registry_cid="r", schema_cid="s")
        with pytest.raises(EmemError):
            attest_facts([fact, fact], key=test_seed, registry_cid="r", schema_cid="s")
