"""mem0 on a PostgreSQL + pgvector **server** (issue #35): the user's own ``vector_store:
{provider: pgvector, config: {...}}``, read in a read-only transaction, erased online.

* reading (``scan``, the plan, the bystander digests): one ``BEGIN READ ONLY`` transaction
  per read; ``SELECT`` on the collection's table (and ``<collection>_entities`` when it
  exists) and on the catalogs; no DDL, no ``CREATE EXTENSION``, nothing created. A
  collection that does not exist is refused.
* erasing: the user's rows go in **one** transaction (``DELETE … WHERE id = ANY(…)
  RETURNING id``; the history db's rows through the kernel's journal, as for the local back
  ends), then the physical step on the affected tables (``traceless: {pg_compaction: ...}``):
  ``vacuum`` (default: ``VACUUM (INDEX_CLEANUP ON)``, online: the application's queries do not
  wait on it; measured to leave the erased tuples' bytes in the heap pages' free space, which
  the verification counts, so the claim stays ``logical``) or ``full`` (opt-in: ``VACUUM
  FULL`` rewrites heap and every index, HNSW included, so the bytes are gone; an ``ACCESS
  EXCLUSIVE`` lock for its duration: every query of the application on the table waits),
  then ``CHECKPOINT``.
* verification: the relation files (``pg_relation_filepath``: heap, TOAST, every index)
  are read after the checkpoint when the data directory is readable from here; otherwise
  the receipt says the level was not verified. The WAL segments under ``pg_wal`` that still
  hold the erased records' bytes are counted and stated (never a silent pass).
* replicas (``traceless: {pg_replicas: [DSN, ...]}``): each named physical standby is waited
  for until it has replayed the primary's WAL past the erasure, checkpointed (a restartpoint)
  and its relation files read too; the receipt says per replica verified or not, and why.
* online: bystanders of the server's tables are the other users' rows as the first digest
  saw them; only this erasure's ``DELETE`` (the ids it returned) may change them. What other
  transactions (the application, serving other users meanwhile) changed, removed or added
  is theirs, and counted in the receipt's notes.

Credentials (the password, a connection string) are never written: every message names
the host, port and database only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceless.errors import ConfigError
from traceless.systems import ErasurePlan, StoreOutcome
from traceless.systems._mem0_live import LiveLayout, Mem0Live, Rec, _payload_texts, _vacuum
from traceless.systems.kernel import StoreDigest, digest, literal_forms
from traceless.systems.postgres import (
    DEFAULT_COMPACTION,
    OnlineBystanders,
    PgServer,
    PgTarget,
    make_target,
    out_of_scope,
    parse_dsn,
    physical_step,
    replica_files,
    replica_steps,
    replica_targets,
    standbys,
)

__all__ = ["DEFAULT_COMPACTION", "Mem0PgLive", "PgCollection", "PgTarget", "pg_live", "pg_target", "replica_targets"]

_SERVER_STORES = ("vector_store", "entity_store")
_TEXT_KEYS = ("data", "text_lemmatized", "hash")
"""The payload keys whose bytes the verification looks for (the memory's text, its hash)."""


def pg_target(vcfg: dict[str, Any], compaction: str = DEFAULT_COMPACTION) -> PgTarget:
    """The server of mem0's pgvector config (its ``connection_string`` or
    ``host``/``port``/``user``/``password``/``dbname``; ``sslmode`` passed through)."""
    if vcfg.get("connection_pool") is not None:
        raise ConfigError("mem0 pgvector with a connection_pool object cannot be given in a config file; "
                          "give connection_string or host/port/user/password/dbname")
    if vcfg.get("connection_string"):
        base = parse_dsn(str(vcfg["connection_string"]), "vector_store.config.connection_string")
    else:
        base = {k: vcfg[k] for k in ("host", "port", "user", "password") if vcfg.get(k) is not None}
        base["dbname"] = vcfg.get("dbname") or "postgres"
    if vcfg.get("sslmode"):
        base["sslmode"] = vcfg["sslmode"]
    return make_target(base, compaction, source="vector_store.config")


@dataclass
class PgCollection(PgServer):
    """mem0's collection (and its ``<collection>_entities`` companion) on the server."""

    collection: str = "mem0"

    def check(self) -> None:
        """The collection must exist (nothing is created); its companion entity table is optional."""
        found = self.existing([self.collection, f"{self.collection}_entities"])
        if self.collection not in found:
            raise ConfigError(f"{self.target.where}: no table {self.collection!r} (mem0's collection_name); "
                              "check vector_store.config.collection_name (nothing was created)")
        self.tables = found

    def rows(self) -> dict[str, list[tuple[str, dict[str, Any], str]]]:
        """Every row (id, payload, vector as text) per table, in one read-only transaction."""
        return self.select(None, (), (), every=True)

    def select(self, user: str | None, patterns: Sequence[str], ids: Sequence[str] = (), *,
               every: bool = False) -> dict[str, list[tuple[str, dict[str, Any], str]]]:
        """Per table, the rows (id, payload, vector as text) whose ``user_id`` is ``user``
        (through the server's index on ``payload->>'user_id'`` when the deployment has one),
        whose id is in ``ids`` (the primary key), or whose payload's JSON text holds one of
        ``patterns`` (a pass over the table on the server); one read-only transaction. A
        superset of the rows the scan's match rule selects."""
        from psycopg import sql

        branches = ["SELECT id FROM {t} WHERE payload->>'user_id' = %(u)s"] if user is not None else []
        branches += ["SELECT id FROM {t} WHERE id = ANY(%(ids)s::uuid[])"] if ids else []
        branches += ["SELECT id FROM {t} WHERE EXISTS (SELECT 1 FROM unnest(%(p)s::text[]) p "
                     "WHERE strpos(payload::text, p) > 0)"] if patterns else []
        if not every and not branches:
            return {t: [] for t in self.tables}
        q = "SELECT id::text, payload, vector::text FROM {t}"
        q += "" if every else " WHERE id IN (" + " UNION ".join(branches) + ")"
        out: dict[str, list[tuple[str, dict[str, Any], str]]] = {}
        with self.connect(read_only=True) as con:
            for t in self.tables:
                cur = con.execute(sql.SQL(q + " ORDER BY id").format(t=sql.Identifier(t)),
                                  {"u": user, "ids": list(ids), "p": list(patterns)})
                out[t] = [(str(i), dict(p or {}), str(v)) for i, p, v in cur.fetchall()]
            con.rollback()
        return out

    def owners(self, ids: Sequence[str]) -> dict[str, str | None]:
        """The ``user_id`` of each memory of the collection among ``ids`` (absent: in no row)."""
        if not ids:
            return {}
        from psycopg import sql

        with self.connect(read_only=True) as con:
            found = {str(i): (str(u) if u is not None else None) for i, u in con.execute(
                sql.SQL("SELECT id::text, payload->>'user_id' FROM {} WHERE id::text = ANY(%s)").format(
                    sql.Identifier(self.collection)), (list(ids),))}
            con.rollback()
        return found

    def others(self, user: str | None) -> dict[str, dict[str, str]]:
        """Per table, every row that is not ``user``'s: id → an MD5 of its payload and its
        vector's exact bytes, computed on the server (the bystander digest: nothing of the
        rows but the digests leaves the server)."""
        from psycopg import sql

        out: dict[str, dict[str, str]] = {}
        with self.connect(read_only=True) as con:
            for t in self.tables:
                cur = con.execute(sql.SQL(
                    "SELECT id::text, md5(convert_to(payload::text, 'UTF8') || coalesce(vector_send(vector), ''::bytea)) "
                    "FROM {} WHERE payload->>'user_id' IS DISTINCT FROM %s").format(sql.Identifier(t)), (user,))
                out[t] = {str(i): str(d) for i, d in cur.fetchall()}
            con.rollback()
        return out


def patterns(literals: Sequence[str]) -> list[str]:
    """What each literal's forms look like inside a payload's JSON text (``payload::text``
    escapes ``"``, ``\\`` and control characters as JSON does, character by character): a
    row whose text holds a form holds its pattern, so the server's filter is a superset."""
    return sorted({json.dumps(f, ensure_ascii=False)[1:-1] for lit in literals for f in literal_forms(lit)})


# ---------------------------------------------------------------- mem0's live instance


@dataclass
class Mem0PgLive(Mem0Live):
    """A mem0 instance whose vector store is a pgvector collection on a server; its
    ``history_db_path`` is a local SQLite file as for every mem0 instance."""

    pg: PgCollection | None = None
    replicas: list[PgCollection] = field(default_factory=list)
    """The named physical standbys (``traceless.pg_replicas``), read only."""
    online: OnlineBystanders = field(default_factory=OnlineBystanders)
    """The online bystander rule of the server's tables (the first digest, this erasure's DELETE)."""

    def _coll(self) -> PgCollection:
        assert self.pg is not None
        return self.pg

    def records(self) -> list[Rec]:
        return self._read()  # the server's rows change without any local file's mtime: read each time

    def _vector_records(self) -> list[Rec]:
        return self._as_recs(self._coll().rows())

    def _as_recs(self, per_table: dict[str, list[tuple[str, dict[str, Any], str]]]) -> list[Rec]:
        pg = self._coll()
        out: list[Rec] = []
        for table, rows in per_table.items():
            store = "vector_store" if table == pg.collection else "entity_store"
            for rid, payload, vec in rows:
                out.append(Rec(store, rid, payload.get("user_id"), _payload_texts(payload), (rid, payload, vec),
                               linked=tuple(str(x) for x in payload.get("linked_memory_ids") or ())))
        return out

    def records_for(self, user: str | None, literals: Sequence[str], ids: Sequence[str] = ()) -> list[Rec]:
        """The server's rows of the user, holding a literal (or with one of ``ids``), selected
        on the server (``PgCollection.select``: the user's rows through an index when there is
        one); the history db's rows of those memories or holding a literal, selected by SQLite;
        each history row owned as its memory is (the server asked for the owners of the rest;
        a memory in no row: an orphan)."""
        pg = self._coll()
        vec = self._as_recs(pg.select(user, patterns(literals), ids))
        owners: dict[str, str | None] = {r.id: r.owner for r in vec if r.store == "vector_store"}
        forms = sorted({f for lit in literals for f in literal_forms(lit)})
        hist = list(self._history((set(owners), forms, user)))
        ask = {r.memory_id for r in hist if r.store == "history" and r.memory_id and r.memory_id not in owners}
        owners.update(pg.owners(sorted(x for x in ask if x)))
        for r in hist:
            if r.store == "history":
                r.owner = owners.get(r.memory_id or "")
                r.orphan = (r.memory_id or "") not in owners
        return vec + hist

    def store_counts(self, recs: Sequence[Rec]) -> dict[str, int]:
        """Every store counted where it lives: the server's tables by ``count(*)`` there, the
        history db's by SQLite (``recs`` is a narrowed read)."""
        out = dict.fromkeys(self.store_names(), 0)
        out.update(self.history_counts())
        pg = self._coll()
        for table, n in pg.counts().items():
            out["vector_store" if table == pg.collection else "entity_store"] = n
        return out

    def files(self) -> list[Path]:
        h = self.layout.history
        out = [p for p in (h, *(h.with_name(h.name + s) for s in ("-journal", "-wal", "-shm"))) if p.is_file()]
        return out + self._coll().server_files()[0] + replica_files(self.replicas)

    def _server_rows(self, user: str | None) -> dict[tuple[str, str], str]:
        """The other users' rows of the server's tables, (store, id) → the server's digest,
        less what the last plan targets."""
        pg = self._coll()
        return {k: d for t, rows in pg.others(user).items()
                for i, d in rows.items()
                if (k := ("vector_store" if t == pg.collection else "entity_store", i)) not in self.targets}

    def bystanders(self, user: str | None) -> dict[str, StoreDigest]:
        """As the local back ends', but the server's tables are shared with a running
        application: their bystanders are the other users' rows of the first digest, less
        the rows this erasure's ``DELETE`` returned (``OnlineBystanders``)."""
        per: dict[str, list[str]] = {s: [] for s in self.store_names()}
        mine = {r.id for r in self._as_recs(self._coll().select(user, ())) if r.store == "vector_store"}
        for store, rid, whose, raw in self.history_rows():  # every row of the local file
            theirs = whose in mine if store == "history" else (user is not None and whose == user)
            if not theirs and (store, rid) not in self.targets:
                per.setdefault(store, []).append(self._row_digest(store, raw))
        # each row digested on the server; once the first digest is kept, the rule needs only it and
        # this erasure's DELETE (``OnlineBystanders.rows``): the rows as they are now change nothing
        rows = self._server_rows(user) if self.online.first is None else {}
        for (store, _), d in self.online.rows(rows).items():
            per.setdefault(store, []).append(d)
        return {s: digest(d) for s, d in per.items()}

    def plan(self, user: str | None, literals: Sequence[str]) -> ErasurePlan:
        self.online.reset()  # a new erasure: its own first digest
        return super().plan(user, literals)

    def _compaction(self) -> list[str]:
        pg = self._coll()
        out = [f"VACUUM {self.layout.history}", *(f"{pg.how()} {t} (server), CHECKPOINT" for t in pg.tables)]
        return out + replica_steps(self.replicas)

    def execute(self, plan: ErasurePlan, native: Any) -> list[StoreOutcome]:
        """One server transaction for the user's rows (mem0's own deletions would run one per
        memory), the history db's rows as for the local back ends, then the physical step."""
        if self.read_only:
            raise ConfigError("this mem0 instance was attached read-only; attach it with read_only=False to erase")
        pg = self._coll()
        pg.precheck_write()
        ids: dict[str, set[str]] = {}
        for a in plan.actions:
            ids.setdefault(a.store, set()).add(a.record_id)
        planned = sorted(ids.get("vector_store", set()) | ids.get("entity_store", set()))
        erased = [r for r in self.records_for(None, (), planned) if r.id in ids.get(r.store, set())]
        needles = sorted({r.texts[k] for r in erased for k in _TEXT_KEYS if len(r.texts.get(k, "")) >= 8})
        self._delete_history(ids, set(ids.get("vector_store", set())))
        ent = f"{pg.collection}_entities"
        key = ("id",)
        gone = pg.delete({pg.collection: (key, {(i,) for i in ids.get("vector_store", set())}),
                          ent: (key, {(i,) for i in ids.get("entity_store", set())} if ent in pg.tables else set())})
        self.online.deleted |= {("vector_store" if t == pg.collection else "entity_store", i[0])
                                for t, v in gone.items() for i in v}
        notes = physical_step(pg, needles, self.replicas)
        notes.append(self._concurrent_note(plan.user, {(s, i) for s, v in ids.items() for i in v}))
        _vacuum(self.layout.history)
        removed = {s: len(v) for s, v in ids.items()}
        return [StoreOutcome(store=s, removed=removed.get(s, 0), compacted=True,
                             notes=notes if s == "vector_store" else []) for s in self.store_names()]

    def _concurrent_note(self, user: str | None, planned: set[tuple[str, str]]) -> str:
        return self.online.note(self._server_rows(user), planned)

    def server_out_of_scope(self) -> list[str]:
        return out_of_scope(self.replicas)


def pg_live(layout: LiveLayout, vector_store: dict[str, Any], read_only: bool, compaction: str | None,
            replicas: Sequence[str] = ()) -> Mem0PgLive:
    """The live instance; the server (and every named replica) is reached and the collection
    checked before anything else."""
    vcfg = dict(vector_store.get("config") or {})
    pg = PgCollection(pg_target(vcfg, compaction or DEFAULT_COMPACTION),
                      collection=str(vcfg.get("collection_name") or "mem0"))
    pg.check()
    return Mem0PgLive(layout, read_only=read_only, pg=pg, replicas=standbys(pg, replicas))
