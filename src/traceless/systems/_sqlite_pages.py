"""The rows of a SQLite file whose bytes may hold a pattern, found from the file's bytes: one
search of the whole file for every pattern at once (``traceless.forget.occurrences``, the
byte scan's matcher), then the rowids of the cells on each table leaf page that holds a
match. A row's record lies whole in one page unless it overflows, so every row holding a
pattern's bytes is on such a page, or is a row long enough to overflow (``long_row``: the
caller searches those in SQL). A page that is no table leaf (an index, a freed page, an
overflow page) adds nothing: a live row holding the bytes is on a leaf too, or is long.

Used where the file alone is the database: no ``-wal`` file (its frames would be newer than
the file's pages), text stored as UTF-8. Anything else: None, the caller searches every row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from traceless.forget import occurrences

__all__ = ["PageHits", "clear_kept", "file_stamp", "leaf_rowids", "long_row", "text_affinity"]

_HEADER = b"SQLite format 3\x00"
_TABLE_LEAF = 0x0D
_UTF8 = 1


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, position after) of the SQLite varint at ``pos``."""
    value = 0
    for k in range(9):
        b = data[pos + k]
        if k == 8:
            return (value << 8) | b, pos + 9
        value = (value << 7) | (b & 0x7F)
        if b < 0x80:
            return value, pos + k + 1
    raise AssertionError("unreachable")


def _cells(page: bytes, number: int, size: int) -> list[int]:
    """The rowids of a table leaf page's cells (``page``: its bytes; ``number``: 0-based), none
    for another page or one that does not parse."""
    head = 100 if number == 0 else 0
    if head + 8 > len(page) or page[head] != _TABLE_LEAF:
        return []
    out: list[int] = []
    try:
        for k in range(int.from_bytes(page[head + 3:head + 5], "big")):
            ptr = int.from_bytes(page[head + 8 + 2 * k:head + 10 + 2 * k], "big")
            if not 0 < ptr < size:
                return out
            _, pos = _varint(page, ptr)  # the payload's size
            rowid, _ = _varint(page, pos)
            out.append(rowid - (1 << 64) if rowid >= 1 << 63 else rowid)
    except IndexError:  # a freed page's stale bytes: its rowids are only more rows to read
        return out
    return out


@dataclass(frozen=True)
class PageHits:
    """What a SQLite file's pages say of the rows that may hold some bytes."""

    rowids: set[int]
    """The rowids of the cells on the table leaf pages holding the bytes."""
    overflow: bool
    """Some page may be an overflow page: a row long enough to overflow (``long_row``) may hold
    the bytes split across pages. False only where every page is a b-tree page (each page's
    first byte a b-tree page type; an overflow page's is the high byte of the next page's
    number, 0 in a file of fewer than 2^24 pages)."""
    usable: int
    """A page's usable bytes (``long_row``'s bound)."""


_BTREE = frozenset({0x02, 0x05, 0x0A, 0x0D})


_LAST: dict[tuple[Path, tuple[str, ...]], tuple[tuple[int, int, int, bytes], PageHits | None]] = {}
"""The last answer per file and forms, kept while the file's size, mtime, inode and SQLite's
file change counter stay the same (an erasure asks for the same forms before and after each
step; every write transaction outside WAL mode increments the counter)."""


def file_stamp(path: Path) -> tuple[int, int, int, bytes] | None:
    """The file's size, mtime, inode and SQLite's file change counter (every write transaction
    outside WAL mode increments it): what an answer kept for the file is kept by. None while a
    ``-wal`` file is beside it (its frames change without the file changing)."""
    if path.with_name(path.name + "-wal").exists():
        return None
    st = path.stat()
    with open(path, "rb") as f:
        head = f.read(100)
    return st.st_size, st.st_mtime_ns, st.st_ino, head[24:28] + head[92:96]


def clear_kept() -> None:
    """Forget the answers kept (``leaf_rowids``): the next read of a file reads it again."""
    _LAST.clear()


def leaf_rowids(path: Path, forms: Sequence[str]) -> PageHits | None:
    """``_leaf_rowids``, kept (the last file and forms only) while the file is unchanged."""
    stamp = file_stamp(path)
    if stamp is None:
        return None  # a -wal file: the file is not the whole database
    key = (path, tuple(forms))
    got = _LAST.get(key)
    if got is None or got[0] != stamp:
        _LAST.clear()
        got = _LAST[key] = (stamp, _leaf_rowids(path, forms))
    return got[1]


_CHUNK = 1 << 26
"""Bytes read and searched at a time (a multiple of every page size: a chunk holds whole pages,
and a copy across a chunk's end spans two pages, so no cell holds it)."""


def _leaf_rowids(path: Path, forms: Sequence[str]) -> PageHits | None:
    """The rows on the table leaf pages holding a form's UTF-8 bytes (any table's: a caller
    reads them back by rowid, a rowid of another table only one more row read), or None where
    the file is not the whole database (a ``-wal`` file beside it) or stores text other than
    as UTF-8. The file is read in chunks of whole pages (a database larger than memory too)."""
    if path.with_name(path.name + "-wal").exists():
        return None
    needles = [f.encode("utf-8") for f in forms if f]
    with open(path, "rb") as fh:
        head = fh.read(101)
        if len(head) < 101 or head[:16] != _HEADER or int.from_bytes(head[56:60], "big") not in (0, _UTF8):
            return None
        size = int.from_bytes(head[16:18], "big")
        size = 65536 if size == 1 else size
        fh.seek(0)
        firsts, rowids, at = bytearray(), set(), 0
        while chunk := fh.read(_CHUNK):
            firsts += chunk[0::size]
            for page in {k // size for k in occurrences(chunk, needles)}:
                rowids.update(_cells(chunk[page * size:(page + 1) * size], at // size + page, size))
            at += len(chunk)
        return PageHits(rowids, _may_overflow(bytes(firsts), head, size, fh), size - head[20])


def _may_overflow(firsts: bytes, head: bytes, size: int, fh: BinaryIO) -> bool:
    """Some page that is not free may be an overflow page: its first byte (``firsts``: every
    page's; page 1's type at byte 100 of ``head``) is no b-tree page type (an overflow page's
    first byte is the high byte of the next page's number: 0 in a file of fewer than 2^24
    pages). The freelist's pages (a deletion's, zeroed by ``secure_delete``) are left out; a
    freelist that does not read whole counts as a possible overflow."""
    pages = len(firsts)
    if pages >= 1 << 24 or head[100] not in _BTREE:
        return True
    if set(firsts[1:]) <= _BTREE:
        return False
    odd = {k for k in range(1, pages) if firsts[k] not in _BTREE}
    free = _free_pages(head, size, pages, fh)
    return free is None or not odd <= free


def _free_pages(head: bytes, size: int, pages: int, fh: BinaryIO) -> set[int] | None:
    """The 0-based indexes of the freelist's trunk and leaf pages (file header bytes 32-39), or
    None where the list does not read whole (a page out of the file, a loop, a wrong count)."""
    trunk, total = int.from_bytes(head[32:36], "big"), int.from_bytes(head[36:40], "big")
    out: set[int] = set()
    while trunk:
        if not 0 < trunk <= pages or trunk - 1 in out:
            return None
        fh.seek((trunk - 1) * size)
        page = fh.read(size)
        out.add(trunk - 1)
        n = int.from_bytes(page[4:8], "big")
        if n > (size - 8) // 4:
            return None
        for k in range(n):
            leaf = int.from_bytes(page[8 + 4 * k:12 + 4 * k], "big")
            if not 0 < leaf <= pages:
                return None
            out.add(leaf - 1)
        trunk = int.from_bytes(page[:4], "big")
    return out if len(out) == total else None


def text_affinity(declared: str) -> bool:
    """A column SQLite gives TEXT affinity (its declared type): it holds no number, a number
    written to it is stored as its text (SQLite's "Determination Of Column Affinity")."""
    t = declared.upper()
    return "INT" not in t and any(k in t for k in ("CHAR", "CLOB", "TEXT"))


def long_row(cols: Sequence[str], usable: int) -> str:
    """A SQL condition true for every row whose record may overflow its page (SQLite keeps a
    record of at most ``usable - 35`` bytes whole in its leaf): the values' bytes plus the most
    a record header and a number can take."""
    size = " + ".join(f"(CASE WHEN typeof(\"{c}\") IN ('text', 'blob') THEN length(CAST(\"{c}\" AS BLOB)) ELSE 9 END)"
                      for c in cols) or "0"
    return f"({size} + {9 * (len(cols) + 1)} > {usable - 35})"
