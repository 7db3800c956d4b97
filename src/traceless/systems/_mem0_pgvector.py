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

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceless.errors import ConfigError
from traceless.systems import ErasurePlan, StoreOutcome
from traceless.systems._mem0_live import LiveLayout, Mem0Live, Rec, _payload_texts, _vacuum
from traceless.systems.kernel import digest
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
        from psycopg import sql

        out: dict[str, list[tuple[str, dict[str, Any], str]]] = {}
        with self.connect(read_only=True) as con:
            for t in self.tables:
                cur = con.execute(sql.SQL("SELECT id::text, payload, vector::text FROM {} ORDER BY id").format(
                    sql.Identifier(t)))
                out[t] = [(str(i), dict(p or {}), str(v)) for i, p, v in cur.fetchall()]
            con.rollback()
        return out


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
        pg = self._coll()
        out: list[Rec] = []
        for table, rows in pg.rows().items():
            store = "vector_store" if table == pg.collection else "entity_store"
            for rid, payload, vec in rows:
                out.append(Rec(store, rid, payload.get("user_id"), _payload_texts(payload), (rid, payload, vec),
                               linked=tuple(str(x) for x in payload.get("linked_memory_ids") or ())))
        return out

    def files(self) -> list[Path]:
        h = self.layout.history
        out = [p for p in (h, h.with_name(h.name + "-journal"), h.with_name(h.name + "-wal")) if p.is_file()]
        return out + self._coll().server_files()[0] + replica_files(self.replicas)

    def bystanders(self, user: str | None) -> dict[str, tuple[int, str]]:
        """As the local back ends', but the server's tables are shared with a running
        application: their bystanders are the other users' rows of the first digest, less
        the rows this erasure's ``DELETE`` returned (``OnlineBystanders``)."""
        per: dict[str, list[str]] = {s: [] for s in self.store_names()}
        rows: dict[tuple[str, str], str] = {}
        for r in self.records():
            if (user is not None and r.owner == user) or (r.store, r.id) in self.targets:
                continue
            if r.store in _SERVER_STORES:
                rows[(r.store, r.id)] = self._digest_of(r)
            else:
                per.setdefault(r.store, []).append(self._digest_of(r))
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
        erased = [r for r in self.records() if r.store in ("vector_store", "entity_store")
                  and r.id in ids.get(r.store, set())]
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
        now = {(r.store, r.id): self._digest_of(r) for r in self.records() if r.store in _SERVER_STORES
               and (r.store, r.id) not in self.targets and (user is None or r.owner != user)}
        return self.online.note(now, planned)

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
