"""Attestation signatures: how a batch of facts (e.g. one signed absence) gets signed.

An attestation signs the batch Merkle root of its facts together with the
registry and schema cids. v1 (current) is a domain-separated stream;
v0 (verify-only) is the plain concatenation. ``scope`` is an index hint and
is never signed.

    v0: blake3(batch_root || registry_cid || schema_cid)
    v1: blake3(DOMAIN("attestation") || SEG(1, batch_root) || SEG(2, registry_cid)
               || SEG(3, schema_cid))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from memoree.factplane.emem import preimage, signing
from memoree.factplane.emem.batch_merkle import MerkleProof, build_tree
from memoree.factplane.emem.errors import BadSignature, InvalidArgument
from memoree.factplane.emem.facts import Fact, fact_cid, fact_digest
from memoree.factplane.emem.ids import blake3_digest

if TYPE_CHECKING:
    from nacl.signing import SigningKey

ATTESTATION_DOMAIN = "attestation"
CURRENT_VERSION = 1


class SignedBatch(NamedTuple):
    """A signed attestation over ``facts`` plus each fact's inclusion proof, keyed by fact_cid."""

    batch_root: bytes
    attester: bytes
    attester_key_epoch: int
    registry_cid: str
    schema_cid: str
    signature: bytes
    preimage_version: int
    proofs: dict[str, MerkleProof]


def attestation_digest(
    batch_root: bytes, registry_cid: str, schema_cid: str, version: int = CURRENT_VERSION
) -> bytes:
    """The 32-byte digest an attester signs."""
    if len(batch_root) != 32:
        raise InvalidArgument("batch_root must be 32 bytes")
    if version == 0:
        return blake3_digest(
            bytes(batch_root) + registry_cid.encode("utf-8") + schema_cid.encode("utf-8")
        )
    if version == 1:
        return blake3_digest(
            preimage.domain(ATTESTATION_DOMAIN)
            + preimage.segment(1, batch_root)
            + preimage.segment(2, registry_cid)
            + preimage.segment(3, schema_cid)
        )
    raise InvalidArgument(f"unknown attestation preimage_version {version!r}")


def attest_facts(
    facts: Sequence[Fact],
    *,
    key: SigningKey | bytes,
    registry_cid: str,
    schema_cid: str,
    key_epoch: int = 0,
) -> SignedBatch:
    """Build the v1 batch tree over ``facts`` and sign its root (duplicates are refused)."""
    if not facts:
        raise InvalidArgument("an attestation needs at least one fact")
    attester = signing.public_key(key)
    if any(fact.signer != attester for fact in facts):
        raise InvalidArgument("every fact's signer must be the attesting key")
    tree = build_tree([fact_digest(fact) for fact in facts], CURRENT_VERSION)
    digest = attestation_digest(tree.root, registry_cid, schema_cid, CURRENT_VERSION)
    by_leaf = dict(zip(tree.leaves, tree.proofs, strict=True))
    return SignedBatch(
        batch_root=tree.root,
        attester=attester,
        attester_key_epoch=key_epoch,
        registry_cid=registry_cid,
        schema_cid=schema_cid,
        signature=signing.sign_digest(key, digest),
        preimage_version=CURRENT_VERSION,
        proofs={fact_cid(fact): by_leaf[fact_digest(fact)] for fact in facts},
    )


def check_attestation(
    facts: Sequence[Fact],
    *,
    batch_root: bytes,
    attester: bytes,
    registry_cid: str,
    schema_cid: str,
    signature: bytes,
    preimage_version: int = 0,
) -> None:
    """Verify-on-write: recompute the root from ``facts`` and check the signature.

    The Merkle rule follows the preimage version (v0 tree for v0, v1 for v1).
    Raises BadSignature, or InvalidArgument for a mismatched root.
    """
    tree_version = 1 if preimage_version >= 1 else 0
    root = build_tree([fact_digest(fact) for fact in facts], tree_version).root
    if root != bytes(batch_root):
        raise InvalidArgument("batch_root does not match the attested facts")
    digest = attestation_digest(root, registry_cid, schema_cid, preimage_version)
    if not signing.verify_digest(attester, digest, signature):
        raise BadSignature("attestation signature does not verify")
