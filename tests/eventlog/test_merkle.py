"""Tests for memoree.eventlog.merkle: published RFC 6962 vectors, an independent naive model,
tampered proofs, malformed input, and the incremental compact tree."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterator
from typing import Any

import blake3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoree.eventlog.merkle import (
    BLAKE3,
    SHA256,
    CompactTree,
    MerkleError,
    MerkleHasher,
    ProofError,
    TreeRangeError,
    consistency_proof,
    inclusion_proof,
    root_from_inclusion_proof,
    root_hash,
    verify_consistency,
    verify_inclusion,
)

# --------------------------------------------------------------------------------------------
# Published RFC 6962 test data (SHA-256).
#
# Copied from github.com/transparency-dev/merkle, Copyright 2017-2019 Google LLC, licensed under
# the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0):
#   - testonly/constants.go: LeafInputs, NodeHashes, RootHashes, CompactTrees
#   - proof/verify_test.go: inclusionProofs, consistencyProofs, sha256SomeHash
# The same vectors back the JSON files in that repository's testdata/inclusion/ and
# testdata/consistency/. Only the data is copied; the Go code is not.
# --------------------------------------------------------------------------------------------

H = bytes.fromhex

TD_LEAF_INPUTS = [
    H(""),
    H("00"),
    H("10"),
    H("2021"),
    H("3031"),
    H("40414243"),
    H("5051525354555657"),
    H("606162636465666768696a6b6c6d6e6f"),
]

# NodeHashes()[level][index]: every complete subtree of the 8-leaf tree.
TD_NODE_HASHES = [
    [
        H("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
        H("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
        H("0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7"),
        H("07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7"),
        H("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        H("4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658"),
        H("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
        H("46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1"),
    ],
    [
        H("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
        H("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
        H("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
        H("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
    ],
    [
        H("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        H("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
    ],
    [
        H("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"),
    ],
]

# RootHashes()[size] for sizes 0..8.
TD_ROOTS = [
    H("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    H("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
    H("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
    H("aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"),
    H("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
    H("4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4"),
    H("76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef"),
    H("ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c"),
    H("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"),
]

# CompactTrees()[size]: the peaks, as (level, index) into TD_NODE_HASHES.
TD_COMPACT_TREES = [
    [],
    [(0, 0)],
    [(1, 0)],
    [(1, 0), (0, 2)],
    [(2, 0)],
    [(2, 0), (0, 4)],
    [(2, 0), (1, 2)],
    [(2, 0), (1, 2), (0, 6)],
    [(3, 0)],
]

# inclusionProofs as (leaf index, tree size, proof); the Go table numbers leaves from 1, these
# indices are 0-based.
TD_INCLUSION_PROOFS = [
    (0, 1, []),
    (
        0,
        8,
        [
            H("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            H("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            H("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
        ],
    ),
    (
        5,
        8,
        [
            H("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
            H("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            H("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
    (
        2,
        3,
        [
            H("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
        ],
    ),
    (
        1,
        5,
        [
            H("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
            H("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            H("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        ],
    ),
]

# consistencyProofs as (old size, new size, proof).
TD_CONSISTENCY_PROOFS = [
    (1, 1, []),
    (
        1,
        8,
        [
            H("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            H("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            H("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
        ],
    ),
    (
        6,
        8,
        [
            H("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            H("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            H("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
    (
        2,
        5,
        [
            H("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            H("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        ],
    ),
    (
        6,
        7,
        [
            H("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            H("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
            H("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
]

TD_SOME_HASH = H("abacaba000000000000000000000000000000000000000000060061e00123456")
TD_EMPTY_ROOT = TD_ROOTS[0]

TD_LEAF_HASHES = TD_NODE_HASHES[0]

# --------------------------------------------------------------------------------------------
# An independent model, written straight from the recursive definitions in RFC 9162 §2.1.1
# (MTH), §2.1.3.1 (PATH) and §2.1.4.1 (PROOF / SUBPROOF), over raw leaf data. It shares no code
# with the module: it calls the hash functions directly and finds k by doubling.
# --------------------------------------------------------------------------------------------

Digest = Callable[[bytes], bytes]


def naive_sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def naive_blake3(data: bytes) -> bytes:
    return blake3.blake3(data).digest()


def naive_k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def naive_mth(h: Digest, d: list[bytes]) -> bytes:
    n = len(d)
    if n == 0:
        return h(b"")
    if n == 1:
        return h(b"\x00" + d[0])
    k = naive_k(n)
    return h(b"\x01" + naive_mth(h, d[:k]) + naive_mth(h, d[k:]))


def naive_path(h: Digest, m: int, d: list[bytes]) -> list[bytes]:
    n = len(d)
    if n == 1:
        return []
    k = naive_k(n)
    if m < k:
        return naive_path(h, m, d[:k]) + [naive_mth(h, d[k:])]
    return naive_path(h, m - k, d[k:]) + [naive_mth(h, d[:k])]


def naive_proof(h: Digest, m: int, d: list[bytes]) -> list[bytes]:
    return naive_subproof(h, m, d, True)


def naive_subproof(h: Digest, m: int, d: list[bytes], b: bool) -> list[bytes]:
    n = len(d)
    if m == n:
        return [] if b else [naive_mth(h, d)]
    k = naive_k(n)
    if m <= k:
        return naive_subproof(h, m, d[:k], b) + [naive_mth(h, d[k:])]
    return naive_subproof(h, m - k, d[k:], False) + [naive_mth(h, d[:k])]


MODEL_SIZE = 70
MODEL_DATA = [b""] + [b"event %d" % i * (1 + i % 3) for i in range(1, MODEL_SIZE)]

HASHERS = [
    pytest.param(SHA256, naive_sha256, id="sha256"),
    pytest.param(BLAKE3, naive_blake3, id="blake3"),
]
MODULE_HASHERS = [pytest.param(SHA256, id="sha256"), pytest.param(BLAKE3, id="blake3")]


def model_leaf_hashes(h: Digest) -> list[bytes]:
    return [h(b"\x00" + d) for d in MODEL_DATA]


# --------------------------------------------------------------------------------------------
# Tamperings: each yields a description and the altered arguments.
# --------------------------------------------------------------------------------------------


def flip_bit(value: bytes, mask: int) -> bytes:
    return bytes([value[0] ^ mask]) + value[1:]


def inclusion_tamperings(
    index: int, size: int, leaf: bytes, proof: list[bytes], root: bytes
) -> Iterator[tuple[str, tuple[int, int, bytes, list[bytes], bytes]]]:
    for other in range(-1, size + 2):
        if other != index:
            yield f"index {other}", (other, size, leaf, proof, root)
    yield "size * 2", (index, size * 2, leaf, proof, root)
    yield "size // 2", (index, size // 2, leaf, proof, root)
    yield "short leaf", (index, size, b"WrongLeaf", proof, root)
    yield "other leaf", (index, size, flip_bit(leaf, 1), proof, root)
    yield "empty root", (index, size, leaf, proof, TD_EMPTY_ROOT)
    yield "random root", (index, size, leaf, proof, TD_SOME_HASH)
    yield "short root", (index, size, leaf, proof, root[:-1])
    yield "trailing garbage", (index, size, leaf, [*proof, b""], root)
    yield "trailing root", (index, size, leaf, [*proof, root], root)
    yield "preceding garbage", (index, size, leaf, [b"", *proof], root)
    yield "preceding root", (index, size, leaf, [root, *proof], root)
    for i in range(len(proof)):
        yield f"proof[{i}] bit flipped", (index, size, leaf, _replace(proof, i, 8), root)
    if proof:
        yield "removed component", (index, size, leaf, proof[:-1], root)
        yield "inserted component", (index, size, leaf, [proof[0], TD_SOME_HASH, *proof[1:]], root)


def consistency_tamperings(
    old: int, new: int, proof: list[bytes], old_root: bytes, new_root: bytes
) -> Iterator[tuple[str, tuple[int, int, list[bytes], bytes, bytes]]]:
    for other in range(0, new + 2):
        if other != old:
            yield f"old size {other}", (other, new, proof, old_root, new_root)
    yield "new size * 2", (old, new * 2, proof, old_root, new_root)
    yield "new size // 2", (old, new // 2, proof, old_root, new_root)
    yield "wrong old root", (old, new, proof, TD_SOME_HASH, new_root)
    yield "wrong new root", (old, new, proof, old_root, TD_SOME_HASH)
    yield "short old root", (old, new, proof, b"WrongRoot", new_root)
    yield "swapped roots", (old, new, proof, new_root, old_root)
    yield "empty proof", (old, new, [], old_root, new_root)
    yield "trailing garbage", (old, new, [*proof, b""], old_root, new_root)
    yield "trailing old root", (old, new, [*proof, old_root], old_root, new_root)
    yield "trailing new root", (old, new, [*proof, new_root], old_root, new_root)
    yield "preceding garbage", (old, new, [b"", *proof], old_root, new_root)
    yield "preceding old root", (old, new, [old_root, *proof], old_root, new_root)
    yield "preceding new root", (old, new, [new_root, *proof], old_root, new_root)
    yield "preceding proof[0]", (old, new, [proof[0], *proof], old_root, new_root)
    yield "truncated", (old, new, proof[:-1], old_root, new_root)
    for i in range(len(proof)):
        yield f"proof[{i}] bit flipped", (old, new, _replace(proof, i, 16), old_root, new_root)


def _replace(proof: list[bytes], i: int, mask: int) -> list[bytes]:
    return [flip_bit(p, mask) if j == i else p for j, p in enumerate(proof)]


# --------------------------------------------------------------------------------------------


class TestHasher:
    def test_leaf_hash_prefixes_zero_byte(self) -> None:
        """A leaf hashes as H(0x00 || data)."""
        assert hashlib.sha256(b"\x00abc").digest() == SHA256.hash_leaf(b"abc")

    def test_node_hash_prefixes_one_byte(self) -> None:
        """An interior node hashes as H(0x01 || left || right)."""
        left, right = b"L" * 32, b"R" * 32
        assert blake3.blake3(b"\x01" + left + right).digest() == BLAKE3.hash_children(left, right)

    def test_empty_root_is_hash_of_empty_string(self) -> None:
        """The root of the empty tree is H of the empty string."""
        assert TD_EMPTY_ROOT == SHA256.empty_root()

    def test_names_identify_the_hash(self) -> None:
        """The provided hashers are named after their hash functions."""
        assert ("sha256", "blake3") == (SHA256.name, BLAKE3.name)

    def test_digest_size_mismatch_is_refused(self) -> None:
        """A hasher whose function gives digests of another size cannot be built."""
        with pytest.raises(ValueError, match="20-byte"):
            MerkleHasher("sha1", lambda data: hashlib.sha1(data).digest())

    def test_other_digest_sizes_work(self) -> None:
        """A hasher with a non-32-byte digest builds and verifies proofs."""
        sha512 = MerkleHasher("sha512", lambda data: hashlib.sha512(data).digest(), 64)
        leaves = [sha512.hash_leaf(b"%d" % i) for i in range(11)]
        proof = inclusion_proof(sha512, leaves, 7)
        assert verify_inclusion(sha512, 7, 11, leaves[7], proof, root_hash(sha512, leaves))


class TestPublishedVectors:
    def test_leaf_hashes(self) -> None:
        """Leaf hashes of the published inputs match the published level-0 nodes."""
        assert TD_LEAF_HASHES == [SHA256.hash_leaf(d) for d in TD_LEAF_INPUTS]

    @pytest.mark.parametrize("size", range(len(TD_ROOTS)))
    def test_roots(self, size: int) -> None:
        """The root of the first `size` published leaves matches the published root."""
        assert TD_ROOTS[size] == root_hash(SHA256, TD_LEAF_HASHES[:size])

    @pytest.mark.parametrize("level", range(len(TD_NODE_HASHES)))
    def test_complete_subtree_nodes(self, level: int) -> None:
        """Every complete subtree of the published tree has the published node hash."""
        width = 1 << level
        expected = TD_NODE_HASHES[level]
        actual = [
            root_hash(SHA256, TD_LEAF_HASHES[i * width : (i + 1) * width])
            for i in range(len(expected))
        ]
        assert expected == actual

    @pytest.mark.parametrize(("index", "size", "proof"), TD_INCLUSION_PROOFS)
    def test_inclusion_proof_generation(self, index: int, size: int, proof: list[bytes]) -> None:
        """Generated inclusion proofs equal the published ones."""
        assert proof == inclusion_proof(SHA256, TD_LEAF_HASHES, index, size)

    @pytest.mark.parametrize(("index", "size", "proof"), TD_INCLUSION_PROOFS)
    def test_inclusion_proof_verification(self, index: int, size: int, proof: list[bytes]) -> None:
        """Published inclusion proofs verify and lead to the published root."""
        leaf = TD_LEAF_HASHES[index]
        assert TD_ROOTS[size] == root_from_inclusion_proof(SHA256, index, size, leaf, proof)
        assert verify_inclusion(SHA256, index, size, leaf, proof, TD_ROOTS[size])

    @pytest.mark.parametrize(("old", "new", "proof"), TD_CONSISTENCY_PROOFS)
    def test_consistency_proof_generation(self, old: int, new: int, proof: list[bytes]) -> None:
        """Generated consistency proofs equal the published ones."""
        assert proof == consistency_proof(SHA256, TD_LEAF_HASHES, old, new)

    @pytest.mark.parametrize(("old", "new", "proof"), TD_CONSISTENCY_PROOFS)
    def test_consistency_proof_verification(self, old: int, new: int, proof: list[bytes]) -> None:
        """Published consistency proofs verify between the published roots."""
        assert verify_consistency(SHA256, old, new, proof, TD_ROOTS[old], TD_ROOTS[new])

    @pytest.mark.parametrize("size", range(len(TD_COMPACT_TREES)))
    def test_compact_tree_peaks(self, size: int) -> None:
        """A compact tree of the first `size` published leaves holds the published peaks."""
        tree = CompactTree(SHA256)
        tree.extend(TD_LEAF_HASHES[:size])
        expected = tuple(TD_NODE_HASHES[level][i] for level, i in TD_COMPACT_TREES[size])
        assert (expected, TD_ROOTS[size]) == (tree.peaks, tree.root())


class TestAgainstNaiveModel:
    @pytest.mark.parametrize(("hasher", "h"), HASHERS)
    def test_roots(self, hasher: MerkleHasher, h: Digest) -> None:
        """Roots equal the recursive MTH for every size from 0 to 70."""
        leaves = model_leaf_hashes(h)
        for n in range(MODEL_SIZE + 1):
            assert naive_mth(h, MODEL_DATA[:n]) == root_hash(hasher, leaves[:n]), n

    @pytest.mark.parametrize(("hasher", "h"), HASHERS)
    def test_leaf_hashes(self, hasher: MerkleHasher, h: Digest) -> None:
        """The hasher's leaf hash equals the model's one-leaf MTH."""
        assert [naive_mth(h, [d]) for d in MODEL_DATA] == [hasher.hash_leaf(d) for d in MODEL_DATA]

    @pytest.mark.parametrize(("hasher", "h"), HASHERS)
    def test_inclusion_proofs(self, hasher: MerkleHasher, h: Digest) -> None:
        """Inclusion proofs equal PATH(m, D[n]) and verify, for every index of sizes 1 to 70."""
        leaves = model_leaf_hashes(h)
        for n in range(1, MODEL_SIZE + 1):
            data = MODEL_DATA[:n]
            root = naive_mth(h, data)
            for m in range(n):
                expected = naive_path(h, m, data)
                assert expected == inclusion_proof(hasher, leaves, m, n), (m, n)
                assert verify_inclusion(hasher, m, n, leaves[m], expected, root), (m, n)

    @pytest.mark.parametrize(("hasher", "h"), HASHERS)
    def test_consistency_proofs(self, hasher: MerkleHasher, h: Digest) -> None:
        """Consistency proofs equal PROOF(m, D[n]) and verify, for all 1 <= m <= n <= 70."""
        leaves = model_leaf_hashes(h)
        roots = [naive_mth(h, MODEL_DATA[:n]) for n in range(MODEL_SIZE + 1)]
        for n in range(1, MODEL_SIZE + 1):
            for m in range(1, n + 1):
                expected = naive_proof(h, m, MODEL_DATA[:n])
                assert expected == consistency_proof(hasher, leaves, m, n), (m, n)
                assert verify_consistency(hasher, m, n, expected, roots[m], roots[n]), (m, n)

    @pytest.mark.parametrize(("hasher", "h"), HASHERS)
    def test_proofs_default_to_all_leaves(self, hasher: MerkleHasher, h: Digest) -> None:
        """Without a size, proofs are taken over every leaf given."""
        leaves = model_leaf_hashes(h)
        assert naive_path(h, 33, MODEL_DATA) == inclusion_proof(hasher, leaves, 33)
        assert naive_proof(h, 33, MODEL_DATA) == consistency_proof(hasher, leaves, 33)


class TestInclusionRejections:
    @pytest.mark.parametrize(("index", "size", "proof"), TD_INCLUSION_PROOFS)
    def test_tampered_published_proofs(self, index: int, size: int, proof: list[bytes]) -> None:
        """Every tampering of a published inclusion proof or its claim fails verification."""
        leaf, root = TD_LEAF_HASHES[index], TD_ROOTS[size]
        accepted = [
            desc
            for desc, args in inclusion_tamperings(index, size, leaf, proof, root)
            if verify_inclusion(SHA256, *args)
        ]
        assert [] == accepted

    @pytest.mark.parametrize(("hasher", "h"), HASHERS)
    def test_tampered_proofs_for_small_trees(self, hasher: MerkleHasher, h: Digest) -> None:
        """Every tampering fails for every index of every size from 1 to 33."""
        leaves = model_leaf_hashes(h)
        accepted = []
        for n in range(1, 34):
            root = root_hash(hasher, leaves[:n])
            for m in range(n):
                proof = inclusion_proof(hasher, leaves, m, n)
                for desc, args in inclusion_tamperings(m, n, leaves[m], proof, root):
                    if verify_inclusion(hasher, *args):
                        accepted.append((n, m, desc))
        assert [] == accepted

    def test_single_entry_tree(self) -> None:
        """In a one-leaf tree only the leaf hash itself verifies, against itself as the root."""
        leaf = SHA256.hash_leaf(b"data")
        assert verify_inclusion(SHA256, 0, 1, leaf, [], leaf)
        assert not verify_inclusion(SHA256, 0, 1, b"", [], leaf)
        assert not verify_inclusion(SHA256, 0, 1, leaf, [], b"")
        assert not verify_inclusion(SHA256, 0, 1, b"", [], b"")

    @pytest.mark.parametrize(("index", "size"), [(0, 0), (0, 1), (1, 0), (2, 1)])
    def test_unrelated_leaf_and_root(self, index: int, size: int) -> None:
        """An empty proof does not tie an unrelated leaf to an unrelated root."""
        assert not verify_inclusion(SHA256, index, size, TD_SOME_HASH, [], b"")
        assert not verify_inclusion(SHA256, index, size, b"", [], TD_EMPTY_ROOT)
        assert not verify_inclusion(SHA256, index, size, TD_SOME_HASH, [], TD_EMPTY_ROOT)

    def test_wrong_hasher(self) -> None:
        """A SHA-256 proof does not verify under blake3."""
        index, size, proof = TD_INCLUSION_PROOFS[2]
        leaf = TD_LEAF_HASHES[index]
        assert not verify_inclusion(BLAKE3, index, size, leaf, proof, TD_ROOTS[size])


class TestConsistencyRejections:
    @pytest.mark.parametrize(("old", "new", "proof"), TD_CONSISTENCY_PROOFS[1:])
    def test_tampered_published_proofs(self, old: int, new: int, proof: list[bytes]) -> None:
        """Every tampering of a published consistency proof or its claim fails verification."""
        accepted = [
            desc
            for desc, args in consistency_tamperings(old, new, proof, TD_ROOTS[old], TD_ROOTS[new])
            if verify_consistency(SHA256, *args)
        ]
        assert [] == accepted

    @pytest.mark.parametrize(("hasher", "h"), HASHERS)
    def test_tampered_proofs_for_small_trees(self, hasher: MerkleHasher, h: Digest) -> None:
        """Every tampering fails for every pair of sizes 1 <= m < n <= 33."""
        leaves = model_leaf_hashes(h)
        roots = [root_hash(hasher, leaves[:n]) for n in range(34)]
        accepted = []
        for n in range(2, 34):
            for m in range(1, n):
                proof = consistency_proof(hasher, leaves, m, n)
                for desc, args in consistency_tamperings(m, n, proof, roots[m], roots[n]):
                    if verify_consistency(hasher, *args):
                        accepted.append((m, n, desc))
        assert [] == accepted

    @pytest.mark.parametrize(
        ("old", "new", "old_root", "new_root", "proof", "expected"),
        [
            pytest.param(0, 0, TD_EMPTY_ROOT, TD_EMPTY_ROOT, [], True, id="empty-to-empty"),
            pytest.param(0, 1, TD_EMPTY_ROOT, TD_ROOTS[1], [], True, id="empty-to-one"),
            pytest.param(0, 8, TD_EMPTY_ROOT, TD_ROOTS[8], [], True, id="empty-to-eight"),
            pytest.param(1, 1, TD_ROOTS[1], TD_ROOTS[1], [], True, id="same-size"),
            pytest.param(0, 0, TD_EMPTY_ROOT, TD_SOME_HASH, [], False, id="empty-wrong-root"),
            pytest.param(0, 1, TD_SOME_HASH, TD_ROOTS[1], [], False, id="zero-nonempty-root"),
            pytest.param(1, 1, TD_ROOTS[1], TD_ROOTS[2], [], False, id="same-size-other-root"),
            pytest.param(1, 0, TD_ROOTS[1], TD_EMPTY_ROOT, [], False, id="shrinking-to-empty"),
            pytest.param(2, 1, TD_ROOTS[2], TD_ROOTS[1], [], False, id="shrinking"),
            pytest.param(1, 2, TD_ROOTS[1], TD_ROOTS[2], [], False, id="growth-empty-proof"),
            pytest.param(
                0, 0, TD_EMPTY_ROOT, TD_EMPTY_ROOT, [TD_EMPTY_ROOT], False, id="empty-extra-node"
            ),
            pytest.param(
                0, 1, TD_EMPTY_ROOT, TD_ROOTS[1], [TD_EMPTY_ROOT], False, id="zero-extra-node"
            ),
            pytest.param(1, 1, TD_ROOTS[1], TD_ROOTS[1], [TD_ROOTS[1]], False, id="same-extra"),
        ],
    )
    def test_edge_sizes(
        self,
        old: int,
        new: int,
        old_root: bytes,
        new_root: bytes,
        proof: list[bytes],
        expected: bool,
    ) -> None:
        """Size 0 needs the empty root, equal sizes need equal roots, and both need no proof."""
        assert expected == verify_consistency(SHA256, old, new, proof, old_root, new_root)


class TestMalformedInput:
    @given(
        index=st.integers(min_value=-3, max_value=70),
        size=st.integers(min_value=-3, max_value=70),
        leaf=st.binary(max_size=40),
        proof=st.lists(st.binary(min_size=30, max_size=34), max_size=9),
        root=st.binary(max_size=40),
    )
    @settings(max_examples=300, deadline=None)
    def test_inclusion_verification_never_raises(
        self, index: int, size: int, leaf: bytes, proof: list[bytes], root: bytes
    ) -> None:
        """Inclusion verification answers a bool for any integers and bytes."""
        assert isinstance(verify_inclusion(SHA256, index, size, leaf, proof, root), bool)

    @given(
        old=st.integers(min_value=-3, max_value=70),
        new=st.integers(min_value=-3, max_value=70),
        proof=st.lists(st.binary(min_size=30, max_size=34), max_size=9),
        old_root=st.binary(max_size=40),
        new_root=st.binary(max_size=40),
    )
    @settings(max_examples=300, deadline=None)
    def test_consistency_verification_never_raises(
        self, old: int, new: int, proof: list[bytes], old_root: bytes, new_root: bytes
    ) -> None:
        """Consistency verification answers a bool for any integers and bytes."""
        assert isinstance(verify_consistency(BLAKE3, old, new, proof, old_root, new_root), bool)

    @pytest.mark.parametrize(
        "junk", [None, 3, "abc", b"\x00" * 32, [None], ["x" * 32], [3], {1: 2}, 1.5]
    )
    def test_verification_of_wrongly_typed_values_is_false(self, junk: object) -> None:
        """Wrongly typed sizes, hashes or proofs make verification false rather than raise."""
        bad: Any = junk
        index, size, proof = TD_INCLUSION_PROOFS[1]
        leaf, root = TD_LEAF_HASHES[index], TD_ROOTS[size]
        assert not verify_inclusion(SHA256, index, size, leaf, bad, root)
        assert not verify_inclusion(SHA256, bad, size, leaf, proof, root)
        assert not verify_inclusion(SHA256, index, bad, leaf, proof, root)
        assert not verify_inclusion(SHA256, index, size, bad, proof, root)
        assert not verify_inclusion(SHA256, index, size, leaf, proof, bad)
        old, new, cproof = TD_CONSISTENCY_PROOFS[2]
        r1, r2 = TD_ROOTS[old], TD_ROOTS[new]
        assert not verify_consistency(SHA256, old, new, bad, r1, r2)
        assert not verify_consistency(SHA256, bad, new, cproof, r1, r2)
        assert not verify_consistency(SHA256, old, bad, cproof, r1, r2)
        assert not verify_consistency(SHA256, old, new, cproof, bad, r2)
        assert not verify_consistency(SHA256, old, new, cproof, r1, bad)

    def test_proof_elements_may_be_any_bytes_like(self) -> None:
        """Proof elements and hashes given as bytearray or memoryview verify like bytes."""
        index, size, proof = TD_INCLUSION_PROOFS[2]
        leaf, root = TD_LEAF_HASHES[index], TD_ROOTS[size]
        assert verify_inclusion(
            SHA256, index, size, bytearray(leaf), [memoryview(p) for p in proof], bytearray(root)
        )

    @pytest.mark.parametrize(("index", "size"), [(0, 0), (3, 3), (9, 8), (-1, 4)])
    def test_inclusion_proof_outside_tree_raises(self, index: int, size: int) -> None:
        """Asking for an inclusion proof of a leaf outside the tree raises TreeRangeError."""
        with pytest.raises(TreeRangeError):
            inclusion_proof(SHA256, TD_LEAF_HASHES, index, size)

    @pytest.mark.parametrize(("old", "new"), [(5, 0), (9, 8), (-1, 3), (2, 9)])
    def test_consistency_proof_outside_tree_raises(self, old: int, new: int) -> None:
        """A consistency proof that shrinks or exceeds the leaves raises TreeRangeError."""
        with pytest.raises(TreeRangeError):
            consistency_proof(SHA256, TD_LEAF_HASHES, old, new)

    def test_root_from_proof_names_the_failure(self) -> None:
        """Rebuilding a root raises a typed error saying what is wrong with the proof."""
        index, size, proof = TD_INCLUSION_PROOFS[1]
        leaf = TD_LEAF_HASHES[index]
        with pytest.raises(ProofError, match="too short"):
            root_from_inclusion_proof(SHA256, index, size, leaf, proof[:-1])
        with pytest.raises(ProofError, match="too long"):
            root_from_inclusion_proof(SHA256, index, size, leaf, [*proof, TD_SOME_HASH])
        with pytest.raises(ProofError, match="proof element 1"):
            root_from_inclusion_proof(SHA256, index, size, leaf, [proof[0], b"short"])
        with pytest.raises(TreeRangeError):
            root_from_inclusion_proof(SHA256, size, size, leaf, proof)

    def test_errors_are_value_errors(self) -> None:
        """Both typed errors are MerkleError and ValueError subclasses."""
        assert issubclass(TreeRangeError, MerkleError)
        assert issubclass(ProofError, MerkleError)
        assert issubclass(MerkleError, ValueError)


class TestCompactTree:
    @pytest.mark.parametrize("hasher", MODULE_HASHERS)
    def test_root_after_every_append(self, hasher: MerkleHasher) -> None:
        """Appending one leaf at a time gives the batch root at every size from 0 to 300."""
        leaves = [hasher.hash_leaf(b"%d" % i) for i in range(300)]
        tree = CompactTree(hasher)
        assert hasher.empty_root() == tree.root()
        for n, leaf in enumerate(leaves, start=1):
            tree.append(leaf)
            assert (n, root_hash(hasher, leaves[:n])) == (tree.size, tree.root())

    @pytest.mark.parametrize("hasher", MODULE_HASHERS)
    def test_root_after_every_batch(self, hasher: MerkleHasher) -> None:
        """Appending batches of random sizes gives the batch root after each batch."""
        rng = random.Random(9162)
        leaves = [hasher.hash_leaf(b"%d" % i) for i in range(5000)]
        tree = CompactTree(hasher)
        while tree.size < len(leaves):
            start = tree.size
            tree.extend(leaves[start : start + rng.randint(0, 700)])
            assert root_hash(hasher, leaves[: tree.size]) == tree.root()

    def test_peaks_stay_logarithmic(self) -> None:
        """The tree holds one peak per set bit of its size."""
        tree = CompactTree(BLAKE3)
        for n in range(1, 1025):
            tree.append(BLAKE3.hash_leaf(b"%d" % n))
            assert n.bit_count() == len(tree.peaks)

    def test_resume_from_stored_state(self) -> None:
        """A tree rebuilt from a stored size and peaks continues exactly where it left off."""
        leaves = [SHA256.hash_leaf(b"%d" % i) for i in range(1000)]
        first = CompactTree(SHA256)
        first.extend(leaves[:613])
        resumed = CompactTree(SHA256, size=first.size, peaks=first.peaks)
        resumed.extend(leaves[613:])
        assert root_hash(SHA256, leaves) == resumed.root()

    @pytest.mark.parametrize(("size", "peak_count"), [(0, 1), (5, 1), (5, 3), (-1, 0)])
    def test_inconsistent_stored_state_is_refused(self, size: int, peak_count: int) -> None:
        """A stored state whose peak count does not match its size is refused."""
        with pytest.raises(MerkleError):
            CompactTree(SHA256, size=size, peaks=[TD_SOME_HASH] * peak_count)

    def test_published_root_from_inputs(self) -> None:
        """A compact tree over the published leaf inputs reaches the published 8-leaf root."""
        tree = CompactTree(SHA256)
        for data in TD_LEAF_INPUTS:
            tree.append(SHA256.hash_leaf(data))
        assert TD_ROOTS[8] == tree.root()


class TestLargeTrees:
    def test_compact_tree_over_100k_leaves_equals_the_batch_root(self) -> None:
        """Integrating 100,000 blake3 leaves in batches of 1,000 reaches the batch root."""
        leaves = [BLAKE3.hash_leaf(b"event %d" % i) for i in range(100_000)]
        tree = CompactTree(BLAKE3)
        for i in range(0, len(leaves), 1000):
            tree.extend(leaves[i : i + 1000])
        assert root_hash(BLAKE3, leaves) == tree.root()
