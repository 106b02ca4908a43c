"""A long-term Ed25519 identity, the server's or a player's: created on first run, then kept and
reused.

Both sides keep their key with this one function (``seabattle.client.wire`` for players). The
server's key is the referee's signature on every match record and the ``server`` key that clients
bind their handshake signature to, so losing it orphans every record signed before: it is written
once, with owner-only permissions, and never regenerated while the file exists.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

__all__ = ["load_or_create_key"]


def load_or_create_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """Load the PEM (PKCS#8) or raw 32-byte Ed25519 key at ``path``, creating it if absent."""
    p = Path(path)
    if p.exists():
        data = p.read_bytes()
        if len(data) == 32:
            return Ed25519PrivateKey.from_private_bytes(data)
        key = serialization.load_pem_private_key(data, password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"{p} does not hold an Ed25519 private key")
        return key
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    if p.parent != Path():
        p.parent.mkdir(parents=True, exist_ok=True)
    # O_EXCL: two servers started at once must not each write a different key to one file.
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    return key
