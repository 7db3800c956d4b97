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
  counted them on the server (``OnlineTally``: ``count(*)`` and the sum of the ids' hashes, one
  row per table); only this erasure's ``DELETE`` (the rows it returned, with their owners) may
  change them. What other transactions (the application, serving other users meanwhile)
  inserted or deleted is theirs, and counted in the receipt's notes. The history db's
  bystanders are digested by SQLite in one pass (``history_tally``), then counted again.

Credentials (the password, a connection string) are never written: every message names
the host, port and database only.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Collection, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceless.errors import ConfigError
from traceless.systems import ErasurePlan, StoreOutcome
from traceless.systems._mem0_live import (
    _HISTORY_COLUMNS,
    _MESSAGES_COLUMNS,
    LiveLayout,
    Mem0Live,
    Rec,
    _payload_texts,
    _ro,
    _scope_user,
    _vacuum,
)
from traceless.systems.kernel import StoreDigest, digest, literal_forms
from traceless.systems.postgres import (
    DEFAULT_COMPACTION,
    MARK,
    OnlineTally,
    PgServer,
    PgTarget,
    Tally,
    in_snapshot,
    like_any,
    make_target,
    out_of_scope,
    parse_dsn,
    physical_step,
    replica_files,
    replica_steps,
    replica_targets,
    standbys,
    tally_digest,
)

__all__ = ["DEFAULT_COMPACTION", "Mem0PgLive", "PgCollection", "PgTarget", "pg_live", "pg_target", "replica_targets"]

_SERVER_STORES = ("vector_store", "entity_store")
Row = tuple[str, dict[str, Any], str]
"""A row of a collection table: id, payload, the vector as text."""
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
    _read: tuple[tuple[str | None, frozenset[str]], dict[str, list[Row]]] | None = field(
        default=None, init=False, repr=False, compare=False)
    """The last read by user and patterns (``select``): the scope check's per-literal scans
    are answered from the plan's read (one pass over the table instead of one per literal and
    one more); dropped by ``forget_reads`` and by every ``DELETE``."""
    _basis: Basis | None = field(default=None, init=False, repr=False, compare=False)
    """The last full pattern read (``select``): kept across this erasure's ``DELETE`` (dropped
    by ``forget_reads``), so the verification's read searches only the rows written since."""

    def forget_reads(self) -> None:
        """The next ``select`` reads the server again, every row searched for the patterns."""
        self._read, self._basis = None, None

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
        (through the server's index on ``payload->>'user_id'`` when the deployment has one and no
        pattern is asked), whose id is in ``ids`` (the primary key), or whose payload's JSON text
        holds one of ``patterns`` (one pass over the table on the server, its parallel workers
        sharing it: one condition per row, ``LIKE ANY``); one read-only transaction. A superset of
        the rows the scan's match rule selects."""
        from psycopg import sql

        if not every and not ids and patterns and (hit := self._reread(user, patterns)) is not None:
            return hit
        import psycopg

        conds = ["payload->>'user_id' = %(u)s"] if user is not None else []
        conds += ["id = ANY(%(ids)s::uuid[])"] if ids else []
        search = "payload::text LIKE ANY(%(l)s::text[])"
        with self.connect(read_only=True) as con:
            con.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ  # the rows and the snapshot: one view
            args: dict[str, Any] = {"u": user, "ids": list(ids), "l": like_any(patterns)}
            since = self._since(con, user, patterns) if patterns and not every else None
            if since is not None:  # the rows written since the basis read, and that read's rows by id
                conds += ["id = ANY(%(was)s::uuid[])",
                          "(%(base)s + xmin::text::bigint >= %(horizon)s AND " + search + ")"]
                args |= since
            elif patterns:
                conds.append(search)
            if not every and not conds:
                return {t: [] for t in self.tables}
            q = "SELECT id::text, payload, vector::text FROM {t}"
            q += "" if every else " WHERE " + " OR ".join(conds)
            snap = str(con.execute("SELECT pg_current_snapshot()::text").fetchone()[0])
            out: dict[str, list[tuple[str, dict[str, Any], str]]] = {}
            for t in self.tables:
                args["was"] = since["was"].get(t, []) if since is not None else []
                cur = con.execute(sql.SQL(q + " ORDER BY id").format(t=sql.Identifier(t)), args)
                out[t] = [(str(i), dict(p or {}), str(v)) for i, p, v in cur.fetchall()]
            con.rollback()
        if not every and not ids and patterns:
            self._read = ((user, frozenset(patterns)), out)
            if since is None:
                self._basis = Basis(user, frozenset(patterns), snap, {t: [r[0] for r in rows] for t, rows in out.items()})
        return out

    def _since(self, con: Any, user: str | None, patterns: Sequence[str]) -> dict[str, Any] | None:
        """The arguments that narrow the pattern search to the rows written since the basis
        read (``Basis``), or None (no basis for this user and these patterns, or the server's
        transaction ids have wrapped into another epoch since: every row is searched)."""
        b = self._basis
        if b is None or b.user != user or not set(patterns) <= b.patterns:
            return None
        horizon = int(b.snapshot.split(":")[0])
        now = int(con.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetchone()[0])
        if now >> 32 != horizon >> 32:
            return None
        return {"base": horizon >> 32 << 32, "horizon": horizon, "was": b.ids}

    def _reread(self, user: str | None, patterns: Sequence[str]) -> dict[str, list[Row]] | None:
        """The rows of the last read that this one selects (the same user, patterns among the
        last read's), or None: every row the server would select here was in it (a row of the
        user, or one whose payload's JSON text holds a pattern, as ``LIKE`` on the server
        finds it)."""
        if self._read is None or self._read[0][0] != user or not set(patterns) <= self._read[0][1]:
            return None

        def keep(payload: dict[str, Any]) -> bool:
            text = json.dumps(payload, ensure_ascii=False)  # jsonb's text: the same escapes
            return (user is not None and payload.get("user_id") == user) or any(p in text for p in patterns)
        return {t: [r for r in rows if keep(r[1])] for t, rows in self._read[1].items()}

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

    def tally(self, user: str | None, skip: Collection[str] = (), *,
              within: str | None = None) -> tuple[dict[str, Tally], str]:
        """Per table, the rows that are not ``user``'s and not in ``skip`` (the plan's targets),
        counted on the server with the sum of their ids' 64-bit hashes (``hashtextextended``):
        the bystander digest in one row per table (``OnlineTally``). Every row's id is hashed
        (a pass over the table on the server); nothing else of the rows is read. ``within``: only
        the rows a snapshot (``pg_current_snapshot()`` as text) saw, by their ``xmin`` (a re-run
        after a crash counts what the interrupted run's first count saw; the application's later
        rows are its own). Returns the counts and the snapshot they were taken in (one
        ``REPEATABLE READ`` transaction)."""
        import psycopg
        from psycopg import sql

        agg = "SELECT count(*), coalesce(sum(hashtextextended(id::text, 0)), 0)::text FROM {} "
        mine = "WHERE payload->>'user_id' IS DISTINCT FROM %(u)s"
        args: dict[str, Any] = {"u": user, "ids": sorted(skip)}
        if within is not None:
            cond, more = in_snapshot(within)
            mine += cond
            args.update(more)
        out: dict[str, Tally] = {}
        with self.connect(read_only=True) as con:
            con.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ  # the counts and the snapshot: one view
            snap = str(con.execute("SELECT pg_current_snapshot()::text").fetchone()[0])
            for t in self.tables:
                n, h = con.execute(sql.SQL(agg + mine).format(sql.Identifier(t)), args).fetchone()
                sn, sh = con.execute(sql.SQL(agg + mine + " AND id = ANY(%(ids)s::uuid[])").format(
                    sql.Identifier(t)), args).fetchone() if skip else (0, "0")
                out[t] = (int(n) - int(sn), int(h) - int(sh))
            con.rollback()
        return out, snap

    def held(self, hashes: Sequence[str]) -> set[str]:
        """Which of ``hashes`` (mem0's ``hash``: the md5 of a memory's text) a row of the
        collection still holds (one read-only pass over the table's ``payload->>'hash'``)."""
        if not hashes:
            return set()
        from psycopg import sql

        with self.connect(read_only=True) as con:
            found = {str(r[0]) for r in con.execute(sql.SQL(
                "SELECT DISTINCT payload->>'hash' FROM {} WHERE payload->>'hash' = ANY(%s)").format(
                sql.Identifier(self.collection)), (list(hashes),))}
            con.rollback()
        return found

    def delete_rows(self, ids: dict[str, set[str]]) -> dict[str, list[tuple[str, str | None, int]]]:
        """Per table, the rows with one of ``ids`` (the primary key: ``uuid``), in one
        transaction (every table or none); what each ``DELETE … RETURNING`` returned: id, owner,
        the id's hash (``tally``'s), so the erasure knows exactly what it removed and whose."""
        from psycopg import sql

        self._read = None
        out: dict[str, list[tuple[str, str | None, int]]] = {}
        with self.connect(read_only=False) as con, con.transaction():
            for t, vals in ids.items():
                if vals and t in self.tables:
                    out[t] = [(str(i), None if u is None else str(u), int(h)) for i, u, h in con.execute(sql.SQL(
                        "DELETE FROM {} WHERE id = ANY(%s::uuid[]) RETURNING id::text, payload->>'user_id', "
                        "hashtextextended(id::text, 0)").format(sql.Identifier(t)), (sorted(vals),))]
        return out


@dataclass(frozen=True)
class Basis:
    """A read that searched every row of the collection's tables for ``patterns`` (``select``),
    in one ``REPEATABLE READ`` snapshot. A row that is live later either was in that snapshot,
    unchanged (PostgreSQL writes a new row version, with a new ``xmin``, on every change; only
    a transaction older than the snapshot's ``xmin`` horizon had completed for certain, a
    subtransaction's id included), so it holds a pattern only if that read returned it
    (``ids``, re-read by primary key), or it was written by a transaction at or past the
    horizon: only those rows need the search again. A verification read after this
    erasure's ``DELETE`` then searches what the application wrote meanwhile, not the table."""

    user: str | None
    patterns: frozenset[str]
    snapshot: str
    """``pg_current_snapshot()`` of that read (``xmin:xmax:xip``)."""
    ids: dict[str, list[str]]
    """Per table, the ids of every row that read returned (the user's and those holding a pattern)."""


NEIGHBOURS = 32
"""The history rows whose content the bystander digest reads: those within this many rowids of a
row the erasure may delete (its B-tree page and the pages beside it, for rows under about 128
bytes; every other bystander row is counted, not read)."""


@dataclass(frozen=True)
class HistoryMark:
    """What the history table's first bystander digest covers: the rows up to its last
    bystander row (``row``, ``id``; the application's later rows are its own), less the rows
    the erasure may delete (``targets``: the user's memories' rows and the plan's, by rowid)."""

    row: int
    id: str
    targets: tuple[int, ...]

    def text(self) -> str:
        """The mark as the journalled digest carries it (``parse`` reads it back)."""
        return f"{self.row}:{','.join(map(str, self.targets))}:{self.id}"

    @classmethod
    def parse(cls, text: str) -> HistoryMark | None:
        row, _, rest = text.partition(":")
        targets, _, rid = rest.partition(":")
        return cls(int(row), rid, tuple(int(t) for t in targets.split(",") if t)) if int(row or 0) else None

    def neighbours(self) -> list[tuple[int, int]]:
        """The merged rowid ranges within ``NEIGHBOURS`` of a target, up to ``row``."""
        out: list[tuple[int, int]] = []
        for t in self.targets:
            lo, hi = max(1, t - NEIGHBOURS), min(self.row, t + NEIGHBOURS)
            if out and lo <= out[-1][1] + 1:
                out[-1] = (out[-1][0], max(out[-1][1], hi))
            elif lo <= hi:
                out.append((lo, hi))
        return out


def history_tally(path: Path, mark: HistoryMark) -> Tally:
    """The history table's bystanders under ``mark``: (the rows up to its row but its targets,
    counted by SQLite; the sum of the CRC-32 of each neighbour row's values' ``repr``, a function
    registered on the read-only connection). An erasure only deletes there, by id: a removed
    bystander row lowers the count, a changed value of a row beside an erased one changes the
    sum (but for a 2^-32 chance). A change of a row's values away from every erased row is not
    read (``NEIGHBOURS``): at 10^6 rows reading every row took 4.5 s, this takes well under one."""
    def crc(*values: object) -> int:
        return zlib.crc32(repr(values).encode())

    cols = ", ".join("h." + c for c in _HISTORY_COLUMNS.removeprefix("SELECT ").removesuffix(" FROM history").split(", "))
    targets = json.dumps(list(mark.targets))
    with closing(_ro(path)) as con:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'history'").fetchone():
            return 0, 0
        con.create_function("tl_row_crc", -1, crc, deterministic=True)
        n = con.execute("SELECT count(*) FROM history WHERE rowid <= ?", (mark.row,)).fetchone()[0]
        left = con.execute("SELECT count(*) FROM history WHERE rowid IN (SELECT value FROM json_each(?)) "
                           "AND rowid <= ?", (targets, mark.row)).fetchone()[0]
        h = con.execute(f"SELECT coalesce(sum(tl_row_crc({cols})), 0) FROM json_each(?) r JOIN history h "  # noqa: S608
                        "ON h.rowid BETWEEN json_extract(r.value, '$[0]') AND json_extract(r.value, '$[1]') "
                        "WHERE h.rowid NOT IN (SELECT value FROM json_each(?))",
                        (json.dumps(mark.neighbours()), targets)).fetchone()[0]
    return int(n) - int(left), int(h)


def history_mark(path: Path, skip_memories: Collection[str], skip_ids: Collection[str]) -> HistoryMark | None:
    """The last history row (largest rowid) that is a bystander (not one of ``skip_memories``'
    rows, not in ``skip_ids``): no erasure may remove it, and while it is there with its id
    SQLite gives every new row a larger rowid (``history_kept``); with the rowids of the rows
    before it that the erasure may delete. None: no such row."""
    with closing(_ro(path)) as con:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'history'").fetchone():
            return None
        skip = (json.dumps(sorted(skip_memories)), json.dumps(sorted(skip_ids)))
        row = con.execute("SELECT rowid, id FROM history WHERE coalesce(memory_id, '') NOT IN (SELECT value FROM "
                          "json_each(?)) AND id NOT IN (SELECT value FROM json_each(?)) ORDER BY rowid DESC LIMIT 1",
                          skip).fetchone()
        if row is None:
            return None
        targets = con.execute("SELECT rowid FROM history WHERE memory_id IN (SELECT value FROM json_each(?)) UNION "
                              "SELECT rowid FROM history WHERE id IN (SELECT value FROM json_each(?))", skip)
        return HistoryMark(int(row[0]), str(row[1]), tuple(sorted(int(r[0]) for r in targets if r[0] <= row[0])))


def history_kept(path: Path, mark: HistoryMark) -> bool:
    """The marked row still holds its id: no rowid at or below it was given out since."""
    with closing(_ro(path)) as con:
        row = con.execute("SELECT id FROM history WHERE rowid = ?", (mark.row,)).fetchone()
    return row is not None and str(row[0]) == mark.id


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
    online: OnlineTally = field(default_factory=OnlineTally)
    """The online bystander rule of the server's tables (the first count, this erasure's DELETE)."""
    _hist_marked: bool = False
    """This erasure's first history digest has set ``_hist_mark`` (``_history_bystanders``)."""
    _hist_mark: HistoryMark | None = None
    """What the history table's digests cover (``history_mark``), set by this erasure's first digest."""
    _snap: str | None = None
    """The snapshot the first count of the server's tables was taken in (``PgCollection.tally``)."""
    _resumed: bool = False
    """A re-run after a crash: the marks are the interrupted run's (``resume``)."""
    _literals: list[str] = field(default_factory=list)
    """The last plan's literals."""

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

    def _store(self, table: str) -> str:
        return "vector_store" if table == self._coll().collection else "entity_store"

    def _server_tally(self, user: str | None, within: str | None = None) -> dict[str, Tally]:
        """The other users' rows of the server's tables per store, less what the last plan
        targets, counted on the server (``PgCollection.tally``; ``within``: the rows that
        snapshot saw). The first count keeps its snapshot (``_snap``)."""
        skip = {i for s, i in self.targets if s in _SERVER_STORES}
        counts, snap = self._coll().tally(user, skip, within=within)
        if self._snap is None:
            self._snap = snap
        return {self._store(t): v for t, v in counts.items()}

    def bystanders(self, user: str | None) -> dict[str, StoreDigest]:
        """As the local back ends', but digested where the rows are, in one row per table: the
        history table by SQLite (``history_tally``: its rows but the user's memories' and the
        plan's targets), the server's tables by the server (``PgCollection.tally``). The
        server's tables are shared with a running application: their bystanders are the other
        users' rows of the first count, less the rows this erasure's ``DELETE`` returned that it
        held (``OnlineTally``); an over-deletion lowers the count. Each tally carries the mark
        of the rows it covers (the first count's snapshot, the history's last bystander row): a
        re-run after a crash counts those rows again (``resume``)."""
        per: dict[str, StoreDigest] = {s: digest([]) for s in self.store_names()}
        mine = {r.id for r in self._as_recs(self._coll().select(user, ())) if r.store == "vector_store"}
        hist = self._history_bystanders(mine)
        per["history"] = tally_digest(hist, "history:" + (self._hist_mark.text() if self._hist_mark else "0::"))
        msgs = [self._row_digest(store, raw) for store, rid, whose, raw in self._messages_rows()
                if not (user is not None and whose == user) and (store, rid) not in self.targets]
        per["messages"] = digest(msgs)
        tallies = self.online.tallies(lambda: self._server_tally(user, self._snap if self._resumed else None))
        for store, t in tallies.items():
            per[store] = tally_digest(t, f"snapshot:{self._snap}")
        return per

    def resume(self, before: dict[str, StoreDigest]) -> None:
        """A re-run after a crash: the interrupted run's marks, read back from its journalled
        digests, so the bystanders are the rows its first count covered (the application's rows
        written since are its own, not an over-deletion)."""
        for entry in (e for v in before.values() for e in v if e.startswith(MARK)):
            kind, _, mark = entry.removeprefix(MARK).partition(":")
            if kind == "snapshot":
                self._snap = mark
            elif kind == "history":
                self._hist_mark = HistoryMark.parse(mark)
            self._resumed = True

    def _history_bystanders(self, mine: Collection[str]) -> Tally:
        """The history table's bystanders (``history_tally``): the first digest of this erasure
        marks the last bystander row and the rows the erasure may delete (``history_mark``); every
        digest counts the rows up to the mark but those and reads the rows beside them (the
        application's later rows are its own). Where the marked row is gone (a rowid may have
        been given out again) the digest cannot equal the first. A re-run after a crash digests
        under the interrupted run's mark."""
        path = self.layout.history
        if not self._resumed and (not self._hist_marked or not self.online.deleted):
            skip = {i for s, i in self.targets if s == "history"}
            self._hist_mark = history_mark(path, mine, skip)
            self._hist_marked = True
        mark = self._hist_mark
        if mark is None:
            return 0, 0
        n, h = history_tally(path, mark)
        return (n, h) if history_kept(path, mark) else (n, -1)

    def _messages_rows(self) -> list[tuple[str, str, str | None, tuple[object, ...]]]:
        """The history db's ``messages`` rows as ``history_rows`` gives them (a small table,
        read alone: the history table is digested by SQLite)."""
        with closing(_ro(self.layout.history)) as con:
            if not con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'messages'").fetchone():
                return []
            return [("messages", str(r[0]), _scope_user(str(r[1] or "")), tuple(r)) for r in con.execute(_MESSAGES_COLUMNS)]

    def plan(self, user: str | None, literals: Sequence[str]) -> ErasurePlan:
        self.online.reset()  # a new erasure: its own first digest
        self._hist_marked, self._hist_mark, self._snap, self._resumed = False, None, None, False
        self._literals = list(literals)
        self._coll().forget_reads()
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
        self._delete_history(ids, set(ids.get("vector_store", set())))
        gone = pg.delete_rows({pg.collection: ids.get("vector_store", set()),
                               f"{pg.collection}_entities": ids.get("entity_store", set())})
        # a text another user's memory holds too stays in the files (and its count would tell how many hold
        # it); a text holding a literal is the user's alone (the scope check refused or rewrote the others')
        forms = [f for lit in self._literals for f in literal_forms(lit)]
        common = {r.texts.get("hash", "") for r in erased if not any(f in r.texts.get("data", "") for f in forms)}
        shared = pg.held(sorted(common - {""}))
        needles = sorted({r.texts[k] for r in erased if r.texts.get("hash") not in shared for k in _TEXT_KEYS
                          if len(r.texts.get(k, "")) >= 8})
        for t, rows in gone.items():
            store = self._store(t)
            for rid, owner, key_hash in rows:  # held by the first count: another user's row, not a target
                held = owner != plan.user and (store, rid) not in self.targets
                self.online.removed(store, held, key_hash, rid in ids.get(store, set()))
        notes = physical_step(pg, needles, self.replicas)
        notes.append(self.online.note(self._server_tally(plan.user)))
        _vacuum(self.layout.history)
        removed = {s: len(v) for s, v in ids.items()}
        return [StoreOutcome(store=s, removed=removed.get(s, 0), compacted=True,
                             notes=notes if s == "vector_store" else []) for s in self.store_names()]

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
