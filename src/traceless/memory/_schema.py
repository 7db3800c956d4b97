"""Forward-only named migrations (simonw/llm style). ``PRAGMA user_version`` holds the
number of applied migrations; a file from a newer traceless is refused, never touched.

PostgreSQL runs the same migrations, rewritten for its types (``pg_sql``); there the
number of rows in ``_migrations`` is the version, read and written under an advisory lock."""

from __future__ import annotations

import re
import sqlite3
import time
from typing import Any

from traceless.errors import SchemaVersionError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "check_version", "check_version_pg", "migrate", "migrate_pg", "pg_sql"]

MIGRATIONS: list[tuple[str, str]] = [
    (
        "001_artifacts_lineage",
        """
        CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL);
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE artifacts (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            tier TEXT NOT NULL,
            kind TEXT NOT NULL,
            session_id TEXT,
            seq INTEGER NOT NULL DEFAULT 0,
            text TEXT,
            vector BLOB,
            digest TEXT NOT NULL,
            created_at REAL NOT NULL,
            meta TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX ix_artifacts_owner_tier ON artifacts(owner, tier, kind);
        CREATE INDEX ix_artifacts_owner_session ON artifacts(owner, session_id);
        CREATE TABLE lineage (
            child TEXT NOT NULL,
            parent TEXT NOT NULL,
            op TEXT NOT NULL,
            params TEXT NOT NULL DEFAULT '{}',
            PRIMARY KEY (child, parent)
        );
        CREATE INDEX ix_lineage_parent ON lineage(parent);
        """,
    ),
    (
        "002_gate",
        """
        CREATE TABLE gate_descriptors (
            owner TEXT NOT NULL,
            descriptor TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (owner, descriptor)
        );
        """,
    ),
    (
        "003_receipts",
        """
        CREATE TABLE receipts (
            id TEXT PRIMARY KEY,
            created_at REAL NOT NULL,
            body TEXT NOT NULL
        );
        """,
    ),
    (
        "004_gate_v2_events_store_id",
        # gate entries keyed by an owner pseudonym, with the id of the key that made them
        # (fail closed on another key) and the value length sealed; an append-only event
        # log (ungated writes, finished erasures); a random id that receipts bind to
        """
        CREATE TABLE gate_entries (
            owner_ref TEXT NOT NULL,
            kind TEXT NOT NULL,
            mac TEXT NOT NULL,
            attribute TEXT NOT NULL,
            sealed BLOB,
            key_id TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (owner_ref, kind, mac)
        );
        CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL,
            kind TEXT NOT NULL,
            detail TEXT NOT NULL DEFAULT ''
        );
        INSERT OR IGNORE INTO meta(key, value) VALUES ('store_id', lower(hex(randomblob(16))))
        """,
    ),
    (
        "005_encryption_at_rest",
        # optional crypto-shredding: a sealed payload per artifact, data keys per owner
        # (wrapped by a master key kept outside the store)
        """
        ALTER TABLE artifacts ADD COLUMN sealed BLOB;
        CREATE TABLE data_keys (
            owner TEXT PRIMARY KEY,
            wrapped BLOB NOT NULL,
            created_at REAL NOT NULL
        )
        """,
    ),
]

SCHEMA_VERSION = len(MIGRATIONS)


def check_version(conn: sqlite3.Connection, path: str) -> int:
    """The file's schema version; ``SchemaVersionError`` if a newer traceless wrote it."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path} has schema version {version} but this traceless knows only up to "
            f"{SCHEMA_VERSION}: it was written by a newer traceless. Upgrade traceless "
            "(pip install -U traceless); the file was not modified."
        )
    return int(version)


def migrate(conn: sqlite3.Connection, path: str) -> None:
    """Apply pending migrations, each in its own transaction.

    The version is re-read inside each write transaction, so two processes opening the
    same new file at once apply every migration exactly once.
    """
    if check_version(conn, path) == SCHEMA_VERSION:
        return  # up to date: opening takes no write lock
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = check_version(conn, path)
            if version >= SCHEMA_VERSION:
                conn.execute("COMMIT")
                return
            name, sql = MIGRATIONS[version]
            for stmt in sql.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.execute("INSERT INTO _migrations(name, applied_at) VALUES (?, ?)", (name, time.time()))
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


_PG_REWRITES = [
    # byte-wise comparison and ordering (ids, owners) as in SQLite, whatever the server's locale
    (r"\bTEXT\b", 'TEXT COLLATE "C"'),
    (r"\bBLOB\b", "BYTEA"),
    (r"\bREAL\b", "DOUBLE PRECISION"),
    (r"INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY"),
    (r"INSERT OR IGNORE INTO meta\(key, value\) VALUES \('store_id', lower\(hex\(randomblob\(16\)\)\)\)",
     "INSERT INTO meta(key, value) VALUES ('store_id', replace(gen_random_uuid()::text, '-', '')) "
     "ON CONFLICT DO NOTHING"),
]
_PG_MIGRATION_LOCK = 7_031_978


def pg_sql(sql: str) -> str:
    """A migration's SQLite DDL rewritten for PostgreSQL."""
    for pat, rep in _PG_REWRITES:
        sql = re.sub(pat, rep, sql)
    return sql


def check_version_pg(conn: Any, where: str) -> int:
    """``check_version`` for a PostgreSQL database (``conn``: a psycopg connection)."""
    if conn.execute("SELECT to_regclass('_migrations')").fetchone()[0] is None:
        return 0
    version = int(conn.execute("SELECT count(*) FROM _migrations").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where} has schema version {version} but this traceless knows only up to {SCHEMA_VERSION}: it was "
            "written by a newer traceless. Upgrade traceless (pip install -U traceless); nothing was modified."
        )
    return version


def migrate_pg(conn: Any, where: str) -> None:
    """Apply pending migrations on PostgreSQL, each in its own transaction (DDL is
    transactional there), serialised across processes by an advisory lock."""
    if check_version_pg(conn, where) == SCHEMA_VERSION:
        return
    while True:
        conn.execute("BEGIN")
        try:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_MIGRATION_LOCK,))
            version = check_version_pg(conn, where)
            if version >= SCHEMA_VERSION:
                conn.execute("COMMIT")
                return
            name, sql = MIGRATIONS[version]
            for stmt in pg_sql(sql).split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.execute("INSERT INTO _migrations(name, applied_at) VALUES (%s, %s)", (name, time.time()))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
