"""Encryption at rest with per-owner data keys (crypto-shredding) for the SQLite store.

Every artifact's text, vector and meta are sealed with AES-256-GCM under its owner's
data key (the artifact id is the associated data, so a ciphertext cannot be moved to
another row). Data keys live in the store's ``data_keys`` table, wrapped (AES-GCM) by a
*master key* kept outside the store, in ``$TRACELESS_HOME/master/<store id>/<key id>.key``.

Forgetting destroys keys, so that copies of the store that escaped the live file — a
backup or a copy taken before the forget, WAL segments, freed filesystem blocks — stay
ciphertext under keys that no longer exist:

* the owner's data key is replaced by a fresh one (their surviving artifacts are
  re-sealed under it) or, for an erased user, deleted;
* the master key is rotated: every remaining data key is re-wrapped under a new master
  key and the old master key file is overwritten and removed. An old copy of the store
  holds data keys wrapped under a master key that is gone.

What it does not cover: a copy of ``$TRACELESS_HOME`` taken before the forget together
with a copy of the store, and whatever the filesystem keeps of the removed master-key
file (it is overwritten in place before unlinking; journaling or SSD remapping may
still keep its 32 bytes somewhere).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from traceless.errors import MemoryStoreError
from traceless.keys import read_secret
from traceless.paths import state_dir

__all__ = ["InvalidTag", "ENCRYPTION", "STORE_ID", "Sealed", "check_store_id", "master_dir", "new_master", "load_master",
           "shred_file", "wrap", "unwrap", "seal", "unseal"]

ENCRYPTION = "aes-256-gcm/per-owner-data-keys/v1"


@dataclass(frozen=True)
class Sealed:
    """A plaintext payload: text, vector bytes and meta of one artifact."""

    text: str | None
    vector: bytes | None
    meta: dict[str, Any]


#: the store ids traceless makes (``_schema``: 16 random bytes in lower hex; ``memory`` for
#: a private in-memory store): anything else read from a store is refused before it names a path
STORE_ID = re.compile(r"[0-9a-f]{32}|memory")


def check_store_id(store_id: str, where: str) -> str:
    """``store_id`` if it has the format traceless makes; else ``MemoryStoreError`` (an altered
    store: its id must never steer where master keys are read or written)."""
    if not STORE_ID.fullmatch(store_id):
        raise MemoryStoreError(
            f"{where}: the store id {store_id[:40]!r} in its meta table is not one traceless makes (32 lowercase hex "
            "characters): the store was altered. Nothing was read or written outside $TRACELESS_HOME; restore the "
            "store from a backup."
        )
    return store_id


def master_dir(store_id: str) -> Path:
    """``$TRACELESS_HOME/master/<store id>`` (the id is checked first: never a path of its own)."""
    return state_dir() / "master" / check_store_id(store_id, "master key folder")


def master_key_id(key: bytes) -> str:
    return hmac.new(key, b"traceless-master-key-id", hashlib.sha256).hexdigest()[:16]


def new_master(store_id: str) -> tuple[str, bytes]:
    """Create a fresh master key file for ``store_id``; returns (key id, key)."""
    d = master_dir(store_id)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = secrets.token_bytes(32)
    kid = master_key_id(key)
    p = d / f"{kid}.key"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    return kid, key


def load_master(store_id: str, kid: str, path: str) -> bytes:
    p = master_dir(store_id) / f"{kid}.key"
    if not p.exists():
        raise MemoryStoreError(
            f"{path} is encrypted and its master key {kid} is not in {p.parent}: either this is a copy of the "
            "store taken before a forget (the key was destroyed on purpose: the copy cannot be read), or "
            "TRACELESS_HOME points elsewhere — set it to the folder that holds master/<store id>/."
        )
    key = read_secret(p, "master key", create=False)
    if master_key_id(key) != kid:
        raise MemoryStoreError(f"master key file {p} does not hold key {kid} (altered?); restore it from where "
                               "you keep TRACELESS_HOME")
    return key


def shred_file(p: Path) -> None:
    """Overwrite a key file with zeros, flush, and remove it."""
    if not p.exists():
        return
    size = p.stat().st_size
    fd = os.open(p, os.O_WRONLY)
    try:
        os.write(fd, b"\x00" * size)
        os.fsync(fd)
    finally:
        os.close(fd)
    p.unlink()


_CIPHERS: dict[bytes, AESGCM] = {}  # key schedules, reused (a store touches few keys)


def _cipher(key: bytes) -> AESGCM:
    c = _CIPHERS.get(key)
    if c is None:
        if len(_CIPHERS) > 4096:
            _CIPHERS.clear()
        c = _CIPHERS[key] = AESGCM(key)
    return c


def _aead(key: bytes, data: bytes, aad: bytes) -> bytes:
    nonce = os.urandom(12)
    return nonce + _cipher(key).encrypt(nonce, data, aad)


def _open(key: bytes, blob: bytes, aad: bytes) -> bytes:
    return _cipher(key).decrypt(blob[:12], blob[12:], aad)


def wrap(master: bytes, data_key: bytes, owner: str) -> bytes:
    return _aead(master, data_key, b"dk\x00" + owner.encode("utf-8"))


def unwrap(master: bytes, wrapped: bytes, owner: str, path: str) -> bytes:
    try:
        return _open(master, wrapped, b"dk\x00" + owner.encode("utf-8"))
    except InvalidTag:
        raise MemoryStoreError(f"{path}: a data key does not unwrap under the master key (wrong key or altered "
                               "store); restore the TRACELESS_HOME this store was used with") from None


_HEAD = json.JSONEncoder(ensure_ascii=False)  # json.dumps(..., ensure_ascii=False), built once


def _payload(p: Sealed) -> bytes:
    head = _HEAD.encode({"t": p.text, "m": p.meta}).encode("utf-8")
    return struct.pack(">I", len(head)) + head + (p.vector or b"")


def seal(data_key: bytes, artifact_id: str, p: Sealed) -> tuple[bytes, str]:
    """The sealed payload and its keyed digest (the payload is serialised once)."""
    raw = _payload(p)
    return _aead(data_key, raw, artifact_id.encode()), hmac.new(data_key, raw, hashlib.sha256).hexdigest()


def unseal(data_key: bytes, artifact_id: str, blob: bytes) -> Sealed:
    raw = _open(data_key, blob, artifact_id.encode())
    (n,) = struct.unpack(">I", raw[:4])
    head = json.loads(raw[4 : 4 + n].decode("utf-8"))
    vec = raw[4 + n :]
    return Sealed(text=head["t"], vector=vec or None, meta=head["m"])
