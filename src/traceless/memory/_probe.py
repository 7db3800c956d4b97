"""What a database is before traceless opens it: new, empty, a traceless store, or another
application's database (which traceless never modifies).

A SQLite file is inspected without a write of any kind: ``immutable=1`` reads the main file
with no lock, no ``-wal``/``-shm`` created or touched (a plain read-only connection writes
its read marks into another application's ``-shm``). Where the main file alone cannot
tell (no schema in it, frames waiting in a ``-wal``), a copy of the two files is read.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from traceless.errors import MemoryStoreError, NotAStoreError

__all__ = ["StoreProbe", "check_database_pg", "check_file", "describe_foreign", "probe_file", "probe_tables",
           "refuse_foreign"]

_FIRST_MIGRATION = "001_artifacts_lineage"
_CORE = frozenset({"_migrations", "meta", "artifacts", "lineage"})


@dataclass(frozen=True)
class StoreProbe:
    """What a path or database holds."""

    kind: Literal["missing", "empty", "traceless", "foreign"]
    """``missing`` (no file), ``empty`` (no byte or no schema), ``traceless`` or ``foreign``."""
    tables: dict[str, set[str]] = field(default_factory=dict)
    """Table name -> column names (what a foreign database is recognised by)."""
    version: int = 0
    """A traceless store's schema version (number of applied migrations)."""


def probe_tables(tables: dict[str, set[str]], migrations: Callable[[], list[str]], version: int) -> StoreProbe:
    """Classify a database by its tables; ``migrations`` reads ``_migrations``' names (only
    called when the table exists)."""
    user = {t: c for t, c in tables.items() if not t.startswith("sqlite_")}
    if not user:
        return StoreProbe("empty" if version == 0 else "foreign", tables=user)
    if user.keys() >= _CORE and _FIRST_MIGRATION in migrations() and describe_foreign(user) is None:
        return StoreProbe("traceless", tables=user, version=version)
    return StoreProbe("foreign", tables=user)


def describe_foreign(tables: dict[str, set[str]]) -> str | None:
    """What another application's database looks like, where recognisable (else None)."""
    hist = tables.get("history", set())
    if {"memory_id", "old_memory", "new_memory"} <= hist:
        return "mem0's history database (table history with memory_id/old_memory/new_memory)"
    if "checkpoints" in tables or "writes" in tables:
        return "LangGraph's checkpoint database (SqliteSaver: tables checkpoints/writes)"
    if {"prefix", "key", "value"} <= tables.get("store", set()):
        return "LangGraph's store database (SqliteStore: table store)"
    return None


def refuse_foreign(where: str, probe: StoreProbe) -> NotAStoreError:
    """The one-line error for a database traceless does not own."""
    what = describe_foreign(probe.tables)
    if what is not None:
        name = "mem0" if what.startswith("mem0") else "langgraph"
        return NotAStoreError(
            f"{where} is not a traceless store: this looks like {what}. traceless never modifies another "
            f"application's database; find a user's data in it with `traceless scan --memory {name} "
            f"--memory-config CFG --user ID`, erase it with `traceless forget --memory {name} ...`, measure "
            f"the system with `traceless audit --memory {name}`, or give a new file for a traceless store. "
            "Nothing was changed."
        )
    names = sorted(probe.tables)
    shown = ", ".join(repr(t) for t in names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    what = f"tables {shown}" if names else "no table, but its user_version is set"
    return NotAStoreError(
        f"{where} is not a traceless store: it is a database of another application ({what}). traceless never "
        "modifies a database it does not own; give a new or empty file (or a traceless store). Nothing was changed."
    )


def probe_file(path: str) -> StoreProbe:
    """Inspect a SQLite file without writing anything (see the module docstring). Only
    SQLite opens the file: a descriptor of this process closed by Python would drop the
    POSIX locks other connections of this process hold on it."""
    p = Path(path)
    if not p.exists():
        return StoreProbe("missing")
    if p.is_dir():
        raise MemoryStoreError(f"{p} is a folder; give a file path for the memory (e.g. {p}/memory.db)")
    wal = Path(f"{path}-wal")
    wal_bytes = wal.stat().st_size if wal.exists() else 0
    if p.stat().st_size == 0 and not wal_bytes:
        return StoreProbe("empty")
    probe = _read_immutable(p)
    if probe is not None and (probe.kind != "empty" or not wal_bytes):
        return probe
    # no schema in the main file, frames in the WAL (or the main file changed while read):
    # the WAL decides; read a private copy of both
    return _read_copy(p, wal if wal_bytes else None)


def _read_immutable(p: Path) -> StoreProbe | None:
    uri = f"file:{quote(str(p.resolve()))}?immutable=1"
    for attempt in range(5):
        try:
            conn = sqlite3.connect(uri, uri=True)
            try:
                return _probe_conn(conn)
            finally:
                conn.close()
        except sqlite3.DatabaseError as e:
            if "not a database" in str(e):
                raise MemoryStoreError(f"{p} is not a traceless memory file (not SQLite): {e}") from None
            if "unable to open" in str(e):
                raise MemoryStoreError(f"{p} cannot be read ({e}); fix its permissions") from None
            time.sleep(0.01 * (attempt + 1))  # a checkpoint of another process rewrote pages meanwhile
    return None


def _read_copy(p: Path, wal: Path | None) -> StoreProbe:
    with tempfile.TemporaryDirectory(prefix="traceless-probe-") as d:
        copy = Path(d) / "db"
        shutil.copyfile(p, copy)
        if wal is not None:
            with contextlib.suppress(FileNotFoundError):
                shutil.copyfile(wal, f"{copy}-wal")
        try:
            conn = sqlite3.connect(copy)
            try:
                return _probe_conn(conn)
            finally:
                conn.close()
        except sqlite3.Error as e:
            raise MemoryStoreError(f"{p} is not a traceless memory file (not SQLite): {e}") from None


def _probe_conn(conn: sqlite3.Connection) -> StoreProbe:
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    tables = {n: _columns(conn.execute(f'PRAGMA table_info("{_q(n)}")')) for n in names}
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    return probe_tables(tables, lambda: _migration_names(conn), int(version))


def _migration_names(conn: sqlite3.Connection) -> list[str]:
    try:
        return [str(r[0]) for r in conn.execute("SELECT name FROM _migrations")]
    except sqlite3.Error:  # another application's table of that name
        return []


def _columns(rows: Iterable[Any]) -> set[str]:
    return {str(r[1]) for r in rows}


def _q(name: str) -> str:
    return name.replace('"', '""')


def _not_yet(where: str, what: str) -> NotAStoreError:
    return NotAStoreError(f"{where} {what}: no traceless store there yet. Only `traceless memory add --db {where} "
                          "SESSIONS.jsonl` creates one (in a new or empty file). Nothing was changed.")


def check_file(path: str, access: str) -> StoreProbe:
    """Refuse, before any connection, a SQLite file that ``access`` may not open: another
    application's database (always), a missing or empty file (unless ``create``)."""
    probe = probe_file(path)
    if probe.kind == "foreign":
        raise refuse_foreign(path, probe)
    if probe.kind != "traceless" and access != "create":
        raise _not_yet(path, "does not exist" if probe.kind == "missing" else "is empty")
    return probe


def check_database_pg(conn: Any, where: str, access: str) -> StoreProbe:
    """``check_file`` for a PostgreSQL database (``conn``: a psycopg connection): its tables
    in the current schema decide."""
    tables: dict[str, set[str]] = {}
    for table, column in conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"):
        tables.setdefault(str(table), set()).add(str(column))

    def names() -> list[str]:
        try:
            return [str(r[0]) for r in conn.execute("SELECT name FROM _migrations")]
        except Exception:  # noqa: BLE001 - another application's table of that name
            return []

    probe = probe_tables(tables, names, 0)
    if probe.kind == "foreign":
        raise refuse_foreign(where, probe)
    if probe.kind != "traceless" and access != "create":
        raise _not_yet(where, "has no traceless tables")
    return probe
