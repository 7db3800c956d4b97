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
* reading: the user's rows and the rows that may hold a literal are selected on the server
  (``records``: the per-thread owner map, the user's threads by ``thread_id`` and items by
  namespace through LangGraph's indexes, literal holders by one ``LIKE ANY`` pass on the
  server as a superset the kernel's match rule then decides); totals by ``count(*)``
  (``counts``); bystanders counted there (``bystanders``: per table the count and the sum of
  the primary keys' hashes, one aggregate, with the snapshot's mark).
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
  the other users' rows of this erasure's first count, less the rows its ``DELETE …
  RETURNING`` removed that the count held (``postgres.OnlineTally``); the receipt says which way
  the app moved the count.
* ``--certify`` (``probe_store``): the probes read the user's items through LangGraph's own
  ``PostgresStore`` on the server (its search, the config's index), on a connection whose
  session is read-only (``default_transaction_read_only``); what the user's graph writes while
  it answers a probe is kept in memory, never sent to the server.

Credentials are never written: messages name host, port and database only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from traceless._jsonin import has_surrogate
from traceless.errors import ConfigError
from traceless.systems import StoreOutcome
from traceless.systems._langgraph_live import NamespaceMap, owned_threads, shared_threads, state_users
from traceless.systems.contract import LiveInstance, Op, Record, Remove
from traceless.systems.kernel import StoreDigest, count_literals, literal_forms
from traceless.systems.postgres import (
    KEY_SEP,
    OnlineTally,
    PgServer,
    PgTarget,
    Tally,
    escape_like,
    ident,
    in_snapshot,
    key_hash,
    key_sql,
    like_any,
    make_target,
    marks,
    out_of_scope,
    physical_step,
    replica_files,
    replica_steps,
    standbys,
    tally_digest,
)

__all__ = ["CKPT_TABLES", "KEYS", "STORE_TABLES", "PgLangGraph", "lg_target", "pg_instance",
           "probe_store"]

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
    online: OnlineTally = field(default_factory=OnlineTally)
    """The online bystander rule in aggregate (this erasure's first count, the rows its DELETE returned)."""
    _first: tuple[tuple[set[str], str | None], dict[str, str]] | None = None
    """The user's threads and namespace as this erasure's first count left them out, and its snapshots."""
    _snaps: dict[str, str] = field(default_factory=dict)
    """Per table, the snapshot its first count was taken in (``pg_current_snapshot()``)."""
    _resumed: bool = False
    """A re-run after a crash: the snapshots are the interrupted run's (``resume``)."""

    # ------------------------------------------------------------------ reading
    def stores(self) -> list[str]:
        return [t for pg in self.servers for t in pg.tables]

    def _server_of(self, table: str) -> PgServer:
        return next(pg for pg in self.servers if table in pg.tables)

    def _read(self) -> _Tables:
        """Every row of every table (``records(None, ())``: the contract's full read)."""
        out = _Tables()
        for pg in self.servers:
            with pg.connect(read_only=True) as con:
                if "checkpoints" in pg.tables:
                    out.named = _metadata_users(con, self.users)
                    out.by_state = _state_owners(con, self.users, "checkpoint_blobs" in pg.tables)
                for t in pg.tables:
                    out.rows[t] = _table_rows(con, t)
                con.rollback()
        return out

    def records(self, user: str | None = None, literals: Sequence[str] = ()) -> Iterator[Record]:
        """The user's rows and the rows that may hold a literal, selected on the server (``_select``);
        with neither, every row."""
        who = user if user is not None else self.requester
        pieces = _pieces(literals)
        tabs = self._read() if (user is None and not literals) or pieces is None else self._select(who, pieces)
        return self._as_records(who, tabs, literals)

    def shared(self, user: str) -> dict[str, int]:
        """The user's threads that other users wrote in too (``shared_threads``: the checkpoints'
        metadata names both), read on the server."""
        out: dict[str, int] = {}
        for pg in self.servers:
            if "checkpoints" in pg.tables:
                with pg.connect(read_only=True) as con:
                    out.update(shared_threads(self.users, user, _metadata_users(con, self.users)))
                    con.rollback()
        return out

    def every_record(self, user: str | None = None, literals: Sequence[str] = ()) -> Iterator[Record]:
        """``records`` by reading every row of every table (the reference the selection is tested on)."""
        return self._as_records(user if user is not None else self.requester, self._read(), literals)

    def _select(self, who: str | None, pieces: Sequence[str]) -> _Tables:
        """The rows ``records`` needs, selected on the server in one read-only transaction per
        server: every row of the threads that are ``who``'s (``_user_threads``: the per-thread
        owner map, then the rows by ``thread_id``, an index) or whose rows may hold a literal
        (``_holding``: a pass on the server), the store items under ``who``'s namespace (the
        primary key and LangGraph's ``store_prefix_idx``) or that may hold a literal, and the
        ``store_vectors`` rows of those items. A superset of what the kernel's rule selects."""
        from psycopg import sql

        out = _Tables()
        like = like_any(pieces)
        args = {"p": list(pieces), "l": like, "lb": [x.encode("utf-8") for x in like]}
        for pg in self.servers:
            with pg.connect(read_only=True) as con:
                if "checkpoints" in pg.tables:
                    out.named = _metadata_users(con, self.users)
                    out.by_state = _state_owners(con, self.users, "checkpoint_blobs" in pg.tables)
                tids = self._user_threads(con, pg, who, out) if "checkpoints" in pg.tables else set()
                tids |= _holding_threads(con, pg, args) if pieces else set()
                for t in pg.tables:
                    if t in CKPT_TABLES:
                        out.rows[t] = _table_rows(con, t, sql.SQL("thread_id = ANY(%(tids)s)"), {"tids": sorted(tids)})
                    else:
                        out.rows[t] = self._store_rows(con, t, who, args, out.rows.get("store", []))
                con.rollback()
        return out

    def _user_threads(self, con: Any, pg: PgServer, who: str | None, tabs: _Tables) -> set[str]:
        """The threads whose owner is ``who`` (as ``_as_records`` attributes them): those whose id
        fits the ``users.thread_id`` template (``LIKE``, on the server), or that the metadata or
        the state names."""
        if who is None:
            return set()
        from psycopg import sql

        q = sql.SQL(" UNION ").join(sql.SQL("SELECT thread_id FROM {} WHERE thread_id LIKE %(like)s").format(ident(t))
                                    for t in CKPT_TABLES if t in pg.tables)
        fits = {str(r[0]) for r in con.execute(q, {"like": _like(self.users.thread_id, who)})}
        mine = owned_threads(self.users, who, fits, tabs.named, tabs.by_state)
        named = {t for k, v in self.users.configurable.items() for t, w in tabs.named.get(k, set())
                 if w in (who, v.format(user_id=who))}
        cands = fits | named | {t for t, w in tabs.by_state.items() if w == who}
        return {t for t in cands if t in mine or self._thread_owner(t, tabs) == who}

    def _store_rows(self, con: Any, table: str, who: str | None, args: dict[str, Any],
                    items: Sequence[tuple[tuple[str, ...], dict[str, str]]]) -> list[tuple[tuple[str, ...], dict[str, str]]]:
        """``store`` rows under ``who``'s namespace (the primary key, ``store_prefix_idx``: a
        BitmapOr of the two) or that may hold a literal (then a pass on the server); ``store_vectors``
        rows so too, and every row of the selected items' namespaces (its primary key)."""
        from psycopg import sql

        terms: list[Any] = []
        if who is not None:
            terms += [sql.SQL("prefix = %(ns)s"), sql.SQL("prefix LIKE %(below)s")]
        if table == "store_vectors" and items:
            terms.append(sql.SQL("prefix = ANY(%(of)s)"))
        if args["p"]:
            terms.append(_match(con, table, args["p"]))
        if not terms:
            return []
        ns = self.users.prefix(who) if who is not None else ""
        return _table_rows(con, table, sql.SQL(" OR ").join(terms),
                           {**args, "ns": ns, "below": escape_like(ns) + ".%", "of": sorted({k[0] for k, _ in items})})

    def _as_records(self, who: str | None, tabs: _Tables, literals: Sequence[str]) -> Iterator[Record]:
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

    def counts(self) -> dict[str, int]:
        """Rows per table, by ``count(*)`` on each server (``PgServer.counts``)."""
        return {t: n for pg in self.servers for t, n in pg.counts().items()}

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

    def reset(self) -> None:
        """A new erasure (its plan): the online rule takes its own first count."""
        self.online.reset()
        self._first, self._snaps, self._resumed = None, {}, False

    def bystanders(self, user: str | None, removed: Collection[tuple[str, str]]) -> dict[str, StoreDigest]:
        """Per table, the bystanders as one ``Tally`` (``_tally``: the other users' rows less the
        plan's targets, counted on the server, one aggregate per table) with the mark of the
        snapshot it was taken in. While the app writes other users' rows, the bystanders are those
        of this erasure's first count, less the rows its ``DELETE … RETURNING`` removed that the
        first count held (``OnlineTally``): an over-deletion lowers the count. A re-run after a
        crash counts the rows the interrupted run's snapshot saw (``resume``)."""
        def now() -> dict[str, Tally]:
            counts, mine = self._tally(user, removed, self._snaps if self._resumed else None)
            if self._first is None:
                self._first = (mine, dict(self._snaps))
            return counts
        tallies = self.online.tallies(now)
        return {t: tally_digest(v, f"snapshot:{self._snaps.get(t, '')}") for t, v in tallies.items()}

    def resume(self, before: Mapping[str, Sequence[str]]) -> None:
        """A re-run after a crash: each table's snapshot as the interrupted run journalled it."""
        for t, entries in before.items():
            if (snap := marks(entries).get("snapshot")):
                self._snaps[t] = snap
                self._resumed = True

    def _owner_map(self, con: Any, pg: PgServer, user: str | None) -> _Tables:
        tabs = _Tables()
        if "checkpoints" in pg.tables and user is not None:
            tabs.named = _metadata_users(con, self.users)
            tabs.by_state = _state_owners(con, self.users, "checkpoint_blobs" in pg.tables)
        return tabs

    def _tally(self, user: str | None, removed: Collection[tuple[str, str]],
               within: Mapping[str, str] | None = None) -> tuple[dict[str, Tally], tuple[set[str], str | None]]:
        """Per table, the rows that are not ``user``'s (its threads as ``_user_threads`` finds
        them, its namespace) and not in ``removed``, counted on the server with the sum of their
        keys' hashes (``key_sql``, ``hashtextextended``): one aggregate per table, nothing of the
        rows leaves the server. Counted in one ``REPEATABLE READ`` transaction per server, whose
        snapshot each table keeps (``_snaps``); ``within``: per table, only the rows that snapshot
        saw. The literals are not replaced: this instance rewrites nothing. Also returns the
        user's threads and namespace as the count left them out."""
        import psycopg
        from psycopg import sql

        skip: dict[str, list[str]] = {}
        for t, rid in removed:
            if t in KEYS:
                skip.setdefault(t, []).append(KEY_SEP.join(json.loads(rid)))
        out: dict[str, Tally] = {}
        mine: set[str] = set()
        ns = self.users.prefix(user) if user is not None else None
        for pg in self.servers:
            with pg.connect(read_only=True) as con:
                con.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ  # every count and the snapshot: one view
                snap = str(con.execute("SELECT pg_current_snapshot()::text").fetchone()[0])
                tids = sorted(self._user_threads(con, pg, user, self._owner_map(con, pg, user))) \
                    if "checkpoints" in pg.tables else []
                mine |= set(tids)
                for t in pg.tables:
                    cond, args = _others(t, tids, ns)
                    if within is not None and t in within:
                        more, extra = in_snapshot(within[t])
                        cond, args = cond + more, {**args, **extra}
                    key = key_sql(KEYS[t])
                    agg = sql.SQL("SELECT count(*), coalesce(sum(hashtextextended({}, 0)), 0)::text FROM {} WHERE ")
                    q = agg.format(key, ident(t)) + sql.SQL(cond)
                    n, h = con.execute(q, args).fetchone()
                    sn, sh = con.execute(q + sql.SQL(" AND {} = ANY(%(skip)s)").format(key),
                                         {**args, "skip": skip[t]}).fetchone() if skip.get(t) else (0, "0")
                    out[t] = (int(n) - int(sn), int(h) - int(sh))
                    self._snaps.setdefault(t, snap)
                con.rollback()
        return out, (mine, ns)

    def apply(self, ops: Sequence[Op], literals: Sequence[str]) -> list[StoreOutcome]:
        if self.read_only:
            raise ConfigError("langgraph: this instance was attached read-only (scan); attach it with "
                              "read_only=False to erase")
        self.precheck()
        gone = [o.record for o in ops if isinstance(o, Remove) and o.record.store in KEYS]
        self.erased_texts = sorted(set(self.erased_texts) | _needles(gone, literals, lambda c: self._kept(gone, c)))
        outcomes = {t: StoreOutcome(store=t, compacted=True) for t in self.stores()}
        planned = {(r.store, r.id) for r in gone}
        for pg in self.servers:
            keys = {t: (KEYS[t], {_key(r) for r in gone if r.store == t}) for t in _DELETE_ORDER if t in pg.tables}
            deleted = pg.delete(keys)
            for t, removed in deleted.items():
                outcomes[t].removed += len(removed)
            self._count_removed(pg, deleted, planned)
            outcomes[pg.tables[0]].notes += physical_step(pg, self.erased_texts, self.replicas)
        outcomes[self.stores()[0]].notes.append(self.online.note(self._tally(self.requester, planned)[0]))
        return list(outcomes.values())

    def _count_removed(self, pg: PgServer, deleted: Mapping[str, set[tuple[str, ...]]],
                       planned: Collection[tuple[str, str]]) -> None:
        """The rows this erasure's ``DELETE`` returned, for the online rule: a row the plan did not
        name and that is not the user's as the first count left it out (an over-deletion) is taken
        out of the first count (its key's hash asked of the server)."""
        tids, ns = self._first[0] if self._first is not None else (set(), None)
        held: dict[str, list[str]] = {}
        for t, rows in deleted.items():
            for k in rows:
                mine = (k[0] in tids) if t in CKPT_TABLES else ns is not None and (k[0] == ns or
                                                                                   k[0].startswith(ns + "."))
                planned_row = (t, _rid(k)) in planned
                if not planned_row and not mine:
                    held.setdefault(t, []).append(KEY_SEP.join(k))
                else:
                    self.online.removed(t, False, 0, planned_row)
        if held:
            with pg.connect(read_only=True) as con:
                hashes = key_hash(con, [text for texts in held.values() for text in texts])
                con.rollback()
            for t, texts in held.items():
                for text in texts:
                    self.online.removed(t, True, hashes[text], False)

    def _kept(self, gone: Sequence[Record], texts: Sequence[str]) -> list[str]:
        """The texts of the rows that stay and may hold one of ``texts`` (selected on the server)."""
        drop = {(r.store, r.id) for r in gone}
        recs = self.records(None, texts) if texts else iter(())
        return [r.text() for r in recs if (r.store, r.id) not in drop]

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


def _table_rows(con: Any, table: str, where: Any = None,
                params: Mapping[str, Any] | None = None) -> list[tuple[tuple[str, ...], dict[str, str]]]:
    """The rows (every row, or those ``where`` selects): each one's key as text and each column
    as text (bytea decoded as UTF-8, as stored: msgpack keeps strings as their UTF-8 bytes; jsonb
    and the rest as the server prints them), in key order."""
    from psycopg import sql

    cols = _columns(con, table)
    keys = KEYS[table]
    sel: list[Any] = [sql.SQL("{}::text").format(sql.Identifier(k)) for k in keys]
    sel += [sql.Identifier(n) if t == "bytea" else sql.SQL("{}::text").format(sql.Identifier(n)) for n, t in cols]
    order = sql.SQL(", ").join(sql.Identifier(k) for k in keys)
    cond = sql.SQL("") if where is None else sql.SQL(" WHERE ") + where
    q = sql.SQL("SELECT {} FROM {}{} ORDER BY {}").format(sql.SQL(", ").join(sel), ident(table), cond, order)
    out = []
    for row in con.execute(q, dict(params or {})).fetchall():
        key, vals = tuple(str(x) for x in row[:len(keys)]), row[len(keys):]
        out.append((key, {n: _text(v) for (n, _), v in zip(cols, vals, strict=True)}))
    return out


def _pieces(literals: Sequence[str]) -> list[str] | None:
    """What the server looks for so that its selection holds every row the kernel's rule matches
    in the text ``records`` reads (the columns joined by tabs): per form of each literal, its
    longest run without a tab or NUL (a form spanning two columns holds such a run inside one).
    None: a form the server cannot look for (only tabs or NULs, U+FFFD, which a blob's invalid
    UTF-8 decodes to, a lone surrogate): then every row is read."""
    out: set[str] = set()
    for f in _all_forms(literals):
        run = max(re.split(r"[\t\0]", f), key=len)
        if not run or "\ufffd" in run or has_surrogate(run):
            return None
        out.add(run)
    return sorted(out)


def _all_forms(literals: Sequence[str]) -> list[str]:
    return [f for lit in literals for f in literal_forms(lit)]


def _others(table: str, tids: Sequence[str], ns: str | None) -> tuple[str, dict[str, Any]]:
    """The condition for the rows of ``table`` that are not the user's (its threads ``tids``, its
    namespace ``ns`` and below), and its arguments."""
    if table in CKPT_TABLES and tids:
        return "NOT (thread_id = ANY(%(tids)s))", {"tids": list(tids)}
    if table in STORE_TABLES and ns is not None:
        return "NOT (prefix = %(ns)s OR prefix LIKE %(below)s)", {"ns": ns, "below": escape_like(ns) + ".%"}
    return "true", {}


def _like(template: str, user: str) -> str:
    """``NamespaceMap.thread_pattern`` as a ``LIKE`` pattern (``{session_id}``: one character or more)."""
    parts = re.split(r"(\{user_id\}|\{session_id\})", template)
    return "".join(escape_like(user) if p == "{user_id}" else "_%" if p == "{session_id}" else escape_like(p)
                   for p in parts)


_TIME_CHARS = frozenset("0123456789-:. +BCinfty")
"""Every character of a date or timestamp as the server prints it with ``DateStyle`` ISO
(``2026-12-06 07:37:10.123456+05:30``, `` BC``, ``-infinity``)."""
_NUMBER_CHARS = frozenset("0123456789-+.eNaInfity")
"""Every character of a number as the server prints it (``-1.5e+20``, ``NaN``, ``Infinity``)."""
_VECTOR_CHARS = frozenset("0123456789[],.-+e")
"""Every character of a pgvector ``vector``/``halfvec`` as the server prints it (``[0.5,-1e-05]``)."""
_TYPED = {**dict.fromkeys(("date", "timestamp without time zone", "timestamp with time zone"), _TIME_CHARS),
          **dict.fromkeys(("smallint", "integer", "bigint", "real", "double precision", "numeric"), _NUMBER_CHARS),
          **{t: _VECTOR_CHARS for t in ("vector", "halfvec")}}


def _match(con: Any, table: str, pieces: Sequence[str]) -> Any:
    """A row of ``table`` holds one of the pieces: the text columns joined by tabs (a piece holds
    no tab: it is in the joined text only inside one column) ``LIKE ANY`` of ``%(l)s`` (each piece
    as ``%piece%``, escaped), each bytea column ``LIKE ANY`` of ``%(lb)s`` (the same, as UTF-8):
    each row's text made once, every piece looked for in it. A date, time or number column is
    left out of the joined text when no piece is made only of the characters the server prints
    it with (``_TYPED``; dates and times only when the session's ``DateStyle`` is ISO, the
    default: the rows' text is read in the same session): printing the timestamps of each of 10^6
    store items cost as much as the rest of the pass."""
    from psycopg import sql

    cols = _columns(con, table)
    iso = str(con.execute("SHOW DateStyle").fetchone()[0]).upper().startswith("ISO")
    base = {n: re.sub(r"\(\d+(,\d+)?\)", "", t) for n, t in cols}  # vector(384), timestamp(3) with time zone
    kept = [(n, t) for n, t in cols if base[n] not in _TYPED or (base[n] in _NUMBER_TYPES or iso) and any(
        set(p) <= _TYPED[base[n]] for p in pieces)]
    text = [sql.SQL("{}::text").format(sql.Identifier(n)) for n, t in kept if t != "bytea"]
    terms: list[Any] = [sql.SQL("concat_ws(E'\\t', {}) LIKE ANY(%(l)s::text[])").format(sql.SQL(", ").join(text))] \
        if text else []
    terms += [sql.SQL("{} LIKE ANY(%(lb)s::bytea[])").format(sql.Identifier(n)) for n, t in cols if t == "bytea"]
    return sql.SQL("({})").format(sql.SQL(" OR ").join(terms or [sql.SQL("false")]))


_NUMBER_TYPES = frozenset(t for t, chars in _TYPED.items() if chars is not _TIME_CHARS)
"""The typed columns printed the same under any ``DateStyle``."""


def _holding_threads(con: Any, pg: PgServer, args: Mapping[str, Any]) -> set[str]:
    """The threads one of whose rows may hold a piece (a pass over the saver's tables, on the server)."""
    from psycopg import sql

    q = sql.SQL(" UNION ").join(sql.SQL("SELECT thread_id FROM {} WHERE {}").format(ident(t), _match(con, t, args["p"]))
                                for t in CKPT_TABLES if t in pg.tables)
    return {str(r[0]) for r in con.execute(q, dict(args)).fetchall()}


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
    pairs: list[tuple[str, Any]] = [(str(t), w) for t, w in con.execute(  # a thread's checkpoints repeat it
        "SELECT DISTINCT thread_id, checkpoint -> 'channel_values' ->> %s FROM checkpoints "
        "WHERE jsonb_typeof(checkpoint -> 'channel_values' -> %s) = 'string'", (key, key)).fetchall()]
    if blobs:
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

        serde = JsonPlusSerializer()
        for tid, typ, blob in con.execute("SELECT DISTINCT thread_id, type, blob FROM checkpoint_blobs WHERE "
                                          "channel = %s AND type <> 'empty' AND blob IS NOT NULL", (key,)).fetchall():
            try:
                pairs.append((str(tid), serde.loads_typed((str(typ), bytes(blob)))))
            except Exception:  # noqa: BLE001 - a blob this serializer cannot read names nobody
                continue
    return state_users(pairs)


def _needles(gone: Iterable[Record], literals: Sequence[str], kept: Callable[[Sequence[str]], Sequence[str]]) -> set[str]:
    """What the file verification looks for: the literals, and the store values' and the message
    texts' strings of the removed rows (8 characters at least) that no remaining row holds. A
    string holding one of those literals is left out: every copy of it holds the literal's bytes,
    which the verification looks for anyway (the remaining rows are then asked about fewer texts:
    at 10^5 items a pass with 5 patterns instead of 25)."""
    lits = {t for t in literals if len(t) >= _MIN_NEEDLE}
    texts: set[str] = set()
    for r in gone:
        if r.store == "store":
            texts |= _strings(_json(r.fields.get("value", "")))
        elif r.store == "checkpoints":
            texts |= _strings(_json(r.fields.get("checkpoint", "")).get("channel_values", {}))
    texts = {t for t in texts - lits if len(t) >= _MIN_NEEDLE and not any(x in t for x in lits)}
    rest = kept(sorted(texts))  # the remaining rows that may hold one
    return lits | {t for t in texts if not any(count_literals(k, [t]) for k in rest)}


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


def probe_store(inst: PgLangGraph, index: dict[str, Any] | None) -> tuple[Any, Callable[[], None]]:
    """The store the ``--certify`` probes read (and its close): LangGraph's own ``PostgresStore``
    over the instance's ``store`` table, on a connection whose every transaction is read-only
    (``-c default_transaction_read_only=on``, the user's own ``options`` kept), wrapped so that
    the graph's ``put`` (a graph filing the probe's question as a memory) goes to an in-memory
    store, never to the server, and its reads do not refresh TTLs (``refresh_ttl``: an UPDATE). No store table: an empty in-memory store. A connection that
    fails is refused in one line (``probe_ready`` opens it before anything is erased)."""
    from langgraph.store.memory import InMemoryStore

    if "store" not in inst.stores():
        return InMemoryStore(), lambda: None
    import psycopg
    from langgraph.store.postgres import PostgresStore
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.rows import dict_row

    pg = inst._server_of("store")
    opts = f"{conninfo_to_dict(pg.target.conninfo).get('options') or ''} -c default_transaction_read_only=on"
    try:
        con = psycopg.connect(pg.target.conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row,
                              options=opts.strip())
    except psycopg.OperationalError as e:
        raise ConfigError(f"langgraph: --certify cannot read {pg.target.where}: {str(e).strip().splitlines()[0]}; "
                          "check store.url (nothing was erased)") from None
    return _read_through(PostgresStore(con, index=index)), con.close  # type: ignore[arg-type]  # a TypedDict


def _read_through(server: Any) -> Any:
    """A ``BaseStore`` whose reads are ``server``'s and whose writes stay in memory."""
    from langgraph.store.base import BaseStore, PutOp
    from langgraph.store.memory import InMemoryStore

    class ProbeStore(BaseStore):
        def __init__(self) -> None:
            self.kept = InMemoryStore()

        def batch(self, ops: Iterable[Any]) -> list[Any]:
            ops = list(ops)
            out: list[Any] = [None] * len(ops)
            self.kept.batch([o for o in ops if isinstance(o, PutOp)])
            # a read that refreshes an item's TTL is an UPDATE: the probes read without refreshing
            reads = [(i, o._replace(refresh_ttl=False) if hasattr(o, "refresh_ttl") else o)
                     for i, o in enumerate(ops) if not isinstance(o, PutOp)]
            for (i, _), r in zip(reads, server.batch([o for _, o in reads]) if reads else [], strict=True):
                out[i] = r
            return out

        async def abatch(self, ops: Iterable[Any]) -> list[Any]:
            return self.batch(ops)

    return ProbeStore()
