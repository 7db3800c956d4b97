"""mem0's **live** instances (issue #23): the user's own configuration, read without writing
a byte, and a complete per-user (or per-literal) erasure.

What a mem0 instance keeps (mem0ai 2.2.1, the version tested), and how each store is read:

* ``vector_store``: the configured collection. qdrant in local-path mode keeps every point
  pickled in ``<path>/collection/<name>/storage.sqlite``; chroma persistent keeps the payload
  as metadata rows of ``<path>/chroma.sqlite3`` (``embedding_metadata``). Owner: the
  payload's ``user_id``.
* ``entity_store``: mem0's entity collection ``<name>_entities`` (``infer=true`` links
  extracted entities to memories); owner: its ``user_id``. mem0's ``delete_all`` in a fresh
  process leaves it untouched (its cleanup is a no-op until the entity store was used).
* ``chroma_log`` (chroma only): chroma's write-ahead log (``embeddings_queue``), which keeps
  every added record's full metadata until its vector segment flushes (1,000 writes).
* ``history``: ``history_db_path``'s ``history`` table, one row per ADD/UPDATE/DELETE of a
  memory, with the text in ``old_memory``/``new_memory``; it has no user column, so a row is
  the user's when its ``memory_id`` is one of the user's memories. mem0's own ``delete_all``
  keeps the ADD rows and adds a DELETE row holding the text again (``old_memory``).
* ``messages``: the last messages per session scope (``user_id=…&…``), with ``infer=true``.

Every read uses SQLite ``mode=ro`` URIs on the files themselves (no mem0, qdrant or chroma
client is opened: qdrant's local client takes a lock file and chroma's client migrates
its schema). On qdrant local a scan or plan decodes only the points whose stored bytes may be
the user's or hold a literal (``_mem0_qdrant``; issue #39: a 10^6-point collection is not
unpickled whole), and the bystander digests cover the containers the erasure touches and
each table's count (``_mem0_near``). The erasure on chroma opens mem0 read-write and runs
its own ``delete_all``; on qdrant local it takes qdrant's own lock and deletes the points by
key as qdrant local's ``delete`` does (mem0's ``delete_all`` would first load every point
into memory), with ``secure_delete``, VACUUMing a file only when the verification's byte
scan still finds a literal in it (``compact_residue``).
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import sqlite3
from array import array
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from traceless.errors import ConfigError, UnsupportedError
from traceless.systems import NO_OWNER, ErasurePlan, PlannedAction, ScanHit, ScanReport, StoreOutcome
from traceless.systems._mem0_near import table_digest
from traceless.systems._mem0_qdrant import (
    ID_SIZE,
    absent,
    key_forms,
    pickled_str,
    point_needles,
    selected,
    split_ids,
)
from traceless.systems.kernel import StoreDigest, count_literals, digest, literal_forms
from traceless.systems.sqlite import holds_sql, ro_connect

__all__ = ["LiveLayout", "Mem0Live", "Rec", "live_layout", "probe_config"]

PROVIDERS = ("qdrant", "chroma")
_QDRANT_DB = "storage.sqlite"
_CHROMA_DB = "chroma.sqlite3"
_CHROMA_DELETE = 3  # embeddings_queue.operation of a delete (ADD 0, UPDATE 1, UPSERT 2 carry metadata)
ORPHAN = "a history row whose memory_id is in no collection"
"""Why a record is unattributable residue (``ScanHit.unattributable``)."""
_POINTS = ("vector_store", "entity_store")
_BATCH = 2048
"""Points read and searched at once (``_mem0_qdrant.selected``): about 8 MB."""
_REBUILDING = ".traceless-rebuild"
SECURE_DELETE_NOTE = ("qdrant local: points deleted from storage.sqlite (and history rows from the history db) with "
                      "secure_delete, which overwrites a deleted record's bytes with zeros (its page, overflow and "
                      "freed pages); VACUUM only where the byte scan after the deletion still finds a literal (no "
                      "segments or WAL in local mode)")  # ``_mem0_chroma.REBUILD_SUFFIX`` (not imported: a scan imports no numpy/chroma)


@dataclass(frozen=True)
class LiveLayout:
    """Where one mem0 instance keeps its stores (from the user's own config)."""

    provider: str
    """The vector store provider (``qdrant`` local path or ``chroma`` persistent)."""
    path: Path
    """The vector store's ``path``."""
    collection: str
    """The collection mem0 writes (its ``collection_name``, default ``mem0``)."""
    history: Path
    """``history_db_path``."""

    @property
    def entity_collection(self) -> str:
        return f"{self.collection}_entities"

    def qdrant_db(self, collection: str) -> Path:
        return self.path / "collection" / collection / _QDRANT_DB

    def sqlite_files(self) -> list[Path]:
        """The SQLite files an erasure rewrites and compacts."""
        if self.provider == "pgvector":
            return [self.history]  # the vector store is a server's (``_mem0_pgvector``)
        if self.provider == "chroma":
            out = [self.path / _CHROMA_DB]
        else:
            out = [p for p in (self.qdrant_db(self.collection), self.qdrant_db(self.entity_collection)) if p.exists()]
        return [self.history, *out]


def live_layout(vector_store: dict[str, Any] | None, history_db_path: str | None) -> LiveLayout:
    """The layout of a live instance; every path must exist (checked before anything is opened)."""
    if not history_db_path:
        raise ConfigError("a live mem0 instance needs its history_db_path in the memory config "
                          "(the path you pass to Memory.from_config)")
    if not isinstance(vector_store, dict) or not isinstance(vector_store.get("config", {}), dict):
        raise ConfigError("a live mem0 instance needs its vector_store in the memory config: "
                          '{"provider": "qdrant", "config": {"path": ..., "collection_name": ...}}')
    provider = str(vector_store.get("provider", "qdrant"))
    vcfg = vector_store.get("config") or {}
    if provider == "pgvector":  # a server (issue #35): the connection is checked by _mem0_pgvector, not here
        lay = LiveLayout(provider, Path(history_db_path).parent, str(vcfg.get("collection_name") or "mem0"),
                         Path(history_db_path))
        if not lay.history.is_file():
            raise ConfigError(f"history_db_path {lay.history} does not exist; give the path of the instance's "
                              "history database (nothing was opened or created)")
        return lay
    if provider not in PROVIDERS or not vcfg.get("path") or vcfg.get("url") or vcfg.get("host"):
        raise UnsupportedError(
            f"mem0 vector_store {provider!r} {'at a server ' if vcfg.get('url') or vcfg.get('host') else ''}"
            f"cannot be scanned or erased yet; supported: {', '.join(PROVIDERS)} with a local config.path, "
            "pgvector on a PostgreSQL server")
    lay = LiveLayout(provider, Path(str(vcfg["path"])), str(vcfg.get("collection_name") or "mem0"),
                     Path(history_db_path))
    if not lay.history.is_file():
        raise ConfigError(f"history_db_path {lay.history} does not exist; give the path of the instance's "
                          "history database (nothing was opened or created)")
    main = lay.path / _CHROMA_DB if provider == "chroma" else lay.qdrant_db(lay.collection)
    if not main.is_file():
        raise ConfigError(f"vector_store {provider} at {lay.path}: no collection {lay.collection!r} there "
                          f"({main} does not exist); check config.path and collection_name (nothing was opened)")
    return lay


def probe_config(mem0_keys: dict[str, Any], embedder_model: str, dims: int) -> dict[str, Any]:
    """The ``Memory.from_config`` dict that reads the live instance as the application does
    (its vector store, history path and embedder), for the probes of ``forget --certify``:
    the LLM is a placeholder (the probes' agent is the certificate's model; a search calls
    no LLM), the embedder defaults to the bundled MiniLM as in the audit."""
    cfg = dict(mem0_keys)
    cfg.setdefault("embedder", {"provider": "huggingface", "config": {"model": embedder_model,
                                                                      "embedding_dims": dims}})
    cfg["llm"] = {"provider": "openai", "config": {"model": "unused", "api_key": "unused",
                                                   "openai_base_url": "http://127.0.0.1:9/v1"}}
    return cfg


def _wal_mode(path: Path) -> bool:
    """The file is in WAL mode (an application ran ``PRAGMA journal_mode=WAL`` on it: bytes 18
    and 19 of the header are 2), or a ``-wal`` file of it exists."""
    if path.with_name(path.name + "-wal").exists():
        return True
    with open(path, "rb") as f:
        header = f.read(20)
    return len(header) == 20 and header[18] == 2 and header[19] == 2


def _ro(path: Path) -> sqlite3.Connection:
    """A read-only connection that changes no byte, creates no file and bumps no mtime. A
    file in rollback-journal mode (mem0's and qdrant's default): ``mode=ro``; a hot journal
    (a write interrupted mid-transaction) needs a writer to roll it back: refused here, never
    recovered read-write. A file an application switched to WAL mode: ``mode=ro`` would
    create its ``-wal`` and ``-shm`` (and write to a live ``-shm``), so it is read as the
    SQLite adapters read theirs (``ro_connect``): ``immutable=1`` when no ``-wal`` exists, a
    private copy of the file and its ``-wal`` (whose committed frames are read) otherwise."""
    con = ro_connect(path) if _wal_mode(path) else sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as e:
        con.close()
        raise ConfigError(f"{path} cannot be read read-only ({e}); if a write to it was interrupted, let the "
                          "application (or `traceless forget --memory`) open it first") from None
    return con


@contextmanager
def qdrant_lock(path: Path) -> Iterator[None]:
    """qdrant local's own lock on its folder (``QdrantLocal`` takes it, exclusive and
    non-blocking, on ``<path>/.lock``): an application holding the instance open is refused
    here, and none can open it while the erasure holds it."""
    import portalocker  # qdrant-client's own dependency (imported lazily there too)

    lock = path / ".lock"
    if not lock.exists():
        lock.write_text("tmp lock file")
    with open(lock, "r+") as f:
        try:
            portalocker.lock(f, portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING)
        except portalocker.exceptions.LockException:
            raise ConfigError(f"mem0's vector store at {path} is in use (another qdrant client holds its lock); stop "
                              "the application that holds it and run this again (nothing was erased yet)") from None
        try:
            yield
        finally:
            portalocker.unlock(f)


def recover(path: Path) -> None:
    """Roll back an interrupted transaction (a killed erasure): the first read of a writer does it."""
    with closing(sqlite3.connect(path)) as con:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()


@dataclass
class Rec:
    """One record of one store, as the scan sees it."""

    store: str
    id: str
    owner: str | None
    texts: dict[str, str]
    raw: tuple[Any, ...]
    """What the bystander digest covers (hashed only when asked: a scan never needs it)."""
    memory_id: str | None = None
    linked: tuple[str, ...] = ()
    orphan: bool = False
    """A history row whose ``memory_id`` is in no collection: nobody's by any field (``ORPHAN``)."""

    @cached_property
    def digest(self) -> str:
        return _digest(*self.raw)


def _digest(*parts: Any) -> str:
    vectors = [_vector_bytes(p) for p in parts]
    rest = [None if v is not None else p for p, v in zip(parts, vectors, strict=True)]
    h = hashlib.sha256(json.dumps(rest, sort_keys=True, default=str).encode())
    for v in vectors:
        h.update(b"\0" + (v or b""))
    return h.hexdigest()


def _vector_bytes(v: Any) -> bytes | None:
    """A vector's exact floats (named vectors: each, by name), without a JSON round trip."""
    if isinstance(v, dict) and v and all(isinstance(x, list) for x in v.values()):
        return b"".join(k.encode() + b"=" + (_vector_bytes(x) or b"") for k, x in sorted(v.items()))
    if isinstance(v, list) and v and not isinstance(v[0], (dict, list, str)):
        try:
            return array("d", v).tobytes()
        except TypeError:
            return None
    return None


class _Point:
    """A qdrant ``PointStruct`` as its pickle holds it (``id``, ``vector``, ``payload``),
    without qdrant-client: the scan imports no client and builds no pydantic model."""

    id: Any
    vector: Any
    payload: dict[str, Any] | None

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state.get("__dict__", state))


class _PointUnpickler(pickle.Unpickler):
    """qdrant local's point pickles, with its ``PointStruct`` read as ``_Point`` (the same
    id, vector and payload); any other class is the real one, as qdrant itself loads it."""

    def find_class(self, module: str, name: str) -> Any:
        if name == "PointStruct" and module.startswith("qdrant_client."):
            return _Point
        return super().find_class(module, name)  # noqa: S301 - qdrant's own storage format


def _load_point(blob: bytes) -> Any:
    return _PointUnpickler(io.BytesIO(blob)).load()


def _payload_texts(payload: dict[str, Any]) -> dict[str, str]:
    return {str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in payload.items()}


def _scope_user(scope: str) -> str | None:
    for part in (scope or "").split("&"):
        key, _, val = part.partition("=")
        if key == "user_id":
            return unquote(val)
    return None


def _point_rec(store: str, p: Any) -> Rec:
    pid = str(p.id)
    payload = dict(p.payload or {})
    return Rec(store, pid, payload.get("user_id"), _payload_texts(payload), (pid, payload, p.vector),
               linked=tuple(str(x) for x in payload.get("linked_memory_ids") or ()))


_HISTORY_COLUMNS = ("SELECT id, memory_id, old_memory, new_memory, event, created_at, updated_at, is_deleted, "
                    "actor_id, role FROM history")
_MESSAGES_COLUMNS = "SELECT id, session_scope, role, content, name, created_at FROM messages"


def _narrowing(narrow: tuple[Collection[str | None], Sequence[str], str | None] | None,
               con: sqlite3.Connection) -> tuple[str, list[Any], str, list[Any]]:
    """``WHERE`` clauses (and their arguments) of ``Mem0Live._history``'s narrowed read (a
    ``None`` memory id: the rows without one). A messages row is the user's by ``user_id=``
    in its scope, percent-decoded: it holds the id as it is, or a ``%``. The literal forms are
    searched in the columns' UTF-8 bytes by SQLite (``holds_sql`` on ``con``: ``instr`` calls,
    or one function call a row where they would be many; a text holds a form exactly where its
    UTF-8 bytes hold the form's)."""
    if narrow is None:
        return "", [], "", []
    ids, forms, user = narrow
    hist = ["memory_id IN (SELECT value FROM json_each(?))", *(["memory_id IS NULL"] if None in ids else [])]
    hist_args: list[Any] = [json.dumps(sorted(i for i in ids if i is not None))]
    msg: list[str] = ["instr(session_scope, ?) > 0 OR instr(session_scope, '%') > 0"] if user else []
    msg_args: list[Any] = [user] if user else []
    if forms:
        raw = [f.encode("utf-8", "surrogatepass") for f in forms]
        for where, args, cols in ((hist, hist_args, ["old_memory", "new_memory"]),
                                  (msg, msg_args, ["content", "session_scope"])):
            cond, more = holds_sql(con, cols, raw)
            where.append(cond)
            args += more
    return " WHERE " + " OR ".join(hist), hist_args, " WHERE " + (" OR ".join(msg) or "0"), msg_args


@dataclass
class Mem0Live:
    """Read and erase one mem0 instance laid out as ``layout``."""

    layout: LiveLayout
    read_only: bool
    targets: set[tuple[str, str]] = field(default_factory=set)
    """Records the last plan targets: not bystanders (``bystander_digests``)."""
    _cache: tuple[tuple[tuple[str, int, int], ...], list[Rec]] | None = None
    _points: dict[tuple[str, bytes], Rec] = field(default_factory=dict)
    """qdrant points read so far, by their stored bytes: a re-read after the erasure parses
    (and digests) only what changed, the same bytes giving the same record."""
    _row_digests: dict[tuple[str, tuple[Any, ...]], str] = field(default_factory=dict)
    """Digests of the SQLite rows (history, messages) by their values, for the same reason."""
    _selected: tuple[tuple[Any, str | None], frozenset[str], list[Rec]] | None = None
    """The last narrowed read (``records_for``): ((files' stamp, user), literals, records)."""
    _keys: dict[tuple[str, str], str] = field(default_factory=dict)
    """The ``points.id`` key of each point a narrowed read decoded, by (store, id)."""
    _baseline: dict[str, StoreDigest] = field(default_factory=dict)
    """This erasure's first bystander digest on qdrant local (``bystanders``; reset by ``plan``)."""

    def __post_init__(self) -> None:
        if not self.read_only:
            for p in self.layout.sqlite_files():
                recover(p)

    # ------------------------------------------------------------------ reading
    def _qdrant(self, store: str, collection: str) -> Iterator[Rec]:
        db = self.layout.qdrant_db(collection)
        if not db.is_file():
            return
        seen: set[str] = set()
        with closing(_ro(db)) as con:
            rows = con.execute("SELECT point FROM points ORDER BY rowid DESC").fetchall()
        for (blob,) in rows:
            rec = self._points.get((store, blob))
            if rec is None:
                rec = self._points[(store, blob)] = _point_rec(store, _load_point(blob))
            if rec.id not in seen:
                seen.add(rec.id)
                yield rec

    def _chroma(self) -> Iterator[Rec]:
        with closing(_ro(self.layout.path / _CHROMA_DB)) as con:
            cols = _chroma_collections(con)
            for store, name in (("vector_store", self.layout.collection), ("entity_store", self.layout.entity_collection)):
                if name not in cols:
                    continue
                meta: dict[str, dict[str, Any]] = {}
                for eid, key, s, i, f, b in con.execute(
                        "SELECT e.embedding_id, m.key, m.string_value, m.int_value, m.float_value, m.bool_value "
                        "FROM segments g JOIN embeddings e ON e.segment_id = g.id "
                        "LEFT JOIN embedding_metadata m ON m.id = e.id WHERE g.collection = ? AND g.scope = 'METADATA'",
                        (cols[name],)):
                    d = meta.setdefault(str(eid), {})
                    if key is not None:
                        d[key] = next((v for v in (s, i, f, b) if v is not None), None)
                for eid, d in meta.items():
                    yield Rec(store, eid, d.get("user_id"), _payload_texts(d), (eid, d),
                              linked=tuple(json.loads(d["linked_memory_ids"])) if isinstance(
                                  d.get("linked_memory_ids"), str) and d["linked_memory_ids"].startswith("[") else ())
            topics = {f"persistent://default/default/{cols[n]}": n for n in
                      (self.layout.collection, self.layout.entity_collection) if n in cols}
            for seq, op, topic, eid, md in con.execute(
                    "SELECT seq_id, operation, topic, id, metadata FROM embeddings_queue"):
                if topic not in topics or op == _CHROMA_DELETE:
                    continue
                d = json.loads(md) if md else {}
                yield Rec("chroma_log", str(seq), d.get("user_id"), _payload_texts(d), (seq, eid, d),
                          memory_id=str(eid))

    def _history_tables(self, narrow: tuple[Collection[str | None], Sequence[str], str | None] | None = None,
                        ) -> Iterator[tuple[str, tuple[Any, ...]]]:
        """(table, row) of the history db's ``history`` and ``messages`` rows (``_narrowing``)."""
        with closing(_ro(self.layout.history)) as con:
            hist_sql, hist_args, msg_sql, msg_args = _narrowing(narrow, con)
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "history" in names:
                for row in con.execute(_HISTORY_COLUMNS + hist_sql, hist_args):
                    yield "history", tuple(row)
            if "messages" in names:
                for row in con.execute(_MESSAGES_COLUMNS + msg_sql, msg_args):
                    yield "messages", tuple(row)

    def _history(self, narrow: tuple[Collection[str | None], Sequence[str], str | None] | None = None,
                 ) -> Iterator[Rec]:
        """The history db's rows; ``narrow`` = (memory ids, literal forms, user): only the
        history rows of those memories or holding a form, and the messages rows that may be
        the user's or hold a form, selected by SQLite (a superset: the caller's match rule decides)."""
        for table, row in self._history_tables(narrow):
            if table == "history":
                texts = {k: v for k, v in (("old_memory", row[2]), ("new_memory", row[3])) if v}
                yield Rec("history", str(row[0]), None, texts, row, memory_id=str(row[1]))
            else:
                yield Rec("messages", str(row[0]), _scope_user(str(row[1] or "")),
                          {"content": str(row[3] or ""), "session_scope": str(row[1] or "")}, row)

    def history_counts(self) -> dict[str, int]:
        """Rows of the history db's tables (``history``, ``messages``), counted by SQLite."""
        with closing(_ro(self.layout.history)) as con:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            return {t: int(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0])  # noqa: S608 - two fixed names
                    for t in ("history", "messages") if t in names}

    def records(self) -> list[Rec]:
        """Every record of every store; a history row inherits its memory's owner. Read once
        per state of the files (the plan and the bystander digests share one read)."""
        stamp = self._stamp()
        if self._cache is None or self._cache[0] != stamp:
            self._cache = (stamp, self._read())
        return self._cache[1]

    def _stamp(self) -> tuple[tuple[str, int, int], ...]:
        """The state of the SQLite files (and their ``-wal``): path, mtime, size."""
        files = [q for p in self.layout.sqlite_files() for q in (p, p.with_name(p.name + "-wal")) if q.exists()]
        return tuple((str(p), st.st_mtime_ns, st.st_size) for p in files if (st := p.stat()))

    def _vector_records(self) -> list[Rec]:
        if self.layout.provider == "chroma":
            return list(self._chroma())
        return [*self._qdrant("vector_store", self.layout.collection),
                *self._qdrant("entity_store", self.layout.entity_collection)]

    def _read(self) -> list[Rec]:
        vec = self._vector_records()
        owners = {r.id: r.owner for r in vec if r.store == "vector_store"}
        owners.update({r.memory_id: r.owner for r in vec if r.store == "chroma_log" and r.memory_id})
        hist = list(self._history())
        for r in hist:
            if r.store == "history":
                r.owner = owners.get(r.memory_id or "")
                r.orphan = (r.memory_id or "") not in owners
        return vec + hist

    def store_names(self) -> list[str]:
        names = ["vector_store", "entity_store"]
        return [*names, *(["chroma_log"] if self.layout.provider == "chroma" else []), "history", "messages"]

    def files(self) -> list[Path]:
        """Every file of the instance: the history db (and its journals) and the vector store's path."""
        h = self.layout.history
        out = [p for p in (h, *(h.with_name(h.name + s) for s in ("-journal", "-wal", "-shm"))) if p.is_file()]
        return out + sorted(p for p in self.layout.path.rglob("*") if p.is_file())

    def records_for(self, user: str | None, literals: Sequence[str]) -> list[Rec]:
        """The records a scan or a plan for ``user`` and ``literals`` must see. On qdrant local:
        the points whose bytes may be the user's or hold a literal (``_mem0_qdrant``: the one
        match rule then decides on the decoded ones), the history rows of those memories, of
        no memory (orphans) or holding a literal, selected by SQLite, each owned as its memory
        is; every record when a literal cannot be told from bytes, and on chroma (read whole).
        A server back end narrows on the server (``Mem0PgLive``)."""
        needles = point_needles(literals) if self.layout.provider == "qdrant" else None
        if needles is None:
            return self.records()
        stamp, last = self._stamp(), self._selected
        if last is not None and last[0] == (stamp, user) and set(literals) <= last[1]:
            return last[2]  # the files as they were: that selection is a superset of this one's
        vec, keys = self._qdrant_selected("vector_store", self.layout.collection, user, needles)
        ent, _ = self._qdrant_selected("entity_store", self.layout.entity_collection, user, needles)
        recs = vec + ent + self._history_for(vec, keys, user, literals)
        self._selected = ((stamp, user), frozenset(literals), recs)
        return recs

    def _qdrant_selected(self, store: str, collection: str, user: str | None, needles: Sequence[bytes],
                         ) -> tuple[list[Rec], list[str]]:
        """(the points ``may_hold`` selects, decoded; every point's key). Each selected
        point's key is kept (``_keys``): the bystander digest skips points by key."""
        db = self.layout.qdrant_db(collection)
        if not db.is_file():
            return [], []
        mine = pickled_str(user) if user is not None else None
        out: dict[str, Rec] = {}
        keys: list[str] = []
        with closing(_ro(db)) as con:  # in rowid order (read ahead); the last row of an id is the one kept
            cur = con.execute("SELECT id, point FROM points")
            while rows := cur.fetchmany(_BATCH):
                keys += [k for k, _ in rows]
                for i in selected([b for _, b in rows], mine, needles):
                    key, blob = rows[i]
                    rec = _point_rec(store, _load_point(blob))
                    out.pop(rec.id, None)
                    out[rec.id] = rec
                    self._keys[(store, rec.id)] = key
        return list(reversed(out.values())), keys

    def _history_for(self, vec: Sequence[Rec], keys: Sequence[str], user: str | None,
                     literals: Sequence[str]) -> list[Rec]:
        """The history db's rows of ``vec``'s memories, of no memory (``keys``: every point's)
        or holding a literal (``_narrowing``), each owned as its memory is."""
        owners: dict[str, str | None] = {r.id: r.owner for r in vec if r.store == "vector_store"}
        orphans = self._orphan_memories(keys)
        forms = sorted({f for lit in literals for f in literal_forms(lit)})
        hist = list(self._history(({*owners, *orphans}, forms, user)))
        lost = {str(m) for m in orphans}
        ask = {r.memory_id or "" for r in hist if r.store == "history" and r.memory_id not in owners
               and r.memory_id not in lost}
        owners.update(self._owners_of(ask))
        for r in hist:
            if r.store == "history":
                r.owner = owners.get(r.memory_id or "")
                r.orphan = (r.memory_id or "") in lost
        return hist

    def _orphan_memories(self, keys: Sequence[str]) -> set[str | None]:
        """The history rows' memory ids that no point of the collection has (``keys``: every
        point's), compared as bytes: the ids of ``ID_SIZE`` bytes (a UUID's, nearly all) read
        joined by SQLite and compared at once (``absent``), any other one by a set."""
        with closing(_ro(self.layout.history)) as con:
            if not con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'history'").fetchone():
                return set()
            odd = {m for (m,) in con.execute("SELECT CAST(memory_id AS BLOB) FROM history WHERE memory_id IS NULL "
                                             "OR length(CAST(memory_id AS BLOB)) != ?", (ID_SIZE,))}
            (joined,) = con.execute("SELECT CAST(group_concat(CAST(memory_id AS BLOB), '') AS BLOB) FROM history "
                                    "WHERE length(CAST(memory_id AS BLOB)) = ?", (ID_SIZE,)).fetchone()
        fixed, other = split_ids(keys)
        joined = joined or b""  # a BLOB (bytes), or NULL where no id has ``ID_SIZE`` bytes
        odd |= {joined[i * ID_SIZE:(i + 1) * ID_SIZE] for i in absent(joined, fixed)}
        lost: set[str | None] = {None} if None in odd else set()
        return lost | {bytes(m).decode("utf-8", "surrogatepass") for m in odd - other if m is not None}

    def _owners_of(self, memory_ids: Collection[str]) -> dict[str, str | None]:
        """The owners of these memories' points (a few: another user's history rows holding a literal)."""
        db = self.layout.qdrant_db(self.layout.collection)
        keys = sorted({k for m in memory_ids for k in key_forms(m)})
        if not keys or not db.is_file():
            return {}
        with closing(_ro(db)) as con:
            rows = con.execute("SELECT point FROM points WHERE id IN (SELECT value FROM json_each(?))",
                               (json.dumps(keys),)).fetchall()
        return {r.id: r.owner for r in (_point_rec("vector_store", _load_point(b)) for (b,) in rows)}

    def store_counts(self, recs: Sequence[Rec]) -> dict[str, int]:
        """Records per store (``recs``: what ``records_for`` returned); on qdrant local every
        store counted by SQLite (``recs`` may be a narrowed read)."""
        stores = dict.fromkeys(self.store_names(), 0)
        if self.layout.provider == "qdrant":
            stores.update(self.history_counts())
            for store, coll in (("vector_store", self.layout.collection), ("entity_store", self.layout.entity_collection)):
                if (db := self.layout.qdrant_db(coll)).is_file():
                    with closing(_ro(db)) as con:
                        stores[store] = int(con.execute("SELECT count(*) FROM points").fetchone()[0])
            return stores
        for r in recs:
            stores[r.store] = stores.get(r.store, 0) + 1
        return stores

    # ------------------------------------------------------------------ scan
    def scan(self, user: str | None, literals: Sequence[str], reveal: bool) -> ScanReport:
        recs = self.records_for(user, literals)
        stores = self.store_counts(recs)
        orphans: dict[str, int] = {}
        hits: list[ScanHit] = []
        for r in recs:
            if r.orphan:
                orphans[r.store] = orphans.get(r.store, 0) + 1
            owned = user is not None and r.owner == user
            found = {k: count_literals(v, literals) for k, v in r.texts.items()}
            found = {k: n for k, n in found.items() if n}
            for k, n in found.items():
                hits.append(ScanHit(store=r.store, record_id=r.id, field=k, owner_match=owned, owner=r.owner,
                                    literal_count=n, unattributable=ORPHAN if r.orphan else None,
                                    value=r.texts[k] if reveal else None))
            if owned and not found and reveal:  # every field as stored (what `traceless export` writes)
                hits += [ScanHit(store=r.store, record_id=r.id, field=k, owner_match=True, owner=r.owner, value=v)
                         for k, v in r.texts.items()]
            elif owned and not found:
                hits.append(ScanHit(store=r.store, record_id=r.id, field="*", owner_match=True, owner=r.owner))
        return ScanReport(system="mem0", user=user, literals=len(literals), stores=stores, hits=hits,
                          unattributable=orphans)

    # ------------------------------------------------------------------ plan
    def plan(self, user: str | None, literals: Sequence[str]) -> ErasurePlan:
        self._baseline = {}  # a new erasure: its own first bystander digest
        recs = self.records_for(user, literals)
        actions: list[PlannedAction] = []
        hit_mem: set[str] = set()
        others = 0
        for r in recs:
            holds = any(count_literals(v, literals) for v in r.texts.values())
            # a literal acts on the requester's records (and unattributable ones) only
            theirs = user is not None and r.owner is not None and r.owner != user
            others += holds and theirs
            why = "owned by the user" if user is not None and r.owner == user else (
                "" if not holds or theirs else "holds a literal" if user is None or r.owner else
                NO_OWNER)  # an orphan row: unattributable residue
            if why and r.store == "vector_store":
                hit_mem.add(r.id)
            if why:
                actions.append(PlannedAction(store=r.store, record_id=r.id, action="remove", reason=why))
        planned = {(a.store, a.record_id) for a in actions}
        for r in recs:
            linked = r.store in ("history", "chroma_log") and r.memory_id in hit_mem
            if linked and (r.store, r.id) not in planned:
                actions.append(PlannedAction(store=r.store, record_id=r.id, action="remove",
                                             reason="history of an erased memory"))
        self.targets = {(a.store, a.record_id) for a in actions}
        return ErasurePlan(system="mem0", user=user, actions=actions, compaction=self._compaction(),
                           held_by_others=others)

    def compact_residue(self, names: Collection[str]) -> list[StoreOutcome]:
        """VACUUM the SQLite files the verification's byte scan still found the literals in
        (``names``: file names, a ``-journal``/``-wal`` of one counting as the file), on qdrant
        local, whose erasure deletes with ``secure_delete`` and compacts nothing otherwise
        (issue 39: VACUUM of a 4 GB ``storage.sqlite`` is a minute); the stores each file
        holds, marked compacted. Nothing elsewhere (chroma's erasure VACUUMs always)."""
        if self.layout.provider != "qdrant" or self.read_only:
            return []
        held = {n.removesuffix("-journal").removesuffix("-wal") for n in names}
        stores: dict[str, list[str]] = {}
        with qdrant_lock(self.layout.path):
            for p, owns in ((self.layout.history, ("history", "messages")),
                            (self.layout.qdrant_db(self.layout.collection), ("vector_store",)),
                            (self.layout.qdrant_db(self.layout.entity_collection), ("entity_store",))):
                if p.name in held and p.is_file():
                    _vacuum(p)
                    for st in owns:
                        stores.setdefault(st, []).append(f"VACUUM {p.name}: the byte scan after the deletion still "
                                                         "found the literals there")
        return [StoreOutcome(store=st, compacted=True, notes=n) for st, n in stores.items()]

    def _compaction(self) -> list[str]:
        if self.layout.provider == "qdrant":
            return [f"VACUUM {p} only if the byte scan after the deletion still finds a literal in it "
                    "(deleted with secure_delete: the records' bytes are overwritten with zeros)"
                    for p in self.layout.sqlite_files()]
        out = [f"VACUUM {p}" for p in self.layout.sqlite_files()]
        if self.layout.provider == "chroma":
            out.append(f"rebuild the HNSW segment of chroma's {self.layout.collection} (and of its entity "
                       "collection, if erased from) from the remaining records; check every file for the erased vectors")
        return out

    def bystanders(self, user: str | None) -> dict[str, StoreDigest]:
        """Per store, the digests of the records that are neither the user's nor the plan's
        targets. On qdrant local (``_mem0_near``): in each table the erasure deletes from, the
        rows sharing a container (key neighbours) with a deleted one, by their values, and the
        table's count by SQLite; the first digest is this erasure's baseline, the later ones
        cover the same containers (``resume``: the journalled one after a crash). The small
        ``messages`` table whole. Elsewhere from every record as read (``records``)."""
        if self.layout.provider != "qdrant":
            return self._bystanders_read(user)
        recs = [] if user is None else self.records_for(user, ())
        own = {(r.store, r.id) for r in recs if r.owner == user and r.store in _POINTS}
        mine = {i for s, i in own if s == "vector_store"}
        out: dict[str, StoreDigest] = {}
        for store, coll in (("vector_store", self.layout.collection), ("entity_store", self.layout.entity_collection)):
            if (db := self.layout.qdrant_db(coll)).is_file():
                ids = own | {t for t in self.targets if t[0] == store}
                keys = {k for s, i in ids if s == store for k in ([self._keys[(s, i)]] if (s, i) in self._keys
                                                                   else key_forms(i))}
                with closing(_ro(db)) as con:
                    out[store] = table_digest(con, "points", "id, point", keys, keys, self._baseline.get(store))
        skip = {i for s, i in self.targets if s == "history"} | {
            r.id for r in recs if r.store == "history" and r.memory_id in mine}
        with closing(_ro(self.layout.history)) as con:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "history" in names:
                out["history"] = table_digest(con, "history", _HISTORY_COLUMNS.removeprefix("SELECT ").split(
                    " FROM ")[0], skip, skip, self._baseline.get("history"))
            msgs = list(con.execute(_MESSAGES_COLUMNS)) if "messages" in names else []
        out["messages"] = digest(self._row_digest("messages", tuple(r)) for r in msgs
                                 if not (user is not None and _scope_user(str(r[1] or "")) == user)
                                 and ("messages", str(r[0])) not in self.targets)
        for s in self.store_names():
            out.setdefault(s, ())
        if not self._baseline:
            self._baseline = dict(out)
        return out

    def resume(self, before: dict[str, StoreDigest]) -> None:
        """A re-run after a crash: the journalled first digest is this erasure's baseline."""
        self._baseline = dict(before)

    def _bystanders_read(self, user: str | None) -> dict[str, StoreDigest]:
        per: dict[str, list[str]] = {s: [] for s in self.store_names()}
        recs = self.records()
        held = {r.id for r in recs if r.store in ("vector_store", "entity_store")}
        for r in recs:
            if (user is not None and r.owner == user) or (r.store, r.id) in self.targets:
                continue
            if r.store == "chroma_log" and r.memory_id in held:
                continue  # a copy of a record its collection holds (digested there): chroma drops it when it flushes
            per.setdefault(r.store, []).append(self._digest_of(r))
        return {s: digest(d) for s, d in per.items()}

    def _digest_of(self, r: Rec) -> str:
        if r.store not in ("history", "messages"):
            return r.digest  # a qdrant point's record is kept by its bytes (``_points``)
        return self._row_digest(r.store, r.raw)

    def _row_digest(self, store: str, raw: tuple[Any, ...]) -> str:
        """A history db row's digest: its values' repr is exact and stable (no JSON round trip)."""
        d = self._row_digests.get((store, raw))
        if d is None:
            d = self._row_digests[(store, raw)] = hashlib.sha256(repr(raw).encode()).hexdigest()
        return d

    # ------------------------------------------------------------------ erase
    def execute(self, plan: ErasurePlan, native: Any) -> list[StoreOutcome]:
        """``native(user, memory_ids)``: mem0's own deletions (``delete_all`` / ``delete``), on
        chroma. On qdrant local the points are deleted as qdrant local's own ``delete`` does
        (``_delete_points``, under its lock) without loading the collection into memory (what
        mem0's ``delete_all`` does first: minutes at 10^6 points); the history rows mem0's
        ``delete_all`` would add are the ones this erasure removes anyway."""
        if self.read_only:
            raise ConfigError("this mem0 instance was attached read-only; attach it with read_only=False to erase")
        ids: dict[str, set[str]] = {}
        for a in plan.actions:
            ids.setdefault(a.store, set()).add(a.record_id)
        mem_ids = set(ids.get("vector_store", set()))
        if ids.get("chroma_log"):
            mem_ids |= {r.memory_id or "" for r in self.records() if r.store == "chroma_log" and r.id in ids["chroma_log"]}
        removed = {s: len(v) for s, v in ids.items()}
        chroma = self._chroma_erasure(mem_ids, ids.get("entity_store", set()))
        if chroma is not None:
            chroma.before()  # an interrupted rebuild completed before mem0 opens the collection; the vectors read
        if self.layout.provider == "qdrant":
            with qdrant_lock(self.layout.path):
                mem_ids |= self._user_points(plan.user)  # what mem0's delete_all would find now
                self._delete_history(ids, mem_ids)
                self._delete_points(ids, mem_ids)
        else:
            self._delete_history(ids, mem_ids)  # before mem0's own delete: the ids can no longer be found after it
            native(plan.user, sorted(ids.get("vector_store", set())), sorted(ids.get("entity_store", set())))
            self._delete_history(ids, mem_ids)  # the DELETE rows mem0's own delete just wrote (old_memory = the text)
        notes = self._compact_vectors(mem_ids, ids)
        if chroma is not None:
            chroma.rebuild(self.files())
        qdrant = self.layout.provider == "qdrant"
        if not qdrant:
            _vacuum(self.layout.history)
        out = [StoreOutcome(store=s, removed=removed.get(s, 0), compacted=not qdrant) for s in self.store_names()]
        for o in out:
            o.notes = notes.get(o.store, [])
        if chroma is not None:
            chroma.verify(self.files(), {o.store: o for o in out})
        return out

    def _user_points(self, user: str | None) -> set[str]:
        """The user's memories in the collection now (their keys kept in ``_keys``)."""
        if user is None:
            return set()
        return {r.id for r in self.records_for(user, ()) if r.store == "vector_store" and r.owner == user}

    def _delete_points(self, ids: dict[str, set[str]], mem_ids: set[str]) -> None:
        """``DELETE`` the points by key from each collection's ``storage.sqlite``, as qdrant
        local's ``CollectionPersistence.delete`` does (``secure_delete``; VACUUM follows)."""
        for store, coll, planned in (("vector_store", self.layout.collection, mem_ids),
                                     ("entity_store", self.layout.entity_collection, ids.get("entity_store", set()))):
            db = self.layout.qdrant_db(coll)
            keys = {k for i in planned for k in ([self._keys[(store, i)]] if (store, i) in self._keys else key_forms(i))}
            if not keys or not db.is_file():
                continue
            with closing(sqlite3.connect(db)) as con:
                con.execute("PRAGMA secure_delete = ON")
                with con:
                    _delete_in(con, "points", "id", keys)

    def _chroma_erasure(self, mem_ids: set[str], entity_ids: set[str]) -> Any:
        """chroma's vector part (``_mem0_chroma``: imported only for an erasure on chroma)."""
        if self.layout.provider != "chroma":
            return None
        from traceless.systems._mem0_chroma import ChromaErasure

        lay = self.layout
        return ChromaErasure(lay.path, {"vector_store": (lay.collection, set(mem_ids)),
                                        "entity_store": (lay.entity_collection, set(entity_ids))})

    def _delete_history(self, ids: dict[str, set[str]], mem_ids: set[str]) -> None:
        with closing(sqlite3.connect(self.layout.history)) as con:
            con.execute("PRAGMA secure_delete = ON")
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            with con:
                if "history" in names:
                    _delete_in(con, "history", "memory_id", mem_ids)
                    _delete_in(con, "history", "id", ids.get("history", set()))
                if "messages" in names:
                    _delete_in(con, "messages", "id", ids.get("messages", set()))

    def _compact_vectors(self, mem_ids: set[str], ids: dict[str, set[str]]) -> dict[str, list[str]]:
        if self.layout.provider == "qdrant":
            return {"vector_store": [SECURE_DELETE_NOTE]}
        db = self.layout.path / _CHROMA_DB
        with closing(sqlite3.connect(db)) as con:
            con.execute("PRAGMA secure_delete = ON")
            with con:  # the log's copies of the records (DELETE entries carry no metadata: kept for replay)
                _delete_in(con, "embeddings_queue", "id", mem_ids | ids.get("entity_store", set()),
                           f" AND operation != {_CHROMA_DELETE}")
        _vacuum(db)
        return {"vector_store": ["chroma: log entries of the erased records removed, chroma.sqlite3 VACUUMed"]}


def _chroma_collections(con: sqlite3.Connection) -> dict[str, str]:
    """chroma's collections by name; a collection whose rebuild a kill interrupted after its
    original was deleted is read under its own name (``_mem0_chroma.finish`` renames it)."""
    cols = {str(n): str(i) for n, i in con.execute("SELECT name, id FROM collections")}
    for name, cid in list(cols.items()):
        if name.endswith(_REBUILDING):
            cols.setdefault(name.removesuffix(_REBUILDING), cid)
    return cols


def _delete_in(con: sqlite3.Connection, table: str, col: str, values: Iterable[str], extra: str = "") -> None:
    vals = sorted(values)
    for i in range(0, len(vals), 500):
        chunk = vals[i:i + 500]
        con.execute(f"DELETE FROM {table} WHERE {col} IN ({','.join('?' * len(chunk))}){extra}",  # noqa: S608
                    chunk)


def _vacuum(path: Path) -> None:
    with closing(sqlite3.connect(path)) as con:
        con.execute("VACUUM")
