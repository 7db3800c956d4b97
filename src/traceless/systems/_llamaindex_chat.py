"""LlamaIndex's chat store (the ``Memory``'s SQLite file) read where its rows live: the user's rows
through the ``key`` index, the rows that may hold a literal from the file's pages that hold its
bytes (``_sqlite_pages``; else SQLite's ``GLOB`` over every row), counts
by ``count(*)``, the bystanders' digest texts with the literals replaced by SQLite's
``replace`` (``bystander_rows``: what ``SqliteFile``, read whole, gives the kernel for the same
rows) and the bystanders' stream digest (``table_streams``: their values hashed in batches, the
literals replaced only in the rows that may hold one)."""

from __future__ import annotations

import json
import operator
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec

from traceless.systems.contract import Record
from traceless.systems.kernel import ERASED, literal_forms, replace_literals, stream_hash
from traceless.systems.sqlite import (
    PageHits,
    clear_kept_pages,
    file_stamp,
    leaf_rowids,
    long_row,
    primary_key,
    ro_connect,
    table_list,
    text_affinity,
)

__all__ = ["bystander_rows", "clear_kept", "counts", "records", "table_streams"]

Owner = Callable[[str, dict[str, Any]], "str | None"]


def _text(v: Any) -> str:
    return "" if v is None else (v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v))


def _cols(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def _forms(literals: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(f for lit in literals for f in literal_forms(lit)))


def _glob(form: str) -> str:
    """A GLOB pattern matching any text that holds ``form`` (its ``*``, ``?``, ``[`` escaped)."""
    return "*" + "".join(f"[{c}]" if c in "*?[" else c for c in form) + "*"


def _where(cols: list[str], forms: list[str], owner_col: str | None, user: str | None) -> tuple[str, list[Any]]:
    """A row of the user (``owner_col = user``) or one whose text may hold a form: a text's or a
    blob's GLOB (a blob's cast to text: SQLite's GLOB matches no blob), an integer's for a form of digits, any REAL (SQLite's text of a float is not
    always Python's)."""
    conds: list[str] = []
    args: list[Any] = []
    if owner_col is not None and user is not None:
        conds.append(f'"{owner_col}" = ?')
        args.append(user)
    digits = [f for f in forms if not f.strip("0123456789-")]
    for c in cols if forms else []:
        conds.append(f"typeof(\"{c}\") = 'real'")
        conds.append(f"(typeof(\"{c}\") IN ('text', 'blob') AND ("  # a blob's text: GLOB matches no blob itself
                     + " OR ".join(f'CAST("{c}" AS TEXT) GLOB ?' for _ in forms) + "))")
        args += [_glob(f) for f in forms]
        if digits:
            conds.append(f"(typeof(\"{c}\") = 'integer' AND (" + " OR ".join(f'"{c}" GLOB ?' for _ in digits) + "))")
            args += [_glob(f) for f in digits]
    return " OR ".join(conds) or "0", args


def _where_paged(con: sqlite3.Connection, table: str, forms: list[str], owner_col: str | None, user: str | None,
                 hits: PageHits) -> tuple[str, list[Any]]:
    """``_where`` with the text and blob search replaced by the rows on the pages holding a
    form's bytes (``leaf_rowids``) and, where a page may overflow, every row long enough to;
    a column of TEXT affinity (it holds no number) left out of the number checks."""
    conds: list[str] = []
    args: list[Any] = []
    if owner_col is not None and user is not None:
        conds.append(f'"{owner_col}" = ?')
        args.append(user)
    info = list(con.execute(f'PRAGMA table_info("{table}")'))
    if forms:
        conds.append("rowid IN (SELECT value FROM json_each(?))")
        args.append(json.dumps(sorted(hits.rowids)))
        if hits.overflow:
            conds.append(long_row([r[1] for r in info], hits.usable))
    digits = [f for f in forms if not f.strip("0123456789-")]
    for c in [r[1] for r in info if not text_affinity(r[2] or "")] if forms else []:
        conds.append(f"typeof(\"{c}\") = 'real'")
        if digits:
            conds.append(f"(typeof(\"{c}\") = 'integer' AND (" + " OR ".join(f'"{c}" GLOB ?' for _ in digits) + "))")
            args += [_glob(f) for f in digits]
    return " OR ".join(conds) or "0", args


_FOUND: dict[tuple[Path, str, str | None, tuple[str, ...]], tuple[tuple[int, int, int, bytes], list[int]]] = {}
"""The rowids ``records`` found per file, table, user and forms (the last file only), kept
while the file is unchanged (``file_stamp``): an erasure reads the same rows to plan, to check
its scope and to execute."""


def clear_kept() -> None:
    """Forget the rows found and the pages' answers kept: the next read reads the file again."""
    _FOUND.clear()
    clear_kept_pages()


def records(path: Path, owner: Owner, owner_cols: dict[str, str], user: str | None,
            literals: Sequence[str]) -> Iterator[Record]:
    """The rows of the user (by ``owner_cols[table]``) and those that may hold a literal, as
    ``SqliteFile.records`` makes them (store = table, ``ref`` = rowid); the rowids a full read of
    a table found are kept while the file is unchanged (``_FOUND``)."""
    forms = _forms(literals)
    stamp = file_stamp(path)
    con = ro_connect(path)
    try:
        for table, no_rowid in table_list(con):
            cols, pk = _cols(con, table), primary_key(con, table)
            key = (path, table, user, tuple(forms))
            kept = _FOUND.get(key)
            if kept is not None and stamp is not None and kept[0] == stamp:  # the same file: the same rows
                where, args = "rowid IN (SELECT value FROM json_each(?))", [json.dumps(kept[1])]
            else:
                hits = leaf_rowids(path, forms) if forms else PageHits(set(), False, 0)
                where, args = (_where(cols, forms, owner_cols.get(table), user) if hits is None or no_rowid
                               else _where_paged(con, table, forms, owner_cols.get(table), user, hits))
            found: list[int] = []
            cur = con.execute(f'SELECT {"-1" if no_rowid else "rowid"}, * FROM "{table}" WHERE {where}', args)  # noqa: S608
            for r in cur:
                values = dict(zip(cols, r[1:], strict=True))
                rid = str(values[pk]) if pk else str(r[0])
                found.append(int(r[0]))
                yield Record(table, rid, owner(table, values), {c: _text(v) for c, v in values.items()}, ref=int(r[0]))
            if stamp is not None and not no_rowid:
                if any(k[0] != path for k in _FOUND):
                    _FOUND.clear()
                _FOUND[key] = (stamp, found)
    finally:
        con.close()


def counts(path: Path) -> dict[str, int]:
    """Every table's row count (``count(*)``)."""
    con = ro_connect(path)
    try:
        return {t: int(con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]) for t, _ in table_list(con)}  # noqa: S608
    finally:
        con.close()


def _replaced(col: str, n: int) -> str:
    """The column's text with ``n`` forms (parameters) replaced by ``ERASED`` (a REAL as it is:
    its text is Python's, replaced there)."""
    expr = f'"{col}"'
    for _ in range(n):
        expr = f"replace({expr}, ?, '{ERASED}')"
    return f"CASE WHEN typeof(\"{col}\") = 'real' THEN \"{col}\" ELSE {expr} END"


def _sql_text(cols: list[str], owner_col: str | None, n: int) -> str:
    """``kernel.bystander_rows``' text of a row built by SQLite: the owner (``owner_col``'s text,
    else ``None``), then each column (by name) as ``name=text``, its ``n`` forms replaced."""
    who = f"CASE WHEN typeof(\"{owner_col}\") = 'text' THEN \"{owner_col}\" ELSE 'None' END" if owner_col else "'None'"
    parts = [f"'{c}=' || ifnull({_replaced(c, n)}, '')" for c in sorted(cols)]
    return " || char(9) || ".join([who, *parts])


def _plain_types(con: sqlite3.Connection, table: str, cols: list[str]) -> bool:
    """No REAL and no BLOB value in the table: SQLite's text of every value is then Python's."""
    odd = " OR ".join(f"typeof(\"{c}\") IN ('real', 'blob')" for c in cols) or "0"
    return con.execute(f'SELECT 1 FROM "{table}" WHERE {odd} LIMIT 1').fetchone() is None  # noqa: S608


def bystander_rows(path: Path, owner: Owner, owner_cols: dict[str, str], user: str | None,
                   literals: Sequence[str], removed: set[tuple[str, str]],
                   store: Callable[[str], str]) -> list[tuple[tuple[str, str], str]]:
    """((store, id), digest text) of every row that is not the user's nor in ``removed``, the
    text as ``kernel.bystander_rows`` makes it, built and the literals replaced by SQLite (a
    table holding a REAL or a BLOB: its texts made in Python, from the values)."""
    forms = _forms(literals)
    out: list[tuple[tuple[str, str], str]] = []
    con = ro_connect(path)
    try:
        for table, no_rowid in table_list(con):
            cols, pk = _cols(con, table), primary_key(con, table)
            oc = owner_cols.get(table)
            skip = f' WHERE "{oc}" IS NOT ? OR typeof("{oc}") != \'text\'' if oc and user is not None else ""
            rid = f'"{pk}"' if pk else ("-1" if no_rowid else "rowid")
            name = store(table)
            if not _plain_types(con, table, cols):
                out += _python_rows(con, table, no_rowid, cols, pk, owner, user, literals, removed, name, skip)
                continue
            args = [f for _ in cols for f in forms] + ([user] if skip else [])
            cur = con.execute(f'SELECT {rid}, {_sql_text(cols, oc, len(forms))} FROM "{table}"{skip}', args)  # noqa: S608
            out += [((name, str(r[0])), r[1]) for r in cur if (name, str(r[0])) not in removed]
    finally:
        con.close()
    return out


def _python_rows(con: sqlite3.Connection, table: str, no_rowid: bool, cols: list[str], pk: str | None, owner: Owner,
                 user: str | None, literals: Sequence[str], removed: set[tuple[str, str]], name: str,
                 skip: str) -> list[tuple[tuple[str, str], str]]:
    forms = _forms(literals)
    sel = ", ".join(_replaced(c, len(forms)) for c in cols)
    args = [f for _ in cols for f in forms] + ([user] if skip else [])
    order = sorted(range(len(cols)), key=lambda i: cols[i])
    n = len(cols)
    out: list[tuple[tuple[str, str], str]] = []
    cur = con.execute(f'SELECT {"-1" if no_rowid else "rowid"}, *, {sel} FROM "{table}"{skip}', args)  # noqa: S608
    for r in cur:
        values = dict(zip(cols, r[1:1 + n], strict=True))
        rid = str(values[pk]) if pk else str(r[0])
        who = owner(table, values)
        if (name, rid) in removed or (user is not None and who == user):
            continue
        texts = [replace_literals(_text(v), literals) if isinstance(v, float) else _text(v) for v in r[1 + n:]]
        out.append(((name, rid), f"{who}\t" + "\t".join(f"{cols[i]}={texts[i]}" for i in order)))
    return out


_ROWS = 20000
"""Rows hashed at a time by ``table_streams`` (one msgpack array each)."""


def table_streams(path: Path, owner_cols: dict[str, str], user: str | None, literals: Sequence[str],
                  removed: set[tuple[str, str]], store: Callable[[str], str],
                  split: dict[str, dict[str, int]]) -> dict[str, list[tuple[int, str]] | None]:
    """Per table (its store name): [(rows, SHA-256 hex)] of the rows that are not the user's nor in
    ``removed``, in rowid order: each batch of ``_ROWS`` rows' values (every column, in the
    table's order) as one msgpack array, a row that may hold a literal with the literals
    replaced in its strings as the erasure's rewrite replaces them (``_may_hold``); with
    ``split[store][store]`` (a re-run: the rows the interrupted run digested), those first rows
    and the rest apart (rows appended since do not change the first). None for a table without
    a rowid (read per row)."""
    forms = _forms(literals)
    out: dict[str, list[tuple[int, str]] | None] = {}
    con = ro_connect(path)
    try:
        for table, no_rowid in table_list(con):
            name = store(table)
            cols, pk = _cols(con, table), primary_key(con, table)
            oc = owner_cols.get(table)
            if no_rowid or not cols:
                out[name] = None
                continue
            gone = sorted(rid for s, rid in removed if s == name)
            rid = f'"{pk}"' if pk else "rowid"
            skip = f'("{oc}" IS NOT ? OR typeof("{oc}") != \'text\')' if oc and user is not None else ""
            alias = _rowid_alias(con, table)  # its column is the rowid: no rowid selected apart
            drop = _integers(gone) if alias is not None else None
            where = [] if drop is not None else [f"CAST({rid} AS TEXT) NOT IN (SELECT value FROM json_each(?))"]
            cur = con.execute(f'SELECT {"" if alias is not None else "rowid, "}* FROM "{table}" '  # noqa: S608
                              f'{" WHERE " if where or skip else ""}{" AND ".join([*where, *([skip] if skip else [])])}'
                              " ORDER BY rowid", ([] if drop is not None else [json.dumps(gone)]) + ([user] if skip else []))
            rows = _Without(cur, operator.itemgetter(alias), drop) if drop else cur
            out[name] = _hashed(rows, split.get(name, {}).get(name), _may_hold(con, path, table, cols, forms),
                                literals, alias)
    finally:
        con.close()
    return out


def _integers(ids: Sequence[str]) -> set[int]:
    """The integers whose text (SQLite's ``CAST(… AS TEXT)``) is one of ``ids``: the ids an integer
    rowid column can hold (any other text names no row of it)."""
    return {int(i) for i in ids if _INTEGER.fullmatch(i) and str(int(i)) == i}


_INTEGER = re.compile(r"-?[0-9]+")


class _Without:
    """A cursor's rows less those whose ``key`` is in ``drop``, fetched ``fetchmany(size)`` rows
    at a time as a query leaving them out fetches them (``_hashed`` hashes each batch as one
    array: the batches must be the same whether the dropped rows are in the table or gone). In
    Python: SQLite's ``NOT IN`` on every row of a 2·10^6-row table costs 0.4 s of a 2.3 s read."""

    def __init__(self, cur: sqlite3.Cursor, key: Callable[[Any], Any], drop: set[int]) -> None:
        self.cur, self.key, self.drop = cur, key, drop
        self.held: list[Any] = []

    def fetchmany(self, size: int) -> list[Any]:
        while len(self.held) < size:
            rows = self.cur.fetchmany(size)
            if not rows:
                break
            if not self.drop.isdisjoint(map(self.key, rows)):
                rows = [r for r in rows if self.key(r) not in self.drop]
            self.held += rows
        out, self.held = self.held[:size], self.held[size:]
        return out


def _may_hold(con: sqlite3.Connection, path: Path, table: str, cols: list[str], forms: list[str]) -> set[int]:
    """Rowids of the rows whose strings may hold a form: those on the pages holding its bytes and,
    where a page may overflow, the rows long enough to (``_sqlite_pages``); else SQLite's search."""
    if not forms:
        return set()
    hits = leaf_rowids(path, forms)
    if hits is None:
        where, args = _where(cols, forms, None, None)
    else:
        where, args = (long_row(cols, hits.usable) if hits.overflow else "0"), []
    found = {int(r[0]) for r in con.execute(f'SELECT rowid FROM "{table}" WHERE {where}', args)}  # noqa: S608
    return found | (hits.rowids if hits is not None else set())


def _rowid_alias(con: sqlite3.Connection, table: str) -> int | None:
    """The index of the column that is the table's rowid (an ``INTEGER PRIMARY KEY``), if any."""
    info = list(con.execute(f'PRAGMA table_info("{table}")'))
    keys = [i for i, r in enumerate(info) if r[5]]
    return keys[0] if len(keys) == 1 and str(info[keys[0]][2]).upper() == "INTEGER" else None


def _hashed(cur: sqlite3.Cursor | _Without, split: int | None, cand: set[int], literals: Sequence[str],
            alias: int | None) -> list[tuple[int, str]]:
    """The rows of ``cur`` hashed in batches (each row's values; its rowid the column ``alias``,
    else selected first and left out), the first ``split`` apart (a part begun only when a row
    follows); a row in ``cand`` with the literals replaced in its strings."""
    parts: list[tuple[int, str]] = []
    h, n = stream_hash(), 0
    key = operator.itemgetter(0 if alias is None else alias)
    while True:
        size = _ROWS if split is None or parts else min(_ROWS, split - n)
        rows = cur.fetchmany(size or _ROWS)
        if not rows:
            break
        if size == 0:
            parts.append((n, h.hexdigest()))
            h, n = stream_hash(), 0
        body: list[Any] = rows if alias is not None else [r[1:] for r in rows]
        if not cand.isdisjoint(map(key, rows)):
            body = [v if key(r) not in cand else tuple(replace_literals(x, literals) for x in v)
                    for r, v in zip(rows, body, strict=True)]
        h.update(msgspec.msgpack.encode(body))
        n += len(rows)
    return [*parts, (n, h.hexdigest())]
