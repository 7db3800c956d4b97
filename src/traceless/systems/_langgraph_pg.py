"""LangGraph on a PostgreSQL **server** (issue #35): the user's ``PostgresSaver`` and
``PostgresStore`` (``langgraph-checkpoint-postgres``), named by the connection string the app
gives ``from_conn_string``, read in read-only transactions and erased through the kernel.

* tables: ``checkpoints``, ``checkpoint_blobs``, ``checkpoint_writes`` (the saver's three:
  all required when a checkpointer is named), ``store`` (required when a store is named) and
  ``store_vectors`` (its pgvector index, when present). ``checkpoint_migrations`` and
  ``store_migrations`` are nobody's and never read. A missing table is refused: traceless
  never calls ``setup()`` (it would create them), never runs DDL.
* attribution: the SQLite files' rules (``_langgraph_live.owned_threads``): a thread is the
  user's by the ``users.thread_id`` template, by a ``users.configurable`` key in its
  checkpoints' metadata, or by ``users.state_key`` in the graph's state: an inline string in
  the checkpoint's ``channel_values`` (jsonb), or a ``checkpoint_blobs`` row of that channel
  decoded with LangGraph's serializer. Every row of the thread in the three tables is the
  user's. A store item is the user's by its namespace (``users.namespace``, and below it);
  its ``store_vectors`` rows go with it.
* erasure: the kernel's plan (``others_policy = "leave"``: another user's record quoting a
  literal is never changed, so the erasure is refused for that literal); the rows go by their
  composite keys in **one** transaction per server (``PgServer.delete``), then ``VACUUM
  (INDEX_CLEANUP ON)`` (default) or ``VACUUM FULL`` (``traceless: {pg_compaction: full}``) and
  ``CHECKPOINT``; the relation files and ``pg_wal`` read for the erased texts.
* replicas (``traceless: {pg_replicas: [DSN, ...]}``): each named physical standby is checked
  one (``pg_is_in_recovery()``) before any change, waited for after the erasure until it
  replayed past the erasure's checkpoint, checkpointed (a restartpoint), and its relation files
  and ``pg_wal`` read; the kernel's byte scan reads its files too (``postgres.physical_step``,
  ``replica_files``, as for mem0 on pgvector).
* online: the app keeps writing other users' threads and items meanwhile; the bystanders are
  the other users' rows of this erasure's first digest, less the rows its ``DELETE …
  RETURNING`` removed (``postgres.OnlineBystanders``); the receipt says what the app changed.

Credentials are never written: messages name host, port and database only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from traceless.errors import ConfigError
from traceless.systems import StoreOutcome
from traceless.systems._langgraph_live import NamespaceMap, owned_threads, state_users
from traceless.systems.contract import LiveInstance, Op, Record, Remove
from traceless.systems.kernel import bystander_rows, count_literals
from traceless.systems.postgres import (
    OnlineBystanders,
    PgServer,
    PgTarget,
    ident,
    make_target,
    out_of_scope,
    physical_step,
    replica_files,
    replica_steps,
    standbys,
)

__all__ = ["CKPT_TABLES", "KEYS", "STORE_TABLES", "PgLangGraph", "lg_target", "pg_instance"]

CKPT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
STORE_TABLES = ("store", "store_vectors")
KEYS: dict[str, tuple[str, ...]] = {
    "checkpoints": ("thread_id", "checkpoint_ns", "checkpoint_id"),
    "checkpoint_blobs": ("thread_id", "checkpoint_ns", "channel", "version"),
    "checkpoint_writes": ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"),
    "store": ("prefix", "key"),
    "store_vectors": ("prefix", "key", "field_name"),
}
"""Each table's primary key (``PostgresSaver`` / ``PostgresStore`` migrations)."""
_DELETE_ORDER = ("checkpoint_writes", "checkpoint_blobs", "checkpoints", "store_vectors", "store")
_MIN_NEEDLE = 8
"""Shortest text of an erased record that the file verification looks for."""


def lg_target(dsn_parts: Mapping[str, Any], compaction: str, source: str) -> PgTarget:
    """The server of a config's connection string (parsed once, in the config model)."""
    return make_target(dict(dsn_parts), compaction, source=source)


def pg_instance(config: Any, *, read_only: bool) -> PgLangGraph:
    """The instance a ``LangGraphConfig`` names on its server(s): each reached and its tables
    checked, read only, before anything else; a missing table refused (nothing created)."""
    parts = [("checkpointer", config.checkpointer, CKPT_TABLES, CKPT_TABLES, "PostgresSaver"),
             ("store", config.store, STORE_TABLES, ("store",), "PostgresStore")]
    if any(c is not None and c.kind != "postgres" for _, c, *_ in parts):
        raise ConfigError("langgraph: give the checkpointer and the store both as kind \"postgres\" (one on a "
                          "server and one in a SQLite file cannot be erased together yet)")
    compaction = config.traceless.pg_compaction if config.traceless is not None else "vacuum"
    dsns = (config.traceless.pg_replicas if config.traceless is not None else None) or []
    servers: dict[str, PgServer] = {}
    for what, c, tables, required, cls in parts:
        if c is None:
            continue
        target = lg_target(c.dsn(), compaction, f"{what}.url")
        pg = servers.setdefault(target.conninfo, PgServer(target))
        found = pg.existing(list(tables))
        missing = [t for t in required if t not in found]
        if missing:
            raise ConfigError(f"langgraph: {target.where} has no table {missing[0]!r} ({cls}'s); your app's "
                              f"{cls}.setup() creates it, traceless never does: check {what}.url "
                              "(nothing was created)")
        pg.tables += [t for t in tables if t in found and t not in pg.tables]
    if dsns and len(servers) > 1:
        raise ConfigError("langgraph: traceless.pg_replicas with the checkpointer and the store on two servers "
                          "cannot say whose replica each is; give both the same server, or no pg_replicas "
                          "(nothing was changed)")
    reps = standbys(next(iter(servers.values())), dsns) if dsns else []
    return PgLangGraph(config.users.mapping(), list(servers.values()), read_only=read_only, replicas=reps)


@dataclass
class _Tables:
    """The rows of the instance's tables as one read saw them."""

    rows: dict[str, list[tuple[tuple[str, ...], dict[str, str]]]] = field(default_factory=dict)
    """table → [(key as text, column → text)]."""
    named: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    """configurable key → (thread, value) in checkpoints' metadata."""
    by_state: dict[str, str] = field(default_factory=dict)
    """thread → the user the graph's state names."""


@dataclass
class PgLangGraph(LiveInstance):
    """The saver's and the store's tables on their servers (one ``PgServer`` per connection)."""

    others_policy: ClassVar[Any] = "leave"
    users: NamespaceMap
    servers: list[PgServer]
    """Each server with the tables of this instance it holds (checkpointer and store may share one)."""
    read_only: bool = True
    requester: str | None = None
    """The user of the current request (set by the system before the kernel reads)."""
    erased_texts: list[str] = field(default_factory=list)
    """Texts of the rows the last ``apply`` removed (what the file verification looks for)."""
    replicas: list[PgServer] = field(default_factory=list)
    """The server's named physical standbys (``traceless.pg_replicas``), read only."""
    online: OnlineBystanders = field(default_factory=OnlineBystanders)
    """The online bystander rule (this erasure's first digest, the rows its DELETE returned)."""

    # ------------------------------------------------------------------ reading
    def stores(self) -> list[str]:
        return [t for pg in self.servers for t in pg.tables]

    def _server_of(self, table: str) -> PgServer:
        return next(pg for pg in self.servers if table in pg.tables)

    def _read(self) -> _Tables:
        out = _Tables()
        for pg in self.servers:
            with pg.connect(read_only=True) as con:
                for t in pg.tables:
                    out.rows[t] = _table_rows(con, t)
                if "checkpoints" in pg.tables:
                    out.named = _metadata_users(con, self.users)
                    out.by_state = _state_owners(con, self.users, "checkpoint_blobs" in pg.tables)
                con.rollback()
        return out

    def records(self, user: str | None = None, literals: Sequence[str] = ()) -> Iterator[Record]:
        who = user if user is not None else self.requester
        tabs = self._read()
        tids = {k[0] for t in CKPT_TABLES for k, _ in tabs.rows.get(t, [])}
        mine = owned_threads(self.users, who, tids, tabs.named, tabs.by_state) if who is not None else set()
        by_thread: dict[str, list[tuple[str, str]]] = {}
        for t in CKPT_TABLES:
            for k, _ in tabs.rows.get(t, []):
                by_thread.setdefault(k[0], []).append((t, _rid(k)))
        vectors: dict[tuple[str, ...], list[tuple[str, str]]] = {}
        for k, _ in tabs.rows.get("store_vectors", []):
            vectors.setdefault(k[:2], []).append(("store_vectors", _rid(k)))
        for t, rows in tabs.rows.items():
            for k, cols in rows:
                if t in CKPT_TABLES:
                    owner = who if k[0] in mine else self._thread_owner(k[0], tabs)
                    held = bool(literals) and owner is None and count_literals("\t".join(cols.values()), literals) > 0
                    linked = tuple(x for x in by_thread[k[0]] if x != (t, _rid(k))) if held else ()
                else:
                    owner = who if self.users.owns_prefix(who, k[0]) else self._prefix_owner(k[0])
                    linked = tuple(vectors.get(k[:2], ())) if t == "store" else ()
                yield Record(t, _rid(k), owner, cols, linked=linked, ref=k)

    def _thread_owner(self, tid: str, tabs: _Tables) -> str | None:
        """Another user's thread: who its state or metadata names, else the id template's user."""
        if tid in tabs.by_state:
            return tabs.by_state[tid]
        for pairs in tabs.named.values():
            names = {w for t, w in pairs if t == tid}
            if len(names) == 1:
                return next(iter(names))
        m = _inverse(self.users.thread_id).match(tid)
        return m.group("u") if m else None

    def _prefix_owner(self, prefix: str) -> str | None:
        m = _inverse(".".join(self.users.namespace), below=True).match(prefix)
        return m.group("u") if m else None

    # ------------------------------------------------------------------ erasing
    def compaction(self) -> list[str]:
        out = [f"{pg.how()} {', '.join(pg.tables)} on {pg.target.where}, CHECKPOINT" for pg in self.servers]
        return out + replica_steps(self.replicas)

    def precheck(self) -> None:
        """Every server's role may DELETE and VACUUM its tables, every named replica is a
        standby (refused before any change)."""
        for pg in self.servers:
            pg.precheck_write()
        for r in self.replicas:
            r.check_standby()

    def online_bystanders(self, rows: list[tuple[tuple[str, str], str]]) -> list[tuple[tuple[str, str], str]]:
        return list(self.online.rows(dict(rows)).items())

    def apply(self, ops: Sequence[Op], literals: Sequence[str]) -> list[StoreOutcome]:
        if self.read_only:
            raise ConfigError("langgraph: this instance was attached read-only (scan); attach it with "
                              "read_only=False to erase")
        self.precheck()
        gone = [o.record for o in ops if isinstance(o, Remove) and o.record.store in KEYS]
        self.erased_texts = sorted(set(self.erased_texts) | _needles(gone, literals, self._kept(gone)))
        outcomes = {t: StoreOutcome(store=t, compacted=True) for t in self.stores()}
        for pg in self.servers:
            keys = {t: (KEYS[t], {_key(r) for r in gone if r.store == t}) for t in _DELETE_ORDER if t in pg.tables}
            for t, removed in pg.delete(keys).items():
                outcomes[t].removed += len(removed)
                self.online.deleted |= {(t, _rid(k)) for k in removed}
            outcomes[pg.tables[0]].notes += physical_step(pg, self.erased_texts, self.replicas)
        planned = {(r.store, r.id) for r in gone}
        now = dict(bystander_rows(self, self.requester, literals, planned))
        outcomes[self.stores()[0]].notes.append(self.online.note(now, planned))
        return list(outcomes.values())

    def _kept(self, gone: Sequence[Record]) -> list[str]:
        drop = {(r.store, r.id) for r in gone}
        return [r.text() for r in self.records(None, ()) if (r.store, r.id) not in drop]

    def files(self) -> list[Path]:
        return [p for pg in self.servers for p in pg.server_files()[0]] + replica_files(self.replicas)

    def out_of_scope(self) -> list[str]:
        return out_of_scope(self.replicas)


def _rid(key: tuple[str, ...]) -> str:
    return json.dumps(list(key), ensure_ascii=False)


def _key(r: Record) -> tuple[str, ...]:
    return tuple(r.ref) if r.ref is not None else tuple(json.loads(r.id))


def _inverse(template: str, *, below: bool = False) -> re.Pattern[str]:
    """A template (``{user_id}/{session_id}``) as a regex whose group ``u`` is the user."""
    parts = re.split(r"(\{user_id\}|\{session_id\})", template)
    rx = "".join("(?P<u>.+?)" if p == "{user_id}" else ".+" if p == "{session_id}" else re.escape(p) for p in parts)
    tail = r"(\..*)?" if below else ""
    return re.compile(rf"\A{rx}{tail}\Z", re.S)


def _columns(con: Any, table: str) -> list[tuple[str, str]]:
    rows = con.execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
                       "%s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum", (table,)).fetchall()
    return [(str(n), str(t)) for n, t in rows]


def _table_rows(con: Any, table: str) -> list[tuple[tuple[str, ...], dict[str, str]]]:
    """Every row: its key as text and each column as text (bytea decoded as UTF-8, as stored:
    msgpack keeps strings as their UTF-8 bytes; jsonb and the rest as the server prints them)."""
    from psycopg import sql

    cols = _columns(con, table)
    keys = KEYS[table]
    sel: list[Any] = [sql.SQL("{}::text").format(sql.Identifier(k)) for k in keys]
    sel += [sql.Identifier(n) if t == "bytea" else sql.SQL("{}::text").format(sql.Identifier(n)) for n, t in cols]
    order = sql.SQL(", ").join(sql.Identifier(k) for k in keys)
    q = sql.SQL("SELECT {} FROM {} ORDER BY {}").format(sql.SQL(", ").join(sel), ident(table), order)
    out = []
    for row in con.execute(q):
        key, vals = tuple(str(x) for x in row[:len(keys)]), row[len(keys):]
        out.append((key, {n: _text(v) for (n, _), v in zip(cols, vals, strict=True)}))
    return out


def _text(v: Any) -> str:
    if v is None:
        return ""
    return bytes(v).decode("utf-8", "replace") if isinstance(v, bytes | memoryview) else str(v)


def _metadata_users(con: Any, users: NamespaceMap) -> dict[str, set[tuple[str, str]]]:
    """configurable key → (thread, value) of the checkpoints' metadata holding that key."""
    out: dict[str, set[tuple[str, str]]] = {}
    for k in users.configurable:
        rows = con.execute("SELECT DISTINCT thread_id, metadata ->> %s FROM checkpoints WHERE metadata ? %s",
                           (k, k)).fetchall()
        out[k] = {(str(t), str(w)) for t, w in rows if w is not None}
    return out


def _state_owners(con: Any, users: NamespaceMap, blobs: bool) -> dict[str, str]:
    """thread → the user its state names under ``users.state_key``: PostgresSaver keeps a string
    inline in the checkpoint's ``channel_values``, anything else as a blob of that channel."""
    key = users.state_key
    if key is None:
        return {}
    pairs: list[tuple[str, Any]] = [(str(t), w) for t, w in con.execute(
        "SELECT thread_id, checkpoint -> 'channel_values' ->> %s FROM checkpoints "
        "WHERE jsonb_typeof(checkpoint -> 'channel_values' -> %s) = 'string'", (key, key))]
    if blobs:
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

        serde = JsonPlusSerializer()
        for tid, typ, blob in con.execute("SELECT thread_id, type, blob FROM checkpoint_blobs WHERE channel = %s "
                                          "AND type <> 'empty' AND blob IS NOT NULL", (key,)):
            try:
                pairs.append((str(tid), serde.loads_typed((str(typ), bytes(blob)))))
            except Exception:  # noqa: BLE001 - a blob this serializer cannot read names nobody
                continue
    return state_users(pairs)


def _needles(gone: Iterable[Record], literals: Sequence[str], kept: Sequence[str]) -> set[str]:
    """What the file verification looks for: the literals, and the store values' and the message
    texts' strings of the removed rows (8 characters at least) that no remaining row holds."""
    texts = set(literals)
    for r in gone:
        if r.store == "store":
            texts |= _strings(_json(r.fields.get("value", "")))
        elif r.store == "checkpoints":
            texts |= _strings(_json(r.fields.get("checkpoint", "")).get("channel_values", {}))
    texts = {t for t in texts if len(t) >= _MIN_NEEDLE}
    return {t for t in texts if t in literals or not any(count_literals(k, [t]) for k in kept)}


def _json(text: str) -> Any:
    try:
        v = json.loads(text)
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def _strings(v: Any) -> set[str]:
    if isinstance(v, str):
        return {v}
    if isinstance(v, dict):
        return {s for x in v.values() for s in _strings(x)}
    if isinstance(v, list):
        return {s for x in v for s in _strings(x)}
    return set()
