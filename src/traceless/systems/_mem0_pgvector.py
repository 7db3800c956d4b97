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

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceless.errors import ConfigError
from traceless.forget import scan_files
from traceless.systems import ErasurePlan, StoreOutcome
from traceless.systems._mem0_live import LiveLayout, Mem0Live, Rec, _payload_texts, _vacuum
from traceless.systems.kernel import digest

__all__ = ["DEFAULT_COMPACTION", "Mem0PgLive", "PgCollection", "PgTarget", "pg_live", "pg_target", "replica_targets"]

_COMPACTIONS = ("vacuum", "full")
DEFAULT_COMPACTION = "vacuum"
"""Online by default (issue #35: the app keeps serving other users); ``full`` is opt-in."""
_SERVER_STORES = ("vector_store", "entity_store")
_PAST = "SELECT coalesce(pg_last_wal_replay_lsn() > %s::pg_lsn, false)"
_REACHED = "SELECT coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, false)"
REPLAY_TIMEOUT_S = 30.0
"""How long a named replica may take to replay the primary's WAL past the erasure."""
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
    compaction: str = DEFAULT_COMPACTION
    role: str = "PostgreSQL"
    """``PostgreSQL`` (the primary) or ``PostgreSQL replica``: how messages name it."""
    source: str = "vector_store.config"
    """The config key it came from (what an error tells the user to check)."""

    @property
    def where(self) -> str:
        return f"{self.role} at {self.host}:{self.port} (database {self.dbname!r})"


def pg_target(vcfg: dict[str, Any], compaction: str = DEFAULT_COMPACTION) -> PgTarget:
    """The server and collection of mem0's pgvector config (its ``connection_string`` or
    ``host``/``port``/``user``/``password``/``dbname``; ``sslmode`` passed through)."""
    if compaction not in _COMPACTIONS:
        raise ConfigError(f"pg_compaction {compaction!r}: use one of {', '.join(_COMPACTIONS)}")
    if vcfg.get("connection_pool") is not None:
        raise ConfigError("mem0 pgvector with a connection_pool object cannot be given in a config file; "
                          "give connection_string or host/port/user/password/dbname")
    if vcfg.get("connection_string"):
        base = _parse_dsn(str(vcfg["connection_string"]), "vector_store.config.connection_string")
    else:
        base = {k: vcfg[k] for k in ("host", "port", "user", "password") if vcfg.get(k) is not None}
        base["dbname"] = vcfg.get("dbname") or "postgres"
    if vcfg.get("sslmode"):
        base["sslmode"] = vcfg["sslmode"]
    return _target(base, str(vcfg.get("collection_name") or "mem0"), compaction)


def _parse_dsn(dsn: str, key: str) -> dict[str, Any]:
    from psycopg.conninfo import conninfo_to_dict

    try:
        return dict(conninfo_to_dict(dsn))
    except Exception:  # psycopg's ProgrammingError quotes the string: never repeat it
        raise ConfigError(f"{key} is not a valid PostgreSQL connection string "
                          "(postgresql://USER:PASSWORD@HOST:PORT/DBNAME)") from None


def _target(base: dict[str, Any], collection: str, compaction: str, **kw: str) -> PgTarget:
    from psycopg.conninfo import make_conninfo

    base.setdefault("connect_timeout", 10)
    return PgTarget(make_conninfo(**{k: str(v) for k, v in base.items()}), str(base.get("host") or "localhost"),
                    str(base.get("port") or 5432), str(base.get("dbname") or "postgres"), collection, compaction, **kw)


def replica_targets(dsns: Sequence[str], primary: PgTarget) -> list[PgTarget]:
    """The named physical standbys (``traceless.pg_replicas``: connection strings; a string
    without a database names the primary's), read only, for the verification."""
    out = []
    for i, dsn in enumerate(dsns):
        key = f"traceless.pg_replicas[{i}]"
        base = _parse_dsn(str(dsn), key)
        base.setdefault("dbname", primary.dbname)
        out.append(_target(base, primary.collection, primary.compaction, role="PostgreSQL replica", source=key))
    return out


def _reason(e: Exception) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text.rsplit("failed: ", 1)[-1].replace("FATAL:", "").strip()


@dataclass
class PgCollection:
    """Reads and erases mem0's collection on the server."""

    target: PgTarget
    tables: list[str] = field(default_factory=list)
    erasure_end: tuple[str, bool] | None = None
    """Where the erasure's WAL ends (``_wal_end``), once ``compact`` ran."""

    @contextmanager
    def connect(self, *, read_only: bool) -> Iterator[Any]:
        import psycopg

        try:
            con = psycopg.connect(self.target.conninfo)
        except psycopg.OperationalError as e:
            raise ConfigError(f"cannot connect to {self.target.where}: {_reason(e)}; check host, port, user and "
                              f"password in {self.target.source} (nothing was read or changed)") from None
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

    def delete(self, ids: dict[str, set[str]]) -> dict[str, set[str]]:
        """The rows in one transaction (every table or none); the ids each table's ``DELETE``
        returned (what this erasure removed, and nothing else)."""
        from psycopg import sql

        out: dict[str, set[str]] = {}
        with self.connect(read_only=False) as con, con.transaction():
            for t, vals in ids.items():
                if vals:
                    out[t] = {str(r[0]) for r in con.execute(sql.SQL(
                        "DELETE FROM {} WHERE id::text = ANY(%s) RETURNING id::text").format(sql.Identifier(t)),
                        (sorted(vals),))}
        return out

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
                checkpointed = True
            except psycopg.Error:
                checkpointed = False
                notes.append("CHECKPOINT not permitted for this role (superuser or pg_checkpoint): the relation "
                             "files may not hold the erasure yet")
            self.erasure_end = _wal_end(con, checkpointed)
        lock = (" (pg_compaction: full, opt-in: an ACCESS EXCLUSIVE lock on each table while it ran; the "
                "application's queries on it waited)") if self.target.compaction == "full" else (
            " (pg_compaction: vacuum, the default): online, the application's queries do not wait on it; it leaves "
            "the erased tuples' bytes in the heap pages' free space until the pages are reused (counted below); "
            "pg_compaction: full removes them under an ACCESS EXCLUSIVE lock")
        return [f"{how} on {', '.join(self.tables)}{lock}", *notes]


    def check_standby(self) -> None:
        """A named replica must be reachable and a standby (refused before any change otherwise)."""
        with self.connect(read_only=True) as con:
            standby = bool(con.execute("SELECT pg_is_in_recovery()").fetchone()[0])
            con.rollback()
        if not standby:
            raise ConfigError(f"{self.target.where} ({self.target.source}) is not a standby (pg_is_in_recovery() "
                              "is false): name the physical replicas of the server; nothing was changed")

    def replayed(self, end: tuple[str, bool], timeout: float = REPLAY_TIMEOUT_S) -> str | None:
        """Wait until this standby has replayed the erasure's WAL (``end``: see ``_wal_end``),
        then ``CHECKPOINT`` (a restartpoint: the replayed pages reach its files); why not, or None."""
        import psycopg

        lsn, strict = end
        with self.connect(read_only=False) as con:
            con.autocommit = True
            deadline = time.monotonic() + timeout
            query = _PAST if strict else _REACHED
            while not con.execute(query, (lsn,)).fetchone()[0]:
                if time.monotonic() > deadline:
                    return f"it had not replayed the WAL up to {lsn} after {timeout:.0f} s"
                time.sleep(0.05)
            try:
                con.execute("CHECKPOINT")
            except psycopg.Error:
                return "CHECKPOINT (a restartpoint) not permitted for this role: its files may not hold the replay"
        return None

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


def _wal_end(con: Any, checkpointed: bool) -> tuple[str, bool]:
    """Where the erasure's WAL ends, taken right after its checkpoint: (that checkpoint
    record's start, True: replayed once a standby's replay position is past it) when the role
    may read ``pg_control_checkpoint()``; else (the insert position, False: replayed once
    reached). Not the flush position: a flush may end inside a record, which a standby then
    cannot replay until a later flush (seconds on an idle server, measured)."""
    import psycopg

    if checkpointed:
        with suppress(psycopg.Error):
            return str(con.execute("SELECT checkpoint_lsn::text FROM pg_control_checkpoint()").fetchone()[0]), True
    return str(con.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]), False


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
    replicas: list[PgCollection] = field(default_factory=list)
    """The named physical standbys (``traceless.pg_replicas``), read only."""
    first_rows: dict[tuple[str, str], str] | None = None
    """The other users' rows of the server's tables (store, id) → digest, as the first
    bystander digest of this process saw them."""
    deleted: set[tuple[str, str]] = field(default_factory=set)
    """The rows this erasure's ``DELETE`` returned."""

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
        out += self._coll().server_files()[0]
        for rep in self.replicas:  # the kernel's byte scan covers the replicas' files too
            with suppress(ConfigError):  # unreachable now: the receipt's notes say it was not verified
                out += rep.server_files()[0]
        return out

    def bystanders(self, user: str | None) -> dict[str, tuple[int, str]]:
        """As the local back ends', but the server's tables are shared with a running
        application: their bystanders are the other users' rows of the first digest, less
        the rows this erasure's ``DELETE`` returned (``_others``)."""
        per: dict[str, list[str]] = {s: [] for s in self.store_names()}
        rows: dict[tuple[str, str], str] = {}
        for r in self.records():
            if (user is not None and r.owner == user) or (r.store, r.id) in self.targets:
                continue
            if r.store in _SERVER_STORES:
                rows[(r.store, r.id)] = self._digest_of(r)
            else:
                per.setdefault(r.store, []).append(self._digest_of(r))
        if self.first_rows is None:
            self.first_rows = rows
        for (store, _), d in self._others(rows)[0].items():
            per.setdefault(store, []).append(d)
        return {s: digest(d) for s, d in per.items()}

    def _others(self, now: dict[tuple[str, str], str]) -> tuple[dict[tuple[str, str], str], tuple[int, int, int]]:
        """The first digest's rows as this erasure left them: the rows its ``DELETE`` returned
        are gone; every other row counts as the first digest saw it, since this erasure writes
        nothing else (what other transactions changed, removed or added meanwhile is theirs:
        counted as (changed, removed, added)). Without a first digest (a re-run after a crash),
        the rows as they are now."""
        first = self.first_rows if self.first_rows is not None else now
        kept = {k: d for k, d in first.items() if k not in self.deleted}
        changed = sum(1 for k, d in kept.items() if k in now and now[k] != d)
        removed = sum(1 for k in kept if k not in now)
        return kept, (changed, removed, sum(1 for k in now if k not in first))

    def _compaction(self) -> list[str]:
        pg = self._coll()
        how = "VACUUM FULL" if pg.target.compaction == "full" else "VACUUM (INDEX_CLEANUP ON)"
        out = [f"VACUUM {self.layout.history}", *(f"{how} {t} (server), CHECKPOINT" for t in pg.tables)]
        return out + [f"wait for {r.target.where} to replay, CHECKPOINT there" for r in self.replicas]

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
        gone = pg.delete({pg.target.collection: ids.get("vector_store", set()), ent: ids.get("entity_store", set())
                          if ent in pg.tables else set()})
        self.deleted = {("vector_store" if t == pg.target.collection else "entity_store", i)
                        for t, v in gone.items() for i in v}
        notes = pg.compact() + self._verify_files(needles)
        if self.replicas and pg.erasure_end is not None:
            notes += [self._verify_replica(r, pg.erasure_end, needles) for r in self.replicas]
        notes.append(self._concurrent_note(plan.user))
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

    def _verify_replica(self, rep: PgCollection, end: tuple[str, bool], needles: Sequence[str]) -> str:
        """One named replica: replayed past the erasure, restartpoint, its relation files and
        pg_wal read; verified or not, and why."""
        head = f"{rep.target.where}"
        try:
            why = rep.replayed(end)
            files, data, version = rep.server_files() if why is None else ([], None, "")
        except ConfigError as e:
            why = str(e).split(": ", 1)[-1]
            files, data, version = [], None, ""
        if why is None and data is None:
            why = "its data directory is not readable from here"
        if why is not None:
            return f"{head}: NOT verified ({why}); its relation files and WAL were not read"
        if not needles:
            return f"{head}: no erased record's text was left to look for"
        left = sum(scan_files(files, needles).values())
        wal, segs = rep.wal_holding(data, needles) if data is not None else (0, 0)
        return (f"{head}, PostgreSQL {version}: verified after replaying the WAL past the erasure ({end[0]}) and a "
                f"restartpoint: {len(files)} relation files read: {left} copies of the erased records' texts; "
                f"its pg_wal: {wal} of {segs} segments hold them")

    def _concurrent_note(self, user: str | None) -> str:
        now = {(r.store, r.id): self._digest_of(r) for r in self.records() if r.store in _SERVER_STORES
               and (r.store, r.id) not in self.targets and (user is None or r.owner != user)}
        changed, removed, added = self._others(now)[1]
        return (f"online: this erasure's DELETE removed {len(self.deleted)} rows, all planned; meanwhile other "
                f"transactions (the application) changed {changed}, removed {removed} and added {added} of the other "
                "users' rows (theirs: the bystander check compares the rows as this erasure left them)")

    def server_out_of_scope(self) -> list[str]:
        reps = (f"streaming and logical replicas other than the {len(self.replicas)} named in traceless.pg_replicas"
                if self.replicas else "streaming and logical replicas (none named in traceless.pg_replicas)")
        return ["PostgreSQL base backups and dumps", "WAL archives (archive_command / pg_receivewal)", reps,
                "the server's own logs (log_statement, auto_explain)"]


def pg_live(layout: LiveLayout, vector_store: dict[str, Any], read_only: bool, compaction: str | None,
            replicas: Sequence[str] = ()) -> Mem0PgLive:
    """The live instance; the server (and every named replica) is reached and the collection
    checked before anything else."""
    pg = PgCollection(pg_target(dict(vector_store.get("config") or {}), compaction or DEFAULT_COMPACTION))
    pg.check()
    reps = [PgCollection(t, list(pg.tables)) for t in replica_targets(replicas, pg.target)]
    for r in reps:
        r.check_standby()
    return Mem0PgLive(layout, read_only=read_only, pg=pg, replicas=reps)
