"""The store's node key: Ed25519 key epochs kept as owner-only seed files, recorded in the log.

Each epoch is a 32-byte seed in ``keys/epoch-NNNNNN.seed`` (0600, folder 0700). The current key
is the highest epoch. A key signs nothing until its epoch is recorded in the log as a
``key.epoch_started`` event (stream ``node-key``, stream version = epoch), so an auditor learns
every public key from the log itself. Rotation adds an epoch; earlier signatures stay verifiable
under the epochs they name. Public keys are written as emem writes them: base32, lowercase, no
padding.
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KEY_STREAM", "KeyRing", "NodeKey", "b32_public"]

KEY_STREAM = "node-key"
_SEED_NAME = re.compile(r"^epoch-(\d{6})\.seed$")


def b32_public(raw: bytes) -> str:
    return base64.b32encode(raw).decode("ascii").rstrip("=").lower()


@dataclass(frozen=True)
class NodeKey:
    epoch: int
    seed: bytes

    @property
    def _signer(self):  # type: ignore[no-untyped-def]
        from nacl.signing import SigningKey

        return SigningKey(self.seed)

    @property
    def public_key(self) -> bytes:
        return bytes(self._signer.verify_key)

    @property
    def public_b32(self) -> str:
        return b32_public(self.public_key)

    def sign(self, message: bytes) -> bytes:
        """A detached Ed25519 signature over ``message``."""
        return self._signer.sign(message).signature


def verify_signature(public_key: bytes, message: bytes, signature: bytes) -> bool:
    from nacl.exceptions import BadSignatureError, ValueError as NaclValueError
    from nacl.signing import VerifyKey

    try:
        VerifyKey(public_key).verify(message, signature)
    except (BadSignatureError, NaclValueError, TypeError, ValueError):
        return False
    return True


class KeyRing:
    """The seed files of every epoch of one store's node key."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def epochs(self) -> dict[int, NodeKey]:
        if not self.folder.is_dir():
            return {}
        found = {}
        for path in self.folder.iterdir():
            match = _SEED_NAME.match(path.name)
            if match:
                seed = path.read_bytes()
                if len(seed) == 32:
                    found[int(match.group(1))] = NodeKey(int(match.group(1)), seed)
        return found

    def current(self) -> NodeKey:
        """The newest epoch, creating epoch 1 on first use."""
        epochs = self.epochs()
        if not epochs:
            return self._create(1)
        return epochs[max(epochs)]

    def get(self, epoch: int) -> NodeKey | None:
        return self.epochs().get(epoch)

    def rotate(self) -> NodeKey:
        """Create the next epoch and return it (record it in the log before signing with it)."""
        epochs = self.epochs()
        return self._create(max(epochs, default=0) + 1)

    def _create(self, epoch: int) -> NodeKey:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        path = self.folder / f"epoch-{epoch:06d}.seed"
        if path.exists():
            existing = path.read_bytes()
            if len(existing) == 32:
                return NodeKey(epoch, existing)
            # A torn seed (a crash or a full disk while it was written): nothing ever signed
            # with it, since signing needs all 32 bytes, so it is safe to replace.
            path.unlink()
        # Written whole under a temporary name and linked into place, so the seed file never
        # exists torn: a failed write leaves only the temporary file, removed here.
        seed = os.urandom(32)
        tmp = self.folder / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(seed)
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(tmp, path)
            except FileExistsError:
                return NodeKey(epoch, path.read_bytes())  # another process created it first
        finally:
            tmp.unlink(missing_ok=True)
        return NodeKey(epoch, seed)
