"""Scan and erase of a live instance kept in one SQLite file (Agno's ``SqliteDb``, the OpenAI
Agents SDK's ``SQLiteSession``): every table, read through a ``mode=ro`` URI, each row
attributed to a user by the adapter's ``owner_of``. The adapters call their package's own
deletions first and this module for what those leave (rows of the user still there, other
rows quoting a literal), then ``VACUUM`` where a deletion left bytes (``compact``).
"""

from __future__ import annotations

import abc
import hashlib
import itertools
import json
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ahocorasick_rs import MATCHKIND_LEFTMOST_FIRST, BytesAhoCorasick

from traceless.errors import ConfigError
from traceless.systems import kernel
from traceless.systems._base import MemorySystem, SystemConfig, SystemRuntime
from traceless.systems._erase import ErasurePlan, ScanReport, StoreOutcome
from traceless.systems.contract import LiveInstance, Op, Record, Remove
from traceless.systems.kernel import ERASED, replace_literals

if TYPE_CHECKING:
    from traceless.systems._pg_tables import PgTables

__all__ = ["ERASED", "OwnerOf", "primary_key", "table_list", "OwnerSql", "Row", "SqliteFile", "SqliteInstance", "bystander_digests", "erase_residue",
           "id_prefix", "literal_sql", "live_db", "narrowable", "plan", "ro_connect", "row_digest_sql", "rows", "scan",
           "user_column"]

OwnerOf = Callable[[str, dict[str, Any]], str | None]
"""(table, row as column → value) → the user the row belongs to (None: no user)."""
OwnerSql = Callable[[str, Sequence[str], str], tuple[str, list[Any]]]
"""(table, its columns, user) → an SQL condition and its parameters, true for at least every
row ``OwnerOf`` gives to the user (the narrowed read's filter: ``OwnerOf`` still decides)."""


@dataclass(frozen=True)
class _ColumnOwner:
    """An ``OwnerSql`` whose rows are attributed by one column's value (``column``): the user id
    itself, or (with ``sep``) the user id or a value starting with it and ``sep``. The column
    also names the rows' containers for the scoped bystander digests (``SqliteFile.scoped_digests``)."""

    column: str
    sep: str | None = None

    def __call__(self, table: str, cols: Sequence[str], user: str) -> tuple[str, list[Any]]:
        if self.column not in cols:
            return "0", []
        if self.sep is None:
            return f'"{self.column}" = ?', [user]
        return (f'("{self.column}" = ? OR substr("{self.column}", 1, ?) = ?)',
                [user, len(user) + len(self.sep), user + self.sep])


def user_column(column: str) -> OwnerSql:
    """The owner filter of a table whose ``column`` holds the user id (no such column: no row)."""
    return _ColumnOwner(column)


def id_prefix(column: str, sep: str) -> OwnerSql:
    """The owner filter of a table whose ``column`` is the user id or starts with it and ``sep``."""
    return _ColumnOwner(column, sep)


SCOPE = "#scope:"
"""A scoped digest's entry naming its containers (the owner values, JSON)."""
REST = "#rest:"
"""A scoped digest's entry counting the rows outside its containers: ``#rest:MAXROWID:COUNT``."""


@dataclass
class Scope:
    """The containers a scoped bystander digest reads row by row (``owners``: the owner column's
    values start with one of them, None: the column is NULL) and, per table, the highest rowid
    of the rows outside them when the first digest counted them (None: WITHOUT ROWID)."""

    owners: list[str | None]
    marks: dict[str, int | None]

    def sql(self, column: str) -> tuple[str, list[Any]]:
        """The condition selecting the containers' rows (NULL for some rows: use ``coalesce``)."""
        conds, args = [], []
        for o in self.owners:
            if o is None:
                conds.append(f'"{column}" IS NULL')
            else:
                conds.append(f'substr(CAST("{column}" AS TEXT), 1, ?) = ?')
                args += [len(o), o]
        return "(" + (" OR ".join(conds) or "0") + ")", args


@dataclass(frozen=True)
class Row:
    """One row of one table."""

    table: str
    rowid: int
    record_id: str
    values: dict[str, Any]

    def text(self) -> str:
        return "\t".join("" if v is None else (v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v))
                         for v in self.values.values())


def live_db(path: str | None, what: str) -> Path:
    """The live database file of a config, refused (before anything opens) when absent."""
    if not path:
        raise ConfigError(f"{what}: give the live instance's database file in the memory config (`db_file`)")
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{what}: {p} does not exist; give the path of the instance's SQLite file")
    return p


def table_texts(db: Path, table: str) -> list[str]:
    """Every row of ``table`` in the SQLite file ``db`` (``ro_connect``: no byte of it changed),
    its values tab-joined, NULL as empty; [] when the table does not exist."""
    con = ro_connect(db)
    try:
        rows = con.execute(f"SELECT * FROM {table}").fetchall()  # noqa: S608 - the adapters' fixed names
    except sqlite3.OperationalError:
        rows = []
    finally:
        con.close()
    return ["\t".join("" if v is None else str(v) for v in r) for r in rows]


def _connect(path: Path, read_only: bool) -> sqlite3.Connection:
    if read_only:
        return ro_connect(path)
    return sqlite3.connect(str(path))


def ro_connect(path: Path) -> sqlite3.Connection:
    """A connection that changes no byte of the instance. Even a ``mode=ro`` reader of a WAL
    database creates its ``-wal`` and ``-shm`` files (measured on Agno's and the Agents SDK's
    files, and on mem0's), so: no ``-wal`` file (everything is in the main file) →
    ``immutable=1``; a ``-wal`` file (a writer has it open, its committed frames not yet
    checkpointed) → the reader opens a private copy of the file and its WAL (copied again when
    a writer changed either meanwhile; the WAL gone meanwhile: checkpointed, the file is read)."""
    wal = path.with_name(path.name + "-wal")
    for attempt in range(_COPY_TRIES):
        if not wal.exists():
            return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        con = _private_copy(path, wal, last=attempt == _COPY_TRIES - 1)
        if con is not None:
            return con
    raise AssertionError("unreachable: the last attempt always returns")


_COPY_TRIES = 5


def _private_copy(path: Path, wal: Path, *, last: bool) -> sqlite3.Connection | None:
    """A connection to a copy of ``path`` and ``wal`` in a temporary folder (removed on close);
    None when a writer changed either while they were copied (unless ``last``)."""
    tmp = Path(tempfile.mkdtemp(prefix="traceless-ro-"))
    try:
        stamp = _stamp(path, wal)
        shutil.copyfile(path, tmp / path.name)
        shutil.copyfile(wal, tmp / wal.name)
        if _stamp(path, wal) != stamp and not last:
            shutil.rmtree(tmp, ignore_errors=True)
            return None
    except FileNotFoundError:  # the WAL checkpointed and removed meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
        if last:
            raise
        return None
    con = sqlite3.connect(str(tmp / path.name), factory=_PrivateCopy)
    con.tmp = tmp
    return con


def file_version(path: Path) -> tuple[Any, ...]:
    """What changes with every commit to the SQLite file ``path``: size and mtime of the file and
    its ``-wal``, the file's header (its change counter) and the WAL's (its salts change when it
    restarts; each commit in WAL mode appends frames: the size grows)."""
    wal = path.with_name(path.name + "-wal")
    heads = []
    for p, n in ((path, 100), (wal, 32)):
        try:
            with open(p, "rb") as f:
                heads.append(f.read(n))
        except OSError:
            heads.append(b"")
    return (_stamp(path, wal), *heads)


def _stamp(*paths: Path) -> tuple[tuple[int, int], ...]:
    out = []
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            out.append((-1, -1))
            continue
        out.append((st.st_size, st.st_mtime_ns))
    return tuple(out)


class _PrivateCopy(sqlite3.Connection):
    """A connection to a private copy, removed when the connection is closed."""

    tmp: Path | None = None

    def close(self) -> None:
        super().close()
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)


def _pk(con: sqlite3.Connection, table: str) -> str | None:
    cols = [(r[1], r[5]) for r in con.execute(f'PRAGMA table_info("{table}")')]
    keys = [c for c, pk in cols if pk]
    return keys[0] if len(keys) == 1 else None


def _tables(con: sqlite3.Connection) -> list[tuple[str, bool]]:
    """(name, WITHOUT ROWID) of every real table (a virtual table's rows live in real ones)."""
    return [(r[0], "WITHOUT ROWID" in r[1].upper()) for r in con.execute(
        "SELECT name, sql FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
        "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name")]


def tables(path: Path) -> list[str]:
    """Every table's name, as ``rows`` lists them, without reading a row (read-only)."""
    con = _connect(path, True)
    try:
        return [t for t, _ in _tables(con)]
    finally:
        con.close()


def rows(path: Path) -> dict[str, list[Row]]:
    """Every row of every table (read-only)."""
    con = _connect(path, True)
    try:
        out: dict[str, list[Row]] = {}
        for t, no_rowid in _tables(con):  # a WITHOUT ROWID table (FTS5's index) gets rowid -1: read, never edited
            cur = con.execute(f'SELECT {"-1" if no_rowid else "rowid"}, * FROM "{t}"')  # noqa: S608
            cols = [d[0] for d in cur.description][1:]
            pk = _pk(con, t)
            out[t] = [Row(t, int(r[0]), str(r[1 + cols.index(pk)]) if pk else str(r[0]),
                          dict(zip(cols, r[1:], strict=True))) for r in cur.fetchall()]
        return out
    finally:
        con.close()


def _text(v: Any) -> str:
    return "" if v is None else (v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v))


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


_FLOAT_CHARS = frozenset("0123456789.eE+-infatyINFATY")


def narrowable(literals: Sequence[str]) -> bool:
    """Whether SQLite can select the rows holding ``literals`` by their bytes as the one match
    rule would find them in the rows' text: not for a literal holding U+FFFD (the text of an
    invalid UTF-8 blob holds one where its bytes do not) or NUL."""
    return not any("\ufffd" in lit or "\0" in lit for lit in literals)


INSTR_CALLS_MAX = 16
"""Up to this many ``instr`` calls a row (columns × forms), ``holds_sql`` uses them; past it,
one call of a registered function. SQLite's ``instr`` is C, the function a Python call a row
(~2 µs): 300,000 rows, 2 columns × 2 forms: instr 0.17 s, function 0.81 s; 2 × 8: 0.47 against
0.68 s; 2 × 12 and 4 × 6: even; 7 × 16: 2.73 against 0.71 s."""


def holds_sql(con: sqlite3.Connection | None, cols: Sequence[str], forms: Sequence[bytes],
              alias: str | None = None) -> tuple[str, list[Any]]:
    """An SQL condition true for a row one of whose ``cols`` (each as a BLOB: a number as its
    text) holds one of ``forms``. An ``instr`` call per column and form where they are few
    (``INSTR_CALLS_MAX``) or there is no ``con``; else one call per row of a function
    registered on ``con``, every column searched for every form at once (Aho–Corasick, as the
    byte scan), the columns joined into one argument when no form holds a NUL (half the call's
    cost: 0.75 against 1.46 s for 200,000 rows of 7 columns)."""
    forms = list(dict.fromkeys(f for f in forms if f))
    if not forms:
        return "0", []
    col = [f'CAST({alias + "." if alias else ""}"{c}" AS BLOB)' for c in cols]
    if con is None or len(col) * len(forms) <= INSTR_CALLS_MAX:
        return " OR ".join(f"instr({c}, ?) > 0" for c in col for _ in forms), [f for _ in col for f in forms]
    if any(b"\0" in f for f in forms) or not col:
        return f"{_holds_function(con, tuple(forms))}({', '.join(col)})", []
    # no form holds a NUL, so none matches across the NUL between two columns: one argument a row
    joined = " || x'00' || ".join(f"coalesce({c}, x'')" for c in col)
    return f"{_holds_function(con, tuple(forms), joined=True)}(CAST({joined} AS BLOB))", []


_HOLDS = itertools.count()


def _holds_function(con: sqlite3.Connection, forms: tuple[bytes, ...], *, joined: bool = False) -> str:
    """The name of a function registered on ``con`` (a read-only connection too: nothing is
    written) that is 1 when one of its arguments holds one of ``forms``; ``joined``: of one
    argument, a BLOB never NULL (the row's columns joined: a third of the call's cost)."""
    find = BytesAhoCorasick(list(forms), matchkind=MATCHKIND_LEFTMOST_FIRST).find_matches_as_indexes

    def holds(*values: Any) -> int:
        return int(any(find(v) for v in values if isinstance(v, bytes)))

    def holds_joined(value: bytes) -> int:
        return 1 if find(value) else 0

    name = f"traceless_holds_{next(_HOLDS)}"  # a name of its own: a connection may hold several
    if joined:
        con.create_function(name, 1, holds_joined, deterministic=True)
    else:
        con.create_function(name, -1, holds, deterministic=True)
    return name


def literal_sql(cols: Sequence[str], literals: Sequence[str],
                con: sqlite3.Connection | None = None) -> tuple[str, list[Any]]:
    """An SQL condition true for every row whose text (``_text`` of each column) holds a form of
    a literal (``kernel.count_literals``): one of its text forms (``kernel.literal_forms``) in
    UTF-8 in a column's bytes (``holds_sql``: a number as its text; a UTF-16 copy decodes to no
    form of it), and, for a literal a float's text could hold, every row with a REAL that Python
    may print otherwise than SQLite (``_REAL_DIFFERS``). Given the connection the condition runs
    on, one function call a row searches every column for every form where ``instr`` calls
    would be many (``holds_sql``)."""
    forms = [f.encode("utf-8") for lit in literals for f in kernel.literal_forms(lit)]
    if not forms:
        return "0", []
    hold, args = holds_sql(con, cols, forms)
    if any(set(lit) <= _FLOAT_CHARS for lit in literals):
        hold = " OR ".join([hold, *(_REAL_DIFFERS.format(c=c) for c in cols)])
    return hold, args


_REAL_DIFFERS = ("""(typeof("{c}") = 'real' AND ("{c}" = 0 OR instr(CAST("{c}" AS TEXT), 'e') > 0 """
                 """OR instr(CAST("{c}" AS TEXT), 'I') > 0 OR CAST(CAST("{c}" AS TEXT) AS REAL) <> "{c}"))""")
"""A REAL whose text in SQLite (15 digits, exponent from 1e15) may not be Python's (the shortest
round trip, exponent from 1e16): it does not round-trip, has an exponent, is infinite or zero;
any other prints the same digits in both."""


def row_digest_sql(cols: Sequence[str], literals: Sequence[str]) -> tuple[str, list[Any]]:
    """An SQL expression of one row's values as one BLOB (each column's bytes, NUL-separated: a
    REAL printed with 17 digits, exact), every text form of every literal replaced by ``ERASED`` in a
    TEXT value, as ``apply``'s rewrite replaces them: a planned rewrite digests the same before
    (with ``literals``) and after (without)."""
    forms = [f for lit in literals for f in kernel.literal_forms(lit)]
    parts, args = [], []
    for c in cols:
        v = f'"{c}"'
        for f in forms:
            v = f"replace({v}, ?, ?)"
            args += [f, ERASED]
        parts.append(f'ifnull(CASE typeof("{c}") WHEN \'real\' THEN printf(\'%!.17g\', "{c}") '
                     f'WHEN \'text\' THEN {v} ELSE CAST("{c}" AS BLOB) END, x\'\')')
    sep = " || x'00' || "
    return f"CAST({sep.join(parts) or 'NULL'} AS BLOB)", args


class SqliteFile(LiveInstance):
    """One SQLite file as the erasure kernel reads and changes it: a table is a store, a row a
    record (``owner_of`` says whose), a rewrite replaces the literals in its string columns;
    ``apply`` ends with a WAL checkpoint and, where a deletion left bytes, ``VACUUM`` (``compact``)."""

    others_policy = "rewrite"

    def __init__(self, path: Path, owner_of: OwnerOf, owner_sql: OwnerSql | None = None,
                 derived: Callable[[str], bool] = lambda table: False) -> None:
        self.path, self.owner_of, self.owner_sql, self.derived = path, owner_of, owner_sql, derived
        self._scope: Scope | None = None
        """The scoped bystander digests' scope, fixed by the first digest of an erasure (``reset_scope``)."""
        self.compact_later = False
        """``apply`` leaves ``compact`` to its caller (ADK rebuilds its FTS5 index first)."""
        self._cache: tuple[Any, list[Record]] | None = None
        self._counted: tuple[Any, dict[str, int]] | None = None
        """The last narrowed read, keyed by (user, literals, ``file_version``): the plan and the
        scope check, the last round's plan and the re-scan, and the digests after each read the same."""

    def stores(self) -> list[str]:
        counted = self.counts()  # one connection (a private copy while a writer's -wal exists) for both
        if counted is not None:
            return list(counted)
        return tables(self.path) if self.path.exists() else []

    def records(self, user: str | None = None, literals: Sequence[str] = ()) -> Iterator[Record]:
        """With an owner filter (``owner_sql``) and a user or literals, SQLite selects the rows
        (``narrowed``) and only those are decoded; else every row."""
        if not self.path.exists():
            return
        if self.owner_sql is not None and (user is not None or literals) and narrowable(literals):
            key = (user, tuple(literals), file_version(self.path))
            if self._cache is None or self._cache[0] != key:
                self._cache = (key, self._narrowed(user, literals))
            yield from self._cache[1]
            return
        for table, rs in rows(self.path).items():
            for r in rs:
                yield self._record(table, r)

    def _record(self, table: str, r: Row) -> Record:
        return Record(table, r.record_id, self.owner_of(table, r.values),
                      {c: _text(v) for c, v in r.values.items()}, ref=r.rowid)

    def _narrowed(self, user: str | None, literals: Sequence[str]) -> list[Record]:
        """The rows ``owner_sql`` may give to ``user`` and those whose bytes hold a literal's
        byte form (``literal_sql``); a file not in UTF-8: every row."""
        assert self.owner_sql is not None
        con = _connect(self.path, True)
        try:
            if con.execute("PRAGMA encoding").fetchone()[0] != "UTF-8":
                return [self._record(t, r) for t, rs in rows(self.path).items() for r in rs]
            out: list[Record] = []
            for t, no_rowid in _tables(con):
                cols = _columns(con, t)
                mine, args = self.owner_sql(t, cols, user) if user is not None else ("0", [])
                hold, more = literal_sql(cols, literals, con)
                cur = con.execute(f'SELECT {"-1" if no_rowid else "rowid"}, * FROM "{t}" '  # noqa: S608
                                  f"WHERE ({mine}) OR ({hold})", [*args, *more])
                pk = _pk(con, t)
                for r in cur.fetchall():
                    values = dict(zip(cols, r[1:], strict=True))
                    out.append(self._record(t, Row(t, int(r[0]), str(values[pk]) if pk else str(r[0]), values)))
            return out
        finally:
            con.close()

    def counts(self) -> dict[str, int] | None:
        """Rows per table by ``count(*)`` (with an owner filter; else None: the scan counts every row)."""
        if self.owner_sql is None or not self.path.exists():
            return None
        version = file_version(self.path)
        if self._counted is None or self._counted[0] != version:
            con = _connect(self.path, True)
            try:
                self._counted = (version, {t: int(con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0])  # noqa: S608
                                           for t, _ in _tables(con)})
            finally:
                con.close()
        return dict(self._counted[1])

    def server_bystanders(self, user: str | None, literals: Sequence[str],
                          removed: Iterable[tuple[str, str]]) -> list[tuple[tuple[str, str], str]] | None:
        """Every row that is not ``user``'s and not in ``removed``, as the SHA-256 of its values
        as SQLite quotes them (``row_digest_sql``: the literals replaced as a rewrite replaces
        them), read without decoding a row in Python. A row ``owner_sql`` may give to the user
        is read whole and ``owner_of`` decides. Without an owner filter: None (the kernel's)."""
        if self.owner_sql is None or not self.path.exists():
            return None
        skip = set(removed)
        held: dict[str, list[int]] = {}  # the rows that may hold a literal: digested with it replaced
        for r in self.records(user, literals) if literals else ():
            if isinstance(r.ref, int) and r.ref >= 0:
                held.setdefault(r.store, []).append(r.ref)
        con = _connect(self.path, True)
        try:
            out: list[tuple[tuple[str, str], str]] = []
            for t, no_rowid in _tables(con):
                out += self._table_digests(con, t, no_rowid, user, literals, skip, held.get(t, []))
            return out
        finally:
            con.close()

    def _table_digests(self, con: sqlite3.Connection, t: str, no_rowid: bool, user: str | None,
                       literals: Sequence[str], skip: set[tuple[str, str]], held: list[int],
                       scope: tuple[str, list[Any]] | None = None) -> list[tuple[tuple[str, str], str]]:
        """The table's bystanders (with ``scope``: those its SQL condition selects, each digested
        with the literals replaced); a row in ``held`` (or any row of a WITHOUT ROWID table) is
        digested with the literals replaced, every other one as it is (it holds none)."""
        assert self.owner_sql is not None
        cols = _columns(con, t)
        pk = _pk(con, t)
        mine, args = self.owner_sql(t, cols, user) if user is not None else ("0", [])
        text, targs = row_digest_sql(cols, ())
        if literals and (held or no_rowid or scope is not None):
            rep, rargs = row_digest_sql(cols, literals)
            text, targs = (rep, rargs) if no_rowid or scope is not None else (
                f"CASE WHEN rowid IN (SELECT value FROM json_each(?)) THEN {rep} ELSE {text} END", [json.dumps(held), *rargs])
        rid = f'"{pk}"' if pk else ("-1" if no_rowid else "rowid")
        every = ", *" if no_rowid else ""  # no rowid to read a row again by: its values come along
        where, wargs = scope if scope is not None else ("1", [])
        cur = con.execute(f'SELECT {rid}, {"-1" if no_rowid else "rowid"}, ({mine}), {text}{every} '  # noqa: S608
                          f'FROM "{t}" WHERE {where}', [*args, *targs, *wargs])
        out = []
        sha = hashlib.sha256
        for r in cur:
            if r[2] and user is not None and self._owner(con, t, cols, r) == user:
                continue
            key = (t, str(r[0]))
            if key not in skip:
                out.append((key, sha(r[3]).hexdigest()))
        return out

    def reset_scope(self) -> None:
        """A new erasure: its first scoped digest fixes the scope again."""
        self._scope = None

    def resume_scope(self, before: Mapping[str, kernel.StoreDigest]) -> None:
        """The scope an interrupted erasure journalled with its digests (``SCOPE``/``REST`` entries)."""
        owners: list[str | None] | None = None
        marks: dict[str, int | None] = {}
        for table, entries in before.items():
            for e in entries:
                if e.startswith(SCOPE):
                    owners = json.loads(e[len(SCOPE):])
                elif e.startswith(REST):
                    mark = e[len(REST):].split(":", 1)[0]
                    marks[table] = None if mark == "-" else int(mark)
        if owners is not None:
            self._scope = Scope(owners, marks)

    def scoped_digests(self, user: str | None, literals: Sequence[str],
                       removed: Iterable[tuple[str, str]]) -> dict[str, kernel.StoreDigest] | None:
        """Per table, the bystander digest of the rows sharing a container with what the erasure
        touches, and a count of all the others; None without a column owner filter (``user_column``,
        ``id_prefix``): the full ``server_bystanders``.

        The containers are the values of the owner column starting with the user id or with the
        owner of a row holding a literal (its rewrite), and NULL where such a row has none: those
        rows are digested one by one (SHA-256 of their values, the literals replaced), the user's
        own and ``removed`` left out. Every other row is counted by SQL up to the highest rowid
        the first digest saw (``REST``: a row another writer adds later gets a higher one), so a
        row removed anywhere changes the count. The scope itself is an entry (``SCOPE``), so the
        digest after, and a re-run's (``resume_scope``), cover the same rows. A table ``derived``
        says is derived from others (ADK's FTS5 index) is left out."""
        column = getattr(self.owner_sql, "column", None)
        if self.owner_sql is None or not isinstance(column, str) or not self.path.exists():
            return None
        if self._scope is None:
            self._scope = Scope(self._scope_owners(user, literals), {})
        scope, skip = self._scope, set(removed)
        con = _connect(self.path, True)
        try:
            out: dict[str, kernel.StoreDigest] = {}
            for t, no_rowid in _tables(con):
                if not self.derived(t):
                    out[t] = self._scoped_table(con, t, no_rowid, column, scope, user, literals, skip)
            return out
        finally:
            con.close()

    def _scope_owners(self, user: str | None, literals: Sequence[str]) -> list[str | None]:
        """The user and the owner of every row holding a literal (sorted, None last)."""
        owners: set[str | None] = {user} if user is not None else set()
        owners |= {r.owner for r in self.records(user, literals) if literals and kernel.count_literals(r.text(), literals)}
        return sorted((o for o in owners if o is not None), key=str) + ([None] if None in owners else [])

    def _scoped_table(self, con: sqlite3.Connection, t: str, no_rowid: bool, column: str, scope: Scope,
                      user: str | None, literals: Sequence[str], skip: set[tuple[str, str]]) -> kernel.StoreDigest:
        cols = _columns(con, t)
        where, args = scope.sql(column) if column in cols else ("1", [])
        rows = self._table_digests(con, t, no_rowid, user, literals, skip, [], (where, args))
        rest = f'FROM "{t}" WHERE NOT coalesce({where}, 0)'  # noqa: S608 - the file's own table names
        if no_rowid:
            mark, n = None, con.execute(f"SELECT count(*) {rest}", args).fetchone()[0]
        elif t in scope.marks:
            mark = scope.marks[t]
            n = con.execute(f"SELECT count(*) {rest} AND rowid <= ?", [*args, -1 if mark is None else mark]).fetchone()[0]
        else:
            n, mark = con.execute(f"SELECT count(*), ifnull(max(rowid), -1) {rest}", args).fetchone()
            scope.marks[t] = int(mark)
        marks = [f"{REST}{'-' if mark is None else mark}:{n}", SCOPE + json.dumps(scope.owners)]
        return tuple(sorted([*kernel.digest(h for _, h in rows), *marks]))

    def _owner(self, con: sqlite3.Connection, t: str, cols: list[str], r: tuple[Any, ...]) -> str | None:
        values = r[4:] if len(r) > 4 else con.execute(f'SELECT * FROM "{t}" WHERE rowid = ?', (r[1],)).fetchone()  # noqa: S608
        return self.owner_of(t, dict(zip(cols, values, strict=True)))

    def compaction(self) -> list[str]:
        return [f"VACUUM {self.path.name}"]

    def files(self) -> list[Path]:
        return sorted(p for p in self.path.parent.glob(self.path.name + "*") if p.is_file())

    def apply(self, ops: Sequence[Op], literals: Sequence[str]) -> list[StoreOutcome]:
        con = sqlite3.connect(str(self.path))
        con.execute("PRAGMA secure_delete = ON")  # what this connection deletes or rewrites is zeroed
        out: dict[str, StoreOutcome] = {}
        try:
            for op in ops:
                o = out.setdefault(op.record.store, StoreOutcome(store=op.record.store, compacted=True))
                changed = self._apply_one(con, op, literals)
                if isinstance(op, Remove):
                    o.removed += changed
                else:
                    o.rewritten += changed
            con.commit()
            if not self.compact_later:
                note = compact(con, self.files, literals)
                for o in out.values():
                    o.notes = list(dict.fromkeys([*o.notes, note]))
        finally:
            con.close()
        return list(out.values())

    def _apply_one(self, con: sqlite3.Connection, op: Op, literals: Sequence[str]) -> int:
        table = op.record.store
        where, arg = self._locate(con, op.record)
        if where is None:
            return 0  # a WITHOUT ROWID table (FTS5's index): read, never edited
        if isinstance(op, Remove):
            return con.execute(f'DELETE FROM "{table}" WHERE {where}', (arg,)).rowcount  # noqa: S608
        cur = con.execute(f'SELECT * FROM "{table}" WHERE {where}', (arg,))  # noqa: S608
        row = cur.fetchone()
        if row is None:
            return 0
        cols = [d[0] for d in cur.description]
        new = {c: replace_literals(v, literals) for c, v in zip(cols, row, strict=True)}
        sets = ", ".join(f'"{c}" = ?' for c in new)
        con.execute(f'UPDATE "{table}" SET {sets} WHERE {where}', (*new.values(), arg))  # noqa: S608
        return 1

    def _locate(self, con: sqlite3.Connection, rec: Record) -> tuple[str | None, Any]:
        if isinstance(rec.ref, int):
            return ("rowid = ?", rec.ref) if rec.ref >= 0 else (None, None)
        pk = _pk(con, rec.store)
        return (f'"{pk}" = ?', rec.id) if pk else ("rowid = ?", int(rec.id) if rec.id.lstrip("-").isdigit() else -1)


def secure_delete_default() -> bool:
    """Whether this SQLite library zeroes what a connection deletes unless told otherwise
    (compiled with ``SQLITE_SECURE_DELETE``, as Debian's and Ubuntu's are): then the packages'
    own connections, which set no ``secure_delete``, zeroed what their deletions freed too."""
    con = sqlite3.connect(":memory:")
    try:
        return bool(con.execute("PRAGMA secure_delete").fetchone()[0])
    finally:
        con.close()


VACUUMED = "VACUUM rebuilt the file (no freed page keeps a deleted byte)"
ZEROED = ("not VACUUMed: every deletion ran with secure_delete (the deleted rows' bytes were overwritten with "
          "zeros) and the byte scan found no literal in the file or its WAL")


def compact(con: sqlite3.Connection, files: Callable[[], list[Path]], literals: Sequence[str]) -> str:
    """A truncating WAL checkpoint, then ``VACUUM`` unless it is not needed: every deletion
    zeroed the bytes it freed (``secure_delete_default``; this module's own connections set it)
    and, given literals, the byte scan of ``files`` (``traceless.forget.scan_files``) finds none
    of them (a copy an index or the WAL kept). Returns the note saying which."""
    from traceless.forget import scan_files

    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    if secure_delete_default() and not (literals and any(scan_files(files(), literals).values())):
        return ZEROED
    con.execute("VACUUM")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return VACUUMED


def scan(system: str, path: Path, owner_of: OwnerOf, user: str | None, literals: Sequence[str],
         reveal: bool) -> ScanReport:
    """The user's rows and every row holding a literal, per table (the kernel's scan)."""
    return kernel.scan(system, SqliteFile(path, owner_of), user, literals, reveal=reveal)


def plan(system: str, path: Path, owner_of: OwnerOf, user: str | None, literals: Sequence[str]) -> ErasurePlan:
    """Remove the user's rows; rewrite other rows that quote a literal; compact (the kernel's plan)."""
    return kernel.plan(system, SqliteFile(path, owner_of), user, literals)


def erase_residue(path: Path, owner_of: OwnerOf, user: str | None, literals: Sequence[str]) -> list[StoreOutcome]:
    """What the native deletions left: the user's rows deleted, other rows quoting a literal
    rewritten, then ``compact`` (the kernel's plan and execution on the file)."""
    inst = SqliteFile(path, owner_of)
    return kernel.execute(inst, kernel.plan("sqlite", inst, user, literals), literals)


def bystander_digests(path: Path, owner_of: OwnerOf, user: str | None,
                      literals: Sequence[str] = ()) -> dict[str, kernel.StoreDigest]:
    """Per table: count and SHA-256 of the rows of every other user (and of no user), the
    literals replaced (the kernel's digest)."""
    return kernel.bystander_digests(SqliteFile(path, owner_of), user, literals)


class SqliteInstance(MemorySystem):
    """A memory system whose live instance is one SQLite file (``self.path``): scan, plan,
    bystander digests and the files of the byte scan are the same for every such system; a
    subclass says whose each row is (``row_owner``) and runs its package's own deletions
    before ``erase_residue``."""

    path: Path
    """The instance's SQLite file."""
    read_only: bool
    """Attached read-only: the package's own deletions are refused."""
    db_name: ClassVar[str] = ""
    """The file's name in a work dir the audit builds."""

    def __init__(self, work_dir: Path, config: SystemConfig, runtime: SystemRuntime | None,
                 *, db_path: Path | None = None, read_only: bool = False) -> None:
        super().__init__(work_dir, config, runtime)  # type: ignore[arg-type]
        self.path = db_path or work_dir / self.db_name
        self.read_only = read_only

    server: PgTables | None = None
    """The instance's tables on a PostgreSQL server, when the config names one (``server_tables``)."""

    @classmethod
    def attach(cls, config: SystemConfig, runtime: SystemRuntime | None = None, *, read_only: bool) -> MemorySystem:
        """The live instance in the file named by the config's ``db_file`` (refused when
        absent), or on the server its URL names (``server_tables``: reached and checked first)."""
        if not isinstance(config, cls.config_class):
            raise ConfigError(f"{cls.name}: attach takes a {cls.config_class.__name__}, not {type(config).__name__}")
        server = cls.server_tables(config)
        if server is not None:
            self = cls.__new__(cls)
            MemorySystem.__init__(self, Path.cwd(), config, runtime)  # type: ignore[arg-type]
            self.path, self.read_only, self.server = Path(), read_only, server
            self.init_server()
            return self
        path = live_db(getattr(config, "db_file", None), cls.name)
        return cls(path.parent, config, runtime, db_path=path, read_only=read_only)

    @classmethod
    def server_tables(cls, config: SystemConfig) -> PgTables | None:
        """The instance's tables on a PostgreSQL server when ``config`` names one (None: a file)."""
        return None

    def init_server(self) -> None:  # noqa: B027 - optional hook
        """Set what a server-backed instance needs beyond ``MemorySystem.__init__``."""

    @abc.abstractmethod
    def row_owner(self, table: str, row: dict[str, Any]) -> str | None:
        """The user a row of ``table`` belongs to (None: nobody's, e.g. a schema table);
        every SQLite-backed adapter says it for its own tables."""

    def owner_filter(self) -> OwnerSql | None:
        """The SQL filter that selects at least every row ``row_owner`` gives to a user
        (``user_column``, ``id_prefix``): the scan, plan and bystander digests then decode only
        the user's rows and those holding a literal. None (the default): every row is read."""
        return None

    def instance(self) -> LiveInstance:
        """The server's tables, or the file: one ``SqliteFile`` per system (its last read kept)."""
        if self.server is not None:
            return self.server
        have = getattr(self, "_file", None)
        if not isinstance(have, SqliteFile) or have.path != self.path:
            have = self._file = SqliteFile(self.path, self.row_owner, self.owner_filter(), self.derived_table)
        return have

    def derived_table(self, table: str) -> bool:
        """Whether ``table`` only derives from the others (an index the erasure rebuilds): left
        out of the bystander digests. None by default."""
        return False

    def plan_erasure(self, user: str | None, literals: Sequence[str]) -> ErasurePlan:
        """The kernel's plan; a new erasure, whose bystander digests fix their scope again (on
        a server the online bystander rule takes its own first digest, ``PgTables.online``)."""
        inst = self.instance()
        if self.server is not None:
            self.server.online.reset()
        elif isinstance(inst, SqliteFile):
            inst.reset_scope()
        return super().plan_erasure(user, literals)

    def bystander_digests(self, user: str | None) -> dict[str, kernel.StoreDigest]:
        """The file's scoped digests (``SqliteFile.scoped_digests``: the rows sharing a container
        with what the erasure touches one by one, every other row counted), else the kernel's."""
        inst = self.instance()
        if isinstance(inst, SqliteFile):
            literals, removed = self._planned
            scoped = inst.scoped_digests(user, literals, removed)
            if scoped is not None:
                return scoped
        return super().bystander_digests(user)

    def resume_bystanders(self, before: Mapping[str, kernel.StoreDigest]) -> None:
        inst = self.instance()
        if isinstance(inst, SqliteFile):
            inst.resume_scope(before)

    def check_erasable(self) -> None:
        """On a server: the role may DELETE, UPDATE and VACUUM every table, the named replicas
        are standbys (refused before any change)."""
        if self.server is not None and not self.read_only:
            self.server.precheck()

    def execute_erasure(self, plan: ErasurePlan, literals: Sequence[str]) -> list[StoreOutcome]:
        """The package's own deletions (``native_erasure``), then, its connections closed, what
        they left (the kernel), then compaction."""
        if self.read_only:
            raise ConfigError(f"{self.name}: this instance was attached read-only; attach it with read_only=False "
                              "to erase")
        if self.server is None:  # on a server every row goes in one transaction: the package's
            self.native_erasure(plan)  # own deletions would commit one by one
            self.close()
        return kernel.execute(self.instance(), plan, literals)

    def stores(self) -> dict[str, Iterable[str]]:
        """Every table of the file (or the server's tables), as the texts of its rows (none
        before the file exists)."""
        if self.server is not None:
            out: dict[str, list[str]] = {t: [] for t in self.server.stores()}
            for r in self.server.records():
                out[r.store].append(r.text())
            return dict(out)
        if not self.path.exists():
            return {}
        return {t: [r.text() for r in rs] for t, rs in rows(self.path).items()}

    def instance_files(self) -> list[Path]:
        return self.instance().files()

    def out_of_scope(self) -> list[str]:
        out = super().out_of_scope()
        return out + self.server.out_of_scope() if self.server is not None else out


primary_key = _pk
"""The single-column primary key of a table (None: rowid), for an adapter reading one SQLite file."""
table_list = _tables
"""(table name, WITHOUT ROWID?) of every table of an open connection, for an adapter reading one SQLite file."""
