"""The sealed-row codec of an encrypted store: the master key, the owners' data keys, the
owner index (v3: owner columns hold blind indexes, ``_crypto.owner_ref``) and the rows they
seal and open (text, vector, meta in one AES-GCM payload; session ids as deterministic
tokens). ``MemoryStore`` holds one; its key rotation (``crypto_shred``) updates it."""

from __future__ import annotations

import json
import secrets
import time
from typing import TYPE_CHECKING, Any

from traceless.errors import MemoryStoreError
from traceless.memory import _crypto
from traceless.memory._types import Artifact, Tier

if TYPE_CHECKING:
    from traceless.memory._store import MemoryStore

__all__ = ["SealedRows"]


def _row_to_artifact(row: Any) -> Artifact:
    return Artifact(
        id=row[0], owner=row[1], tier=Tier(row[2]), kind=row[3], session_id=row[4], seq=row[5],
        text=row[6], vector=row[7], digest=row[8], created_at=row[9], meta=json.loads(row[10]),
    )


class SealedRows:
    """Keys and caches of one store (``master`` is None for a plaintext store)."""

    def __init__(self, store: MemoryStore) -> None:
        self._s = store
        self.master: tuple[str, bytes] | None = None  # (key id, key) of an encrypted store
        self.seal_sids = False  # v2/v3 encrypted store: session ids sealed under the owner's data key
        self.blind = False  # v3 encrypted store: owner columns hold blind indexes (``_crypto.owner_ref``)
        self.oik: bytes | None = None  # v3: the owner index key (unwrapped)
        self.refs: dict[str, str] = {}  # v3: owner id → blind index
        self.names: dict[str, str] = {}  # v3: blind index → owner id
        self.dks: dict[str, bytes] = {}  # owner id → data key (unwrapped)

    def load_master(self) -> None:
        kid = self._s.get_meta("master_key_id") or ""
        if self.master is None or self.master[0] != kid:
            self.master = (kid, _crypto.load_master(self._s.store_id, kid, self._s.path))
            self.dks = {}
            if self.blind:
                blob = self._s.get_meta("owner_index_key")
                if blob is None:
                    raise MemoryStoreError(f"{self._s.path}: an encrypted store (v3) without its owner index key "
                                           "(altered store); restore it from a backup")
                self.oik = _crypto.unwrap_index_key(self.master[1], blob, self._s.path)

    def ocol(self, owner: str) -> str:
        """What an owner column holds for ``owner``: the id itself, or (v3) its blind index."""
        if not self.blind:
            return owner
        ref = self.refs.get(owner)
        if ref is None:
            assert self.oik is not None
            if len(self.refs) >= 1 << 16:
                self.refs.clear()
            ref = self.refs[owner] = _crypto.owner_ref(self.oik, owner)
        return ref

    def oname(self, col: str) -> str:
        """The owner id an owner column's ``col`` stands for (v3: read from the owner's
        wrapped data key)."""
        if not self.blind:
            return col
        name = self.names.get(col)
        if name is None:
            self.load_master()  # another process may have rotated it
            row = self._s._exec("SELECT wrapped FROM data_keys WHERE owner = ?", (col,)).fetchone()
            if row is None:
                raise MemoryStoreError(f"{self._s.path}: no data key for an owner whose artifacts exist (altered store)")
            dk, name = self.open_dk(col, row[0])
            self.dks[name], self.names[col] = dk, name
        return name

    def wrap_dk(self, master: bytes, dk: bytes, owner: str) -> bytes:
        if self.blind:
            return _crypto.wrap_owner_key(master, dk, owner, self.ocol(owner))
        return _crypto.wrap(master, dk, owner)

    def open_dk(self, col: str, wrapped: bytes) -> tuple[bytes, str]:
        assert self.master is not None
        return _crypto.open_data_key(self.master[1], wrapped, col, self._s.path, blind=self.blind)

    def dk(self, owner: str, *, create: bool = False) -> bytes:
        """The owner's data key (unwrapped); created (inside a transaction) on first write."""
        if owner in self.dks:
            return self.dks[owner]
        self.load_master()  # another process may have rotated it
        assert self.master is not None
        col = self.ocol(owner)
        row = self._s._exec("SELECT wrapped FROM data_keys WHERE owner = ?", (col,)).fetchone()
        if row is None:
            if not create:
                raise MemoryStoreError(f"{self._s.path}: no data key for an owner whose artifacts exist (altered store)")
            self._s._require_tx()
            dk = secrets.token_bytes(32)
            self._s._exec("INSERT INTO data_keys(owner, wrapped, created_at) VALUES (?,?,?)",
                       (col, self.wrap_dk(self.master[1], dk, owner), time.time()))
        else:
            dk = self.open_dk(col, row[0])[0]
        if self.blind:
            self.names[col] = owner
        self.dks[owner] = dk
        return dk

    def seal_row(self, art_id: str, owner: str, text: str | None, vec: bytes | None,
                  meta: dict[str, Any]) -> tuple[bytes, str]:
        return _crypto.seal(self.dk(owner, create=True), art_id, _crypto.Sealed(text, vec, meta))

    def art(self, row: Any) -> Artifact:
        if row[11] is None:
            return _row_to_artifact(row)
        sid, owner = row[4], self.oname(row[1])
        try:
            p = _crypto.unseal(self.dk(owner), row[0], row[11])
            if _crypto.is_sealed_id(sid):
                sid = _crypto.open_id(self.dk(owner), sid)
        except _crypto.InvalidTag:
            self.dks.pop(owner, None)  # rotated by another connection: reload once
            p = _crypto.unseal(self.dk(owner), row[0], row[11])
            if _crypto.is_sealed_id(sid):
                sid = _crypto.open_id(self.dk(owner), sid)
        return Artifact(
            id=row[0], owner=owner, tier=Tier(row[2]), kind=row[3], session_id=sid, seq=row[5],
            text=p.text, vector=p.vector, digest=row[8], created_at=row[9], meta=p.meta,
        )

    def sid_col(self, owner: str, session_id: str | None, *, create: bool = False) -> str | None:
        """What the session_id column holds for ``session_id`` of ``owner``: the id itself, or
        (v2 encrypted store) its token sealed under the owner's data key. ``MemoryStoreError``
        when the owner has no data key and ``create`` is False."""
        if not self.seal_sids or session_id is None:
            return session_id
        return _crypto.seal_id(self.dk(owner, create=create), session_id)

    def sid_lookup(self, owner: str, session_id: str) -> str | None:
        """``_sid_col`` for a lookup: None when the owner has no data key (nothing stored)."""
        try:
            return self.sid_col(owner, session_id)
        except MemoryStoreError:
            return None
