"""emem's per-attestation batch Merkle tree (v0 legacy, v1 current) and its proofs.

Not RFC 6962/9162 (that is the transparency log, elsewhere): leaves are
sorted bytewise, and the last node of an odd layer is paired with itself.

    v0: promote(L) = blake3(L || L)      node(l, r) = blake3(l || r)
    v1: promote(L) = blake3(0x00 || L)   node(l, r) = blake3(0x01 || l || r)

Because self-pairing makes root([A,B,C]) == root([A,B,C,C]), v1 refuses
duplicate leaves. An empty batch has the all-zero root. A leaf is the
32-byte fact digest, i.e. ``base32_decode(fact_cid)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise
from typing import Any, NamedTuple

import msgspec

from memoree.factplane.emem.errors import BadMerkleProof, InvalidArgument
from memoree.factplane.emem.ids import blake3_digest

HASH_BYTES = 32
ZERO_ROOT = bytes(HASH_BYTES)
VERSIONS = (0, 1)
CURRENT_VERSION = 1
U32_MAX = 0xFFFF_FFFF


class MerkleProof(msgspec.Struct, kw_only=True, frozen=True):
    """Inclusion proof: bottom-up siblings for the leaf at ``leaf_index`` of the sorted batch."""

    leaf_index: int
    path: tuple[bytes, ...]
    root: bytes
    version: int = 0


class BatchTree(NamedTuple):
    root: bytes
    leaves: tuple[bytes, ...]  # sorted; proofs[i] proves leaves[i]
    proofs: tuple[MerkleProof, ...]


def _check_version(version: int) -> None:
    if version not in VERSIONS:
        raise InvalidArgument(f"unknown merkle version {version!r}; expected 0 or 1")


def _check_hash(value: object, what: str) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or len(value) != HASH_BYTES:
        raise BadMerkleProof(f"{what} must be {HASH_BYTES} bytes")
    return bytes(value)


def promote_leaf(leaf: bytes, version: int = CURRENT_VERSION) -> bytes:
    _check_version(version)
    return blake3_digest(b"\x00" + leaf) if version == 1 else blake3_digest(leaf + leaf)


def node_hash(left: bytes, right: bytes, version: int = CURRENT_VERSION) -> bytes:
    _check_version(version)
    return blake3_digest(b"\x01" + left + right) if version == 1 else blake3_digest(left + right)


def sorted_leaves(leaves: Iterable[bytes], version: int = CURRENT_VERSION) -> tuple[bytes, ...]:
    """Leaves in canonical (bytewise) order; v1 refuses duplicates."""
    _check_version(version)
    ordered = tuple(sorted(_check_leaf(leaf) for leaf in leaves))
    if version >= 1 and any(a == b for a, b in pairwise(ordered)):
        raise InvalidArgument("duplicate leaf in a v1 merkle batch")
    return ordered


def _check_leaf(leaf: object) -> bytes:
    if not isinstance(leaf, (bytes, bytearray)) or len(leaf) != HASH_BYTES:
        raise InvalidArgument(f"a merkle leaf must be {HASH_BYTES} bytes")
    return bytes(leaf)


def _next_layer(layer: list[bytes], version: int) -> list[bytes]:
    return [
        node_hash(layer[i], layer[i + 1] if i + 1 < len(layer) else layer[i], version)
        for i in range(0, len(layer), 2)
    ]


def merkle_root(leaves: Iterable[bytes], version: int = CURRENT_VERSION) -> bytes:
    """Root over the sorted leaves (all zeros for an empty batch)."""
    return build_tree(leaves, version).root


def build_tree(leaves: Iterable[bytes], version: int = CURRENT_VERSION) -> BatchTree:
    """Root and one inclusion proof per sorted leaf."""
    ordered = sorted_leaves(leaves, version)
    if not ordered:
        return BatchTree(ZERO_ROOT, (), ())
    layer = [promote_leaf(leaf, version) for leaf in ordered]
    paths: list[list[bytes]] = [[] for _ in ordered]
    positions = list(range(len(ordered)))
    while len(layer) > 1:
        for leaf_number, position in enumerate(positions):
            sibling = position ^ 1
            # The unpaired last node of an odd layer records itself as its sibling.
            paths[leaf_number].append(layer[sibling] if sibling < len(layer) else layer[position])
            positions[leaf_number] = position // 2
        layer = _next_layer(layer, version)
    root = layer[0]
    proofs = tuple(
        MerkleProof(leaf_index=index, path=tuple(path), root=root, version=version)
        for index, path in enumerate(paths)
    )
    return BatchTree(root, ordered, proofs)


def proof_root(leaf: bytes, proof: MerkleProof) -> bytes:
    """Walk ``proof`` up from ``leaf``; raise BadMerkleProof if it is malformed."""
    leaf = _check_hash(leaf, "leaf")
    if proof.version not in VERSIONS:
        raise BadMerkleProof(f"unknown merkle version {proof.version!r}")
    index = proof.leaf_index
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= U32_MAX:
        raise BadMerkleProof("leaf_index must be a u32")
    acc = promote_leaf(leaf, proof.version)
    for sibling in proof.path:
        sibling = _check_hash(sibling, "path entry")
        if index % 2 == 0:
            acc = node_hash(acc, sibling, proof.version)
        else:
            # A right child equal to its left sibling can only come from a duplicate leaf.
            if proof.version >= 1 and sibling == acc:
                raise BadMerkleProof("proof pairs two equal nodes (duplicate leaf)")
            acc = node_hash(sibling, acc, proof.version)
        index //= 2
    if index != 0:
        raise BadMerkleProof("leaf_index is beyond the width of the proof path")
    return acc


def verify_proof(leaf: bytes, proof: MerkleProof) -> bool:
    """True when ``proof`` walks ``leaf`` to ``proof.root``."""
    try:
        check_proof(leaf, proof)
    except BadMerkleProof:
        return False
    return True


def check_proof(leaf: bytes, proof: MerkleProof) -> None:
    """Raise BadMerkleProof unless ``proof`` walks ``leaf`` to ``proof.root``."""
    root = _check_hash(proof.root, "root")
    if proof_root(leaf, proof) != root:
        raise BadMerkleProof("proof does not walk to its root")


def proof_to_json(proof: MerkleProof) -> dict[str, Any]:
    """The wire shape: byte arrays as int lists; ``version`` omitted when 0."""
    view: dict[str, Any] = {
        "leaf_index": proof.leaf_index,
        "path": [list(sibling) for sibling in proof.path],
        "root": list(proof.root),
    }
    if proof.version:
        view["version"] = proof.version
    return view


def proof_from_json(obj: Any) -> MerkleProof:
    """Parse the wire shape; a missing ``version`` means 0. Raises BadMerkleProof."""
    if not isinstance(obj, dict) or not {"leaf_index", "path", "root"} <= obj.keys():
        raise BadMerkleProof("merkle_proof needs leaf_index, path and root")
    version = obj.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int):
        raise BadMerkleProof("merkle_proof.version must be an integer")
    if not isinstance(obj["path"], list):
        raise BadMerkleProof("merkle_proof.path must be a list")
    return MerkleProof(
        leaf_index=obj["leaf_index"],
        path=tuple(_hash_from_ints(sibling, "path entry") for sibling in obj["path"]),
        root=_hash_from_ints(obj["root"], "root"),
        version=version,
    )


def _hash_from_ints(value: Any, what: str) -> bytes:
    if not isinstance(value, list) or len(value) != HASH_BYTES:
        raise BadMerkleProof(f"{what} must be {HASH_BYTES} byte values")
    if not all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255 for b in value):
        raise BadMerkleProof(f"{what} must hold byte values 0..255")
    return bytes(value)
