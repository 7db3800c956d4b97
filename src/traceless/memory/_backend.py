"""Storage backends of the memory store: the SQL engine under ``MemoryStore``.

The store speaks one SQL (SQLite's, with ``?`` placeholders); a backend connects, runs
it (translating placeholders and the few dialect differences: upserts, ``instr``),
brackets transactions and maps the engine's errors to ``MemoryStoreError`` subclasses
whose messages say how to fix them.

* ``SQLiteBackend``: one file, WAL, ``secure_delete`` (the embedded default).
* ``PostgresBackend``: a PostgreSQL database reached by a ``postgresql://`` URL (psycopg 3,
  the ``postgres`` extra). Writers are serialised by a transaction-scoped advisory lock,
  as SQLite's ``BEGIN IMMEDIATE`` serialises them, so a forget resolves and deletes under
  the same exclusion on both.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, urlsplit, urlunsplit

from traceless.errors import ConfigError, MemoryStoreError, StoreConnectionError, StoreLockedError

if TYPE_CHECKING:
    import psycopg

__all__ = ["Backend", "Cursor", "PostgresBackend", "SQLiteBackend", "is_url", "open_backend", "redact_url",
           "store_exists"]

_URL_SCHEMES = ("postgresql://", "postgres://")
_WRITER_LOCK = 7_031_977  # the advisory lock id every traceless writer of one database takes


def is_url(db: str | os.PathLike[str]) -> bool:
    """True for a ``postgresql://`` (or ``postgres://``) URL, False for a file path."""
    return str(db).startswith(_URL_SCHEMES)


def store_exists(db: str | os.PathLike[str]) -> bool:
    """A file store exists as a file; a database URL is checked by connecting (the server's
    error then says what is wrong), so it counts as existing here."""
    return is_url(db) or Path(db).exists()


def redact_url(url: str) -> str:
    """The URL without its password (messages, receipts and logs never show it)."""
    parts = urlsplit(url)
    if parts.password is None:
        return re.sub(r"(?i)(password=)[^&]*", r"\1***", url)
    host = parts.netloc.rsplit("@", 1)[1]
    netloc = f"{parts.username or ''}:***@{host}"
    return re.sub(r"(?i)(password=)[^&]*", r"\1***", urlunsplit(parts._replace(netloc=netloc)))


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Backend(Protocol):
    """What ``MemoryStore`` needs of an engine."""

    dialect: str
    """``sqlite`` or ``postgres``."""
    where: str
    """The file path or the redacted URL (for messages)."""
    errors: tuple[type[Exception], ...]
    """The engine's exception classes (``translate`` turns them into ``MemoryStoreError``)."""
    scannable: bool
    """True when every byte the engine wrote lives in files this process can scan."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor: ...
    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...
    def insert_many(self, table: str, cols: Sequence[str], rows: Sequence[Sequence[Any]]) -> None: ...
    def begin(self) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def close(self) -> None: ...
    def translate(self, e: BaseException) -> MemoryStoreError: ...
    def upsert(self, table: str, cols: Sequence[str], key: Sequence[str], *, replace: bool) -> str: ...


def open_backend(db: str, timeout: float, *, read_only: bool = False) -> Backend:
    """The backend for a path (SQLite) or a ``postgresql://`` URL; ``read_only``: a
    connection that cannot write (SQLite ``mode=ro``; PostgreSQL read-only transactions)."""
    if is_url(db):
        return PostgresBackend(db, timeout, read_only=read_only)
    return SQLiteBackend(db, timeout, read_only=read_only)


class _Connected:
    """What both back ends do the same way on their DB-API connection ``conn``."""

    conn: Any

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")

    def close(self) -> None:
        self.conn.close()


class SQLiteBackend(_Connected):
    """One SQLite file; the checks on the path run before anything is created."""

    conn: sqlite3.Connection

    dialect = "sqlite"
    errors: tuple[type[Exception], ...] = (sqlite3.Error,)
    scannable = True

    def __init__(self, path: str, timeout: float, *, read_only: bool = False) -> None:
        self.where = path
        target, uri = path, False
        if read_only and path != ":memory:":
            # even a mode=ro reader of a WAL file creates its -wal and -shm: with no -wal (no
            # writer has it open) the file is read as immutable, and not one byte is written
            immutable = "" if Path(f"{path}-wal").exists() else "&immutable=1"
            target, uri = f"file:{quote(str(Path(path).resolve()))}?mode=ro{immutable}", True
        elif path != ":memory:":
            _check_path(Path(path))
        try:
            self.conn = sqlite3.connect(target, timeout=timeout, isolation_level=None, check_same_thread=False,
                                        uri=uri)
        except sqlite3.Error as e:
            raise self.translate(e) from e

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    def insert_many(self, table: str, cols: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(f"INSERT INTO {table}({', '.join(cols)}) VALUES ({','.join('?' * len(cols))})", rows)

    def begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def upsert(self, table: str, cols: Sequence[str], key: Sequence[str], *, replace: bool) -> str:
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        return f"{verb} INTO {table}({', '.join(cols)}) VALUES ({','.join('?' * len(cols))})"

    def translate(self, e: BaseException) -> MemoryStoreError:
        msg, path = str(e), self.where
        if "locked" in msg or "busy" in msg:
            return StoreLockedError(
                f"{path} is locked by another process ({msg}); wait for it to finish or close it. "
                "Nothing was changed."
            )
        if "readonly" in msg or "read-only" in msg:
            return StoreLockedError(f"{path} is read-only ({msg}); fix its permissions. Nothing was changed.")
        if "not a database" in msg:
            return MemoryStoreError(f"{path} is not a traceless memory file (not SQLite): {msg}")
        return MemoryStoreError(f"{path}: {msg}")


def _check_path(p: Path) -> None:
    # os.access alone says "writable" to root even for a 0444 file; a file nobody
    # may write is treated as read-only for everyone
    if p.exists() and (not os.access(p, os.W_OK) or not p.stat().st_mode & 0o222):
        raise StoreLockedError(
            f"{p} is read-only; traceless needs write access to it (and to its folder, "
            f"for the WAL). Fix the permissions (chmod u+w {p}) or copy it somewhere writable. "
            "Nothing was changed."
        )
    if not p.parent.exists():
        raise MemoryStoreError(f"folder {p.parent} does not exist; create it first")
    if not os.access(p.parent, os.W_OK):
        raise StoreLockedError(f"folder {p.parent} is not writable; SQLite needs it for the WAL")
    if p.is_dir():
        raise MemoryStoreError(f"{p} is a folder; give a file path for the memory (e.g. {p}/memory.db)")
    if not p.exists():
        # private from the first byte: SQLite gives the WAL and shm files the same mode
        with contextlib.suppress(FileExistsError):
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


class PostgresBackend(_Connected):
    """A PostgreSQL database (psycopg 3, autocommit; explicit BEGIN/COMMIT like SQLite's)."""

    conn: psycopg.Connection[Any]

    dialect = "postgres"
    errors: tuple[type[Exception], ...]
    # the server's heap, WAL and backups are not files this process can read
    scannable = False

    def __init__(self, url: str, timeout: float, *, read_only: bool = False) -> None:
        self.where = redact_url(url)
        try:
            import psycopg
        except ImportError:
            raise ConfigError(
                "a postgresql:// store needs psycopg: pip install 'traceless[postgres]'"
            ) from None
        self._psycopg = psycopg
        self.errors = (psycopg.Error,)
        try:
            self.conn = psycopg.connect(url, autocommit=True, connect_timeout=max(2, int(timeout)),
                                        application_name="traceless")
        except psycopg.Error as e:
            raise self._connect_error(e) from None
        ms = int(timeout * 1000)
        self.conn.execute(f"SET lock_timeout = {ms}")  # a busy writer: wait like SQLite's timeout
        if read_only:
            self.conn.execute("SET default_transaction_read_only = on")

    def _connect_error(self, e: Exception) -> StoreConnectionError:
        msg = str(e).replace(self.where, "").strip()
        if "password" in msg or "authentication" in msg or "role" in msg and "does not exist" in msg:
            return StoreConnectionError(
                f"{self.where}: the server refused these credentials ({_first_line(msg)}). Check the user and "
                "password in the URL (or PGPASSWORD / ~/.pgpass). Nothing was written."
            )
        if "database" in msg and "does not exist" in msg:
            return StoreConnectionError(
                f"{self.where}: {_first_line(msg)}. Create it first (createdb NAME) or fix the name in the URL. "
                "Nothing was written."
            )
        return StoreConnectionError(
            f"cannot reach the PostgreSQL server at {self.where} ({_first_line(msg)}). Check that the server runs "
            "and that host, port and socket folder in the URL are right. Nothing was written."
        )

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        sql = sql.replace("instr(", "strpos(").replace("?", "%s")
        return self.conn.execute(sql, list(params) if params else None)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        # pipelined by psycopg: one round trip for the batch, not one per row
        with self.conn.cursor() as cur:
            cur.executemany(sql.replace("?", "%s"), rows)

    def insert_many(self, table: str, cols: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        # COPY: the server parses one stream instead of one statement per row
        with self.conn.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as cp:
            for r in rows:
                cp.write_row(r)

    def begin(self) -> None:
        self.conn.execute("BEGIN")
        try:
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_WRITER_LOCK,))
        except BaseException:
            # no lock (timeout): leave no aborted transaction behind on this connection
            with contextlib.suppress(*self.errors):
                self.conn.execute("ROLLBACK")
            raise

    def commit(self) -> None:
        # COMMIT of a failed transaction silently rolls back on PostgreSQL: refuse instead
        if self.conn.info.transaction_status == self._psycopg.pq.TransactionStatus.INERROR:
            raise MemoryStoreError(f"{self.where}: internal: a statement of this transaction failed; rolled back")
        self.conn.execute("COMMIT")

    def upsert(self, table: str, cols: Sequence[str], key: Sequence[str], *, replace: bool) -> str:
        rest = [c for c in cols if c not in key]
        action = (f"DO UPDATE SET {', '.join(f'{c} = EXCLUDED.{c}' for c in rest)}" if replace and rest
                  else "DO NOTHING")
        return (f"INSERT INTO {table}({', '.join(cols)}) VALUES ({','.join('?' * len(cols))}) "
                f"ON CONFLICT ({', '.join(key)}) {action}")

    def translate(self, e: BaseException) -> MemoryStoreError:
        pe = self._psycopg.errors
        msg = _first_line(str(e))
        if isinstance(e, pe.LockNotAvailable | pe.DeadlockDetected):
            return StoreLockedError(f"{self.where} is locked by another writer ({msg}); wait for it to finish. "
                                    "Nothing was changed.")
        if isinstance(e, pe.InsufficientPrivilege | pe.ReadOnlySqlTransaction):
            return StoreLockedError(f"{self.where}: the database user may not write here ({msg}); grant it "
                                    "INSERT/UPDATE/DELETE on the traceless tables. Nothing was changed.")
        if isinstance(e, self._psycopg.OperationalError):
            return StoreConnectionError(f"{self.where}: the connection to the server failed ({msg}); check the "
                                        "server and reopen the store. The open transaction was rolled back.")
        return MemoryStoreError(f"{self.where}: {msg}")


def _first_line(msg: str) -> str:
    return msg.strip().splitlines()[0] if msg.strip() else "no detail"
