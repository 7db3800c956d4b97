"""Forward-only named migrations (simonw/llm style). ``PRAGMA user_version`` holds the
number of applied migrations; a file from a newer traceless is refused, never touched."""

from __future__ import annotations

import sqlite3
import time

from traceless.errors import SchemaVersionError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "check_version", "migrate"]

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
