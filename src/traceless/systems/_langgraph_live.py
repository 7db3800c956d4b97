"""A user's live LangGraph instance (SqliteStore + SqliteSaver files): read-only scan and
complete per-user erasure (issue #23). ``LangGraphSystem.attach`` opens one.

What belongs to a user: every store item whose namespace is the user's namespace (the
config's ``users.namespace`` template, e.g. ``["memories", "{user_id}"]``) or below it, its
vector-index rows (``store_vectors``), and every thread whose id matches the
``users.thread_id`` template (or whose checkpoint metadata carries a ``users.configurable``
key with the user's value), with every row of that thread in every checkpointer table
(``checkpoints``, ``writes``, ``checkpoint_blobs`` where a saver keeps one). Every record
holding a literal (UTF-8, UTF-16, JSON escapes) is found too; a bystander's thread or item
that holds one is erased whole (a thread's checkpoints are serialized: LangGraph offers no
per-message rewrite), and is left out of the bystander digests.

Read-only: each file is opened through a ``file:…?mode=ro`` URI; a WAL-mode file with no
``-wal`` (no writer has it open) additionally with ``immutable=1``, because SQLite would
otherwise create the ``-wal``/``-shm`` files. With a live writer (a ``-wal`` present) SQLite
updates the read marks in ``-shm`` (an index, no data). No ``setup()``, no migration.

Erasure: the store's own ``delete`` per item and the checkpointer's ``delete_thread`` per
thread, then the rows those leave (the store's ``store_vectors`` rows: its ``ON DELETE
CASCADE`` needs ``PRAGMA foreign_keys``, which the store does not set), then a truncating WAL
checkpoint of each file and ``VACUUM`` where a deletion left bytes (``sqlite.compact``). Every step is idempotent.
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import Any

from traceless.errors import ConfigError, ErasureScopeError, UnsupportedError
from traceless.systems import ErasurePlan, PlannedAction, ScanHit, ScanReport, StoreOutcome
from traceless.systems.kernel import StoreDigest, byte_forms, count_in_blobs, digest, literal_forms
from traceless.systems.sqlite import REST, SCOPE, compact, holds_sql, ro_connect, row_digest_sql

__all__ = ["LiveLangGraph", "NamespaceMap", "owned_threads", "refuse_shared", "shared_threads", "state_users"]

_STORE_TABLES = ("store", "store_vectors")
_KEYS = {"store": ("prefix", "key"), "store_vectors": ("prefix", "key", "field_name")}


@dataclass(frozen=True)
class NamespaceMap:
    """How users map to store namespaces and threads (validated templates)."""

    namespace: tuple[str, ...]
    thread_id: str
    configurable: dict[str, str] = field(default_factory=dict)
    state_key: str | None = None

    def prefix(self, user: str) -> str:
        """The store's text form of the user's namespace (labels joined with ``.``)."""
        return ".".join(label.format(user_id=user) for label in self.namespace)

    def owns_prefix(self, user: str | None, prefix: str) -> bool:
        if user is None:
            return False
        p = self.prefix(user)
        return prefix == p or prefix.startswith(p + ".")

    def owner_of_prefix(self, prefix: str) -> str | None:
        """Whose namespace ``prefix`` is (or is under), read back through the template."""
        parts = re.split(r"(\{user_id\})", ".".join(self.namespace))
        if "{user_id}" not in parts:
            return None
        rx = "".join("(?P<u>[^.]+)" if p == "{user_id}" else re.escape(p) for p in parts)
        m = re.match(rf"\A{rx}(?:\.|\Z)", prefix)
        return m.group("u") if m else None

    def owner_of_thread(self, thread_id: str) -> str | None:
        """Whose thread ``thread_id`` is by the template (the longest user id that fits: the
        template ``t-{user_id}-{session_id}`` reads ``t-a-b-c`` as user ``a-b``)."""
        parts = re.split(r"(\{user_id\}|\{session_id\})", self.thread_id)
        if "{user_id}" not in parts:
            return None
        rx = "".join("(?P<u>.+)" if p == "{user_id}" else ".+" if p == "{session_id}" else re.escape(p)
                     for p in parts)
        m = re.fullmatch(rx, thread_id, re.S)
        return m.group("u") if m else None

    def thread_pattern(self, user: str) -> re.Pattern[str]:
        parts = re.split(r"(\{user_id\}|\{session_id\})", self.thread_id)
        rx = "".join(re.escape(user) if p == "{user_id}" else ".+" if p == "{session_id}" else re.escape(p)
                     for p in parts)
        return re.compile(rf"\A{rx}\Z", re.S)


@dataclass
class _Row:
    store: str
    key: tuple[Any, ...]
    rowid: int
    owned: bool
    hits: int
    value: str | None
    orphan: bool = False
    """An index row whose item is gone (``store_vectors``)."""


def needles(forms: Sequence[bytes]) -> list[bytes]:
    """Byte strings at least one of which every one of ``forms`` holds, fewer where they can be:
    a literal's UTF-16LE and UTF-16BE forms whose code units' high bytes are zero (ASCII, Latin-1)
    share all but one byte (``C\\0A\\0…\\0Y``), searched once for both."""
    out: list[bytes] = []
    covered: set[bytes] = set()
    for f in forms:
        if f in covered:
            continue
        twin = next((g for g in forms if g != f and len(g) == len(f) > 2 and f[:-1] == g[1:]), None)
        if twin is not None and f[-1:] == b"\0" and twin[:1] == b"\0":
            covered |= {f, twin}
            out.append(f[:-1])
        else:
            covered.add(f)
            out.append(f)
    return list(dict.fromkeys(out))


def _hold_sql(cols: Sequence[str], forms: Sequence[bytes], alias: str = "t",
              con: sqlite3.Connection | None = None) -> tuple[str, list[Any]]:
    """An SQL condition true for a row one of whose columns' bytes holds one of ``forms`` (and
    for a few others: ``needles``; the rows it selects are counted by the forms themselves);
    given ``con``, one function call a row (``holds_sql``)."""
    return holds_sql(con, cols, needles(forms), alias)


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _tables(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]


def owned_threads(users: NamespaceMap, user: str, thread_ids: Iterable[str],
                  named: Mapping[str, set[tuple[str, str]]], by_state: Mapping[str, str]) -> set[str]:
    """The threads of ``user``: the id matches the ``users.thread_id`` template, or a checkpoint's
    metadata names the user under a ``users.configurable`` key (``named``: key → (thread, value)),
    or the graph's state does (``by_state``: thread → user). A thread whose metadata or state names
    another user is theirs, whatever its id: with ``{user_id}:{session_id}``, user ``ann`` must not
    take ``ann:vip:s1``. The one attribution rule of LangGraph's SQLite files and its server."""
    rx = users.thread_pattern(user)
    out = {t for t in thread_ids if rx.match(t)}
    for k, v in users.configurable.items():
        pairs, mine = named.get(k, set()), v.format(user_id=user)
        out |= {t for t, who in pairs if who == mine}
        out -= {t for t, who in pairs if who != mine}
    return (out | {t for t, w in by_state.items() if w == user}) - {t for t, w in by_state.items() if w != user}


def shared_threads(users: NamespaceMap, user: str, named: Mapping[str, set[tuple[str, str]]]) -> dict[str, int]:
    """The threads the user wrote in together with other users: thread → how many other users.
    A checkpoint's metadata (``users.configurable``) names the user and another one names
    someone else: LangGraph keeps one state per thread, which cannot be split by author, so
    such a thread is neither erased with the user nor left silently (``owned_threads`` gives it
    to nobody): the erasure is refused naming it. (An id that fits the user's template while the
    metadata names only another user is that user's thread, not a shared one.)"""
    mine: set[str] = set()
    others: dict[str, set[str]] = {}
    for k, v in users.configurable.items():
        me = v.format(user_id=user)
        for t, who in named.get(k, set()):
            if who == me:
                mine.add(t)
            else:
                others.setdefault(t, set()).add(who)
    return {t: len(others[t]) for t in sorted(mine & set(others))}


def refuse_shared(system: str, shared: Mapping[str, int]) -> None:
    """Refuse the erasure (before any change) of a user whose threads others wrote in too."""
    if shared:
        raise ErasureScopeError(
            f"{system}: {len(shared)} thread(s) of the user were also written by other users (their checkpoints' "
            f"metadata names {max(shared.values())} other user(s)): {', '.join(sorted(shared)[:5])}. LangGraph "
            "keeps one state per thread, which cannot be split by author; delete those threads with the "
            "co-authors' consent (or erase each co-author's request), then run again. Nothing was changed")


def state_users(pairs: Iterable[tuple[str, Any]]) -> dict[str, str]:
    """(thread, the value its checkpoint's state holds under ``users.state_key``) → thread → user,
    for the threads whose checkpoints name exactly one user (a string)."""
    seen: dict[str, set[str]] = {}
    for tid, who in pairs:
        if isinstance(who, str):
            seen.setdefault(tid, set()).add(who)
    return {t: next(iter(w)) for t, w in seen.items() if len(w) == 1}


class LiveLangGraph:
    """The store file and the checkpointer file of one live instance."""

    def __init__(self, store_path: Path | None, checkpoint_path: Path | None, users: NamespaceMap, *,
                 read_only: bool) -> None:
        for what, p in (("store", store_path), ("checkpointer", checkpoint_path)):
            if p is not None and not p.is_file():
                raise ConfigError(f"langgraph: the {what} file {p} does not exist; give the SQLite file your "
                                  f"application's {'SqliteStore' if what == 'store' else 'SqliteSaver'} uses "
                                  "(nothing was opened or created)")
        if store_path is None and checkpoint_path is None:
            raise ConfigError("langgraph: attaching needs the instance's files: give store.path and/or "
                              "checkpointer.path (SQLite files)")
        self.users, self.read_only = users, read_only
        self.store_path, self.checkpoint_path = store_path, checkpoint_path
        self._conns: dict[str, sqlite3.Connection] = {}
        self._cache: tuple[Any, list[_Row]] | None = None
        self._scope: tuple[tuple[str | None, str | None], dict[str, int]] | None = None
        """The bystander digests' scope (namespace and thread-id prefixes) and rest marks, fixed
        by an erasure's first digest."""
        for name, p in (("store", store_path), ("checkpoints", checkpoint_path)):
            if p is None:
                continue
            try:
                if read_only:
                    conn = ro_connect(p)  # immutable=1, or a private copy while a writer's -wal exists
                else:
                    conn = sqlite3.connect(str(p), check_same_thread=False, isolation_level=None)
                    conn.execute("PRAGMA secure_delete = ON")  # the deletions zero what they free
                _tables(conn)
            except sqlite3.DatabaseError as e:
                raise ConfigError(f"langgraph: cannot open {p} {'read-only ' if read_only else ''}as SQLite ({e}); "
                                  "give the file your application's store/checkpointer uses") from None
            self._conns[name] = conn

    # ------------------------------------------------------------------ records
    def _table_rows(self, db: str, table: str, keycols: Sequence[str], where: str, args: Sequence[Any],
                    forms: Sequence[bytes], owned: Callable[[tuple[Any, ...]], bool], reveal: bool,
                    orphan: str = "0") -> Iterator[_Row]:
        """The rows of ``table`` SQLite selects (``where``: the user's, and those whose bytes hold
        a literal's byte form, ``literal_sql``): key, ownership, the literals' count. Only a row
        with a match (or, with ``reveal``, a store item of the user) is read whole here."""
        conn = self._conns[db]
        cols = _columns(conn, table)
        hold, hargs = _hold_sql(cols, forms, con=conn)
        keys = ", ".join(f'"{k}"' for k in keycols)
        sql = f'SELECT rowid, {keys}, ({hold}), ({orphan}) FROM "{table}" AS t WHERE ({where}) OR ({hold})'  # noqa: S608
        for rowid, *rest in conn.execute(sql, [*hargs, *args, *hargs]).fetchall():
            key, matched, lone = tuple(rest[:-2]), rest[-2], rest[-1]
            hits, value = 0, None
            if matched or (reveal and table == "store" and owned(key)):
                vals = conn.execute(f'SELECT * FROM "{table}" WHERE rowid = ?', (rowid,)).fetchone()  # noqa: S608
                hits = count_in_blobs(vals, forms)
                if reveal and table == "store":
                    value = _text(dict(zip(cols, vals, strict=True))["value"])
            yield _Row(table, key, rowid, owned(key), hits, value, bool(lone))

    def _store_rows(self, user: str | None, forms: Sequence[bytes], reveal: bool) -> Iterator[_Row]:
        """The user's items (their namespace or below it), those holding a literal, and every
        index row whose item is gone or is one of those."""
        if "store" not in self._conns:
            return
        prefix = self.users.prefix(user) if user is not None else None

        def owned(key: tuple[Any, ...]) -> bool:
            return prefix is not None and (key[0] == prefix or str(key[0]).startswith(prefix + "."))

        mine, margs = ("t.prefix = ? OR substr(t.prefix, 1, ?) = ?", [prefix, len(prefix) + 1, prefix + "."]) \
            if prefix is not None else ("0", [])
        tables = _tables(self._conns["store"])
        if "store" in tables:
            yield from self._table_rows("store", "store", _KEYS["store"], mine, margs, forms, owned, reveal)
        if "store_vectors" in tables:
            item = "SELECT 1 FROM store AS s WHERE s.prefix = t.prefix AND s.key = t.key" if "store" in tables else ""
            gone = f"NOT EXISTS ({item})" if item else "1"
            hold, hargs = _hold_sql(_columns(self._conns["store"], "store"), forms, "s", self._conns["store"]) \
                if item and forms else ("0", [])
            where = f"{mine} OR {gone}" + (f" OR EXISTS ({item} AND ({hold}))" if hold != "0" else "")
            yield from self._table_rows("store", "store_vectors", _KEYS["store_vectors"], where, [*margs, *hargs],
                                        forms, owned, reveal, orphan=gone)

    def _thread_tables(self) -> list[str]:
        conn = self._conns.get("checkpoints")
        if conn is None:
            return []
        return [t for t in _tables(conn) if "thread_id" in _columns(conn, t)]

    def _owned_threads(self, user: str | None) -> set[str]:
        conn = self._conns.get("checkpoints")
        if user is None or conn is None or "checkpoints" not in _tables(conn):
            return set()
        tids, named = self._named(conn)
        return owned_threads(self.users, user, tids, named, self._state_users(conn, user, tids, named))

    def _shared_threads(self, user: str | None) -> dict[str, int]:
        conn = self._conns.get("checkpoints")
        if user is None or conn is None or "checkpoints" not in _tables(conn):
            return {}
        return shared_threads(self.users, user, self._named(conn)[1])

    def _named(self, conn: sqlite3.Connection) -> tuple[list[str], dict[str, set[tuple[str, str]]]]:
        """Every thread id, and per ``users.configurable`` key the (thread, user) pairs its
        checkpoints' metadata names (LangGraph copies the configurable keys there)."""
        tids = [str(t) for (t,) in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")]
        named: dict[str, set[tuple[str, str]]] = {}
        for k in self.users.configurable:
            path = '$."' + k.replace('"', '""') + '"'
            sql = ("SELECT DISTINCT thread_id, json_extract(CAST(metadata AS TEXT), ?) FROM checkpoints "
                   "WHERE json_valid(CAST(metadata AS TEXT)) AND json_extract(CAST(metadata AS TEXT), ?) IS NOT NULL")
            named[k] = {(str(t), str(who)) for t, who in conn.execute(sql, (path, path))}
        return tids, named

    def _state_users(self, conn: sqlite3.Connection, user: str, tids: Sequence[str],
                     named: Mapping[str, set[tuple[str, str]]]) -> dict[str, str]:
        """Thread → the user its checkpoints' state names under ``state_key`` (decoded with
        LangGraph's own serializer; a thread whose checkpoints name two users is left out), for
        the threads that can change ``owned_threads``' answer for ``user``: those its id template
        or the metadata gives to someone, and those whose checkpoint holds the user id's bytes
        (a state naming the user holds them). Only their checkpoints are decoded."""
        key = self.users.state_key
        if key is None:
            return {}
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

        rx = self.users.thread_pattern(user)
        cand = {t for t in tids if rx.match(t)} | {t for pairs in named.values() for t, _ in pairs}
        # a state names the user as a string the serializer decodes: UTF-8, or JSON-escaped
        hold, args = _hold_sql(["checkpoint"], [f.encode("utf-8") for f in literal_forms(user)], con=conn)
        cand |= {str(t) for (t,) in conn.execute(f"SELECT DISTINCT thread_id FROM checkpoints AS t WHERE {hold}", args)}  # noqa: S608
        serde = JsonPlusSerializer()
        pairs: list[tuple[str, Any]] = []
        for tid, typ, blob in conn.execute("SELECT thread_id, type, checkpoint FROM checkpoints WHERE thread_id IN "
                                           "(SELECT value FROM json_each(?))", (json.dumps(sorted(cand)),)):
            try:
                values = serde.loads_typed((typ, blob)).get("channel_values") or {}
            except Exception:  # noqa: BLE001 - a checkpoint this serializer cannot read names nobody
                continue
            pairs.append((str(tid), values.get(key) if isinstance(values, dict) else None))
        return state_users(pairs)

    def _thread_rows(self, user: str | None, forms: Sequence[bytes]) -> Iterator[_Row]:
        """Every row of the user's threads, every row holding a literal and, without a user,
        every row of a thread with such a row (the erasure removes that thread whole)."""
        conn = self._conns.get("checkpoints")
        if conn is None:
            return
        mine = self._owned_threads(user)
        whole = set(mine)
        if user is None and forms:
            for table in self._thread_tables():
                hold, args = _hold_sql(_columns(conn, table), forms, con=conn)
                whole |= {str(t) for (t,) in conn.execute(f'SELECT DISTINCT thread_id FROM "{table}" AS t '  # noqa: S608
                                                          f"WHERE {hold}", args)}
        for table in self._thread_tables():
            cols = _columns(conn, table)
            keycols = ["thread_id", *(c for c in cols if c in ("checkpoint_ns", "checkpoint_id", "task_id", "idx",
                                                                "channel", "version"))]
            yield from self._table_rows("checkpoints", table, keycols,
                                        "thread_id IN (SELECT value FROM json_each(?))", [json.dumps(sorted(whole))],
                                        forms, lambda key: str(key[0]) in mine, False)

    def _rows(self, user: str | None, literals: Sequence[str], reveal: bool = False) -> list[_Row]:
        """Every row (key, ownership, literal count). Kept while no connection commits: the
        plan and the bystander digests before the erasure read the same state, and so do the
        re-scan and the digests after it (``PRAGMA data_version`` tells another process's
        commits; this instance's own writes clear the cache)."""
        key = (user, tuple(literals), reveal, tuple(c.execute("PRAGMA data_version").fetchone()[0]
                                                    for c in self._conns.values()))
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        forms = byte_forms(literals)
        rows = [*self._store_rows(user, forms, reveal), *self._thread_rows(user, forms)]
        self._cache = (key, rows)
        return rows

    def _targets(self, user: str | None, literals: Sequence[str]) -> tuple[list[_Row], list[_Row]]:
        """(the rows the erasure removes, the bystanders' rows). A thread with one target row
        is a target whole; so is a store item whose row or vector row is one, and every vector row
        whose item is gone (an orphan index row keeps the deleted text's embedding)."""
        rows = self._rows(user, literals)
        # a literal acts on the requester's rows only: another user's row that holds it stays
        mine = [r for r in rows if r.owned or (user is None and r.hits)]
        threads = {str(r.key[0]) for r in mine if r.store not in _STORE_TABLES}
        items = {r.key[:2] for r in mine if r.store in _STORE_TABLES}
        items |= {r.key[:2] for r in rows if r.orphan}
        target: list[_Row] = []
        rest: list[_Row] = []
        for r in rows:
            hit = (str(r.key[0]) in threads) if r.store not in _STORE_TABLES else (r.key[:2] in items)
            (target if hit else rest).append(r)
        return target, rest

    def _owner_of(self, r: _Row) -> str | None:
        """Whose row ``r`` is by the user mapping's templates (namespace, thread id)."""
        if r.store in _STORE_TABLES:
            return self.users.owner_of_prefix(str(r.key[0]))
        return self.users.owner_of_thread(str(r.key[0]))

    # ------------------------------------------------------------------ the four methods
    def scan(self, system: str, user: str | None, literals: Sequence[str], reveal: bool) -> ScanReport:
        rows = self._rows(user, literals, reveal)
        stores = self._counts()
        hits = [ScanHit(store=r.store, record_id=json.dumps(list(r.key), ensure_ascii=False), field="*",
                        owner_match=r.owned, owner=user if r.owned else self._owner_of(r), literal_count=r.hits,
                        value=r.value)
                for r in rows if r.owned or r.hits]
        return ScanReport(system=system, user=user, literals=len(literals), stores=stores, hits=hits)

    def _counts(self) -> dict[str, int]:
        """Rows per table, by ``count(*)``."""
        return {name: int(self._conns["store" if name in _STORE_TABLES else "checkpoints"].execute(
            f'SELECT count(*) FROM "{name}"').fetchone()[0]) for name in self._empty_stores()}  # noqa: S608

    def _empty_stores(self) -> list[str]:
        out = []
        if "store" in self._conns:
            out += [t for t in _STORE_TABLES if t in _tables(self._conns["store"])]
        return out + self._thread_tables()

    def plan(self, system: str, user: str | None, literals: Sequence[str]) -> ErasurePlan:
        self._scope = None  # a new erasure: its first bystander digest fixes the scope again
        refuse_shared(system, self._shared_threads(user))
        target, rest = self._targets(user, literals)
        actions = [PlannedAction(store=r.store, record_id=json.dumps(list(r.key), ensure_ascii=False),
                                 action="remove", reason=_reason(r)) for r in target]
        compaction = [f"VACUUM {p.name}" for p in (self.store_path, self.checkpoint_path) if p is not None]
        return ErasurePlan(system=system, user=user, actions=actions, compaction=compaction,
                           held_by_others=sum(1 for r in rest if r.hits))

    def bystanders(self, user: str | None, literals: Sequence[str]) -> dict[str, StoreDigest]:
        """Per table: the SHA-256 of every row that is not a target in the containers the
        erasure touches (the namespaces and threads whose text starts with the user's, ``_scope``),
        over its values as SQLite quotes them (``row_digest_sql``, computed by SQLite: no row
        decoded here; rowids left out: VACUUM may renumber them), and a count of every other
        row that is not a target, up to the highest rowid the first digest saw (``#rest:``: a row
        another writer adds later gets a higher one), so a row removed anywhere changes it."""
        target, _ = self._targets(user, literals)
        skip: dict[str, set[int]] = {}
        for r in target:
            skip.setdefault(r.store, set()).add(r.rowid)
        if self._scope is None:
            self._scope = (self._scope_prefixes(user), {})
        (ns, th), marks = self._scope
        out: dict[str, StoreDigest] = {}
        for name in self._empty_stores():
            conn = self._conns["store" if name in _STORE_TABLES else "checkpoints"]
            col, p = ("prefix", ns) if name in _STORE_TABLES else ("thread_id", th)
            where, args = (f'substr(CAST("{col}" AS TEXT), 1, ?) = ?', [len(p), p]) if p is not None else ("0", [])
            gone = skip.get(name, set())
            text, _ = row_digest_sql(_columns(conn, name), ())
            rows = conn.execute(f'SELECT rowid, {text} FROM "{name}" WHERE {where}', args)  # noqa: S608
            mine = digest(sha256(b).hexdigest() for rowid, b in rows if rowid not in gone)
            out[name] = tuple(sorted([*mine, self._rest(conn, name, where, args, gone, marks),
                                      SCOPE + json.dumps([ns, th])]))
        return out

    def _rest(self, conn: sqlite3.Connection, name: str, where: str, args: list[Any], gone: set[int],
              marks: dict[str, int]) -> str:
        """``#rest:MAXROWID:COUNT`` of the rows outside the containers that are not targets."""
        rest = (f'FROM "{name}" WHERE NOT coalesce({where}, 0) '  # noqa: S608 - the file's own tables
                "AND rowid NOT IN (SELECT value FROM json_each(?))")
        rargs = [*args, json.dumps(sorted(gone))]
        if name in marks:
            n = conn.execute(f"SELECT count(*) {rest} AND rowid <= ?", [*rargs, marks[name]]).fetchone()[0]
        else:
            n, marks[name] = conn.execute(f"SELECT count(*), ifnull(max(rowid), -1) {rest}", rargs).fetchone()
        return f"{REST}{marks[name]}:{n}"

    def _scope_prefixes(self, user: str | None) -> tuple[str | None, str | None]:
        """The text every namespace and every thread id of ``user`` (and of the users whose id
        starts with the user's) starts with: the templates up to the user id (None: no user)."""
        if user is None:
            return None, None
        labels = list(self.users.namespace)
        upto = next((i for i, label in enumerate(labels) if "{user_id}" in label), len(labels) - 1)
        ns = ".".join(label.format(user_id=user) for label in labels[:upto + 1])
        ns = ns[:ns.rindex(user) + len(user)] if user in ns else ns
        head = self.users.thread_id.split("{user_id}", 1)
        th = head[0].split("{session_id}", 1)[0] + (user if len(head) == 2 and "{session_id}" not in head[0] else "")
        return ns, th

    def resume_scope(self, before: Mapping[str, StoreDigest]) -> None:
        """The scope an interrupted erasure journalled with its digests (``#scope:``/``#rest:``)."""
        marks: dict[str, int] = {}
        prefixes: tuple[str | None, str | None] | None = None
        for name, entries in before.items():
            for e in entries:
                if e.startswith(SCOPE):
                    ns, th = json.loads(e[len(SCOPE):])
                    prefixes = (ns, th)
                elif e.startswith(REST):
                    marks[name] = int(e[len(REST):].split(":", 1)[0])
        if prefixes is not None:
            self._scope = (prefixes, marks)

    # ------------------------------------------------------------------ erasure
    def execute(self, plan: ErasurePlan, literals: Sequence[str]) -> list[StoreOutcome]:
        if self.read_only:
            raise UnsupportedError("langgraph: this instance was attached read-only (scan); attach it with "
                                   "read_only=False to erase")
        outcomes = {name: StoreOutcome(store=name) for name in self._empty_stores()}
        self._cache = None
        self._native_deletes(plan, outcomes)
        self._cache = None
        self._residue(plan.user, literals, outcomes)
        self._cache = None
        for name, conn in self._conns.items():
            path = self.store_path if name == "store" else self.checkpoint_path
            assert path is not None
            note = compact(conn, functools.partial(_db_files, path), literals)
            for o in outcomes.values():
                if (o.store in _STORE_TABLES) == (name == "store"):
                    o.compacted = True
                    o.notes.append(note)
        return list(outcomes.values())

    def _native_deletes(self, plan: ErasurePlan, outcomes: dict[str, StoreOutcome]) -> None:
        items = sorted({tuple(json.loads(a.record_id)[:2]) for a in plan.actions if a.store == "store"})
        threads = sorted({str(json.loads(a.record_id)[0]) for a in plan.actions if a.store not in _STORE_TABLES})
        if items:
            from langgraph.store.sqlite import SqliteStore

            store = SqliteStore(self._conns["store"])
            for prefix, key in items:
                store.delete(tuple(str(prefix).split(".")), str(key))
        if threads:
            from langgraph.checkpoint.sqlite import SqliteSaver

            saver = SqliteSaver(self._conns["checkpoints"])
            for tid in threads:
                saver.delete_thread(tid)
        for a in plan.actions:
            if a.store in outcomes:
                outcomes[a.store].removed += 1

    def _residue(self, user: str | None, literals: Sequence[str], outcomes: dict[str, StoreOutcome]) -> None:
        """Delete directly what the native deletions left (found by the same record scan; with a
        user the targets are the user's threads and items and the orphan index rows, whatever
        holds a literal: the literals' byte search is not run again here)."""
        target, _ = self._targets(user, () if user is not None else literals)
        left: dict[str, list[int]] = {}
        for r in target:
            left.setdefault(r.store, []).append(r.rowid)
        for table, rowids in left.items():
            conn = self._conns["store" if table in _STORE_TABLES else "checkpoints"]
            conn.execute("BEGIN")
            for i in range(0, len(rowids), 500):
                chunk = rowids[i:i + 500]
                conn.execute(f'DELETE FROM "{table}" WHERE rowid IN ({",".join("?" * len(chunk))})', chunk)
            conn.execute("COMMIT")
            outcomes.setdefault(table, StoreOutcome(store=table)).notes.append(
                f"the native deletions left {len(rowids)} row(s) of the user here; removed directly")

    def files(self) -> list[Path]:
        out = []
        for p in (self.store_path, self.checkpoint_path):
            if p is None:
                continue
            out += _db_files(p)
        return out

    def snapshot(self, db: str) -> sqlite3.Connection | None:
        """An in-memory copy of one file (``store`` or ``checkpoints``; None: not attached),
        read through SQLite's backup API: what the certificate's probes read through the
        store's own search and the user's graph, so probing writes nothing to the instance."""
        conn = self._conns.get(db)
        if conn is None:
            return None
        mem = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        conn.backup(mem)
        return mem

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()


def _reason(r: _Row) -> str:
    if r.owned:
        return "owned by the user"
    if r.hits:
        return "holds a literal"
    return "of an erased thread" if r.store not in _STORE_TABLES else "index row of an erased item"


def _db_files(p: Path) -> list[Path]:
    """The SQLite file ``p`` and its ``-wal``/``-shm``/``-journal`` (those there)."""
    return [q for q in (p, *(p.with_name(p.name + s) for s in ("-wal", "-shm", "-journal"))) if q.is_file()]
