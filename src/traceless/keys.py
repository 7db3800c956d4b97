"""Local secrets in ``state_dir()`` (``$TRACELESS_HOME``), each with one job.

* ``receipt_ed25519.key`` — the Ed25519 key that signs forget receipts. Its public half
  (``traceless keys export``) lets anyone verify a receipt without holding any secret.
* ``receipt.key`` — the *pepper*: 32 random bytes keying the digests inside receipts
  (target references, tier digests). Verifiers never get it, so a receipt is no offline
  oracle for guessing a forgotten value.
* ``gate.key`` — the write gate's HMAC key (``traceless.memory._gate``).

Every file is 32 bytes, mode 0600, created atomically on first *write* use. Readers that
only check something (``forget verify``) never create a key.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
import sys
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from traceless.errors import ConfigError
from traceless.paths import state_dir

__all__ = [
    "read_secret",
    "pepper",
    "signing_key",
    "public_key_bytes",
    "key_id",
    "load_public_key",
    "warn_if_home_open",
]

SIGNING_KEY_FILE = "receipt_ed25519.key"
_WARNED: set[Path] = set()  # key folders already checked in this process


def _create(p: Path) -> None:
    """Write 32 random bytes to ``p`` atomically (temp file + hard link, 0600)."""
    p.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, secrets.token_bytes(32))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, p)
    except FileExistsError:
        pass  # another process created it first: use theirs
    finally:
        tmp.unlink()


def read_secret(path: Path, what: str, *, create: bool = True) -> bytes:
    """Read a 32-byte secret key file; create it (0600) on first use when ``create``.

    Refuses a key that others can read, a truncated key, and a path that is not a file,
    each with the fix. With ``create=False`` a missing key is an error (never made).
    """
    p = path
    if p.exists() and not p.is_file():
        raise ConfigError(f"{what} {p} is not a regular file (a directory?); move it away so a key can be kept there")
    if not p.exists():
        if not create:
            raise ConfigError(
                f"no {what} at {p}: nothing has been signed or gated with this $TRACELESS_HOME. "
                "Point TRACELESS_HOME at the folder that holds the key (or pass the public key to verify)."
            )
        _create(p)
    mode = stat.S_IMODE(p.stat().st_mode)
    if mode & 0o077:
        raise ConfigError(f"{what} {p} is readable by others (mode {oct(mode)}); run: chmod 600 {p}")
    if p.parent not in _WARNED:
        _WARNED.add(p.parent)
        warn_if_home_open(p.parent)
    key = p.read_bytes()
    if len(key) < 32:
        raise ConfigError(
            f"{what} {p} is truncated ({len(key)} bytes); delete it only if nothing signed or gated depends on it"
        )
    return key[:32]


def warn_if_home_open(home: Path | None = None) -> str | None:
    """A warning (also printed to stderr) when the key folder is group/world-accessible."""
    h = home or state_dir()
    mode = stat.S_IMODE(h.stat().st_mode)
    if not mode & 0o077:
        return None
    msg = (f"warning: {h} (TRACELESS_HOME, holds the keys) is accessible by group/others "
           f"(mode {oct(mode)}); run: chmod 700 {h}")
    print(msg, file=sys.stderr)
    return msg


def pepper(*, create: bool = True) -> bytes:
    """The receipts' digest pepper (a local secret; verifiers never need it)."""
    return read_secret(state_dir() / "receipt.key", "receipt pepper", create=create)


def signing_key(*, create: bool = True) -> Ed25519PrivateKey:
    """The Ed25519 receipt-signing key (created on first use unless ``create=False``)."""
    seed = read_secret(state_dir() / SIGNING_KEY_FILE, "receipt signing key", create=create)
    return Ed25519PrivateKey.from_private_bytes(seed)


def public_key_bytes(key: Ed25519PrivateKey | None = None, *, create: bool = False) -> bytes:
    """Raw 32-byte public key of ``key`` (default: the local signing key; never created)."""
    from cryptography.hazmat.primitives import serialization

    k = key if key is not None else signing_key(create=create)
    return k.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public: bytes) -> str:
    """A short stable name for a public key: sha256 of its raw bytes, first 16 hex."""
    return hashlib.sha256(public).hexdigest()[:16]


def load_public_key(spec: str) -> bytes:
    """A public key given as 64 hex characters or as a file written by ``traceless keys export``."""
    text = spec.strip()
    p = Path(text)
    if len(text) != 64 and p.is_file():
        text = p.read_text(encoding="utf-8")
        for line in text.splitlines():
            if line.startswith("public_key:"):
                text = line.split(":", 1)[1]
        text = text.strip()
    try:
        raw = bytes.fromhex(text)
        Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        raise ConfigError(
            f"{spec!r} is not an Ed25519 public key: give the 64 hex characters printed by "
            "`traceless keys export`, or the file it wrote"
        ) from None
    return raw
