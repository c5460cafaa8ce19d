"""Ed25519 keys and signatures for the fact plane (PyNaCl / libsodium).

emem signs 32-byte blake3 digests, never the raw preimage stream. Keys are
32-byte seeds (the node key is supplied by the caller); public keys and
signatures travel as lowercase base32. libsodium's verify rejects
non-canonical S and small-order keys, matching dalek's ``verify_strict``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memoree.factplane.emem import b32
from memoree.factplane.emem.errors import BadSignature, InvalidArgument

if TYPE_CHECKING:
    from nacl.signing import SigningKey

SEED_BYTES = 32
PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64
DIGEST_BYTES = 32


def signing_key(key: SigningKey | bytes) -> SigningKey:
    """Accept a PyNaCl SigningKey or its 32-byte seed."""
    from nacl.signing import SigningKey

    if isinstance(key, SigningKey):
        return key
    if not isinstance(key, (bytes, bytearray)) or len(key) != SEED_BYTES:
        raise InvalidArgument("a signing key must be a nacl SigningKey or a 32-byte seed")
    return SigningKey(bytes(key))


def public_key(key: SigningKey | bytes) -> bytes:
    """The 32-byte Ed25519 public key of a signing key or seed."""
    return bytes(signing_key(key).verify_key)


def public_key_b32(key: SigningKey | bytes) -> str:
    return b32.encode(public_key(key))


def sign_digest(key: SigningKey | bytes, digest: bytes) -> bytes:
    """Ed25519 signature (64 bytes) over a 32-byte digest."""
    if len(digest) != DIGEST_BYTES:
        raise InvalidArgument("emem signs 32-byte digests")
    return signing_key(key).sign(bytes(digest)).signature


def verify_digest(public: bytes, digest: bytes, signature: bytes) -> bool:
    """True when ``signature`` is a valid strict Ed25519 signature of ``digest`` by ``public``."""
    from nacl.exceptions import BadSignatureError, CryptoError
    from nacl.signing import VerifyKey

    if len(public) != PUBLIC_KEY_BYTES or len(signature) != SIGNATURE_BYTES:
        return False
    try:
        VerifyKey(bytes(public)).verify(bytes(digest), bytes(signature))
    except (BadSignatureError, CryptoError, ValueError):
        return False
    return True


def check_digest_signature(public: bytes, digest: bytes, signature: bytes) -> None:
    """Raise BadSignature unless ``signature`` verifies."""
    if not verify_digest(public, digest, signature):
        raise BadSignature("Ed25519 signature does not verify")


def decode_public_key(text: str) -> bytes:
    """A base32 public key (52 characters) as 32 bytes; BadSignature if malformed."""
    return _decode_fixed(text, PUBLIC_KEY_BYTES, "public key")


def decode_signature(text: str) -> bytes:
    """A base32 signature (103 characters) as 64 bytes; BadSignature if malformed."""
    return _decode_fixed(text, SIGNATURE_BYTES, "signature")


def _decode_fixed(text: str, nbytes: int, what: str) -> bytes:
    try:
        return b32.decode_exact(text, nbytes, what=what)
    except InvalidArgument as exc:
        raise BadSignature(str(exc)) from None
