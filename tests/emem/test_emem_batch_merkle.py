"""Tests for memoree.factplane.emem.batch_merkle: emem's v0/v1 attestation batch tree (§4)."""

from __future__ import annotations

import msgspec
import pytest

from memoree.factplane.emem import batch_merkle as bm
from memoree.factplane.emem.errors import EmemError


def mk(i: int) -> bytes:
    """The §4.5 leaf: 32 bytes, first byte i, the rest zero."""
    return bytes([i]) + bytes(31)


ROOTS = {
    1: (
        "4d006976636a8696d909a630a4081aad4d7c50f81afdee04020bf05086ab6a55",
        "232b17a92a13d46fdeeba07519406dcdad6d67b7399159364b5e26af0ab95bcf",
    ),
    2: (
        "0daf2d45bfcaf610ea04e91f900b330a6eed591c64829b6991aba5f9fba8c4b0",
        "11fc5b536193ae300d26893a731d6206326b97a324857a7e0959840e0bf7fe96",
    ),
    3: (
        "35618db82dd0910761cb09f8bf6bf050d912041193fea339537ead9b83f1b4e5",
        "a43290bf78d69787843aa2c5f6204e8079293c02123ee389ac3cc30e11cac3ac",
    ),
    4: (
        "a49591af32ecaf5e2445024818b3b8822f9870e753c19cc5caf79adf0dbfc712",
        "4ef2df10229764d757a518b2219d4c6ba05f06061ff2b44dc91f937b5bcefa10",
    ),
}
PRODUCTION_LEAF = bytes.fromhex("c402e5988ec0a0aaa77955e8a0f029b71c33bed52e60ed9426b17927ab9dc816")


class TestRoots:
    @pytest.mark.parametrize("n", sorted(ROOTS))
    def test_vectors(self, n: int) -> None:
        """v0 and v1 roots over mk(0..n-1) match §4.5."""
        leaves = [mk(i) for i in range(n)]
        assert bm.merkle_root(leaves, 0).hex() == ROOTS[n][0]
        assert bm.merkle_root(leaves, 1).hex() == ROOTS[n][1]

    def test_production_fact_roots(self) -> None:
        """The single §2.6 fact has the published v0 and v1 roots."""
        assert bm.merkle_root([PRODUCTION_LEAF], 0).hex() == (
            "cb7fff444b8b6d119c14b60b32930b9612ae9bbb7a61864bb2e6074d326ab2ea"
        )
        assert bm.merkle_root([PRODUCTION_LEAF], 1).hex() == (
            "aa9bb0ec4a7ce8684573a09eeb6edf8e825ef3ef94be3ecd8f082272c078d711"
        )

    def test_empty_root_is_zero(self) -> None:
        """An empty batch has the all-zero root."""
        assert bm.merkle_root([]) == bytes(32)

    def test_input_order_does_not_matter(self) -> None:
        """Leaves are sorted bytewise before hashing."""
        leaves = [mk(i) for i in range(5)]
        assert bm.merkle_root(leaves) == bm.merkle_root(list(reversed(leaves)))

    def test_v1_refuses_duplicates(self) -> None:
        """v1 refuses duplicate leaves; v0 allows them and shows why (odd self-pair)."""
        with pytest.raises(EmemError):
            bm.merkle_root([mk(1), mk(2), mk(2)], 1)
        abc = [mk(0), mk(1), mk(2)]
        assert bm.merkle_root(abc, 0) == bm.merkle_root([*abc, mk(2)], 0)

    def test_odd_layer_pairs_with_itself(self) -> None:
        """Three leaves: the third is paired with itself, not promoted (not RFC 6962)."""
        p = [bm.promote_leaf(mk(i), 1) for i in range(3)]
        expected = bm.node_hash(bm.node_hash(p[0], p[1], 1), bm.node_hash(p[2], p[2], 1), 1)
        assert bm.merkle_root([mk(i) for i in range(3)], 1) == expected

    def test_bad_leaf_width(self) -> None:
        """Leaves must be 32 bytes; versions must be 0 or 1."""
        with pytest.raises(EmemError):
            bm.merkle_root([b"short"])
        with pytest.raises(EmemError):
            bm.merkle_root([mk(0)], 2)


class TestProofs:
    @pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 8, 9, 17])
    @pytest.mark.parametrize("version", [0, 1])
    def test_every_proof_verifies(self, n: int, version: int) -> None:
        """Every leaf's proof walks to the same root that merkle_root computes."""
        tree = bm.build_tree([mk(i) for i in range(n)], version)
        assert tree.root == bm.merkle_root([mk(i) for i in range(n)], version)
        for index, (leaf, proof) in enumerate(zip(tree.leaves, tree.proofs, strict=True)):
            assert proof.leaf_index == index
            assert proof.root == tree.root
            assert bm.verify_proof(leaf, proof)

    def test_single_leaf_has_empty_path(self) -> None:
        """A single-fact batch has path [] and root promote(leaf)."""
        tree = bm.build_tree([PRODUCTION_LEAF], 1)
        assert tree.proofs[0].path == ()
        assert tree.root == bm.promote_leaf(PRODUCTION_LEAF, 1)

    def test_odd_tail_sibling_is_itself(self) -> None:
        """The unpaired last node records itself as its sibling."""
        tree = bm.build_tree([mk(i) for i in range(3)], 1)
        assert tree.proofs[2].path[0] == bm.promote_leaf(mk(2), 1)

    def test_tampering_fails(self) -> None:
        """A wrong leaf, sibling, index, root or version fails verification."""
        tree = bm.build_tree([mk(i) for i in range(4)], 1)
        proof = tree.proofs[1]
        assert not bm.verify_proof(mk(9), proof)
        wrong_sibling = msgspec.structs.replace(proof, path=(mk(7), proof.path[1]))
        assert not bm.verify_proof(mk(1), wrong_sibling)
        assert not bm.verify_proof(mk(1), msgspec.structs.replace(proof, leaf_index=0))
        assert not bm.verify_proof(mk(1), msgspec.structs.replace(proof, root=bytes(32)))
        assert not bm.verify_proof(mk(1), msgspec.structs.replace(proof, version=0))

    def test_index_beyond_path_refused(self) -> None:
        """A leaf_index with bits above the path height is refused."""
        tree = bm.build_tree([mk(i) for i in range(2)], 1)
        with pytest.raises(EmemError) as info:
            bm.check_proof(mk(0), msgspec.structs.replace(tree.proofs[0], leaf_index=4))
        assert info.value.code == "bad_merkle_proof"

    def test_duplicate_pair_refused_in_v1(self) -> None:
        """A v1 proof whose right child equals its left sibling can only prove a duplicate."""
        promoted = bm.promote_leaf(mk(5), 1)
        forged = bm.MerkleProof(
            leaf_index=1, path=(promoted,), root=bm.node_hash(promoted, promoted, 1), version=1
        )
        assert not bm.verify_proof(mk(5), forged)
        assert bm.verify_proof(mk(5), msgspec.structs.replace(forged, leaf_index=0))

    def test_json_round_trip(self) -> None:
        """Proofs travel as int arrays; version is omitted when 0 and defaults to 0."""
        tree = bm.build_tree([mk(i) for i in range(3)], 1)
        view = bm.proof_to_json(tree.proofs[2])
        assert view["version"] == 1 and isinstance(view["root"][0], int)
        assert bm.proof_from_json(view) == tree.proofs[2]
        legacy = bm.build_tree([mk(i) for i in range(3)], 0).proofs[0]
        assert "version" not in bm.proof_to_json(legacy)
        assert bm.proof_from_json(bm.proof_to_json(legacy)) == legacy

    def test_malformed_json_refused(self) -> None:
        """Missing keys or non-byte arrays are a bad_merkle_proof."""
        for obj in (
            {},
            {"leaf_index": 0, "path": [], "root": [1] * 31},
            {"leaf_index": 0, "path": [[256] * 32], "root": [0] * 32},
        ):
            with pytest.raises(EmemError) as info:
                bm.proof_from_json(obj)
            assert info.value.code == "bad_merkle_proof"
