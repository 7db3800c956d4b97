"""A memory system's tables on a PostgreSQL **server** (issue #35), shared by every adapter
that keeps its records there (mem0 on pgvector, LangGraph's ``PostgresSaver`` /
``PostgresStore``, Agno's ``PostgresDb``, the Agents SDK's ``SQLAlchemySession``).

* reading: one ``BEGIN READ ONLY`` transaction per read (``connect(read_only=True)``); no
  DDL, no ``CREATE EXTENSION``, nothing created; tables that do not exist are refused.
* erasing: the rows go in **one** transaction (``delete``: ``DELETE … RETURNING`` the keys,
  so the erasure knows exactly what it removed and nothing else), then the physical step on
  the affected tables (``compact``: ``VACUUM (INDEX_CLEANUP ON)`` by default, online; or
  ``VACUUM FULL``, opt-in, an ``ACCESS EXCLUSIVE`` lock), then ``CHECKPOINT``.
* verification (``verify_files`` / ``verify_replica``, both run by ``physical_step``): the
  relation files (heap, TOAST, every index) read after the checkpoint when the data directory
  is readable from here, the ``pg_wal`` segments that still hold the erased texts counted; a
  named physical standby (``standbys``) waited for until it replayed past the erasure, then
  its files read too (``replica_files``: the kernel's byte scan reads them as well).
* online (``OnlineBystanders``): the bystanders of tables an application keeps writing are the
  other users' rows of the first digest, less the rows this erasure's ``DELETE`` returned.

Credentials are never written: every message names the host, port and database only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from traceless.errors import ConfigError
from traceless.forget import encodings_of, scan_bytes

__all__ = ["COMPACTIONS", "DEFAULT_COMPACTION", "KEY_SEP", "MARK", "OnlineBystanders", "OnlineTally", "PgServer", "Tally", "PgTarget", "delete_in", "ident",
           "make_target", "out_of_scope", "parse_dsn", "physical_step", "replica_files", "replica_steps", "replica_targets",
           "shown_dsn", "shown_dsns", "standbys", "tally_digest", "verify_files", "verify_replica",
           "escape_like", "in_snapshot", "key_hash", "key_sql", "like_any", "marks"]

COMPACTIONS = ("vacuum", "full")
DEFAULT_COMPACTION = "vacuum"
"""Online by default (issue #35: the app keeps serving other users); ``full`` is opt-in."""
_CODECS = {"LATIN1": "latin-1", "LATIN9": "iso8859-15", "WIN1252": "cp1252", "SQL_ASCII": "utf-8"}
"""Python's codec for a few single-byte server encodings (the rest: every form of the byte scan)."""
_PAST = "SELECT coalesce(pg_last_wal_replay_lsn() > %s::pg_lsn, false)"
_REACHED = "SELECT coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, false)"
_NO_TEXT_KEYS = ("uuid", "smallint", "integer", "bigint", "real", "double precision", "numeric", "boolean", "date",
                 "timestamp without time zone", "timestamp with time zone", "oid", "vector", "halfvec", "sparsevec")
"""Index key types that hold no text: an index whose every key is one of them (pgvector's HNSW
and IVFFlat on a vector, a b-tree on a ``uuid`` key, TOAST's ``(chunk_id, chunk_seq)``) holds
no byte of a record's text, so its files are not read (at 10^6 memories the HNSW index alone
is about a third of the collection's files)."""
REPLAY_TIMEOUT_S = 30.0
"""How long a named replica may take to replay the primary's WAL past the erasure."""


@dataclass(frozen=True)
class PgTarget:
    """Where the tables live (never printed whole: ``conninfo`` holds the password)."""

    conninfo: str
    host: str
    port: str
    dbname: str
    compaction: str = DEFAULT_COMPACTION
    role: str = "PostgreSQL"
    """``PostgreSQL`` (the primary) or ``PostgreSQL replica``: how messages name it."""
    source: str = "the memory config"
    """The config key it came from (what an error tells the user to check)."""

    @property
    def where(self) -> str:
        return f"{self.role} at {self.host}:{self.port} (database {self.dbname!r})"


def parse_dsn(dsn: str, key: str) -> dict[str, Any]:
    """A libpq connection string or URL as keywords (a SQLAlchemy ``postgresql+psycopg://``
    URL too); the error never repeats the string (it holds the password)."""
    from psycopg.conninfo import conninfo_to_dict

    if dsn.startswith("postgresql+") or dsn.startswith("postgres+"):
        dsn = "postgresql" + dsn[dsn.index("://"):]
    try:
        return dict(conninfo_to_dict(dsn))
    except Exception:  # psycopg's ProgrammingError quotes the string: never repeat it
        raise ConfigError(f"{key} is not a valid PostgreSQL connection string "
                          "(postgresql://USER:PASSWORD@HOST:PORT/DBNAME)") from None


def make_target(base: dict[str, Any], compaction: str = DEFAULT_COMPACTION, **kw: str) -> PgTarget:
    """A target from libpq keywords (``sslmode`` and the other TLS options passed through)."""
    from psycopg.conninfo import make_conninfo

    if compaction not in COMPACTIONS:
        raise ConfigError(f"pg_compaction {compaction!r}: use one of {', '.join(COMPACTIONS)}")
    base = dict(base)
    base.setdefault("connect_timeout", 10)
    return PgTarget(make_conninfo(**{k: str(v) for k, v in base.items()}), str(base.get("host") or "localhost"),
                    str(base.get("port") or 5432), str(base.get("dbname") or "postgres"), compaction, **kw)


def shown_dsn(parts: Mapping[str, Any]) -> str:
    """A connection string's keywords as a config dump shows them: no password."""
    d = parts
    return f"postgresql://{d.get('user', '')}@{d.get('host', '')}:{d.get('port', '')}/{d.get('dbname', '')}"


def shown_dsns(dsns: Sequence[str] | None, key: str) -> list[str] | None:
    """``traceless.pg_replicas`` as a config dump shows it (each without its password)."""
    return None if dsns is None else [shown_dsn(parse_dsn(str(d), key)) for d in dsns]


def replica_targets(dsns: Sequence[str], primary: PgTarget) -> list[PgTarget]:
    """The named physical standbys (``traceless.pg_replicas``: connection strings; a string
    without a database names the primary's), read only, for the verification."""
    out = []
    for i, dsn in enumerate(dsns):
        key = f"traceless.pg_replicas[{i}]"
        base = parse_dsn(str(dsn), key)
        base.setdefault("dbname", primary.dbname)
        out.append(make_target(base, primary.compaction, role="PostgreSQL replica", source=key))
    return out


def _reason(e: Exception) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text.rsplit("failed: ", 1)[-1].replace("FATAL:", "").strip()


def ident(table: str) -> Any:
    """``schema.table`` or ``table`` as a quoted SQL identifier."""
    from psycopg import sql

    return sql.Identifier(*table.split(".", 1))


@dataclass
class PgServer:
    """Reads and erases a set of tables on one server (``tables``: ``name`` or ``schema.name``)."""

    target: PgTarget
    tables: list[str] = field(default_factory=list)
    erasure_end: tuple[str, bool] | None = None
    """Where the erasure's WAL ends (``_wal_end``), once ``compact`` ran."""
    encoding: str = ""
    """The server's ``server_encoding`` (read with its files: ``server_files``)."""

    @contextmanager
    def connect(self, *, read_only: bool) -> Iterator[Any]:
        import psycopg

        try:
            con = psycopg.connect(self.target.conninfo, prepare_threshold=None)  # no PREPARE, no DEALLOCATE ALL
        except psycopg.OperationalError as e:
            raise ConfigError(f"cannot connect to {self.target.where}: {_reason(e)}; check host, port, user and "
                              f"password in {self.target.source} (nothing was read or changed)") from None
        try:
            con.read_only = read_only  # psycopg sends BEGIN READ ONLY
            yield con
        finally:
            con.close()

    def existing(self, names: Sequence[str]) -> list[str]:
        """Which of ``names`` are tables visible on the server (read only; nothing created)."""
        with self.connect(read_only=True) as con:
            found = {str(r[0]) for r in con.execute(
                "SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind IN ('r', 'p') AND (n.nspname || '.' || c.relname = ANY(%s) "
                "OR (c.relname = ANY(%s) AND pg_table_is_visible(c.oid)))", (list(names), list(names)))}
            con.rollback()
        return [t for t in names if t in found or any(f.split(".", 1)[1] == t for f in found)]

    def counts(self) -> dict[str, int]:
        """Rows per table, by ``count(*)`` on the server (one read-only transaction)."""
        from psycopg import sql

        with self.connect(read_only=True) as con:
            out = {t: int(con.execute(sql.SQL("SELECT count(*) FROM {}").format(ident(t))).fetchone()[0])
                   for t in self.tables}
            con.rollback()
        return out

    def precheck_write(self, privileges: Sequence[str] = ("DELETE",)) -> None:
        """The role may ``privileges`` (DELETE; UPDATE for rewrites) and VACUUM the tables:
        refused before any change otherwise. VACUUM: the table's owner, or ``MAINTAIN``
        (PostgreSQL 17+; before it, the database's owner or a superuser)."""
        with self.connect(read_only=True) as con:
            v17 = int(con.execute("SHOW server_version_num").fetchone()[0]) >= 170000
            may = " AND ".join("has_table_privilege(%(t)s, " + f"'{p}')" for p in privileges) or "true"
            vac = ("has_table_privilege(%(t)s, 'MAINTAIN')" if v17 else
                   "pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE') "
                   "OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)")
            for t in self.tables:
                ok = con.execute(f"SELECT {may}, pg_has_role(c.relowner, 'USAGE') OR {vac} FROM pg_class c "
                                 "WHERE c.oid = %(t)s::regclass", {"t": t}).fetchone()
                if not ok or not all(ok):
                    raise ConfigError(f"{self.target.where}: the role may not {'/'.join(privileges)} or VACUUM {t!r}; "
                                      f"grant it {' and '.join(privileges)} (and MAINTAIN, or use the table's owner); "
                                      "nothing was changed")
            con.rollback()

    def delete(self, keys: Mapping[str, tuple[Sequence[str], Collection[tuple[str, ...]]]]) -> dict[str, set[tuple[str, ...]]]:
        """Per table, the rows whose key columns (as text) are one of the given tuples, in one
        transaction (every table or none); the keys each ``DELETE`` returned (what this
        erasure removed, and nothing else)."""
        with self.connect(read_only=False) as con, con.transaction():
            return delete_in(con, keys)

    def compact(self) -> list[str]:
        """The physical step, then a checkpoint (what it could not do is said, not hidden)."""
        import psycopg
        from psycopg import sql

        notes: list[str] = []
        how = self.how()
        with self.connect(read_only=False) as con:
            con.autocommit = True
            for t in self.tables:
                con.execute(sql.SQL(how + " {}").format(ident(t)))
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

    def how(self) -> str:
        """The physical step's statement (printed in the plan)."""
        return "VACUUM FULL" if self.target.compaction == "full" else "VACUUM (INDEX_CLEANUP ON)"

    def check_standby(self) -> None:
        """A named replica must be reachable and a standby (refused before any change otherwise)."""
        with self.connect(read_only=True) as con:
            standby = bool(con.execute("SELECT pg_is_in_recovery()").fetchone()[0])
            con.rollback()
        if not standby:
            raise ConfigError(f"{self.target.where} ({self.target.source}) is not a standby (pg_is_in_recovery() "
                              "is false): name the physical replicas of the server; nothing was changed")

    def replayed(self, end: tuple[str, bool], timeout: float | None = None) -> str | None:
        """Wait until this standby has replayed the erasure's WAL (``end``: see ``_wal_end``),
        then ``CHECKPOINT`` (a restartpoint: the replayed pages reach its files); why not, or
        None. ``timeout``: ``REPLAY_TIMEOUT_S`` unless given."""
        import psycopg

        lsn, strict = end
        timeout = REPLAY_TIMEOUT_S if timeout is None else timeout
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
        """The relation files (main fork, every segment) of the tables, their TOAST and the
        indexes whose keys can hold text (``_NO_TEXT_KEYS``); the data directory; the server's
        version. No files when not readable here."""
        with self.connect(read_only=True) as con:
            version = str(con.execute("SHOW server_version").fetchone()[0])
            self.encoding = str(con.execute("SHOW server_encoding").fetchone()[0])
            try:
                data = Path(str(con.execute("SHOW data_directory").fetchone()[0]))
            except Exception:
                con.rollback()
                return [], None, version
            rels = [str(r[0]) for r in con.execute(
                "SELECT pg_relation_filepath(x) FROM (SELECT c.oid AS x FROM pg_class c WHERE c.oid = ANY(%s) "
                "UNION SELECT c.reltoastrelid FROM pg_class c WHERE c.oid = ANY(%s) AND c.reltoastrelid <> 0 "
                "UNION SELECT i.indexrelid FROM pg_index i WHERE (i.indrelid = ANY(%s) OR i.indrelid IN "
                "(SELECT reltoastrelid FROM pg_class WHERE oid = ANY(%s))) AND EXISTS (SELECT 1 FROM pg_attribute a "
                "WHERE a.attrelid = i.indexrelid AND a.attnum > 0 AND a.atttypid::regtype::text <> ALL(%s))) s "
                "ORDER BY 1",
                (*(self._oids(con),) * 4, list(_NO_TEXT_KEYS))).fetchall() if r[0]]
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
        """(segments under pg_wal holding any of ``texts`` (``forms``); segments there). Every
        segment (16 MB by default) is searched for every form in one pass (``scan_bytes``: a
        segment that holds none of 300 forms was read 300 times by a search per form, 91 s for
        64 segments at 10^6 memories); one recycled or removed meanwhile is not counted."""
        segs = sorted(p for p in (data / "pg_wal").glob("0*") if p.is_file() and len(p.name) == 24)
        forms = self.forms(texts)
        if not forms:
            return 0, len(segs)
        return sum(1 for n in scan_bytes(segs, forms).values() if any(n)), len(segs)

    def forms(self, texts: Sequence[str]) -> list[bytes]:
        """The byte forms of ``texts`` in this server's files: on a UTF8 server their UTF-8
        bytes and, for non-ASCII texts, the JSON ``\\uXXXX`` escapes an application's JSON
        may hold (a UTF8 server stores no UTF-16: those forms would only slow the pass); on any
        other encoding every form the byte scan knows, and the text in that encoding."""
        out: list[bytes] = []
        for t in texts:
            every = encodings_of(t)
            if self.encoding == "UTF8":
                every = [f for f in every if f not in (t.encode("utf-16-le"), t.encode("utf-16-be"))]
            elif (codec := _CODECS.get(self.encoding)) is not None:
                with suppress(UnicodeEncodeError):
                    every.append(t.encode(codec))
            out += every
        return list(dict.fromkeys(f for f in out if f))

    def count_in(self, files: Sequence[Path], texts: Sequence[str]) -> dict[str, int]:
        """Copies of ``texts`` (``forms``) per file, each file read once."""
        forms = self.forms(texts)
        return {f: sum(n) for f, n in scan_bytes(files, forms).items()} if forms else {str(f): 0 for f in files}


def delete_in(con: Any, keys: Mapping[str, tuple[Sequence[str], Collection[tuple[str, ...]]]]) -> dict[str, set[tuple[str, ...]]]:
    """``PgServer.delete`` inside the caller's open transaction ``con`` (tables in the given order)."""
    from psycopg import sql

    out: dict[str, set[tuple[str, ...]]] = {}
    for t, (cols, vals) in keys.items():
        if not vals:
            continue
        key = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in cols)
        arrays = [sorted(v[i] for v in vals) if len(cols) == 1 else [v[i] for v in sorted(vals)]
                  for i in range(len(cols))]
        if len(cols) == 1:
            q = sql.SQL("DELETE FROM {} WHERE {}::text = ANY(%s) RETURNING {}").format(
                ident(t), sql.Identifier(cols[0]), key)
        else:
            unnest = sql.SQL(", ").join(sql.SQL("%s::text[]") for _ in cols)
            q = sql.SQL("DELETE FROM {} WHERE ({}) IN (SELECT * FROM unnest({})) RETURNING {}").format(
                ident(t), key, unnest, key)
        out[t] = {tuple(str(x) for x in r) for r in con.execute(q, arrays)}
    return out


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


def verify_files(pg: PgServer, needles: Sequence[str]) -> list[str]:
    """The primary's relation files and ``pg_wal`` read for the erased texts, in words."""
    files, data, version = pg.server_files()
    head = f"{pg.target.where}, PostgreSQL {version}, tables {', '.join(pg.tables)}"
    if data is None:
        return [f"{head}: the data directory is not readable from here: the relation files and the WAL were "
                "not read (the level 'clear' is not verified on the server)"]
    if not needles:
        return [f"{head}: no erased record's text was left to look for (an earlier run erased them)"]
    left = sum(pg.count_in(files, needles).values())
    wal, segs = pg.wal_holding(data, needles)
    return [f"{head}: {len(files)} relation files (heap, TOAST, indexes) read after CHECKPOINT: {left} copies "
            "of the erased records' texts",
            f"pg_wal: {wal} of {segs} segments still hold the erased records' texts (WAL is rewritten only when "
            "a recycled segment is reused; a replica or archive keeps its own copy)" if wal else
            f"pg_wal: 0 of {segs} segments hold the erased records' texts"]


def verify_replica(rep: PgServer, end: tuple[str, bool], needles: Sequence[str]) -> str:
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
    left = sum(rep.count_in(files, needles).values())
    wal, segs = rep.wal_holding(data, needles) if data is not None else (0, 0)
    return (f"{head}, PostgreSQL {version}: verified after replaying the WAL past the erasure ({end[0]}) and a "
            f"restartpoint: {len(files)} relation files read: {left} copies of the erased records' texts; "
            f"its pg_wal: {wal} of {segs} segments hold them")


def out_of_scope(replicas: Sequence[PgServer]) -> list[str]:
    """What no erasure on the server reaches, by name (every receipt lists it)."""
    reps = (f"streaming and logical replicas other than the {len(replicas)} named in traceless.pg_replicas"
            if replicas else "streaming and logical replicas (none named in traceless.pg_replicas)")
    return ["PostgreSQL base backups and dumps", "WAL archives (archive_command / pg_receivewal)", reps,
            "the server's own logs (log_statement, auto_explain)"]


_Server = TypeVar("_Server", bound=PgServer)


def standbys(primary: _Server, dsns: Sequence[str]) -> list[_Server]:
    """The physical standbys ``traceless.pg_replicas`` names, as servers of ``primary``'s kind
    holding its tables; each reached and checked a standby before anything changes."""
    from dataclasses import replace

    out = [replace(primary, target=t, tables=list(primary.tables), erasure_end=None)
           for t in replica_targets(dsns, primary.target)]
    for r in out:
        r.check_standby()
    return out


def replica_files(replicas: Sequence[PgServer]) -> list[Path]:
    """The named replicas' relation files, for the kernel's byte scan (one not reachable now
    has none: the receipt's notes say it was not verified)."""
    out: list[Path] = []
    for rep in replicas:
        with suppress(ConfigError):
            out += rep.server_files()[0]
    return out


def replica_steps(replicas: Sequence[PgServer]) -> list[str]:
    """What the erasure does on each named replica, in words (printed in the plan)."""
    return [f"wait for {r.target.where} to replay, CHECKPOINT there" for r in replicas]


def physical_step(pg: PgServer, needles: Sequence[str], replicas: Sequence[PgServer] = ()) -> list[str]:
    """After the ``DELETE``: the physical step and checkpoint (``compact``), the primary's files
    read (``verify_files``), then each named replica waited for and read (``verify_replica``)."""
    notes = pg.compact() + verify_files(pg, needles)
    if pg.erasure_end is not None:
        notes += [verify_replica(r, pg.erasure_end, needles) for r in replicas]
    return notes


Key = tuple[str, str]
"""(store, record id) of a row of a server's table."""


@dataclass
class OnlineBystanders:
    """The bystander rule for tables an application keeps writing while the erasure runs (the
    app serves other users meanwhile): the bystanders are the other users' rows as the first
    digest of this erasure saw them, less the rows this erasure's ``DELETE … RETURNING``
    removed (``deleted``), and the rows its ``UPDATE`` rewrote (``rewritten``) as they are now.
    The erasure writes nothing else there, so what other transactions changed, removed or added
    meanwhile is theirs (counted in the receipt's notes); a ``DELETE`` that removed a
    bystander's row, or a rewrite that changed more than the literals, fails the check. Without a first digest (a re-run
    after a crash: the journal holds it) the rows as they are now: a live app then fails the
    check (conservative)."""

    first: dict[Key, str] | None = None
    """The other users' rows (key → digest text) as this erasure's first digest saw them."""
    deleted: set[Key] = field(default_factory=set)
    """The rows this erasure's ``DELETE`` statements returned."""
    rewritten: set[Key] = field(default_factory=set)
    """The other users' rows this erasure's ``UPDATE`` rewrote (the literals replaced): digested
    as they are now, so a rewrite that changed more than the literals fails the check."""

    def reset(self) -> None:
        """A new erasure (its plan): no first digest, nothing deleted or rewritten yet."""
        self.first, self.deleted, self.rewritten = None, set(), set()

    def rows(self, now: Mapping[Key, str]) -> dict[Key, str]:
        """The rows the bystander digest covers, given the rows read now (the first call keeps them)."""
        if self.first is None:
            self.first = dict(now)
        return self.kept(now)[0]

    def kept(self, now: Mapping[Key, str]) -> tuple[dict[Key, str], tuple[int, int, int]]:
        """The first digest's rows as this erasure left them, and what other transactions did
        to them meanwhile: (changed, removed, added)."""
        first = self.first if self.first is not None else dict(now)
        kept = {k: d for k, d in first.items() if k not in self.deleted}
        for k in self.rewritten & set(kept) & set(now):  # this erasure's own change: as it left the row
            kept[k] = now[k]
        changed = sum(1 for k, d in kept.items() if k in now and now[k] != d)
        removed = sum(1 for k in kept if k not in now)
        return kept, (changed, removed, sum(1 for k in now if k not in first))

    def note(self, now: Mapping[Key, str], planned: Collection[Key]) -> str:
        """The receipt's note: what this erasure's ``DELETE`` removed, what the app changed."""
        changed, removed, added = self.kept(now)[1]
        stray = len(self.deleted - set(planned))
        which = "all planned" if not stray else f"{stray} of them NOT in the plan"
        return (f"online: this erasure's DELETE removed {len(self.deleted)} rows, {which}; meanwhile other "
                f"transactions (the application) {_moves(changed=changed, removed=removed, added=added)} (theirs: "
                "the bystander check compares the rows as this erasure left them)")


def _moves(**kinds: int | bool) -> str:
    """What the application did to the other users' rows, by kind, never how many: a count of
    other users' rows would tell the requester about them (issue 40.6)."""
    did = [f"{k} some of the other users' rows" for k, n in kinds.items() if n]
    return " and ".join(did) if did else "changed none of the other users' rows"


Tally = tuple[int, int]
"""(rows, the sum of their keys' 64-bit hashes): a set of rows in one row, computed on the server."""
MARK = "mark:"
"""The prefix of a digest entry that says, in clear, which rows a ``Tally`` covers (a snapshot,
a history row): the same on both sides when nothing was lost, and what a re-run after a crash
reads back from the journal."""
KEY_SEP = "\x1f"
"""Joins a composite key's columns (as text) into the one text whose hash ``key_hash`` sums."""


def tally_digest(t: Tally, mark: str) -> tuple[str, ...]:
    """A ``Tally`` as a bystander digest: one record of (count, key-hash sum), so any change of
    the count or of which rows it holds shows as that record gone (an over-deletion); and the
    mark of the rows it covers."""
    from traceless.systems.kernel import digest

    return tuple(sorted((*digest([f"{t[0]}:{t[1]}"]), MARK + mark)))


def marks(digest: Sequence[str]) -> dict[str, str]:
    """The marks a ``tally_digest`` carries (kind → value: ``snapshot`` → ``pg_current_snapshot()``)."""
    out = {}
    for entry in (e for e in digest if e.startswith(MARK)):
        kind, _, value = entry.removeprefix(MARK).partition(":")
        out[kind] = value
    return out


def in_snapshot(within: str) -> tuple[str, dict[str, Any]]:
    """A condition (`` AND …``) and its arguments: the row's ``xmin`` was visible to the snapshot
    ``within`` (``pg_current_snapshot()`` as text): a re-run after a crash counts the rows the
    interrupted run's first count saw (the application's later rows, and its later versions of
    a row, are its own)."""
    xmax = int(within.split(":")[1])
    return (" AND pg_visible_in_snapshot((%(base)s + xmin::text::bigint - CASE WHEN %(base)s + xmin::text::bigint "
            "> %(xmax)s THEN 4294967296 ELSE 0 END)::text::xid8, %(snap)s::pg_snapshot)",
            {"snap": within, "xmax": xmax, "base": xmax >> 32 << 32})


def escape_like(text: str) -> str:
    """``text`` as a ``LIKE`` pattern that matches it literally (``\\`` is ``LIKE``'s default escape)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def like_any(pieces: Sequence[str]) -> list[str]:
    """The ``LIKE ANY`` patterns (``%piece%``, escaped) true for a text that holds one of
    ``pieces``, as ``strpos`` would find it: the text is made once a row and every piece looked
    for in it (an ``EXISTS`` over ``unnest`` with ``strpos`` makes it once per piece, and as a
    sub-plan it keeps the pass off the server's parallel workers)."""
    return [f"%{escape_like(p)}%" for p in pieces]


def key_sql(cols: Sequence[str]) -> Any:
    """A key's columns as the one text ``key_hash`` hashes (``KEY_SEP`` between them)."""
    from psycopg import sql

    return sql.SQL("concat_ws(E'\\x1f', {})").format(
        sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in cols))


def key_hash(con: Any, keys: Sequence[str]) -> dict[str, int]:
    """Each key text's 64-bit hash as the server computes it in a ``Tally``
    (``hashtextextended(key, 0)``)."""
    if not keys:
        return {}
    return {str(k): int(h) for k, h in con.execute(
        "SELECT k, hashtextextended(k, 0) FROM unnest(%s::text[]) k", (list(keys),))}


@dataclass
class OnlineTally:
    """``OnlineBystanders`` in aggregate, for tables too large to digest row by row on every
    erasure: per store, the other users' rows as the first digest of this erasure counted them
    on the server (``Tally``: no row leaves it), less the rows this erasure's ``DELETE …
    RETURNING`` removed that the first count held (``gone``: each one's key hash returned with
    it). An over-deletion always lowers the count: the check fails. The rows' contents are not
    digested: the erasure changes none there (it only deletes), and what the application
    inserts, updates or deletes meanwhile is its own (the note says how the count moved).
    Without a first count (a re-run after a crash: the journal holds it) the rows as they are
    now (a live app then fails the check: conservative)."""

    first: dict[str, Tally] | None = None
    """Per store, the other users' rows (less the plan's targets) as the first digest counted them."""
    gone: dict[str, Tally] = field(default_factory=dict)
    """Per store, the rows this erasure's ``DELETE`` returned that the first count held."""
    deleted: int = 0
    """Rows this erasure's ``DELETE`` statements returned."""
    stray: int = 0
    """Of them, rows the plan did not name."""

    def reset(self) -> None:
        """A new erasure (its plan): no first count, nothing deleted yet."""
        self.first, self.gone, self.deleted, self.stray = None, {}, 0, 0

    def tallies(self, now: Callable[[], dict[str, Tally]]) -> dict[str, Tally]:
        """The count the bystander digest covers (``now``: counted on the server, called only
        when there is no first count yet; the first call keeps it)."""
        if self.first is None:
            if self.deleted:  # counted after the DELETE: the rows as they are
                return now()
            self.first = now()
        return {s: (n - self.gone.get(s, (0, 0))[0], h - self.gone.get(s, (0, 0))[1]) for s, (n, h) in self.first.items()}

    def removed(self, store: str, held: bool, key_hash: int, planned: bool) -> None:
        """One row this erasure's ``DELETE`` returned: ``held`` by the first count (another
        user's row, not a target), ``planned`` by the plan."""
        self.deleted += 1
        self.stray += not planned
        if held:
            n, h = self.gone.get(store, (0, 0))
            self.gone[store] = (n + 1, h + key_hash)

    def note(self, now: Mapping[str, Tally]) -> str:
        """The receipt's note: what this erasure's ``DELETE`` removed, how the other users'
        rows moved meanwhile (the application's inserts and deletes)."""
        which = "all planned" if not self.stray else f"{self.stray} of them NOT in the plan"
        first = sum(n for n, _ in (self.first or {}).values()) - sum(n for n, _ in self.gone.values())
        moved = sum(n for n, _ in now.values()) - first
        return (f"online: this erasure's DELETE removed {self.deleted} rows, {which}; meanwhile other transactions "
                f"(the application) {_moves(added=moved > 0, removed=moved < 0)} (the bystander check compares the "
                "rows as this erasure left them; counted on the server)")
