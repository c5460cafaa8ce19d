"""Typed errors for the emem fact plane codecs.

Every error is a ``ValueError`` carrying a stable ``code`` string. Where an
``emem.error.v1`` wire code exists for the failure (``invalid_cell``,
``bad_signature``, ``bad_merkle_proof``, ...), that is the code, so the HTTP
layer can put it into the error envelope without translation.
"""

from __future__ import annotations


class EmemError(ValueError):
    """A codec-level failure with a stable, machine-readable ``code``."""

    code: str = "invalid_argument"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self)


class InvalidArgument(EmemError):
    """Malformed input: a bad base32 string, cid shape, tempo, CBOR value, ..."""

    code = "invalid_argument"


class InvalidCell(EmemError):
    """A string that is not a cell64 in the wire form."""

    code = "invalid_cell"


class NotGeoCell(InvalidCell):
    """A well-formed cell64 whose 64-bit id lacks the geo prefix (e.g. legacy res-12)."""


class BadSignature(EmemError):
    """An Ed25519 signature, public key or key encoding that does not verify."""

    code = "bad_signature"


class BadMerkleProof(EmemError):
    """A Merkle proof that is malformed or does not walk to its root."""

    code = "bad_merkle_proof"


class CanonicalEncodingDivergence(EmemError):
    """Bytes that decode but are not the canonical encoding of what they decode to."""

    code = "canonical_encoding_divergence"
