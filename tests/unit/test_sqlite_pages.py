"""``_sqlite_pages``: the rows whose bytes may hold a form, found from a SQLite file's pages,
hold every row that does (a text, a blob, one split across overflow pages), as the full
search by SQLite's ``GLOB`` over every row finds them; the chat store's literal search uses it."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from traceless.systems import _llamaindex_chat as chat
from traceless.systems import _sqlite_pages as pages

FORM = "QX5-OLIVE-9707"


def _db(path: Path, rng: random.Random, n: int = 3000) -> set[int]:
    """A table like LlamaIndex's chat store, the form in some rows (texts, blobs, long texts
    that overflow with the form across a page's end), REALs, deleted rows; returns the rowids
    whose values hold the form."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, key VARCHAR, data JSON, extra)")
    con.execute("CREATE INDEX ix ON t (key)")
    holds: set[int] = set()
    for i in range(1, n + 1):
        kind = rng.random()
        data: object = f"note {i} " + "x" * rng.randrange(0, 200)
        extra: object = None
        if kind < 0.004:
            data = f"said {FORM} here"
            holds.add(i)
        elif kind < 0.01:  # long: the form at any place, across an overflow page's end too
            body = bytearray(b"y" * rng.randrange(5000, 20000))
            at = rng.randrange(0, len(body) - len(FORM))
            body[at:at + len(FORM)] = FORM.encode()
            data = body.decode()
            holds.add(i)
        elif kind < 0.014:
            extra = f"{FORM}".encode()
            holds.add(i)
        elif kind < 0.03:
            extra = rng.random()
        con.execute("INSERT INTO t VALUES (?, ?, ?, ?)", (i, f"u{i % 50}", data, extra))
    gone = rng.sample(sorted(holds), 2)
    con.execute(f"DELETE FROM t WHERE id IN ({', '.join('?' * len(gone))})", gone)  # noqa: S608
    con.commit()
    con.close()
    return holds - set(gone)


def _rows(path: Path, where: str, args: list[object]) -> set[int]:
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        return {r[0] for r in con.execute(f"SELECT rowid FROM t WHERE {where}", args)}  # noqa: S608
    finally:
        con.close()


@pytest.mark.parametrize("seed", range(6))
def test_the_pages_hold_every_row_the_full_search_finds(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "chat.db"
    holds = _db(path, random.Random(seed))
    hits = pages.leaf_rowids(path, [FORM])
    assert hits is not None and hits.overflow  # long rows: overflow pages
    con = sqlite3.connect(path)
    paged = _rows(path, *chat._where_paged(con, "t", [FORM], None, None, hits))
    full = _rows(path, *chat._where(chat._cols(con, "t"), [FORM], None, None))
    con.close()
    assert holds <= full  # the GLOB search, every row by SQLite
    assert holds <= paged
    assert len(paged) < 3000 // 3  # not every row: the pages narrow it


def test_a_file_of_short_rows_has_no_overflow_and_reads_only_its_pages(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, key VARCHAR, data VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, "u1", f"n {i}" if i != 700 else FORM) for i in range(1, 2001)])
    con.commit()
    hits = pages.leaf_rowids(path, [FORM])
    assert hits is not None and not hits.overflow and 700 in hits.rowids and len(hits.rowids) < 600
    paged = _rows(path, *chat._where_paged(con, "t", [FORM], None, None, hits))
    con.close()
    assert paged == hits.rowids & set(range(1, 2001))


def test_a_wal_beside_the_file_reads_every_row(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, data VARCHAR)")
    con.execute("INSERT INTO t VALUES (1, ?)", (FORM,))
    con.commit()
    assert (tmp_path / "chat.db-wal").exists()
    assert pages.leaf_rowids(path, [FORM]) is None  # the newest pages are in the WAL
    con.close()


@pytest.mark.parametrize(("declared", "text"), [("VARCHAR", True), ("TEXT", True), ("NCHAR(5)", True),
                                                ("CHARINT", False), ("JSON", False), ("", False), ("REAL", False)])
def test_text_affinity_follows_sqlites_rules(declared: str, text: bool) -> None:
    assert pages.text_affinity(declared) is text


def test_freed_pages_are_no_overflow_but_an_overflow_page_is(tmp_path: Path) -> None:
    """A deletion's freed pages (zeroed by ``secure_delete``) leave the file without overflow;
    a row long enough to overflow makes one; a freelist that does not read whole counts as one."""
    path = tmp_path / "chat.db"
    con = sqlite3.connect(path)
    con.execute("PRAGMA secure_delete = ON")
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, data VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"n {i} " * 20) for i in range(1, 3001)])
    con.commit()
    con.execute("DELETE FROM t WHERE id > 1000")
    con.commit()
    data = path.read_bytes()
    assert int.from_bytes(data[36:40], "big") > 0  # free pages
    hits = pages.leaf_rowids(path, ["n 7 "])
    assert hits is not None and not hits.overflow
    broken = bytearray(data)
    broken[36:40] = (int.from_bytes(data[36:40], "big") + 1).to_bytes(4, "big")  # a wrong count
    path.write_bytes(bytes(broken))
    assert pages.leaf_rowids(path, ["n 7 "]).overflow  # type: ignore[union-attr]
    path.write_bytes(data)
    con.execute("INSERT INTO t VALUES (5000, ?)", ("y" * 9000,))
    con.commit()
    con.close()
    assert pages.leaf_rowids(path, ["n 7 "]).overflow  # type: ignore[union-attr]


@pytest.mark.parametrize("pages_per_chunk", [1, 3, 16])
def test_the_file_read_in_chunks_finds_the_same_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     pages_per_chunk: int) -> None:
    """A chunk of whole pages at a time (a database larger than memory) finds what one read finds."""
    path = tmp_path / "chat.db"
    _db(path, random.Random(7))
    whole = pages._leaf_rowids(path, [FORM])
    monkeypatch.setattr(pages, "_CHUNK", 4096 * pages_per_chunk)
    assert whole is not None and whole.rowids
    assert pages._leaf_rowids(path, [FORM]) == whole
