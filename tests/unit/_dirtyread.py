"""The forensic reader of the PostgreSQL tests: every tuple of a table's heap, the dead row
versions a forget left (``xmax`` set, not yet vacuumed) included, through ``pg_dirtyread``
(Debian's ``postgresql-15-dirtyread``); the test is skipped where the extension is missing."""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["dirty_rows", "use_dirtyread"]


def use_dirtyread(conn: Any) -> None:
    """Create the extension on ``conn`` (a psycopg connection in autocommit), or skip the test."""
    import psycopg

    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_dirtyread")
    except psycopg.Error as e:
        pytest.skip(f"pg_dirtyread is not installed ({e}): apt-get install postgresql-15-dirtyread")


def dirty_rows(conn: Any, table: str) -> list[tuple[Any, ...]]:
    """Every tuple of ``table``, live and dead: ``(xmax, *columns in table order)``; ``xmax`` is
    ``0`` for a live row version."""
    cols = conn.execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid "
                        "= %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum", (table,)).fetchall()
    spec = ", ".join(['"xmax" xid', *(f'"{c}" {typ}' for c, typ in cols)])
    return list(conn.execute(f"SELECT * FROM pg_dirtyread('{table}') AS t({spec})").fetchall())  # noqa: S608
