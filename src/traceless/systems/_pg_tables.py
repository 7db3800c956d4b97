"""A memory system's tables on a PostgreSQL **server** as the erasure kernel reads and changes
them (issue #35): the server mirror of ``SqliteFile`` (Agno's ``PostgresDb``, the Agents
SDK's ``SQLAlchemySession`` on a Postgres URL).

* the adapter names the tables (``name`` or ``schema.name``) and says whose each row is
  (``owner_of``); a required table that does not exist is refused before anything is read
  (nothing is created); an optional one is left out;
* ``records``: every row of every table in **one** ``BEGIN READ ONLY`` transaction (a table is
  a store, a row a record keyed by its primary key columns as text);
* ``apply``: the removes (``DELETE … RETURNING`` by primary key) and the rewrites (the literals
  replaced in the text and JSON columns) in **one** transaction, then the physical step on the
  tables it changed (``PgServer.compact``: ``VACUUM (INDEX_CLEANUP ON)`` or, ``pg_compaction:
  full``, ``VACUUM FULL``), ``CHECKPOINT``, and the relation files, ``pg_wal`` and the named
  replicas read for the erased records' texts (the notes of the first outcome);
* ``files``: the tables' relation files (heap, TOAST, indexes) when the data directory is
  readable here, and the named replicas': the kernel byte-scans them.

Credentials are never written: messages name the host, port and database only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_serializer, model_validator

from traceless.errors import ConfigError
from traceless.systems import StoreOutcome
from traceless.systems._pg_server import (
    OnlineBystanders,
    PgServer,
    PgTarget,
    delete_in,
    ident,
    out_of_scope,
    parse_dsn,
    physical_step,
    replica_files,
    replica_steps,
    shown_dsn,
    shown_dsns,
)
from traceless.systems.contract import LiveInstance, Op, Record, Remove
from traceless.systems.kernel import bystander_rows, replace_literals

__all__ = ["SERVER_KEYS", "OwnerOf", "PgTables", "check_url", "pg_tables", "shown_url", "traceless_section", "url_target"]

OwnerOf = Callable[[str, dict[str, Any]], str | None]
"""(table, row as column → value) → the user the row belongs to (None: no user)."""
NEEDLE_MIN = 8
"""Shortest erased text the relation files are searched for (shorter ones match by chance)."""


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bytes | memoryview):
        return bytes(v).decode("utf-8", "replace")
    if isinstance(v, dict | list):
        return json.dumps(v, ensure_ascii=False)
    return str(v)


def _leaves(v: Any) -> Iterator[str]:
    """The strings of a JSON value (a jsonb column keeps them as they are, not its text form)."""
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for x in v.values():
            yield from _leaves(x)
    elif isinstance(v, list):
        for x in v:
            yield from _leaves(x)


@dataclass
class PgTables(LiveInstance):
    """Tables of one database on one server: a table is a store, a row a record."""

    pg: PgServer
    owner_of: OwnerOf
    keys: dict[str, list[str]] = field(default_factory=dict)
    """Per table, its primary key columns."""
    rewritable: dict[str, list[str]] = field(default_factory=dict)
    """Per table, its text and JSON columns (what a rewrite rewrites); JSON ones as ``col:json``."""
    replicas: list[PgServer] = field(default_factory=list)
    """The named physical standbys (``traceless.pg_replicas``), read only."""
    online: OnlineBystanders = field(default_factory=OnlineBystanders)
    """The online bystander rule (this erasure's first digest, the rows its DELETE returned and
    its UPDATE rewrote): the application keeps writing other users' rows meanwhile."""

    others_policy = "rewrite"

    def stores(self) -> list[str]:
        return list(self.pg.tables)

    def records(self, user: str | None = None, literals: Sequence[str] = ()) -> Iterator[Record]:
        from psycopg import sql

        with self.pg.connect(read_only=True) as con:
            for t in self.pg.tables:
                pk = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in self.keys[t])
                cur = con.execute(sql.SQL("SELECT {}, * FROM {} ORDER BY 1").format(pk, ident(t)))
                n = len(self.keys[t])
                cols = [d.name for d in (cur.description or [])][n:]
                for r in cur.fetchall():
                    key = tuple(str(x) for x in r[:n])
                    row = dict(zip(cols, r[n:], strict=True))
                    yield Record(t, "/".join(key), self.owner_of(t, row), {c: _text(v) for c, v in row.items()},
                                 ref=(key, row))
            con.rollback()

    def compaction(self) -> list[str]:
        out = [f"{self.pg.how()} on the changed tables of {self.pg.target.where}, CHECKPOINT"]
        return out + replica_steps(self.replicas)

    def files(self) -> list[Path]:
        return list(self.pg.server_files()[0]) + replica_files(self.replicas)  # the replicas' too: the byte scan

    def precheck(self, rewrites: bool = True) -> None:
        """The role may change and VACUUM every table (refused before any change); named
        replicas are standbys."""
        self.pg.precheck_write(("DELETE", "UPDATE") if rewrites else ("DELETE",))
        for r in self.replicas:
            r.check_standby()

    def apply(self, ops: Sequence[Op], literals: Sequence[str]) -> list[StoreOutcome]:
        if not ops:
            return []
        self.precheck(rewrites=any(not isinstance(o, Remove) for o in ops))
        removes: dict[str, tuple[list[str], set[tuple[str, ...]]]] = {}
        rewrites = [o for o in ops if not isinstance(o, Remove)]
        for o in ops:
            if isinstance(o, Remove) and o.record.store in self.keys:
                removes.setdefault(o.record.store, (self.keys[o.record.store], set()))[1].add(self._key(o.record))
        ordered = {t: removes[t] for t in self.pg.tables if t in removes}  # the adapter's order (FK children first)
        with self.pg.connect(read_only=False) as con, con.transaction():
            gone = delete_in(con, ordered)
            rewritten = {t: sum(self._rewrite(con, o.record, literals) for o in rewrites if o.record.store == t)
                         for t in {o.record.store for o in rewrites}}
        self.online.deleted |= {(t, "/".join(k)) for t, ks in gone.items() for k in ks}
        self.online.rewritten |= {(o.record.store, o.record.id) for o in rewrites}
        # a planned row may have gone before its own DELETE (a foreign key's ON DELETE CASCADE from a
        # row deleted first): its table holds the dead tuple all the same, so the physical step covers it
        touched = [t for t in self.pg.tables if gone.get(t) or rewritten.get(t) or t in removes]
        out = {t: StoreOutcome(store=t, removed=len(gone.get(t, ())), rewritten=rewritten.get(t, 0),
                               compacted=True) for t in touched}
        if touched:
            out[touched[0]].notes = [*self._physical(touched, self._needles(ops, literals)),
                                     self._online_note(ops, literals)]
        return list(out.values())

    def online_bystanders(self, rows: list[tuple[tuple[str, str], str]]) -> list[tuple[tuple[str, str], str]]:
        """The first digest's rows less those this erasure's ``DELETE`` returned, its rewrites
        as they are now (``OnlineBystanders``): the app's concurrent writes are its own."""
        return list(self.online.rows(dict(rows)).items())

    def _online_note(self, ops: Sequence[Op], literals: Sequence[str]) -> str:
        """What this erasure's ``DELETE`` removed and what the app changed meanwhile (every row
        read now, digested as the kernel's bystander digest does)."""
        planned = {(o.record.store, o.record.id) for o in ops if isinstance(o, Remove)}
        return self.online.note(dict(bystander_rows(self, None, literals)), planned)

    def _physical(self, touched: list[str], needles: list[str]) -> list[str]:
        return physical_step(replace(self.pg, tables=touched), needles,
                             [replace(r, tables=touched) for r in self.replicas])

    def _key(self, rec: Record) -> tuple[str, ...]:
        if isinstance(rec.ref, tuple):
            return tuple(rec.ref[0])
        return tuple(rec.id.split("/", len(self.keys[rec.store]) - 1))

    def _rewrite(self, con: Any, rec: Record, literals: Sequence[str]) -> int:
        """One row's text and JSON columns with the literals replaced (0: the row is gone)."""
        from psycopg import sql

        t, key = rec.store, self._key(rec)
        cols = [c.split(":")[0] for c in self.rewritable.get(t, [])]
        if not cols:
            return 0
        where = sql.SQL(" AND ").join(sql.SQL("{}::text = %s").format(sql.Identifier(c)) for c in self.keys[t])
        sel = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in cols)
        row = con.execute(sql.SQL("SELECT {} FROM {} WHERE {} FOR UPDATE").format(sel, ident(t), where), key).fetchone()
        if row is None:
            return 0
        sets = sql.SQL(", ").join(
            sql.SQL("{} = %s::{}").format(sql.Identifier(c.split(":")[0]), sql.SQL("jsonb" if c.endswith(":jsonb")
                                          else "json" if c.endswith(":json") else "text"))
            for c in self.rewritable[t])
        con.execute(sql.SQL("UPDATE {} SET {} WHERE {}").format(ident(t), sets, where),
                    (*[replace_literals(v, literals) for v in row], *key))
        return 1

    def _needles(self, ops: Sequence[Op], literals: Sequence[str]) -> list[str]:
        """What the relation files must no longer hold: the literals, and every text of a
        removed row (a JSON value's strings) that no kept row holds."""
        removed = {(o.record.store, o.record.id) for o in ops if isinstance(o, Remove)}
        texts: set[str] = {lit for lit in literals if len(lit) >= NEEDLE_MIN}
        for o in ops:
            if isinstance(o, Remove) and isinstance(o.record.ref, tuple):
                for v in o.record.ref[1].values():
                    texts.update(s for s in (_leaves(v) if isinstance(v, dict | list) else [_text(v)])
                                 if len(s) >= NEEDLE_MIN)
        kept = [r.text() for r in self.records() if (r.store, r.id) not in removed]
        return sorted(s for s in texts if s in literals or not any(s in k for k in kept))

    def out_of_scope(self) -> list[str]:
        return out_of_scope(self.replicas)


def _catalog(pg: PgServer) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Per table: the primary key columns; the text and JSON columns (``col:json``/``col:jsonb``)."""
    keys: dict[str, list[str]] = {}
    texts: dict[str, list[str]] = {}
    with pg.connect(read_only=True) as con:
        for t in pg.tables:
            keys[t] = [str(r[0]) for r in con.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary "
                "ORDER BY array_position(i.indkey, a.attnum)", (t,))]
            texts[t] = [f"{r[0]}:{r[1]}" if r[1] in ("json", "jsonb") else str(r[0]) for r in con.execute(
                "SELECT a.attname, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
                "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped "
                "AND (t.typcategory = 'S' OR t.typname IN ('json', 'jsonb')) ORDER BY a.attnum", (t,))]
        con.rollback()
    for t, k in keys.items():
        if not k:
            raise ConfigError(f"{pg.target.where}: table {t!r} has no primary key; its rows cannot be erased by key "
                              "(nothing was changed)")
    return keys, texts


def pg_tables(target: PgTarget, required: Sequence[str], optional: Sequence[str], owner_of: OwnerOf,
              replicas: Sequence[PgTarget] = (), what: str = "") -> PgTables:
    """The instance: the server reached, the tables checked (a required one missing: refused,
    nothing created), every named replica a standby, before anything else."""
    pg = PgServer(target)
    found = pg.existing([*required, *optional])
    missing = [t for t in required if t not in found]
    if missing:
        raise ConfigError(f"{target.where}: no table {missing[0]!r}{what}; check the table names and the schema "
                          f"in {target.source} (nothing was created)")
    pg.tables = found
    keys, texts = _catalog(pg)
    reps = [PgServer(r, list(found)) for r in replicas]
    for r in reps:
        r.check_standby()
    return PgTables(pg, owner_of, keys, texts, reps)


SERVER_KEYS = ("pg_compaction", "pg_replicas")
"""traceless's own keys of a server-backed config (flat, or under one ``traceless:`` section)."""


def traceless_section(data: Any) -> Any:
    """A config's ``traceless: {pg_compaction, pg_replicas}`` section merged flat (as mem0's)."""
    if not isinstance(data, dict) or "traceless" not in data:
        return data
    section, rest = data["traceless"], {k: v for k, v in data.items() if k != "traceless"}
    if not isinstance(section, dict) or set(section) - set(SERVER_KEYS):
        raise ValueError(f"'traceless' must be an object of traceless's keys ({', '.join(SERVER_KEYS)})")
    twice = sorted(set(section) & set(rest))
    if twice:
        raise ValueError(f"{twice[0]!r} is given both flat and under 'traceless'; give it once")
    return rest | section


def _replicas_shown(self: BaseModel, dsns: list[str] | None) -> list[str] | None:
    return shown_dsns(dsns, "traceless.pg_replicas")


REPLICAS_SHOWN = field_serializer("pg_replicas")(_replicas_shown)
"""The serializer of a config's ``pg_replicas``: a dump shows each without its password
(``_no_passwords = REPLICAS_SHOWN`` in the config's class body)."""


class PgServerOptions(BaseModel):
    """The server options of a system config whose records can live on PostgreSQL (mixed into
    Agno's and the Agents SDK's configs), given flat or under one ``traceless:`` section."""

    pg_compaction: str | None = None
    """On a server: ``vacuum`` (default, ``VACUUM (INDEX_CLEANUP ON)``, online; leaves the erased
    tuples' bytes in the heap pages' free space) or ``full`` (``VACUUM FULL``, opt-in: the bytes
    gone; an ``ACCESS EXCLUSIVE`` lock on each changed table while it runs)."""
    pg_replicas: list[str] | None = Field(None, repr=False)
    """On a server: connection strings of its physical standbys, whose files are read too after
    they replayed the erasure (replicas not named: out of scope); a dump shows each without its
    password."""

    _no_passwords = REPLICAS_SHOWN

    @model_validator(mode="before")
    @classmethod
    def _traceless_section(cls, data: Any) -> Any:
        """``pg_compaction`` / ``pg_replicas`` may sit under one ``traceless:`` section."""
        return traceless_section(data)


def check_url(url: str | None, key: str) -> None:
    """A server URL as the package takes it (SQLAlchemy ``postgresql+DRIVER://``); the error
    never repeats it (it holds the password)."""
    if url is not None and url.split("://", 1)[0].split("+", 1)[0] not in ("postgresql", "postgres"):
        raise ValueError(f"{key} must be a PostgreSQL URL (postgresql+psycopg://USER:PASSWORD@HOST:PORT/DBNAME)")


def shown_url(url: Any) -> str | None:
    """A server URL (a ``SecretStr``) as a config dump shows it: the user, host, port and
    database, never the password. What tells two instances on one server apart (the
    erasure's journal is keyed by the dump): a mask alone named every database the same."""
    if url is None:
        return None
    return shown_dsn(parse_dsn(url.get_secret_value(), "url"))


def url_target(url: str, key: str, compaction: str | None) -> PgTarget:
    """The server of a SQLAlchemy / libpq URL (``sslmode`` and the TLS options passed through)."""
    from traceless.systems._pg_server import DEFAULT_COMPACTION, make_target, parse_dsn

    return make_target(parse_dsn(url, key), compaction or DEFAULT_COMPACTION, source=key)
