"""The event log's Merkle tree: RFC 9162 hashing, proofs, and an incremental compact tree.

This module owns the tree shape (RFC 9162 §2.1, unchanged from RFC 6962): a leaf hashes as
``H(0x00 || leaf)``, an interior node as ``H(0x01 || left || right)``, the empty tree as
``H(b"")``, and a tree of n > 1 leaves splits at the largest power of two below n. The hash
function is a parameter (:class:`MerkleHasher`). :data:`SHA256` is what every outside verifier
expects; :data:`BLAKE3` is only for a log that names its hash in its checkpoint origin
(design doc §3.7 and decision 8).

It builds and checks inclusion proofs (§2.1.3) and consistency proofs (§2.1.4), and
:class:`CompactTree` integrates leaf hashes one at a time or in batches while holding only
O(log n) hashes.

The ``verify_*`` functions never raise: any proof that does not prove the claim, malformed or
not, gives ``False``, because proofs come from parties we do not trust. The functions that
build proofs or rebuild a root raise subclasses of ``ValueError``::

    MerkleError(ValueError)
    ├── TreeRangeError   a size or index outside the tree (index >= size, old > new, negative)
    └── ProofError       a proof of the wrong length, or holding something that is not a hash
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import blake3

__all__ = [
    "BLAKE3",
    "SHA256",
    "CompactTree",
    "MerkleError",
    "MerkleHasher",
    "ProofError",
    "TreeRangeError",
    "consistency_proof",
    "inclusion_proof",
    "root_from_inclusion_proof",
    "root_hash",
    "verify_consistency",
    "verify_inclusion",
]

_LEAF = b"\x00"
_NODE = b"\x01"


class MerkleError(ValueError):
    """A Merkle tree operation was given arguments it cannot work with."""


class TreeRangeError(MerkleError):
    """A leaf index or tree size lies outside the tree it refers to."""


class ProofError(MerkleError):
    """A proof has the wrong number of hashes, or an element that is not a hash."""


@dataclass(frozen=True, slots=True)
class MerkleHasher:
    """A hash function (bytes to ``digest_size`` bytes) plugged into the RFC 9162 tree shape."""

    name: str
    digest: Callable[[bytes], bytes] = field(repr=False)
    digest_size: int = 32

    def __post_init__(self) -> None:
        produced = len(self.digest(b""))
        if produced != self.digest_size:
            raise ValueError(
                f"hash {self.name!r} gives {produced}-byte digests, not {self.digest_size}"
            )

    def hash_leaf(self, data: bytes) -> bytes:
        return self.digest(_LEAF + data)

    def hash_children(self, left: bytes, right: bytes) -> bytes:
        return self.digest(_NODE + left + right)

    def empty_root(self) -> bytes:
        return self.digest(b"")


def _sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _blake3(data: bytes) -> bytes:
    return blake3.blake3(data).digest()


SHA256 = MerkleHasher("sha256", _sha256)
BLAKE3 = MerkleHasher("blake3", _blake3)


class CompactTree:
    """The right edge of a Merkle tree: enough to append leaves and compute the root.

    Invariant: ``peaks`` are the roots of the perfect subtrees that tile leaves ``[0, size)``
    from left to right, one per set bit of ``size``, largest first. Appending a leaf works like
    binary increment: the new leaf merges with one peak for every carry. The root folds the
    peaks from the right, which is the RFC's split at the largest power of two below the size.

    To resume after a restart, store ``size`` and ``peaks`` and pass them back in.
    """

    __slots__ = ("_hasher", "_peaks", "_size")

    def __init__(self, hasher: MerkleHasher, size: int = 0, peaks: Iterable[bytes] = ()) -> None:
        size = _non_negative(size, "tree size")
        stored = _as_hashes(peaks, hasher.digest_size)
        if len(stored) != size.bit_count():
            raise MerkleError(
                f"a compact tree of size {size} has {size.bit_count()} peaks, not {len(stored)}"
            )
        self._hasher = hasher
        self._size = size
        self._peaks = list(stored)

    @property
    def hasher(self) -> MerkleHasher:
        return self._hasher

    @property
    def size(self) -> int:
        return self._size

    @property
    def peaks(self) -> tuple[bytes, ...]:
        return tuple(self._peaks)

    def append(self, leaf_hash: bytes) -> None:
        self.extend((leaf_hash,))

    def extend(self, leaf_hashes: Iterable[bytes]) -> None:
        digest = self._hasher.digest
        peaks = self._peaks
        size = self._size
        for node in leaf_hashes:
            carries = size
            while carries & 1:
                node = digest(_NODE + peaks.pop() + node)
                carries >>= 1
            peaks.append(node)
            size += 1
        self._size = size

    def root(self) -> bytes:
        if not self._peaks:
            return self._hasher.empty_root()
        digest = self._hasher.digest
        node = self._peaks[-1]
        for peak in reversed(self._peaks[:-1]):
            node = digest(_NODE + peak + node)
        return node


def root_hash(hasher: MerkleHasher, leaf_hashes: Iterable[bytes]) -> bytes:
    """Return MTH over the leaves whose hashes are given, in order."""
    level = list(leaf_hashes)
    if not level:
        return hasher.empty_root()
    digest = hasher.digest
    # Pairing neighbours level by level and carrying an odd last node up unchanged builds the
    # same left-filled tree as the RFC's recursive split, without recursion.
    while len(level) > 1:
        paired = [digest(_NODE + level[i] + level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def inclusion_proof(
    hasher: MerkleHasher, leaf_hashes: Sequence[bytes], index: int, size: int | None = None
) -> list[bytes]:
    """Return PATH(index, D[size]) (RFC 9162 §2.1.3.1); ``size`` defaults to all leaves."""
    size = _size_within(leaf_hashes, size)
    index = _non_negative(index, "leaf index")
    if index >= size:
        raise TreeRangeError(f"leaf index {index} is not in a tree of size {size}")
    siblings = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = _split(hi - lo)
        if index < lo + k:
            siblings.append(root_hash(hasher, leaf_hashes[lo + k : hi]))
            hi = lo + k
        else:
            siblings.append(root_hash(hasher, leaf_hashes[lo : lo + k]))
            lo += k
    siblings.reverse()
    return siblings


def consistency_proof(
    hasher: MerkleHasher, leaf_hashes: Sequence[bytes], old_size: int, new_size: int | None = None
) -> list[bytes]:
    """Return PROOF(old_size, D[new_size]) (RFC 9162 §2.1.4.1); ``new_size`` defaults to all.

    The proof is empty when ``old_size`` is 0 or equals ``new_size``.
    """
    new_size = _size_within(leaf_hashes, new_size)
    old_size = _non_negative(old_size, "old tree size")
    if old_size > new_size:
        raise TreeRangeError(f"old tree size {old_size} exceeds new tree size {new_size}")
    if old_size in (0, new_size):
        return []
    nodes = []
    lo, hi = 0, new_size
    while old_size < hi:
        k = _split(hi - lo)
        if old_size <= lo + k:
            nodes.append(root_hash(hasher, leaf_hashes[lo + k : hi]))
            hi = lo + k
        else:
            nodes.append(root_hash(hasher, leaf_hashes[lo : lo + k]))
            lo += k
    # When lo is 0 the node left over is the whole old tree, whose root the verifier already
    # holds (SUBPROOF with b = true); otherwise the verifier needs it.
    if lo > 0:
        nodes.append(root_hash(hasher, leaf_hashes[lo:hi]))
    nodes.reverse()
    return nodes


def root_from_inclusion_proof(
    hasher: MerkleHasher, index: int, size: int, leaf_hash: bytes, proof: Iterable[bytes]
) -> bytes:
    """Return the root that ``proof`` leads to from leaf ``index`` of a tree of ``size``.

    Follows RFC 9162 §2.1.3.2 and raises :class:`MerkleError` where it says to fail.
    """
    index = _non_negative(index, "leaf index")
    size = _non_negative(size, "tree size")
    if index >= size:
        raise TreeRangeError(f"leaf index {index} is not in a tree of size {size}")
    node = _as_hash(leaf_hash, hasher.digest_size, "leaf hash")
    path = _as_hashes(proof, hasher.digest_size)
    digest = hasher.digest
    fn, sn = index, size - 1
    for sibling in path:
        if sn == 0:
            raise ProofError(f"inclusion proof for leaf {index} of {size} is too long")
        if fn & 1 or fn == sn:
            node = digest(_NODE + sibling + node)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            node = digest(_NODE + node + sibling)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError(f"inclusion proof for leaf {index} of {size} is too short")
    return node


def verify_inclusion(
    hasher: MerkleHasher,
    index: int,
    size: int,
    leaf_hash: bytes,
    proof: Iterable[bytes],
    root: bytes,
) -> bool:
    """Return whether ``proof`` puts ``leaf_hash`` at ``index`` in the tree ``(size, root)``."""
    try:
        expected = _as_hash(root, hasher.digest_size, "root")
        return root_from_inclusion_proof(hasher, index, size, leaf_hash, proof) == expected
    except MerkleError:
        return False


def verify_consistency(
    hasher: MerkleHasher,
    old_size: int,
    new_size: int,
    proof: Iterable[bytes],
    old_root: bytes,
    new_root: bytes,
) -> bool:
    """Return whether ``proof`` shows ``(new_size, new_root)`` extends ``(old_size, old_root)``.

    Follows RFC 9162 §2.1.4.2. A tree of size 0 must carry the empty-tree root, and any tree
    extends it with an empty proof; equal sizes need equal roots and an empty proof.
    """
    try:
        old_size = _non_negative(old_size, "old tree size")
        new_size = _non_negative(new_size, "new tree size")
        first = _as_hash(old_root, hasher.digest_size, "old root")
        second = _as_hash(new_root, hasher.digest_size, "new root")
        path = _as_hashes(proof, hasher.digest_size)
        if old_size > new_size:
            return False
        if old_size == 0:
            empty = hasher.empty_root()
            return not path and first == empty and (new_size > 0 or second == empty)
        if old_size == new_size:
            return not path and first == second
        return _roots_from_consistency_path(hasher, old_size, new_size, first, path) == (
            first,
            second,
        )
    except MerkleError:
        return False


def _roots_from_consistency_path(
    hasher: MerkleHasher, old_size: int, new_size: int, old_root: bytes, path: tuple[bytes, ...]
) -> tuple[bytes, bytes]:
    """Return (old root, new root) rebuilt from a proof for 0 < old_size < new_size."""
    if not path:
        raise ProofError(f"consistency proof from {old_size} to {new_size} is empty")
    if old_size & (old_size - 1) == 0:
        # The old tree is one perfect subtree, so the proof leaves out the root we already have.
        path = (old_root, *path)
    digest = hasher.digest
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    old_node = new_node = path[0]
    for node in path[1:]:
        if sn == 0:
            raise ProofError(f"consistency proof from {old_size} to {new_size} is too long")
        if fn & 1 or fn == sn:
            old_node = digest(_NODE + node + old_node)
            new_node = digest(_NODE + node + new_node)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            new_node = digest(_NODE + new_node + node)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError(f"consistency proof from {old_size} to {new_size} is too short")
    return old_node, new_node


def _split(n: int) -> int:
    """Return the largest power of two strictly below ``n``, for n >= 2."""
    return 1 << ((n - 1).bit_length() - 1)


def _non_negative(value: int, what: str) -> int:
    try:
        number = operator.index(value)
    except TypeError:
        raise TreeRangeError(f"{what} must be an integer, not {type(value).__name__}") from None
    if number < 0:
        raise TreeRangeError(f"{what} must not be negative, got {number}")
    return number


def _size_within(leaf_hashes: Sequence[bytes], size: int | None) -> int:
    if size is None:
        return len(leaf_hashes)
    size = _non_negative(size, "tree size")
    if size > len(leaf_hashes):
        raise TreeRangeError(f"tree size {size} exceeds the {len(leaf_hashes)} leaves given")
    return size


def _as_hash(value: object, digest_size: int, what: str) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise ProofError(f"{what} must be bytes, not {type(value).__name__}")
    data = bytes(value)
    if len(data) != digest_size:
        raise ProofError(f"{what} has {len(data)} bytes, not {digest_size}")
    return data


def _as_hashes(values: Iterable[bytes], digest_size: int) -> tuple[bytes, ...]:
    # A bare bytes object iterates as ints, so refuse it rather than report a confusing element.
    if isinstance(values, (bytes, bytearray, memoryview, str)):
        raise ProofError("a proof is a sequence of hashes, not a single bytes or str value")
    try:
        items = tuple(values)
    except TypeError:
        raise ProofError(f"a proof is a sequence of hashes, not {type(values).__name__}") from None
    return tuple(_as_hash(item, digest_size, f"proof element {i}") for i, item in enumerate(items))
