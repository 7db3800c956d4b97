"""mem0 on qdrant local: the bystander digest of one SQLite table an erasure deletes from, over
the containers the erasure touches, not over every record (issue 39: digesting every point of
a 10^6-point collection twice was a minute).

An erasure on qdrant local deletes rows by their primary key (``points.id``, ``history.id``):
SQLite rewrites the B-tree pages that hold those keys and the rows beside them, nothing else.
So one table's digest is

* ``range:[lo, hi]``: per deleted key, the keys from its ``NEIGHBOURS``-th predecessor to its
  ``NEIGHBOURS``-th successor in key order (the rows sharing its index and leaf pages: the
  container; a table of a few hundred rows is one container whole);
* ``row:<digest>``: each row in those ranges that is not skipped (the user's, the plan's), by
  its values;
* ``rows:<n>``: the rows of the whole table that are not skipped, counted by SQLite.

A row of another user removed anywhere shows as the count gone down; a row in a touched
container changed or removed shows as its ``row:`` entry gone. Taken again after the
erasure against the first digest (``baseline``): the same ranges, and the count entry equal
to the first one's when no row is missing, so rows another writer added meanwhile show as
records added (``rows-added``), never as an over-deletion. Not seen: another writer changing a
row in place outside the touched containers during the erasure (qdrant local's lock keeps its
clients out while the erasure deletes), or removing as many rows as it adds.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence

from traceless.systems.kernel import StoreDigest, digest

__all__ = ["NEIGHBOURS", "table_digest"]

NEIGHBOURS = 32
"""Rows on each side of a deleted key, in key order, digested with it (a 4 KB page holds about
one qdrant point and a dozen history rows: a few pages on each side)."""
RANGE, ROW, ROWS, ADDED = "range:", "row:", "rows:", "rows-added"


def _ranges(con: sqlite3.Connection, table: str, keys: Collection[str]) -> list[tuple[str, str | None]]:
    """Per key, (the ``NEIGHBOURS``-th key before it or ``""``, the ``NEIGHBOURS``-th after it
    or None: the table's end), merged where they overlap."""
    out: list[tuple[str, str | None]] = []
    for k in sorted(keys):
        lo = con.execute(f"SELECT id FROM {table} WHERE id < ? ORDER BY id DESC LIMIT 1 OFFSET ?",  # noqa: S608
                         (k, NEIGHBOURS - 1)).fetchone()
        hi = con.execute(f"SELECT id FROM {table} WHERE id > ? ORDER BY id LIMIT 1 OFFSET ?",  # noqa: S608
                         (k, NEIGHBOURS - 1)).fetchone()
        r = ("" if lo is None else str(lo[0]), None if hi is None else str(hi[0]))
        if out and (out[-1][1] is None or r[0] <= out[-1][1]):
            last = out[-1]
            out[-1] = (last[0], None if last[1] is None or r[1] is None else max(last[1], r[1]))
        else:
            out.append(r)
    return out


def _parse(baseline: StoreDigest) -> tuple[list[tuple[str, str | None]], int | None]:
    ranges = [tuple(json.loads(e[len(RANGE):])) for e in baseline if e.startswith(RANGE)]
    count = next((int(e[len(ROWS):]) for e in baseline if e.startswith(ROWS)), None)
    return [(str(lo), None if hi is None else str(hi)) for lo, hi in ranges], count


def table_digest(con: sqlite3.Connection, table: str, columns: str, skip: Collection[str],
                 touched: Collection[str], baseline: StoreDigest | None) -> StoreDigest:
    """The digest of ``table`` (its key column ``id``; ``columns``: what a row's digest covers,
    the key first) but the rows whose key is in ``skip``: the ranges around the ``touched``
    keys, or the ``baseline``'s ranges when given (the same containers after the erasure)."""
    ranges, before = _parse(baseline) if baseline is not None else (_ranges(con, table, touched), None)
    rows: dict[str, Sequence[object]] = {}
    for lo, hi in ranges:
        sql = f"SELECT {columns} FROM {table} WHERE id >= ?" + ("" if hi is None else " AND id <= ?")  # noqa: S608
        for row in con.execute(sql, (lo,) if hi is None else (lo, hi)):
            rows[str(row[0])] = tuple(row)
    out = [RANGE + json.dumps([lo, hi]) for lo, hi in ranges]
    out += [ROW + h for h in digest(repr(r) for k, r in rows.items() if k not in skip)]  # the kernel's one digest
    total = int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: S608 - fixed names
    skipped = int(con.execute(f"SELECT count(*) FROM {table} WHERE id IN (SELECT value FROM json_each(?))",  # noqa: S608
                              (json.dumps(sorted(skip)),)).fetchone()[0])
    n = total - skipped
    if before is not None and n >= before:  # no row missing: the count as it was, rows added said apart
        out += [ROWS + str(before), *([ADDED] if n > before else [])]
    else:
        out.append(ROWS + str(n))
    return tuple(sorted(out))
