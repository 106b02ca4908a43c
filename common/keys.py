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

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

__all__ = ["KeyFileError", "load_or_create_key"]


class KeyFileError(OSError, ValueError):
    """A key file that cannot be used: its folder does not exist, or the file holds no Ed25519
    private key (a certificate, a public key, an encrypted key, anything else).

    An ``OSError`` (a problem with a file, as ``io.UnsupportedOperation`` is), so that whoever
    reports file errors in one line reports this one too; and a ``ValueError``, what a file
    that holds no key raised before this class existed."""


def load_or_create_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """Load the PEM (PKCS#8) or raw 32-byte Ed25519 key at ``path``, creating it if absent.

    Raises :class:`KeyFileError` for a file that holds no Ed25519 private key, and for a missing
    file whose folder does not exist either: a mistyped path must not quietly make folders and
    a new identity somewhere nobody looks (the file itself is created, on first run).
    """
    p = Path(path)
    if p.exists():
        data = p.read_bytes()
        if len(data) == 32:
            return Ed25519PrivateKey.from_private_bytes(data)
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            # ValueError: not PEM, or PEM of something else (a certificate); TypeError: a key
            # that needs a password; UnsupportedAlgorithm: a key of a type this build lacks.
            key = None
        if not isinstance(key, Ed25519PrivateKey):
            raise KeyFileError(
                f"{p} holds no Ed25519 private key (a PEM PKCS#8 key or 32 raw bytes)"
            )
        return key
    parent = p.parent
    if not parent.is_dir():
        raise KeyFileError(f"there is no folder {parent} for the key file {p.name}")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    # O_EXCL: two servers started at once must not each write a different key to one file.
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    return key
