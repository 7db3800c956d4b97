"""``table_streams``: the chat store's bystander stream digest is the same after an erasure that
removes the user's rows and rewrites the literal where others quote it (in a table whose key is
its rowid and in one whose rowid is apart), changes when a bystander's row changes, and keeps a
re-run's first rows apart from the rows appended since."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from traceless.systems import _llamaindex_chat as chat
from traceless.systems.kernel import replace_literals

LIT = "QX5-OLIVE-9707"
OWNERS = {"by_id": "key", "by_name": "who"}


def _db(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE by_id (id INTEGER PRIMARY KEY, key VARCHAR, data JSON, score REAL, raw BLOB)")
    con.execute("CREATE TABLE by_name (name TEXT PRIMARY KEY, who TEXT, body TEXT)")
    for i in range(1, 120):
        user = f"u{i % 4}"
        text = f"{user} said {LIT}" if i % 9 == 0 else "x" * (i * 7) + ("y" * 6000 if i == 50 else "")
        text = "y" * 6000 + text if i == 54 else text  # the literal on an overflow page
        con.execute("INSERT INTO by_id VALUES (?, ?, ?, ?, ?)", (i, user, text, i / 7 if i % 5 else None,
                                                                  bytes([i]) * 3))
        con.execute("INSERT INTO by_name VALUES (?, ?, ?)", (f"n{i}", user, text))
    con.commit()
    con.close()


def _streams(path: Path, removed: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
             split: dict[str, dict[str, int]] | None = None) -> dict[str, list[tuple[int, str]] | None]:
    return chat.table_streams(path, OWNERS, "u1", [LIT], set(removed), lambda t: t, split or {})


def _erase(path: Path) -> set[tuple[str, str]]:
    """What the erasure does: the user's rows removed, the literal replaced in every string of
    the others' rows quoting it (``SqliteFile``'s rewrite); returns the removed ids."""
    con = sqlite3.connect(path)
    gone = {("by_id", str(r[0])) for r in con.execute("SELECT id FROM by_id WHERE key = 'u1'")}
    gone |= {("by_name", r[0]) for r in con.execute("SELECT name FROM by_name WHERE who = 'u1'")}
    con.execute("DELETE FROM by_id WHERE key = 'u1'")
    con.execute("DELETE FROM by_name WHERE who = 'u1'")
    for table, pk in (("by_id", "id"), ("by_name", "name")):
        cur = con.execute(f"SELECT * FROM {table} WHERE {pk} IN (SELECT {pk} FROM {table})")  # noqa: S608
        cols = [d[0] for d in cur.description]
        for row in cur.fetchall():
            new = [replace_literals(v, [LIT]) for v in row]
            if new != list(row):
                con.execute(f"UPDATE {table} SET {', '.join(f'{c} = ?' for c in cols)} WHERE {pk} = ?",  # noqa: S608
                            (*new, row[cols.index(pk)]))
    con.commit()
    con.execute("VACUUM")
    con.close()
    return gone


def test_the_stream_is_the_same_after_the_erasure(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    _db(path)
    before = _streams(path)
    assert all(v is not None for v in before.values())
    removed = _erase(path)
    assert _streams(path, removed) == before


@pytest.mark.parametrize(("table", "where"), [("by_id", "id = 40"), ("by_name", "name = 'n40'"),
                                              ("by_id", "id = 50")])
def test_a_bystanders_changed_row_changes_the_stream(tmp_path: Path, table: str, where: str) -> None:
    path = tmp_path / "chat.db"
    _db(path)
    before = _streams(path)
    con = sqlite3.connect(path)
    col = "data" if table == "by_id" else "body"
    con.execute(f"UPDATE {table} SET {col} = 'z' || substr({col}, 2) WHERE {where}")  # noqa: S608  same length
    con.commit()
    con.close()
    after = _streams(path)
    assert after[table] != before[table]
    assert all(after[t] == before[t] for t in after if t != table)


def test_a_rerun_keeps_the_first_rows_apart_from_those_appended(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    _db(path)
    first = _streams(path)
    con = sqlite3.connect(path)
    con.execute("INSERT INTO by_id VALUES (500, 'u2', 'new', NULL, NULL)")
    con.commit()
    con.close()
    counts = {t: {t: parts[0][0]} for t, parts in first.items() if parts}
    again = _streams(path, split=counts)
    assert again["by_id"] is not None and again["by_id"][0] == first["by_id"][0]  # type: ignore[index]
    assert again["by_id"][1][0] == 1  # type: ignore[index]  the appended row apart
    assert again["by_name"] == first["by_name"]


def test_rows_the_plan_removes_are_left_out_in_the_batches_a_table_without_them_makes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another user's rows the plan removes (not the requester's) are left out of the digest
    before the erasure (the rowid table: in Python, ``_Without``) in batches of exactly
    ``_ROWS`` rows, as the table digests once they are gone; an id that is no integer's text
    ("05", "x") names no row of an integer key."""
    monkeypatch.setattr(chat, "_ROWS", 7)
    path = tmp_path / "chat.db"
    _db(path)
    con = sqlite3.connect(path)
    planned = [r[0] for r in con.execute("SELECT id FROM by_id WHERE key = 'u2' AND id % 3 = 0")]
    named = [r[0] for r in con.execute("SELECT name FROM by_name WHERE who = 'u2' AND length(name) = 3")]
    con.close()
    assert len(planned) > 5 and len(named) > 5
    removed = {("by_id", str(i)) for i in planned} | {("by_name", n) for n in named}
    before = _streams(path, removed | {("by_id", "05"), ("by_id", "x"), ("by_id", "-1")})
    con = sqlite3.connect(path)
    con.executemany("DELETE FROM by_id WHERE id = ?", [(i,) for i in planned])
    con.executemany("DELETE FROM by_name WHERE name = ?", [(n,) for n in named])
    con.commit()
    con.close()
    assert _streams(path) == before
