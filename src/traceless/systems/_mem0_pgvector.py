"""mem0 on a PostgreSQL + pgvector **server** (issue #35): the user's own ``vector_store:
{provider: pgvector, config: {...}}``, read in a read-only transaction, erased online.

* reading (``scan``, the plan, the bystander digests): one ``BEGIN READ ONLY`` transaction
  per read; ``SELECT`` on the collection's table (and ``<collection>_entities`` when it
  exists) and on the catalogs; no DDL, no ``CREATE EXTENSION``, nothing created. A
  collection that does not exist is refused.
* erasing: the user's rows go in **one** transaction (``DELETE … WHERE id = ANY(…)``; the
  history db's rows through the kernel's journal, as for the local back ends), then the
  physical step on the affected tables: ``VACUUM FULL`` by default (rewrites heap and every
  index, HNSW included; an ``ACCESS EXCLUSIVE`` lock for its duration), or plain
  ``VACUUM (INDEX_CLEANUP ON)`` (online; measured to leave the erased tuples' bytes in the
  pages' free space, so the claim stays ``logical``), then ``CHECKPOINT``.
* verification: the relation files (``pg_relation_filepath``: heap, TOAST, every index)
  are read after the checkpoint when the data directory is readable from here; otherwise
  the receipt says the level was not verified. The WAL segments under ``pg_wal`` that still
  hold the erased records' bytes are counted and stated (never a silent pass).

Credentials (the password, a connection string) are never written: every message names
the host, port and database only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceless.errors import ConfigError
from traceless.forget import scan_files
from traceless.systems import ErasurePlan, StoreOutcome
from traceless.systems._mem0_live import LiveLayout, Mem0Live, Rec, _payload_texts, _vacuum

__all__ = ["Mem0PgLive", "PgCollection", "PgTarget", "pg_live", "pg_target"]

_COMPACTIONS = ("full", "vacuum")
_TEXT_KEYS = ("data", "text_lemmatized", "hash")
"""The payload keys whose bytes the verification looks for (the memory's text, its hash)."""


@dataclass(frozen=True)
class PgTarget:
    """Where the collection lives (never printed whole: ``conninfo`` holds the password)."""

    conninfo: str
    host: str
    port: str
    dbname: str
    collection: str
    compaction: str = "full"

    @property
    def where(self) -> str:
        return f"PostgreSQL at {self.host}:{self.port} (database {self.dbname!r})"


def pg_target(vcfg: dict[str, Any], compaction: str = "full") -> PgTarget:
    """The server and collection of mem0's pgvector config (its ``connection_string`` or
    ``host``/``port``/``user``/``password``/``dbname``; ``sslmode`` passed through)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    if compaction not in _COMPACTIONS:
        raise ConfigError(f"pg_compaction {compaction!r}: use one of {', '.join(_COMPACTIONS)}")
    if vcfg.get("connection_pool") is not None:
        raise ConfigError("mem0 pgvector with a connection_pool object cannot be given in a config file; "
                          "give connection_string or host/port/user/password/dbname")
    if vcfg.get("connection_string"):
        try:
            base = conninfo_to_dict(str(vcfg["connection_string"]))
        except Exception:  # psycopg's ProgrammingError quotes the string: never repeat it
            raise ConfigError("vector_store.config.connection_string is not a valid PostgreSQL connection "
                              "string (postgresql://USER:PASSWORD@HOST:PORT/DBNAME)") from None
    else:
        base = {k: vcfg[k] for k in ("host", "port", "user", "password") if vcfg.get(k) is not None}
        base["dbname"] = vcfg.get("dbname") or "postgres"
    if vcfg.get("sslmode"):
        base["sslmode"] = vcfg["sslmode"]
    base.setdefault("connect_timeout", 10)
    return PgTarget(make_conninfo(**{k: str(v) for k, v in base.items()}), str(base.get("host") or "localhost"),
                    str(base.get("port") or 5432), str(base.get("dbname") or "postgres"),
                    str(vcfg.get("collection_name") or "mem0"), compaction)


def _reason(e: Exception) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text.rsplit("failed: ", 1)[-1].replace("FATAL:", "").strip()


@dataclass
class PgCollection:
    """Reads and erases mem0's collection on the server."""

    target: PgTarget
    tables: list[str] = field(default_factory=list)

    @contextmanager
    def connect(self, *, read_only: bool) -> Iterator[Any]:
        import psycopg

        try:
            con = psycopg.connect(self.target.conninfo)
        except psycopg.OperationalError as e:
            raise ConfigError(f"cannot connect to {self.target.where}: {_reason(e)}; check host, port, user and "
                              "password in vector_store.config (nothing was read or changed)") from None
        try:
            con.read_only = read_only  # psycopg sends BEGIN READ ONLY
            yield con
        finally:
            con.close()

    def check(self) -> None:
        """The collection must exist (nothing is created); its companion entity table is optional."""
        with self.connect(read_only=True) as con:
            found = [r[0] for r in con.execute(
                "SELECT c.relname FROM pg_class c WHERE c.relkind = 'r' AND c.relname = ANY(%s) "
                "AND pg_table_is_visible(c.oid)", ([self.target.collection, f"{self.target.collection}_entities"],))]
            con.rollback()
        if self.target.collection not in found:
            raise ConfigError(f"{self.target.where}: no table {self.target.collection!r} (mem0's collection_name); "
                              "check vector_store.config.collection_name (nothing was created)")
        self.tables = [t for t in (self.target.collection, f"{self.target.collection}_entities") if t in found]

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

    def precheck_write(self) -> None:
        """The role may DELETE and VACUUM the tables: refused before any change otherwise."""
        with self.connect(read_only=True) as con:
            for t in self.tables:
                ok = con.execute("SELECT has_table_privilege(%s, 'DELETE'), pg_has_role(c.relowner, 'USAGE') "
                                 "OR has_table_privilege(%s, 'MAINTAIN') FROM pg_class c WHERE c.oid = %s::regclass",
                                 (t, t, t)).fetchone()
                if not ok or not all(ok):
                    raise ConfigError(f"{self.target.where}: the role may not DELETE from or VACUUM {t!r}; "
                                      "grant it DELETE and MAINTAIN (or use the table's owner); nothing was changed")
            con.rollback()

    def delete(self, ids: dict[str, set[str]]) -> int:
        """The rows in one transaction (every table or none)."""
        from psycopg import sql

        n = 0
        with self.connect(read_only=False) as con, con.transaction():
            for t, vals in ids.items():
                if vals:
                    n += con.execute(sql.SQL("DELETE FROM {} WHERE id::text = ANY(%s)").format(sql.Identifier(t)),
                                     (sorted(vals),)).rowcount
        return n

    def compact(self) -> list[str]:
        """The physical step, then a checkpoint (what it could not do is said, not hidden)."""
        import psycopg
        from psycopg import sql

        notes: list[str] = []
        how = "VACUUM FULL" if self.target.compaction == "full" else "VACUUM (INDEX_CLEANUP ON)"
        with self.connect(read_only=False) as con:
            con.autocommit = True
            for t in self.tables:
                con.execute(sql.SQL(how + " {}").format(sql.Identifier(t)))
            try:
                con.execute("CHECKPOINT")
            except psycopg.Error:
                notes.append("CHECKPOINT not permitted for this role (superuser or pg_checkpoint): the relation "
                             "files may not hold the erasure yet")
        lock = " (an ACCESS EXCLUSIVE lock on each table while it ran)" if self.target.compaction == "full" else (
            ": online; measured to leave erased tuples' bytes in the pages' free space")
        return [f"{how} on {', '.join(self.tables)}{lock}", *notes]

    def server_files(self) -> tuple[list[Path], Path | None, str]:
        """The relation files (main fork, every segment) of the tables, their TOAST and
        indexes; the data directory; the server's version. No files when not readable here."""
        with self.connect(read_only=True) as con:
            version = str(con.execute("SHOW server_version").fetchone()[0])
            try:
                data = Path(str(con.execute("SHOW data_directory").fetchone()[0]))
            except Exception:
                con.rollback()
                return [], None, version
            rels = [str(r[0]) for r in con.execute(
                "SELECT pg_relation_filepath(x) FROM (SELECT c.oid AS x FROM pg_class c WHERE c.oid = ANY(%s) "
                "UNION SELECT c.reltoastrelid FROM pg_class c WHERE c.oid = ANY(%s) AND c.reltoastrelid <> 0 "
                "UNION SELECT i.indexrelid FROM pg_index i WHERE i.indrelid = ANY(%s) OR i.indrelid IN "
                "(SELECT reltoastrelid FROM pg_class WHERE oid = ANY(%s))) s ORDER BY 1",
                (self._oids(con),) * 4).fetchall() if r[0]]
            con.rollback()
        files: list[Path] = []
        for rel in rels:
            main = data / rel
            files += [p for p in [main, *sorted(main.parent.glob(main.name + ".[0-9]*"))] if p.is_file()]
        readable = all(_readable(p) for p in files) and files
        return (files if readable else []), (data if readable else None), version

    def _oids(self, con: Any) -> list[int]:
        return [int(con.execute("SELECT %s::regclass::oid", (t,)).fetchone()[0]) for t in self.tables]

    def wal_holding(self, data: Path, texts: Sequence[str]) -> tuple[int, int]:
        """(segments under pg_wal holding any of ``texts``, in any encoding the byte scan knows; segments there)."""
        segs = sorted(p for p in (data / "pg_wal").glob("0*") if p.is_file() and len(p.name) == 24)
        return sum(1 for n in scan_files(segs, texts).values() if n), len(segs)


def _readable(p: Path) -> bool:
    try:
        with open(p, "rb") as f:
            f.read(1)
        return True
    except OSError:
        return False


# ---------------------------------------------------------------- mem0's live instance


@dataclass
class Mem0PgLive(Mem0Live):
    """A mem0 instance whose vector store is a pgvector collection on a server; its
    ``history_db_path`` is a local SQLite file as for every mem0 instance."""

    pg: PgCollection | None = None

    def _coll(self) -> PgCollection:
        assert self.pg is not None
        return self.pg

    def records(self) -> list[Rec]:
        return self._read()  # the server's rows change without any local file's mtime: read each time

    def _vector_records(self) -> list[Rec]:
        pg = self._coll()
        out: list[Rec] = []
        for table, rows in pg.rows().items():
            store = "vector_store" if table == pg.target.collection else "entity_store"
            for rid, payload, vec in rows:
                out.append(Rec(store, rid, payload.get("user_id"), _payload_texts(payload), (rid, payload, vec),
                               linked=tuple(str(x) for x in payload.get("linked_memory_ids") or ())))
        return out

    def files(self) -> list[Path]:
        h = self.layout.history
        out = [p for p in (h, h.with_name(h.name + "-journal"), h.with_name(h.name + "-wal")) if p.is_file()]
        return out + self._coll().server_files()[0]

    def _compaction(self) -> list[str]:
        pg = self._coll()
        how = "VACUUM FULL" if pg.target.compaction == "full" else "VACUUM (INDEX_CLEANUP ON)"
        return [f"VACUUM {self.layout.history}", *(f"{how} {t} (server), CHECKPOINT" for t in pg.tables)]

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
        ent = f"{pg.target.collection}_entities"
        pg.delete({pg.target.collection: ids.get("vector_store", set()), ent: ids.get("entity_store", set())
                   if ent in pg.tables else set()})
        notes = pg.compact() + self._verify_files(needles)
        _vacuum(self.layout.history)
        removed = {s: len(v) for s, v in ids.items()}
        return [StoreOutcome(store=s, removed=removed.get(s, 0), compacted=True,
                             notes=notes if s == "vector_store" else []) for s in self.store_names()]

    def _verify_files(self, needles: Sequence[str]) -> list[str]:
        pg = self._coll()
        files, data, version = pg.server_files()
        head = f"{pg.target.where}, PostgreSQL {version}, tables {', '.join(pg.tables)}"
        if data is None:
            return [f"{head}: the data directory is not readable from here: the relation files and the WAL were "
                    "not read (the level 'clear' is not verified on the server)"]
        if not needles:
            return [f"{head}: no erased record's text was left to look for (an earlier run erased them)"]
        left = sum(scan_files(files, needles).values())
        wal, segs = pg.wal_holding(data, needles)
        return [f"{head}: {len(files)} relation files (heap, TOAST, indexes) read after CHECKPOINT: {left} copies "
                "of the erased records' texts",
                f"pg_wal: {wal} of {segs} segments still hold the erased records' texts (WAL is rewritten only when "
                "a recycled segment is reused; a replica or archive keeps its own copy)" if wal else
                f"pg_wal: 0 of {segs} segments hold the erased records' texts"]

    def server_out_of_scope(self) -> list[str]:
        return ["PostgreSQL base backups and dumps", "WAL archives (archive_command / pg_receivewal)",
                "streaming and logical replicas (not given to this erasure)",
                "the server's own logs (log_statement, auto_explain)"]


def pg_live(layout: LiveLayout, vector_store: dict[str, Any], read_only: bool, compaction: str | None) -> Mem0PgLive:
    """The live instance; the server is reached and the collection checked before anything else."""
    pg = PgCollection(pg_target(dict(vector_store.get("config") or {}), compaction or "full"))
    pg.check()
    return Mem0PgLive(layout, read_only=read_only, pg=pg)
