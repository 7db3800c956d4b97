"""Helpers for an adapter whose live instance is one SQLite file (Agno's ``SqliteDb``, the
OpenAI Agents SDK's ``SQLiteSession``, Google ADK's session database, LlamaIndex's chat
store): the public face of ``traceless.systems._sqlite_live`` for in-tree and third-party
adapters alike (``from traceless.systems import sqlite as live``).

``SqliteInstance`` is a ``MemorySystem`` base whose live instance is a ``SqliteFile`` (the
erasure kernel's ``LiveInstance`` for one SQLite file: a table is a store, a row a record): the
kernel scans, plans, digests bystanders and erases for it; a subclass says whose each row is
(``row_owner``) and runs its package's own deletions in ``native_erasure``. The functions read through ``mode=ro`` /
``immutable=1`` connections (``ro_connect``) unless they erase. ``count_literals``,
``replace_literals`` and ``literal_forms`` are the kernel's one literal-match rule
(``traceless.systems.kernel``), re-exported. ``leaf_rowids`` finds the rows that may hold some
bytes from the file's pages (``traceless.systems._sqlite_pages``), ``long_row`` the rows that
may overflow a page, ``text_affinity`` a column that holds no number.
"""

from traceless.systems._sqlite_live import (
    ERASED,
    REST,
    SCOPE,
    OwnerOf,
    OwnerSql,
    Row,
    SqliteFile,
    SqliteInstance,
    bystander_digests,
    compact,
    erase_residue,
    holds_sql,
    id_prefix,
    literal_sql,
    live_db,
    narrowable,
    plan,
    primary_key,
    ro_connect,
    row_digest_sql,
    rows,
    scan,
    table_list,
    table_texts,
    user_column,
)
from traceless.systems._sqlite_pages import PageHits, file_stamp, leaf_rowids, long_row, text_affinity
from traceless.systems._sqlite_pages import clear_kept as clear_kept_pages
from traceless.systems.kernel import count_literals, literal_forms, replace_literals

__all__ = ["ERASED", "REST", "SCOPE", "OwnerOf", "OwnerSql", "PageHits", "Row", "SqliteFile", "SqliteInstance", "bystander_digests", "clear_kept_pages", "compact", "count_literals", "erase_residue", "file_stamp", "holds_sql", "id_prefix",
           "leaf_rowids", "literal_forms", "literal_sql", "live_db", "long_row", "narrowable", "plan", "primary_key", "replace_literals", "ro_connect", "row_digest_sql", "rows", "scan", "table_list", "table_texts", "text_affinity", "user_column"]
