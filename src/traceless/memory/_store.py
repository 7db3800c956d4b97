"""The memory store: one SQLite file (WAL, ``secure_delete``) or a PostgreSQL database
(``postgresql://`` URL, see ``_backend``), artifacts in tiers, lineage edges, closure
queries as recursive CTEs over indexed columns.

Every mutating method must run inside ``transaction()``; nested calls join the outer
transaction, so a whole forget is one atomic unit.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import hashlib
import hmac
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from traceless.errors import ConfigError, MemoryStoreError
from traceless.memory import _crypto
from traceless.memory._backend import Backend, Cursor, SQLiteBackend, is_url, open_backend
from traceless.memory._codec import SealedRows
from traceless.memory._gate import GateEntry, WriteGate
from traceless.memory._gate_index import GateIndex, strings
from traceless.memory._probe import check_database_pg, check_file
from traceless.memory._receipt_log import ReceiptLog
from traceless.memory._schema import SCHEMA_VERSION, check_version, check_version_pg, migrate, migrate_pg
from traceless.memory._scrub_policy import FREE_SPACE, ScrubPolicy
from traceless.memory._types import Artifact, Hit, LineageEdge, Tier, digest_text
from traceless.memory._writes import COLUMNS, PendingWrites
from traceless.registry import Registry

if TYPE_CHECKING:  # numpy is imported where vectors are handled: `memory show` starts without it
    import numpy as np
    import numpy.typing as npt

__all__ = ["MemoryStore", "NewArtifact", "ERASURE_FINISHERS"]

DEFAULT_FINISHERS = ("traceless.forget._finish",)
"""The modules that register the built-in erasure finishers: the forget package's completion
of the stored receipt. Named, not imported (memory imports nothing of forget): the registry
imports them the first time an open finishes an erasure, in whatever process opens the store."""

ERASURE_FINISHERS: Registry[Callable[[MemoryStore, str], None]] = Registry(
    "erasure finisher", defaults=DEFAULT_FINISHERS)
"""Each called with (store, receipt id) when an open finishes a forget's interrupted erasure
(``@ERASURE_FINISHERS.register(name)``)."""

_PREFIX = {Tier.RAW: "r", Tier.SUMMARY: "s", Tier.EMBEDDING: "e", Tier.CACHE: "c"}
_COLS = ", ".join(COLUMNS)
_NCOLS = len(COLUMNS)
_SCRUB_FRAMES = 1000  # scrub once the WAL holds this many frames (SQLite's own autocheckpoint default)
_IN_CHUNK = 500  # ids per IN (...) list: well under every engine's bound-parameter limit
Access = Literal["create", "write", "read"]
_NEW_ENCRYPTION = _crypto.ENCRYPTION_V3  # the format a new encrypted store gets (tests make older ones with it)


@dataclass(frozen=True)
class NewArtifact:
    """An artifact to insert (``MemoryStore.add_many``); the store gives it id, digest and time."""

    owner: str
    """User/tenant that owns it."""
    tier: Tier
    """Storage tier (it picks the id prefix and counter)."""
    kind: str
    """What it is inside the tier (turn, key_facts, vector …)."""
    text: str | None = None
    """Text payload (checked against the write gate)."""
    vector: npt.NDArray[np.float32] | None = None
    """Embedding, stored as float32 bytes."""
    session_id: str | None = None
    """Session it came from."""
    seq: int = 0
    """Order inside its session."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Free-form metadata."""
    parents: tuple[str, ...] = ()
    """Ids it was derived from: one lineage edge child → parent each, made by ``op``."""
    op: str = ""
    """Operation of those edges (summarize, embed, extract …)."""
    params: dict[str, Any] = field(default_factory=dict)
    """Parameters of those edges."""


# UTF-8, not \uXXXX escapes: a byte scan for a non-ASCII literal must see the same bytes the
# text columns hold. One encoder for every call (json.dumps with options builds one per call).
_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False)

# Stores dropped without close(), waiting to be closed outside any lock (``MemoryStore.__del__``):
# a deque, so the finaliser appends without a lock of its own.
_ABANDONED: collections.deque[MemoryStore] = collections.deque()


def close_abandoned() -> None:
    """Close the stores that were dropped without ``close()`` (called at every open and close,
    and at exit). Never called with a store's or the scrub registry's lock held."""
    while True:
        try:
            store = _ABANDONED.popleft()
        except IndexError:
            return
        with contextlib.suppress(Exception):
            store.close()


atexit.register(close_abandoned)


def _dumps(obj: Any) -> str:
    return _ENCODER.encode(obj)


def check_owner(owner: str) -> None:
    """Owner ids are compared byte for byte; refuse ids that would silently differ from
    what a person typed (surrounding whitespace, control characters, empty)."""
    if not owner or not owner.strip():
        raise ConfigError("an owner (user id) must not be blank")
    if owner != owner.strip() or any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in owner):
        raise ConfigError(
            f"owner {owner!r} has surrounding whitespace or control characters; use the id without them"
        )


def _resourced(meta: dict[str, Any], old: dict[str, str], new: dict[str, str]) -> dict[str, Any]:
    """``meta`` with each recorded source digest that named a source's old digest naming its new one."""
    src = meta.get("sources")
    if not isinstance(src, dict):
        return meta
    return {**meta, "sources": {i: new[i] if i in new and d == old.get(i) else d for i, d in src.items()}}


class MemoryStore:
    """Tiered, provenance-tracked memory in one SQLite file or a PostgreSQL database.

    ``path=":memory:"`` gives a private in-memory store (tests); a ``postgresql://`` URL
    opens (and migrates) that database. ``encrypt``: seal every artifact under per-owner
    data keys (``_crypto``); chosen when a store is created, on by default for PostgreSQL
    (whose WAL, replicas and backups this process cannot scan or erase), off for SQLite.

    The store enforces the exact-literal write gate on every write (``add``,
    ``update_text``, ``update_vector``): no caller can forget to pass it. Writing without it
    is an explicit, recorded choice (``with store.ungated(reason): ...``). ``gate_key``
    overrides ``$TRACELESS_HOME/gate.key`` (the studies keep one per run).

    ``scrub`` (plaintext SQLite files): keep every b-tree page's free space zeroed, so a
    forget erases physically by rewriting only the pages it touched (``_scrub``).
    ``scrub=False`` is the older behaviour, kept for comparison: each forget rebuilds the
    whole file (VACUUM); opening a file with it switches the file's invariant off.

    ``access``: ``create`` makes a store in a new or empty file (or database) and opens an
    existing store; ``write`` opens an existing store only; ``read`` opens an existing store
    of the current schema read-only (nothing is migrated, checkpointed or finished). Every
    access refuses a database that is not a traceless store (``NotAStoreError``): traceless
    never modifies another application's database. ``on_migrate(old, new)`` is called before
    a write access migrates a store of an older schema.
    """

    def __init__(
        self, path: str | os.PathLike[str] = ":memory:", *, timeout: float = 5.0, gate_key: bytes | None = None,
        encrypt: bool | None = None, scrub: bool = True, access: Access = "create",
        on_migrate: Callable[[int, int], None] | None = None,
    ) -> None:
        close_abandoned()  # stores dropped without close(), outside any lock (``__del__``)
        if access not in ("create", "write", "read"):
            raise ConfigError(f"access must be create, write or read, not {access!r}")
        if not isinstance(path, (str, os.PathLike)):  # str() of any object would name a new file
            raise ConfigError(f"a store is opened from a file path or a postgresql:// URL, not a {type(path).__name__} "
                              "(to reuse an open store, pass the store itself where a store is taken)")
        self.access, self.read_only, self._on_migrate = access, access == "read", on_migrate
        if str(path) != ":memory:" and not is_url(str(path)):
            check_file(str(path), access)
        self._b: Backend = open_backend(str(path), timeout, read_only=self.read_only)
        self.path = self._b.where
        """The file path, or the URL without its password."""
        self._lock = threading.RLock()
        self._depth = 0
        self._gate = GateIndex(self, gate_key)
        self._receipts = ReceiptLog(self)
        self.finished_erasures: list[str] = []
        """Receipt ids whose interrupted physical erasure this open completed."""
        self._codec = SealedRows(self)  # keys and sealed rows of an encrypted store (``_codec``)
        self._created_keys: list[Path] = []  # master key files made in this transaction
        self._shred_after_commit: list[Path] = []
        self._pending = PendingWrites()  # the one write path of new rows (``_writes``)
        self._bulk = False  # inside bulk(): rows wait for the block's end
        self._timeout = timeout
        self._sp = ScrubPolicy(self, scrub)  # the free-space scrub of a plaintext file (``_scrub_policy``)
        try:
            new = self._prepare()
            _ = self.store_id  # an altered id is refused before anything uses it
        except BaseException as e:
            self._b.close()
            if isinstance(e, self._b.errors):
                raise self._translate(e) from e
            raise
        self._open_encryption(encrypt)
        try:
            self._sp.init(new)
        except BaseException:
            self._b.close()
            lock, self._sp.lock = self._sp.lock, None
            if lock is not None:
                lock.release_ref()
            raise
        self._finish_pending_erasure()

    def _prepare(self) -> bool:
        """Open and migrate; True when this open created the file's database."""
        if not isinstance(self._b, SQLiteBackend):
            check_database_pg(self._conn, self.path, self.access)
            self._before_migrate(check_version_pg(self._conn, self.path))
            migrate_pg(self._conn, self.path)
            return False
        conn = self._b.conn
        new = int(conn.execute("PRAGMA page_count").fetchone()[0]) == 0
        conn.execute("PRAGMA secure_delete = ON")
        # refuse a newer file BEFORE anything may write to it (switching the journal
        # mode to WAL rewrites the file header)
        self._before_migrate(check_version(conn, self.path))
        if self.read_only:
            return False
        if self.path != ":memory:":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        migrate(conn, self.path)
        return new

    def _before_migrate(self, version: int) -> None:
        """A read access refuses a store of an older schema (reading never migrates); a
        write access says it is about to migrate one."""
        if version >= SCHEMA_VERSION or version == 0:
            return
        if self.read_only:
            raise MemoryStoreError(
                f"{self.path} has schema version {version}; this traceless reads version {SCHEMA_VERSION}. Reading "
                "never migrates a store: migrate it once with a write command (e.g. `traceless memory migrate "
                f"--db {self.path}`), then read it. Nothing was changed."
            )
        if self._on_migrate is not None:
            self._on_migrate(version, SCHEMA_VERSION)

    @property
    def _conn(self) -> Any:
        """The engine's connection (sqlite3 or psycopg); tests poke at it."""
        return self._b.conn  # type: ignore[attr-defined]

    @property
    def backend(self) -> str:
        """``sqlite`` or ``postgres``."""
        return self._b.dialect

    @property
    def scannable(self) -> bool:
        """True when every byte the store wrote lives in files this process can scan
        (SQLite); False for a server's files (PostgreSQL)."""
        return self._b.scannable

    # ----------------------------------------------------------------- encryption at rest
    @property
    def encrypted(self) -> bool:
        return self._codec.master is not None

    def _open_encryption(self, encrypt: bool | None) -> None:
        mode = self.get_meta("encryption")
        if self.read_only:
            encrypt = False  # a reader never switches encryption on
        if encrypt is None:  # the backend's default, for a store still empty (PostgreSQL: on)
            encrypt = self._b.dialect == "postgres" and self._exec("SELECT 1 FROM artifacts LIMIT 1").fetchone() is None
        if mode is None and encrypt:
            if self._exec("SELECT 1 FROM artifacts LIMIT 1").fetchone() is not None:
                self._b.close()
                raise ConfigError(f"{self.path} already holds plaintext artifacts; encryption is chosen when a "
                                  "store is created: write into a new store with encryption on")
            with self.transaction():
                kid, key = _crypto.new_master(self.store_id)
                self._created_keys.append(_crypto.master_dir(self.store_id) / f"{kid}.key")
                mode = _NEW_ENCRYPTION
                self.set_meta("encryption", mode)
                self.set_meta("master_key_id", kid)
                if mode == _crypto.ENCRYPTION_V3:
                    self.set_meta("owner_index_key", _crypto.wrap_index_key(key, _crypto.new_index_key()))
        self._codec.seal_sids = mode in (_crypto.ENCRYPTION_V2, _crypto.ENCRYPTION_V3)
        self._codec.blind = mode == _crypto.ENCRYPTION_V3
        if mode is not None:
            try:
                self._load_master()
            except BaseException:
                self._b.close()
                raise

    @property
    def sealed_session_ids(self) -> bool:
        """True for an encrypted store that seals session ids (encryption v2 and v3)."""
        return self._codec.seal_sids

    @property
    def blind_owner_ids(self) -> bool:
        """True for an encrypted store that keeps no owner id in plaintext (encryption v3):
        owner columns hold keyed blind indexes, the ids live inside the wrapped data keys."""
        return self._codec.blind

    def _load_master(self) -> None:
        self._codec.load_master()

    def _ocol(self, owner: str) -> str:
        """What an owner column holds for ``owner`` (``_codec``)."""
        return self._codec.ocol(owner)

    def _dk(self, owner: str, *, create: bool = False) -> bytes:
        return self._codec.dk(owner, create=create)

    def _art(self, row: Any) -> Artifact:
        return self._codec.art(row)

    def master_key_gone(self, kid: str) -> bool:
        """True when no file of master key ``kid`` is left for this store."""
        return not (_crypto.master_dir(self.store_id) / f"{kid}.key").exists()

    def older_master_keys(self) -> list[str]:
        """Ids of master key files the current key superseded and that still exist (a forget
        killed between its commit and the shredding); empty for a plaintext store."""
        if self._codec.master is None:
            return []
        return [p.stem for p in _crypto.older_keys(self.store_id, self.get_meta("master_key_id") or "")]

    def _shred_older_keys(self) -> bool:
        """Shred every superseded master key file, under the write lock (no rotation is in
        flight meanwhile); True when none is left."""
        if not self.older_master_keys():
            return True
        with contextlib.suppress(MemoryStoreError, OSError, *self._b.errors), self.transaction():
            for p in _crypto.older_keys(self.store_id, self.get_meta("master_key_id") or ""):
                _crypto.shred_file(p)
            self.log_event("old_master_keys_shredded", "superseded master key file(s) left by an interrupted "
                                                       "forget were shredded on open")
        return not self.older_master_keys()

    def crypto_shred(self, owner: str, *, erase: bool) -> dict[str, Any]:
        """Destroy the keys that old copies of this store would need (see ``_crypto``).

        ``erase``: the owner is gone, their data key is deleted; otherwise their surviving
        artifacts are re-sealed under a fresh data key. Then every data key is re-wrapped
        under a new master key; the old master key file is shredded after the commit."""
        self._require_tx()
        assert self._codec.master is not None
        old_kid = self._codec.master[0]
        resealed, col = 0, self._ocol(owner)
        if erase:
            self._exec("DELETE FROM data_keys WHERE owner = ?", (col,))
            self._codec.names.pop(col, None)
            self._codec.refs.pop(owner, None)
        else:
            rows = self._rows(f"SELECT {_COLS} FROM artifacts WHERE owner = ?", (col,)).fetchall()
            arts = [self._art(r) for r in rows]
            self._exec("DELETE FROM data_keys WHERE owner = ?", (col,))
            self._codec.dks.pop(owner, None)
            old = {a.id: a.digest for a in arts}
            new: dict[str, str] = {}
            # sources first: a consolidation records its sources' digests (keyed, so they
            # change with the key) and must name the new ones, as it did the old
            for a in sorted(arts, key=lambda a: isinstance(a.meta.get("sources"), dict)):
                meta = _resourced(a.meta, old, new)
                sealed, new[a.id] = self._codec.seal_row(a.id, owner, a.text, a.vector, meta)
                self._rows("UPDATE artifacts SET sealed = ?, digest = ?, session_id = ? WHERE id = ?",
                           (sealed, new[a.id], self._codec.sid_col(owner, a.session_id, create=True), a.id))
                resealed += 1
        self._codec.dks.pop(owner, None)
        wrapped = {c: self._codec.open_dk(c, w) for c, w in self._exec("SELECT owner, wrapped FROM data_keys").fetchall()}
        gen = _crypto.key_generation(_crypto.master_dir(self.store_id) / f"{old_kid}.key") + 1
        kid, key = _crypto.new_master(self.store_id, gen)
        self._created_keys.append(_crypto.master_dir(self.store_id) / f"{kid}.key")
        try:  # one batch: a forget's cost should not grow with round trips per owner
            self._b.executemany("UPDATE data_keys SET wrapped = ? WHERE owner = ?",
                                [(self._codec.wrap_dk(key, dk, o), c) for c, (dk, o) in wrapped.items()])
        except self._b.errors as e:
            raise self._translate(e) from e
        if self._codec.blind:  # the index key stays (owner columns keep their values), re-wrapped like the data keys
            assert self._codec.oik is not None
            self.set_meta("owner_index_key", _crypto.wrap_index_key(key, self._codec.oik))
        self.set_meta("master_key_id", kid)
        self._codec.master = (kid, key)
        d = _crypto.master_dir(self.store_id)
        # the old key, and any left by a rotation that died before its shredding
        self._shred_after_commit += [p for p in d.glob("*.key") if p.stem not in (kid,)]
        return {"data_key": "destroyed" if erase else "rotated", "resealed": resealed,
                "old_master_key": old_kid, "new_master_key": kid}

    def _finish_pending_erasure(self) -> None:
        """A forget commits, then erases old bytes physically (scrub or VACUUM, then WAL
        truncation). If the process died in between, the commit left a marker: finish the
        erasure now."""
        keys_gone = self.read_only or self._shred_older_keys()  # the marker covers the shredding too
        pending = self.get_meta("pending_erasure")
        if not pending or self.read_only or not keys_gone:  # a reader leaves it to a write access
            return
        with contextlib.suppress(MemoryStoreError, *self._b.errors):
            # a scrubbing store's frames are still in the WAL (it is truncated only after
            # they are scrubbed): a checkpoint finishes the erasure, no rebuild; an encrypted
            # store's old pages are ciphertext under destroyed keys
            if self.checkpoint() if self.scrubs or self.encrypted else self.vacuum():
                with self.transaction():
                    self._exec("DELETE FROM meta WHERE key = 'pending_erasure'")
                    self.log_event("erasure_finished", f"receipt {pending}: physical erasure completed on reopen")
                self.checkpoint()
                self.finished_erasures.append(pending)
                for entry in ERASURE_FINISHERS.entries():
                    with contextlib.suppress(Exception):  # the erasure stands; its receipt stays as signed
                        entry.obj(self, pending)

    # ----------------------------------------------------------------- plumbing
    def _translate(self, e: BaseException) -> MemoryStoreError:
        return self._b.translate(e)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[MemoryStore]:
        """One atomic unit. Nested uses join the outermost transaction."""
        if self.read_only:
            raise MemoryStoreError(f"internal: {self.path} was opened read-only (access='read'); open it with "
                                   "access='write' to change it")
        with self._lock, contextlib.ExitStack() as outer:
            if self._depth == 0:
                outer.enter_context(self._sp.writer())
                try:
                    self._b.begin()
                except self._b.errors as e:
                    raise self._translate(e) from e
                self._gate.cache = {}  # descriptors are re-read under the write lock
            self._depth += 1
            try:
                if self._depth == 1:
                    self._sp.refresh()  # the flag is read under the write lock too
                yield self
            except BaseException:
                self._depth -= 1
                if self._depth == 0:
                    with contextlib.suppress(*self._b.errors):  # a dropped connection has nothing to roll back
                        self._b.rollback()
                    self._after_rollback()
                raise
            self._depth -= 1
            if self._depth == 0:
                failed: tuple[type[BaseException], ...] = (*self._b.errors, MemoryStoreError)
                try:
                    self._b.commit()
                except failed as e:
                    with contextlib.suppress(*self._b.errors):
                        self._b.rollback()
                    self._after_rollback()
                    if isinstance(e, MemoryStoreError):
                        raise
                    raise self._translate(e) from e
                for p in self._shred_after_commit:
                    # committed: a file that cannot be shredded now stays for the next open
                    # (``_shred_older_keys``); the forget's marker and receipt say so
                    with contextlib.suppress(OSError):
                        _crypto.shred_file(p)
                self._shred_after_commit, self._created_keys = [], []
                if self.scrubs and not self._sp.busy and self._sp.wal_frames() >= _SCRUB_FRAMES:
                    # still under the writer lock: no frame can slip in unscrubbed. The commit
                    # stands; a scrub that fails leaves the frames in the WAL for the next one
                    with contextlib.suppress(MemoryStoreError):
                        self._sp.scrub()

    def _after_rollback(self) -> None:
        """Keys made for a transaction that did not commit are removed; caches reloaded."""
        for p in self._created_keys:
            with contextlib.suppress(OSError):
                _crypto.shred_file(p)
        self._created_keys, self._shred_after_commit, self._codec.dks = [], [], {}
        if self._codec.master is not None:
            self._codec.master = None
            with contextlib.suppress(MemoryStoreError):
                self._load_master()

    def _require_tx(self) -> None:
        if self._depth == 0:
            raise MemoryStoreError("internal: writes must run inside MemoryStore.transaction()")

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """A statement on the store's own tables (meta, keys, gate, receipts, events); one on
        artifacts or lineage goes through ``_rows``."""
        try:
            return self._b.execute(sql, params)
        except self._b.errors as e:
            raise self._translate(e) from e

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """A statement on stored artifacts or lineage: every waiting write is sent first."""
        self._flush()
        return self._exec(sql, params)

    # ----------------------------------------------------------------- the write path
    def _write(self, rows: Sequence[tuple[Any, ...]], edges: Sequence[tuple[str, str, str, str]]) -> None:
        """Put new rows on the one write path; sent now, or (``bulk()``) at the block's end."""
        self._pending.put(rows, edges)
        if not self._bulk or self._pending.full:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        try:
            self._pending.flush(self._b, self.set_meta, bulk=self._bulk)
        except self._b.errors as e:
            raise self._translate(e) from e

    @contextlib.contextmanager
    def bulk(self) -> Iterator[MemoryStore]:
        """A transaction whose inserts travel in batches: ``add``/``add_edge`` rows wait on
        the write path (``_writes``) until the block ends or ``BATCH_ROWS`` artifacts wait
        (PostgreSQL: one COPY of the artifacts); ids come from counters read once. The stored
        rows are those the same calls write without it, and a read in the block sees every
        earlier write (``_rows`` flushes). Nested uses join the outer batch."""
        with self.transaction():
            if self._bulk:
                yield self
                return
            self._bulk = True
            try:
                yield self
                self._flush()
            finally:
                self._bulk = False
                self._pending.clear()

    def checkpoint(self) -> bool:
        """Flush the WAL into the main file and truncate it to zero bytes, so no old page
        images (which may hold forgotten text) stay in the WAL or the main file. A store that
        keeps its free space zeroed (``scrubs``) also scrubs every page the WAL held.

        Returns False when it could not complete within the timeout: another connection
        still reads an older snapshot, whose pages stay on disk until a later checkpoint.
        """
        if self.path == ":memory:" or not self.scannable or self.read_only:
            return True  # PostgreSQL: the server owns its WAL (see docs/scale.md); a reader writes nothing
        with self._lock, self._sp.writer():
            if self.scrubs:
                return self._sp.scrub()
            row = self._exec("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return row is None or int(row[0]) == 0

    # ----------------------------------------------------------------- free-space scrub
    @property
    def scrubs(self) -> bool:
        """True while the store keeps every b-tree page's free space zeroed, so a forget
        rewrites only the pages it touched (``checkpoint``) instead of the whole file."""
        return self._sp.on

    @property
    def needs_vacuum(self) -> bool:
        """True when erasing a forget's old bytes needs a rebuild (VACUUM): a plaintext store
        that does not keep its free space zeroed (an older SQLite file until its first VACUUM,
        a plaintext PostgreSQL database). An encrypted store never does."""
        return not self.encrypted and not self.scrubs

    def vacuum(self) -> bool:
        """Rebuild the file from its live content, then checkpoint (see ``checkpoint``).

        ``secure_delete`` zeroes deleted cells and freed pages, but when SQLite rebalances
        a b-tree page it can leave bytes of cells that lived there earlier in the page's
        unallocated gap. VACUUM writes every page afresh, so only live content remains.
        Returns ``checkpoint()``'s verdict. Must not run inside a transaction.
        """
        if self._depth:
            raise MemoryStoreError("internal: vacuum() cannot run inside a transaction")
        with self._lock, self._sp.writer():
            # PostgreSQL: VACUUM marks dead tuples' space reusable (it does not overwrite them;
            # an encrypted store's guarantee does not rest on it)
            self._exec("VACUUM" if self.scannable else "VACUUM artifacts")
            done = self.checkpoint()
            if done and self._sp.lock is not None and self._sp.wanted and not self.scrubs:
                # every page is fresh: from here on, scrubbing the touched pages keeps it so
                with self.transaction():
                    self.set_meta(FREE_SPACE, "zeroed")
                self._sp.refresh()
                done = self.checkpoint()
        return done

    def integrity_check(self) -> list[str]:
        """``PRAGMA integrity_check``: ``["ok"]`` for a sound file, else SQLite's findings."""
        if not self.scannable:
            self._exec("SELECT count(*) FROM artifacts")  # the server checks its own pages
            return ["ok"]
        return [str(r[0]) for r in self._exec("PRAGMA integrity_check").fetchall()]

    def close(self) -> None:
        with contextlib.suppress(MemoryStoreError, *self._b.errors):
            self.checkpoint()
        self._b.close()
        lock, self._sp.lock = self._sp.lock, None
        if lock is not None:
            lock.release_ref()
        close_abandoned()

    def __del__(self) -> None:
        # A store dropped without close(): SQLite's own close-time checkpoint would copy the
        # WAL into the main file unscrubbed, so it must be closed through close(). Not here:
        # a collection runs finalisers inside whatever code allocated, which may hold the
        # scrub registry or a writer lock that close() takes (a hang for good). The store is
        # queued (kept alive) and closed at the next open or close, or at exit.
        with contextlib.suppress(Exception):
            if self._sp.lock is not None:
                _ABANDONED.append(self)

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- ids / meta
    def _next_ids(self, tiers: Sequence[Tier]) -> list[str]:
        """Ids for new artifacts of ``tiers`` (in order), each tier's counter advanced once."""
        last: dict[Tier, int] = {}
        for tier, n in Counter(tiers).items():
            key = f"seq:{tier.value}"
            if self._bulk:  # bulk(): the counter is read once, written with the batch
                start = self._pending.seq.get(key)
                last[tier] = int(self.get_meta(key) or 0) if start is None else start
                self._pending.seq[key] = last[tier] + n
                continue
            if self._b.dialect == "postgres":  # one round trip to the server instead of two
                (top,) = self._exec(
                    "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
                    "SET value = (CAST(meta.value AS BIGINT) + ?)::text RETURNING value", (key, str(n), n)).fetchone()
                last[tier] = int(top) - n
                continue
            row = self._exec("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            last[tier] = int(row[0]) if row else 0
            self._exec(self._b.upsert("meta", ("key", "value"), ("key",), replace=True), (key, str(last[tier] + n)))
        out = []
        for tier in tiers:
            last[tier] += 1
            out.append(f"{_PREFIX[tier]}-{last[tier]:08d}")
        return out

    @property
    def store_id(self) -> str:
        """A random id made when the file was created; receipts are bound to it. Checked
        against the format traceless makes (``_crypto.check_store_id``): an altered value is
        an error, never a path."""
        sid = self.get_meta("store_id")
        if sid is None:
            return "memory" if self.path == ":memory:" else ""
        return _crypto.check_store_id(sid, self.path)

    def log_event(self, kind: str, detail: str = "") -> None:
        """Append to the store's event log (ungated writes, finished erasures)."""
        self._require_tx()
        self._exec("INSERT INTO events(at, kind, detail) VALUES (?,?,?)", (time.time(), kind, detail))

    def events(self) -> list[tuple[float, str, str]]:
        return [(r[0], r[1], r[2]) for r in self._exec("SELECT at, kind, detail FROM events ORDER BY id")]

    def get_meta(self, key: str) -> str | None:
        row = self._exec("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._require_tx()
        self._exec(self._b.upsert("meta", ("key", "value"), ("key",), replace=True), (key, value))

    # ----------------------------------------------------------------- writes
    def add(
        self,
        *,
        owner: str,
        tier: Tier,
        kind: str,
        text: str | None = None,
        vector: npt.NDArray[np.float32] | None = None,
        session_id: str | None = None,
        seq: int = 0,
        meta: dict[str, Any] | None = None,
        parents: Iterable[str] = (),
        op: str = "",
        params: dict[str, Any] | None = None,
    ) -> Artifact:
        """Insert one artifact (and lineage edges to ``parents`` with ``op``/``params``).

        Raises ``GateBlockedError`` (nothing inserted) when ``text`` carries a value the
        owner asked to forget."""
        return self.add_many([NewArtifact(owner=owner, tier=tier, kind=kind, text=text, vector=vector,
                                          session_id=session_id, seq=seq, meta=meta or {}, parents=tuple(parents),
                                          op=op, params=params or {})])[0]

    def add_many(self, new: Sequence[NewArtifact]) -> list[Artifact]:
        """Insert artifacts in order, as ``add`` one by one would (same ids, rows and edges),
        with one statement per table instead of a few per artifact.

        Every owner and text is checked before anything is inserted: a ``GateBlockedError``
        or a bad owner leaves the batch out entirely."""
        self._require_tx()
        for owner in dict.fromkeys(n.owner for n in new):
            check_owner(owner)
        checked: set[tuple[str, str]] = set()
        for n in new:
            self.gate_check(n.owner, n.text)
            self._gate.check_fields(n.owner, n.session_id, n.meta, checked)
        self._gate.check_split(new)
        ids = self._next_ids([n.tier for n in new])
        made = [self._artifact(art_id, n) for art_id, n in zip(ids, new, strict=True)]
        arts, rows = [a for a, _ in made], [r for _, r in made]
        dumped: dict[int, str] = {}  # one dump per params object: a batch often shares one
        edges = [(a.id, p, n.op, dumped.get(id(n.params)) or dumped.setdefault(id(n.params), _dumps(n.params)))
                 for a, n in zip(arts, new, strict=True) for p in n.parents]
        self._write(rows, edges)
        return arts

    def _artifact(self, art_id: str, n: NewArtifact) -> tuple[Artifact, tuple[Any, ...]]:
        """The artifact ``n`` becomes under ``art_id``, and its row: plaintext columns, or
        only the sealed payload (then the digest is keyed)."""
        if n.vector is not None:
            import numpy as np

            vec: bytes | None = np.asarray(n.vector, dtype=np.float32).tobytes()
        else:
            vec = None
        if self.encrypted:
            sealed, digest = self._codec.seal_row(art_id, n.owner, n.text, vec, n.meta)
            payload: tuple[Any, ...] = (None, None, "{}", sealed)
        else:
            digest = digest_text(n.text, vec)
            payload = (n.text, vec, _dumps(n.meta), None)
        a = Artifact(id=art_id, owner=n.owner, tier=n.tier, kind=n.kind, session_id=n.session_id, seq=n.seq,
                     text=n.text, vector=vec, digest=digest, created_at=time.time(), meta=n.meta)
        sid = self._codec.sid_col(n.owner, n.session_id, create=True) if self.encrypted else n.session_id
        return a, (a.id, self._ocol(a.owner), a.tier.value, a.kind, sid, a.seq, payload[0], payload[1], a.digest,
                   a.created_at, payload[2], payload[3])

    def add_edge(self, child: str, parent: str, op: str, params: dict[str, Any]) -> None:
        self._require_tx()
        self._write((), [(child, parent, op, _dumps(params))])

    def update_text(self, artifact_id: str, text: str, *, meta: dict[str, Any] | None = None,
                    current: Artifact | None = None) -> Artifact:
        """Rewrite an artifact's text in place (vector untouched: a stale vector stays stale).
        ``current``: the artifact as the caller read it in this transaction (a big text is
        not read again); used only when its digest is still the stored one."""
        self._require_tx()
        row = self._rows("SELECT digest FROM artifacts WHERE id = ?", (artifact_id,)).fetchone()
        fresh = current is not None and current.id == artifact_id and row is not None and row[0] == current.digest
        a = current if fresh and current is not None else self.get(artifact_id)
        self.gate_check(a.owner, text, old=a.text)
        if meta is not None and meta != a.meta:
            old_strings = set(strings(a.meta))
            for value in strings(meta):
                if value not in old_strings:
                    self.gate_check(a.owner, value)
        new_meta = a.meta if meta is None else meta
        # the row written is the artifact returned: no second read of a big text
        a = a.model_copy(update={"text": text, "meta": new_meta})
        if self.encrypted:
            sealed, digest = self._codec.seal_row(a.id, a.owner, text, a.vector, new_meta)
            self._rows("UPDATE artifacts SET sealed = ?, digest = ? WHERE id = ?", (sealed, digest, artifact_id))
            return a.model_copy(update={"digest": digest})
        digest = digest_text(text, a.vector)
        self._rows("UPDATE artifacts SET text = ?, digest = ?, meta = ? WHERE id = ?",
                   (text, digest, _dumps(new_meta), artifact_id))
        return a.model_copy(update={"digest": digest})

    def update_vector(self, artifact_id: str, vector: npt.NDArray[np.float32], text: str | None) -> Artifact:
        """Replace an embedding's vector and source text (re-embedding)."""
        self._require_tx()
        a = self.get(artifact_id)
        self.gate_check(a.owner, text, old=a.text)
        import numpy as np

        vec = np.asarray(vector, dtype=np.float32).tobytes()
        if self.encrypted:
            sealed, digest = self._codec.seal_row(a.id, a.owner, text, vec, a.meta)
            self._rows("UPDATE artifacts SET sealed = ?, digest = ? WHERE id = ?", (sealed, digest, artifact_id))
            return self.get(artifact_id)
        self._rows(
            "UPDATE artifacts SET vector = ?, text = ?, digest = ? WHERE id = ?",
            (vec, text, digest_text(text, vec), artifact_id),
        )
        return self.get(artifact_id)

    def delete(self, ids: Iterable[str]) -> int:
        """Hard-delete artifacts (secure_delete zeroes their bytes). Lineage edges are kept
        as id-only records so the closure of a removed source stays checkable."""
        self._require_tx()
        n = 0
        for i in ids:
            n += self._rows("DELETE FROM artifacts WHERE id = ?", (i,)).rowcount
        return n

    def delete_lineage(self, ids: Iterable[str]) -> int:
        """Drop every lineage edge touching ``ids`` (a user's erasure: the edges name their records)."""
        self._require_tx()
        n = 0
        for i in ids:
            n += self._rows("DELETE FROM lineage WHERE child = ? OR parent = ?", (i, i)).rowcount
        return n

    def rename_session(self, owner: str, old: str, new: str) -> int:
        """Give ``owner``'s artifacts of session ``old`` the session id ``new`` (an id that
        itself holds a forgotten value is replaced by a pseudonym)."""
        self._require_tx()
        self.gate_check(owner, new)
        old_col = self._codec.sid_lookup(owner, old)
        if old_col is None:
            return 0
        return int(self._rows("UPDATE artifacts SET session_id = ? WHERE owner = ? AND session_id = ?",
                              (self._codec.sid_col(owner, new, create=True), self._ocol(owner), old_col)).rowcount)

    def present_sessions(self, pairs: Iterable[tuple[str, str]], *, tier: Tier = Tier.RAW) -> set[tuple[str, str]]:
        """The (owner, session id) pairs among ``pairs`` that hold an artifact of ``tier``:
        one indexed lookup per owner and chunk of ids, not one query per session."""
        by_owner: dict[str, dict[str, None]] = {}
        for owner, sid in pairs:
            by_owner.setdefault(owner, {})[sid] = None
        found: set[tuple[str, str]] = set()
        for owner, sids in by_owner.items():
            cols = {sid: self._codec.sid_lookup(owner, sid) for sid in sids}  # sealed per owner (v2)
            back = {c: sid for sid, c in cols.items() if c is not None}
            uniq = list(back)
            for i in range(0, len(uniq), _IN_CHUNK):
                chunk = uniq[i:i + _IN_CHUNK]
                # neither a tier term nor DISTINCT: with either, SQLite's planner may walk all the
                # owner's rows through (owner, tier, kind) instead of seeking (owner, session_id)
                rows = self._rows(
                    f"SELECT session_id, tier FROM artifacts WHERE owner = ? AND session_id IN "
                    f"({','.join('?' * len(chunk))})", (self._ocol(owner), *chunk))
                found |= {(owner, back[r[0]]) for r in rows if r[1] == tier.value}
        return found

    def session_ids(self, owner: str) -> list[str]:
        cols = [r[0] for r in self._rows(
            "SELECT DISTINCT session_id FROM artifacts WHERE owner = ? AND session_id IS NOT NULL ORDER BY 1",
            (self._ocol(owner),))]
        if not self._codec.seal_sids:
            return cols
        return sorted(_crypto.open_id(self._dk(owner), c) if _crypto.is_sealed_id(c) else c for c in cols)

    # ----------------------------------------------------------------- reads
    def get(self, artifact_id: str) -> Artifact:
        row = self._rows(f"SELECT {_COLS} FROM artifacts WHERE id = ?", (artifact_id,)).fetchone()
        if row is None:
            raise MemoryStoreError(
                f"no artifact {artifact_id!r} in {self.path}; list ids with `traceless memory show --db {self.path}`"
            )
        return self._art(row)

    def exists(self, artifact_id: str) -> bool:
        return self._rows("SELECT 1 FROM artifacts WHERE id = ?", (artifact_id,)).fetchone() is not None

    def artifacts(
        self,
        *,
        owner: str | None = None,
        tier: Tier | str | None = None,
        kind: str | None = None,
        session_id: str | None = None,
        ids: Iterable[str] | None = None,
        limit: int | None = None,
    ) -> list[Artifact]:
        """Artifacts matching every given filter, ordered by id (creation order); at most
        ``limit`` of them (``limit=1`` asks whether any exists without reading the rest)."""
        if session_id is not None and self._codec.seal_sids:
            if owner is None:  # the column is sealed per owner: filter after opening
                got = [a for a in self.artifacts(tier=tier, kind=kind, ids=ids) if a.session_id == session_id]
                return got if limit is None else got[:limit]
            col = self._codec.sid_lookup(owner, session_id)
            if col is None:
                return []
            session_id = col
        where, params = [], []
        for col, val in (("owner", None if owner is None else self._ocol(owner)), ("tier", None if tier is None else Tier(tier).value),
                         ("kind", kind), ("session_id", session_id)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        if ids is not None:
            id_list = list(ids)
            if not id_list:
                return []
            where.append(f"id IN ({','.join('?' * len(id_list))})")
            params.extend(id_list)
        sql = f"SELECT {_COLS} FROM artifacts" + (f" WHERE {' AND '.join(where)}" if where else "")
        sql += " ORDER BY id" + (f" LIMIT {int(limit)}" if limit is not None else "")
        return [self._art(r) for r in self._rows(sql, params).fetchall()]

    def iter_artifacts(self, *, owner: str | None = None) -> Iterator[Artifact]:
        """``artifacts(owner=...)`` one at a time (ids first, then each row): a scan over big
        texts holds one of them at a time, not all."""
        sql, params = "SELECT id FROM artifacts", []
        if owner is not None:
            sql, params = sql + " WHERE owner = ?", [self._ocol(owner)]
        for (art_id,) in self._rows(sql + " ORDER BY id", params).fetchall():
            row = self._rows(f"SELECT {_COLS} FROM artifacts WHERE id = ?", (art_id,)).fetchone()
            if row is not None:
                yield self._art(row)

    def owners(self) -> list[str]:
        """Every owner, sorted. One index seek per owner (a loose index scan), not a walk over
        every artifact: a write checks its owners against these, and must not cost more as
        the store grows. An encrypted v3 store reads the ids from the data keys of the owners
        that hold an artifact (one seek each)."""
        if self._codec.blind:
            cols = [r[0] for r in self._exec("SELECT owner FROM data_keys")]
            held = [c for c in cols if self._rows("SELECT 1 FROM artifacts WHERE owner = ? LIMIT 1", (c,)).fetchone()]
            return sorted(self._codec.oname(c) for c in held)
        return [r[0] for r in self._rows(
            "WITH RECURSIVE o(x) AS (SELECT min(owner) FROM artifacts UNION ALL "
            "SELECT (SELECT min(owner) FROM artifacts WHERE owner > o.x) FROM o WHERE o.x IS NOT NULL) "
            "SELECT x FROM o WHERE x IS NOT NULL")]

    def containing_refs(self, literal: str, *, owner: str | None = None) -> list[tuple[str, str, str]]:
        """(id, tier, digest) of the artifacts ``containing`` returns, without their texts
        (an encrypted store decrypts one at a time)."""
        if self.encrypted:
            return [(a.id, a.tier.value, a.digest) for a in self.iter_artifacts(owner=owner)
                    if a.text is not None and literal in a.text]
        sql = "SELECT id, tier, digest FROM artifacts WHERE instr(text, ?) > 0"
        params: list[Any] = [literal]
        if owner is not None:
            sql += " AND owner = ?"
            params.append(self._ocol(owner))
        return [(r[0], r[1], r[2]) for r in self._rows(sql + " ORDER BY id", params).fetchall()]

    def containing(self, literal: str, *, owner: str | None = None) -> list[Artifact]:
        """Artifacts whose text contains ``literal`` exactly (case-sensitive byte match)."""
        if self.encrypted:  # the text is sealed: decrypt and compare here
            return [a for a in self.artifacts(owner=owner) if a.text is not None and literal in a.text]
        sql = f"SELECT {_COLS} FROM artifacts WHERE instr(text, ?) > 0"
        params: list[Any] = [literal]
        if owner is not None:
            sql += " AND owner = ?"
            params.append(self._ocol(owner))
        return [self._art(r) for r in self._rows(sql + " ORDER BY id", params).fetchall()]

    def parents(self, artifact_id: str) -> list[LineageEdge]:
        rows = self._rows("SELECT child, parent, op, params FROM lineage WHERE child = ? ORDER BY parent",
                          (artifact_id,))
        return [LineageEdge(child=r[0], parent=r[1], op=r[2], params=json.loads(r[3])) for r in rows]

    def children(self, artifact_id: str) -> list[LineageEdge]:
        rows = self._rows("SELECT child, parent, op, params FROM lineage WHERE parent = ? ORDER BY child",
                          (artifact_id,))
        return [LineageEdge(child=r[0], parent=r[1], op=r[2], params=json.loads(r[3])) for r in rows]

    def _closure(self, ids: Iterable[str], down: bool) -> list[str]:
        id_list = list(ids)
        if not id_list:
            return []
        a, b = ("child", "parent") if down else ("parent", "child")
        seeds = ",".join("(?)" for _ in id_list)
        sql = f"""
            WITH RECURSIVE seed(id) AS (VALUES {seeds}),
            closure(id) AS (
                SELECT l.{a} FROM lineage l JOIN seed s ON l.{b} = s.id
                UNION
                SELECT l.{a} FROM lineage l JOIN closure c ON l.{b} = c.id
            )
            SELECT id FROM closure ORDER BY id
        """
        return [r[0] for r in self._rows(sql, id_list)]

    def descendants(self, ids: Iterable[str]) -> list[str]:
        """Every artifact id derived (transitively) from any of ``ids`` (existing or removed)."""
        return self._closure(ids, down=True)

    def ancestors(self, ids: Iterable[str]) -> list[str]:
        """Every artifact id that any of ``ids`` was (transitively) derived from."""
        return self._closure(ids, down=False)

    def embedding_of(self, artifact_id: str) -> Artifact | None:
        rows = self._rows(
            f"SELECT {', '.join('a.' + c.strip() for c in _COLS.split(','))} FROM lineage l "
            "JOIN artifacts a ON a.id = l.child WHERE l.parent = ? AND l.op = 'embed'",
            (artifact_id,),
        ).fetchall()
        return self._art(rows[0]) if rows else None

    # ----------------------------------------------------------------- retrieval
    def search(
        self,
        owner: str,
        query_vector: npt.NDArray[np.float32],
        k: int,
        *,
        tiers: Iterable[Tier | str] = (Tier.RAW, Tier.SUMMARY),
        kinds: Iterable[str] | None = None,
    ) -> list[Hit]:
        """Cosine top-k over ``owner``'s embedded artifacts in ``tiers`` (and ``kinds``).

        Ranking uses the stored vector, which may be stale after a mode that does not
        re-embed; the text returned is the current text of the source artifact. Ties are
        broken by artifact id so results are deterministic.
        """
        tier_vals = [Tier(t).value for t in tiers]
        sql = (
            f"SELECT {', '.join('s.' + c.strip() for c in _COLS.split(','))}, e.vector, e.id, e.sealed FROM artifacts s "
            "JOIN lineage l ON l.parent = s.id AND l.op = 'embed' "
            "JOIN artifacts e ON e.id = l.child "
            f"WHERE s.owner = ? AND e.owner = ? AND s.tier IN ({','.join('?' * len(tier_vals))})"
        )
        params: list[Any] = [self._ocol(owner), self._ocol(owner), *tier_vals]
        kind_list = None if kinds is None else list(kinds)
        if kind_list is not None:
            sql += f" AND s.kind IN ({','.join('?' * len(kind_list))})"
            params.extend(kind_list)
        rows = self._rows(sql + " ORDER BY s.id", params).fetchall()
        if not rows or k <= 0:
            return []
        import numpy as np

        vecs = [r[_NCOLS] for r in rows]
        if self.encrypted:  # the vectors are sealed: decrypt this owner's only, rank here
            vecs = [self._art((r[_NCOLS + 1], r[1], *r[2:11], r[_NCOLS + 2])).vector for r in rows]
        mat = np.stack([np.frombuffer(v or b"", dtype=np.float32) for v in vecs])
        q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != mat.shape[1]:
            raise ConfigError(
                f"query vector has {q.shape[0]} dimensions but {owner!r}'s memory vectors have {mat.shape[1]}: "
                "embed the query with the embedder that wrote the memory (see an embedding's meta 'embedder')"
            )
        qn = q / (np.linalg.norm(q) or 1.0)
        norms = np.linalg.norm(mat, axis=1)
        norms[norms == 0] = 1.0
        scores = (mat @ qn) / norms
        order = sorted(range(len(rows)), key=lambda i: (-float(scores[i]), rows[i][0]))[:k]
        return [Hit(artifact=self._art(rows[i][:_NCOLS]), score=float(scores[i])) for i in order]

    # ----------------------------------------------------------------- the write gate
    @contextlib.contextmanager
    def ungated(self, reason: str) -> Iterator[MemoryStore]:
        """Write without the exact-literal gate: an explicit choice, recorded in the event
        log (with ``reason``) in the same transaction as the writes."""
        if not reason.strip():
            raise ConfigError("say why the gate is off (e.g. 'user re-consented')")
        with self._lock, self.transaction():
            prev, self._gate.off = self._gate.off, reason
            try:
                self.log_event("ungated_write", reason)
                yield self
            finally:
                self._gate.off = prev

    def gate(self, *, create: bool = False) -> WriteGate | None:
        """The gate under the key this store's descriptors were made with; None while the
        store has none (and ``create`` is False). Fails closed on another key."""
        return self._gate.get(create=create)

    def gate_descriptors(self, owner: str) -> frozenset[GateEntry]:
        """The owner's stored gate entries (looked up under the owner's keyed pseudonym)."""
        return self._gate.descriptors(owner)

    def gate_check(self, owner: str, text: str | None, *, old: str | None = None) -> None:
        """Refuse ``text`` if it carries a value ``owner`` asked to forget. A rewrite (``old``
        given) that already carried it is let through: forgetting must stay possible."""
        self._gate.check(owner, text, old=old)

    def gate_add(self, owner: str, entry: GateEntry) -> None:
        """Store one gate entry for ``owner`` (made by ``self.gate(create=True)``)."""
        self._gate.add(owner, entry)

    def gate_forget(self, owner: str, attribute: str, value: str, *, normalized: bool = False) -> int:
        """Store the descriptors of a forgotten attribute–value pair (with ``normalized`` also
        the ``norm`` descriptor of its compact form); returns how many."""
        return self._gate.forget(owner, attribute, value, normalized=normalized)

    # ----------------------------------------------------------------- receipts (``_receipt_log``)
    def add_receipt(self, receipt_id: str, body: str) -> None:
        """Store a signed receipt in the same transaction as the forget it describes."""
        self._receipts.add(receipt_id, body)

    def update_receipt(self, receipt_id: str, body: str) -> None:
        self._receipts.update(receipt_id, body)

    def receipts(self) -> list[tuple[str, str]]:
        return self._receipts.all()

    def receipt(self, receipt_id: str) -> str:
        return self._receipts.get(receipt_id)

    def bookkeeping_values(self) -> list[str]:
        """The clear values of the store's own columns that hold hashes, MACs, signatures,
        key ids and ciphertext: artifact digests, lineage ids and parameters, receipts, gate
        entries and descriptors, meta values. A forget's disk check counts a short literal
        found inside a run of hex digits (or a decimal timestamp) of these as a coincidence,
        not a copy (``forget._material.hex_coincidences``)."""
        sqls = ("SELECT digest FROM artifacts", "SELECT child || ' ' || parent || ' ' || params FROM lineage",
                "SELECT id || ' ' || body FROM receipts", "SELECT owner_ref || ' ' || mac || ' ' || key_id FROM "
                "gate_entries", "SELECT owner || ' ' || descriptor FROM gate_descriptors", "SELECT value FROM meta")
        return [str(r[0]) for sql in sqls for r in self._rows(sql).fetchall() if r[0] is not None]

    # ----------------------------------------------------------------- digests
    def tier_digest(self, owner: str | None, tier: Tier, *, key: bytes | None = None) -> str:
        """One digest over (id, digest) of every artifact in a tier: equal iff the tier is unchanged.

        With ``key`` it is an HMAC: receipts use that, so a digest taken before a forget is
        no offline oracle for guessing the forgotten text.
        """
        h = hmac.new(key, digestmod=hashlib.sha256) if key is not None else hashlib.sha256()
        # ids and stored digests only: nothing to decrypt
        sql, params = "SELECT id, digest FROM artifacts WHERE tier = ?", [Tier(tier).value]
        if owner is not None:
            sql, params = sql + " AND owner = ?", [*params, self._ocol(owner)]
        for art_id, digest in self._rows(sql + " ORDER BY id", params).fetchall():
            h.update(f"{art_id}:{digest}\n".encode())
        return h.hexdigest()

    def files(self) -> list[Path]:
        """Every file SQLite may have written for this store (main, WAL, shm, journal); none
        for PostgreSQL (the server's files are out of this process's reach)."""
        if self.path == ":memory:" or not self.scannable:
            return []
        base = Path(self.path)
        return [p for p in (base, Path(f"{base}-wal"), Path(f"{base}-shm"), Path(f"{base}-journal")) if p.exists()]
