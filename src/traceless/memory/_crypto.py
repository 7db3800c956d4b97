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

Each master key file carries a generation after its 32 key bytes (a rotation makes
generation + 1; a file of 32 bytes is generation 0). The commit of a rotation is the commit
point; the old file is shredded right after it, and a process killed in between leaves a
file of a lower generation than the current key: every open of the store shreds those
(``MemoryStore``), and the forget's pending-erasure marker stays until none is left. A file
of a higher generation is never shredded on open: it may be the current key of a newer
copy of the same store (an open of an older copy must not destroy it).

What it does not cover: a copy of ``$TRACELESS_HOME`` taken before the forget together
with a copy of the store, and whatever the filesystem keeps of the removed master-key
file (it is overwritten in place before unlinking; journaling or SSD remapping may
still keep its 32 bytes somewhere).
"""

from __future__ import annotations

import base64
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
           "shred_file", "wrap", "unwrap", "seal", "unseal", "key_generation", "older_keys", "ENCRYPTION_V2", "seal_id",
           "open_id", "is_sealed_id", "ENCRYPTION_V3", "OWNER_REF_PREFIX", "new_index_key", "wrap_index_key",
           "unwrap_index_key", "owner_ref", "wrap_owner_key", "open_data_key"]

ENCRYPTION = "aes-256-gcm/per-owner-data-keys/v1"
ENCRYPTION_V2 = "aes-256-gcm/per-owner-data-keys/v2"
"""v2 (every store created encrypted from issue #22.4 on): session ids are sealed too
(``seal_id``), so copies of the store keep them only as ciphertext under the owner's data
key, which a forget of that owner replaces. v1 stores keep session ids in plaintext."""
ENCRYPTION_V3 = "aes-256-gcm/per-owner-data-keys/v3"
"""v3 (every store created encrypted from issue #22.4's owner ids on): v2, and no owner id in
plaintext: every owner column (``artifacts.owner``, ``data_keys.owner``) holds a blind index
(``owner_ref``: an HMAC of the id under the store's index key), and the id itself is kept only
inside the owner's wrapped data key (``wrap_owner_key``). v1 and v2 stores keep owner ids in
plaintext."""


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


def new_master(store_id: str, generation: int = 1) -> tuple[str, bytes]:
    """Create a fresh master key file for ``store_id`` (durable: file and folder synced);
    returns (key id, key)."""
    d = master_dir(store_id)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = secrets.token_bytes(32)
    kid = master_key_id(key)
    p = d / f"{kid}.key"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, key + struct.pack(">Q", generation))
        os.fsync(fd)
    finally:
        os.close(fd)
    _sync_dir(d)
    return kid, key


def key_generation(p: Path) -> int:
    """The generation a master key file records (0 for a file of the key bytes alone)."""
    with open(p, "rb") as fh:
        raw = fh.read(40)
    return int(struct.unpack(">Q", raw[32:40])[0]) if len(raw) == 40 else 0


def older_keys(store_id: str, kid: str) -> list[Path]:
    """Key files of ``store_id`` superseded by the current key ``kid`` (a lower generation):
    a rotation committed, and its shredding did not finish."""
    d = master_dir(store_id)
    cur = d / f"{kid}.key"
    try:
        gen = key_generation(cur)
    except FileNotFoundError:
        return []
    out = []
    for p in sorted(d.glob("*.key")):
        if p.stem == kid:
            continue
        try:
            if key_generation(p) < gen:
                out.append(p)
        except FileNotFoundError:  # shredded meanwhile by another process
            continue
    return out


def _sync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    """Overwrite a key file with zeros, flush, remove it and sync its folder: when this
    returns, the removal is durable. Another process shredding the same file is no error."""
    try:
        fd = os.open(p, os.O_WRONLY)
    except FileNotFoundError:
        return
    try:
        os.write(fd, b"\x00" * os.fstat(fd).st_size)
        os.fsync(fd)
    finally:
        os.close(fd)
    p.unlink(missing_ok=True)
    _sync_dir(p.parent)


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


OWNER_REF_PREFIX = "o3:"


def new_index_key() -> bytes:
    """A store's owner index key (v3): random, kept in the store wrapped by the master key."""
    return secrets.token_bytes(32)


def wrap_index_key(master: bytes, key: bytes) -> str:
    return base64.b64encode(_aead(master, key, b"owner-index-key")).decode("ascii")


def unwrap_index_key(master: bytes, blob: str, path: str) -> bytes:
    try:
        return _open(master, base64.b64decode(blob), b"owner-index-key")
    except (InvalidTag, ValueError):
        raise MemoryStoreError(f"{path}: the owner index key does not unwrap under the master key (wrong key or "
                               "altered store); restore the TRACELESS_HOME this store was used with") from None


def owner_ref(index_key: bytes, owner: str) -> str:
    """The blind index of an owner id (v3): what every owner column holds. Deterministic under
    the store's index key (lookups stay indexed); without that key no guess can be tested."""
    mac = hmac.new(index_key, b"owner\x00" + owner.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return OWNER_REF_PREFIX + mac.hexdigest()[:32]


def wrap_owner_key(master: bytes, data_key: bytes, owner: str, ref: str) -> bytes:
    """A v3 data key wrapped together with its owner's id (the only place the id is kept), bound
    to the owner's blind index ``ref``."""
    return _aead(master, data_key + owner.encode("utf-8", "surrogatepass"), b"dk3\x00" + ref.encode("ascii"))


def open_data_key(master: bytes, wrapped: bytes, col: str, path: str, *, blind: bool | None = None) -> tuple[bytes, str]:
    """(data key, owner id) of a ``data_keys`` row whose owner column holds ``col``: a v3 blind
    index (``blind``; the id is inside the wrapped key) or, in a v1/v2 store, the owner id
    itself. ``blind=None``: told apart by the prefix (tests and forensic readers)."""
    if not (col.startswith(OWNER_REF_PREFIX) if blind is None else blind):
        return unwrap(master, wrapped, col, path), col
    try:
        raw = _open(master, wrapped, b"dk3\x00" + col.encode("ascii"))
    except InvalidTag:
        raise MemoryStoreError(f"{path}: a data key does not unwrap under the master key (wrong key or altered "
                               "store); restore the TRACELESS_HOME this store was used with") from None
    return raw[:32], raw[32:].decode("utf-8", "surrogatepass")


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


_ID_PREFIX = "s2:"


def _id_key(data_key: bytes) -> bytes:
    return hmac.new(data_key, b"traceless-sealed-id", hashlib.sha256).digest()


def seal_id(data_key: bytes, value: str) -> str:
    """A session id sealed under the owner's data key, deterministically (the nonce is an
    HMAC of the value: equal ids give equal tokens, so the column stays an indexed lookup;
    a nonce repeats only with its plaintext, as in SIV)."""
    k = _id_key(data_key)
    raw = value.encode("utf-8", "surrogatepass")
    nonce = hmac.new(k, raw, hashlib.sha256).digest()[:12]
    return _ID_PREFIX + base64.urlsafe_b64encode(nonce + _cipher(k).encrypt(nonce, raw, b"sid")).decode("ascii")


def is_sealed_id(token: str | None) -> bool:
    return token is not None and token.startswith(_ID_PREFIX)


def open_id(data_key: bytes, token: str) -> str:
    blob = base64.urlsafe_b64decode(token[len(_ID_PREFIX):])
    return _cipher(_id_key(data_key)).decrypt(blob[:12], blob[12:], b"sid").decode("utf-8", "surrogatepass")


def unseal(data_key: bytes, artifact_id: str, blob: bytes) -> Sealed:
    raw = _open(data_key, blob, artifact_id.encode())
    (n,) = struct.unpack(">I", raw[:4])
    head = json.loads(raw[4 : 4 + n].decode("utf-8"))
    vec = raw[4 + n :]
    return Sealed(text=head["t"], vector=vec or None, meta=head["m"])
