"""Scan and erase of a live instance kept in one SQLite file (Agno's ``SqliteDb``, the OpenAI
Agents SDK's ``SQLiteSession``): every table, read through a ``mode=ro`` URI, each row
attributed to a user by the adapter's ``owner_of``. The adapters call their package's own
deletions first and this module for what those leave (rows of the user still there, other
rows quoting a literal), then ``VACUUM``.
"""

from __future__ import annotations

import abc
import functools
import hashlib
import json
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from traceless.errors import ConfigError
from traceless.systems._base import MemorySystem, SystemConfig, SystemRuntime
from traceless.systems._erase import ErasurePlan, PlannedAction, ScanHit, ScanReport, StoreOutcome

__all__ = ["OwnerOf", "Row", "SqliteInstance", "bystander_digests", "erase_residue", "live_db", "plan", "ro_connect", "rows", "scan"]

OwnerOf = Callable[[str, dict[str, Any]], str | None]
"""(table, row as column → value) → the user the row belongs to (None: no user)."""

ERASED = "[erased]"


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
    """Every row of ``table`` in the SQLite file ``db`` (opened ``mode=ro``), its values
    tab-joined, NULL as empty; [] when the table does not exist."""
    con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
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
    files), so: no ``-wal`` file (everything is in the main file) → ``immutable=1``; a ``-wal``
    file (a writer has it open) → the reader opens a private copy of the file and its WAL."""
    wal = path.with_name(path.name + "-wal")
    if not wal.exists():
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    tmp = Path(tempfile.mkdtemp(prefix="traceless-ro-"))
    shutil.copyfile(path, tmp / path.name)
    shutil.copyfile(wal, tmp / wal.name)
    con = sqlite3.connect(str(tmp / path.name), factory=_PrivateCopy)
    con.tmp = tmp
    return con


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


def rows(path: Path) -> dict[str, list[Row]]:
    """Every row of every table (read-only)."""
    con = _connect(path, True)
    try:
        tables = [(r[0], "WITHOUT ROWID" in r[1].upper()) for r in con.execute(
            "SELECT name, sql FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
            "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name")]  # a virtual table's rows live in real ones
        out: dict[str, list[Row]] = {}
        for t, no_rowid in tables:  # a WITHOUT ROWID table (FTS5's index) gets rowid -1: read, never edited
            cur = con.execute(f'SELECT {"-1" if no_rowid else "rowid"}, * FROM "{t}"')  # noqa: S608
            cols = [d[0] for d in cur.description][1:]
            pk = _pk(con, t)
            out[t] = [Row(t, int(r[0]), str(r[1 + cols.index(pk)]) if pk else str(r[0]),
                          dict(zip(cols, r[1:], strict=True))) for r in cur.fetchall()]
        return out
    finally:
        con.close()


@functools.lru_cache(maxsize=1024)
def _forms(literal: str) -> tuple[str, ...]:
    """The literal and, for a non-ASCII one, its JSON-escaped form (Agno and the SDK store JSON);
    cached: a scan asks for it once per row and literal."""
    escaped = json.dumps(literal)[1:-1]
    return (literal,) if escaped == literal else (literal, escaped)


@functools.lru_cache(maxsize=64)
def _all_forms(literals: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f for lit in literals if lit for f in _forms(lit))


def _count(text: str, literals: Sequence[str]) -> int:
    return sum(map(text.count, _all_forms(tuple(literals))))


def scan(system: str, path: Path, owner_of: OwnerOf, user: str | None, literals: Sequence[str],
         reveal: bool) -> ScanReport:
    """The user's rows and every row holding a literal, per table."""
    report = ScanReport(system=system, user=user, literals=len(literals))
    for table, rs in rows(path).items():
        report.stores[table] = len(rs)
        for r in rs:
            mine = user is not None and owner_of(table, r.values) == user
            text = r.text()
            n = _count(text, literals)
            if mine or n:
                report.hits.append(ScanHit(store=table, record_id=r.record_id, field="*", owner_match=mine,
                                           literal_count=n, value=text if reveal else None))
    return report


def plan(system: str, path: Path, owner_of: OwnerOf, user: str | None, literals: Sequence[str]) -> ErasurePlan:
    """Remove the user's rows; rewrite other rows that quote a literal; VACUUM."""
    rep = scan(system, path, owner_of, user, literals, reveal=False)
    acts = [PlannedAction(store=h.store, record_id=h.record_id, action="remove" if h.owner_match else "rewrite",
                          reason="owned by the user" if h.owner_match else "holds a literal") for h in rep.hits]
    return ErasurePlan(system=system, user=user, actions=acts, compaction=[f"VACUUM {path.name}"] if acts else [])


def _replace(v: Any, literals: Sequence[str]) -> Any:
    if not isinstance(v, str):
        return v
    for lit in literals:
        for f in _forms(lit) if lit else []:
            v = v.replace(f, ERASED)
    return v


def erase_residue(path: Path, owner_of: OwnerOf, user: str | None, literals: Sequence[str]) -> list[StoreOutcome]:
    """What the native deletions left: the user's rows deleted, other rows quoting a literal
    rewritten, then ``VACUUM`` (the freed pages go; the WAL is checkpointed and truncated)."""
    found = rows(path)
    con = _connect(path, False)
    out: list[StoreOutcome] = []
    try:
        for table, rs in found.items():
            o = StoreOutcome(store=table, compacted=True)
            for r in (r for r in rs if r.rowid >= 0):
                if user is not None and owner_of(table, r.values) == user:
                    con.execute(f'DELETE FROM "{table}" WHERE rowid = ?', (r.rowid,))  # noqa: S608
                    o.removed += 1
                elif _count(r.text(), literals):
                    new = {c: _replace(v, literals) for c, v in r.values.items()}
                    sets = ", ".join(f'"{c}" = ?' for c in new)
                    con.execute(f'UPDATE "{table}" SET {sets} WHERE rowid = ?', (*new.values(), r.rowid))  # noqa: S608
                    o.rewritten += 1
            out.append(o)
        con.commit()
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("VACUUM")
    finally:
        con.close()
    return out


def bystander_digests(path: Path, owner_of: OwnerOf, user: str | None,
                      literals: Sequence[str] = ()) -> dict[str, tuple[int, str]]:
    """Per table: count and SHA-256 of the rows of every other user (and of no user), each
    with the literals replaced as ``erase_residue`` replaces them: a row the erasure rewrites
    digests the same before and after; any other change to it does not."""
    out: dict[str, tuple[int, str]] = {}
    for table, rs in rows(path).items():
        other = sorted(Row(r.table, r.rowid, r.record_id, {c: _replace(v, literals) for c, v in r.values.items()}).text()
                       for r in rs if user is None or owner_of(table, r.values) != user)
        h = hashlib.sha256()
        for t in other:
            h.update(t.encode("utf-8") + b"\0")
        out[table] = (len(other), h.hexdigest())
    return out


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
        self._literals: tuple[str, ...] = ()

    @classmethod
    def attach(cls, config: SystemConfig, runtime: SystemRuntime | None = None, *, read_only: bool) -> MemorySystem:
        """The live instance in the file named by the config's ``db_file`` (refused when absent)."""
        if not isinstance(config, cls.config_class):
            raise ConfigError(f"{cls.name}: attach takes a {cls.config_class.__name__}, not {type(config).__name__}")
        path = live_db(getattr(config, "db_file", None), cls.name)
        return cls(path.parent, config, runtime, db_path=path, read_only=read_only)

    @abc.abstractmethod
    def row_owner(self, table: str, row: dict[str, Any]) -> str | None:
        """The user a row of ``table`` belongs to (None: nobody's, e.g. a schema table);
        every SQLite-backed adapter says it for its own tables."""

    def scan(self, user: str | None, literals: Sequence[str], *, reveal: bool = False) -> ScanReport:
        return scan(self.name, self.path, self.row_owner, user, literals, reveal)

    def plan_erasure(self, user: str | None, literals: Sequence[str]) -> ErasurePlan:
        self._literals = tuple(literals)  # what the bystander digests normalise (the rows the plan rewrites)
        return plan(self.name, self.path, self.row_owner, user, literals)

    def erase_residue(self, plan: ErasurePlan, literals: Sequence[str]) -> list[StoreOutcome]:
        """After the package's own deletions: close, remove what they left, compact."""
        self.close()
        return erase_residue(self.path, self.row_owner, plan.user, literals)

    def bystander_digests(self, user: str | None) -> dict[str, tuple[int, str]]:
        # the literals are those of the last plan (the driver plans before it digests)
        return bystander_digests(self.path, self.row_owner, user, self._literals)

    def stores(self) -> dict[str, Iterable[str]]:
        """Every table of the file, as the texts of its rows (none before the file exists)."""
        if not self.path.exists():
            return {}
        return {t: [r.text() for r in rs] for t, rs in rows(self.path).items()}

    def instance_files(self) -> list[Path]:
        return sorted(p for p in self.path.parent.glob(self.path.name + "*") if p.is_file())
