"""Helpers for an adapter whose live instance is one SQLite file (Agno's ``SqliteDb``, the
OpenAI Agents SDK's ``SQLiteSession``, Google ADK's session database, LlamaIndex's chat
store): the public face of ``traceless.systems._sqlite_live`` for in-tree and third-party
adapters alike (``from traceless.systems import sqlite as live``).

``SqliteInstance`` is a ``MemorySystem`` base that scans, plans, digests bystanders and erases
residue for such a file; a subclass says whose each row is (``row_owner``) and runs its
package's own deletions before ``erase_residue``. The functions read through ``mode=ro`` /
``immutable=1`` connections (``ro_connect``) unless they erase. ``count_literals(text,
literals)`` counts the literals (and their JSON-escaped forms) in a text;
``replace_literals(value, literals)`` is a string value with each of them replaced by
``ERASED`` (any other value unchanged); ``literal_forms(literal)`` is the literal and, for a
non-ASCII one, its JSON-escaped form (the forms the two count).
"""

from traceless.systems._sqlite_live import (
    ERASED,
    OwnerOf,
    Row,
    SqliteInstance,
    bystander_digests,
    erase_residue,
    live_db,
    plan,
    ro_connect,
    rows,
    scan,
    table_texts,
)
from traceless.systems._sqlite_live import _count as count_literals
from traceless.systems._sqlite_live import _forms as literal_forms
from traceless.systems._sqlite_live import _replace as replace_literals

__all__ = ["ERASED", "OwnerOf", "Row", "SqliteInstance", "bystander_digests", "count_literals", "erase_residue",
           "literal_forms", "live_db", "plan", "replace_literals", "ro_connect", "rows", "scan", "table_texts"]
